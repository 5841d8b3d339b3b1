package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/schema"
	"github.com/idemkv/idemkv/transport"
)

// testCluster is a ring of nodes in one process on the in-memory network.
type testCluster struct {
	t     *testing.T
	net   *transport.MemNetwork
	dir   string
	seed  uint64
	nodes []*Node
	cfgs  []Config
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newTestCluster(t *testing.T, n int, tweak func(i int, c *Config)) *testCluster {
	t.Helper()
	seed := testseed.Seed(t)
	c := &testCluster{t: t, net: transport.NewMemNetwork(seed), dir: t.TempDir(), seed: seed}
	for i := 1; i <= n; i++ {
		cfg := Config{
			DataDirectory: filepath.Join(c.dir, fmt.Sprintf("node%d", i)),
			ListenAddress: fmt.Sprintf("127.0.0.%d", i),
			Seeds:         []string{"127.0.0.1"},
			NumTokens:     8,
			// A 50 ms gossip round and a conviction threshold of 12 take
			// about 1.4 s of silence to hold a node down: long enough that a
			// loaded CI machine under -race does not convict live nodes.
			GossipIntervalMS:      50,
			PhiConvictThreshold:   12,
			HintDeliveryMS:        50,
			CounterWriteTimeoutMS: 3000,
			ReadTimeoutMS:         3000,
			CommitLogSync:         "batch",
			StartNativeTransport:  new(bool), // the in-memory network carries no CQL
		}
		if tweak != nil {
			tweak(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
		c.nodes = append(c.nodes, nil)
		c.start(i)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd != nil {
				nd.Stop()
			}
		}
	})
	c.waitUp(n)
	return c
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	nd, err := Start(c.cfgs[i-1], Options{Listen: c.net.Listen, Logger: quiet(), Seed: c.seed + uint64(i)})
	if err != nil {
		c.t.Fatalf("start node %d: %v", i, err)
	}
	c.nodes[i-1] = nd
}

func (c *testCluster) stop(i int) {
	c.t.Helper()
	if err := c.nodes[i-1].Stop(); err != nil {
		c.t.Fatalf("stop node %d: %v", i, err)
	}
	c.nodes[i-1] = nil
}

func (c *testCluster) node(i int) *Node { return c.nodes[i-1] }

// waitFor polls cond until it holds; it fails the test after 20 s.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	c.t.Fatalf("timed out waiting for %s", what)
}

// waitUp waits until every running node sees want nodes up.
func (c *testCluster) waitUp(want int) {
	c.waitFor(fmt.Sprintf("%d nodes up everywhere", want), func() bool {
		for _, nd := range c.nodes {
			if nd == nil {
				continue
			}
			up := 0
			for _, p := range nd.Gossip().Nodes() {
				if p.Up {
					up++
				}
			}
			if up != want {
				return false
			}
		}
		return true
	})
}

func (c *testCluster) seenDown(from, target int) {
	id := c.cfgs[target-1].ListenAddress
	c.waitFor(fmt.Sprintf("node %d to see node %d down", from, target), func() bool {
		for _, p := range c.node(from).Gossip().Nodes() {
			if string(p.Addr) == id+":7000" {
				return !p.Up
			}
		}
		return false
	})
}

// createTable makes keyspace ks (SimpleStrategy, rf) and table ks.t with
// counter c through node 1, and waits until every running node has it.
func (c *testCluster) createTable(rf int) coltype.TableDef {
	c.t.Helper()
	n1 := c.node(1)
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": fmt.Sprint(rf)}}, false); err != nil {
		c.t.Fatal(err)
	}
	def := coltype.TableDef{ID: 42, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
	if err := n1.Schema().CreateTable(def, false); err != nil {
		c.t.Fatal(err)
	}
	c.waitFor("schema on every node", func() bool {
		for _, nd := range c.nodes {
			if nd != nil {
				if _, ok := nd.Schema().Table("ks", "t"); !ok {
					return false
				}
			}
		}
		return true
	})
	return def
}

func (c *testCluster) write(via int, key string, delta int64, cl coordinator.ConsistencyLevel) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.node(via).Coordinator().CounterWrite(ctx, coltype.Update{Table: 42, Key: []byte(key), Column: "c", Delta: delta}, cl)
}

