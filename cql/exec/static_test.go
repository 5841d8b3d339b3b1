package exec

import (
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// TestStaticColumns: static columns of regular and counter tables hold
// one value per partition, shown on every row and on a partition with no
// row; a row's deletion leaves them, a partition's takes them; setting
// only them names no clustering row.
func TestStaticColumns(t *testing.T) {
	h := newHarness(t)
	h.setupRegular()
	for _, desc := range []string{"ASC", "DESC"} {
		tbl := "ks.s" + desc
		h.query(`CREATE TABLE ` + tbl + ` (k text, c int, v text, s text static, tags set<text> static, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c ` + desc + `)`)
		h.query(`INSERT INTO ` + tbl + ` (k, c, v, s) VALUES ('a', 1, 'one', 'shared')`)
		h.query(`INSERT INTO ` + tbl + ` (k, c, v) VALUES ('a', 2, 'two')`)
		h.query(`UPDATE ` + tbl + ` SET tags = tags + {'x'} WHERE k = 'a'`)
		r := h.rows(`SELECT c, v, s, tags FROM ` + tbl + ` WHERE k = 'a'`)
		if len(r.Rows) != 2 {
			t.Fatalf("%s: %d rows, want 2", desc, len(r.Rows))
		}
		for _, row := range r.Rows {
			if string(row[2].Bytes) != "shared" || row[3].Null {
				t.Fatalf("%s: row %v lacks the statics", desc, row)
			}
		}
		// A partition with statics only reads as one row, clustering null.
		h.query(`INSERT INTO ` + tbl + ` (k, s) VALUES ('b', 'alone')`)
		if r := h.one(`SELECT c, v, s FROM ` + tbl + ` WHERE k = 'b'`); !r[0].Null || !r[1].Null || string(r[2].Bytes) != "alone" {
			t.Fatalf("%s: statics-only partition reads %v", desc, r)
		}
		if r := h.rows(`SELECT c FROM ` + tbl + ` WHERE k = 'b' AND c = 1`); len(r.Rows) != 0 {
			t.Fatalf("%s: a clustering restriction matched the statics-only row: %v", desc, r.Rows)
		}
		// Deleting every row leaves the statics; deleting the partition takes them.
		h.query(`DELETE FROM ` + tbl + ` WHERE k = 'a' AND c = 1`)
		h.query(`DELETE FROM ` + tbl + ` WHERE k = 'a' AND c = 2`)
		if r := h.one(`SELECT c, s FROM ` + tbl + ` WHERE k = 'a'`); !r[0].Null || string(r[1].Bytes) != "shared" {
			t.Fatalf("%s: after the rows' deletion: %v", desc, r)
		}
		h.query(`DELETE s FROM ` + tbl + ` WHERE k = 'b'`)
		if r := h.rows(`SELECT * FROM ` + tbl + ` WHERE k = 'b'`); len(r.Rows) != 0 {
			t.Fatalf("%s: after DELETE s: %v", desc, r.Rows)
		}
		h.query(`DELETE FROM ` + tbl + ` WHERE k = 'a'`)
		if r := h.rows(`SELECT * FROM ` + tbl + ` WHERE k = 'a'`); len(r.Rows) != 0 {
			t.Fatalf("%s: after the partition's deletion: %v", desc, r.Rows)
		}
		wantErr(t, h.queryErr(`UPDATE `+tbl+` SET s = 'x' WHERE k = 'a' AND c = 1`), frame.ErrInvalid, "Invalid restrictions on clustering columns since the UPDATE statement modifies only static columns")
	}
	r := h.rows(`SELECT column_name, kind FROM system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 'sasc'`)
	kinds := map[string]string{}
	for _, row := range r.Rows {
		kinds[string(row[0].Bytes)] = string(row[1].Bytes)
	}
	if kinds["s"] != "static" || kinds["tags"] != "static" || kinds["v"] != "regular" {
		t.Errorf("system_schema kinds: %v", kinds)
	}

	h.query(`INSERT INTO ks.sASC (k, c, v, s) VALUES ('d', 1, 'x', 'one'); `)
	h.query(`INSERT INTO ks.sASC (k, c, v) VALUES ('d', 2, 'y')`)
	if r := h.rows(`SELECT DISTINCT k, s FROM ks.sASC WHERE k = 'd'`); len(r.Rows) != 1 || string(r.Rows[0][1].Bytes) != "one" {
		t.Errorf("SELECT DISTINCT k, s: %v", r.Rows)
	}

	// A static counter: counted once per partition.
	h.query(`CREATE TABLE ks.sc (k text, c int, n counter, total counter static, PRIMARY KEY (k, c))`)
	h.query(`UPDATE ks.sc SET n = n + 1, total = total + 10 WHERE k = 'a' AND c = 1`)
	h.query(`UPDATE ks.sc SET n = n + 2, total = total + 5 WHERE k = 'a' AND c IN (2, 3)`)
	h.query(`UPDATE ks.sc SET total = total + 1 WHERE k = 'a'`)
	r = h.rows(`SELECT c, n, total FROM ks.sc WHERE k = 'a'`)
	if len(r.Rows) != 3 {
		t.Fatalf("static counter table: %d rows", len(r.Rows))
	}
	for _, row := range r.Rows {
		if decodeBig(t, row[2]) != 16 {
			t.Fatalf("static counter = %d, want 16 (10 + 5 once + 1)", decodeBig(t, row[2]))
		}
	}
}

// TestFilterContains: CONTAINS and CONTAINS KEY on lists, sets and maps,
// frozen or not, with ALLOW FILTERING.
func TestFilterContains(t *testing.T) {
	h := newHarness(t)
	h.setupRegular()
	h.query(`CREATE TABLE ks.f (k int PRIMARY KEY, tags set<text>, l list<int>, m map<text, int>, fm frozen<map<int, text>>)`)
	h.query(`INSERT INTO ks.f (k, tags, l, m, fm) VALUES (1, {'a', 'b'}, [1, 2], {'x': 10}, {1: 'one'})`)
	h.query(`INSERT INTO ks.f (k, tags, l, m, fm) VALUES (2, {'b'}, [3], {'y': 20}, {2: 'two'})`)
	for _, c := range []struct {
		q    string
		want int
	}{
		{`SELECT k FROM ks.f WHERE tags CONTAINS 'b' ALLOW FILTERING`, 2},
		{`SELECT k FROM ks.f WHERE tags CONTAINS 'a' ALLOW FILTERING`, 1},
		{`SELECT k FROM ks.f WHERE l CONTAINS 3 ALLOW FILTERING`, 1},
		{`SELECT k FROM ks.f WHERE m CONTAINS KEY 'x' ALLOW FILTERING`, 1},
		{`SELECT k FROM ks.f WHERE m CONTAINS 20 ALLOW FILTERING`, 1},
		{`SELECT k FROM ks.f WHERE fm CONTAINS KEY 2 AND tags CONTAINS 'b' ALLOW FILTERING`, 1},
		{`SELECT k FROM ks.f WHERE m CONTAINS KEY 'z' ALLOW FILTERING`, 0},
	} {
		if r := h.rows(c.q); len(r.Rows) != c.want {
			t.Errorf("%s: %d rows, want %d", c.q, len(r.Rows), c.want)
		}
	}
	if r := h.rows(`SELECT k FROM ks.f WHERE tags CONTAINS ? ALLOW FILTERING`, text_("a")); len(r.Rows) != 1 {
		t.Errorf("CONTAINS ?: %d rows, want 1", len(r.Rows))
	}
	out, err := h.e.Prepare(ctx, h.sess, `SELECT k FROM ks.f WHERE m CONTAINS KEY ? ALLOW FILTERING`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := out.Result.(frame.PreparedResult).Params; len(p) != 1 || p[0].Type.ID != frame.TypeVarchar {
		t.Errorf("CONTAINS KEY ? marker: %+v, want the map's key type", p)
	}
	wantErr(t, h.queryErr(`SELECT k FROM ks.f WHERE tags CONTAINS KEY 'a' ALLOW FILTERING`), frame.ErrInvalid, "Cannot use CONTAINS KEY on non-map column tags")
	wantErr(t, h.queryErr(`SELECT k FROM ks.f WHERE tags CONTAINS 'a'`), frame.ErrInvalid, "ALLOW FILTERING")
}
