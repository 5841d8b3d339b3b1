package replica

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/internal/linearize"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
)

// The tests of this file record concurrent histories of one cell of one
// replica — increments by Apply, reads by Value — and ask the checker of
// internal/linearize whether they are linearizable, as the lecture notes
// "Mutual Exclusion and Shared Counters" define it (Theorem 11.9: a
// compare-and-swap counter is linearizable). The vanilla leader locks the
// cell around its read-modify-write; the FBF leader compare-and-swaps its
// in-memory shard; both must pass. A leader that reads and then writes
// without the lock must fail: that is the negative control showing the
// check can see a lost update.

// racyCounterType is a test-only column type: Cassandra's counter leader
// without its cell lock. Two increments that read the same shard write the
// same clock, and one of them is lost.
const racyCounterType = "racy_counter_test"

type racyCounter struct{}

func init() { coltype.MustRegister(racyCounter{}) }

func (racyCounter) Name() string { return racyCounterType }

func (racyCounter) Lead(l coltype.Leader, u coltype.Update) (coltype.Mutation, error) {
	key := u.RowKey()
	clock, count, err := l.LocalShard(key, u.Column)
	if err != nil {
		return coltype.Mutation{}, err
	}
	runtime.Gosched() // widen the window between the read and the write
	clock, count = clock+1, count+u.Delta
	v, err := counters.NewGlobal(l.CounterID(), clock, count).MarshalBinary()
	if err != nil {
		return coltype.Mutation{}, err
	}
	m := u.Mutation(v)
	if err := l.Write(key, m, commitlog.PayloadShard); err != nil {
		return coltype.Mutation{}, err
	}
	l.CacheLocalShard(key, u.Column, clock, count)
	return m, nil
}

func (racyCounter) Merge(a, b row.Cell) (row.Cell, error) { return counter.MergeCells(a, b) }
func (racyCounter) Value(c row.Cell) (int64, error)       { return counter.CellValue(c) }

var racyTable = coltype.TableDef{ID: 23, Keyspace: "ks", Name: "racy", Columns: []coltype.ColumnDef{{Name: "c", Type: racyCounterType}}}

// linConfig is a replica configuration for concurrent histories: periodic
// sync, so that the commit log's fsync does not serialize every increment.
func linConfig(dir string) Config {
	cfg := testConfig(dir)
	cfg.CommitLog.Sync = commitlog.SyncPeriodic
	return cfg
}

// history runs procs goroutines, each doing ops operations on one counter —
// an increment of 1 to 3 through add, or a read — and records each
// operation's invocation and response on one monotonic clock. When every
// goroutine is done, one last read is recorded: it must see every
// increment. Each goroutine draws from its own generator, seeded from seed.
func history(t *testing.T, seed uint64, procs, ops int, add func(p, seq int, d int64) error, read func() (int64, error)) []linearize.Op {
	t.Helper()
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) } // monotonic
	var (
		mu   sync.Mutex
		h    []linearize.Op
		errs []error
		wg   sync.WaitGroup
	)
	for p := range procs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			for seq := range ops {
				var o linearize.Op
				o.Process = p
				if rng.IntN(2) == 0 {
					o.Kind, o.Delta = linearize.Add, int64(1+rng.IntN(3))
					o.Call = now()
					err := add(p, seq, o.Delta)
					o.Return = now()
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("p%d add: %w", p, err))
						mu.Unlock()
						return
					}
				} else {
					o.Kind = linearize.Read
					o.Call = now()
					v, err := read()
					o.Return = now()
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("p%d read: %w", p, err))
						mu.Unlock()
						return
					}
					o.Value = v
				}
				mu.Lock()
				h = append(h, o)
				mu.Unlock()
				if rng.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("operations failed: %v", errs)
	}
	o := linearize.Op{Kind: linearize.Read, Process: procs, Call: now()}
	v, err := read()
	o.Return = now()
	if err != nil {
		t.Fatalf("final read: %v", err)
	}
	o.Value = v
	return append(h, o)
}

