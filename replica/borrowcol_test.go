package replica

import (
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/borrowcol"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters/borrow"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/vfs"
)

var borrowTable = coltype.TableDef{ID: 23, Keyspace: "ks", Name: "b", Columns: []coltype.ColumnDef{{Name: "c", Type: borrowcol.TypeName}}}

// borrowExchange sends a borrow payload to r and decodes the answer.
func borrowExchange(t *testing.T, r *Replica, key string, payload []byte) *borrow.State {
	t.Helper()
	out, err := r.Exchange(borrowTable.ID, []byte(key), "c", payload)
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	s := borrow.New()
	if err := s.UnmarshalBinary(out); err != nil {
		t.Fatalf("answer: %v", err)
	}
	return s
}

// borrowLoan asks r to lend client a dot and returns it.
func borrowLoan(t *testing.T, r *Replica, key string, client borrow.ID) borrow.Dot {
	t.Helper()
	ds := borrowExchange(t, r, key, borrowcol.EncodeBorrow(client)).Dots()
	if len(ds) != 1 {
		t.Fatalf("borrow answer %v, want one dot", ds)
	}
	return ds[0].Dot
}

func borrowWrite(t *testing.T, r *Replica, key string, owner borrow.ID, d borrow.Dot, c borrow.Cell) {
	t.Helper()
	p, err := borrowcol.EncodeWrite(borrow.Write(owner, d, c))
	if err != nil {
		t.Fatal(err)
	}
	borrowExchange(t, r, key, p)
}

// TestBorrowMachineCrashPeriodic runs a borrow_counter creator on MemFS
// with the commit log in periodic mode and a sync period of an hour (no
// periodic fsync happens), crashes the machine (unsynced bytes torn at a
// seeded random point; 8 seeds in a row) after a plain update, a loan, a
// client's write, its retirement (transferred) and a second loan, and
// reopens it: every acknowledged increment must be there, the second loan
// must still be known (the client asking again gets the same dot), and a
// new loan must get a dot never lent before. Without the column's fsyncs
// (borrowcol's syncLog), the creator comes back with less than was
// acknowledged and lends a dot again.
func TestBorrowMachineCrashPeriodic(t *testing.T) {
	seed := testseed.Seed(t)
	for k := range uint64(8) { // where the tear falls
		borrowMachineCrash(t, seed+k)
	}
}

func borrowMachineCrash(t *testing.T, seed uint64) {
	t.Helper()
	mem := vfs.NewMem()
	cfg := func(fsys vfs.FS) Config {
		return Config{Dir: "/db", FS: fsys, Logger: quietLogger(),
			CommitLog: commitlog.Options{Sync: commitlog.SyncPeriodic, SyncPeriod: time.Hour, SegmentSize: 64 << 10}}
	}
	r, err := Open(cfg(mem))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTable(borrowTable); err != nil {
		t.Fatal(err)
	}
	const key = "k"
	id := func(b byte) borrow.ID { var x borrow.ID; x[0], x[15] = 0xc0, b; return x }
	a, b, c := id(1), id(2), id(3)
	if _, err := r.Apply(coltype.Update{Table: borrowTable.ID, Key: []byte(key), Column: "c", Delta: 5}); err != nil {
		t.Fatal(err)
	}
	da := borrowLoan(t, r, key, a)
	borrowWrite(t, r, key, a, da, borrow.Cell{Count: 3})
	borrowWrite(t, r, key, a, da, borrow.Cell{Frozen: true, Count: 3}) // retirement; the creator transfers it
	db := borrowLoan(t, r, key, b)
	if v, _, err := r.Value(borrowTable.ID, []byte(key), "c"); err != nil || v != 8 {
		t.Fatalf("before the crash: %d, %v; want 8", v, err)
	}

	crashed := mem.CrashClone(vfs.CrashOptions{TearUnsynced: true, Seed: seed})
	if err := r.Close(); err != nil { // on the old filesystem
		t.Fatal(err)
	}
	r, err = Open(cfg(crashed))
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer r.Close()
	if v, _, err := r.Value(borrowTable.ID, []byte(key), "c"); err != nil || v != 8 {
		t.Fatalf("after the crash: %d, %v; want the 8 acknowledged", v, err)
	}
	if d := borrowLoan(t, r, key, b); d != db {
		t.Fatalf("after the crash client b asked again and got %v, it had %v", d, db)
	}
	if dc := borrowLoan(t, r, key, c); dc == da || dc == db {
		t.Fatalf("after the crash client c got %v, already lent (a %v, b %v)", dc, da, db)
	}
	if _, err := r.Apply(coltype.Update{Table: borrowTable.ID, Key: []byte(key), Column: "c", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	if v, _, err := r.Value(borrowTable.ID, []byte(key), "c"); err != nil || v != 9 {
		t.Fatalf("after the crash and one more update: %d, %v; want 9", v, err)
	}
}

// TestWriteSupersedes writes a borrow cell over another through the leader
// interface: a mutation that supersedes the memtable's value replaces it
// (no join: the test's second state does not hold the first's dot, which a
// join would keep), and one that names another value is joined as usual.
// The column types are what keep the promise that replacing is the join
// (coltype.Mutation.Supersedes); this checks the engine keeps its side.
func TestWriteSupersedes(t *testing.T) {
	r, err := Open(Config{Dir: "/db", FS: vfs.NewMem(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.CreateTable(borrowTable); err != nil {
		t.Fatal(err)
	}
	tbl, err := r.table(borrowTable.ID)
	if err != nil {
		t.Fatal(err)
	}
	l := leader{r: r, t: tbl}
	key := []byte("k")
	a, b, c := borrow.ID{1}, borrow.ID{2}, borrow.ID{3}
	enc := func(s *borrow.State) []byte {
		v, err := borrowcol.EncodeCell(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	write := func(s *borrow.State, supersedes []byte) {
		t.Helper()
		m := coltype.Mutation{Table: borrowTable.ID, Key: key, Cell: row.Cell{Column: "c", Value: enc(s), Timestamp: 1}, Supersedes: supersedes}
		if err := l.Write(m.RowKey(), m, commitlog.PayloadShard); err != nil {
			t.Fatal(err)
		}
	}
	value := func() int64 {
		t.Helper()
		cell, found, err := r.Read(borrowTable.ID, key, "c")
		if err != nil || !found {
			t.Fatalf("read: %v, found %v", err, found)
		}
		v, err := borrowcol.Type{}.Value(cell)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	one := borrow.Write(a, borrow.Dot{Creator: a, Seq: 1}, borrow.Cell{Count: 5})
	write(one, nil)
	two := borrow.Write(b, borrow.Dot{Creator: b, Seq: 1}, borrow.Cell{Count: 7})
	write(two, enc(borrow.New())) // names a value the memtable does not hold: joined
	if v := value(); v != 12 {
		t.Fatalf("after a write superseding another value: %d, want the join's 12", v)
	}
	joined := one.Clone()
	joined.Join(two)
	three := borrow.Write(c, borrow.Dot{Creator: c, Seq: 1}, borrow.Cell{Count: 1})
	write(three, enc(joined)) // names the memtable's value: replaces it
	if v := value(); v != 1 {
		t.Fatalf("after a write superseding the stored value: %d, want 1 (replaced)", v)
	}
}
