package exec

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/internal/testseed"
)

// pages runs a SELECT page by page and returns every row.
func (h *harness) pages(q string, pageSize int32, vals ...frame.Value) [][]frame.Value {
	h.t.Helper()
	var out [][]frame.Value
	var state []byte
	for n := 0; ; n++ {
		p := frame.QueryParams{Consistency: frame.Consistency(coordinator.Quorum), Values: vals, PageSize: pageSize, PagingState: state}
		res, err := h.e.Query(ctx, h.sess, q, p, nil)
		if err != nil {
			h.t.Fatalf("%s page %d: %v", q, n, err)
		}
		r := res.Result.(frame.RowsResult)
		if int32(len(r.Rows)) > pageSize {
			h.t.Fatalf("%s page %d: %d rows, page size %d", q, n, len(r.Rows), pageSize)
		}
		out = append(out, r.Rows...)
		if r.PagingState == nil {
			return out
		}
		if n > 10000 {
			h.t.Fatalf("%s: paging does not end", q)
		}
		state = r.PagingState
	}
}

func decodeInt(t *testing.T, v frame.Value) int32 {
	t.Helper()
	if len(v.Bytes) != 4 {
		t.Fatalf("int of %d bytes", len(v.Bytes))
	}
	return int32(uint32(v.Bytes[0])<<24 | uint32(v.Bytes[1])<<16 | uint32(v.Bytes[2])<<8 | uint32(v.Bytes[3]))
}