// checkHistory fails the test unless h is linearizable.
func checkHistory(t *testing.T, what string, h []linearize.Op) {
	t.Helper()
	res, err := linearize.Check(h)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !res.Linearizable {
		t.Fatalf("%s: %s", what, res.Explain(h))
	}
}

func readCell(r *Replica, table uint64, key, col string) func() (int64, error) {
	return func() (int64, error) {
		v, _, err := r.Value(table, []byte(key), col)
		return v, err
	}
}

// TestVanillaCounterIsLinearizable: the vanilla leader (lock, read own
// shard, write, unlock) on one cell, with concurrent reads and a flush in
// the middle, gives linearizable histories.
func TestVanillaCounterIsLinearizable(t *testing.T) {
	seed := testseed.Seed(t)
	r := mustOpen(t, linConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		key := fmt.Sprintf("k%d", round)
		stop := make(chan struct{})
		flushed := make(chan error, 1)
		go func() {
			// Flushes during the history move the cell between the
			// memtable and the SSTables under the readers.
			var err error
			for err == nil {
				select {
				case <-stop:
					flushed <- nil
					return
				case <-time.After(time.Millisecond):
				}
				err = r.Flush(counterTable.ID)
			}
			flushed <- err
		}()
		h := history(t, seed+uint64(round), 6, 60,
			func(_, _ int, d int64) error {
				_, err := r.Apply(coltype.Update{Table: counterTable.ID, Key: []byte(key), Column: "a", Delta: d})
				return err
			},
			readCell(r, counterTable.ID, key, "a"))
		close(stop)
		if err := <-flushed; err != nil {
			t.Fatalf("flush: %v", err)
		}
		checkHistory(t, fmt.Sprintf("vanilla, round %d", round), h)
	}
}

// TestFBFCounterIsLinearizable: the FBF leader (test-and-insert of the op
// id, compare-and-swap of the in-memory shard, then the write) on one cell,
// with concurrent reads, gives linearizable histories; every op id is
// fresh, so none is dismissed.
func TestFBFCounterIsLinearizable(t *testing.T) {
	seed := testseed.Seed(t)
	r := mustOpen(t, linConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		key := fmt.Sprintf("k%d", round)
		h := history(t, seed+uint64(round), 6, 60,
			func(p, seq int, d int64) error {
				m, err := r.Apply(fbfUpdate(key, d, op(uint64(1000*round+p+1), uint64(seq))))
				if err == nil && m.Dismissed {
					err = fmt.Errorf("fresh op id %d/%d dismissed (a false positive of the filter)", p, seq)
				}
				return err
			},
			readCell(r, fbfTable.ID, key, "c"))
		checkHistory(t, fmt.Sprintf("FBF, round %d", round), h)
	}
	if st := r.FBFStats(); st.Dismissed != 0 {
		t.Fatalf("FBF stats %+v: fresh op ids were dismissed", st)
	}
}

// TestUnlockedCounterIsCaught is the negative control: a leader that reads
// its shard and writes without the cell lock loses increments, and the
// checker must say so within a bounded number of rounds.
func TestUnlockedCounterIsCaught(t *testing.T) {
	seed := testseed.Seed(t)
	r := mustOpen(t, linConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(racyTable); err != nil {
		t.Fatal(err)
	}
	const rounds = 20
	for round := range rounds {
		key := fmt.Sprintf("k%d", round)
		h := history(t, seed+uint64(round), 4, 50,
			func(_, _ int, d int64) error {
				_, err := r.Apply(coltype.Update{Table: racyTable.ID, Key: []byte(key), Column: "c", Delta: d})
				return err
			},
			readCell(r, racyTable.ID, key, "c"))
		res, err := linearize.Check(h)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !res.Linearizable {
			t.Logf("round %d: violation found, as expected, in a window of %d of the %d operations", round, len(res.Window), len(h))
			return
		}
	}
	t.Fatalf("no violation in %d rounds: the check did not see the unlocked counter's lost updates", rounds)
}
