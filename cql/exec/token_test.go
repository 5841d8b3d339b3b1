package exec

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/ring"
)

// pagedRows runs a query page by page and returns every row and the
// number of pages.
func (h *harness) pagedRows(q string, pageSize int32, vals ...frame.Value) ([][]frame.Value, int) {
	h.t.Helper()
	p := params(vals...)
	p.PageSize = pageSize
	var all [][]frame.Value
	for pages := 1; ; pages++ {
		out, err := h.e.Query(ctx, h.sess, q, p, nil)
		if err != nil {
			h.t.Fatalf("%s: %v", q, err)
		}
		res := out.Result.(frame.RowsResult)
		if pageSize > 0 && len(res.Rows) > int(pageSize) {
			h.t.Fatalf("%s: page of %d rows, page size %d", q, len(res.Rows), pageSize)
		}
		all = append(all, res.Rows...)
		if res.PagingState == nil {
			return all, pages
		}
		if pages > 10000 {
			h.t.Fatalf("%s: more than 10000 pages", q)
		}
		p.PagingState = res.PagingState
	}
}

// TestTokenRanges splits a table's token ring at random tokens and reads
// every range as cqlsh's COPY TO does (the first range `token(k) <= t0`,
// then `token(k) > ti AND token(k) <= tj`, the last `token(k) > tn`), with
// literal and bound tokens at random page sizes: every row is read once,
// in its range, with its token.
func TestTokenRanges(t *testing.T) {
	h := newHarness(t)
	h.setup()
	r := testseed.Rand(t)
	n := 30 + r.IntN(50)
	tokens := map[string]int64{}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%d-%d", i, r.IntN(1000))
		tokens[k] = ring.Token([]byte(k))
		h.query(`UPDATE ks.t SET c = c + 1 WHERE k = ?`, text_(k))
	}
	splits := make([]int64, 1+r.IntN(8))
	for i := range splits {
		splits[i] = int64(r.Uint64())
	}
	// A split exactly on a row's token: the row belongs to the range it ends.
	for k := range tokens {
		splits = append(splits, tokens[k])
		break
	}
	slices.Sort(splits)
	splits = slices.Compact(splits)
	seen := map[string]int{}
	check := func(rows [][]frame.Value, lo, hi int64) {
		t.Helper()
		for _, row := range rows {
			k := string(row[0].Bytes)
			tok, err := frame.DecodeBigint(row[1].Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if tok != tokens[k] || tok <= lo || tok > hi {
				t.Errorf("row %q token %d (want %d) outside (%d, %d]", k, tok, tokens[k], lo, hi)
			}
			seen[k]++
		}
	}
	page := int32(1 + r.IntN(6))
	rows, _ := h.pagedRows(fmt.Sprintf(`SELECT k, token(k) FROM ks.t WHERE token(k) <= %d`, splits[0]), page)
	check(rows, math.MinInt64, splits[0])
	for i := 0; i+1 < len(splits); i++ {
		rows, _ := h.pagedRows(`SELECT k, token(k) FROM ks.t WHERE token(k) > ? AND token(k) <= ?`, page, big(splits[i]), big(splits[i+1]))
		check(rows, splits[i], splits[i+1])
	}
	rows, _ = h.pagedRows(fmt.Sprintf(`SELECT k, token(k) FROM ks.t WHERE token(k) > %d`, splits[len(splits)-1]), page)
	check(rows, splits[len(splits)-1], math.MaxInt64)
	for k := range tokens {
		if seen[k] != 1 {
			t.Errorf("row %q read %d times, want once", k, seen[k])
		}
	}

	// >=, < and = on one row's token; a range whose start is above its end
	// is empty (no wrap-around), as in Cassandra.
	for k, tok := range tokens {
		for _, q := range []string{
			`SELECT k FROM ks.t WHERE token(k) >= ? AND token(k) < ?`,
			`SELECT k FROM ks.t WHERE token(k) = ? AND token(k) < ?`,
		} {
			res := h.rows(q, big(tok), big(tok+1))
			if len(res.Rows) != 1 || string(res.Rows[0][0].Bytes) != k {
				t.Errorf("%s [%d %d]: %d rows, want %q", q, tok, tok+1, len(res.Rows), k)
			}
		}
		break
	}
	// A range starting at a row's token excludes that row, at any page size
	// (page size 1: the first row read is the one excluded).
	for k, tok := range tokens {
		n := 0
		for _, other := range tokens {
			if other > tok {
				n++
			}
		}
		rows, _ := h.pagedRows(`SELECT k FROM ks.t WHERE token(k) > ?`, 1, big(tok))
		if len(rows) != n {
			t.Errorf("token(k) > token(%q) at page size 1: %d rows, want %d", k, len(rows), n)
		}
		break
	}
	if res := h.rows(`SELECT k FROM ks.t WHERE token(k) > 10 AND token(k) <= -10`); len(res.Rows) != 0 {
		t.Errorf("an inverted range: %d rows, want none", len(res.Rows))
	}
	if res := h.rows(`SELECT count(*) FROM ks.t WHERE token(k) > -9223372036854775808`); !reflect.DeepEqual(res.Rows, [][]frame.Value{{big(int64(n))}}) {
		t.Errorf("count(*) of the whole ring: %v, want %d", res.Rows, n)
	}
	res := h.rows(`SELECT token(k) AS t FROM ks.t WHERE k = 'k0-0'`)
	if res.Columns[0].Name != "t" || !reflect.DeepEqual(res.Columns[0].Type, frame.Bigint) {
		t.Errorf("aliased token column %+v", res.Columns[0])
	}
	res = h.rows(`SELECT token(k) FROM ks.t LIMIT 1`)
	if res.Columns[0].Name != "system.token(k)" {
		t.Errorf("token column named %q, want system.token(k)", res.Columns[0].Name)
	}

	wantErr(t, h.queryErr(`SELECT k FROM ks.t WHERE token(c) > 0`), frame.ErrInvalid, "partition key order: k")
	wantErr(t, h.queryErr(`SELECT k FROM ks.t WHERE token(k) > 0 AND k = 'a'`), frame.ErrInvalid, "token()")
	wantErr(t, h.queryErr(`SELECT k FROM ks.t WHERE token(k) > ?`, frame.Null), frame.ErrInvalid, "null")
	wantErr(t, h.queryErr(`SELECT k FROM ks.t WHERE token(k) > 'a'`), frame.ErrInvalid, "Invalid STRING constant")
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + 1 WHERE token(k) > 0`), frame.ErrInvalid, "token()")

	out, err := h.e.Prepare(ctx, h.sess, `SELECT k FROM ks.t WHERE token(k) > ? AND token(k) <= ?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr := out.Result.(frame.PreparedResult)
	want := frame.ColumnSpec{Keyspace: "ks", Table: "t", Name: "partition key token", Type: frame.Bigint}
	if len(pr.Params) != 2 || !reflect.DeepEqual(pr.Params, []frame.ColumnSpec{want, want}) || len(pr.PKIndexes) != 0 {
		t.Errorf("prepared token markers %+v, pk %v", pr.Params, pr.PKIndexes)
	}
}

