package exec

import (
	"testing"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
)

// cell returns the value of column col of the only row of a SELECT.
func (h *harness) one(q string, vals ...frame.Value) []frame.Value {
	h.t.Helper()
	r := h.rows(q, vals...)
	if len(r.Rows) != 1 {
		h.t.Fatalf("%s: %d rows, want 1", q, len(r.Rows))
	}
	return r.Rows[0]
}

// tick makes the harness's clock advance a millisecond at every reading,
// as statements' timestamps do.
func (h *harness) tick() {
	now := time.Unix(1700000000, 0)
	h.e.opts.Now = func() time.Time {
		now = now.Add(time.Millisecond)
		return now
	}
}

func (h *harness) setupRegular() {
	h.t.Helper()
	h.tick()
	h.query(`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`)
}

// TestRegularTableScalars: INSERT, UPDATE, DELETE and SELECT of scalar
// columns: nulls, USING TIMESTAMP (last write wins, a tombstone on a tie),
// the row marker (a row inserted with only its key exists; one made by
// UPDATE disappears with its last column), writetime().
func TestRegularTableScalars(t *testing.T) {
	h := newHarness(t)
	h.setupRegular()
	h.query(`CREATE TABLE ks.u (id int PRIMARY KEY, name text, age int, score double, ok boolean, big varint, d decimal, s smallint, ty tinyint, f float, ts timestamp, dt date, tm time, ip inet)`)
	h.query(`INSERT INTO ks.u (id, name, age) VALUES (1, 'ann', 31)`)
	h.query(`INSERT INTO ks.u (id, name, age) VALUES (?, ?, ?)`, int_(2), text_("bob"), int_(40))
	r := h.one(`SELECT name, age, score FROM ks.u WHERE id = 1`)
	if string(r[0].Bytes) != "ann" || decodeInt(t, r[1]) != 31 || !r[2].Null {
		t.Fatalf("row 1 = %v", r)
	}
	h.query(`UPDATE ks.u SET age = 32, score = 1.5 WHERE id = 1`)
	r = h.one(`SELECT age, score FROM ks.u WHERE id = 1`)
	if decodeInt(t, r[0]) != 32 || len(r[1].Bytes) != 8 {
		t.Fatalf("after UPDATE row 1 = %v", r)
	}
	h.query(`UPDATE ks.u SET age = null WHERE id = 1`)
	if r = h.one(`SELECT age FROM ks.u WHERE id = 1`); !r[0].Null {
		t.Fatalf("age after SET null = %v", r)
	}
	// Last write wins by timestamp, not by arrival.
	h.query(`UPDATE ks.u USING TIMESTAMP 2000 SET name = 'new' WHERE id = 3`)
	h.query(`UPDATE ks.u USING TIMESTAMP 1000 SET name = 'old' WHERE id = 3`)
	if r = h.one(`SELECT name, writetime(name) FROM ks.u WHERE id = 3`); string(r[0].Bytes) != "new" || decodeBig(t, r[1]) != 2000 {
		t.Fatalf("LWW: %q %v", r[0].Bytes, r[1])
	}
	h.query(`DELETE name FROM ks.u USING TIMESTAMP 2000 WHERE id = 3`)
	if r := h.rows(`SELECT * FROM ks.u WHERE id = 3`); len(r.Rows) != 0 {
		t.Fatalf("a row made by UPDATE, its only column deleted (tombstone wins a tie): %v", r.Rows)
	}
	// A row inserted with its key only exists.
	h.query(`INSERT INTO ks.u (id) VALUES (4)`)
	if r := h.rows(`SELECT id, name FROM ks.u WHERE id = 4`); len(r.Rows) != 1 || !r.Rows[0][1].Null {
		t.Fatalf("key-only row: %v", r.Rows)
	}
	h.query(`DELETE FROM ks.u WHERE id = 4`)
	if r := h.rows(`SELECT id FROM ks.u WHERE id = 4`); len(r.Rows) != 0 {
		t.Fatalf("deleted row: %v", r.Rows)
	}
	// Literals of every native type read back as their CQL encoding.
	h.query(`INSERT INTO ks.u (id, big, d, s, ty, f, ts, dt, tm, ip, ok) VALUES (5, -129, 12.50, -2, 7, 0.5, '2020-01-02 03:04:05+0000', '1970-01-02', '00:00:01', '10.0.0.1', true)`)
	r = h.one(`SELECT big, d, s, ty, f, ts, dt, tm, ip, ok FROM ks.u WHERE id = 5`)
	if len(r[0].Bytes) != 2 || r[0].Bytes[0] != 0xff || r[0].Bytes[1] != 0x7f {
		t.Errorf("varint -129 = %x", r[0].Bytes)
	}
	if string(r[1].Bytes) != "\x00\x00\x00\x02\x04\xe2" { // scale 2, 1250
		t.Errorf("decimal 12.50 = %x", r[1].Bytes)
	}
	if string(r[2].Bytes) != "\xff\xfe" || string(r[3].Bytes) != "\x07" {
		t.Errorf("smallint, tinyint = %x %x", r[2].Bytes, r[3].Bytes)
	}
	if v := decodeBig(t, r[5]); v != time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli() {
		t.Errorf("timestamp = %d", v)
	}
	if string(r[6].Bytes) != "\x80\x00\x00\x01" || decodeBig(t, r[7]) != 1e9 || string(r[8].Bytes) != "\x0a\x00\x00\x01" || string(r[9].Bytes) != "\x01" {
		t.Errorf("date, time, inet, boolean = %x %x %x %x", r[6].Bytes, r[7].Bytes, r[8].Bytes, r[9].Bytes)
	}
	for _, c := range []struct{ q, msg string }{
		{`INSERT INTO ks.u (id, age) VALUES (9, 'x')`, "Invalid STRING constant (x) for \"age\" of type int"},
		{`INSERT INTO ks.u (name) VALUES ('x')`, "Some partition key parts are missing: id"},
		{`INSERT INTO ks.u (id, name) VALUES (1, 'a') IF NOT EXISTS`, "lightweight transactions"},
		{`UPDATE ks.u SET age = age + 1 WHERE id = 1`, "Invalid operation (age = age + ?) for non counter column age"},
		{`CREATE TABLE ks.mixed (k int PRIMARY KEY, c counter, v int)`, "Cannot mix counter and non counter columns in the same table"},
		{`CREATE TABLE ks.udt (k int PRIMARY KEY, v address)`, "Unknown type ks.address"},
	} {
		wantErr(t, h.queryErr(c.q), frame.ErrInvalid, c.msg)
	}
	wantErr(t, h.queryErr(`INSERT INTO ks.u (id, age) VALUES (?, ?)`, int_(9), text_("xyz")), frame.ErrInvalid, "expected 4 or 0 byte int (3)")
}

