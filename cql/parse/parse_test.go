package parse

import (
	"reflect"
	"strings"
	"testing"
)

// corpus is every statement form; the fuzz target starts from it.
var corpus = []string{
	`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`,
	`create keyspace if not exists "MyKs" with REPLICATION = {'class': 'NetworkTopologyStrategy', 'dc1': '3', 'dc2': 2} and durable_writes = false;`,
	`CREATE SCHEMA ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '1'}`,
	`DROP KEYSPACE ks`,
	`DROP KEYSPACE IF EXISTS ks;`,
	`CREATE TABLE ks.t (k text PRIMARY KEY, c counter)`,
	`CREATE TABLE IF NOT EXISTS t (a int, b uuid, c counter, d counter, PRIMARY KEY ((a, b)))`,
	`CREATE TABLE ks.t (k bigint, c counter, PRIMARY KEY (k)) WITH idempotence = {'class': 'fbf', 'target_fpp': '0.0001'} AND comment = 'x'`,
	`CREATE TABLE ks.t (k blob, c counter, PRIMARY KEY (k)) WITH CLUSTERING ORDER BY (k DESC) AND COMPACT STORAGE AND gc_grace_seconds = 10`,
	`CREATE TABLE ks.t (k timeuuid, m map<text, frozen<list<int>>>, PRIMARY KEY (k, m))`,
	`CREATE TABLE ks.h (k ascii PRIMARY KEY, c handoff_counter)`,
	`CREATE TABLE ks.nopk (k ascii, c counter)`,
	`CREATE COLUMNFAMILY ks.t (k varchar PRIMARY KEY, c counter,)`,
	`DROP TABLE ks.t`,
	`ALTER TABLE ks.t ADD d counter`,
	`ALTER TABLE t ADD (d counter, "E" handoff_counter, s int STATIC)`,
	`ALTER TABLE ks.t DROP d`,
	`alter columnfamily ks.t drop (d, "E")`,
	`DROP TABLE IF EXISTS t`,
	`DROP COLUMNFAMILY ks.t`,
	`USE ks`,
	`TRUNCATE ks.t`,
	`truncate table "T"`,
	`TRUNCATE COLUMNFAMILY ks.t;`,
	`USE "Quoted""Ks"`,
	`UPDATE ks.t SET c = c + ? WHERE k = ?`,
	`UPDATE ks.t SET c = c + ?, d = d - 3 WHERE k = :k AND k2 = 5`,
	`update t using ttl 10 and timestamp 123 set c = c + -5 where k = 'a''b' if exists`,
	`UPDATE t SET c = 4 WHERE k = 0x00ff IF c = 3 AND d > 2`,
	`UPDATE t SET "C" = "C" + 1 WHERE k = 123e4567-e89b-12d3-a456-426614174000`,
	`SELECT * FROM ks.t`,
	`SELECT c, d AS dd FROM ks.t WHERE k = ? LIMIT 10`,
	`SELECT COUNT(*) FROM t WHERE k IN (1, 2, 3) ALLOW FILTERING`,
	`select count(1) as n from system.local where key = 'local'`,
	`SELECT schema_version FROM system.local WHERE key='local'`,
	`SELECT * FROM t WHERE k IN ? LIMIT ?`,
	`SELECT DISTINCT k, token(k) FROM t`,
	`SELECT JSON DISTINCT k FROM t`,
	`SELECT JSON * FROM t WHERE k = 1`,
	`SELECT json, json AS j FROM t`,
	`SELECT WRITETIME(c), ttl("C") AS t, writetime, ttl FROM t`,
	`SELECT distinct FROM t`,
	`SELECT distinct AS d, distinct FROM t`,
	`SELECT DISTINCT distinct FROM t`,
	`SELECT * FROM t WHERE k = 1 ORDER BY c DESC, "D" ASC, e LIMIT 3`,
	`SELECT k, token(k), TOKEN(a, "B") AS t FROM ks.t WHERE token(k) > -9223372036854775808 AND token(k) <= ?`,
	`SELECT * FROM t WHERE token(a, b) >= :lo AND token(a, b) < 5 AND token(a, b) = 7`,
	`SELECT * FROM t WHERE a >= 1.5 AND b <= -2.5e3 AND c != true AND d < false AND e = null`,
	`DELETE FROM ks.t WHERE k = ?`,
	`DELETE c, d FROM t USING TIMESTAMP 5 WHERE k = 1 IF EXISTS`,
	`INSERT INTO t (k, c) VALUES (?, 1) IF NOT EXISTS USING TTL 5`,
	`CREATE TABLE ks.r (k text PRIMARY KEY, c reset_counter, m map<text, reset_counter>)`,
	`UPDATE ks.r SET m = m + {'a': 1, 'b': ?} WHERE k = ?`,
	`UPDATE ks.r SET m = m + ?, c = c + 1 WHERE k = ?`,
	`DELETE m['a'], c, m[?] FROM ks.r WHERE k = ?`,
	`DELETE m['it''s'] FROM ks.r WHERE k = 'x'`,
	`SELECT m['a'], m[?] AS x, m FROM ks.r WHERE k = ?`,
	`BEGIN BATCH UPDATE t SET c = c + 1 WHERE k = 1; APPLY BATCH`,
	`BEGIN UNLOGGED BATCH UPDATE t SET c = c + ? WHERE k = ? UPDATE t SET c = c - ? WHERE k = ? APPLY BATCH;`,
	`BEGIN COUNTER BATCH USING TIMESTAMP 3 UPDATE ks.t SET c = c + 1 WHERE k = 'a'; DELETE FROM ks.t WHERE k = 'b'; APPLY BATCH`,
	"SELECT /* a block\ncomment */ * -- a line comment\nFROM t // another\n;",
}