// TestINOrderAndPaging: IN on the partition key answers its partitions in
// the key type's order without duplicates, paged by the page size, and a
// prepared IN (?, ?) routes by its last marker, as Cassandra does.
func TestINOrderAndPaging(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.i (k int PRIMARY KEY, c counter)`)
	for _, k := range []int32{-7, 3, 12, 250, -1000} {
		h.query(`UPDATE ks.i SET c = c + 1 WHERE k = ?`, int_(k))
	}
	var got []int32
	for _, row := range h.rows(`SELECT k FROM ks.i WHERE k IN (250, 3, -7, 99, 3, -1000, 12)`).Rows {
		v, _ := frame.DecodeInt(row[0].Bytes)
		got = append(got, v)
	}
	if want := []int32{-1000, -7, 3, 12, 250}; !reflect.DeepEqual(got, want) {
		t.Errorf("IN rows %v, want %v (signed int order, no duplicates)", got, want)
	}
	rows, pages := h.pagedRows(`SELECT k FROM ks.i WHERE k IN (250, 3, -7, 12, -1000)`, 2)
	if len(rows) != 5 || pages != 3 {
		t.Errorf("IN at page size 2: %d rows in %d pages, want 5 in 3", len(rows), pages)
	}
	rows, pages = h.pagedRows(`SELECT k FROM ks.i WHERE k IN (250, 3, -7, 12, -1000) LIMIT 3`, 2)
	if len(rows) != 3 || pages != 2 {
		t.Errorf("IN with LIMIT 3 at page size 2: %d rows in %d pages, want 3 in 2", len(rows), pages)
	}
	if res := h.rows(`SELECT count(*) FROM ks.i WHERE k IN (250, 3, 99) LIMIT 1`); !reflect.DeepEqual(res.Rows, [][]frame.Value{{big(2)}}) {
		t.Errorf("count(*) of IN: %v, want 2", res.Rows)
	}
	out, err := h.e.Prepare(ctx, h.sess, `SELECT k FROM ks.i WHERE k IN (?, ?)`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pr := out.Result.(frame.PreparedResult); !reflect.DeepEqual(pr.PKIndexes, []uint16{1}) {
		t.Errorf("IN (?, ?) pk indexes %v, want [1]", pr.PKIndexes)
	}
}

// TestOrderByPartitionKey: ORDER BY takes clustering columns only, which
// idemkv tables do not have: Invalid, with Cassandra's message.
func TestOrderByPartitionKey(t *testing.T) {
	h := newHarness(t)
	h.setup()
	wantErr(t, h.queryErr(`SELECT * FROM ks.t WHERE k = 'a' ORDER BY k DESC`), frame.ErrInvalid,
		"Order by is currently only supported on the clustered columns of the PRIMARY KEY, got k")
	wantErr(t, h.queryErr(`SELECT * FROM ks.t WHERE k = 'a' ORDER BY nope`), frame.ErrInvalid, "Undefined column name nope")
	if _, err := h.e.Prepare(ctx, h.sess, `SELECT * FROM ks.t WHERE k = ? ORDER BY c`, nil); err == nil {
		t.Error("ORDER BY on a counter column prepared")
	}
}

// TestSelectDistinct: SELECT DISTINCT lists the partition keys (one row
// per partition in idemkv), with Cassandra's errors for other columns.
func TestSelectDistinct(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.two (a int, b text, c counter, PRIMARY KEY ((a, b)))`)
	for _, k := range []string{"x", "y", "z"} {
		h.query(`UPDATE ks.t SET c = c + 1 WHERE k = ?`, text_(k))
	}
	rows, pages := h.pagedRows(`SELECT DISTINCT k FROM ks.t`, 2)
	if len(rows) != 3 || pages != 2 {
		t.Errorf("DISTINCT k at page size 2: %d rows in %d pages, want 3 in 2", len(rows), pages)
	}
	if res := h.rows(`SELECT DISTINCT k, token(k) FROM ks.t WHERE k = 'x'`); len(res.Rows) != 1 {
		t.Errorf("DISTINCT of one key: %d rows", len(res.Rows))
	}
	wantErr(t, h.queryErr(`SELECT DISTINCT k, c FROM ks.t`), frame.ErrInvalid,
		"SELECT DISTINCT queries must only request partition key columns and/or static columns (not c)")
	wantErr(t, h.queryErr(`SELECT DISTINCT * FROM ks.t`), frame.ErrInvalid, "(not c)")
	wantErr(t, h.queryErr(`SELECT DISTINCT a FROM ks.two`), frame.ErrInvalid,
		"SELECT DISTINCT queries must request all the partition key columns (missing b)")
}

