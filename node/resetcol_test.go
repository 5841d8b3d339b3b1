package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/schema"
	"github.com/idemkv/idemkv/transport"
)

// createResetTable makes ks.r (k, c reset_counter) at RF 3 through node 1.
func (c *testCluster) createResetTable() {
	c.t.Helper()
	c.createTableRF3(coltype.TableDef{ID: 43, Keyspace: "ks", Name: "r", Columns: []coltype.ColumnDef{{Name: "c", Type: resetcol.TypeName}}})
}

// createTableRF3 makes keyspace ks (SimpleStrategy, RF 3) and the table def
// through node 1, and waits until every running node has the table.
func (c *testCluster) createTableRF3(def coltype.TableDef) {
	c.t.Helper()
	n1 := c.node(1)
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "3"}}, false); err != nil {
		c.t.Fatal(err)
	}
	if err := n1.Schema().CreateTable(def, false); err != nil {
		c.t.Fatal(err)
	}
	c.waitFor("schema on every node", func() bool {
		for _, nd := range c.nodes {
			if nd != nil {
				if _, ok := nd.Schema().Table(def.Keyspace, def.Name); !ok {
					return false
				}
			}
		}
		return true
	})
}

// resetValues reads key on every node's own replica.
func (c *testCluster) resetValues(key string) []int64 {
	var out []int64
	for i := range c.nodes {
		v, _, err := c.node(i+1).Replica().Value(43, []byte(key), "c")
		if err != nil {
			c.t.Fatalf("node %d local read: %v", i+1, err)
		}
		out = append(out, v)
	}
	return out
}

// TestResetCounterDuplicatedReorderedLost drives reset_counter through the
// real coordinators and in-memory network while the leaders' mutations are
// duplicated, reordered and lost (lost ones become hints, replayed later,
// and anti-entropy resends every op not acknowledged): every replica ends
// with exactly what was issued, in each phase — increments from three
// coordinators, a reset, increments again.
func TestResetCounterDuplicatedReorderedLost(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.HandoffSyncMS = 50 })
	c.createResetTable()
	keys := []string{"a", "b", "c"}
	write := func(via int, key string, d int64) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.node(via).Coordinator().CounterWrite(ctx, coltype.Update{Table: 43, Key: []byte(key), Column: "c", Delta: d}, coordinator.One)
	}
	phase := func(name string) map[string]int64 {
		c.net.SetFault("", "", []transport.Type{coordinator.TypeMutation}, transport.Fault{Drop: 0.2, Duplicate: 0.4, Reorder: 0.3, Delay: time.Millisecond, Jitter: 3 * time.Millisecond})
		want := map[string]int64{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 1; w <= 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 30 {
					key, d := keys[(w+i)%len(keys)], int64(1+i%3)
					if err := write(w, key, d); err != nil {
						t.Errorf("%s: write via node %d: %v", name, w, err)
						return
					}
					mu.Lock()
					want[key] += d
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		c.net.ClearFaults()
		return want
	}
	settled := func(name string, want map[string]int64) {
		c.waitFor(name+": every replica reads what was issued", func() bool {
			for _, k := range keys {
				for _, v := range c.resetValues(k) {
					if v != want[k] {
						return false
					}
				}
			}
			return true
		})
	}
	want := phase("increments")
	settled("increments", want)
	st := c.net.Stats()[coordinator.TypeMutation]
	if st.Duplicated == 0 || st.Dropped == 0 {
		t.Fatalf("faults did not act: %+v", st)
	}
	for i, k := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.node(i+1).Coordinator().Delete(ctx, 43, []byte(k), []string{"c"}, coordinator.Quorum)
		cancel()
		if err != nil {
			t.Fatalf("DELETE %s: %v", k, err)
		}
	}
	settled("resets", map[string]int64{})
	settled("increments after the resets", phase("increments after the resets"))
	c.waitFor("outboxes drain", func() bool {
		for _, nd := range c.nodes {
			if resetcol.ReplicaStats(nd.Replica()).Pending != 0 {
				return false
			}
		}
		return true
	})
}

// TestResetCounterConcurrentIncrementAndReset is issue 13's case through
// the real coordinators: after 5 increments, node 3 is isolated; it leads
// one more increment (at ONE, the only level it can meet) while node 1
// coordinates a DELETE led on the other side (nodes 1 and 2, at QUORUM).
// Neither has seen the other. After the partition heals (hints and
// anti-entropy), every replica reads 1, and counts on.
func TestResetCounterConcurrentIncrementAndReset(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.HandoffSyncMS = 50 })
	c.createResetTable()
	write := func(via int, d int64, cl coordinator.ConsistencyLevel) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.node(via).Coordinator().CounterWrite(ctx, coltype.Update{Table: 43, Key: []byte("k"), Column: "c", Delta: d}, cl); err != nil {
			t.Fatalf("write via node %d: %v", via, err)
		}
	}
	for range 5 {
		write(1, 1, coordinator.All)
	}
	c.net.Isolate("127.0.0.3:7000")
	c.seenDown(1, 3)
	c.seenDown(2, 3)
	c.seenDown(3, 1)
	c.seenDown(3, 2)
	write(3, 1, coordinator.One)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := c.node(1).Coordinator().Delete(ctx, 43, []byte("k"), []string{"c"}, coordinator.Quorum)
	cancel()
	if err != nil {
		t.Fatalf("DELETE on the majority side: %v", err)
	}
	if got := fmt.Sprint(c.resetValues("k")); got != "[0 0 6]" {
		t.Fatalf("during the partition, replicas read %s, want [0 0 6]", got)
	}
	c.net.Heal()
	c.waitUp(3)
	c.waitFor("every replica reads 1", func() bool { return fmt.Sprint(c.resetValues("k")) == "[1 1 1]" })
	write(2, 1, coordinator.All)
	if got := fmt.Sprint(c.resetValues("k")); got != "[2 2 2]" {
		t.Fatalf("counting on: %s, want [2 2 2]", got)
	}
}

// TestResetCounterOutboxesTrimmedByAnswers: with anti-entropy rounds an
// hour apart, a leader's outboxes drain from the replicas' answers to its
// replications alone (coltype.Mutation.Acked, called by the coordinator):
// after increments at ALL through every coordinator, no outbox holds an
// op. Before, they held every op until the next round.
func TestResetCounterOutboxesTrimmedByAnswers(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.HandoffSyncMS = 3_600_000 })
	c.createResetTable()
	for i := range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.node(1+i%3).Coordinator().CounterWrite(ctx, coltype.Update{Table: 43, Key: []byte(fmt.Sprintf("k%d", i%4)), Column: "c", Delta: 1}, coordinator.All)
		cancel()
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for i, nd := range c.nodes {
		if st := resetcol.ReplicaStats(nd.Replica()); st.Pending != 0 || st.Generated == 0 {
			t.Errorf("node %d: %d ops in its outboxes (%d generated), want none", i+1, st.Pending, st.Generated)
		}
	}
}
