package replica

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testConfig(dir string) Config {
	return Config{
		Dir:       dir,
		CommitLog: commitlog.Options{Sync: commitlog.SyncBatch, SegmentSize: 64 << 10},
		Logger:    quietLogger(),
	}
}

var counterTable = coltype.TableDef{ID: 7, Keyspace: "ks", Name: "hits", Columns: []coltype.ColumnDef{{Name: "a", Type: "counter"}, {Name: "b", Type: "counter"}}}

func mustOpen(t *testing.T, cfg Config) *Replica {
	t.Helper()
	r, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return r
}

func value(t *testing.T, r *Replica, table uint64, key, col string) int64 {
	t.Helper()
	v, _, err := r.Value(table, []byte(key), col)
	if err != nil {
		t.Fatalf("read %s/%s: %v", key, col, err)
	}
	return v
}

func TestApplyFlushReopen(t *testing.T) {
	dir := t.TempDir()
	r := mustOpen(t, testConfig(dir))
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		m, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 2})
		if err != nil {
			t.Fatal(err)
		}
		if m.Cell.Column != "a" || len(m.Cell.Value) != 36 {
			t.Fatalf("mutation to replicate is not one global shard: %+v", m)
		}
	}
	if err := r.Flush(7); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: -5}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, r, 7, "k", "a"); got != 15 {
		t.Fatalf("value %d, want 15", got)
	}
	if _, found, _ := r.Value(7, []byte("k"), "b"); found {
		t.Fatal("column b was never written but reads as present")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, testConfig(dir))
	defer r.Close()
	if got := value(t, r, 7, "k", "a"); got != 15 {
		t.Fatalf("after reopen value %d, want 15", got)
	}
	if st := r.Stats(); st.ReplayedRecords != 1 || st.SkippedFlushedRecs != 0 {
		// The 10 flushed records live in segments released by the flush or are
		// skipped by position; only the unflushed one is replayed.
		t.Logf("stats after reopen: %+v", st)
		if st.ReplayedRecords != 1 {
			t.Fatalf("replayed %d records, want 1 (the flushed ones must not be re-applied)", st.ReplayedRecords)
		}
	}
}

func TestDeleteIsFinal(t *testing.T) {
	r := mustOpen(t, testConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	_, _ = r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 3})
	if _, err := r.Delete(7, []byte("k"), 0); err != nil {
		t.Fatal(err)
	}
	_, _ = r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 1})
	if _, found, _ := r.Value(7, []byte("k"), "a"); found {
		t.Fatal("a deleted counter came back after an increment")
	}
}

func TestErrorsAreClear(t *testing.T) {
	r := mustOpen(t, testConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(coltype.Update{Table: 99, Key: []byte("k"), Column: "a", Delta: 1}); err == nil {
		t.Error("update to an unknown table accepted")
	}
	if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "zz", Delta: 1}); err == nil {
		t.Error("update to an unknown column accepted")
	}
	if err := r.ApplyMutation(coltype.Mutation{Table: 7, Key: []byte("k"), Cell: cellOf("a", []byte{1, 2, 3})}); err == nil {
		t.Error("mutation with a corrupt counter context accepted")
	}
	if err := r.CreateTable(coltype.TableDef{ID: 8, Keyspace: "ks", Name: "x", Columns: []coltype.ColumnDef{{Name: "c", Type: "nosuchtype"}}}); err == nil {
		t.Error("table with an unknown column type accepted")
	}
	if got := value(t, r, 7, "k", "a"); got != 0 {
		t.Errorf("rejected inputs changed the counter to %d", got)
	}
}