// TestWritetimeTTL: writetime(c) is the counter cell's write time in
// microseconds, ttl(c) null (counters do not expire), as in Cassandra 5.0.
func TestWritetimeTTL(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`UPDATE ks.t SET c = c + 1 WHERE k = 'a'`)
	res := h.rows(`SELECT writetime(c), ttl(c), writetime(d) AS w FROM ks.t WHERE k = 'a'`)
	names := []string{res.Columns[0].Name, res.Columns[1].Name, res.Columns[2].Name}
	if !reflect.DeepEqual(names, []string{"writetime(c)", "ttl(c)", "w"}) ||
		!reflect.DeepEqual(res.Columns[0].Type, frame.Bigint) || !reflect.DeepEqual(res.Columns[1].Type, frame.Int) {
		t.Errorf("columns %+v", res.Columns)
	}
	wt, err := frame.DecodeBigint(res.Rows[0][0].Bytes)
	// The replica's write time of the cell, in microseconds since the epoch.
	if err != nil || wt < 1600000000*1000000 {
		t.Errorf("writetime(c) = %d %v, want a write time in microseconds", wt, err)
	}
	if !res.Rows[0][1].Null || !res.Rows[0][2].Null {
		t.Errorf("ttl(c) and writetime of an unset counter: %+v, want nulls", res.Rows[0][1:])
	}
	wantErr(t, h.queryErr(`SELECT writetime(k) FROM ks.t`), frame.ErrInvalid, "Cannot use selection function writeTime on PRIMARY KEY part k")
}