// TestRegularTableTTL: a TTL (USING TTL, default_time_to_live) hides a
// cell, and a row inserted with one, once it expires; ttl() counts down.
func TestRegularTableTTL(t *testing.T) {
	h := newHarness(t)
	h.setupRegular()
	now := time.Unix(1700000000, 0)
	h.e.opts.Now = func() time.Time { return now }
	h.query(`CREATE TABLE ks.s (k text PRIMARY KEY, v text, w text) WITH default_time_to_live = 100`)
	h.query(`INSERT INTO ks.s (k, v) VALUES ('a', 'x') USING TTL 10`)
	h.query(`INSERT INTO ks.s (k, v) VALUES ('b', 'y')`)
	h.query(`UPDATE ks.s USING TTL 0 SET w = 'forever' WHERE k = 'b'`)
	now = now.Add(4 * time.Second)
	if r := h.one(`SELECT ttl(v) FROM ks.s WHERE k = 'a'`); decodeInt(t, r[0]) != 6 {
		t.Fatalf("ttl after 4 s of 10 = %d", decodeInt(t, r[0]))
	}
	now = now.Add(6 * time.Second)
	if r := h.rows(`SELECT * FROM ks.s WHERE k = 'a'`); len(r.Rows) != 0 {
		t.Fatalf("row with an expired TTL: %v", r.Rows)
	}
	now = now.Add(100 * time.Second)
	r := h.one(`SELECT v, w, ttl(w) FROM ks.s WHERE k = 'b'`)
	if !r[0].Null || string(r[1].Bytes) != "forever" || !r[2].Null {
		t.Fatalf("after the default TTL: %v", r)
	}
}

