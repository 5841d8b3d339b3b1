package schema

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/replica"
	"github.com/idemkv/idemkv/vfs"
)

// memStore is a Store that keeps table definitions only.
type memStore struct{ tables map[uint64]coltype.TableDef }

func (m *memStore) Tables() []coltype.TableDef {
	var out []coltype.TableDef
	for _, t := range m.tables {
		out = append(out, t)
	}
	return out
}

func (m *memStore) CreateTable(d coltype.TableDef) error {
	for _, t := range m.tables {
		if t.Keyspace == d.Keyspace && t.Name == d.Name {
			return fmt.Errorf("table %s.%s exists", d.Keyspace, d.Name)
		}
	}
	m.tables[d.ID] = d
	return nil
}

func (m *memStore) AlterTable(d coltype.TableDef) error { m.tables[d.ID] = d; return nil }
func (m *memStore) DropTable(id uint64) error           { delete(m.tables, id); return nil }

func openMem(t *testing.T) (*Schema, *memStore) {
	t.Helper()
	st := &memStore{tables: map[uint64]coltype.TableDef{}}
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFS(fsys, "/d", st)
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

func ksDef(name string, rf int) Keyspace {
	return Keyspace{Name: name, Class: "SimpleStrategy", Options: map[string]string{"replication_factor": fmt.Sprint(rf)}}
}

func counterTable(id uint64, ks, name string) coltype.TableDef {
	return coltype.TableDef{ID: id, Keyspace: ks, Name: name, Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
}

// oldDoc is a document as versions before keyspace generations wrote it:
// keyspace ks dropped (with its table 5), keyspace live kept.
const oldDoc = `{
  "keyspaces": {
    "ks": {"name": "ks", "class": "SimpleStrategy", "options": {"replication_factor": "1"}, "durable_writes": true},
    "live": {"name": "live", "class": "SimpleStrategy", "options": {"replication_factor": "1"}, "durable_writes": true}
  },
  "tables": {
    "5": {"id": 5, "keyspace": "ks", "name": "t", "columns": [{"name": "c", "type": "counter"}]},
    "6": {"id": 6, "keyspace": "live", "name": "t", "columns": [{"name": "c", "type": "counter"}]}
  },
  "dropped_keyspaces": {"ks": true}
}`

// TestOldDocumentLoads: a schema file written before keyspace generations
// loads (its dropped names as generation 0 dropped), encodes as it was
// written, and its dropped name can be created again.
func TestOldDocumentLoads(t *testing.T) {
	var d Doc
	if err := json.Unmarshal([]byte(oldDoc), &d); err != nil {
		t.Fatal(err)
	}
	if g, ok := d.DroppedKeyspaces["ks"]; !ok || g != 0 {
		t.Fatalf("dropped_keyspaces ks: true loaded as %d, %v", g, ok)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back, orig map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(oldDoc), &orig)
	if x, y := fmt.Sprint(back), fmt.Sprint(orig); x != y {
		t.Fatalf("an old document is re-encoded differently:\n%s\n%s", x, y)
	}

	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(fsys, "/d", schemaFile, []byte(oldDoc)); err != nil {
		t.Fatal(err)
	}
	st := &memStore{tables: map[uint64]coltype.TableDef{}}
	s, err := OpenFS(fsys, "/d", st)
	if err != nil {
		t.Fatal(err)
	}
	v := s.Visible()
	if _, ok := v.Keyspaces["ks"]; ok {
		t.Fatal("the old document's dropped keyspace is visible")
	}
	if _, ok := v.Tables[6]; !ok || len(v.Tables) != 1 || len(st.tables) != 1 {
		t.Fatalf("visible tables %v, replica %v; want table 6 only", v.Tables, st.tables)
	}
	if err := s.CreateKeyspace(ksDef("ks", 1), false); err != nil {
		t.Fatalf("re-creating the old document's dropped keyspace: %v", err)
	}
	if k := s.Visible().Keyspaces["ks"]; k.Generation != 1 {
		t.Fatalf("re-created keyspace has generation %d, want 1", k.Generation)
	}
	if _, ok := s.Table("ks", "t"); ok {
		t.Fatal("the dropped incarnation's table shows in the new one")
	}
}

// TestDroppedKeyspaceNameReused: DROP KEYSPACE, CREATE KEYSPACE and CREATE
// TABLE of the same names, twice; the replica holds only the new table,
// and a restart keeps it all.
func TestDroppedKeyspaceNameReused(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rep, err := replica.Open(replica.Config{Dir: dir, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	id := uint64(10)
	for gen := uint64(0); gen < 3; gen++ {
		if err := s.CreateKeyspace(ksDef("ks", 1), false); err != nil {
			t.Fatalf("generation %d: %v", gen, err)
		}
		if err := s.CreateKeyspace(ksDef("ks", 1), false); err == nil {
			t.Fatal("a live keyspace was created twice")
		}
		if k := s.Visible().Keyspaces["ks"]; k.Generation != gen {
			t.Fatalf("keyspace generation %d, want %d", k.Generation, gen)
		}
		if _, ok := s.Table("ks", "t"); ok {
			t.Fatalf("generation %d starts with a table", gen)
		}
		id++
		if err := s.CreateTable(counterTable(id, "ks", "t"), false); err != nil {
			t.Fatalf("generation %d: %v", gen, err)
		}
		if tb, ok := s.Table("ks", "t"); !ok || tb.ID != id || tb.KeyspaceGeneration != gen {
			t.Fatalf("table %+v, %v; want id %d in generation %d", tb, ok, id, gen)
		}
		if got := rep.Tables(); len(got) != 1 || got[0].ID != id {
			t.Fatalf("replica tables %v, want id %d only", got, id)
		}
		v := s.Version()
		rep.Close()
		if rep, err = replica.Open(replica.Config{Dir: dir, Logger: logger}); err != nil {
			t.Fatal(err)
		}
		if s, err = Open(dir, rep); err != nil {
			t.Fatal(err)
		}
		if s.Version() != v {
			t.Fatal("schema version changed across a restart")
		}
		if err := s.DropKeyspace("ks", false); err != nil {
			t.Fatal(err)
		}
		if len(rep.Tables()) != 0 || len(s.Visible().Tables) != 0 {
			t.Fatal("dropping the keyspace left its table")
		}
		if err := s.DropKeyspace("ks", false); err == nil {
			t.Fatal("a dropped keyspace was dropped again")
		}
	}
	rep.Close()
}

// TestTableOfDroppedIncarnationMergedLater: a table created on one node in
// a keyspace that another node concurrently drops and creates again does
// not appear in the new incarnation, on either node, in either merge order.
func TestTableOfDroppedIncarnationMergedLater(t *testing.T) {
	a, aStore := openMem(t)
	b, bStore := openMem(t)
	if err := a.CreateKeyspace(ksDef("ks", 1), false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Merge(a.Doc()); err != nil {
		t.Fatal(err)
	}
	// b: a table in generation 0; a: drop, re-create, a table of the same
	// name in generation 1.
	if err := b.CreateTable(counterTable(7, "ks", "t"), false); err != nil {
		t.Fatal(err)
	}
	if err := a.DropKeyspace("ks", false); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateKeyspace(ksDef("ks", 2), false); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateTable(counterTable(8, "ks", "t"), false); err != nil {
		t.Fatal(err)
	}
	da, db := a.Doc(), b.Doc()
	if _, err := a.Merge(db); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Merge(da); err != nil {
		t.Fatal(err)
	}
	if a.Version() != b.Version() {
		t.Fatal("the nodes do not agree")
	}
	for _, n := range []struct {
		s  *Schema
		st *memStore
	}{{a, aStore}, {b, bStore}} {
		v := n.s.Visible()
		if len(v.Tables) != 1 || v.Tables[8].Name != "t" {
			t.Fatalf("visible tables %v, want table 8 only", v.Tables)
		}
		if !v.DroppedTables[7] {
			t.Fatal("the old incarnation's table is not dropped")
		}
		if _, ok := n.st.tables[7]; ok || len(n.st.tables) != 1 {
			t.Fatalf("replica tables %v, want table 8 only", n.st.tables)
		}
		if k := v.Keyspaces["ks"]; k.Generation != 1 || k.Options["replication_factor"] != "2" {
			t.Fatalf("keyspace %+v, want generation 1 with rf 2", k)
		}
	}
}

// TestConcurrentRecreateConverges: two nodes that both drop a keyspace and
// create it again with different definitions end with one of them.
func TestConcurrentRecreateConverges(t *testing.T) {
	a, _ := openMem(t)
	b, _ := openMem(t)
	if err := a.CreateKeyspace(ksDef("ks", 1), false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Merge(a.Doc()); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*Schema{a, b} {
		if err := s.DropKeyspace("ks", false); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateKeyspace(ksDef("ks", 2+i), false); err != nil {
			t.Fatal(err)
		}
	}
	da, db := a.Doc(), b.Doc()
	if _, err := a.Merge(db); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Merge(da); err != nil {
		t.Fatal(err)
	}
	ka, kb := a.Visible().Keyspaces["ks"], b.Visible().Keyspaces["ks"]
	if a.Version() != b.Version() || fmt.Sprint(ka) != fmt.Sprint(kb) || ka.Generation != 1 {
		t.Fatalf("the nodes keep %+v and %+v", ka, kb)
	}
}

// TestRandomDDLConverges: nodes running random CREATE and DROP of
// keyspaces and tables (names reused) and exchanging documents in a seeded
// random order end, once every document reached every node, with the same
// schema, in which no table of a dropped incarnation or dropped table shows
// and the replicas hold exactly the visible tables.
func TestRandomDDLConverges(t *testing.T) {
	r := testseed.Rand(t)
	for round := 0; round < 30; round++ {
		const nodes = 4
		var ss []*Schema
		var stores []*memStore
		for i := 0; i < nodes; i++ {
			s, st := openMem(t)
			ss, stores = append(ss, s), append(stores, st)
		}
		// dropped[id]: the table was dropped, or its incarnation was, on
		// some node after that node knew the table.
		dropped := map[uint64]bool{}
		id := uint64(0)
		for op := 0; op < 60; op++ {
			n := r.IntN(nodes)
			s := ss[n]
			ks := fmt.Sprintf("ks%d", r.IntN(2))
			switch r.IntN(6) {
			case 0:
				_ = s.CreateKeyspace(ksDef(ks, 1+r.IntN(3)), false)
			case 1:
				id++
				// Table names are per node: two nodes creating one name
				// concurrently is another matter (two ids, one name).
				_ = s.CreateTable(counterTable(id, ks, fmt.Sprintf("t%d_%d", n, r.IntN(2))), false)
			case 2:
				for tid, tb := range s.Visible().Tables {
					if tb.Keyspace == ks {
						dropped[tid] = true
					}
				}
				_ = s.DropKeyspace(ks, false)
			case 3:
				name := fmt.Sprintf("t%d_%d", r.IntN(nodes), r.IntN(2))
				if tb, ok := s.Table(ks, name); ok {
					dropped[tb.ID] = true
				}
				_ = s.DropTable(ks, name, false)
			default:
				if _, err := s.Merge(ss[r.IntN(nodes)].Doc()); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Every document reaches every node, in a random order.
		for pass := 0; pass < 2; pass++ {
			for _, i := range r.Perm(nodes) {
				for _, j := range r.Perm(nodes) {
					if _, err := ss[j].Merge(ss[i].Doc()); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		for i, s := range ss {
			if s.Version() != ss[0].Version() {
				t.Fatalf("round %d: node %d has another schema", round, i)
			}
			v := s.Visible()
			var vis, rep []uint64
			for tid, tb := range v.Tables {
				vis = append(vis, tid)
				if dropped[tid] {
					t.Fatalf("round %d: dropped table %d (%s.%s) shows", round, tid, tb.Keyspace, tb.Name)
				}
				if k, ok := v.Keyspaces[tb.Keyspace]; !ok || k.Generation != tb.KeyspaceGeneration {
					t.Fatalf("round %d: table %d of generation %d shows in keyspace %+v", round, tid, tb.KeyspaceGeneration, k)
				}
			}
			for tid := range stores[i].tables {
				rep = append(rep, tid)
			}
			sort.Slice(vis, func(a, b int) bool { return vis[a] < vis[b] })
			sort.Slice(rep, func(a, b int) bool { return rep[a] < rep[b] })
			if fmt.Sprint(vis) != fmt.Sprint(rep) {
				t.Fatalf("round %d: node %d: visible tables %v, replica %v", round, i, vis, rep)
			}
		}
	}
}

// TestDocJSONRoundTrip: a document with reused names survives its JSON.
func TestDocJSONRoundTrip(t *testing.T) {
	d := emptyDoc()
	k := ksDef("ks", 1)
	k.Generation = 3
	d.Keyspaces["ks"] = k
	tb := counterTable(4, "ks", "t")
	tb.KeyspaceGeneration = 3
	d.Tables[4] = tb
	d.DroppedKeyspaces["ks"] = 2
	d.DroppedKeyspaces["old"] = 0
	d.DroppedTables[1] = true
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"dropped_keyspaces":{"ks":true,"old":true}`, `"dropped_keyspace_generations":{"ks":2}`, `"generation":3`, `"keyspace_generation":3`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("%s lacks %s", b, want)
		}
	}
	var back Doc
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Version() != d.Version() {
		t.Fatalf("round trip changed the document: %s", b)
	}
}

// TestOnChangeInOrder: two merges at once call OnChange in the order of
// their changes, so that the last call names the version in force. The
// first change's call is held until the second merge has had time to
// finish; before changeMu the second merge's call came first and the
// node's last word (what it gossips) was the older version.
func TestOnChangeInOrder(t *testing.T) {
	s, _ := openMem(t)
	src, _ := openMem(t)
	if err := src.CreateKeyspace(ksDef("a", 1), false); err != nil {
		t.Fatal(err)
	}
	first := src.Doc()
	if err := src.CreateKeyspace(ksDef("b", 1), false); err != nil {
		t.Fatal(err)
	}
	second := src.Doc()
	var (
		mu    sync.Mutex
		calls []string
		held  atomic.Bool
	)
	entered, release := make(chan struct{}), make(chan struct{})
	s.OnChange(func(v string) {
		if held.CompareAndSwap(false, true) { // the first call
			close(entered)
			<-release
		}
		mu.Lock()
		calls = append(calls, v)
		mu.Unlock()
	})
	done := make(chan error, 2)
	go func() { _, err := s.Merge(first); done <- err }()
	<-entered
	go func() { _, err := s.Merge(second); done <- err }()
	select {
	case err := <-done: // the second merge finished while the first one's call is held
		if err != nil {
			t.Fatal(err)
		}
		close(release)
	case <-time.After(200 * time.Millisecond): // it waits, as it should
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[1] != s.Version() {
		t.Fatalf("OnChange calls %v; want two, the last the version in force %s", calls, s.Version())
	}
}