// TestModel drives random increments, replicated shards, deletes, flushes,
// compactions and reopenings, and compares every counter with a plain map
// after each step.
func TestModel(t *testing.T) {
	rng := testseed.Rand(t)
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MemtableFlushBytes = 8 << 10
	cfg.Compaction = Compaction{MinThreshold: 2, MinSSTableSize: 1}
	cfg.CellCache = cellcache.NewEntries(64) // small, so that misses read storage
	r := mustOpen(t, cfg)
	defer func() { r.Close() }()
	tables := []coltype.TableDef{counterTable, {ID: 9, Keyspace: "ks", Name: "other", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}}
	for _, d := range tables {
		if err := r.CreateTable(d); err != nil {
			t.Fatal(err)
		}
	}
	type cell struct {
		table uint64
		key   string
		col   string
	}
	var total Stats
	model := map[cell]int64{}
	deleted := map[cell]bool{}
	var peer [16]byte
	peer[0] = 0xee
	peerClock := map[cell][2]int64{}
	check := func(step int, what string) {
		t.Helper()
		for c, want := range model {
			v, found, err := r.Value(c.table, []byte(c.key), c.col)
			if err != nil {
				t.Fatalf("step %d (%s): read %v: %v", step, what, c, err)
			}
			if deleted[c] {
				if found {
					t.Fatalf("step %d (%s): %v deleted but reads %d", step, what, c, v)
				}
				continue
			}
			if v != want {
				t.Fatalf("step %d (%s): %v = %d, model %d", step, what, c, v, want)
			}
		}
	}
	for step := 0; step < 3000; step++ {
		d := tables[rng.IntN(len(tables))]
		c := cell{d.ID, fmt.Sprintf("key-%d", rng.IntN(40)), d.Columns[rng.IntN(len(d.Columns))].Name}
		switch op := rng.IntN(100); {
		case op < 70:
			delta := rng.Int64N(21) - 10
			if _, err := r.Apply(coltype.Update{Table: c.table, Key: []byte(c.key), Column: c.col, Delta: delta}); err != nil {
				t.Fatalf("step %d: apply: %v", step, err)
			}
			model[c] += delta
		case op < 85:
			// A shard from another replica, sometimes re-delivered.
			pc := peerClock[c]
			if rng.IntN(4) > 0 {
				delta := rng.Int64N(9) - 4
				pc = [2]int64{pc[0] + 1, pc[1] + delta}
				peerClock[c] = pc
				model[c] += delta
			}
			m := coltype.Mutation{Table: c.table, Key: []byte(c.key), Cell: cellOf(c.col, encodeShard(t, peer, pc[0], pc[1]))}
			if pc[0] == 0 {
				continue
			}
			if err := r.ApplyMutation(m); err != nil {
				t.Fatalf("step %d: apply mutation: %v", step, err)
			}
		case op < 87:
			if _, err := r.Delete(c.table, []byte(c.key), 0, c.col); err != nil {
				t.Fatalf("step %d: delete: %v", step, err)
			}
			deleted[c] = true
			if _, ok := model[c]; !ok {
				model[c] = 0
			}
		case op < 92:
			if err := r.Flush(c.table); err != nil {
				t.Fatalf("step %d: flush: %v", step, err)
			}
		case op < 95:
			if err := r.Compact(c.table, rng.IntN(2) == 0); err != nil {
				t.Fatalf("step %d: compact: %v", step, err)
			}
		default:
			total = addStats(total, r.Stats())
			if err := r.Close(); err != nil {
				t.Fatalf("step %d: close: %v", step, err)
			}
			r = mustOpen(t, cfg)
			check(step, "reopen")
		}
		if step%10 == 0 {
			check(step, "after op")
		}
		if step%100 == 0 {
			live := map[uint64]int{}
			for c := range model {
				if !deleted[c] {
					live[c.table]++
				}
			}
			checkScan(t, r, step, rng.IntN(7)+1, live, func(table uint64, key, col string) (int64, bool) {
				c := cell{table, key, col}
				v, ok := model[c]
				return v, ok && !deleted[c]
			})
		}
	}
	check(-1, "end")
	if st := addStats(total, r.Stats()); st.Flushes == 0 || st.Compactions == 0 || st.CacheMisses == 0 {
		t.Errorf("the model run did not exercise flush, compaction and cache misses")
		t.Logf("stats: %+v", st)
	}
}

func addStats(a, b Stats) Stats {
	a.LeaderApplies += b.LeaderApplies
	a.MutationsApplied += b.MutationsApplied
	a.CacheHits += b.CacheHits
	a.CacheMisses += b.CacheMisses
	a.Flushes += b.Flushes
	a.Compactions += b.Compactions
	a.ReplayedRecords += b.ReplayedRecords
	a.SkippedFlushedRecs += b.SkippedFlushedRecs
	return a
}

// checkScan pages through every table with Scan and checks the rows come in
// key order, once each, with the model's values.
func checkScan(t *testing.T, r *Replica, step, page int, live map[uint64]int, model func(table uint64, key, col string) (int64, bool)) {
	t.Helper()
	for _, d := range r.Tables() {
		seen := 0
		var after *row.Key
		var prev *row.Key
		for {
			rows, err := r.Scan(d.ID, after, math.MinInt64, math.MaxInt64, page)
			if err != nil {
				t.Fatalf("step %d: scan: %v", step, err)
			}
			for _, rw := range rows {
				if prev != nil && row.Compare(*prev, rw.Key) >= 0 {
					t.Fatalf("step %d: scan out of order: %v after %v", step, rw.Key, *prev)
				}
				k := rw.Key
				prev = &k
				for _, c := range rw.Cells {
					want, live := model(d.ID, string(rw.Key.Partition), c.Column)
					if c.Tombstone {
						if live {
							t.Fatalf("step %d: scan shows %s/%s deleted; model has it live", step, rw.Key.Partition, c.Column)
						}
						continue
					}
					seen++
					got, err := counter.CellValue(c)
					if err != nil || got != want {
						t.Fatalf("step %d: scan %s/%s = %d (%v), model %d", step, rw.Key.Partition, c.Column, got, err, want)
					}
				}
			}
			if len(rows) < page {
				break
			}
			last := rows[len(rows)-1].Key
			after = &last
		}
		if seen != live[d.ID] {
			t.Fatalf("step %d: scan of table %d saw %d live cells, model has %d", step, d.ID, seen, live[d.ID])
		}
	}
}