// TestRegularCollections: non-frozen maps, sets and lists element by
// element (add, remove, put, index set and delete, append and prepend,
// overwrite), frozen collections and tuples whole.
func TestRegularCollections(t *testing.T) {
	h := newHarness(t)
	h.setupRegular()
	h.query(`CREATE TABLE ks.c (k int PRIMARY KEY, m map<text, int>, s set<int>, l list<text>, fm frozen<map<int, text>>, tu tuple<int, text>)`)
	h.query(`INSERT INTO ks.c (k, m, s, l) VALUES (1, {'b': 2, 'a': 1}, {3, -1, 2}, ['x', 'y'])`)
	h.query(`UPDATE ks.c SET m = m + {'c': 3}, s = s + {10}, l = l + ['z'] WHERE k = 1`)
	h.query(`UPDATE ks.c SET l = ['w'] + l WHERE k = 1`)
	h.query(`UPDATE ks.c SET m['a'] = 100, s = s - {3}, m = m - {'b'} WHERE k = 1`)
	h.query(`UPDATE ks.c SET l[1] = 'X' WHERE k = 1`)
	h.query(`DELETE l[2] FROM ks.c WHERE k = 1`)
	r := h.one(`SELECT m, s, l FROM ks.c WHERE k = 1`)
	ks, vs, err := frame.DecodeMap(r[0].Bytes)
	if err != nil || len(ks) != 2 || string(ks[0]) != "a" || decodeInt(t, frame.Bytes(vs[0])) != 100 || string(ks[1]) != "c" {
		t.Fatalf("map = %q %v %v", ks, vs, err)
	}
	set, _ := frame.DecodeSet(r[1].Bytes)
	var got []int32
	for _, e := range set {
		got = append(got, decodeInt(t, frame.Bytes(e)))
	}
	if len(got) != 3 || got[0] != -1 || got[1] != 2 || got[2] != 10 {
		t.Fatalf("set = %v, want [-1 2 10]", got)
	}
	list, _ := frame.DecodeList(r[2].Bytes)
	if len(list) != 3 || string(list[0]) != "w" || string(list[1]) != "X" || string(list[2]) != "z" {
		t.Fatalf("list = %q, want [w X z]", list)
	}
	if r := h.one(`SELECT m['a'], m['nope'], m[?] FROM ks.c WHERE k = 1`, text_("c")); decodeInt(t, r[0]) != 100 || !r[1].Null || decodeInt(t, r[2]) != 3 {
		t.Fatalf("m['a'], m['nope'], m['c'] = %v", r)
	}
	h.query(`UPDATE ks.c SET m = {'only': 1} WHERE k = 1`)
	if r := h.one(`SELECT m FROM ks.c WHERE k = 1`); string(r[0].Bytes) != string(frame.EncodeMap([][]byte{[]byte("only")}, [][]byte{frame.EncodeInt(1)})) {
		t.Fatalf("map after overwrite = %x", r[0].Bytes)
	}
	h.query(`DELETE m FROM ks.c WHERE k = 1`)
	if r := h.one(`SELECT m FROM ks.c WHERE k = 1`); !r[0].Null {
		t.Fatalf("deleted map = %x", r[0].Bytes)
	}
	h.query(`INSERT INTO ks.c (k, fm, tu) VALUES (2, {2: 'b', 1: 'a'}, (7, 'seven'))`)
	if r := h.one(`SELECT fm[1], fm[3] FROM ks.c WHERE k = 2`); string(r[0].Bytes) != "a" || !r[1].Null {
		t.Fatalf("fm[1], fm[3] = %v", r)
	}
	r = h.one(`SELECT fm, tu FROM ks.c WHERE k = 2`)
	if want := frame.EncodeMap([][]byte{frame.EncodeInt(1), frame.EncodeInt(2)}, [][]byte{[]byte("a"), []byte("b")}); string(r[0].Bytes) != string(want) {
		t.Errorf("frozen map = %x, want %x (sorted by key, as Cassandra stores it)", r[0].Bytes, want)
	}
	if string(r[1].Bytes) != "\x00\x00\x00\x04\x00\x00\x00\x07\x00\x00\x00\x05seven" {
		t.Errorf("tuple = %x", r[1].Bytes)
	}
	wantErr(t, h.queryErr(`UPDATE ks.c SET fm = fm + {3: 'c'} WHERE k = 2`), frame.ErrInvalid, "for frozen collection column fm")
	wantErr(t, h.queryErr(`UPDATE ks.c SET l[9] = 'q' WHERE k = 1`), frame.ErrInvalid, "List index 9 out of bound")
	wantErr(t, h.queryErr(`CREATE TABLE ks.bad (k int PRIMARY KEY, m map<int, list<int>>)`), frame.ErrInvalid, "Non-frozen collections are not allowed inside collections")
}

