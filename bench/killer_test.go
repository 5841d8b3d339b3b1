package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/node"
)

// fakeKiller records kills and restarts; it can fail a restart.
type fakeKiller struct {
	n           int
	mu          sync.Mutex
	events      []string
	down        map[int]bool
	failRestart int // fail the restart after this many kills (0: never)
	kills       int
	log         *FaultLog
}

func (f *fakeKiller) Size() int                        { return f.n }
func (f *fakeKiller) Log() *FaultLog                   { return f.log }
func (f *fakeKiller) WaitUp(ctx context.Context) error { return nil }

func (f *fakeKiller) Kill(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[i] {
		return fmt.Errorf("node %d killed while down", i)
	}
	f.down[i] = true
	f.kills++
	f.events = append(f.events, fmt.Sprintf("kill %d", i))
	return nil
}

func (f *fakeKiller) Restart(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRestart > 0 && f.kills >= f.failRestart {
		return fmt.Errorf("node %d does not start", i)
	}
	delete(f.down, i)
	f.events = append(f.events, fmt.Sprintf("restart %d", i))
	return nil
}

// TestKillLoopSchedule: the kill loop kills the seeded node draws of the
// embedded ring, one at a time, and restarts every node it killed before
// it returns, even when the run stops while the node is down.
func TestKillLoopSchedule(t *testing.T) {
	const seed = 11
	f := &fakeKiller{n: 3, down: map[int]bool{}, log: NewFaultLog()}
	var stop atomic.Bool
	stopped := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.kills >= 6 {
			stop.Store(true) // the run ends while the 6th node is down (or just after)
		}
		return stop.Load()
	}
	err := killLoop(context.Background(), f, pickNode(f, seed), time.Millisecond, 50*time.Millisecond, stopped)
	if err != nil {
		t.Fatal(err)
	}
	// The embedded ring's draws with the same seed.
	c := &Cluster{rng: rand.New(rand.NewPCG(seed, saltNode)), confs: make([]node.Config, 3)}
	var want []string
	for range 6 {
		i := c.randomNode()
		want = append(want, fmt.Sprintf("kill %d", i), fmt.Sprintf("restart %d", i))
	}
	if got := strings.Join(f.events, ", "); got != strings.Join(want, ", ") {
		t.Fatalf("events:\n got %s\nwant %s", got, strings.Join(want, ", "))
	}
	if len(f.down) != 0 {
		t.Fatalf("nodes left down: %v", f.down)
	}
}

// TestKillLoopRestartFails: a node that does not come back ends the loop
// with the error.
func TestKillLoopRestartFails(t *testing.T) {
	f := &fakeKiller{n: 3, down: map[int]bool{}, failRestart: 2, log: NewFaultLog()}
	done := make(chan error, 1)
	go func() {
		done <- killLoop(context.Background(), f, pickNode(f, 1), time.Millisecond, time.Millisecond, func() bool { return false })
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "does not start") {
			t.Fatalf("err = %v, want the failed restart", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop went on after a failed restart")
	}
	if f.kills != 2 {
		t.Fatalf("%d kills, want 2", f.kills)
	}
}

// TestProcessRingOpen: --ring-dir reads the nodes' CQL addresses and
// commit log mode from the ring's node.yaml files, and a kill of a node
// that is not running is an error (the benchmark must not count it).
func TestProcessRingOpen(t *testing.T) {
	dir := t.TempDir()
	for i := 1; i <= 3; i++ {
		c := node.Config{DataDirectory: filepath.Join(dir, fmt.Sprintf("node%d", i), "data"), ListenAddress: fmt.Sprintf("127.0.0.%d", i), CommitLogSync: "batch"}
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("node%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.Write(filepath.Join(dir, fmt.Sprintf("node%d", i), "node.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	p, err := OpenProcessRing(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := p.Hosts()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(hosts, ","); got != "127.0.0.1:9042,127.0.0.2:9042,127.0.0.3:9042" {
		t.Fatalf("hosts %s", got)
	}
	if m := p.CommitLogSync(); m != "batch" {
		t.Fatalf("commit log sync %q, want batch", m)
	}
	if err := p.Kill(2); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("kill of a stopped node: err = %v", err)
	}
	if _, err := OpenProcessRing(t.TempDir(), 1); err == nil {
		t.Fatal("a directory without a ring opened")
	}
}

// TestKillEveryNeedsARing: on --hosts alone there is nothing to kill.
func TestKillEveryNeedsARing(t *testing.T) {
	var out, errb bytes.Buffer
	err := Command("overcount", []string{"--hosts", "127.0.0.1", "--kill-every", "1s", "--ops", "1"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--ring-dir") {
		t.Fatalf("err = %v, want it to name --ring-dir", err)
	}
	err = Command("overcount", []string{"--ring-dir", t.TempDir(), "--kill-every", "1s", "--ops", "1"}, &out, &errb)
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("an empty --ring-dir: err = %v", err)
	}
}
