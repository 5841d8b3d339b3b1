package replica

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/handoffcol"
	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
)

var handoffTable = coltype.TableDef{ID: 21, Keyspace: "ks", Name: "h", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}, {Name: "h", Type: handoffcol.TypeName}}}

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
	if st := handoffcol.ReplicaStats(r); st.Slots != 0 || st.Cells != 1 {
		t.Fatalf("stats after a complete handoff %+v: want no slot left", st)
	}
	// The exchange is idempotent: the same (old) message again changes nothing.
	writes := handoffcol.ReplicaStats(r).Writes
	exchange(t, r, "k", cl)
	exchange(t, r, "k", cl)
	if w := handoffcol.ReplicaStats(r).Writes; w != writes {
		t.Fatalf("repeated exchanges of a handed-off client wrote %d new versions", w-writes)
	}
	// Open a slot, restart, finish the handoff: the slot survived.
	cl.Add(2)
	exchange(t, r, "k", cl) // slot
	if st := handoffcol.ReplicaStats(r); st.Slots != 1 {
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
	f, owner, version, err := handoffcol.CellValue(cell.Value)
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
	if st := handoffcol.ReplicaStats(r); st.Slots != 0 {
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
	if len(a.TakeDirty()) != 1 || len(a.TakeDirty()) != 0 {
		t.Fatal("dirty set: want the one cell once")
	}
	view, err := a.SyncView(handoffTable.ID, []byte("k"), "h", b.HostID())
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
	if err := b.ApplyMutation(coltype.Mutation{Table: handoffTable.ID, Key: []byte("k"), Cell: cell}); err != nil {
		t.Fatal(err)
	}
	bc, _, _ := b.Read(handoffTable.ID, []byte("k"), "h")
	if f, owner, _, _ := handoffcol.CellValue(bc.Value); f != 17 || owner != handoff.ID(b.HostID()) {
		t.Fatalf("b after a foreign mutation: fetch %d, owner %v (want 17, b's own)", f, owner)
	}
	if b.Repairs(handoffTable.ID, "h") || !b.Repairs(handoffTable.ID, "c") {
		t.Fatal("Repairs: want false for the handoff column only")
	}
	if _, err := b.Delete(handoffTable.ID, []byte("k"), 0); err == nil {
		t.Fatal("deleting a row with a handoff column succeeded")
	}
	if _, err := b.Apply(coltype.Update{Table: handoffTable.ID, Key: []byte("k"), Column: "h", Delta: 1}); err == nil {
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
			value := handoffcol.EncodeCell(v, encMessage(t, st))
			if v%2 == 0 { // format 1 (a bare state), as cells written before notices
				value = binary.AppendUvarint([]byte{handoffcol.CellFormatState}, v)
				value = append(value, enc(t, st)...)
			}
			cells = append(cells, row.Cell{Column: "h", Value: value, Timestamp: int64(rng.IntN(10))})
		}
	}
	var ht handoffcol.Type
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

// encMessage encodes a state as a handoff.Message without notices.
func encMessage(t *testing.T, st *handoff.Counter) []byte {
	t.Helper()
	b, err := (&handoff.Message{State: st}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeClock is a settable clock for Config.Now.
// openHandoffReplica opens a replica on clock holding handoffTable, with
// the notice retention given (0: the default), closed when the test ends.
func openHandoffReplica(t *testing.T, clock *fakeClock, retention time.Duration) *Replica {
	t.Helper()
	cfg := testConfig(t.TempDir())
	cfg.Now = clock.Now
	if retention > 0 {
		cfg.Settings = map[string]string{handoffcol.NoticeRetentionSetting: retention.String()}
	}
	r := mustOpen(t, cfg)
	t.Cleanup(func() { r.Close() })
	if err := r.CreateTable(handoffTable); err != nil {
		t.Fatal(err)
	}
	return r
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncPair runs one anti-entropy exchange of the cell from a to b and back.
func syncPair(t *testing.T, a, b *Replica, key string) {
	t.Helper()
	view, err := a.SyncView(handoffTable.ID, []byte(key), "h", b.HostID())
	if err != nil {
		t.Fatal(err)
	}
	reply, err := b.Exchange(handoffTable.ID, []byte(key), "h", view)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exchange(handoffTable.ID, []byte(key), "h", reply); err != nil {
		t.Fatal(err)
	}
}

// TestHandoffRetirementNotice: a client opens a slot at r1 whose answer is
// lost, fails over to r2 and moves its increments into a token for r2, then
// r2 becomes unreachable. The client retires through r3 with a notice (which
// r3 acknowledges once durable). Anti-entropy then delivers the token to r2
// and drops r1's stray slot; a late duplicate of the client's first message
// has its slot dropped too; once every replica has processed the notice and
// the retention has passed, the notice is gone. Nothing is lost or counted
// twice, and r3 restarts in the middle.
func TestHandoffRetirementNotice(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	open := func(dir string) *Replica {
		cfg := testConfig(dir)
		cfg.Now = clock.Now
		cfg.Settings = map[string]string{handoffcol.NoticeRetentionSetting: time.Minute.String()}
		r := mustOpen(t, cfg)
		if _, err := r.table(handoffTable.ID); err != nil {
			if err := r.CreateTable(handoffTable); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	r1, r2, r3 := open(dirs[0]), open(dirs[1]), open(dirs[2])
	defer func() { r1.Close(); r2.Close(); r3.Close() }()
	servers := []handoff.ID{handoff.ID(r1.HostID()), handoff.ID(r2.HostID()), handoff.ID(r3.HostID())}
	slices.SortFunc(servers, handoff.ID.Compare)

	cl := handoff.NewCounter(newID(t), 1)
	cl.Add(5)
	first := enc(t, cl.View(handoff.ID{}, 0))
	if _, err := r1.Exchange(handoffTable.ID, []byte("k"), "h", first); err != nil { // answer lost
		t.Fatal(err)
	}
	exchange(t, r2, "k", cl) // a slot at r2, and a token for it from r2's answer; then r2 is gone
	if cl.Pending() != 0 || len(cl.TokenDestinations()) != 1 {
		t.Fatalf("client: pending %d, tokens for %v; want 0 and one token", cl.Pending(), cl.TokenDestinations())
	}

	// Retire through r3.
	notice := cl.State.Retire()
	req, err := (&handoff.Message{State: cl.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{{Notice: notice, Servers: servers}}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	reply, err := r3.Exchange(handoffTable.ID, []byte("k"), "h", req)
	if err != nil {
		t.Fatal(err)
	}
	ack, bare, err := handoff.DecodeMessage(reply)
	if err != nil || bare || len(ack.Notices) != 1 || ack.Notices[0].Notice.ID != cl.ID() {
		t.Fatalf("r3's answer to a retiring client: bare %v, err %v, %d notices; want its own notice back", bare, err, len(ack.Notices))
	}
	// A client may carry only its own notice.
	other := &handoff.HeldNotice{Notice: &handoff.Notice[handoff.Count]{ID: newID(t)}, Servers: servers}
	forged, _ := (&handoff.Message{State: cl.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{other}}).MarshalBinary()
	if _, err := r3.Exchange(handoffTable.ID, []byte("k"), "h", forged); err == nil {
		t.Fatal("a client's exchange carrying another node's notice was accepted")
	}
	r3.Close()
	r3 = open(dirs[2])
	if st := handoffcol.ReplicaStats(r3); st.Notices != 0 {
		t.Fatalf("notices in memory before the cell is loaded: %d", st.Notices)
	}

	// Anti-entropy: r3 with r1 (the stray slot goes), r3 with r2 (the token
	// is acquired), then every pair once more so each knows all have it.
	syncPair(t, r3, r1, "k")
	if st := handoffcol.ReplicaStats(r1); st.Slots != 0 || st.Notices != 1 {
		t.Fatalf("r1 after the notice: %+v, want no slot and the notice", st)
	}
	syncPair(t, r3, r2, "k")
	for _, p := range [][2]*Replica{{r1, r2}, {r2, r3}, {r1, r3}, {r2, r1}} {
		syncPair(t, p[0], p[1], "k")
	}
	for i, r := range []*Replica{r1, r2, r3} {
		if got := value(t, r, handoffTable.ID, "k", "h"); got != 5 {
			t.Fatalf("r%d reads %d, want 5", i+1, got)
		}
		if st := handoffcol.ReplicaStats(r); st.Slots != 0 || st.Tokens != 0 || st.Notices != 1 {
			t.Fatalf("r%d: %+v, want no slot, no token, the notice", i+1, st)
		}
	}
	oldSync, err := r3.SyncView(handoffTable.ID, []byte("k"), "h", r1.HostID())
	if err != nil {
		t.Fatal(err)
	}
	// A late duplicate of the client's first message: its slot is dropped.
	if _, err := r1.Exchange(handoffTable.ID, []byte("k"), "h", first); err != nil {
		t.Fatal(err)
	}
	if st := handoffcol.ReplicaStats(r1); st.Slots != 0 || value(t, r1, handoffTable.ID, "k", "h") != 5 {
		t.Fatalf("r1 after a late duplicate: %+v", st)
	}
	// Before the retention passes, the sweep keeps the notice; after, drops it.
	if held, err := r1.Sweep(); err != nil || held != 1 {
		t.Fatalf("sweep before the retention: %d held, %v", held, err)
	}
	clock.Add(time.Minute)
	for i, r := range []*Replica{r1, r2, r3} {
		if held, err := r.Sweep(); err != nil || held != 0 {
			t.Fatalf("r%d sweep after the retention: %d held, %v", i+1, held, err)
		}
	}
	// An expired notice coming back in an old anti-entropy message is not
	// taken in again.
	if _, err := r1.Exchange(handoffTable.ID, []byte("k"), "h", oldSync); err != nil {
		t.Fatal(err)
	}
	if st := handoffcol.ReplicaStats(r1); st.Notices != 0 || value(t, r1, handoffTable.ID, "k", "h") != 5 {
		t.Fatalf("r1 after an expired notice came back: %+v", st)
	}
	// The client's own request replayed after the retention is (it carries no
	// record of who processed it): it is applied again, harmlessly.
	if _, err := r1.Exchange(handoffTable.ID, []byte("k"), "h", req); err != nil {
		t.Fatal(err)
	}
	if st := handoffcol.ReplicaStats(r1); st.Slots != 0 || st.Notices != 1 || value(t, r1, handoffTable.ID, "k", "h") != 5 {
		t.Fatalf("r1 after the client's request came back: %+v", st)
	}
}

// TestHandoffNoticeWaitsForEveryServer: a notice is kept past its retention
// while a server has not processed it (its token may be for that server).
func TestHandoffNoticeWaitsForEveryServer(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	r := openHandoffReplica(t, clock, 0)
	cl := handoff.NewCounter(newID(t), 1)
	absent := newID(t)
	req, _ := (&handoff.Message{State: cl.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{
		{Notice: cl.State.Retire(), Servers: handoff.UnionIDs([]handoff.ID{handoff.ID(r.HostID())}, []handoff.ID{absent})},
	}}).MarshalBinary()
	if _, err := r.Exchange(handoffTable.ID, []byte("k"), "h", req); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	if held, err := r.Sweep(); err != nil || held != 1 {
		t.Fatalf("sweep: %d held, %v; want the notice kept for the absent server", held, err)
	}
	if got := r.TakeDirty(); len(got) != 1 {
		t.Fatalf("dirty cells %d, want the notice's cell", len(got))
	}
}

// TestHandoffStaleNoticeNotTakenBack: once every replica has processed a
// notice and dropped it, a stale copy still travelling (an anti-entropy
// message sent before the sender learned that the notice was done) does
// not bring it back at a replica that had processed it: that replica
// answers with the notice as done, and the sender drops its own copy.
// Taking it back made two replicas hand the notice to each other forever
// (node's TestHandoffCounterExactUnderFaults timed out on it).
func TestHandoffStaleNoticeNotTakenBack(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	var rs []*Replica
	for range 3 {
		rs = append(rs, openHandoffReplica(t, clock, time.Minute))
	}
	r1, r2, r3 := rs[0], rs[1], rs[2]
	servers := []handoff.ID{handoff.ID(r1.HostID()), handoff.ID(r2.HostID()), handoff.ID(r3.HostID())}
	slices.SortFunc(servers, handoff.ID.Compare)
	cl := handoff.NewCounter(newID(t), 1)
	cl.Add(3)
	exchange(t, r1, "k", cl)
	req, err := (&handoff.Message{State: cl.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{{Notice: cl.State.Retire(), Servers: servers}}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Exchange(handoffTable.ID, []byte("k"), "h", req); err != nil {
		t.Fatal(err)
	}
	syncPair(t, r1, r2, "k") // seen by r1 and r2
	stale, err := r1.SyncView(handoffTable.ID, []byte("k"), "h", r2.HostID())
	if err != nil {
		t.Fatal(err)
	}
	syncPair(t, r1, r3, "k") // r1 and r3: done
	syncPair(t, r3, r2, "k") // r2: done
	clock.Add(time.Minute)
	for i, r := range rs {
		if held, err := r.Sweep(); err != nil || held != 0 {
			t.Fatalf("r%d sweep after the retention: %d held, %v", i+1, held, err)
		}
	}
	reply, err := r2.Exchange(handoffTable.ID, []byte("k"), "h", stale)
	if err != nil {
		t.Fatal(err)
	}
	if st := handoffcol.ReplicaStats(r2); st.Notices != 0 {
		t.Fatalf("r2 took back a notice it had processed and dropped: %+v", st)
	}
	m, bare, err := handoff.DecodeMessage(reply)
	if err != nil || bare || len(m.Notices) != 1 || !m.Notices[0].Done() {
		t.Fatalf("r2's answer to a stale notice: bare %v, err %v, notices %d; want the notice, done", bare, err, len(m.Notices))
	}
	// A replica holding a stale copy learns from that answer and drops it.
	if _, err := r3.Exchange(handoffTable.ID, []byte("k"), "h", stale); err != nil {
		t.Fatal(err)
	}
	if st := handoffcol.ReplicaStats(r3); st.Notices != 0 {
		t.Fatalf("r3 holds the done notice after the retention: %+v", st)
	}
	for i, r := range rs {
		if got := value(t, r, handoffTable.ID, "k", "h"); got != 3 {
			t.Fatalf("r%d reads %d, want 3", i+1, got)
		}
	}
}

// TestHandoffSweepOnlyDueCells: the sweep loads a cell whose notices every
// server has processed only once its first notice expires, not at every
// round (before, each round loaded every such cell: 45 % of a soak node's
// CPU at 4,000 retirements/s with a one-minute retention).
func TestHandoffSweepOnlyDueCells(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	r := openHandoffReplica(t, clock, time.Minute)
	const cells = 100
	for i := range cells {
		cl := handoff.NewCounter(newID(t), 1)
		req, _ := (&handoff.Message{State: cl.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{
			{Notice: cl.State.Retire(), Servers: []handoff.ID{handoff.ID(r.HostID())}},
		}}).MarshalBinary()
		if _, err := r.Exchange(handoffTable.ID, []byte(fmt.Sprintf("k%d", i)), "h", req); err != nil {
			t.Fatal(err)
		}
	}
	lookups := func() uint64 { st := r.CellCache().Stats(); return st.Hits + st.Misses }
	before := lookups()
	clock.Add(59 * time.Second)
	if held, err := r.Sweep(); err != nil || held != cells {
		t.Fatalf("sweep before the retention: %d held, %v; want %d", held, err, cells)
	}
	if n := lookups() - before; n != 0 {
		t.Fatalf("the sweep before any notice was due looked up %d cells, want none", n)
	}
	clock.Add(time.Second)
	if held, err := r.Sweep(); err != nil || held != 0 {
		t.Fatalf("sweep after the retention: %d held, %v; want 0", held, err)
	}
	if n := lookups() - before; n != cells {
		t.Fatalf("the sweep after the retention looked up %d cells, want %d", n, cells)
	}
}

// TestDesignStatsScanCached: the metrics' and tablestats' view of a design
// (designStats) takes a design's sums over its cells in memory from a scan
// at most coltype.StatsScanEvery old on the replica's clock, while its
// running counts are current; the design's own Stats scans every time.
func TestDesignStatsScanCached(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	r := openHandoffReplica(t, clock, 0)
	design := func() map[string]float64 {
		st, err := r.TableStats(handoffTable.ID)
		if err != nil {
			t.Fatal(err)
		}
		return st.Columns["h"].Design
	}
	cl := handoff.NewCounter(newID(t), 1)
	cl.Add(1)
	exchange(t, r, "k1", cl)
	if d := design(); d["Cells"] != 1 || d["Exchanges"] != 1 {
		t.Fatalf("after one exchange: %v", d)
	}
	exchange(t, r, "k2", cl)
	if d := design(); d["Cells"] != 1 || d["Exchanges"] != 2 {
		t.Fatalf("after a second cell, within the scan interval: Cells %v (want the last scan's 1), Exchanges %v (want 2)", d["Cells"], d["Exchanges"])
	}
	if st := handoffcol.ReplicaStats(r); st.Cells != 2 {
		t.Fatalf("Stats: %d cells, want 2", st.Cells)
	}
	clock.Add(coltype.StatsScanEvery)
	if d := design(); d["Cells"] != 2 {
		t.Fatalf("once the scan is StatsScanEvery old: Cells %v, want 2", d["Cells"])
	}
}