// TestRegularClusteringAndBatch: a regular table with clustering columns,
// written by a batch, read in slices and deleted by range; counter and
// regular statements do not mix in a batch.
func TestRegularClusteringAndBatch(t *testing.T) {
	h := newHarness(t)
	h.tick()
	h.setup()
	h.query(`CREATE TABLE ks.ev (k text, t int, v text, PRIMARY KEY (k, t)) WITH CLUSTERING ORDER BY (t DESC)`)
	h.query(`BEGIN BATCH INSERT INTO ks.ev (k, t, v) VALUES ('a', 1, 'one'); INSERT INTO ks.ev (k, t, v) VALUES ('a', 2, 'two'); UPDATE ks.ev SET v = 'three' WHERE k = 'a' AND t = 3; APPLY BATCH`)
	r := h.rows(`SELECT t, v FROM ks.ev WHERE k = 'a'`)
	if len(r.Rows) != 3 || decodeInt(t, r.Rows[0][0]) != 3 || string(r.Rows[2][1].Bytes) != "one" {
		t.Fatalf("rows = %v", r.Rows)
	}
	h.query(`DELETE FROM ks.ev WHERE k = 'a' AND t >= 2`)
	if r := h.rows(`SELECT t FROM ks.ev WHERE k = 'a'`); len(r.Rows) != 1 || decodeInt(t, r.Rows[0][0]) != 1 {
		t.Fatalf("after the range deletion: %v", r.Rows)
	}
	wantErr(t, h.queryErr(`BEGIN UNLOGGED BATCH INSERT INTO ks.ev (k, t, v) VALUES ('a', 5, 'x'); UPDATE ks.t SET c = c + 1 WHERE k = 'a'; APPLY BATCH`), frame.ErrInvalid, "Counter and non-counter mutations cannot exist in the same batch")
	wantErr(t, h.queryErr(`BEGIN COUNTER BATCH INSERT INTO ks.ev (k, t, v) VALUES ('a', 5, 'x'); APPLY BATCH`), frame.ErrInvalid, "Cannot include non-counter statement in a counter batch")
}

