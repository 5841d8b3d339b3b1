package resetcol

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/reset"
	"github.com/idemkv/idemkv/row"
)

// memReplica is a replica reduced to what a Column needs: an Env and a
// Leader over an in-memory store of cells (the newest write of a cell
// wins, as Merge keeps a replica's newest version).
type memReplica struct {
	host  counters.ID
	cells map[string]row.Cell
	// superseding counts the writes that named the stored value they
	// supersede (coltype.Mutation.Supersedes).
	superseding int
}

func (r *memReplica) Now() time.Time                                { return time.Now() }
func (r *memReplica) CounterID() counters.ID                        { return r.host }
func (r *memReplica) CounterWriteTimeout() time.Duration            { return time.Second }
func (r *memReplica) HostID() counters.ID                           { return r.host }
func (r *memReplica) Setting(string) string                         { return "" }
func (r *memReplica) Lock(row.Key, string) func()                   { return func() {} }
func (r *memReplica) CacheLocalShard(row.Key, string, int64, int64) {}
func (r *memReplica) ForgetLocalShard(row.Key, string)              {}
func (r *memReplica) LocalShard(row.Key, string) (int64, int64, error) {
	return 0, 0, nil
}

func (r *memReplica) Cell(k row.Key, column string) (row.Cell, bool, error) {
	c, ok := r.cells[string(k.Partition)+"/"+column]
	return c, ok, nil
}

// Write stores m's cell in place of the one stored, which is what a
// replica's Merge gives when the column's promises hold; it refuses a
// write that breaks them: a new blob that does not win Merge against the
// stored one, or that claims to supersede a value not stored.
func (r *memReplica) Write(k row.Key, m coltype.Mutation, _ commitlog.PayloadKind) error {
	key := string(k.Partition) + "/" + m.Cell.Column
	if old, ok := r.cells[key]; ok {
		merged, err := Type{}.Merge(old, m.Cell)
		if err != nil {
			return err
		}
		if !bytes.Equal(merged.Value, m.Cell.Value) {
			return fmt.Errorf("memReplica: the write of %s loses Merge against the stored blob", key)
		}
		if m.Supersedes != nil && !bytes.Equal(m.Supersedes, old.Value) {
			return fmt.Errorf("memReplica: the write of %s supersedes a value not stored", key)
		}
		if m.Supersedes != nil {
			r.superseding++
		}
	} else if m.Supersedes != nil {
		return fmt.Errorf("memReplica: the write of %s supersedes a value, none stored", key)
	}
	r.cells[key] = m.Cell
	return nil
}

// memColumn is one replica's reset_counter column of table 1.
type memColumn struct {
	*memReplica
	col *Column
}

func newMemColumn(t testing.TB, host byte) memColumn {
	t.Helper()
	r := &memReplica{host: counters.ID{host}, cells: map[string]row.Cell{}}
	ct, err := Type{}.Configure(r, coltype.TableDef{ID: 1, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "r", Type: TypeName}}}, "r", nil)
	if err != nil {
		t.Fatal(err)
	}
	return memColumn{r, ct.(*Column)}
}

