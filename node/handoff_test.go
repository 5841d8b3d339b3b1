package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/handoffcol"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/transport"
)

const handoffTableID = 44

// createHandoffTable makes ks.h (id 44) with handoff counter c; ks must exist.
func (c *testCluster) createHandoffTable() {
	c.t.Helper()
	def := coltype.TableDef{ID: handoffTableID, Keyspace: "ks", Name: "h", Columns: []coltype.ColumnDef{{Name: "c", Type: handoffcol.TypeName}}}
	if err := c.node(1).Schema().CreateTable(def, false); err != nil {
		c.t.Fatal(err)
	}
	c.waitFor("handoff table everywhere", func() bool {
		for _, nd := range c.nodes {
			if nd != nil {
				if _, ok := nd.Schema().Table("ks", "h"); !ok {
					return false
				}
			}
		}
		return true
	})
}

// handoffClient is a tier-1 participant of one cell, as package client is.
type handoffClient struct {
	st    *handoff.Counter
	key   string
	added uint64
}

// exchange runs one exchange through node via; false if it failed.
func (c *testCluster) exchange(via int, cl *handoffClient, timeout time.Duration) bool {
	c.t.Helper()
	view, err := cl.st.View(handoff.ID{}, 0).MarshalBinary()
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reply, err := c.node(via).Coordinator().Exchange(ctx, handoffTableID, []byte(cl.key), "c", view, coordinator.One)
	if err != nil {
		return false
	}
	r := handoff.NewCounter(handoff.ID{}, 0)
	if err := r.UnmarshalBinary(reply); err != nil {
		c.t.Fatal(err)
	}
	cl.st.Merge(r)
	return true
}

// retire sends a client's retirement notice with its frozen state through
// node via; true once the answer carries the notice back (a replica holds
// it durably).
func (c *testCluster) retire(via int, cl *handoffClient, notice *handoff.Notice[handoff.Count], timeout time.Duration) bool {
	c.t.Helper()
	b, err := (&handoff.Message{State: cl.st.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{{Notice: notice}}}).MarshalBinary()
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reply, err := c.node(via).Coordinator().Exchange(ctx, handoffTableID, []byte(cl.key), "c", b, coordinator.One)
	if err != nil {
		return false
	}
	m, bare, err := handoff.DecodeMessage(reply)
	if err != nil {
		c.t.Fatal(err)
	}
	return !bare && len(m.Notices) == 1 && m.Notices[0].Notice.ID == cl.st.ID()
}

// handoffLeft sums the slots, tokens and notices the three replicas hold,
// and describes each replica's handoff counts.
func (c *testCluster) handoffLeft() (left int, report string) {
	for i := 1; i <= 3; i++ {
		st := handoffcol.ReplicaStats(c.node(i).Replica())
		left += st.Slots + st.Tokens + st.Notices
		report += fmt.Sprintf("node %d: %+v\n", i, st)
		for _, k := range []string{"a", "b", "c"} {
			b, err := c.node(i).Replica().SyncView(handoffTableID, []byte(k), "c", counters.ID{})
			if err != nil {
				continue
			}
			m, _, err := handoff.DecodeMessage(b)
			if err != nil {
				continue
			}
			for _, h := range m.Notices {
				report += fmt.Sprintf("  key %s notice %v servers %v seen %v created %d\n", k, h.Notice.ID, h.Servers, h.Seen, h.Created)
			}
		}
	}
	return left, report
}

func (c *testCluster) readHandoff(via int, key string, cl coordinator.ConsistencyLevel) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, found, err := c.node(via).Coordinator().Read(ctx, handoffTableID, []byte(key), cl)
	if err != nil || !found {
		return 0, err
	}
	cell, ok := r.Cell("c")
	if !ok {
		return 0, nil
	}
	v, err := c.node(via).Replica().CellValue(handoffTableID, cell)
	return uint64(v), err
}

