package localring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/node"
)

// freePorts returns a port p such that p and p+1 are free on 127.0.0.1 to
// 127.0.0.n (the storage and CQL ports of a local ring).
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+1 > 65535 {
			continue
		}
		free := true
		for i := 1; i <= n && free; i++ {
			for _, q := range []int{p, p + 1} {
				l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", Address(i), q))
				if err != nil {
					free = false
					break
				}
				l.Close()
			}
		}
		if free {
			return p
		}
	}
	t.Fatal("no free pair of ports")
	return 0
}

func fastNodes(port int) func(i int, c *node.Config) {
	return func(i int, c *node.Config) {
		c.StoragePort = port
		c.NativeTransportPort = port + 1
		c.Seeds = []string{fmt.Sprintf("127.0.0.1:%d", port)}
		c.GossipIntervalMS = 100
	}
}

// runningCopies lists the pids of live processes running the binary bin.
func runningCopies(t *testing.T, bin string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []string
	for _, e := range ents {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && exe == bin {
			out = append(out, e.Name())
		}
	}
	return out
}

func wantWhat(t *testing.T, step string, got Result, node int, what string) {
	t.Helper()
	if got.Node != node || got.What != what {
		t.Fatalf("%s: got %q, want node %d %s", step, got, node, what)
	}
	if (what == DidStart || what == DidAlreadyRunning || what == DidKill || what == DidStop) && got.PID <= 0 {
		t.Fatalf("%s: %q has no pid", step, got)
	}
}

// TestUpFailureLeavesNothingRunning starts a ring whose node 2 cannot bind
// its storage port: Up fails naming node 2 with its log, and no process of
// the ring is left running.
func TestUpFailureLeavesNothingRunning(t *testing.T) {
	bin := buildBinary(t)
	port := freePorts(t, 3)
	hold, err := net.Listen("tcp", fmt.Sprintf("%s:%d", Address(2), port))
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	r := Ring{Dir: filepath.Join(t.TempDir(), "ring"), Binary: bin}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Up(ctx, UpOptions{Nodes: 3, NumTokens: 4, Extra: fastNodes(port)})
	t.Cleanup(func() { r.Stop(time.Second) })
	if err == nil {
		t.Fatal("Up succeeded with node 2's port taken")
	}
	t.Logf("Up: %v", err)
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Node != 2 {
		t.Fatalf("Up's error does not name node 2: %v", err)
	}
	// What the node logs about the taken port is the node's business;
	// that it is shown is this package's.
	if strings.TrimSpace(ne.LogTail) == "" {
		t.Error("the error shows nothing of node 2's log")
	}
	if left := runningCopies(t, bin); len(left) > 0 {
		t.Errorf("processes left running after a failed up: %v", left)
	}
	if ns, err := r.Nodes(); err == nil {
		t.Errorf("the failed up left nodes %v in %s", ns, r.Dir)
	}
}

// TestRingLifeCycle runs start, stop, kill and restart of all nodes and of
// one, twice each: the second time is no error, and a node's start neither
// waits for nor reports another node that cannot start.
func TestRingLifeCycle(t *testing.T) {
	bin := buildBinary(t)
	port := freePorts(t, 2)
	r := Ring{Dir: filepath.Join(t.TempDir(), "ring"), Binary: bin}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := r.Up(ctx, UpOptions{Nodes: 2, NumTokens: 4, Extra: fastNodes(port)})
	t.Cleanup(func() {
		if _, err := r.Stop(5 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	const grace = 10 * time.Second
	if pids, err := r.Pids(); err != nil || len(pids) != 2 || pids[0] == pids[1] || pids[0] <= 0 {
		t.Fatalf("pids of a running 2-node ring: %v, %v", pids, err)
	}

	res, err := r.StartAll(ctx)
	if err != nil || len(res) != 2 {
		t.Fatalf("start of a running ring: %v, %v", res, err)
	}
	wantWhat(t, "start all, running", res[0], 1, DidAlreadyRunning)
	wantWhat(t, "start all, running", res[1], 2, DidAlreadyRunning)
	one, err := r.StartNode(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantWhat(t, "start 1, running", one, 1, DidAlreadyRunning)
	if _, err := r.StartNode(ctx, 5); err == nil {
		t.Fatal("start of node 5 of a 2-node ring succeeded")
	}

	for round, want := range []string{DidStop, DidNotRunning} {
		res, err := r.Stop(grace)
		if err != nil || len(res) != 2 {
			t.Fatalf("stop %d: %v, %v", round, res, err)
		}
		for k, x := range res {
			if want == DidStop && x.What == DidKillAfterGrace {
				continue
			}
			wantWhat(t, fmt.Sprintf("stop %d", round), x, k+1, want)
		}
	}
	if pids, err := r.Pids(); err == nil {
		t.Fatalf("pids of a stopped ring: %v, no error", pids)
	}
	one, err = r.Kill(1)
	if err != nil {
		t.Fatal(err)
	}
	wantWhat(t, "kill 1, stopped", one, 1, DidNotRunning)

	// Node 1 (the seed) cannot start while its port is taken; node 2
	// starts alone all the same, and says nothing of node 1.
	hold, err := net.Listen("tcp", fmt.Sprintf("%s:%d", Address(1), port))
	if err != nil {
		t.Fatal(err)
	}
	one, err = r.StartNode(ctx, 2)
	if err != nil {
		hold.Close()
		t.Fatalf("start 2 with node 1 down: %v", err)
	}
	wantWhat(t, "start 2 alone", one, 2, DidStart)
	res, err = r.StartAll(ctx)
	hold.Close()
	var ne *NodeError
	if err == nil || !errors.As(err, &ne) || ne.Node != 1 {
		t.Fatalf("start all with node 1's port taken: want node 1's failure, got %v", err)
	}
	if len(res) != 1 {
		t.Fatalf("start all with node 1's port taken: results %v", res)
	}
	wantWhat(t, "start all, node 1 failing", res[0], 2, DidAlreadyRunning)
	one, err = r.StartNode(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantWhat(t, "start 1", one, 1, DidStart)
	if err := r.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}

	one, err = r.Kill(2)
	if err != nil {
		t.Fatal(err)
	}
	wantWhat(t, "kill 2", one, 2, DidKill)
	one, err = r.Kill(2)
	if err != nil {
		t.Fatal(err)
	}
	wantWhat(t, "kill 2 again", one, 2, DidNotRunning)

	res, err = r.Restart(ctx, 2, grace)
	if err != nil || len(res) != 2 {
		t.Fatalf("restart 2: %v, %v", res, err)
	}
	wantWhat(t, "restart 2, stop", res[0], 2, DidNotRunning)
	wantWhat(t, "restart 2, start", res[1], 2, DidStart)

	res, err = r.Restart(ctx, 0, grace)
	if err != nil || len(res) != 4 {
		t.Fatalf("restart all: %v, %v", res, err)
	}
	wantWhat(t, "restart all, start", res[2], 1, DidStart)
	wantWhat(t, "restart all, start", res[3], 2, DidStart)
	if err := r.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
}
