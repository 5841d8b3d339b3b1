package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// startAttackProcess runs the storm's attackers in a process of their own
// ('idemkv bench storm --attack-only ADDR'), so that their goroutines do
// not share the measured client's Go scheduler; closing its standard input
// stops them, and it writes its counts to its standard output as JSON. The
// returned function stops it and returns the counts.
func startAttackProcess(bin, addr string, cfg StormConfig) (func() (StormAttack, error), error) {
	args := []string{bin, "bench", "storm", "--attack-only", addr,
		"--conns", strconv.Itoa(cfg.Conns), "--churners", strconv.Itoa(cfg.Churners),
		"--pipeline", strconv.Itoa(cfg.Pipeline), "--oversized", strconv.Itoa(cfg.Oversized)}
	if cfg.AttackNice != 0 {
		// nice(1) before the process starts: Linux's nice value is per
		// thread, inherited by the threads a thread makes, so setting it
		// afterwards would miss the Go runtime's first threads.
		nice, err := exec.LookPath("nice")
		if err != nil {
			return nil, fmt.Errorf("bench: storm: --attack-nice: %w", err)
		}
		args = append([]string{nice, "-n", strconv.Itoa(cfg.AttackNice)}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: storm: attackers: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: storm: attackers: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: storm: start attackers: %w", err)
	}

	return func() (StormAttack, error) {
		in.Close()
		var a StormAttack
		derr := json.NewDecoder(out).Decode(&a)
		werr := cmd.Wait()
		if derr != nil {
			return a, fmt.Errorf("bench: storm: attackers' counts: %w (exit: %v)", derr, werr)
		}
		if werr != nil {
			return a, fmt.Errorf("bench: storm: attackers: %w", werr)
		}
		return a, nil
	}, nil
}

// runAttackOnly is the attackers' process: it attacks addr until its
// standard input closes, then writes the counts as JSON to stdout.
func runAttackOnly(addr string, cfg StormConfig, stdin io.Reader, stdout io.Writer) error {
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	counts := startAttack(ctx, &wg, addr, cfg)
	io.Copy(io.Discard, stdin)
	stop()
	wg.Wait()
	if err := json.NewEncoder(stdout).Encode(counts()); err != nil {
		return fmt.Errorf("bench: storm: %w", err)
	}
	return nil
}
