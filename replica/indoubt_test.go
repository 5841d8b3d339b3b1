package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/row"
)

func ctxCell(t *testing.T, shards ...counters.Shard) row.Cell {
	t.Helper()
	b, err := counters.FromShards(shards...).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return row.Cell{Column: "c", Value: b}
}

func TestDecide(t *testing.T) {
	self := coltype.InDoubtOp{CounterID: counters.ID{5}, Clock: 7, Delta: 3}
	other, third := counters.ID{9}, counters.ID{2}
	mine := func(clock int64) counters.Shard {
		return counters.Shard{ID: self.CounterID, Clock: clock, Count: 1, Kind: counters.Global}
	}
	theirs := func(id counters.ID, clock int64) counters.Shard {
		return counters.Shard{ID: id, Clock: clock, Count: 1, Kind: counters.Global}
	}
	for _, tc := range []struct {
		name    string
		answers []coltype.OpAnswer
		keep    bool
	}{
		{"nobody else saw it", []coltype.OpAnswer{{}, {}}, true},
		{"my replication reached them", []coltype.OpAnswer{
			{Seen: true, Found: true, Cell: ctxCell(t, mine(7))},
			{Seen: true, Found: true, Cell: ctxCell(t, mine(9), theirs(other, 1))}}, true},
		{"seen, but only my older shard: another leader counted it", []coltype.OpAnswer{
			{Seen: true, Found: true, Cell: ctxCell(t, mine(6), theirs(other, 4))}, {}}, false},
		{"seen without my shard at all", []coltype.OpAnswer{{Seen: true, Found: true, Cell: ctxCell(t, theirs(other, 4))}}, false},
		{"seen with no cell: a false positive, no evidence", []coltype.OpAnswer{{Seen: true}}, true},
		{"another leader kept it", []coltype.OpAnswer{{Status: coltype.OpKept, CounterID: other, Clock: 2}}, false},
		{"another leader in doubt with a lower id", []coltype.OpAnswer{{Status: coltype.OpPending, CounterID: third, Clock: 2, Seen: true, Found: true, Cell: ctxCell(t, theirs(third, 2))}}, false},
		{"another leader in doubt with a higher id, its copy explains itself", []coltype.OpAnswer{
			{Status: coltype.OpPending, CounterID: other, Clock: 2, Seen: true, Found: true, Cell: ctxCell(t, theirs(other, 2))},
			{Seen: true, Found: true, Cell: ctxCell(t, theirs(other, 2))}}, true},
		{"a leader that took it back explains its own copy", []coltype.OpAnswer{
			{Status: coltype.OpDropped, CounterID: other, Clock: 2, Seen: true, Found: true, Cell: ctxCell(t, theirs(other, 3))}}, true},
	} {
		if keep, why := coltype.Decide(self, tc.answers); keep != tc.keep {
			t.Errorf("%s: keep %v (%s), want %v", tc.name, keep, why, tc.keep)
		}
	}
}

// TestDecideSymmetric: two leaders that hold the same op in doubt and ask
// each other at once agree that exactly one keeps it, whichever asks first.
func TestDecideSymmetric(t *testing.T) {
	a := coltype.InDoubtOp{CounterID: counters.ID{1}, Clock: 3, Delta: 1}
	b := coltype.InDoubtOp{CounterID: counters.ID{2}, Clock: 8, Delta: 1}
	cellA := ctxCell(t, counters.Shard{ID: a.CounterID, Clock: 3, Count: 1, Kind: counters.Global})
	cellB := ctxCell(t, counters.Shard{ID: b.CounterID, Clock: 8, Count: 1, Kind: counters.Global})
	keepA, _ := coltype.Decide(a, []coltype.OpAnswer{{Status: coltype.OpPending, CounterID: b.CounterID, Clock: b.Clock, Seen: true, Found: true, Cell: cellB}})
	keepB, _ := coltype.Decide(b, []coltype.OpAnswer{{Status: coltype.OpPending, CounterID: a.CounterID, Clock: a.Clock, Seen: true, Found: true, Cell: cellA}})
	if keepA == keepB {
		t.Fatalf("both leaders decided keep=%v", keepA)
	}
	// Once one has decided, the other's answer says so and the second
	// agrees.
	keepB2, _ := coltype.Decide(b, []coltype.OpAnswer{{Status: coltype.OpKept, CounterID: a.CounterID, Clock: a.Clock, Seen: true, Found: true, Cell: cellA}})
	if keepB2 {
		t.Fatal("b keeps an op a kept")
	}
}

