package compat

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/internal/testseed"
)

// bigPartition is the number of rows of the partitions the paging tests
// read (fewer under the race detector: writing a row into a partition of
// regular rows costs time in proportion to the partition's size, so
// loading 10,000 rows takes over a minute even without it), and pageSize
// the page size they read them in (it divides neither, so the last page
// is short).
var bigPartition = 10000

const pageSize = 333

func init() {
	if raceEnabled {
		bigPartition = 2000
	}
}

// pagedRow is a row of a big partition: its clustering key and value.
type pagedRow struct {
	N int
	V int64
}

// bigPartitions creates ks.cp, a counter table clustered by n ascending,
// and ks.rp, a regular table clustered by n descending, each with one
// partition 'p' of bigPartition rows of distinct random int keys (the
// extremes of int order among them), written by counter and unlogged
// batches through gocql; it returns each partition's rows in the order a
// read returns them.
func bigPartitions(t *testing.T, s *gocql.Session, rng *rand.Rand) (counterRows, regularRows []pagedRow) {
	t.Helper()
	exec(t, s, `CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.cp (k text, n int, v counter, PRIMARY KEY (k, n))`)
	exec(t, s, `CREATE TABLE ks.rp (k text, n int, v bigint, s text, PRIMARY KEY (k, n)) WITH CLUSTERING ORDER BY (n DESC)`)
	keys := map[int]bool{-1 << 31: true, 1<<31 - 1: true, 0: true}
	counterRows, regularRows = nil, nil
	for len(keys) < bigPartition {
		keys[int(int32(rng.Uint32()))] = true
	}
	for n := range keys {
		counterRows = append(counterRows, pagedRow{n, rng.Int64N(1000) - 300})
		regularRows = append(regularRows, pagedRow{n, rng.Int64()})
	}
	const perBatch = 250
	for i := 0; i < bigPartition; i += perBatch {
		cb := s.NewBatch(gocql.CounterBatch)
		rb := s.NewBatch(gocql.UnloggedBatch)
		for j := i; j < min(i+perBatch, bigPartition); j++ {
			cb.Query(`UPDATE ks.cp SET v = v + ? WHERE k = 'p' AND n = ?`, counterRows[j].V, counterRows[j].N)
			rb.Query(`INSERT INTO ks.rp (k, n, v, s) VALUES ('p', ?, ?, ?)`, regularRows[j].N, regularRows[j].V, fmt.Sprint(regularRows[j].V))
		}
		if err := s.ExecuteBatch(cb); err != nil {
			t.Fatalf("counter batch at row %d: %v", i, err)
		}
		if err := s.ExecuteBatch(rb); err != nil {
			t.Fatalf("regular batch at row %d: %v", i, err)
		}
	}
	slices.SortFunc(counterRows, func(a, b pagedRow) int { return a.N - b.N })
	slices.SortFunc(regularRows, func(a, b pagedRow) int { return b.N - a.N })
	return counterRows, regularRows
}

// TestPagingBigPartition reads a counter and a regular partition of
// 10,000 rows through gocql in pages of 333: automatically (every row
// exactly once, in clustering order, ORDER BY reversed too, a slice), and
// by hand with Query.PageState and Iter.PageState — each page 333 rows
// but the last, the next ones of the order, a page state replayed giving
// the same page, the last page's state empty. Then the Python and
// Node.js drivers read the same partitions (driverPaging).
func TestPagingBigPartition(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 4))
	r := startRing(t, 3, nil)
	cc := r.cluster()
	cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	s := r.session(cc)
	counterRows, regularRows := bigPartitions(t, s, rng)

	for _, c := range []struct {
		name, sel string
		want      []pagedRow
	}{
		{"counter", `SELECT n, v FROM ks.cp WHERE k = 'p'`, counterRows},
		{"regular", `SELECT n, v FROM ks.rp WHERE k = 'p'`, regularRows},
	} {
		t.Run("gocql/"+c.name, func(t *testing.T) {
			check := func(what string, got, want []pagedRow) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("seed %d: %s: %d rows, want %d", seed, what, len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("seed %d: %s: row %d = %+v, want %+v", seed, what, i, got[i], want[i])
					}
				}
			}
			all := func(q string, cl gocql.Consistency) []pagedRow {
				t.Helper()
				iter := s.Query(q).PageSize(pageSize).Consistency(cl).Iter()
				var out []pagedRow
				var rw pagedRow
				for iter.Scan(&rw.N, &rw.V) {
					out = append(out, rw)
				}
				if err := iter.Close(); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				return out
			}
			check("paged at QUORUM", all(c.sel, gocql.Quorum), c.want)
			check("paged at ONE", all(c.sel, gocql.One), c.want)
			rev := slices.Clone(c.want)
			slices.Reverse(rev)
			order := " ORDER BY n DESC"
			if c.name == "regular" {
				order = " ORDER BY n ASC"
			}
			check("paged"+order, all(c.sel+order, gocql.Quorum), rev)
			lo, hi := c.want[bigPartition/10].N, c.want[7*bigPartition/10].N
			if lo > hi {
				lo, hi = hi, lo
			}
			var slice []pagedRow
			for _, rw := range c.want {
				if rw.N > lo && rw.N <= hi {
					slice = append(slice, rw)
				}
			}
			check(fmt.Sprintf("paged n > %d AND n <= %d", lo, hi), all(fmt.Sprintf("%s AND n > %d AND n <= %d", c.sel, lo, hi), gocql.Quorum), slice)

			// By hand: Query.PageState turns off gocql's automatic paging.
			page := func(state []byte) ([]pagedRow, []byte) {
				t.Helper()
				iter := s.Query(c.sel).PageSize(pageSize).PageState(state).Iter()
				next := iter.PageState()
				var out []pagedRow
				var rw pagedRow
				for iter.Scan(&rw.N, &rw.V) {
					out = append(out, rw)
				}
				if err := iter.Close(); err != nil {
					t.Fatalf("page after state %x: %v", state, err)
				}
				return out, next
			}
			var got []pagedRow
			var state []byte
			pages := 0
			for {
				rows, next := page(state)
				pages++
				if len(rows) > pageSize || (len(next) > 0 && len(rows) != pageSize) {
					t.Fatalf("page %d: %d rows (more to come: %v), page size %d", pages, len(rows), len(next) > 0, pageSize)
				}
				if pages == 2 { // a page state replayed gives the same page
					again, nextAgain := page(state)
					check("page 2 replayed", again, rows)
					if !slices.Equal(next, nextAgain) {
						t.Errorf("page 2 replayed: next state %x, first time %x", nextAgain, next)
					}
				}
				got = append(got, rows...)
				check(fmt.Sprintf("the first %d pages by hand", pages), got, c.want[:len(got)])
				if len(next) == 0 {
					break
				}
				if pages > bigPartition/pageSize+2 {
					t.Fatalf("paging by hand does not end after %d pages", pages)
				}
				state = next
			}
			check("every page by hand", got, c.want)
			if want := (bigPartition + pageSize - 1) / pageSize; pages != want && pages != want+1 {
				t.Errorf("%d pages by hand, want %d (or one more, empty)", pages, want)
			}
		})
	}
	t.Run("python", func(t *testing.T) { driverPaging(t, runPyDriver, r, seed, counterRows, regularRows) })
	t.Run("node", func(t *testing.T) { driverPaging(t, runNodeDriver, r, seed, counterRows, regularRows) })
}
