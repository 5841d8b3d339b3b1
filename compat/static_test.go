package compat

import (
	"testing"

	"github.com/gocql/gocql"
)

// TestGocqlStaticColumns: a static column and a static counter through
// gocql on a 3-node ring: one value per partition on every row, the
// statics of a partition with no clustering row, gocql's metadata of the
// column's kind.
func TestGocqlStaticColumns(t *testing.T) {
	r := startRing(t, 3, nil)
	s := r.session(r.cluster())
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.ev (k text, t int, v text, owner text static, PRIMARY KEY (k, t)) WITH CLUSTERING ORDER BY (t DESC)`)
	exec(t, s, `INSERT INTO ks.ev (k, t, v, owner) VALUES (?, ?, ?, ?)`, "a", 1, "one", "ann")
	exec(t, s, `INSERT INTO ks.ev (k, t, v) VALUES (?, ?, ?)`, "a", 2, "two")
	exec(t, s, `UPDATE ks.ev SET owner = ? WHERE k = ?`, "bob", "a")
	exec(t, s, `INSERT INTO ks.ev (k, owner) VALUES (?, ?)`, "b", "cy")
	iter := s.Query(`SELECT t, v, owner FROM ks.ev WHERE k = ?`, "a").Consistency(gocql.All).Iter()
	var tt int
	var v, owner string
	var got []int
	for iter.Scan(&tt, &v, &owner) {
		if owner != "bob" {
			t.Errorf("row %d: owner %q, want bob", tt, owner)
		}
		got = append(got, tt)
	}
	if err := iter.Close(); err != nil || len(got) != 2 || got[0] != 2 {
		t.Fatalf("rows %v (%v), want [2 1]", got, err)
	}
	var tp *int
	if err := s.Query(`SELECT t, owner FROM ks.ev WHERE k = ?`, "b").Consistency(gocql.Quorum).Scan(&tp, &owner); err != nil || tp != nil || owner != "cy" {
		t.Fatalf("statics-only partition: t %v owner %q (%v), want null and cy", tp, owner, err)
	}
	exec(t, s, `CREATE TABLE ks.hits (page text, day int, views counter, total counter static, PRIMARY KEY (page, day))`)
	for day := range 3 {
		exec(t, s, `UPDATE ks.hits SET views = views + 1, total = total + 1 WHERE page = ? AND day = ?`, "p", day)
	}
	var total int64
	if err := s.Query(`SELECT DISTINCT page, total FROM ks.hits WHERE page = ?`, "p").Consistency(gocql.All).Scan(new(string), &total); err != nil || total != 3 {
		t.Fatalf("static counter total = %d (%v), want 3", total, err)
	}
	md, err := s.KeyspaceMetadata("ks")
	if err != nil {
		t.Fatal(err)
	}
	if c := md.Tables["ev"].Columns["owner"]; c == nil || c.Kind != gocql.ColumnStatic {
		t.Errorf("gocql's metadata of owner: %+v", c)
	}
}