func (c *testCluster) read(via int, key string, cl coordinator.ConsistencyLevel) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, found, err := c.node(via).Coordinator().Read(ctx, 42, []byte(key), cl)
	if err != nil || !found {
		return 0, err
	}
	cell, ok := r.Cell("c")
	if !ok {
		return 0, nil
	}
	return c.node(via).Replica().CellValue(42, cell)
}

// localValue reads node i's own replica, without the coordinator.
func (c *testCluster) localValue(i int, key string) int64 {
	v, _, err := c.node(i).Replica().Value(42, []byte(key), "c")
	if err != nil {
		c.t.Fatalf("node %d local read: %v", i, err)
	}
	return v
}

func TestWritesAndReadsAtEveryLevel(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	want := map[string]int64{}
	cls := []coordinator.ConsistencyLevel{coordinator.One, coordinator.Two, coordinator.Three, coordinator.Quorum,
		coordinator.All, coordinator.LocalOne, coordinator.LocalQuorum, coordinator.EachQuorum}
	for i := 0; i < 60; i++ {
		key := fmt.Sprintf("k%d", i%7)
		cl := cls[i%len(cls)]
		if err := c.write(1+i%3, key, int64(i%5)+1, cl); err != nil {
			t.Fatalf("write %d at %s: %v", i, cl, err)
		}
		want[key] += int64(i%5) + 1
	}
	for key, w := range want {
		for via := 1; via <= 3; via++ {
			got, err := c.read(via, key, coordinator.All)
			if err != nil || got != w {
				t.Fatalf("read %s via node %d at ALL = %d, %v; want %d", key, via, got, err, w)
			}
		}
		// Every replica holds the whole counter (ALL reads repaired any lag).
		for i := 1; i <= 3; i++ {
			if got := c.localValue(i, key); got != w {
				t.Errorf("node %d holds %s = %d, want %d", i, key, got, w)
			}
		}
	}
	for _, cl := range []coordinator.ConsistencyLevel{coordinator.Any, coordinator.Serial, coordinator.LocalSerial} {
		var inv *coordinator.InvalidError
		if err := c.write(1, "k", 1, cl); !errors.As(err, &inv) {
			t.Errorf("counter write at %s: %v, want an Invalid error", cl, err)
		}
	}
}

// TestLostAckRetryOverCounts is the problem idemkv exists to fix: the
// leader applies an increment, its answer is lost, the client sees a
// timeout and retries, and the vanilla counter counts the increment twice.
func TestLostAckRetryOverCounts(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterLeader = "first" })
	c.createTable(3)
	var dropped atomic.Int32
	c.net.OnDeliver(func(from, to transport.Addr, m transport.Message, isResponse bool) bool {
		return isResponse && m.Type == coordinator.TypeCounterWrite && dropped.CompareAndSwap(0, 1)
	})
	// Write through every node until one has to forward to a leader (the
	// coordinator may be the leader itself, which has no ack to lose).
	key := ""
	for i := 0; i < 100 && dropped.Load() == 0; i++ {
		key = fmt.Sprintf("k%d", i)
		err := c.write(1, key, 5, coordinator.Quorum)
		if dropped.Load() == 0 {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		var wt *coordinator.WriteTimeoutError
		if !errors.As(err, &wt) || wt.WriteType != coordinator.WriteTypeCounter {
			t.Fatalf("write with a lost ack: %v, want a COUNTER write timeout", err)
		}
		// The client cannot know the outcome and retries.
		if err := c.write(1, key, 5, coordinator.Quorum); err != nil {
			t.Fatalf("retry: %v", err)
		}
	}
	if dropped.Load() == 0 {
		t.Fatal("no write was forwarded to another leader")
	}
	got, err := c.read(1, key, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	if got != 10 {
		t.Fatalf("after one increment of 5, its lost ack and a retry: %d, want the over-count 10", got)
	}
}

// TestTimeoutsAtEachLevel drops every replication message: only levels the
// leader alone satisfies succeed; the others time out with type COUNTER
// after the leader's own acknowledgement.
func TestTimeoutsAtEachLevel(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterWriteTimeoutMS = 300 })
	c.createTable(3)
	for _, a := range []string{"127.0.0.1:7000", "127.0.0.2:7000", "127.0.0.3:7000"} {
		for _, b := range []string{"127.0.0.1:7000", "127.0.0.2:7000", "127.0.0.3:7000"} {
			if a != b {
				c.net.SetFault(transport.Addr(a), transport.Addr(b), []transport.Type{coordinator.TypeMutation}, transport.Fault{Drop: 1})
			}
		}
	}
	for _, tc := range []struct {
		cl      coordinator.ConsistencyLevel
		succeed bool
	}{
		{coordinator.One, true}, {coordinator.LocalOne, true}, {coordinator.Two, false}, {coordinator.Three, false},
		{coordinator.Quorum, false}, {coordinator.LocalQuorum, false}, {coordinator.EachQuorum, false}, {coordinator.All, false},
	} {
		err := c.write(2, "key-"+tc.cl.String(), 1, tc.cl)
		if tc.succeed {
			if err != nil {
				t.Errorf("%s: %v, want success from the leader's own ack", tc.cl, err)
			}
			continue
		}
		var wt *coordinator.WriteTimeoutError
		if !errors.As(err, &wt) || wt.WriteType != coordinator.WriteTypeCounter || wt.CL != tc.cl {
			t.Errorf("%s: %v, want a COUNTER write timeout at that level", tc.cl, err)
			continue
		}
		if wt.Received != 1 && wt.Received != 0 {
			t.Errorf("%s: timeout reports %d acks; the leader's own is the only one possible", tc.cl, wt.Received)
		}
	}
	if st := c.net.Stats()[coordinator.TypeMutation]; st.Dropped == 0 {
		t.Fatal("no replication message was dropped: the fault did not act")
	}
}