// TestInDoubtResolution drives one replica through an unclean restart: the
// FBF updates it led in its last window are in doubt and their cell is not
// served; one is taken back, one kept; the decision survives another
// unclean restart (a compensation is never applied twice) and the
// compensation is exact.
func TestInDoubtResolution(t *testing.T) {
	dir := t.TempDir()
	r := mustOpen(t, testConfig(dir))
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	for seq, key := range map[uint64]string{1: "a", 2: "b"} {
		if _, err := r.Apply(fbfUpdate(key, 5, op(1, seq))); err != nil {
			t.Fatal(err)
		}
	}
	// A vanilla-path update without an op id is never in doubt.
	if _, err := r.Apply(coltype.Update{Table: fbfTable.ID, Key: []byte("a"), Column: "c", Delta: 100}); err != nil {
		t.Fatal(err)
	}
	unclean := func() {
		t.Helper()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
			t.Fatal(err)
		}
		r = mustOpen(t, testConfig(dir))
	}
	unclean()
	defer func() { r.Close() }()
	ops := r.InDoubt()
	if len(ops) != 2 {
		t.Fatalf("%d updates in doubt, want 2", len(ops))
	}
	if _, _, err := r.ReadRow(fbfTable.ID, []byte("a")); !errors.Is(err, coltype.ErrInDoubt) {
		t.Fatalf("read of a cell in doubt: %v, want coltype.ErrInDoubt", err)
	}
	if _, err := r.Apply(fbfUpdate("a", 1, op(1, 9))); !errors.Is(err, coltype.ErrInDoubt) || errors.Is(err, coltype.ErrOpInDoubt) {
		t.Fatalf("fresh leader update of a cell in doubt: %v, want coltype.ErrInDoubt (another leader may take it)", err)
	}
	if _, err := r.Apply(fbfUpdate("a", 5, op(1, 1))); !errors.Is(err, coltype.ErrOpInDoubt) {
		t.Fatalf("retry of the update in doubt: %v, want coltype.ErrOpInDoubt (it waits here)", err)
	}
	if v := value(t, r, fbfTable.ID, "c", "c"); v != 0 {
		t.Fatalf("other cells are served: %d", v)
	}
	a, _ := r.OpStatus(fbfTable.ID, []byte("a"), "c", op(1, 1))
	if !a.Seen || a.Status != coltype.OpPending || a.Clock == 0 {
		t.Fatalf("coltype.OpStatus of a pending op: %+v", a)
	}
	for _, o := range ops {
		keep := string(o.Key) == "b"
		m, err := r.ResolveInDoubt(o, keep)
		if err != nil {
			t.Fatal(err)
		}
		if !m.HasOp || m.OpID != o.OpID || m.Cell.Value == nil {
			t.Fatalf("resolution mutation %+v carries neither the op id nor the cell", m)
		}
		if _, err := r.ResolveInDoubt(o, keep); err == nil {
			t.Fatal("an op resolved twice")
		}
	}
	check := func(when string) {
		t.Helper()
		if v := value(t, r, fbfTable.ID, "a", "c"); v != 100 {
			t.Fatalf("%s: a = %d, want 100 (5 taken back)", when, v)
		}
		if v := value(t, r, fbfTable.ID, "b", "c"); v != 5 {
			t.Fatalf("%s: b = %d, want 5", when, v)
		}
	}
	check("after resolution")
	unclean()
	// A kept op is settled again after the next unclean start (keeping is
	// not logged: asked again, the replicas give the same answer); the op
	// taken back is not, its compensation record is the decision.
	again := r.InDoubt()
	if len(again) != 1 || string(again[0].Key) != "b" {
		t.Fatalf("in doubt after another unclean restart: %+v, want b's op alone", again)
	}
	if _, err := r.ResolveInDoubt(again[0], true); err != nil {
		t.Fatal(err)
	}
	check("after another unclean restart")
	if a, _ := r.OpStatus(fbfTable.ID, []byte("a"), "c", op(1, 1)); a.Status != coltype.OpDropped {
		t.Fatalf("status of the op taken back after a restart: %v", a.Status)
	}
}