func decodeBig(t *testing.T, v frame.Value) int64 {
	t.Helper()
	n, err := frame.DecodeBigint(v.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClusteringCounters: a counter table with two clustering columns (one
// descending) against a model of its rows: every SELECT (slices, IN,
// ORDER BY, LIMIT, paging in pages of 1 to 7 rows, COUNT(*), a scan of
// the table) returns the model's rows in CQL order, after updates and row,
// range and partition deletions.
func TestClusteringCounters(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.pv (page text, day int, tag text, views counter, hits counter, PRIMARY KEY ((page), day, tag)) WITH CLUSTERING ORDER BY (day DESC, tag ASC)`)
	type key struct {
		page string
		day  int32
		tag  string
	}
	model := map[key][2]int64{}
	pages := []string{"a", "b", "c"}
	tags := []string{"", "x", "x\x00", "xy", "\xc3\xa9"}
	for range 400 {
		k := key{pages[rng.IntN(3)], int32(rng.IntN(9) - 4), tags[rng.IntN(len(tags))]}
		if rng.IntN(3) == 0 {
			k.day = int32(rng.Uint32()) // extremes of the int order too
		}
		d := int64(rng.IntN(5) + 1)
		h.query(`UPDATE ks.pv SET views = views + ?, hits = hits + 1 WHERE page = ? AND day = ? AND tag = ?`, big(d), text_(k.page), int_(k.day), text_(k.tag))
		m := model[k]
		m[0] += d
		m[1]++
		model[k] = m
	}
	// The model's rows of a page in CQL order: day descending, tag ascending.
	ordered := func(page string, keep func(key) bool) []key {
		var ks []key
		for k := range model {
			if k.page == page && keep(k) {
				ks = append(ks, k)
			}
		}
		slices.SortFunc(ks, func(a, b key) int {
			if a.day != b.day {
				if a.day > b.day {
					return -1
				}
				return 1
			}
			return strings.Compare(a.tag, b.tag)
		})
		return ks
	}
	check := func(what string, got [][]frame.Value, want []key) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("seed %d: %s: %d rows, want %d", seed, what, len(got), len(want))
		}
		for i, r := range got {
			k := key{string(r[0].Bytes), decodeInt(t, r[1]), string(r[2].Bytes)}
			if k != want[i] || decodeBig(t, r[3]) != model[k][0] {
				t.Fatalf("seed %d: %s: row %d = %+v views %d, want %+v views %d", seed, what, i, k, decodeBig(t, r[3]), want[i], model[want[i]][0])
			}
		}
	}
	q := `SELECT page, day, tag, views FROM ks.pv`
	for _, page := range pages {
		all := ordered(page, func(key) bool { return true })
		check("partition "+page, h.rows(q+` WHERE page = ?`, text_(page)).Rows, all)
		for _, size := range []int32{1, 2, 3, 7} {
			check(fmt.Sprintf("partition %s in pages of %d", page, size), h.pages(q+` WHERE page = ?`, size, text_(page)), all)
		}
		rev := slices.Clone(all)
		slices.Reverse(rev)
		check("ORDER BY day ASC", h.rows(q+` WHERE page = ? ORDER BY day ASC, tag DESC`, text_(page)).Rows, rev)
		check("ORDER BY day ASC in pages of 2", h.pages(q+` WHERE page = ? ORDER BY day ASC, tag DESC`, 2, text_(page)), rev)
		check("ORDER BY day DESC", h.rows(q+` WHERE page = ? ORDER BY day DESC`, text_(page)).Rows, all)
		for range 20 {
			lo, hi := int32(rng.IntN(11)-5), int32(rng.IntN(11)-5)
			check(fmt.Sprintf("day >= %d AND day < %d", lo, hi), h.rows(q+` WHERE page = ? AND day >= ? AND day < ?`, text_(page), int_(lo), int_(hi)).Rows,
				ordered(page, func(k key) bool { return k.day >= lo && k.day < hi }))
			tag := tags[rng.IntN(len(tags))]
			check(fmt.Sprintf("day = %d AND tag > %q", lo, tag), h.rows(q+` WHERE page = ? AND day = ? AND tag > ?`, text_(page), int_(lo), text_(tag)).Rows,
				ordered(page, func(k key) bool { return k.day == lo && k.tag > tag }))
			check(fmt.Sprintf("day IN (%d, %d)", lo, hi), h.rows(q+` WHERE page = ? AND day IN (?, ?)`, text_(page), int_(lo), int_(hi)).Rows,
				ordered(page, func(k key) bool { return k.day == lo || k.day == hi }))
		}
		if n := min(3, len(all)); n > 0 {
			check("LIMIT 3", h.rows(q+` WHERE page = ? LIMIT 3`, text_(page)).Rows, all[:n])
		}
		r := h.rows(`SELECT COUNT(*) FROM ks.pv WHERE page = ?`, text_(page))
		if got := decodeBig(t, r.Rows[0][0]); got != int64(len(all)) {
			t.Fatalf("seed %d: COUNT(*) of %s = %d, want %d", seed, page, got, len(all))
		}
	}
	var scan []key
	for _, r := range h.pages(q, 5) {
		scan = append(scan, key{string(r[0].Bytes), decodeInt(t, r[1]), string(r[2].Bytes)})
	}
	if len(scan) != len(model) {
		t.Fatalf("seed %d: a paged scan returned %d rows, want %d", seed, len(scan), len(model))
	}
	// ORDER BY across the partitions of an IN, unpaged.
	var both []key
	for k := range model {
		if k.page == "a" || k.page == "b" {
			both = append(both, k)
		}
	}
	slices.SortStableFunc(both, func(a, b key) int {
		if a.day != b.day {
			if a.day < b.day {
				return -1
			}
			return 1
		}
		return -strings.Compare(a.tag, b.tag)
	})
	res, err := h.e.Query(ctx, h.sess, q+` WHERE page IN ('a', 'b') ORDER BY day ASC, tag DESC`, frame.QueryParams{Consistency: frame.Consistency(coordinator.Quorum)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Result.(frame.RowsResult).Rows
	if len(got) != len(both) {
		t.Fatalf("seed %d: ORDER BY over IN: %d rows, want %d", seed, len(got), len(both))
	}
	for i, r := range got {
		k := key{string(r[0].Bytes), decodeInt(t, r[1]), string(r[2].Bytes)}
		if k.day != both[i].day || k.tag != both[i].tag {
			t.Fatalf("seed %d: ORDER BY over IN: row %d = %+v, want day %d tag %q", seed, i, k, both[i].day, both[i].tag)
		}
	}

	// Deletions: one row, a range of days, a whole partition.
	for k := range model {
		if k.page == "a" {
			h.query(`DELETE FROM ks.pv WHERE page = ? AND day = ? AND tag = ?`, text_(k.page), int_(k.day), text_(k.tag))
			delete(model, k)
			break
		}
	}
	h.query(`DELETE FROM ks.pv WHERE page = 'b' AND day >= -1 AND day <= 1`)
	for k := range model {
		if k.page == "b" && k.day >= -1 && k.day <= 1 {
			delete(model, k)
		}
	}
	h.query(`DELETE views FROM ks.pv WHERE page = 'c'`)
	h.query(`DELETE hits FROM ks.pv WHERE page = 'c'`)
	for k := range model {
		if k.page == "c" {
			delete(model, k)
		}
	}
	for _, page := range pages {
		check("after deletions, partition "+page, h.pages(q+` WHERE page = ?`, 4, text_(page)), ordered(page, func(key) bool { return true }))
	}
}

// TestClusteringRules: the clustering statements Cassandra refuses are
// refused with its messages.
func TestClusteringRules(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.c (k int, a int, b text, n counter, PRIMARY KEY (k, a, b))`)
	for _, c := range []struct{ q, msg string }{
		{`UPDATE ks.c SET n = n + 1 WHERE k = 1 AND a = 1`, "Some clustering keys are missing: b"},
		{`UPDATE ks.c SET n = n + 1 WHERE k = 1 AND a > 1 AND b = 'x'`, "Slice restrictions are not supported on the clustering columns in UPDATE statements"},
		{`SELECT * FROM ks.c WHERE k = 1 AND b = 'x'`, `PRIMARY KEY column "b" cannot be restricted as preceding column "a" is not restricted`},
		{`SELECT * FROM ks.c WHERE k = 1 AND a > 1 AND b = 'x'`, `Clustering column "b" cannot be restricted (preceding column "a" is restricted by a non-EQ relation)`},
		{`SELECT * FROM ks.c WHERE k = 1 ORDER BY b`, "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY"},
		{`SELECT * FROM ks.c WHERE k = 1 ORDER BY a ASC, b DESC`, "Unsupported order by relation"},
		{`SELECT * FROM ks.c ORDER BY a`, "ORDER BY is only supported when the partition key is restricted by an EQ or an IN."},
		{`SELECT * FROM ks.c WHERE a = 1`, "ALLOW FILTERING"},
		{`CREATE TABLE ks.d (k int, a int, n counter, PRIMARY KEY (k, a)) WITH CLUSTERING ORDER BY (n DESC)`, "Only clustering key columns can be defined in CLUSTERING ORDER directive"},
		{`CREATE TABLE ks.d (k int, a int, b int, n counter, PRIMARY KEY (k, a, b)) WITH CLUSTERING ORDER BY (b DESC, a ASC)`, "The order of columns in the CLUSTERING ORDER directive must be the one of the clustering key (a must appear before b)"},
		{`CREATE TABLE ks.d (k int, a varint, n counter, PRIMARY KEY (k, a))`, "idemkv does not support clustering columns of type varint"},
	} {
		wantErr(t, h.queryErr(c.q), frame.ErrInvalid, c.msg)
	}
	// ALLOW FILTERING lifts the restriction rules.
	h.query(`UPDATE ks.c SET n = n + 2 WHERE k = 1 AND a = 1 AND b = 'x'`)
	h.query(`UPDATE ks.c SET n = n + 3 WHERE k = 2 AND a = 5 AND b = 'x'`)
	if r := h.rows(`SELECT k FROM ks.c WHERE b = 'x' ALLOW FILTERING`); len(r.Rows) != 2 {
		t.Errorf("ALLOW FILTERING on b: %d rows, want 2", len(r.Rows))
	}
	if r := h.rows(`SELECT k FROM ks.c WHERE a > 2 ALLOW FILTERING`); len(r.Rows) != 1 || decodeInt(t, r.Rows[0][0]) != 2 {
		t.Errorf("ALLOW FILTERING on a > 2: %v", r.Rows)
	}
}