// TestUnavailableAndHints stops one node: levels that need it are refused as
// Unavailable before anything is applied, the others succeed and leave hints
// that are replayed when the node returns.
func TestUnavailableAndHints(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	if err := c.write(1, "k", 1, coordinator.All); err != nil {
		t.Fatal(err)
	}
	c.stop(3)
	c.seenDown(1, 3)
	c.seenDown(2, 3)
	var un *coordinator.UnavailableError
	if err := c.write(1, "k", 100, coordinator.All); !errors.As(err, &un) || un.Required != 3 || un.Alive != 2 {
		t.Fatalf("ALL with a node down: %v, want Unavailable (required 3, alive 2)", err)
	}
	if err := c.write(1, "k", 100, coordinator.Three); !errors.As(err, &un) {
		t.Fatalf("THREE with a node down: %v, want Unavailable", err)
	}
	if _, err := c.read(1, "k", coordinator.All); !errors.As(err, &un) {
		t.Fatalf("read at ALL with a node down: %v, want Unavailable", err)
	}
	for i := 0; i < 20; i++ {
		if err := c.write(1+i%2, "k", 2, coordinator.Quorum); err != nil {
			t.Fatalf("QUORUM with one node down: %v", err)
		}
	}
	pending := 0
	for i := 1; i <= 2; i++ {
		for _, n := range c.node(i).Hints().Pending() {
			pending += n
		}
	}
	if pending == 0 {
		t.Fatal("no hints stored for the down node")
	}
	c.start(3)
	c.waitUp(3)
	c.waitFor("hints replayed to node 3", func() bool { return c.localValue(3, "k") == 41 })
	for i := 1; i <= 2; i++ {
		c.waitFor("hint queues drained", func() bool { return len(c.node(i).Hints().Pending()) == 0 })
	}
}

// TestPartitionHealConverges cuts a node away; writes at ONE go on on both
// sides' leaders; after the heal, hints and read repair make every replica
// hold the same, complete counter.
func TestPartitionHealConverges(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	c.net.Isolate("127.0.0.3:7000")
	c.seenDown(1, 3)
	c.seenDown(2, 3)
	total := int64(0)
	for i := 0; i < 10; i++ {
		if err := c.write(1+i%2, "p", 3, coordinator.One); err != nil {
			t.Fatal(err)
		}
		total += 3
	}
	// Node 3 is alone: it sees the others down and can only write at ONE.
	c.seenDown(3, 1)
	c.seenDown(3, 2)
	if err := c.write(3, "p", 7, coordinator.One); err != nil {
		t.Fatalf("write on the isolated side at ONE: %v", err)
	}
	total += 7
	c.net.Heal()
	c.waitUp(3)
	got, err := c.read(1, "p", coordinator.All)
	if err != nil || got != total {
		t.Fatalf("after heal, read at ALL = %d, %v; want %d", got, err, total)
	}
	for i := 1; i <= 3; i++ {
		c.waitFor(fmt.Sprintf("node %d converged", i), func() bool { return c.localValue(i, "p") == total })
	}
}

