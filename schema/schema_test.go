package schema

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	_ "github.com/idemkv/idemkv/coltype/builtin" // the counter designs the tests use

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/replica"
)

func randDoc(seed uint64, n int) Doc {
	d := emptyDoc()
	x := seed
	next := func() uint64 { x = x*6364136223846793005 + 1442695040888963407; return x >> 33 }
	for i := 0; i < n; i++ {
		ks := fmt.Sprintf("ks%d", next()%4)
		switch next() % 4 {
		case 0:
			d.Keyspaces[ks] = Keyspace{Name: ks, Class: "SimpleStrategy", Options: map[string]string{"replication_factor": fmt.Sprint(1 + next()%3)}, Generation: next() % 3}
		case 1:
			id := 1 + next()%8
			d.Tables[id] = coltype.TableDef{ID: id, Keyspace: ks, Name: fmt.Sprintf("t%d", id), Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}, KeyspaceGeneration: next() % 3}
		case 2:
			d.DroppedTables[1+next()%8] = true
		case 3:
			if next()%4 == 0 {
				if g := next() % 3; g >= d.DroppedKeyspaces[ks] {
					d.DroppedKeyspaces[ks] = g
				}
			}
		}
	}
	return d
}

// TestMergeIsASemilattice: nodes that exchange schema documents in any
// order, any number of times, end with the same schema and version.
func TestMergeIsASemilattice(t *testing.T) {
	r := testseed.Rand(t)
	for i := 0; i < 500; i++ {
		a, b, c := randDoc(r.Uint64(), 6), randDoc(r.Uint64(), 6), randDoc(r.Uint64(), 6)
		if x, y := a.merge(b).Version(), b.merge(a).Version(); x != y {
			t.Fatalf("merge not commutative: %s vs %s", x, y)
		}
		if x, y := a.merge(b).merge(c).Version(), a.merge(b.merge(c)).Version(); x != y {
			t.Fatalf("merge not associative")
		}
		if x, y := a.merge(a).Version(), emptyDoc().merge(a).Version(); x != y {
			t.Fatalf("merge not idempotent")
		}
		m := a.merge(b).visible()
		for n, k := range m.Keyspaces {
			if g, ok := m.DroppedKeyspaces[n]; ok && k.Generation <= g {
				t.Fatalf("dropped keyspace %s generation %d survives a merge", n, k.Generation)
			}
		}
		for id, tb := range m.Tables {
			k, ok := m.Keyspaces[tb.Keyspace]
			if m.DroppedTables[id] || !ok || k.Generation != tb.KeyspaceGeneration {
				t.Fatalf("dropped table %d survives a merge", id)
			}
		}
	}
}

func TestSchemaPersistsAndAppliesTables(t *testing.T) {
	dir := t.TempDir()
	rep, err := replica.Open(replica.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(coltype.TableDef{ID: 5, Keyspace: "nope", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}, false); err == nil {
		t.Fatal("a table in a missing keyspace was created")
	}
	if err := s.CreateKeyspace(Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "x"}}, false); err == nil {
		t.Fatal("a keyspace with a bad replication factor was created")
	}
	if err := s.CreateKeyspace(Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "2"}}, false); err != nil {
		t.Fatal(err)
	}
	def := coltype.TableDef{ID: 5, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
	if err := s.CreateTable(def, false); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(def, false); err == nil {
		t.Fatal("a table was created twice")
	}
	if len(rep.Tables()) != 1 {
		t.Fatalf("replica has %d tables, want 1", len(rep.Tables()))
	}
	v := s.Version()
	rep.Close()
	rep, err = replica.Open(replica.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	s, err = Open(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version() != v {
		t.Fatal("schema version changed across a restart")
	}
	if err := s.DropKeyspace("ks", false); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables()) != 0 {
		t.Fatal("dropping the keyspace left its table on the replica")
	}
}

// TestNewTableOptionsBounded: a new definition (CREATE or ALTER, from CQL
// or the peer-protocol client) with an FBF option out of its bounds is
// refused; the same definition merged from a peer (an older version's) is
// accepted, and loaded with the values clamped.
func TestNewTableOptionsBounded(t *testing.T) {
	dir := t.TempDir()
	rep, err := replica.Open(replica.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	s, err := Open(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateKeyspace(Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "1"}}, false); err != nil {
		t.Fatal(err)
	}
	huge := coltype.TableDef{ID: 9, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
		Options: map[string]string{"idempotence": `{"class":"fbf","bits":"4294967295"}`}}
	if err := s.CreateTable(huge, false); err == nil || !strings.Contains(err.Error(), "at most 268435456") {
		t.Fatalf("CreateTable with 2^32 bits: %v", err)
	}
	ok := huge
	ok.Options = map[string]string{"idempotence": `{"class":"fbf"}`}
	if err := s.CreateTable(ok, false); err != nil {
		t.Fatal(err)
	}
	if err := s.AlterTable(huge); err == nil || !strings.Contains(err.Error(), "at most 268435456") {
		t.Fatalf("AlterTable to 2^32 bits: %v", err)
	}
	// From a peer without the bounds: merged, loaded clamped.
	peer := emptyDoc()
	huge.ID, huge.Name = 10, "u"
	peer.Tables[huge.ID] = huge
	if _, err := s.Merge(peer); err != nil {
		t.Fatalf("merge of a peer's table out of the bounds: %v", err)
	}
	if _, found := s.Table("ks", "u"); !found {
		t.Fatal("the peer's table is not served")
	}
}