func TestParseCorpusRoundTrip(t *testing.T) {
	for _, q := range corpus {
		st, err := Parse(q)
		if err != nil {
			t.Errorf("Parse(%q): %v", q, err)
			continue
		}
		again, err := Parse(st.String())
		if err != nil {
			t.Errorf("Parse(%q) rendered %q, which fails: %v", q, st.String(), err)
			continue
		}
		if !reflect.DeepEqual(st, again) {
			t.Errorf("round trip of %q:\n got %#v\nwant %#v", q, again, st)
		}
	}
}

func TestParseStatements(t *testing.T) {
	cases := []struct {
		q    string
		want Statement
	}{
		{`CREATE KEYSPACE IF NOT EXISTS Ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3} AND durable_writes = true`,
			&CreateKeyspace{IfNotExists: true, Name: "ks", Properties: []Property{
				{Name: "replication", Value: Term{Kind: TermMap, Map: []MapEntry{
					{Key: Term{Kind: TermString, Text: "class"}, Value: Term{Kind: TermString, Text: "SimpleStrategy"}},
					{Key: Term{Kind: TermString, Text: "replication_factor"}, Value: Term{Kind: TermInt, Text: "3"}},
				}}},
				{Name: "durable_writes", Value: Term{Kind: TermBool, Text: "true"}},
			}}},
		{`drop keyspace if exists "Ks"`, &DropKeyspace{IfExists: true, Name: "Ks"}},
		{`CREATE TABLE ks.T (K text, "Two" int, c counter, PRIMARY KEY ((k, "Two")))`,
			&CreateTable{Table: TableName{"ks", "t"}, Columns: []ColumnDef{
				{Name: "k", Type: Type{Name: "text"}}, {Name: "Two", Type: Type{Name: "int"}}, {Name: "c", Type: Type{Name: "counter"}},
			}, PartitionKey: []string{"k", "Two"}}},
		{`CREATE TABLE t (k int, x int, c counter, PRIMARY KEY (k, x))`,
			&CreateTable{Table: TableName{Name: "t"}, Columns: []ColumnDef{
				{Name: "k", Type: Type{Name: "int"}}, {Name: "x", Type: Type{Name: "int"}}, {Name: "c", Type: Type{Name: "counter"}},
			}, PartitionKey: []string{"k"}, Clustering: []string{"x"}}},
		{`USE "MyKs"`, &Use{Keyspace: "MyKs"}},
		{`UPDATE t SET c = c + ?, d = d - 3 WHERE k = :key AND k2 = ?`, &Update{
			Table: TableName{Name: "t"},
			Set: []SetClause{
				{Column: "c", Op: '+', Other: "c", Value: Term{Kind: TermMarker, Marker: 0}},
				{Column: "d", Op: '-', Other: "d", Value: Term{Kind: TermInt, Text: "3"}},
			},
			Where: []Relation{
				{Column: "k", Op: "=", Value: Term{Kind: TermMarker, Marker: 1, Name: "key"}},
				{Column: "k2", Op: "=", Value: Term{Kind: TermMarker, Marker: 2}},
			}}},
		{`UPDATE t USING TIMESTAMP 5 SET c = c + -2 WHERE k = 'it''s'`, &Update{
			Table: TableName{Name: "t"},
			Using: []UsingOption{{Value: Term{Kind: TermInt, Text: "5"}}},
			Set:   []SetClause{{Column: "c", Op: '+', Other: "c", Value: Term{Kind: TermInt, Text: "-2"}}},
			Where: []Relation{{Column: "k", Op: "=", Value: Term{Kind: TermString, Text: "it's"}}}}},
		{`SELECT COUNT(*) AS n, key FROM system.local WHERE key = 'local' LIMIT 1 ALLOW FILTERING`, &Select{
			Selectors: []Selector{{Count: true, Alias: "n"}, {Column: "key"}},
			Table:     TableName{"system", "local"},
			Where:     []Relation{{Column: "key", Op: "=", Value: Term{Kind: TermString, Text: "local"}}},
			Limit:     &Term{Kind: TermInt, Text: "1"}, AllowFiltering: true}},
		{`DELETE c FROM t WHERE k IN (0xAB, ?)`, &Delete{Columns: []string{"c"}, Table: TableName{Name: "t"},
			Where: []Relation{{Column: "k", Op: "IN", InList: true, In: []Term{{Kind: TermBlob, Text: "0xab"}, {Kind: TermMarker}}}}}},
		{`BEGIN COUNTER BATCH UPDATE t SET c = c + ? WHERE k = ?; UPDATE t SET c = c + ? WHERE k = ? APPLY BATCH`, &Batch{
			Type: CounterBatch,
			Statements: []Statement{
				&Update{Table: TableName{Name: "t"}, Set: []SetClause{{Column: "c", Op: '+', Other: "c", Value: Term{Kind: TermMarker, Marker: 0}}},
					Where: []Relation{{Column: "k", Op: "=", Value: Term{Kind: TermMarker, Marker: 1}}}},
				&Update{Table: TableName{Name: "t"}, Set: []SetClause{{Column: "c", Op: '+', Other: "c", Value: Term{Kind: TermMarker, Marker: 2}}},
					Where: []Relation{{Column: "k", Op: "=", Value: Term{Kind: TermMarker, Marker: 3}}}},
			}}},
		{`DELETE c, m['a'], m[?] FROM t WHERE k = ?`, &Delete{Columns: []string{"c", "m", "m"},
			Elements: []*Term{nil, {Kind: TermString, Text: "a"}, {Kind: TermMarker, Marker: 0}}, Table: TableName{Name: "t"},
			Where: []Relation{{Column: "k", Op: "=", Value: Term{Kind: TermMarker, Marker: 1}}}}},
		{`UPDATE t SET m = m + {'a': 1, 'b': ?} WHERE k = ?`, &Update{Table: TableName{Name: "t"},
			Set: []SetClause{{Column: "m", Op: '+', Other: "m", Value: Term{Kind: TermMap, Map: []MapEntry{
				{Key: Term{Kind: TermString, Text: "a"}, Value: Term{Kind: TermInt, Text: "1"}},
				{Key: Term{Kind: TermString, Text: "b"}, Value: Term{Kind: TermMarker, Marker: 0}},
			}}}},
			Where: []Relation{{Column: "k", Op: "=", Value: Term{Kind: TermMarker, Marker: 1}}}}},
		{`SELECT m['a'] AS a FROM t`, &Select{Selectors: []Selector{{Column: "m", Element: &Term{Kind: TermString, Text: "a"}, Alias: "a"}},
			Table: TableName{Name: "t"}}},
		{`SELECT * FROM t WHERE k = 123E4567-E89B-12D3-A456-426614174000`, &Select{Star: true, Table: TableName{Name: "t"},
			Where: []Relation{{Column: "k", Op: "=", Value: Term{Kind: TermUUID, Text: "123e4567-e89b-12d3-a456-426614174000"}}}}},
	}
	for _, c := range cases {
		got, err := Parse(c.q)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.q, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%q):\n got %#v\nwant %#v", c.q, got, c.want)
		}
	}
}