// TestInsertJSONFilteringPerPartitionLimit: INSERT ... JSON (DEFAULT NULL
// and DEFAULT UNSET), ALLOW FILTERING on regular and counter columns, PER
// PARTITION LIMIT, and a clustering column of a custom type.
func TestInsertJSONFilteringPerPartitionLimit(t *testing.T) {
	h := newHarness(t)
	h.setupRegular()
	h.query(`CREATE TABLE ks.j (id text, n int, age int, state text, tags set<text>, m map<int, text>, PRIMARY KEY (id, n))`)
	h.query(`INSERT INTO ks.j JSON ?`, text_(`{"id": "u1", "n": 1, "age": 42, "state": "TX", "tags": ["a", "b"], "m": {"2": "two"}}`))
	h.query(`INSERT INTO ks.j JSON '{"id": "u1", "n": 2, "age": "7"}'`)
	h.query(`INSERT INTO ks.j JSON '{"id": "u1", "n": 1, "state": "CA"}' DEFAULT UNSET`)
	r := h.rows(`SELECT n, age, state, tags, m FROM ks.j WHERE id = 'u1'`)
	if len(r.Rows) != 2 || decodeInt(t, r.Rows[0][1]) != 42 || string(r.Rows[0][2].Bytes) != "CA" || decodeInt(t, r.Rows[1][1]) != 7 || !r.Rows[1][2].Null {
		t.Fatalf("rows after INSERT JSON: %v", r.Rows)
	}
	if want := frame.EncodeMap([][]byte{frame.EncodeInt(2)}, [][]byte{[]byte("two")}); string(r.Rows[0][4].Bytes) != string(want) {
		t.Errorf("map from JSON = %x, want %x", r.Rows[0][4].Bytes, want)
	}
	h.query(`INSERT INTO ks.j JSON '{"id": "u1", "n": 1}'`) // DEFAULT NULL nulls the rest
	if r := h.one(`SELECT age, state FROM ks.j WHERE id = 'u1' AND n = 1`); !r[0].Null || !r[1].Null {
		t.Errorf("INSERT JSON without DEFAULT UNSET left %v", r)
	}
	wantErr(t, h.queryErr(`INSERT INTO ks.j JSON '{"id": "u1", "n": 1, "nope": 3}'`), frame.ErrInvalid, "JSON values map contains unrecognized column: nope")
	wantErr(t, h.queryErr(`INSERT INTO ks.j JSON '{"id": "u1", "n": "x"}'`), frame.ErrInvalid, "Unable to make int from 'x'")

	for i := range 5 {
		h.query(`INSERT INTO ks.j (id, n, age) VALUES (?, ?, ?)`, text_("p"), int_(int32(i)), int_(int32(10*i)))
		h.query(`INSERT INTO ks.j (id, n, age) VALUES (?, ?, ?)`, text_("q"), int_(int32(i)), int_(int32(10*i+5)))
	}
	if r := h.rows(`SELECT id, n FROM ks.j WHERE age >= 20 AND age < 40 ALLOW FILTERING`); len(r.Rows) != 4 {
		t.Errorf("age in [20, 40): %d rows, want 4", len(r.Rows))
	}
	if r := h.rows(`SELECT n FROM ks.j WHERE id = 'p' AND age IN (10, 30) ALLOW FILTERING`); len(r.Rows) != 2 || decodeInt(t, r.Rows[1][0]) != 3 {
		t.Errorf("age IN (10, 30) of p: %v", r.Rows)
	}
	wantErr(t, h.queryErr(`SELECT n FROM ks.j WHERE age = 10`), frame.ErrInvalid, "ALLOW FILTERING")
	if r := h.rows(`SELECT id, n FROM ks.j PER PARTITION LIMIT 2`); len(r.Rows) != 6 {
		t.Errorf("PER PARTITION LIMIT 2 over 3 partitions: %d rows, want 6", len(r.Rows))
	}
	if r := h.rows(`SELECT n FROM ks.j WHERE id = 'q' PER PARTITION LIMIT 3 LIMIT 2`); len(r.Rows) != 2 {
		t.Errorf("PER PARTITION LIMIT 3 LIMIT 2: %d rows", len(r.Rows))
	}

	// Filtering on a counter column.
	h.query(`CREATE TABLE ks.cnt (k int, c int, n counter, PRIMARY KEY (k, c))`)
	for i := range 4 {
		h.query(`UPDATE ks.cnt SET n = n + ? WHERE k = 1 AND c = ?`, big(int64(i*i)), int_(int32(i)))
	}
	if r := h.rows(`SELECT c FROM ks.cnt WHERE k = 1 AND n > 1 ALLOW FILTERING`); len(r.Rows) != 2 || decodeInt(t, r.Rows[0][0]) != 2 {
		t.Errorf("n > 1: %v", r.Rows)
	}

	// A custom clustering type: LexicalUUIDType orders as two signed longs.
	h.query(`CREATE TABLE ks.lex (k text, c 'org.apache.cassandra.db.marshal.LexicalUUIDType', v int, PRIMARY KEY (k, c))`)
	hi := frame.Bytes([]byte{0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	lo := frame.Bytes([]byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	h.query(`INSERT INTO ks.lex (k, c, v) VALUES ('a', ?, 1)`, hi)
	h.query(`INSERT INTO ks.lex (k, c, v) VALUES ('a', ?, 2)`, lo)
	r = h.rows(`SELECT c, v FROM ks.lex WHERE k = 'a'`)
	if len(r.Rows) != 2 || string(r.Rows[0][0].Bytes) != string(lo.Bytes) || r.Columns[0].Type.ID != frame.TypeCustom {
		t.Errorf("LexicalUUIDType rows: %v (type %+v)", r.Rows, r.Columns[0].Type)
	}
	if r := h.rows(`SELECT v FROM ks.lex WHERE k = 'a' AND c = ?`, hi); len(r.Rows) != 1 || decodeInt(t, r.Rows[0][0]) != 1 {
		t.Errorf("c = hi: %v", r.Rows)
	}
}
