package node

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coordinator"
)

// TestRestartWithoutSeedKeepsQuorum: node 1 is the only seed. With it down,
// nodes 2 and 3 restart; they must find each other through their persisted
// peers, so that QUORUM writes (2 of 3 replicas) through node 2 succeed
// before the seed returns. Without persisted peers each restarted node
// knows only itself and the writes are unavailable.
func TestRestartWithoutSeedKeepsQuorum(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	if err := c.write(2, "k", 1, coordinator.Quorum); err != nil {
		t.Fatalf("QUORUM write with every node up: %v", err)
	}
	c.stop(1)
	c.stop(2)
	c.stop(3)
	c.start(2)
	c.start(3)
	// Writes are retried while the restarted nodes find each other through
	// gossip; without persisted peers they never do.
	var err error
	ok := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && ok < 5; time.Sleep(20 * time.Millisecond) {
		if err = c.write(2, fmt.Sprintf("k%d", ok), 1, coordinator.Quorum); err == nil {
			ok++
		}
	}
	if ok < 5 {
		t.Fatalf("QUORUM writes through node 2 with the seed down: %d succeeded, last error: %v", ok, err)
	}
	if v, err := c.read(3, "k", coordinator.Quorum); err != nil || v != 1 {
		t.Fatalf("QUORUM read through node 3 with the seed down: %d, %v; want 1", v, err)
	}
	c.start(1)
	c.waitUp(3)
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPeersFileWrittenAndBadFileWarns: every node's peers file lists the
// two others; a node restarted over a corrupt file starts, warns, keeps the
// bad bytes aside, and gossip writes a good file again.
func TestPeersFileWrittenAndBadFileWarns(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	readPeers := func(i int) ([]peerRecord, error) {
		b, err := os.ReadFile(filepath.Join(c.cfgs[i-1].DataDirectory, PeersFile))
		if err != nil {
			return nil, err
		}
		return decodePeers(b)
	}
	for i := 1; i <= 3; i++ {
		c.waitFor(fmt.Sprintf("node %d's peers file to list 2 peers", i), func() bool {
			rs, err := readPeers(i)
			return err == nil && len(rs) == 2
		})
	}
	c.stop(2)
	garbage := []byte(`{"version": 1, "peers": [{"host_id": "zz"`)
	p := filepath.Join(c.cfgs[1].DataDirectory, PeersFile)
	if err := os.WriteFile(p, garbage, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nd, err := Start(c.cfgs[1], Options{Listen: c.net.Listen, Logger: logger, Seed: c.seed + 2})
	if err != nil {
		t.Fatalf("start over a corrupt peers file: %v", err)
	}
	c.nodes[1] = nd
	if !strings.Contains(logs.String(), "ignoring the persisted peers file") {
		t.Fatalf("no warning about the corrupt peers file; logs:\n%s", logs.String())
	}
	if b, err := os.ReadFile(p + ".bad"); err != nil || !bytes.Equal(b, garbage) {
		t.Fatalf("corrupt file not kept aside: %q, %v", b, err)
	}
	c.waitUp(3)
	c.waitFor("node 2's peers file rewritten", func() bool {
		rs, err := readPeers(2)
		return err == nil && len(rs) == 2
	})
}
