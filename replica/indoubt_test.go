package replica

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/vfs"
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
		early   bool // DecideEarly drops it: one of the answers settles it alone
		// countedBy: other leaders' counted replications of the op received
		// while it was in doubt here.
		countedBy []counters.ID
	}{
		{"nobody else saw it", []coltype.OpAnswer{{}, {}}, true, false, nil},
		{"my replication reached them", []coltype.OpAnswer{
			{Seen: true, Found: true, Cell: ctxCell(t, mine(7))},
			{Seen: true, Found: true, Cell: ctxCell(t, mine(9), theirs(other, 1))}}, true, false, nil},
		{"seen, but only my older shard: another leader counted it", []coltype.OpAnswer{
			{Seen: true, Found: true, Cell: ctxCell(t, mine(6), theirs(other, 4))}, {}}, false, false, nil},
		{"seen without my shard at all", []coltype.OpAnswer{{Seen: true, Found: true, Cell: ctxCell(t, theirs(other, 4))}}, false, false, nil},
		{"seen with no cell: a false positive, no evidence", []coltype.OpAnswer{{Seen: true}}, true, false, nil},
		{"another leader kept it", []coltype.OpAnswer{{Status: coltype.OpKept, CounterID: other, Clock: 2}}, false, true, nil},
		{"another leader kept it, the other replica saw nothing", []coltype.OpAnswer{{}, {Status: coltype.OpKept, CounterID: other, Clock: 2}}, false, true, nil},
		{"another leader in doubt with a lower id", []coltype.OpAnswer{{Status: coltype.OpPending, CounterID: third, Clock: 2, Seen: true, Found: true, Cell: ctxCell(t, theirs(third, 2))}}, false, true, nil},
		{"another leader in doubt with a higher id, its copy explains itself", []coltype.OpAnswer{
			{Status: coltype.OpPending, CounterID: other, Clock: 2, Seen: true, Found: true, Cell: ctxCell(t, theirs(other, 2))},
			{Seen: true, Found: true, Cell: ctxCell(t, theirs(other, 2))}}, true, false, nil},
		{"a leader that took it back explains its own copy", []coltype.OpAnswer{
			{Status: coltype.OpDropped, CounterID: other, Clock: 2, Seen: true, Found: true, Cell: ctxCell(t, theirs(other, 3))}}, true, false, nil},
		{"another leader replicated it counted, and has forgotten it since", []coltype.OpAnswer{{}, {}}, false, false, []counters.ID{other}},
		{"another leader replicated it counted, and took it back since", []coltype.OpAnswer{
			{Status: coltype.OpDropped, CounterID: other, Clock: 2}, {}}, true, false, []counters.ID{other}},
		{"another leader replicated it counted, and holds it in doubt with a higher id", []coltype.OpAnswer{
			{Status: coltype.OpPending, CounterID: other, Clock: 2}, {}}, true, false, []counters.ID{other}},
		{"another leader replicated it counted, and holds it in doubt with a lower id", []coltype.OpAnswer{
			{Status: coltype.OpPending, CounterID: third, Clock: 2}, {}}, false, true, []counters.ID{third}},
		{"two leaders replicated it counted, one took it back", []coltype.OpAnswer{
			{Status: coltype.OpDropped, CounterID: other, Clock: 2}, {}}, false, false, []counters.ID{other, third}},
	} {
		self := self
		self.CountedBy = tc.countedBy
		if keep, why := coltype.Decide(self, tc.answers); keep != tc.keep {
			t.Errorf("%s: keep %v (%s), want %v", tc.name, keep, why, tc.keep)
		}
		// An early drop is final: every answer it was made from, with or
		// without the others, drops the update in Decide too.
		for i := range tc.answers {
			drop, why := coltype.DecideEarly(self, tc.answers[i:i+1])
			if drop && !tc.early {
				t.Errorf("%s: answer %d alone drops it early (%s)", tc.name, i, why)
			}
			if keep, _ := coltype.Decide(self, tc.answers[i:i+1]); drop && keep {
				t.Errorf("%s: answer %d alone drops it early, and Decide keeps it", tc.name, i)
			}
		}
		if drop, _ := coltype.DecideEarly(self, tc.answers); drop != tc.early {
			t.Errorf("%s: DecideEarly drops %v, want %v", tc.name, drop, tc.early)
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
	// a's first: taking an update back rewrites the in_doubt file at once,
	// and b, settled after it, is still listed in doubt by the file.
	slices.SortFunc(ops, func(x, y coltype.InDoubtOp) int { return bytes.Compare(x.Key, y.Key) })
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
	crash := func() {
		t.Helper()
		if err := r.Crash(); err != nil {
			t.Fatal(err)
		}
		r = mustOpen(t, testConfig(dir))
	}
	crash()
	// A crash before the in_doubt file was written again after b's
	// settlement: the file still lists b's op. The op taken back is not in
	// doubt again (the file was rewritten when it was, and its compensation
	// record is the decision); the kept one is settled again (keeping is
	// not logged: asked again, the replicas give the same answer).
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
	// Once the file is written after the settlement, a crash puts nothing
	// back in doubt: the file accounts for the earlier runs' ops.
	if err := r.SaveInDoubt(); err != nil {
		t.Fatal(err)
	}
	crash()
	if again := r.InDoubt(); len(again) != 0 {
		t.Fatalf("in doubt after a crash that followed the file's rewrite: %+v, want none", again)
	}
	check("after a third unclean restart")
}

// TestCountedElsewhereWhileInDoubt: another leader's counted replication
// of an op this replica holds in doubt is kept as evidence (the op's
// CountedBy), in the in_doubt file before the mutation is acknowledged, so
// that it outlives a crash and the other leader's memory of the op; a
// replication of another op, or one without the leader's mark, is not.
func TestCountedElsewhereWhileInDoubt(t *testing.T) {
	dir := t.TempDir()
	r := mustOpen(t, testConfig(dir))
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(fbfUpdate("a", 5, op(1, 1))); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, testConfig(dir))
	defer func() { r.Close() }()
	if ops := r.InDoubt(); len(ops) != 1 || len(ops[0].CountedBy) != 0 {
		t.Fatalf("in doubt after the unclean restart: %+v, want one op without evidence", ops)
	}
	other := counters.ID{0xee}
	replication := func(id counters.ID, opID [16]byte, led bool) coltype.Mutation {
		return coltype.Mutation{Table: fbfTable.ID, Key: []byte("a"), Cell: ctxCell(t, counters.Shard{ID: id, Clock: 3, Count: 5, Kind: counters.Global}),
			HasOp: true, OpID: opID, Log: coltype.LeaderLog{Led: led, Delta: 5}}
	}
	for _, m := range []coltype.Mutation{
		replication(other, op(1, 2), true),              // another op
		replication(counters.ID{0xdd}, op(1, 1), false), // not marked counted: a settlement, a repair
	} {
		if m.Log.Led {
			if _, _, err := r.ApplyCounted(m); err != nil {
				t.Fatal(err)
			}
		} else if err := r.ApplyMutation(m); err != nil {
			t.Fatal(err)
		}
	}
	if ops := r.InDoubt(); len(ops[0].CountedBy) != 0 {
		t.Fatalf("evidence from other mutations: %v", ops[0].CountedBy)
	}
	for range 2 { // the second is a duplicate
		if _, counts, err := r.ApplyCounted(replication(other, op(1, 1), true)); err != nil || counts {
			t.Fatalf("ApplyCounted of a retry of the op in doubt: counts %v, %v; want false, nil (the resolver settles it)", counts, err)
		}
	}
	if ops := r.InDoubt(); len(ops) != 1 || len(ops[0].CountedBy) != 1 || ops[0].CountedBy[0] != other {
		t.Fatalf("in doubt after the retry's replication: %+v, want the other leader as evidence", ops)
	}
	// Written before the answer: a crash at once keeps it.
	if err := r.Crash(); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, testConfig(dir))
	ops := r.InDoubt()
	if len(ops) != 1 || len(ops[0].CountedBy) != 1 || ops[0].CountedBy[0] != other {
		t.Fatalf("in doubt after a crash: %+v, want the evidence kept", ops)
	}
	// The other leader has forgotten it: the update is taken back.
	if keep, why := coltype.Decide(ops[0], []coltype.OpAnswer{{}, {}}); keep {
		t.Fatalf("kept (%s), want taken back", why)
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

// TestOpSettleKeepsEvidence: what a replica's answer to a settling leader
// showed (OpSettle: it led the op; its filter has the id) is still in its
// answers after the filter window has made it forget the op, until the
// settling leader's decision (a mutation with the op id) arrives. A mere
// question (OpStatus, OpPeek) keeps nothing. Without it a leader that could
// not hear every replica within the window kept an update another leader
// had counted (node/testdata/scenarios/fbf_settlement_evidence_kept.txt).
func TestOpSettleKeepsEvidence(t *testing.T) {
	cfg := testConfig(t.TempDir())
	r, now := fbfOnAClock(t, &cfg)
	defer r.Close()
	for seq := uint64(1); seq <= 2; seq++ {
		if _, err := r.Apply(fbfUpdate("k", 1, op(1, seq))); err != nil {
			t.Fatal(err)
		}
	}
	settled, err := r.OpSettle(fbfTable.ID, []byte("k"), "c", op(1, 1))
	if err != nil || settled.Status != coltype.OpKept {
		t.Fatalf("OpSettle of an op led here: %+v %v, want kept", settled, err)
	}
	if a, err := r.OpPeek(fbfTable.ID, []byte("k"), "c", op(1, 2)); err != nil || a.Status != coltype.OpKept {
		t.Fatalf("OpPeek of an op led here: %+v %v, want kept", a, err)
	}
	w, _ := r.DedupWindow(fbfTable.ID, "c")
	*now = now.Add(w + time.Minute)
	if _, err := r.Apply(fbfUpdate("other", 1, op(1, 1000))); err != nil {
		t.Fatal(err)
	}
	a, err := r.OpStatus(fbfTable.ID, []byte("k"), "c", op(1, 1))
	if err != nil || a.Status != coltype.OpKept || a.CounterID != settled.CounterID || a.Clock != settled.Clock || a.Seen != settled.Seen {
		t.Fatalf("past the window, the op a settling leader asked about: %+v %v, want what OpSettle answered: %+v", a, err, settled)
	}
	if a, _ := r.OpStatus(fbfTable.ID, []byte("k"), "c", op(1, 2)); a.Status != coltype.OpNotLed {
		t.Fatalf("past the window, an op only peeked at: %v, want not led", a.Status)
	}
	// The settling leader's decision arrives: the evidence is let go.
	m := coltype.Mutation{Table: fbfTable.ID, Key: []byte("k"), Cell: ctxCell(t, counters.Shard{ID: counters.ID{7}, Clock: 1, Count: 1, Kind: counters.Global}),
		HasOp: true, OpID: op(1, 1)}
	if err := r.ApplyMutation(m); err != nil {
		t.Fatal(err)
	}
	if a, _ := r.OpStatus(fbfTable.ID, []byte("k"), "c", op(1, 1)); a.Status != coltype.OpNotLed {
		t.Fatalf("after the decision: %v, want not led", a.Status)
	}
	// Nothing is kept past settleEvidenceLifetime either.
	if a, err := r.OpSettle(fbfTable.ID, []byte("other"), "c", op(1, 1000)); err != nil || a.Status != coltype.OpKept {
		t.Fatalf("OpSettle of an op led here: %+v %v, want kept", a, err)
	}
	*now = now.Add(settleEvidenceLifetime + time.Minute)
	if a, _ := r.OpStatus(fbfTable.ID, []byte("other"), "c", op(1, 1000)); a.Status != coltype.OpNotLed {
		t.Fatalf("past the evidence's lifetime: %v, want not led", a.Status)
	}
}

// TestOpStatusLedThisRun: a replica asked about an op it led since its last
// start answers that it counts it (coltype.OpKept, its current counter id
// and a clock at or past the op's), so that a restarted leader holding the
// same op in doubt takes its own application back (Decide's first rule).
// It answered "not led" before, leaving the restarted leader to the filter
// and the cell, which cannot tell this from a copy of the restarted
// leader's own application (node/testdata/scenarios/
// fbf_leader_crash_later_op_replicated.txt). An op it only received, or
// led longer than a filter window ago, is not led.
func TestOpStatusLedThisRun(t *testing.T) {
	cfg := testConfig(t.TempDir())
	r, now := fbfOnAClock(t, &cfg)
	defer r.Close()
	// Ops over several seconds (several buckets), on two keys.
	for seq := uint64(1); seq <= 300; seq++ {
		if _, err := r.Apply(fbfUpdate(fmt.Sprint("k", seq%2), 1, op(1, seq))); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(10 * time.Millisecond)
	}
	for seq := uint64(1); seq <= 300; seq++ {
		key := fmt.Sprint("k", seq%2)
		a, err := r.OpStatus(fbfTable.ID, []byte(key), "c", op(1, seq))
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != coltype.OpKept || a.CounterID != r.CounterID() || a.Clock < int64(seq+1)/2 {
			t.Fatalf("op %d led this run: status %v, counter id %s, clock %d; want kept, %s, at least %d", seq, a.Status, a.CounterID, a.Clock, r.CounterID(), (seq+1)/2)
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
	*now = now.Add(w + time.Hour)
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

// TestFBFUnloggedDeltaInALaterRecord: an FBF leader adds two updates to its
// shard, op 2 then op 3 (compare-and-swap: op 2 at clock 2, op 3 at clock
// 3), and op 3's record reaches the commit log first; the node stops (a
// kill or a power cut, here after op 3's record is synced) before op 2's
// record is written. Op 3's record, the whole shard, holds op 2's delta;
// when no record held op 2's id, nothing was in doubt for op 2 after the
// restart and no filter had it, so the client's retry of op 2 (it got no
// answer) was counted again, here or at any other leader: 121 where the
// clients added 111. In batch and group mode the restart took back the
// delta of such a gap; in periodic mode, where the gap's update may have
// been acknowledged before the power cut, it did not, and the retry
// over-counted. Op 3's record now carries op 2 (commitlog.Record.Carried):
// after the restart op 2 is a led op like any other, in the filter and in
// doubt, and its retry is dismissed: 111 in every mode.
func TestFBFUnloggedDeltaInALaterRecord(t *testing.T) {
	for _, mode := range []commitlog.SyncMode{commitlog.SyncBatch, commitlog.SyncGroup, commitlog.SyncPeriodic} {
		t.Run(mode.String(), func(t *testing.T) {
			_, cfg := overtakenRecord(t, mode, fbfUpdate("k", 10, op(1, 2)))
			r2, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Close()
			var doubted bool
			for _, o := range r2.InDoubt() {
				doubted = doubted || o.OpID == op(1, 2)
				if _, err := r2.ResolveInDoubt(o, true); err != nil { // no other replica counted them
					t.Fatal(err)
				}
			}
			if !doubted {
				t.Error("op 2, named only by op 3's record, is not in doubt after the unclean start")
			}
			// The client's retry of op 2.
			if m, err := r2.Apply(fbfUpdate("k", 10, op(1, 2))); err != nil || !m.Dismissed {
				t.Fatalf("retry of op 2: dismissed %v, %v; want dismissed (op 3's record names it)", m.Dismissed, err)
			}
			if v := value(t, r2, fbfTable.ID, "k", "c"); v != 111 {
				t.Fatalf("value after the restart and op 2's retry: %d, want 111 (1 + 10 + 100)", v)
			}
			// Another unclean start changes nothing.
			cfg.FS = cfg.FS.(*vfs.MemFS).CrashClone(vfs.CrashOptions{})
			r3, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r3.Close()
			for _, o := range r3.InDoubt() {
				if _, err := r3.ResolveInDoubt(o, true); err != nil {
					t.Fatal(err)
				}
			}
			if v := value(t, r3, fbfTable.ID, "k", "c"); v != 111 {
				t.Fatalf("value after a second unclean restart: %d, want 111", v)
			}
		})
	}
}

// TestUnloggedDeltaWithoutOpID: the same overtaking with an update that has
// no op id (applied like a vanilla update, so no record can name it): in
// batch and group mode the unclean start takes its delta back (it was never
// acknowledged), 101 where op 1 and op 3 added 101.
func TestUnloggedDeltaWithoutOpID(t *testing.T) {
	for _, mode := range []commitlog.SyncMode{commitlog.SyncBatch, commitlog.SyncGroup} {
		t.Run(mode.String(), func(t *testing.T) {
			noOp := fbfUpdate("k", 10, [16]byte{})
			noOp.HasOp = false
			_, cfg := overtakenRecord(t, mode, noOp)
			r2, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Close()
			for _, o := range r2.InDoubt() {
				if _, err := r2.ResolveInDoubt(o, true); err != nil {
					t.Fatal(err)
				}
			}
			if v := value(t, r2, fbfTable.ID, "k", "c"); v != 101 {
				t.Fatalf("value after the restart: %d, want 101 (1 + 100; the update without an op id was never acknowledged)", v)
			}
		})
	}
}

// overtakenRecord applies op 1 (+1) to an FBF table on an in-memory disk
// in the given commit log mode, then held (its compare-and-swap done, its
// record not written) while op 3 (+100) is applied, and returns what a
// power cut at that moment leaves: the replica, closed at the test's end,
// and the configuration that opens its disk image. In periodic mode the
// log is synced after op 3, as its timer would.
func overtakenRecord(t *testing.T, mode commitlog.SyncMode, held coltype.Update) (*Replica, Config) {
	t.Helper()
	mem := vfs.NewMem()
	cfg := Config{Dir: "/db", FS: mem, CommitLog: commitlog.Options{Sync: mode, GroupWindow: 100 * time.Microsecond, SyncPeriod: time.Hour}, Logger: quietLogger()}
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(fbfUpdate("k", 1, op(1, 1))); err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	var hooked atomic.Bool
	leaderWriteHook = func(m coltype.Mutation) {
		if m.Cell.Column == "c" && m.OpID == held.OpID && m.HasOp == held.HasOp && hooked.CompareAndSwap(false, true) {
			close(reached)
			<-release
		}
	}
	stuck := make(chan struct{})
	go func() {
		defer close(stuck)
		r.Apply(held) // its outcome is the crash's
	}()
	t.Cleanup(func() {
		close(release)
		<-stuck
		leaderWriteHook = nil
		r.Close()
	})
	<-reached
	if _, err := r.Apply(fbfUpdate("k", 100, op(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := r.log.Sync(); err != nil {
		t.Fatal(err)
	}
	// The node stops now: what its disk holds, the held update's record not.
	cfg.FS = mem.CrashClone(vfs.CrashOptions{})
	return r, cfg
}

// TestInDoubtSurvivesAnotherUncleanStop: an update in doubt that was not
// settled before the next unclean stop is still in doubt after it, even
// when the node led later updates (of other cells) for longer than the
// span that puts a stop's last updates in doubt. The span was measured
// from the last update the log holds, of whichever run: the unsettled
// update fell out of it and counted as kept, unsettled, while another
// leader had counted its retry (seen in SIGKILL runs of bench overcount,
// a node killed again while a replica of its cells in doubt was down).
func TestInDoubtSurvivesAnotherUncleanStop(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	r, now, at := ledOneOnAClock(t, &cfg)
	span := 2 * 5 * time.Second // twice the default counter write timeout
	unclean := func() {
		t.Helper()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		// (A node closed with updates in doubt leaves no clean mark.)
		if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		r = mustOpen(t, cfg)
	}
	unclean()
	defer func() { r.Close() }()
	if ops := r.InDoubt(); len(ops) != 1 {
		t.Fatalf("%d updates in doubt after the first unclean stop, want 1", len(ops))
	}
	// Unsettled (a replica of its cell is down), while the node leads other
	// cells past the span.
	*now = now.Add(span + time.Second)
	if _, err := r.Apply(at(fbfUpdate("b", 1, op(1, 2)))); err != nil {
		t.Fatal(err)
	}
	unclean()
	ops := r.InDoubt()
	var found bool
	for _, o := range ops {
		found = found || o.OpID == op(1, 1)
	}
	if !found {
		t.Fatalf("after a second unclean stop, in doubt: %d updates, not the unsettled one of the first", len(ops))
	}
}

// TestInDoubtOutlivesItsRecord: an update still in doubt when its led
// record has left the commit log (a filter window later, once flushed) is
// still in doubt after the next unclean start, from the in_doubt file.
// Before the file, the node forgot the doubt with the record and counted the
// update unsettled, though another leader may have counted its retry (seen
// in SIGKILL runs: a node that started past the window of 142 updates it
// had not settled). The test checks that the log has indeed forgotten the
// record, by opening a copy of the data directory without the file.
func TestInDoubtOutlivesItsRecord(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.CommitLog.SegmentSize = 4 << 10
	r, now, at := ledOneOnAClock(t, &cfg)
	crash := func() {
		t.Helper()
		if err := r.Crash(); err != nil {
			t.Fatal(err)
		}
		r = mustOpen(t, cfg)
	}
	crash()
	defer func() { r.Close() }()
	if ops := r.InDoubt(); len(ops) != 1 {
		t.Fatalf("%d updates in doubt after the unclean stop, want 1", len(ops))
	}
	// Unsettled for longer than the window, while the node leads other
	// cells through several segments, flushed: the record of op 1 goes.
	w, _ := r.DedupWindow(fbfTable.ID, "c")
	*now = now.Add(w + time.Minute)
	for seq := uint64(2); seq < 400; seq++ {
		if _, err := r.Apply(at(fbfUpdate(fmt.Sprint("k", seq), 1, op(1, seq)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(fbfTable.ID); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(w + time.Minute)
	if err := r.Flush(fbfTable.ID); err != nil {
		t.Fatal(err)
	}
	crash()
	ops := r.InDoubt()
	if len(ops) != 1 || ops[0].OpID != op(1, 1) || ops[0].Delta != 5 {
		t.Fatalf("in doubt after an unclean start past the window: %+v, want op 1 (delta 5) alone", ops)
	}
	if _, _, err := r.ReadRow(fbfTable.ID, []byte("a")); !errors.Is(err, coltype.ErrInDoubt) {
		t.Fatalf("read of the cell in doubt: %v, want coltype.ErrInDoubt", err)
	}
	// Without the file, the log alone no longer knows op 1.
	r.Close()
	bare := t.TempDir()
	copyDir(t, dir, bare)
	if err := os.Remove(filepath.Join(bare, inDoubtFile)); err != nil {
		t.Fatal(err)
	}
	bcfg := cfg
	bcfg.Dir = bare
	b := mustOpen(t, bcfg)
	defer b.Close()
	for _, o := range b.InDoubt() {
		if o.OpID == op(1, 1) {
			t.Fatal("the commit log still holds op 1's record: the test shows nothing")
		}
	}
	r = mustOpen(t, cfg)
	// Settled at last: taken back, and the file forgets it.
	if _, err := r.ResolveInDoubt(ops[0], false); err != nil {
		t.Fatal(err)
	}
	if err := r.SaveInDoubt(); err != nil {
		t.Fatal(err)
	}
	crash()
	if ops := r.InDoubt(); len(ops) != 0 {
		t.Fatalf("in doubt after settlement and a crash: %+v", ops)
	}
	if v := value(t, r, fbfTable.ID, "a", "c"); v != 0 {
		t.Fatalf("a = %d after its only update was taken back, want 0", v)
	}
}

// TestInDoubtFileDamaged: a damaged or truncated in_doubt file stops Open
// with an error naming it (the updates it lists would otherwise be counted
// unsettled); once restored, the node opens with them in doubt.
func TestInDoubtFileDamaged(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	r := mustOpen(t, cfg)
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(fbfUpdate("a", 5, op(1, 1))); err != nil {
		t.Fatal(err)
	}
	if err := r.Crash(); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, cfg)
	if err := r.Crash(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, inDoubtFile)
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{good[:len(good)-1], append(append([]byte{}, good[:20]...), append([]byte{good[20] ^ 1}, good[21:]...)...), {}} {
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if r, err := Open(cfg); err == nil || !strings.Contains(err.Error(), inDoubtFile) {
			if err == nil {
				r.Close()
			}
			t.Fatalf("Open with a damaged %s (%d bytes): %v, want an error naming it", inDoubtFile, len(bad), err)
		}
	}
	if err := os.WriteFile(p, good, 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, cfg)
	defer r.Close()
	if ops := r.InDoubt(); len(ops) != 1 || ops[0].OpID != op(1, 1) {
		t.Fatalf("in doubt with the file restored: %+v, want op 1", ops)
	}
}

// TestUnloggedGapFlushedIsKept pins the rule that spares a gap in the old
// shard's records that an SSTable explains: a record between two replayed
// ones can be gone with a segment the log released (its records flushed
// first), not lost, and its update must not be taken back. The trails are
// the replay's, as it would find them: clocks 1 and 3 of a cell's shard,
// clock 2's record gone. For a cell whose SSTable holds the shard at clock
// 3 nothing is taken back; for one whose shard is only in the memtable the
// gap's delta (10) is.
func TestUnloggedGapFlushedIsKept(t *testing.T) {
	r := mustOpen(t, testConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"flushed", "memtable"} {
		for seq, delta := range []int64{1, 10, 100} {
			if _, err := r.Apply(fbfUpdate(key, delta, op(uint64(i+1), uint64(seq+1)))); err != nil {
				t.Fatal(err)
			}
		}
		if key == "flushed" {
			if err := r.Flush(fbfTable.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	id := r.CounterID()
	st := &shardTrails{id: id}
	for _, key := range []string{"flushed", "memtable"} {
		for _, s := range []struct{ clock, count, delta int64 }{{1, 1, 1}, {3, 111, 100}} {
			shard, err := counters.FromShards(counters.Shard{ID: id, Clock: s.clock, Count: s.count, Kind: counters.Global}).MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			st.note(commitlog.Record{Table: fbfTable.ID, Key: []byte(key), Column: "c", Kind: commitlog.PayloadShard, Payload: shard, Led: true, Delta: s.delta})
		}
	}
	if err := r.takeBackUnlogged(st); err != nil {
		t.Fatal(err)
	}
	if v := value(t, r, fbfTable.ID, "flushed", "c"); v != 111 {
		t.Fatalf("flushed cell: %d, want 111 (its gap is in an SSTable, nothing taken back)", v)
	}
	if v := value(t, r, fbfTable.ID, "memtable", "c"); v != 101 {
		t.Fatalf("unflushed cell: %d, want 101 (the gap's 10 taken back)", v)
	}
}

// ledOneOnAClock opens a replica on cfg with a virtual clock (*now, which
// the test moves), creates fbfTable and leads op 1 on cell "a" (delta 5);
// at stamps an update with the clock's time.
func ledOneOnAClock(t *testing.T, cfg *Config) (r *Replica, now *time.Time, at func(coltype.Update) coltype.Update) {
	t.Helper()
	r, now = fbfOnAClock(t, cfg)
	at = func(u coltype.Update) coltype.Update { u.OpTime = now.UnixNano(); return u }
	if _, err := r.Apply(at(fbfUpdate("a", 5, op(1, 1)))); err != nil {
		t.Fatal(err)
	}
	return r, now, at
}

// fbfOnAClock opens a replica on cfg with a virtual clock (*now, which the
// test moves) and creates fbfTable.
func fbfOnAClock(t *testing.T, cfg *Config) (*Replica, *time.Time) {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg.Now = func() time.Time { return now }
	r := mustOpen(t, *cfg)
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	return r, &now
}

// TestFBFRecordsNameEveryDelta: writers update one FBF cell at once, each
// held a random while between its compare-and-swap and its record, so that
// records overtake one another. In the log every led record must name
// every op whose delta its shard holds: each op of a lower clock is the
// record's own, carried by it, or named by a record before it in the log.
// A stop after any record then leaves no delta without its op id.
func TestFBFRecordsNameEveryDelta(t *testing.T) {
	seed := testseed.Seed(t)
	for _, mode := range []commitlog.SyncMode{commitlog.SyncPeriodic, commitlog.SyncGroup} {
		t.Run(mode.String(), func(t *testing.T) { recordsNameEveryDelta(t, mode, seed) })
	}
}

func recordsNameEveryDelta(t *testing.T, mode commitlog.SyncMode, seed uint64) {
	mem := vfs.NewMem()
	cfg := Config{Dir: "/db", FS: mem, CommitLog: commitlog.Options{Sync: mode, SyncPeriod: time.Hour, GroupWindow: 100 * time.Microsecond}, Logger: quietLogger()}
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	var delays atomic.Uint64
	delays.Store(seed)
	leaderWriteHook = func(coltype.Mutation) {
		// A per-call draw from the seed (the interleaving is the scheduler's).
		x := delays.Add(0x9e3779b97f4a7c15)
		switch x % 7 {
		case 0:
			time.Sleep(time.Duration(x>>40%200) * time.Microsecond)
		case 1, 2:
			runtime.Gosched()
		}
	}
	defer func() { leaderWriteHook = nil }()
	const writers, each = 8, 150
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := r.Apply(fbfUpdate("k", 1, op(uint64(w+1), uint64(i+1)))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	type named struct {
		clock   int64
		op      [16]byte
		carried []commitlog.CarriedOp
	}
	var recs []named
	l, err := commitlog.Open(commitlog.Options{Dir: "/db/commitlog", FS: mem}, func(_ commitlog.Position, rec commitlog.Record) error {
		if rec.Table != fbfTable.ID || !rec.Led {
			return nil
		}
		ctx, err := counters.Decode(rec.Payload)
		if err != nil {
			return err
		}
		recs = append(recs, named{clock: ctx.Shards()[0].Clock, op: rec.OpID, carried: rec.Carried})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if len(recs) != writers*each {
		t.Fatalf("%d led records, want %d", len(recs), writers*each)
	}
	opAt := map[int64][16]byte{}
	for _, n := range recs {
		opAt[n.clock] = n.op
	}
	seen := map[[16]byte]bool{}
	var overtaken, carried int
	for i, n := range recs {
		mine := map[[16]byte]bool{n.op: true}
		for _, c := range n.carried {
			mine[c.OpID] = true
			if opAt[c.Clock] != c.OpID {
				t.Fatalf("record %d carries op %x at clock %d, whose own record names op %x", i, c.OpID, c.Clock, opAt[c.Clock])
			}
		}
		carried += len(n.carried)
		for c := int64(1); c < n.clock; c++ {
			o := opAt[c]
			if !seen[o] && !mine[o] {
				t.Fatalf("seed %d: record %d (clock %d) holds the delta of op %x (clock %d), which neither it nor a record before it names", seed, i, n.clock, o, c)
			}
			if !seen[o] {
				overtaken++
			}
		}
		for o := range mine {
			seen[o] = true
		}
	}
	t.Logf("%d records, %d deltas held before their op's record, %d ops carried", len(recs), overtaken, carried)
	if overtaken == 0 {
		t.Skipf("seed %d: no record overtook another (the scheduler ran the writers in order)", seed)
	}
}

// TestSettledKeptOutlivesTheWindow: a leader that settles an update it
// held in doubt as kept answers "kept" for it as long as settlement
// evidence lasts, not one filter window from the op's time, and across a
// restart (the in_doubt file keeps the decision). Another leader
// may hold the same op in doubt under a higher counter id (coltype.Decide's
// second rule makes it drop its copy), and may ask only later: the keeper
// used to forget the op at once when it was settled past the window (its
// op time is the client's first attempt), answered "not led", and both
// kept it (TestRandomCluster, periodic mode: 63 read where 62 were added).
func TestSettledKeptOutlivesTheWindow(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	r, now, _ := ledOneOnAClock(t, &cfg)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	r = mustOpen(t, cfg)
	defer r.Close()
	ops := r.InDoubt()
	if len(ops) != 1 {
		t.Fatalf("%d updates in doubt after the unclean stop, want 1", len(ops))
	}
	// Settled late: past the filter window of the op's time.
	w, _ := r.DedupWindow(fbfTable.ID, "c")
	*now = now.Add(w + time.Second)
	if _, err := r.ResolveInDoubt(ops[0], true); err != nil {
		t.Fatal(err)
	}
	settled := *now
	for _, after := range []time.Duration{0, time.Minute, settleEvidenceLifetime - time.Second} {
		*now = settled.Add(after)
		a, err := r.OpStatus(fbfTable.ID, []byte("a"), "c", op(1, 1))
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != coltype.OpKept {
			t.Fatalf("%v after settling it kept: answered %v, want kept", after, a.Status)
		}
	}
	// And after a restart, from the in_doubt file: the decision is not in
	// the log, whose led record is past the window.
	*now = settled.Add(time.Hour)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, cfg)
	if a, err := r.OpStatus(fbfTable.ID, []byte("a"), "c", op(1, 1)); err != nil || a.Status != coltype.OpKept {
		t.Fatalf("an hour after settling it kept, after a restart: answered %v (%v), want kept", a.Status, err)
	}
	if n := len(r.InDoubt()); n != 0 {
		t.Fatalf("%d updates in doubt after the restart, want none (it was settled)", n)
	}
	*now = settled.Add(settleEvidenceLifetime + time.Second)
	if a, _ := r.OpStatus(fbfTable.ID, []byte("a"), "c", op(1, 1)); a.Status != coltype.OpNotLed {
		t.Fatalf("past the evidence lifetime: answered %v, want not led (forgotten)", a.Status)
	}
	// A restart then forgets it too.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, cfg)
	if a, _ := r.OpStatus(fbfTable.ID, []byte("a"), "c", op(1, 1)); a.Status != coltype.OpNotLed {
		t.Fatalf("past the evidence lifetime, after a restart: answered %v, want not led", a.Status)
	}
}

// TestTakenBackOncePastTheWindow: an update in doubt is taken back, the
// node crashes and restarts after the op's filter window, when the op's own
// led record is no longer replayed. ResolveInDoubt rewrote the in_doubt
// file at once (the op settled, taken back); with the file as it was
// before (a crash before the rewrite: the resolver's round used to rewrite
// it only after the settled cell's replication), the compensation in the
// log is still the decision: the op is not put in doubt again, and not
// taken back a second time (TestRandomCluster, group, read 38 for 39: two
// compensations of one op). Either way the op is answered for under the
// shard and clock that counted it, so that a replica's copy of the cell
// holding that shard explains the op id to another leader of it
// (TestRandomCluster, batch: answered under no counter id, the other
// leader took its application back too).
func TestTakenBackOncePastTheWindow(t *testing.T) {
	for _, staleFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale file %v", staleFile), func(t *testing.T) {
			dir := t.TempDir()
			var mu sync.Mutex
			now := time.Now()
			cfg := testConfig(dir)
			cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			r := mustOpen(t, cfg)
			defer func() { r.Close() }()
			if err := r.CreateTable(fbfTable); err != nil {
				t.Fatal(err)
			}
			u := fbfUpdate("a", 5, op(1, 1))
			u.OpTime = cfg.Now().UnixNano()
			if _, err := r.Apply(u); err != nil {
				t.Fatal(err)
			}
			if err := r.Crash(); err != nil {
				t.Fatal(err)
			}
			r = mustOpen(t, cfg)
			ops := r.InDoubt()
			if len(ops) != 1 {
				t.Fatalf("%d updates in doubt after the unclean restart, want 1", len(ops))
			}
			window, ok := r.DedupWindow(fbfTable.ID, "c")
			if !ok || window <= 0 {
				t.Fatalf("the FBF column's window: %v %v", window, ok)
			}
			stale, err := os.ReadFile(filepath.Join(dir, inDoubtFile))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.ResolveInDoubt(ops[0], false); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, inDoubtFile))
			if err != nil {
				t.Fatal(err)
			}
			if s, err := decodeInDoubt(b); err != nil || len(s.ops) != 0 || len(s.settled) != 1 || s.settled[0].kept {
				t.Fatalf("the in_doubt file after taking the op back: %+v, %v; want it settled, taken back", s, err)
			}
			if err := r.Crash(); err != nil {
				t.Fatal(err)
			}
			if staleFile {
				if err := os.WriteFile(filepath.Join(dir, inDoubtFile), stale, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			now = now.Add(window + time.Second)
			mu.Unlock()
			r = mustOpen(t, cfg)
			if again := r.InDoubt(); len(again) != 0 {
				t.Fatalf("in doubt again past the window: %+v, want none (the compensation decided)", again)
			}
			if v := value(t, r, fbfTable.ID, "a", "c"); v != 0 {
				t.Fatalf("a = %d, want 0 (taken back once)", v)
			}
			a, err := r.OpStatus(fbfTable.ID, []byte("a"), "c", op(1, 1))
			if err != nil || a.Status != coltype.OpDropped || a.CounterID != ops[0].CounterID || a.Clock != ops[0].Clock {
				t.Fatalf("answer about the op past the window: %v %v, want dropped %s@%d", a, err, ops[0].CounterID, ops[0].Clock)
			}
		})
	}
}