// TestHandoffCounterExactUnderFaults: clients exchange with the ring while
// exchange messages (clients' and anti-entropy's) are lost, duplicated,
// delayed and reordered, and a replica is stopped and restarted. No read
// ever exceeds the increments issued. Then, with a replica down again, every
// client retires (§7.4) with a retirement notice as soon as nothing is
// pending, although some hold tokens for the replica that is down. Once it
// is back, every replica reports exactly the increments issued, and no slot
// and no notice is left anywhere.
func TestHandoffCounterExactUnderFaults(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.HandoffSyncMS = 50; cfg.HandoffNoticeMS = 2000 })
	c.createTable(3)
	c.createHandoffTable()
	rng := testseed.Rand(t)
	keys := []string{"a", "b", "c"}
	var clients []*handoffClient
	for i := 0; i < 6; i++ {
		var id handoff.ID
		id[0], id[1] = 0xc1, byte(i)
		clients = append(clients, &handoffClient{st: handoff.NewCounter(id, 1), key: keys[i%len(keys)]})
	}
	issued := map[string]uint64{}
	c.net.SetFault("", "", []transport.Type{coordinator.TypeExchange},
		transport.Fault{Drop: 0.15, Duplicate: 0.3, Reorder: 0.3, Delay: time.Millisecond, Jitter: 3 * time.Millisecond})
	live := []int{1, 2, 3}
	check := func(step int) {
		for _, k := range keys {
			via := live[rng.IntN(len(live))]
			if v, err := c.readHandoff(via, k, coordinator.One); err == nil && v > issued[k] {
				t.Fatalf("step %d: key %s reads %d via node %d, over the %d increments issued", step, k, v, via, issued[k])
			}
		}
	}
	for step := 0; step < 240; step++ {
		switch step {
		case 80:
			c.stop(2)
			live = []int{1, 3}
			c.seenDown(1, 2)
			c.seenDown(3, 2)
		case 160:
			c.start(2)
			live = []int{1, 2, 3}
			c.waitUp(3)
		}
		cl := clients[rng.IntN(len(clients))]
		if rng.IntN(3) > 0 {
			n := uint64(rng.IntN(4) + 1)
			cl.st.Add(n)
			cl.added += n
			issued[cl.key] += n
		}
		c.exchange(live[rng.IntN(len(live))], cl, 300*time.Millisecond)
		if step%20 == 0 {
			check(step)
		}
	}
	c.net.ClearFaults()
	c.stop(2)
	c.seenDown(1, 2)
	c.seenDown(3, 2)
	live = []int{1, 3}
	withTokens := 0
	for i, cl := range clients {
		for n := 0; cl.st.Pending() != 0; n++ {
			if n > 50 {
				t.Fatalf("client %d still has %d pending after %d exchanges", i, cl.st.Pending(), n)
			}
			c.exchange(live[n%2], cl, time.Second)
		}
		if !cl.st.Handed() {
			withTokens++
		}
		notice := cl.st.State.Retire()
		for n := 0; !c.retire(live[n%2], cl, notice, time.Second); n++ {
			if n > 20 {
				t.Fatalf("client %d's retirement not acknowledged after %d tries", i, n)
			}
		}
	}
	t.Logf("%d of %d clients retired with tokens not yet acquired", withTokens, len(clients))
	c.start(2)
	c.waitUp(3)
	for _, k := range keys {
		c.waitFor("every replica to account every increment of "+k, func() bool {
			for i := 1; i <= 3; i++ {
				v, _, err := c.node(i).Replica().Value(handoffTableID, []byte(k), "c")
				if err != nil || uint64(v) != issued[k] {
					return false
				}
			}
			return true
		})
		if v, err := c.readHandoff(2, k, coordinator.All); err != nil || v != issued[k] {
			t.Fatalf("key %s at ALL: %d, %v; want %d", k, v, err, issued[k])
		}
	}
	// Slots left where a client failed over while a reply was lost, and the
	// notices themselves, are collected.
	var why string
	defer func() {
		if t.Failed() {
			t.Log(why)
		}
	}()
	c.waitFor("no slot, token or notice left on any replica", func() bool {
		var left int
		left, why = c.handoffLeft()
		return left == 0
	})
}