// TestLeaderCrashMidWrite: the leader applies an increment and dies before
// replicating it. The client sees a timeout; the increment is durable in the
// leader's commit log, and after the restart a read at ALL returns it once
// and repairs the other replicas.
func TestLeaderCrashMidWrite(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterLeader = "first" })
	c.createTable(3)
	var block atomic.Bool
	block.Store(true)
	c.net.OnDeliver(func(from, to transport.Addr, m transport.Message, isResponse bool) bool {
		return block.Load() && !isResponse && m.Type == coordinator.TypeMutation
	})
	var wt *coordinator.WriteTimeoutError
	if err := c.write(1, "crash", 9, coordinator.Quorum); !errors.As(err, &wt) {
		t.Fatalf("write whose replication is lost: %v, want a write timeout", err)
	}
	leader := 0
	for i := 1; i <= 3; i++ {
		if c.localValue(i, "crash") == 9 {
			if leader != 0 {
				t.Fatal("two replicas applied a write whose replication was blocked")
			}
			leader = i
		}
	}
	if leader == 0 {
		t.Fatal("no replica applied the write")
	}
	// The leader crashes; its stored hints would deliver the shard, so
	// remove them to test the commit log and read repair alone.
	c.stop(leader)
	block.Store(false)
	c.start(leader)
	c.waitUp(3)
	via := 1 + leader%3
	got, err := c.read(via, "crash", coordinator.All)
	if err != nil || got != 9 {
		t.Fatalf("after the leader's restart, read at ALL = %d, %v; want 9", got, err)
	}
	for i := 1; i <= 3; i++ {
		c.waitFor(fmt.Sprintf("node %d repaired", i), func() bool { return c.localValue(i, "crash") == 9 })
	}
}

// TestScanAndDelete pages through a table across every token range of the
// ring and deletes counters at QUORUM.
func TestScanAndDelete(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(2)
	want := map[string]int64{}
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("s%d", i)
		if err := c.write(1+i%3, key, int64(i+1), coordinator.Quorum); err != nil {
			t.Fatal(err)
		}
		want[key] = int64(i + 1)
	}
	for _, page := range []int{1, 7, 64, 1000} {
		seen := map[string]bool{}
		var after *row.Key
		var prev *row.Key
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rows, err := c.node(2).Coordinator().Scan(ctx, 42, after, page, coordinator.Quorum)
			cancel()
			if err != nil {
				t.Fatalf("page %d: scan: %v", page, err)
			}
			for _, r := range rows {
				if prev != nil && row.Compare(*prev, r.Key) >= 0 {
					t.Fatalf("page %d: %v after %v", page, r.Key, *prev)
				}
				k := r.Key
				prev = &k
				cell, _ := r.Cell("c")
				v, err := c.node(2).Replica().CellValue(42, cell)
				if err != nil || v != want[string(r.Key.Partition)] || seen[string(r.Key.Partition)] {
					t.Fatalf("page %d: row %s = %d (%v), want %d once", page, r.Key.Partition, v, err, want[string(r.Key.Partition)])
				}
				seen[string(r.Key.Partition)] = true
			}
			if len(rows) < page {
				break
			}
			last := rows[len(rows)-1].Key
			after = &last
		}
		if len(seen) != len(want) {
			t.Fatalf("page size %d: scan saw %d partitions, wrote %d", page, len(seen), len(want))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.node(3).Coordinator().Delete(ctx, 42, []byte("s5"), []string{"c"}, coordinator.Quorum); err != nil {
		t.Fatal(err)
	}
	r, found, err := c.node(1).Coordinator().Read(ctx, 42, []byte("s5"), coordinator.Quorum)
	if err != nil {
		t.Fatal(err)
	}
	if cell, ok := r.Cell("c"); found && (!ok || !cell.Tombstone) {
		t.Fatalf("after the delete, read at QUORUM returns a live cell: %+v", r)
	}
	if err := c.write(1, "s5", 1, coordinator.Quorum); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.read(2, "s5", coordinator.All); got != 0 {
		t.Fatalf("a deleted counter came back with %d after an increment", got)
	}
}