// TestOpStatusReserves: a replica asked about an op its filter has not
// seen leads no retry of it until the asker's decision (a mutation with the
// op id) arrives, so that a retry cannot be counted between the question
// and the decision.
func TestOpStatusReserves(t *testing.T) {
	r := mustOpen(t, testConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	a, err := r.OpStatus(fbfTable.ID, []byte("k"), "c", op(3, 1))
	if err != nil || a.Seen {
		t.Fatalf("coltype.OpStatus of an op never seen: %+v %v", a, err)
	}
	if _, err := r.Apply(fbfUpdate("k", 1, op(3, 1))); !errors.Is(err, coltype.ErrOpInDoubt) {
		t.Fatalf("retry of a reserved op: %v, want coltype.ErrOpInDoubt", err)
	}
	if _, err := r.Apply(fbfUpdate("k", 1, op(3, 2))); err != nil {
		t.Fatalf("another op on the cell: %v", err)
	}
	// The asker's decision arrives with the op id: the retry is dismissed.
	m := coltype.Mutation{Table: fbfTable.ID, Key: []byte("k"), Cell: ctxCell(t, counters.Shard{ID: counters.ID{7}, Clock: 1, Count: 1, Kind: counters.Global}),
		HasOp: true, OpID: op(3, 1)}
	if err := r.ApplyMutation(m); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Apply(fbfUpdate("k", 1, op(3, 1))); err != nil || !m.Dismissed {
		t.Fatalf("retry after the decision: %+v %v, want dismissed", m, err)
	}
}

// TestOpStatusLedThisRun: a replica asked about an op it led since its last
// start answers that it counts it (coltype.OpKept, its current counter id
// and the clock its shard reached), so that a restarted leader holding the
// same op in doubt takes its own application back (Decide's first rule).
// It answered "not led" before, leaving the restarted leader to the filter
// and the cell, which cannot tell this from a copy of the restarted
// leader's own application (node/testdata/scenarios/
// fbf_leader_crash_later_op_replicated.txt). An op it only received, or
// led longer than a filter window ago, is not led.
func TestOpStatusLedThisRun(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := testConfig(t.TempDir())
	cfg.Now = func() time.Time { return now }
	r := mustOpen(t, cfg)
	defer r.Close()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	// Ops over several seconds (several buckets), on two keys.
	for seq := uint64(1); seq <= 300; seq++ {
		if _, err := r.Apply(fbfUpdate(fmt.Sprint("k", seq%2), 1, op(1, seq))); err != nil {
			t.Fatal(err)
		}
		now = now.Add(10 * time.Millisecond)
	}
	for seq := uint64(1); seq <= 300; seq++ {
		key := fmt.Sprint("k", seq%2)
		a, err := r.OpStatus(fbfTable.ID, []byte(key), "c", op(1, seq))
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != coltype.OpKept || a.CounterID != r.CounterID() || a.Clock != int64(seq+1)/2 {
			t.Fatalf("op %d led this run: status %v, counter id %s, clock %d; want kept, %s, %d", seq, a.Status, a.CounterID, a.Clock, r.CounterID(), (seq+1)/2)
		}
		// The same op id on the other key was not led.
		if a, _ := r.OpStatus(fbfTable.ID, []byte(fmt.Sprint("k", (seq+1)%2)), "c", op(1, seq)); a.Status != coltype.OpNotLed {
			t.Fatalf("op %d on the other key: %v, want not led", seq, a.Status)
		}
	}
	// Received from another leader: not led here.
	m := coltype.Mutation{Table: fbfTable.ID, Key: []byte("k0"), Cell: ctxCell(t, counters.Shard{ID: counters.ID{7}, Clock: 1, Count: 1, Kind: counters.Global}),
		HasOp: true, OpID: op(2, 1)}
	if err := r.ApplyMutation(m); err != nil {
		t.Fatal(err)
	}
	if a, _ := r.OpStatus(fbfTable.ID, []byte("k0"), "c", op(2, 1)); !a.Seen || a.Status != coltype.OpNotLed {
		t.Fatalf("an op received from another leader: seen %v, status %v; want seen, not led", a.Seen, a.Status)
	}
	// Past the window the ops are forgotten (as the filter forgets them).
	w, _ := r.DedupWindow(fbfTable.ID, "c")
	now = now.Add(w + time.Hour)
	if _, err := r.Apply(fbfUpdate("k0", 1, op(1, 1000))); err != nil {
		t.Fatal(err)
	}
	if a, _ := r.OpStatus(fbfTable.ID, []byte("k1"), "c", op(1, 1)); a.Status != coltype.OpNotLed {
		t.Fatalf("an op led more than a window ago: %v, want not led", a.Status)
	}
	if n := len(r.ledNow.buckets); n != 1 {
		t.Fatalf("%d buckets of led ops kept past the window, want 1", n)
	}
}
