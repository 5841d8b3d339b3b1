package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/transport"
)

// fbfWithMutationsBlocked creates the counter and FBF tables and loses
// every replication message (TypeMutation request) while the returned flag
// is set; it starts set.
func (c *testCluster) fbfWithMutationsBlocked() *atomic.Bool {
	c.t.Helper()
	c.createTable(3)
	c.createFBFTable()
	block := new(atomic.Bool)
	block.Store(true)
	c.net.OnDeliver(func(from, to transport.Addr, m transport.Message, isResponse bool) bool {
		return block.Load() && !isResponse && m.Type == coordinator.TypeMutation
	})
	return block
}

// writeOpAt is writeOp at a chosen consistency level, with the client id 1.
func (c *testCluster) writeOpAt(via int, key string, delta int64, seq uint64, cl coordinator.ConsistencyLevel) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := coltype.Update{Table: 43, Key: []byte(key), Column: "c", Delta: delta, HasOp: true, OpTime: time.Now().UnixNano()}
	u.OpID[7], u.OpID[15] = 1, byte(seq)
	return c.node(via).Coordinator().CounterWrite(ctx, u, cl)
}

// TestFBFDismissedRetryWaitsForConsistency: a retry that the leader's
// filter dismisses is acknowledged only once the first attempt is on as
// many replicas as the retry's level asks. With every replication message
// lost, the first attempt at ALL times out and so must the retry; once the
// network heals, the retry succeeds and every replica holds the update.
func TestFBFDismissedRetryWaitsForConsistency(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterWriteTimeoutMS = 500 })
	block := c.fbfWithMutationsBlocked()
	var wt *coordinator.WriteTimeoutError
	if err := c.writeOpAt(1, "d", 7, 1, coordinator.All); !errors.As(err, &wt) {
		t.Fatalf("first attempt with replication lost: %v, want a write timeout", err)
	}
	if err := c.writeOpAt(1, "d", 7, 1, coordinator.All); !errors.As(err, &wt) {
		t.Fatalf("retry at ALL while only the leader holds the update: %v, want a write timeout (acknowledging it would claim ALL)", err)
	}
	block.Store(false)
	if err := c.writeOpAt(1, "d", 7, 1, coordinator.All); err != nil {
		t.Fatalf("retry at ALL after the network healed: %v", err)
	}
	for i := 1; i <= 3; i++ {
		if v, _, err := c.node(i).Replica().Value(43, []byte("d"), "c"); err != nil || v != 7 {
			t.Fatalf("node %d holds %d (%v) after the acknowledged retry at ALL, want 7", i, v, err)
		}
	}
}

// crash stops node i as a killed process would leave it (Node.Crash): no
// shutdown announced, nothing marked clean, so the next start is unclean.
func (c *testCluster) crash(i int) {
	c.t.Helper()
	if err := c.nodes[i-1].Crash(); err != nil {
		c.t.Fatalf("crash node %d: %v", i, err)
	}
	if _, err := os.Stat(filepath.Join(c.cfgs[i-1].DataDirectory, "clean_shutdown")); err == nil {
		c.t.Fatalf("node %d crashed with a clean-shutdown mark", i)
	}
	c.nodes[i-1] = nil
}

// fbfLeaderOf returns the node that applied the one FBF update so far.
func (c *testCluster) fbfLeaderOf() int {
	c.t.Helper()
	for i := range c.nodes {
		if c.nodes[i] != nil && c.nodes[i].Replica().FBFStats().Applied == 1 {
			return i + 1
		}
	}
	c.t.Fatal("no node led the write")
	return 0
}