// createFBFTable makes table ks.f (id 43) with the FBF on.
func (c *testCluster) createFBFTable() {
	c.t.Helper()
	def := coltype.TableDef{ID: 43, Keyspace: "ks", Name: "f", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
		Options: map[string]string{counter.IdempotenceOption: `{"class": "fbf"}`}}
	if err := c.node(1).Schema().CreateTable(def, false); err != nil {
		c.t.Fatal(err)
	}
	c.waitFor("FBF table everywhere", func() bool {
		for _, nd := range c.nodes {
			if nd != nil {
				if _, ok := nd.Schema().Table("ks", "f"); !ok {
					return false
				}
			}
		}
		return true
	})
}

// soleFBFLeader returns the node whose FBF columns applied exactly one
// update as leader (the node that led the one write so far).
func (c *testCluster) soleFBFLeader() int {
	c.t.Helper()
	for i := range c.nodes {
		if c.nodes[i] != nil && c.nodes[i].Replica().FBFStats().Applied == 1 {
			return i + 1
		}
	}
	c.t.Fatal("no node led the write")
	return 0
}

func (c *testCluster) writeOp(via int, key string, delta int64, seq uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := coltype.Update{Table: 43, Key: []byte(key), Column: "c", Delta: delta, HasOp: true, OpTime: time.Now().UnixNano()}
	u.OpID[7], u.OpID[15] = 1, byte(seq)
	return c.node(via).Coordinator().CounterWrite(ctx, u, coordinator.Quorum)
}

