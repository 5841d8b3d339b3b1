package compat

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/internal/testseed"
)

// counterDesigns are the counter designs a plain driver can update with
// `SET c = c + ?`: every one idemkv has. handoff_counter and
// borrow_counter also have client libraries (client.HandoffCounter,
// client.BorrowCounter); a plain UPDATE is led into the coordinator's own
// slot or dot, which is what an unmodified driver gets. handoff_counter,
// reset_counter and borrow_counter refuse decrements, so their deltas are
// positive. (An empty partition key is refused, as by Cassandra.)
// deletes: the test also deletes rows, a range and a partition.
var counterDesigns = []struct {
	name, typ, with string
	negative        bool
	deletes         bool
}{
	{"counter", "counter", "", true, true},
	{"fbf", "counter", " AND idempotence = {'class': 'fbf', 'target_fpp': '0.0001'}", true, false},
	{"handoff", "handoff_counter", "", false, false},
	{"reset", "reset_counter", "", false, true},
	{"borrow", "borrow_counter", "", false, false},
}

// pvRow is one CQL row of a page-views table.
type pvRow struct {
	day  int
	hits int64
}

// TestGocqlClusteringCountersEveryDesign: a counter table with a
// descending clustering column, `PRIMARY KEY ((page), day)`, under every
// counter design, updated concurrently from several goroutines through
// gocql (token-aware and round-robin sessions) at QUORUM; then read back
// at QUORUM and ALL per partition — whole, as slices `day >= ? AND day <
// ?`, ORDER BY day ASC, with LIMIT, in small pages — and as a scan of the
// table: every value is the acknowledged sum and the rows come in CQL
// order. Then, where the design's DELETE removes or resets counters,
// a row, a range of rows and a partition are deleted and read back.
func TestGocqlClusteringCountersEveryDesign(t *testing.T) {
	seed := testseed.Seed(t)
	r := startRing(t, 3, nil)
	rr := r.session(r.cluster())
	tc := r.cluster()
	tc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	ta := r.session(tc)
	exec(t, rr, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	for di, d := range counterDesigns {
		t.Run(d.name, func(t *testing.T) {
			table := "ks.pv_" + d.name
			exec(t, rr, fmt.Sprintf(`CREATE TABLE %s (page text, day int, hits %s, PRIMARY KEY ((page), day)) WITH CLUSTERING ORDER BY (day DESC)%s`, table, d.typ, d.with))
			pages := []string{"home", "about", "blog/é", "z"}
			const workers, ops = 4, 60
			var mu sync.Mutex
			model := map[string]map[int]int64{}
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := 0; w < workers; w++ {
				rng := rand.New(rand.NewPCG(seed, uint64(di*100+w)))
				s := rr
				if w%2 == 1 {
					s = ta
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range ops {
						page := pages[rng.IntN(len(pages))]
						day := rng.IntN(30) - 10
						if rng.IntN(10) == 0 {
							day = int(int32(rng.Uint32())) // the extremes of int order
						}
						delta := int64(rng.IntN(9) + 1)
						if d.negative && rng.IntN(4) == 0 {
							delta = -delta
						}
						if err := s.Query(`UPDATE `+table+` SET hits = hits + ? WHERE page = ? AND day = ?`, delta, page, day).Exec(); err != nil {
							errs <- fmt.Errorf("update %q day %d %+d: %w", page, day, delta, err)
							return
						}
						mu.Lock()
						if model[page] == nil {
							model[page] = map[int]int64{}
						}
						model[page][day] += delta
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("seed %d: %v", seed, err)
			}

			// want is the model's rows of a page, day descending, kept by keep.
			want := func(page string, keep func(int) bool) []pvRow {
				var out []pvRow
				for day, v := range model[page] {
					if keep(day) {
						out = append(out, pvRow{day, v})
					}
				}
				slices.SortFunc(out, func(a, b pvRow) int { return b.day - a.day })
				return out
			}
			read := func(cl gocql.Consistency, pageSize int, q string, vals ...any) []pvRow {
				t.Helper()
				iter := ta.Query(q, vals...).Consistency(cl).PageSize(pageSize).Iter()
				var out []pvRow
				var rw pvRow
				for iter.Scan(&rw.day, &rw.hits) {
					out = append(out, rw)
				}
				if err := iter.Close(); err != nil {
					t.Fatalf("seed %d: %s %v: %v", seed, q, vals, err)
				}
				return out
			}
			check := func(what string, got, want []pvRow) {
				t.Helper()
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d: %s:\n got %v\nwant %v", seed, what, got, want)
				}
			}
			all := func(int) bool { return true }
			rng := rand.New(rand.NewPCG(seed, uint64(di*100+99)))
			sel := `SELECT day, hits FROM ` + table + ` WHERE page = ?`
			for _, page := range pages {
				full := want(page, all)
				for _, cl := range []gocql.Consistency{gocql.Quorum, gocql.All} {
					check(fmt.Sprintf("%q whole at %v", page, cl), read(cl, 5000, sel, page), full)
				}
				check(fmt.Sprintf("%q in pages of 3", page), read(gocql.Quorum, 3, sel, page), full)
				asc := slices.Clone(full)
				slices.Reverse(asc)
				check(fmt.Sprintf("%q ORDER BY day ASC", page), read(gocql.Quorum, 5000, sel+` ORDER BY day ASC`, page), asc)
				check(fmt.Sprintf("%q ORDER BY day ASC in pages of 4", page), read(gocql.Quorum, 4, sel+` ORDER BY day ASC`, page), asc)
				for _, n := range []int{1, 5} {
					check(fmt.Sprintf("%q LIMIT %d", page, n), read(gocql.Quorum, 5000, fmt.Sprintf("%s LIMIT %d", sel, n), page), full[:min(n, len(full))])
					check(fmt.Sprintf("%q ORDER BY day ASC LIMIT %d", page, n), read(gocql.Quorum, 2, fmt.Sprintf("%s ORDER BY day ASC LIMIT %d", sel, n), page), asc[:min(n, len(asc))])
				}
				for range 8 {
					lo, hi := rng.IntN(40)-15, rng.IntN(40)-15
					in := func(day int) bool { return day >= lo && day < hi }
					slice := want(page, in)
					check(fmt.Sprintf("%q day >= %d AND day < %d", page, lo, hi), read(gocql.Quorum, 5000, sel+` AND day >= ? AND day < ?`, page, lo, hi), slice)
					slices.Reverse(slice)
					check(fmt.Sprintf("%q day >= %d AND day < %d ORDER BY day ASC LIMIT 3", page, lo, hi),
						read(gocql.Quorum, 5000, sel+` AND day >= ? AND day < ? ORDER BY day ASC LIMIT 3`, page, lo, hi), slice[:min(3, len(slice))])
				}
				// One row by its full key.
				if len(full) > 0 {
					day := full[rng.IntN(len(full))].day
					var got int64
					if err := ta.Query(`SELECT hits FROM `+table+` WHERE page = ? AND day = ?`, page, day).Scan(&got); err != nil || got != model[page][day] {
						t.Fatalf("seed %d: %q day %d = %d (%v), want %d", seed, page, day, got, err, model[page][day])
					}
				}
			}
			// A scan of the table: every row once, each partition in order.
			iter := rr.Query(`SELECT page, day, hits FROM ` + table).PageSize(7).Iter()
			scanned := map[string][]pvRow{}
			var page string
			var rw pvRow
			for iter.Scan(&page, &rw.day, &rw.hits) {
				scanned[page] = append(scanned[page], rw)
			}
			if err := iter.Close(); err != nil {
				t.Fatalf("seed %d: scan: %v", seed, err)
			}
			if len(scanned) != len(model) {
				t.Fatalf("seed %d: scan saw %d partitions, want %d", seed, len(scanned), len(model))
			}
			for page := range model {
				check(fmt.Sprintf("scan's partition %q", page), scanned[page], want(page, all))
			}

			// Deletions of a row, a range of rows and a partition, for the
			// designs whose DELETE removes (vanilla) or resets (reset_counter)
			// the counters: the rows are gone, the others unchanged.
			if !d.deletes {
				return
			}
			// A vanilla row is gone; a reset_counter reads 0 and counts on
			// (docs/reset-counter.md): its row stays, at 0.
			gone := func(page string, day int) {
				if d.typ == "reset_counter" {
					model[page][day] = 0
				} else {
					delete(model[page], day)
				}
			}
			if days := slices.Sorted(maps.Keys(model["home"])); len(days) > 0 {
				day := days[rng.IntN(len(days))]
				exec(t, rr, `DELETE FROM `+table+` WHERE page = 'home' AND day = ?`, day)
				gone("home", day)
			}
			exec(t, rr, `DELETE FROM `+table+` WHERE page = 'about' AND day >= -3 AND day < 3`)
			for day := range model["about"] {
				if day >= -3 && day < 3 {
					gone("about", day)
				}
			}
			exec(t, rr, `DELETE FROM `+table+` WHERE page = 'z'`)
			for day := range model["z"] {
				gone("z", day)
			}
			for _, page := range pages {
				for _, cl := range []gocql.Consistency{gocql.Quorum, gocql.All} {
					check(fmt.Sprintf("%q after the deletions at %v", page, cl), read(cl, 5, sel, page), want(page, all))
				}
			}
		})
	}
}
