package exec

import (
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// TestAlterColumns: ALTER TABLE ... ADD / DROP answer Cassandra's errors
// and leave the table unchanged; valid changes add and drop counter
// columns, and a dropped counter column cannot come back.
func TestAlterColumns(t *testing.T) {
	h := newHarness(t)
	h.setup()
	for _, c := range []struct {
		q    string
		code frame.ErrorCode
		msg  string
	}{
		{`ALTER TABLE ks.t ADD v int`, frame.ErrConfig, `ks.t: Cannot have a non counter column ("v") in a counter table`},
		{`ALTER TABLE ks.t ADD (e counter, v map<text, int>)`, frame.ErrConfig, `Cannot have a non counter column ("v")`},
		{`ALTER TABLE ks.t ADD v countr`, frame.ErrInvalid, "Unknown type ks.countr"},
		{`ALTER TABLE ks.t ADD c counter`, frame.ErrInvalid, "Column with name 'c' already exists"},
		{`ALTER TABLE ks.t ADD k counter`, frame.ErrInvalid, "Column with name 'k' already exists"},
		{`ALTER TABLE ks.t DROP k`, frame.ErrInvalid, "Cannot drop PRIMARY KEY column k"},
		{`ALTER TABLE ks.t DROP (d, nope)`, frame.ErrInvalid, "Column nope was not found in table ks.t"},
		{`ALTER TABLE ks.nope ADD x counter`, frame.ErrInvalid, "Table 'ks.nope' doesn't exist"},
		{`ALTER TABLE nosuchks.t ADD x counter`, frame.ErrInvalid, "Keyspace 'nosuchks' doesn't exist"},
	} {
		wantErr(t, h.queryErr(c.q), c.code, c.msg)
	}
	if def, _ := h.f.sch.Table("ks", "t"); len(def.Columns) != 2 || def.Revision != 0 {
		t.Errorf("the table changed: %+v", def)
	}
	h.query(`UPDATE ks.t SET c = c + 1, d = d + 2 WHERE k = 'a'`)
	h.query(`ALTER TABLE ks.t ADD e counter`)
	h.query(`UPDATE ks.t SET e = e + 5 WHERE k = 'a'`)
	def, _ := h.f.sch.Table("ks", "t")
	if err := h.f.rep.Flush(def.ID); err != nil {
		t.Fatal(err)
	}
	h.query(`UPDATE ks.t SET d = d + 1 WHERE k = 'a'`)
	if err := h.f.rep.Flush(def.ID); err != nil {
		t.Fatal(err)
	}
	h.query(`ALTER TABLE ks.t DROP d`)
	r := h.rows(`SELECT * FROM ks.t WHERE k = 'a'`)
	if len(r.Columns) != 3 || r.Columns[1].Name != "c" || r.Columns[2].Name != "e" || decodeBig(t, r.Rows[0][2]) != 5 {
		t.Fatalf("after ADD e, DROP d: %v %v", r.Columns, r.Rows)
	}
	wantErr(t, h.queryErr(`ALTER TABLE ks.t ADD d counter`), frame.ErrInvalid, "Cannot re-add previously dropped counter column d")
	// The dropped column's cells still merge: the two SSTables holding
	// them compact.
	if err := h.f.rep.Compact(def.ID, true); err != nil {
		t.Fatalf("compaction with a dropped column's cells: %v", err)
	}
}

// TestAlterRegularColumns: a regular table gains and loses columns; a
// column added again under a dropped name shows none of the old values.
func TestAlterRegularColumns(t *testing.T) {
	h := newHarness(t)
	h.setupRegular()
	h.query(`CREATE TABLE ks.r (k int PRIMARY KEY, a text)`)
	h.query(`INSERT INTO ks.r (k, a) VALUES (1, 'old')`)
	h.query(`ALTER TABLE ks.r ADD b int`)
	h.query(`UPDATE ks.r SET b = 7 WHERE k = 1`)
	h.query(`ALTER TABLE ks.r DROP a`)
	r := h.one(`SELECT * FROM ks.r WHERE k = 1`)
	if len(r) != 2 || decodeInt(t, r[1]) != 7 {
		t.Fatalf("after ADD b, DROP a: %v", r)
	}
	wantErr(t, h.queryErr(`ALTER TABLE ks.r ADD a int`), frame.ErrInvalid, "Cannot re-add previously dropped column 'a' of type int, incompatible with previous type text")
	wantErr(t, h.queryErr(`ALTER TABLE ks.r ADD c counter`), frame.ErrConfig, "Cannot add a counter column (c) in a non counter column family")
	h.query(`ALTER TABLE ks.r ADD a text`)
	if r := h.one(`SELECT a FROM ks.r WHERE k = 1`); !r[0].Null {
		t.Fatalf("a value written before the drop shows: %q", r[0].Bytes)
	}
	h.query(`UPDATE ks.r SET a = 'new' WHERE k = 1`)
	if r := h.one(`SELECT a FROM ks.r WHERE k = 1`); string(r[0].Bytes) != "new" {
		t.Fatalf("a after the re-add = %q", r[0].Bytes)
	}
}

// TestAlterForgetsPreparedStatements: a statement prepared before its
// table's ALTER answers Unprepared, so that the driver prepares it again
// and sees the new columns (gocql's TestSchemaReset).
func TestAlterForgetsPreparedStatements(t *testing.T) {
	h := newHarness(t)
	h.setupRegular()
	h.query(`CREATE TABLE ks.r (k int PRIMARY KEY)`)
	out, err := h.e.Prepare(ctx, h.sess, `SELECT * FROM ks.r WHERE k = ?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := out.Result.(frame.PreparedResult).ID
	if _, err := h.e.Execute(ctx, h.sess, id, params(int_(1)), nil); err != nil {
		t.Fatal(err)
	}
	h.query(`ALTER TABLE ks.r ADD v text`)
	_, err = h.e.Execute(ctx, h.sess, id, params(int_(1)), nil)
	if fe, ok := err.(*frame.Error); !ok || fe.Code != frame.ErrUnprepared {
		t.Fatalf("EXECUTE after ALTER: %v, want Unprepared", err)
	}
	out, err = h.e.Prepare(ctx, h.sess, `SELECT * FROM ks.r WHERE k = ?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Result.(frame.PreparedResult).ResultColumns); n != 2 {
		t.Fatalf("prepared again: %d result columns, want 2", n)
	}
}