func (c *testCluster) readFBF(via int, key string) int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, found, err := c.node(via).Coordinator().Read(ctx, 43, []byte(key), coordinator.All)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if !found {
		return 0
	}
	cell, _ := r.Cell("c")
	v, err := c.node(via).Replica().CellValue(43, cell)
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// TestFBFLostAckRetryIsExact is TestLostAckRetryOverCounts on an FBF
// column: the retry carries the same op id and is dismissed, wherever it
// lands.
func TestFBFLostAckRetryIsExact(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	c.createFBFTable()
	var dropped atomic.Int32
	c.net.OnDeliver(func(from, to transport.Addr, m transport.Message, isResponse bool) bool {
		return isResponse && m.Type == coordinator.TypeCounterWrite && dropped.CompareAndSwap(0, 1)
	})
	key := ""
	for i := 0; i < 100 && dropped.Load() == 0; i++ {
		key = fmt.Sprintf("f%d", i)
		err := c.writeOp(1, key, 5, uint64(i))
		if dropped.Load() == 0 {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		var wt *coordinator.WriteTimeoutError
		if !errors.As(err, &wt) {
			t.Fatalf("write with a lost ack: %v, want a write timeout", err)
		}
		// Retry through the same coordinator, then through another one.
		for _, via := range []int{1, 2, 3} {
			if err := c.writeOp(via, key, 5, uint64(i)); err != nil {
				t.Fatalf("retry via node %d: %v", via, err)
			}
		}
	}
	if dropped.Load() == 0 {
		t.Fatal("no write was forwarded to another leader")
	}
	if got := c.readFBF(1, key); got != 5 {
		t.Fatalf("FBF counter after a lost ack and three retries = %d, want exactly 5", got)
	}
	dismissed := uint64(0)
	for i := 1; i <= 3; i++ {
		dismissed += c.node(i).Coordinator().Stats().Dismissed
	}
	if dismissed != 3 {
		t.Fatalf("%d retries dismissed, want 3", dismissed)
	}
}

// TestFBFRetryAfterLeaderRestart: the leader restarts between the first
// attempt and the retry; its filter is rebuilt from its commit log.
func TestFBFRetryAfterLeaderRestart(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	c.createFBFTable()
	if err := c.writeOp(1, "r", 4, 77); err != nil {
		t.Fatal(err)
	}
	leader := c.soleFBFLeader()
	c.stop(leader)
	c.start(leader)
	c.waitUp(3)
	if err := c.writeOp(1+leader%3, "r", 4, 77); err != nil {
		t.Fatal(err)
	}
	if got := c.readFBF(1, "r"); got != 4 {
		t.Fatalf("after the leader's restart and a retry: %d, want 4", got)
	}
}

// TestFBFLeaderCrashBeforeReplication is the case no per-replica filter
// can close alone: the leader applies an update and stops before any
// replica learns its op id; the client's retry reaches the next replica as
// leader, whose filter has never seen the id, and is applied again. When
// the old leader returns, its shard holds the first application: the
// counter would over-count by one update (21, before idemkv resolved
// updates in doubt). The returning leader holds the update in doubt (its
// replication waits in a hint), asks the other replicas, finds the op
// counted elsewhere and takes its own application back. See docs/fbf.md.
func TestFBFLeaderCrashBeforeReplication(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	c.createFBFTable()
	var blockFrom atomic.Value
	blockFrom.Store(transport.Addr(""))
	c.net.OnDeliver(func(from, to transport.Addr, m transport.Message, isResponse bool) bool {
		return !isResponse && m.Type == coordinator.TypeMutation && from == blockFrom.Load().(transport.Addr)
	})
	// Find the key's leader: the first live replica (the FBF tables' rule).
	if err := c.writeOp(1, "lc", 1, 1); err != nil {
		t.Fatal(err)
	}
	leader := 0
	for i := 1; i <= 3; i++ {
		if c.node(i).Replica().FBFStats().Applied == 1 {
			leader = i
		}
	}
	blockFrom.Store(transport.Addr(c.cfgs[leader-1].ListenAddress + ":7000"))
	via := 1 + leader%3
	var wt *coordinator.WriteTimeoutError
	if err := c.writeOp(via, "lc", 10, 2); !errors.As(err, &wt) {
		t.Fatalf("update whose replication is lost: %v, want a write timeout", err)
	}
	// The leader dies. Its commit log and its hints keep the update, but no
	// other replica has seen the op id when the client retries.
	c.stop(leader)
	blockFrom.Store(transport.Addr(""))
	for i := 1; i <= 3; i++ {
		if i != leader {
			c.seenDown(i, leader)
		}
	}
	if err := c.writeOp(via, "lc", 10, 2); err != nil {
		t.Fatalf("the client's retry: %v", err)
	}
	c.start(leader)
	c.waitUp(3)
	c.waitFor("the update in doubt resolved", func() bool { return c.node(leader).Coordinator().Stats().InDoubtDropped == 1 })
	if got := c.readFBF(via, "lc"); got != 11 {
		t.Fatalf("after a leader crash before replication and a retry elsewhere: %d, want 11 (1 + 10)", got)
	}
}

// TestFBFDuplicatedReorderedReplication duplicates, delays and reorders
// the replication messages while clients send every update twice (the
// second with the same op id, through another coordinator): the FBF
// counters stay exact.
func TestFBFDuplicatedReorderedReplication(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	c.createFBFTable()
	c.net.SetFault("", "", []transport.Type{coordinator.TypeMutation}, transport.Fault{Duplicate: 0.5, Reorder: 0.3, Delay: time.Millisecond, Jitter: 3 * time.Millisecond})
	want := map[string]int64{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				key := fmt.Sprintf("d%d", i%5)
				seq := uint64(w*1000 + i)
				for attempt := 0; attempt < 2; attempt++ {
					if err := c.writeOpFrom(uint64(w), 1+(w+attempt)%3, key, int64(i%3+1), seq); err != nil {
						t.Errorf("write: %v", err)
						return
					}
				}
				mu.Lock()
				want[key] += int64(i%3 + 1)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st := c.net.Stats()[coordinator.TypeMutation]
	if st.Duplicated == 0 || st.Reordered == 0 {
		t.Fatalf("faults did not act: %+v", st)
	}
	c.net.ClearFaults()
	for key, w := range want {
		if got := c.readFBF(1, key); got != w {
			t.Errorf("%s = %d, want %d", key, got, w)
		}
	}
}

func (c *testCluster) writeOpFrom(client uint64, via int, key string, delta int64, seq uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := coltype.Update{Table: 43, Key: []byte(key), Column: "c", Delta: delta, HasOp: true, OpTime: time.Now().UnixNano()}
	binary.BigEndian.PutUint64(u.OpID[:], client+1)
	binary.BigEndian.PutUint64(u.OpID[8:], seq)
	return c.node(via).Coordinator().CounterWrite(ctx, u, coordinator.Quorum)
}

// TestReplicationOutlivesTheAnswer: at ONE the leader answers on its own
// ack, and the other replicas still receive the shard directly (hint
// delivery is turned off here, so only replication can bring it).
func TestReplicationOutlivesTheAnswer(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.HintDeliveryMS = 3_600_000 })
	c.createTable(3)
	for i := 0; i < 20; i++ {
		if err := c.write(1+i%3, "one", 1, coordinator.One); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		c.waitFor(fmt.Sprintf("node %d to hold all 20 increments", i), func() bool { return c.localValue(i, "one") == 20 })
	}
}