func (m memColumn) blob(t testing.TB, key string) *Blob {
	t.Helper()
	c, ok := m.cells[key+"/r"]
	if !ok {
		return &Blob{State: reset.NewCounter(reset.ID(m.host)), In: map[reset.ID]*reset.Inbox{}, Out: map[reset.ID]*reset.Outbox{}}
	}
	b, err := DecodeCell(c.Value)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (m memColumn) inc(t *testing.T, key string, d int64, replicas []counters.ID) coltype.Mutation {
	t.Helper()
	mu, err := m.col.Lead(m, coltype.Update{Table: 1, Key: []byte(key), Column: "r", Delta: d, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	return mu
}

func (m memColumn) deliver(t *testing.T, mu coltype.Mutation) {
	t.Helper()
	if err := m.col.ApplyReplicated(m, mu); err != nil {
		t.Fatal(err)
	}
}

// syncMem is one anti-entropy exchange of a cell from a to b (the
// replica's SyncView, then Exchange at b, then at a).
func syncMem(t *testing.T, a, b memColumn, key string) {
	t.Helper()
	view, err := a.col.View(a, []byte(key), "", b.host)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := b.col.Exchange(b, 1, []byte(key), "r", view)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.col.Exchange(a, 1, []byte(key), "r", reply); err != nil {
		t.Fatal(err)
	}
}

// TestResetOutsideCoordinatorReachesKnownPeers is the interleaving that
// made replica.TestCellCacheReset diverge (seed 1795749349682173512, key
// k4): B increments a cell and A delivers it; A's first op of the cell is
// a DELETE that does not come through the coordinator (no replica list:
// replica.Delete), an observed reset of B's increment. A had no outbox
// yet, so the reset went to nobody; A's next increment, led with the
// replica list, created its outbox to B numbered from 0, which never
// carried the reset. Anti-entropy then found nothing pending, and the
// replicas read differently for good (A: B's entry (p, n = 2, c), B: n =
// 0). A write without a replica list now reaches every origin the cell
// delivered ops from.
func TestResetOutsideCoordinatorReachesKnownPeers(t *testing.T) {
	a, b := newMemColumn(t, 1), newMemColumn(t, 2)
	both := []counters.ID{a.host, b.host}
	a.deliver(t, b.inc(t, "k", 2, both))
	del, err := a.col.Delete(a, coltype.Deletion{Table: 1, Key: []byte("k"), Column: "r"})
	if err != nil {
		t.Fatal(err)
	}
	b.deliver(t, del) // lost or not, anti-entropy must bring it
	a.deliver(t, b.inc(t, "k", 3, both))
	b.deliver(t, a.inc(t, "k", 5, both))
	for range 2 {
		syncMem(t, a, b, "k")
		syncMem(t, b, a, "k")
	}
	ba, bb := a.blob(t, "k"), b.blob(t, "k")
	if va, vb := ba.State.Value(""), bb.State.Value(""); va != 8 || vb != 8 {
		t.Errorf("A reads %d, B reads %d; want 8 (3 + 5: the reset cancels B's 2) on both", va, vb)
	}
	if ba.Pending() != 0 || bb.Pending() != 0 {
		t.Errorf("ops pending after anti-entropy: A %d, B %d", ba.Pending(), bb.Pending())
	}
	if got := bb.In[reset.ID(a.host)].Delivered(); got != ba.Gen {
		t.Errorf("B delivered %d ops from A, A generated %d", got, ba.Gen)
	}
	if ba.Delivered() != bb.Delivered() {
		t.Errorf("delivered sums differ: A %d, B %d", ba.Delivered(), bb.Delivered())
	}
}

// TestResetOutsideCoordinatorDeliveredLate: the same, the reset's
// mutation lost: only anti-entropy carries it.
func TestResetOutsideCoordinatorDeliveredLate(t *testing.T) {
	a, b := newMemColumn(t, 1), newMemColumn(t, 2)
	both := []counters.ID{a.host, b.host}
	a.deliver(t, b.inc(t, "k", 2, both))
	if _, err := a.col.Delete(a, coltype.Deletion{Table: 1, Key: []byte("k"), Column: "r"}); err != nil {
		t.Fatal(err)
	}
	syncMem(t, b, a, "k") // B's view out, A's ops back
	syncMem(t, a, b, "k") // B's ack back
	if v := b.blob(t, "k").State.Value(""); v != 0 {
		t.Errorf("B reads %d after anti-entropy, want 0 (A reset B's 2)", v)
	}
	if p := a.blob(t, "k").Pending(); p != 0 {
		t.Errorf("A holds %d ops after anti-entropy", p)
	}
}

// TestWritesSupersedeTheStoredBlob: every write of a cell, after it was
// loaded from storage or written, names the stored blob it supersedes, so
// that the replica replaces it without decoding both (memReplica.Write
// refuses a wrong claim, and one whose blob loses Merge).
func TestWritesSupersedeTheStoredBlob(t *testing.T) {
	a := newMemColumn(t, 1)
	peers := []counters.ID{{1}, {2}}
	for range 3 {
		a.inc(t, "k", 1, peers)
	}
	if a.superseding != 2 {
		t.Fatalf("%d of the cold cell's 3 writes named the blob they supersede, want 2 (not the first)", a.superseding)
	}
	// A column started again over the same storage loads the blob.
	b := newMemColumn(t, 1)
	b.memReplica = a.memReplica
	b.superseding = 0
	for range 3 {
		b.inc(t, "k", 1, peers)
	}
	if b.superseding != 3 {
		t.Fatalf("%d of 3 writes after a load named the blob they supersede, want 3", b.superseding)
	}
	if v := b.blob(t, "k").State.Value(""); v != 6 {
		t.Fatalf("value %d, want 6", v)
	}
}
