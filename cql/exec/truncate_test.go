package exec

import (
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// TestTruncate: TRUNCATE empties a table, which keeps its name and
// definition under a new id; counters start again from zero.
func TestTruncate(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`UPDATE ks.t SET c = c + 5, d = d + 1 WHERE k = 'a'`)
	h.query(`UPDATE ks.t SET c = c + 7 WHERE k = 'b'`)
	before, _ := h.f.sch.Table("ks", "t")
	if r := h.query(`TRUNCATE ks.t`); r != (frame.VoidResult{}) {
		t.Errorf("TRUNCATE = %#v, want Void", r)
	}
	after, ok := h.f.sch.Table("ks", "t")
	if !ok || after.ID == before.ID || after.Name != before.Name || len(after.Columns) != len(before.Columns) {
		t.Fatalf("after TRUNCATE the table is %+v (before %+v)", after, before)
	}
	if res := h.rows(`SELECT * FROM ks.t`); len(res.Rows) != 0 {
		t.Errorf("SELECT after TRUNCATE: %d rows", len(res.Rows))
	}
	h.query(`UPDATE ks.t SET c = c + 1 WHERE k = 'a'`)
	if v, ok := h.value("ks.t", "c", text_("a")); !ok || v != 1 {
		t.Errorf("c after TRUNCATE and +1 = %d %v, want 1", v, ok)
	}
	h.sess.Keyspace = "ks"
	h.query(`TRUNCATE TABLE t`)
	if res := h.rows(`SELECT * FROM ks.t`); len(res.Rows) != 0 {
		t.Errorf("SELECT after the second TRUNCATE: %d rows", len(res.Rows))
	}
	if n := len(h.f.sch.Visible().Tables); n != 1 {
		t.Errorf("%d tables after two TRUNCATEs, want 1", n)
	}
	wantErr(t, h.queryErr(`TRUNCATE ks.nope`), frame.ErrInvalid, "table nope does not exist")
	wantErr(t, h.queryErr(`TRUNCATE nosuchks.t`), frame.ErrInvalid, "Keyspace nosuchks does not exist")
	wantErr(t, h.queryErr(`TRUNCATE system.local`), frame.ErrUnauthorized, "not user-modifiable")
}