// TestFBFInDoubtAfterCrash: the leader applies an update, its replication
// is lost, it crashes; the client's retry is counted by another replica as
// leader. The restarted leader holds every update it led in its last
// moments in doubt, finds this one counted elsewhere and takes it back: the
// counter reads exactly what the client meant. An update that did
// replicate before the crash stays counted.
func TestFBFInDoubtAfterCrash(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterWriteTimeoutMS = 500 })
	c.createTable(3)
	c.createFBFTable()
	if err := c.writeOpAt(1, "kept", 1, 1, coordinator.All); err != nil {
		t.Fatal(err)
	}
	leader := c.fbfLeaderOf()
	var blockFrom atomic.Value
	blockFrom.Store(transport.Addr(c.cfgs[leader-1].ListenAddress + ":7000"))
	c.net.OnDeliver(func(from, to transport.Addr, m transport.Message, isResponse bool) bool {
		return !isResponse && m.Type == coordinator.TypeMutation && from == blockFrom.Load().(transport.Addr)
	})
	// Find a key whose first replica is the same leader.
	key := ""
	for k := 0; k < 200 && key == ""; k++ {
		before := c.node(leader).Replica().FBFStats().Applied
		var wt *coordinator.WriteTimeoutError
		err := c.writeOpAt(1+leader%3, fmt.Sprint("lost", k), 10, uint64(10+k), coordinator.Quorum)
		if c.node(leader).Replica().FBFStats().Applied > before {
			if !errors.As(err, &wt) {
				t.Fatalf("update whose replication is lost: %v, want a write timeout", err)
			}
			key = fmt.Sprint("lost", k)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if key == "" {
		t.Fatal("no key led by the chosen leader")
	}
	var seq uint64
	fmt.Sscanf(key, "lost%d", &seq)
	seq += 10
	c.crash(leader)
	blockFrom.Store(transport.Addr(""))
	via := 1 + leader%3
	c.seenDown(via, leader)
	if err := c.writeOpAt(via, key, 10, seq, coordinator.Quorum); err != nil {
		t.Fatalf("the client's retry: %v", err)
	}
	c.start(leader)
	c.waitUp(3)
	// The resolver counts a settlement once the replica's ResolveInDoubt
	// returns, which, for an update taken back, rewrites the in_doubt file
	// after the update has left InDoubt: wait for the count too (the test
	// read 0 taken back in 1 run of 4 once the rewrite came).
	c.waitFor("the updates in doubt resolved", func() bool {
		return len(c.node(leader).Replica().InDoubt()) == 0 && c.node(leader).Coordinator().Stats().InDoubtDropped >= 1
	})
	st := c.node(leader).Coordinator().Stats()
	if st.InDoubtDropped != 1 || st.InDoubtResolved < 1 {
		t.Fatalf("resolved %d updates in doubt, dropped %d; want ≥ 1 and 1", st.InDoubtResolved, st.InDoubtDropped)
	}
	if got := c.readFBF(via, key); got != 10 {
		t.Fatalf("%s after the leader's crash and a retry elsewhere: %d, want 10", key, got)
	}
	if got := c.readFBF(via, "kept"); got != 1 {
		t.Fatalf("kept after the leader's crash: %d, want 1", got)
	}
	// A retry now is dismissed everywhere: every filter has learned the op.
	if err := c.writeOpAt(leader, key, 10, seq, coordinator.All); err != nil {
		t.Fatal(err)
	}
	if got := c.readFBF(via, key); got != 10 {
		t.Fatalf("%s after one more retry: %d, want 10", key, got)
	}
}

// TestFBFRetryAtReplicaThatMissedIt: a replica that was down when an FBF
// update was replicated gets it later as a hint. If a retry of the update
// reached that replica as leader before the hint, its filter would miss
// the op id and count it again. A node that comes back pulls its hints
// before it leads any update with an op id; while it cannot (here every
// hint delivery is blocked), another replica leads.
func TestFBFRetryAtReplicaThatMissedIt(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterWriteTimeoutMS = 500 })
	c.createTable(3)
	c.createFBFTable()
	if err := c.writeOpAt(1, "m", 1, 1, coordinator.All); err != nil {
		t.Fatal(err)
	}
	first := c.fbfLeaderOf() // the key's first replica: the leader under the FBF default rule
	c.stop(first)
	via := 1 + first%3
	c.seenDown(via, first)
	if err := c.writeOpAt(via, "m", 10, 2, coordinator.Quorum); err != nil {
		t.Fatal(err)
	}
	// Every hint to the returning node is held back.
	firstAddr := transport.Addr(c.cfgs[first-1].ListenAddress + ":7000")
	var block atomic.Bool
	block.Store(true)
	c.net.OnDeliver(func(from, to transport.Addr, m transport.Message, isResponse bool) bool {
		return block.Load() && !isResponse && m.Type == coordinator.TypeMutation && to == firstAddr
	})
	c.start(first)
	c.waitUp(3)
	// The client retries op 2 (its answer was lost, say): the first replica
	// leads under the FBF rule, but has not had its hints.
	if err := c.writeOpAt(via, "m", 10, 2, coordinator.Quorum); err != nil {
		t.Fatalf("retry: %v", err)
	}
	block.Store(false)
	// The read at ALL merges every replica's copy (and repairs them).
	if got := c.readFBF(via, "m"); got != 11 {
		t.Fatalf("after a retry that met the replica that missed the update: %d, want 11", got)
	}
}