func TestParseMarkers(t *testing.T) {
	for q, want := range map[string]int{
		`SELECT * FROM t`: 0,
		`UPDATE t SET c = c + ?, d = d + :x WHERE k = ? AND j = ?`:                                      4,
		`BEGIN BATCH UPDATE t SET c = c + ? WHERE k = ? UPDATE t SET c = c + ? WHERE k = ? APPLY BATCH`: 4,
		`SELECT * FROM t WHERE k IN (?, ?) LIMIT ?`:                                                     3,
		`DELETE m[?], m['b'] FROM t WHERE k = ?`:                                                        2,
		`SELECT m[?] FROM t WHERE k = ?`:                                                                2,
	} {
		st, err := Parse(q)
		if err != nil {
			t.Fatalf("Parse(%q): %v", q, err)
		}
		if got := Markers(st); got != want {
			t.Errorf("Markers(%q) = %d, want %d", q, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		q          string
		line, col  int
		msgContain string
	}{
		{`FOO BAR`, 1, 1, "line 1:0 no viable alternative at input 'FOO'"},
		{`SELECT FOO`, 1, 11, "line 1:10 mismatched input '<EOF>' expecting K_FROM"},
		{`SELECT * FORM t`, 1, 10, "line 1:9 mismatched input 'FORM' expecting K_FROM"},
		{"SELECT *\n  FROM t WHERE", 2, 15, "line 2:14 no viable alternative at input '<EOF>'"},
		{`SELECT * FROM t extra`, 1, 17, "line 1:16 mismatched input 'extra' expecting EOF"},
		{`UPDATE t SET c = c * 2 WHERE k = 1`, 1, 20, "mismatched input '*' expecting '+'"},
		{`SELECT * FROM t WHERE k = 'abc`, 1, 31, "mismatched character '<EOF>' expecting '''"},
		{`SELECT * FROM select`, 1, 15, "no viable alternative at input 'select'"},
		{`UPDATE t SET a = b + 1 WHERE k = 1`, 1, 20, "Only expressions of the form X = X +<value> are supported."},
		{`UPDATE t SET a = b - 1 WHERE k = 1`, 1, 20, "Only expressions of the form X = X -<value> are supported."},
		{`CREATE TABLE t (k int PRIMARY KEY, c counter PRIMARY KEY)`, 1, 46, "Multiple PRIMARY KEYs"},
		{`SELECT * FROM t /* open`, 1, 24, "expecting '*'"},
		{`SELECT * FROM t WHERE k = 12ab`, 1, 29, "no viable alternative at character 'a'"},
		{`USE ""`, 1, 5, "no viable alternative"},
		{`BEGIN BATCH SELECT * FROM t APPLY BATCH`, 1, 13, "no viable alternative at input 'SELECT'"},
		{`BEGIN BATCH UPDATE t SET c = c + 1 WHERE k = 1`, 1, 47, "mismatched input '<EOF>' expecting K_APPLY"},
		{`SELECT * FROM t WHERE k = ~`, 1, 27, "no viable alternative at character '~'"},
		{`DELETE m['a' FROM t WHERE k = 1`, 1, 14, "mismatched input 'FROM' expecting ']'"},
		{`DELETE m[] FROM t WHERE k = 1`, 1, 10, "no viable alternative at input ']'"},
	}
	// A table without a primary key parses: its error is the executor's.
	if _, err := Parse(`CREATE TABLE t (k int, c counter)`); err != nil {
		t.Errorf("a table without a primary key: %v", err)
	}
	if _, err := Parse(`UPDATE t SET a = b + 1 WHERE k = 1`); err == nil || strings.HasPrefix(err.Error(), "line") {
		t.Errorf("SET a = b + 1: %v, want Cassandra's message without a position", err)
	}
	for _, c := range cases {
		_, err := Parse(c.q)
		pe, ok := err.(*Error)
		if !ok {
			t.Errorf("Parse(%q) = %v, want a *parse.Error", c.q, err)
			continue
		}
		if pe.Line != c.line || pe.Column != c.col || !strings.Contains(pe.Error(), c.msgContain) {
			t.Errorf("Parse(%q): error at %d:%d %q, want %d:%d containing %q", c.q, pe.Line, pe.Column, pe.Error(), c.line, c.col, c.msgContain)
		}
	}
}

func TestIdentQuoting(t *testing.T) {
	for name, want := range map[string]string{
		"abc": "abc", "Abc": `"Abc"`, "select": `"select"`, "key": `"key"`, `a"b`: `"a""b"`, "1a": `"1a"`, "a b": `"a b"`,
	} {
		if got := Ident(name); got != want {
			t.Errorf("Ident(%q) = %s, want %s", name, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, q := range corpus {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		st, err := Parse(q)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse(%q) error %T is not a *parse.Error", q, err)
			}
			return
		}
		s := st.String()
		again, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q) rendered %q, which fails: %v", q, s, err)
		}
		if !reflect.DeepEqual(st, again) {
			t.Fatalf("Parse(%q) rendered %q, which parses differently:\n%#v\n%#v", q, s, st, again)
		}
	})
}

