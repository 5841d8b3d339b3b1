package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestParseProcStatCPU: utime + stime are fields 14 and 15 of
// /proc/PID/stat, counted after a command name that may hold spaces and
// parentheses; a line without them is an error.
func TestParseProcStatCPU(t *testing.T) {
	line := "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 123 0 0 0 250 75 0 0 20 0 180 0 100 0 0\n"
	got, err := parseProcStatCPU(line)
	if err != nil || got != 3250*time.Millisecond {
		t.Fatalf("parse: %v, %v; want 3.25s (325 ticks)", got, err)
	}
	for _, bad := range []string{"", "4242 java S 1", "4242 (java) S 1 2 3", "4242 (j) S 1 4242 4242 0 -1 4194560 123 0 0 0 x 75 0"} {
		if _, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := processCPUTime(os.Getpid()); err != nil {
		t.Fatalf("this process: %v", err)
	}
}

// TestRunReportsServerCPU: a target naming its server processes gets their
// CPU time per acknowledged op in the report and its table (here the
// embedded ring's, which is this process); one whose processes cannot be
// read fails before the load instead of printing a wrong figure.
func TestRunReportsServerCPU(t *testing.T) {
	seed := testseed.Seed(t)
	c := startTestCluster(t, 1, seed)
	cfg := Config{Name: "latency", Ops: 300, Clients: 4, Seed: seed, RF: 1,
		Workload: Workload{Keys: 20, Batch: 1, DeltaMax: 1}, Timeout: 2 * time.Second}
	self := func() ([]int, error) { return []int{os.Getpid()}, nil }
	rep, err := Run(context.Background(), Target{Cluster: c, ServerPids: self}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.ServerCPU) != 1 {
		t.Fatalf("server CPU %+v, want one entry", rep.ServerCPU)
	}
	sc := rep.ServerCPU[0]
	var ops int64
	for _, m := range rep.Modes {
		ops += m.Ops
	}
	if sc.Target != "idemkv" || sc.Processes != 1 || sc.Ops != ops || ops == 0 || sc.CPUS < 0 ||
		(sc.CPUS > 0) != (sc.PerOpUS > 0) {
		t.Fatalf("server CPU %+v; want idemkv, 1 process, %d ops", sc, ops)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "servers' CPU per acknowledged op: idemkv") {
		t.Fatalf("table lacks the servers' CPU:\n%s", buf.String())
	}
	if sc.ClientCPUS != 0 || sc.ClientPerOpUS != 0 {
		t.Fatalf("server CPU %+v: a client CPU although the server is this process", sc)
	}
	// A server in another process (here one that does nothing): this
	// process's CPU is the clients'.
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	elsewhere := func() ([]int, error) { return []int{other.Process.Pid}, nil }
	cfg.Ops = 2000
	rep, err = Run(context.Background(), Target{Cluster: c, ServerPids: elsewhere}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc = rep.ServerCPU[0]
	if sc.ClientCPUS <= 0 || sc.ClientPerOpUS <= 0 || sc.ClientPerOpUS*float64(sc.Ops) < sc.ClientCPUS*1e6*0.99 {
		t.Fatalf("server CPU %+v: want this process's CPU as the clients', per op", sc)
	}
	buf.Reset()
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "clients' CPU per acknowledged op (this process, same cores): idemkv") {
		t.Fatalf("table lacks the clients' CPU:\n%s", buf.String())
	}
	gone := func() ([]int, error) { return nil, errors.New("no ring") }
	if _, err := Run(context.Background(), Target{Cluster: c, ServerPids: gone}, cfg); err == nil || !strings.Contains(err.Error(), "server CPU") {
		t.Fatalf("unreadable server processes: %v; want an error naming the server CPU", err)
	}
}
