package replica

import (
	"crypto/rand"
	"testing"

	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
)

var handoffTable = TableDef{ID: 21, Keyspace: "ks", Name: "h", Columns: []ColumnDef{{"c", "counter"}, {"h", HandoffCounterType}}}

func newID(t testing.TB) handoff.ID {
	var id handoff.ID
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	return id
}

func enc(t testing.TB, c *handoff.Counter) []byte {
	t.Helper()
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dec(t testing.TB, b []byte) *handoff.Counter {
	t.Helper()
	c := handoff.NewCounter(handoff.ID{}, 0)
	if err := c.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// exchange sends a client's view to r and merges the reply back.
func exchange(t testing.TB, r *Replica, key string, cl *handoff.Counter) {
	t.Helper()
	reply, err := r.Exchange(handoffTable.ID, []byte(key), "h", enc(t, cl.View(handoff.ID{}, 0)))
	if err != nil {
		t.Fatal(err)
	}
	cl.Merge(dec(t, reply))
}

func openHandoff(t *testing.T, dir string) *Replica {
	t.Helper()
	r := mustOpen(t, testConfig(dir))
	if _, err := r.table(handoffTable.ID); err != nil {
		if err := r.CreateTable(handoffTable); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestHandoffExchangeHandsOffAndPersists(t *testing.T) {
	dir := t.TempDir()
	r := openHandoff(t, dir)
	cl := handoff.NewCounter(newID(t), 1)
	cl.Add(5)
	rounds := 0
	for !cl.Handed() {
		if rounds++; rounds > 4 {
			t.Fatalf("not handed off after %d exchanges", rounds-1)
		}
		exchange(t, r, "k", cl)
	}
	if got := value(t, r, handoffTable.ID, "k", "h"); got != 5 {
		t.Fatalf("value %d, want 5", got)
	}
	if st := r.HandoffStats(); st.Slots != 0 || st.Cells != 1 {
		t.Fatalf("stats after a complete handoff %+v: want no slot left", st)
	}
	// The exchange is idempotent: the same (old) message again changes nothing.
	writes := r.HandoffStats().Writes
	exchange(t, r, "k", cl)
	exchange(t, r, "k", cl)
	if w := r.HandoffStats().Writes; w != writes {
		t.Fatalf("repeated exchanges of a handed-off client wrote %d new versions", w-writes)
	}
	// Open a slot, restart, finish the handoff: the slot survived.
	cl.Add(2)
	exchange(t, r, "k", cl) // slot
	if st := r.HandoffStats(); st.Slots != 1 {
		t.Fatalf("slots %d, want 1", st.Slots)
	}
	r.Close()
	r = openHandoff(t, dir)
	defer r.Close()
	if got := value(t, r, handoffTable.ID, "k", "h"); got != 5 {
		t.Fatalf("value after restart %d, want 5", got)
	}
	for i := 0; !cl.Handed(); i++ {
		if i > 4 {
			t.Fatal("not handed off after the restart")
		}
		exchange(t, r, "k", cl)
	}
	if got := value(t, r, handoffTable.ID, "k", "h"); got != 7 {
		t.Fatalf("value %d, want 7", got)
	}
	// After a flush the state comes from an SSTable.
	if err := r.Flush(handoffTable.ID); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r = openHandoff(t, dir)
	defer r.Close()
	if got := value(t, r, handoffTable.ID, "k", "h"); got != 7 {
		t.Fatalf("value after flush and restart %d, want 7", got)
	}
	cell, _, err := r.Read(handoffTable.ID, []byte("k"), "h")
	if err != nil {
		t.Fatal(err)
	}
	f, owner, version, err := HandoffCellValue(cell.Value)
	if err != nil || f != 7 || owner != handoff.ID(r.HostID()) || version < 3 {
		t.Fatalf("cell: fetch %d owner %v version %d err %v", f, owner, version, err)
	}
}

// TestHandoffDuplicatesAndReorders replays, duplicates and reorders a
// client's messages and the replica's answers, with a restart in the
// middle: the total is exact once the client is handed off.
func TestHandoffDuplicatesAndReorders(t *testing.T) {
	rng := testseed.Rand(t)
	dir := t.TempDir()
	r := openHandoff(t, dir)
	defer func() { r.Close() }()
	clients := []*handoff.Counter{handoff.NewCounter(newID(t), 1), handoff.NewCounter(newID(t), 1), handoff.NewCounter(newID(t), 1)}
	var sent [][]byte // every message a client ever sent, replayed at random
	var replies []struct {
		c int
		b []byte
	}
	total := uint64(0)
	for step := 0; step < 600; step++ {
		i := rng.IntN(len(clients))
		cl := clients[i]
		switch rng.IntN(6) {
		case 0, 1:
			n := uint64(rng.IntN(5) + 1)
			cl.Add(n)
			total += n
		case 2: // a fresh exchange whose answer is held back
			m := enc(t, cl.View(handoff.ID{}, 0))
			sent = append(sent, m)
			reply, err := r.Exchange(handoffTable.ID, []byte("k"), "h", m)
			if err != nil {
				t.Fatal(err)
			}
			replies = append(replies, struct {
				c int
				b []byte
			}{i, reply})
		case 3: // an old message replayed (a duplicate arriving late)
			if len(sent) > 0 {
				if _, err := r.Exchange(handoffTable.ID, []byte("k"), "h", sent[rng.IntN(len(sent))]); err != nil {
					t.Fatal(err)
				}
			}
		case 4: // a held-back answer delivered, maybe again later
			if len(replies) > 0 {
				x := replies[rng.IntN(len(replies))]
				clients[x.c].Merge(dec(t, x.b))
			}
		case 5:
			if rng.IntN(20) == 0 {
				r.Close()
				r = openHandoff(t, dir)
			}
		}
		if got := uint64(value(t, r, handoffTable.ID, "k", "h")); got > total {
			t.Fatalf("step %d: value %d over the %d increments issued", step, got, total)
		}
	}
	for _, cl := range clients {
		for i := 0; !cl.Handed(); i++ {
			if i > 6 {
				t.Fatal("client not handed off")
			}
			exchange(t, r, "k", cl)
		}
	}
	if got := uint64(value(t, r, handoffTable.ID, "k", "h")); got != total {
		t.Fatalf("value %d, want %d", got, total)
	}
	// Old messages after the clients are done create slots no more.
	for _, m := range sent {
		if _, err := r.Exchange(handoffTable.ID, []byte("k"), "h", m); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range clients {
		exchange(t, r, "k", cl)
		exchange(t, r, "k", cl)
	}
	if st := r.HandoffStats(); st.Slots != 0 {
		t.Fatalf("%d slots left after every client is handed off", st.Slots)
	}
	if got := uint64(value(t, r, handoffTable.ID, "k", "h")); got != total {
		t.Fatalf("value %d after replays, want %d", got, total)
	}
}

// TestHandoffTierZeroExchange hands increments to two replicas and lets
// them exchange views, as anti-entropy does, and as a read repair's foreign
// cell does through ApplyMutation.
func TestHandoffTierZeroExchange(t *testing.T) {
	a, b := openHandoff(t, t.TempDir()), openHandoff(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	ca, cb := handoff.NewCounter(newID(t), 1), handoff.NewCounter(newID(t), 1)
	ca.Add(3)
	cb.Add(4)
	for !ca.Handed() || !cb.Handed() {
		exchange(t, a, "k", ca)
		exchange(t, b, "k", cb)
	}
	if len(a.TakeHandoffDirty()) != 1 || len(a.TakeHandoffDirty()) != 0 {
		t.Fatal("dirty set: want the one cell once")
	}
	view, err := a.HandoffView(handoffTable.ID, []byte("k"), "h", handoff.ID(b.HostID()))
	if err != nil {
		t.Fatal(err)
	}
	reply, err := b.Exchange(handoffTable.ID, []byte("k"), "h", view)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exchange(handoffTable.ID, []byte("k"), "h", reply); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Replica{a, b} {
		if got := value(t, r, handoffTable.ID, "k", "h"); got != 7 {
			t.Fatalf("value %d after a tier-0 exchange, want 7", got)
		}
	}
	// A cell of another owner arriving as a mutation is merged, not stored.
	ca.Add(10)
	for !ca.Handed() {
		exchange(t, a, "k", ca)
	}
	cell, _, _ := a.Read(handoffTable.ID, []byte("k"), "h")
	if err := b.ApplyMutation(Mutation{Table: handoffTable.ID, Key: []byte("k"), Cell: cell}); err != nil {
		t.Fatal(err)
	}
	bc, _, _ := b.Read(handoffTable.ID, []byte("k"), "h")
	if f, owner, _, _ := HandoffCellValue(bc.Value); f != 17 || owner != handoff.ID(b.HostID()) {
		t.Fatalf("b after a foreign mutation: fetch %d, owner %v (want 17, b's own)", f, owner)
	}
	if b.Repairs(handoffTable.ID, "h") || !b.Repairs(handoffTable.ID, "c") {
		t.Fatal("Repairs: want false for the handoff column only")
	}
	if _, err := b.Delete(handoffTable.ID, []byte("k"), 0); err == nil {
		t.Fatal("deleting a row with a handoff column succeeded")
	}
	if _, err := b.Apply(Update{Table: handoffTable.ID, Key: []byte("k"), Column: "h", Delta: 1}); err == nil {
		t.Fatal("the leader path accepted a handoff update")
	}
}

// TestHandoffCellMergeIsSemilattice checks commutativity, associativity and
// idempotence of Merge over versions of several owners, and that it picks
// the newest version of one owner and the largest fetch across owners.
func TestHandoffCellMergeIsSemilattice(t *testing.T) {
	rng := testseed.Rand(t)
	var cells []row.Cell
	for o := 0; o < 3; o++ {
		st := handoff.NewCounter(newID(t), 0)
		cl := handoff.NewCounter(newID(t), 1)
		for v := uint64(1); v <= 4; v++ {
			cl.Add(uint64(rng.IntN(3)))
			st.Merge(cl.View(handoff.ID{}, 0))
			cl.Merge(st.View(cl.ID(), 1))
			cells = append(cells, row.Cell{Column: "h", Value: encodeHandoffCell(v, enc(t, st)), Timestamp: int64(rng.IntN(10))})
		}
	}
	var ht handoffCounter
	m := func(a, b row.Cell) row.Cell {
		c, err := ht.Merge(a, b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	eq := func(a, b row.Cell) bool { return string(a.Value) == string(b.Value) && a.Timestamp == b.Timestamp }
	for i := 0; i < 500; i++ {
		a, b, c := cells[rng.IntN(len(cells))], cells[rng.IntN(len(cells))], cells[rng.IntN(len(cells))]
		if !eq(m(a, b), m(b, a)) || !eq(m(m(a, b), c), m(a, m(b, c))) || !eq(m(a, a), a) {
			t.Fatal("merge is not a semilattice")
		}
	}
	for o := 0; o < 3; o++ {
		newest := m(m(cells[4*o+3], cells[4*o]), m(cells[4*o+1], cells[4*o+2]))
		if string(newest.Value) != string(cells[4*o+3].Value) {
			t.Fatal("merge of one owner's versions did not keep the highest version")
		}
	}
	all := cells[0]
	var best int64
	for _, c := range cells {
		all = m(all, c)
		v, _ := ht.Value(c)
		best = max(best, v)
	}
	if v, _ := ht.Value(all); v != best {
		t.Fatalf("merge of every cell reads %d, want the largest fetch %d", v, best)
	}
}