func TestParseAlterTable(t *testing.T) {
	st, err := Parse(`ALTER TABLE ks.t WITH idempotence = {'class': 'fbf', 'target_fpp': '0.001'} AND comment = 'x'`)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := st.(*AlterTable)
	if !ok || a.Table.Keyspace != "ks" || a.Table.Name != "t" || len(a.Properties) != 2 || a.Properties[0].Name != "idempotence" {
		t.Fatalf("parsed %#v", st)
	}
	back, err := Parse(a.String())
	if err != nil || back.String() != a.String() {
		t.Fatalf("re-rendered %q: %v", a.String(), err)
	}
	if _, err := Parse(`ALTER KEYSPACE ks WITH durable_writes = false`); err == nil {
		t.Fatal("ALTER KEYSPACE, outside the subset, parsed")
	}
}

// TestUnsupportedStatements: the statements of features idemkv does not
// serve parse as Unsupported naming the feature, function bodies included.
func TestUnsupportedStatements(t *testing.T) {
	for q, want := range map[string]string{
		"CREATE INDEX ON t (v)":                    "secondary indexes",
		"create custom index i on t (v) using 'x'": "secondary indexes",
		"CREATE TYPE ks.addr (street text)":        "user-defined types",
		"DROP TYPE IF EXISTS ks.addr":              "user-defined types",
		"CREATE OR REPLACE FUNCTION f() RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS $$ return 1; $$": "user-defined functions",
		"CREATE AGGREGATE a (int) SFUNC f STYPE int":                                                             "user-defined aggregates",
		"CREATE  MATERIALIZED\tVIEW v AS SELECT":                                                                 "materialized views",
	} {
		st, err := Parse(q)
		u, ok := st.(*Unsupported)
		if err != nil || !ok || u.Feature != want {
			t.Errorf("Parse(%q) = %#v, %v; want Unsupported %q", q, st, err, want)
		}
	}
	if _, err := Parse("CREATE TABLE t (k int PRIMARY KEY)"); err != nil {
		t.Errorf("CREATE TABLE: %v", err)
	}
}