// TestSelectJSON: SELECT JSON answers one [json] text column, each row a
// JSON object in selection order, as Cassandra formats it.
func TestSelectJSON(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.u (a uuid, b blob, n int, c counter, PRIMARY KEY ((a, b, n)))`)
	h.query(`UPDATE ks.u SET c = c - 3 WHERE a = 123e4567-e89b-12d3-a456-426614174000 AND b = 0x00ff AND n = -5`)
	h.query(`UPDATE ks.t SET c = c + 4 WHERE k = 'q"'`)
	res := h.rows(`SELECT JSON a, b, n, c AS "Cee", token(a, b, n) AS t FROM ks.u`)
	if len(res.Columns) != 1 || res.Columns[0].Name != "[json]" || !reflect.DeepEqual(res.Columns[0].Type, frame.Text) {
		t.Fatalf("columns %+v", res.Columns)
	}
	tok := ring.Token(mustKey(t, [][]byte{{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}, {0x00, 0xff}, frame.EncodeInt(-5)}))
	want := fmt.Sprintf(`{"a": "123e4567-e89b-12d3-a456-426614174000", "b": "0x00ff", "n": -5, "\"Cee\"": -3, "t": %d}`, tok)
	if len(res.Rows) != 1 || string(res.Rows[0][0].Bytes) != want {
		t.Errorf("SELECT JSON rows %v, want %q", res.Rows, want)
	}
	res = h.rows(`SELECT JSON k, c, d FROM ks.t WHERE k = 'q"'`)
	if want := `{"k": "q\"", "c": 4, "d": null}`; len(res.Rows) != 1 || string(res.Rows[0][0].Bytes) != want {
		t.Errorf("SELECT JSON rows %v, want %q", res.Rows, want)
	}
	out, err := h.e.Prepare(ctx, h.sess, `SELECT JSON * FROM ks.t WHERE k = ?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pr := out.Result.(frame.PreparedResult); len(pr.ResultColumns) != 1 || pr.ResultColumns[0].Name != "[json]" {
		t.Errorf("prepared SELECT JSON result %+v", pr.ResultColumns)
	}
}

func mustKey(t *testing.T, parts [][]byte) []byte {
	t.Helper()
	k, err := SerializeKey(parts)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