// TestHandoffPlainIncrement: plain updates (the coordinator as tier-1
// participant) from every node, with duplicated and reordered exchanges:
// every success is counted once.
func TestHandoffPlainIncrement(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.HandoffSyncMS = 50 })
	c.createTable(3)
	c.createHandoffTable()
	c.net.SetFault("", "", []transport.Type{coordinator.TypeExchange},
		transport.Fault{Duplicate: 0.5, Reorder: 0.3, Delay: time.Millisecond, Jitter: 2 * time.Millisecond})
	want := map[string]uint64{}
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("k%d", i%4)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.node(1+i%3).Coordinator().CoordinatedWrite(ctx, handoffTableID, []byte(k), "c", int64(i+1))
		cancel()
		if err != nil {
			t.Fatalf("increment %d: %v", i, err)
		}
		want[k] += uint64(i + 1)
	}
	for k, w := range want {
		if v, err := c.readHandoff(3, k, coordinator.All); err != nil || v != w {
			t.Fatalf("key %s: %d, %v; want %d", k, v, err, w)
		}
		c.waitFor("anti-entropy to reach every replica", func() bool {
			for i := 1; i <= 3; i++ {
				if v, _, _ := c.node(i).Replica().Value(handoffTableID, []byte(k), "c"); uint64(v) != w {
					return false
				}
			}
			return true
		})
	}
}

// TestHandoffPlainIncrementRetires: plain updates while a fifth of the
// exchange messages are lost. An update that succeeds is counted once; one
// that times out is counted at most once (its participant retires with a
// notice: a token it held is delivered, what it had not handed off is
// abandoned). Once the network heals, every replica agrees, and the slots
// that lost answers left behind, and the notices, are gone.
func TestHandoffPlainIncrementRetires(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) {
		cfg.HandoffSyncMS = 50
		cfg.HandoffNoticeMS = 2000
		cfg.CounterWriteTimeoutMS = 300
	})
	c.createTable(3)
	c.createHandoffTable()
	c.net.SetFault("", "", []transport.Type{coordinator.TypeExchange}, transport.Fault{Drop: 0.2})
	var ok, failed uint64
	for i := 0; i < 30; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.node(1+i%3).Coordinator().CoordinatedWrite(ctx, handoffTableID, []byte("k"), "c", int64(i+1))
		cancel()
		if err != nil {
			failed += uint64(i + 1)
		} else {
			ok += uint64(i + 1)
		}
	}
	retired := uint64(0)
	for i := 1; i <= 3; i++ {
		retired += c.node(i).Coordinator().Stats().Retirements
	}
	t.Logf("succeeded: %d, timed out: %d, participants retired with a notice: %d", ok, failed, retired)
	if retired == 0 {
		t.Fatal("no participant retired although exchanges were lost")
	}
	c.net.ClearFaults()
	var final uint64
	var why string
	defer func() {
		if t.Failed() {
			t.Log(why)
		}
	}()
	c.waitFor("replicas to agree with no slot, token or notice left", func() bool {
		var left int
		left, why = c.handoffLeft()
		done := left == 0
		for i := 1; i <= 3; i++ {
			v, _, err := c.node(i).Replica().Value(handoffTableID, []byte("k"), "c")
			why += fmt.Sprintf("node %d: value %d, err %v\n", i, v, err)
			if err != nil || i > 1 && uint64(v) != final {
				done = false
			}
			final = uint64(v)
		}
		return done
	})
	if final < ok || final > ok+failed {
		t.Fatalf("replicas count %d; want between the %d that succeeded and %d", final, ok, ok+failed)
	}
}
