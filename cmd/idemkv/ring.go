package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/idemkv/idemkv/localring"
)

func init() {
	register("ring", "run a local ring of node processes on 127.0.0.i (up, status, stop, kill I, start I)", runRing)
}

func defaultRingDir() string {
	if d := os.Getenv("IDEMKV_RING_DIR"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".idemkv", "ring")
	}
	return filepath.Join(os.TempDir(), "idemkv-ring")
}

func runRing(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: idemkv ring up|status|stop|kill I|start I [--dir D]")
		return flag.ErrHelp
	}
	verb := args[0]
	fs := flag.NewFlagSet("ring "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", defaultRingDir(), "the ring's directory (env IDEMKV_RING_DIR)")
	n := fs.Int("n", 3, "up: number of nodes")
	tokens := fs.Int("num-tokens", 16, "up: vnodes per node")
	syncMode := fs.String("commitlog-sync", "periodic", "up: periodic, batch or group")
	leader := fs.String("counter-leader", "", "up: counter leader rule of every table without its own, random (Cassandra's) or first (default: random, and first for FBF tables)")
	wait := fs.Duration("wait", 60*time.Second, "up, start: how long to wait for the ring to be up")
	rest := args[1:]
	var index int
	if verb == "kill" || verb == "start" {
		if len(rest) == 0 {
			return fmt.Errorf("ring %s: which node? (idemkv ring %s I)", verb, verb)
		}
		i, err := strconv.Atoi(rest[0])
		if err != nil || i < 1 {
			return fmt.Errorf("ring %s: %q is not a node number", verb, rest[0])
		}
		index, rest = i, rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	r := localring.Ring{Dir: *dir}
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	switch verb {
	case "up":
		if err := r.Up(ctx, localring.UpOptions{Nodes: *n, NumTokens: *tokens, CommitLogSync: *syncMode, CounterLeader: *leader}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "ring of %d nodes up in %s\n", *n, *dir)
		return printStatus(ctx, stdout, r)
	case "status":
		return printStatus(ctx, stdout, r)
	case "stop":
		return r.Stop(10 * time.Second)
	case "kill":
		return r.Kill(index)
	case "start":
		if err := r.Start(index); err != nil {
			return err
		}
		return r.WaitUp(ctx)
	}
	return fmt.Errorf("ring: unknown verb %q (up, status, stop, kill, start)", verb)
}

// printStatus shows each node as the first answering node sees it, with
// each process's own state.
func printStatus(ctx context.Context, w io.Writer, r localring.Ring) error {
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	byAddr := map[string]localring.NodeStatus{}
	var view []localring.NodeStatus
	for _, s := range st {
		byAddr[s.Addr] = s
		if s.View != nil && len(view) == 0 {
			view = append(view, s)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "node\taddress\tpid\tprocess\tstate\tstatus\ttokens\tload\towns\thost id")
	for _, s := range st {
		state, status, ntok, load, owns, host := "?", "?", "-", "-", "-", "-"
		proc := "stopped"
		if s.Running {
			proc = "running"
		}
		if len(view) > 0 {
			for _, p := range view[0].View {
				if p.Addr == s.Addr {
					state = map[bool]string{true: "UP", false: "DOWN"}[p.Up]
					status, ntok, load = p.Status, strconv.Itoa(len(p.Tokens)), fmt.Sprintf("%.1f KiB", float64(p.Load)/1024)
					owns, host = fmt.Sprintf("%.1f%%", p.Owns*100), p.HostID
				}
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Node, s.Addr, s.PID, proc, state, status, ntok, load, owns, host)
	}
	if len(view) > 0 {
		fmt.Fprintf(tw, "(state as seen by node %d)\n", view[0].Node)
	}
	return tw.Flush()
}
