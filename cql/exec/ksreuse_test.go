package exec

import (
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// TestKeyspaceCreatedAgainAfterDrop: DROP KEYSPACE ks; CREATE KEYSPACE ks;
// CREATE TABLE ks.t works, the new ks.t starts empty and counts, and
// system_schema shows the new definitions.
func TestKeyspaceCreatedAgainAfterDrop(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`UPDATE ks.t SET c = c + 5 WHERE k = 'a'`)
	old, _ := h.f.sch.Table("ks", "t")
	if r := h.query(`DROP KEYSPACE ks`); r != (frame.SchemaChangeResult{Change: "DROPPED", Target: "KEYSPACE", Keyspace: "ks"}) {
		t.Fatalf("DROP KEYSPACE = %#v", r)
	}
	if r := h.query(`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}`); r != (frame.SchemaChangeResult{Change: "CREATED", Target: "KEYSPACE", Keyspace: "ks"}) {
		t.Fatalf("CREATE KEYSPACE of a dropped name = %#v", r)
	}
	wantErr(t, h.queryErr(`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}`), frame.ErrAlreadyExists, `Cannot add existing keyspace "ks"`)
	wantErr(t, h.queryErr(`SELECT c FROM ks.t WHERE k = 'a'`), frame.ErrInvalid, "unconfigured table t")
	h.query(`CREATE TABLE ks.t (k text PRIMARY KEY, c counter)`)
	def, ok := h.f.sch.Table("ks", "t")
	if !ok || def.ID == old.ID {
		t.Fatalf("re-created table %+v (old id %d)", def, old.ID)
	}
	if _, ok := h.value("ks.t", "c", text_("a")); ok {
		t.Fatal("the re-created table holds the dropped one's counter")
	}
	h.query(`UPDATE ks.t SET c = c + 3 WHERE k = 'a'`)
	if v, ok := h.value("ks.t", "c", text_("a")); !ok || v != 3 {
		t.Fatalf("ks.t a = %d %v, want 3", v, ok)
	}
	r := h.rows(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'ks'`)
	if len(r.Rows) != 1 {
		t.Fatalf("system_schema.keyspaces has %d rows for ks", len(r.Rows))
	}
	r = h.rows(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'ks'`)
	if len(r.Rows) != 1 || string(r.Rows[0][0].Bytes) != "t" {
		t.Fatalf("system_schema.tables for ks: %+v", r.Rows)
	}
	r = h.rows(`SELECT column_name FROM system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 't'`)
	if len(r.Rows) != 2 {
		t.Fatalf("system_schema.columns for ks.t: %d rows, want 2 (k, c; the old table had d too)", len(r.Rows))
	}
	// And once more.
	h.query(`DROP KEYSPACE ks`)
	h.query(`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`)
	h.query(`CREATE TABLE ks.t (k text PRIMARY KEY, c counter)`)
	if _, ok := h.value("ks.t", "c", text_("a")); ok {
		t.Fatal("the third ks.t holds a dropped counter")
	}
	if k := h.f.sch.Visible().Keyspaces["ks"]; k.Generation != 2 {
		t.Fatalf("keyspace generation %d, want 2", k.Generation)
	}
}
