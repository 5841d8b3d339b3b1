package replica

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/vfs"
)

// memCrashConfig is a replica on fsys that flushes and compacts often, so
// that crashes land in flushes, manifest rewrites and compactions too.
func memCrashConfig(fsys vfs.FS, mode commitlog.SyncMode) Config {
	return Config{
		Dir: "/db", FS: fsys,
		CommitLog: commitlog.Options{Sync: mode, SegmentSize: 16 << 10,
			SyncPeriod: time.Millisecond, GroupWindow: 100 * time.Microsecond},
		MemtableFlushBytes: 4 << 10,
		Compaction:         Compaction{MinThreshold: 2, MinSSTableSize: 1},
		Logger:             quietLogger(),
	}
}

const memCrashKeys = 150

func memCrashKey(i int) []byte { return []byte(fmt.Sprintf("key-%03d", i)) }

// memCrashValues reads every test counter.
func memCrashValues(t *testing.T, r *Replica) []int64 {
	t.Helper()
	vals := make([]int64, memCrashKeys)
	for i := range vals {
		v, _, err := r.Value(7, memCrashKey(i), "a")
		if err != nil {
			t.Fatalf("read %s: %v", memCrashKey(i), err)
		}
		vals[i] = v
	}
	return vals
}

// TestCrashOnMemFS runs concurrent vanilla counter updates on a replica on
// MemFS in each commit log sync mode, crashes the filesystem at seeded random
// points (several times in a row), reopens the replica on what survived and
// checks every counter: in batch and group mode every update whose Apply
// returned nil survives; in periodic mode every update acknowledged before a
// position the log reported durable survives; in every mode no counter holds
// more than was attempted, and the counters stay right through a clean
// restart and further updates.
func TestCrashOnMemFS(t *testing.T) {
	seed := testseed.Seed(t)
	for _, mode := range []commitlog.SyncMode{commitlog.SyncBatch, commitlog.SyncGroup, commitlog.SyncPeriodic} {
		t.Run(mode.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(mode)))
			mem := vfs.NewMem()
			r, err := Open(memCrashConfig(mem, mode))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.CreateTable(counterTable); err != nil {
				t.Fatal(err)
			}
			base := make([]int64, memCrashKeys)
			for round := range 3 {
				after := 300 + rng.IntN(1500)
				r, mem, base = memCrashRound(t, r, mem, mode, base, rng.Uint64(), after, round)
			}
			// A clean restart keeps every counter; later updates add up.
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			r, err = Open(memCrashConfig(mem, mode))
			if err != nil {
				t.Fatalf("clean reopen after the crashes: %v", err)
			}
			defer r.Close()
			got := memCrashValues(t, r)
			for i := range got {
				if got[i] != base[i] {
					t.Fatalf("%s: %d after a clean restart, %d before", memCrashKey(i), got[i], base[i])
				}
				if _, err := r.Apply(coltype.Update{Table: 7, Key: memCrashKey(i), Column: "a", Delta: 3}); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.FlushAll(); err != nil {
				t.Fatal(err)
			}
			if err := r.Compact(7, true); err != nil {
				t.Fatal(err)
			}
			got = memCrashValues(t, r)
			for i := range got {
				if got[i] != base[i]+3 {
					t.Fatalf("%s: %d after +3, want %d", memCrashKey(i), got[i], base[i]+3)
				}
			}
		})
	}
}

// memCrashRound updates counters from 4 goroutines on r until `after`
// updates are acknowledged, crashes mem, reopens on the crashed filesystem,
// checks the counters against base (their values at the start of the round)
// and returns the reopened replica, its filesystem and the new values.
func memCrashRound(t *testing.T, r *Replica, mem *vfs.MemFS, mode commitlog.SyncMode, base []int64, seed uint64, after, round int) (*Replica, *vfs.MemFS, []int64) {
	t.Helper()
	var (
		mu        sync.Mutex
		attempted = make([]int64, memCrashKeys)
		acked     = make([]int64, memCrashKeys)
		nacked    int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := rng.IntN(memCrashKeys)
				mu.Lock()
				attempted[k]++
				mu.Unlock()
				if _, err := r.Apply(coltype.Update{Table: 7, Key: memCrashKey(k), Column: "a", Delta: 1}); err != nil {
					continue // not acknowledged; it may still have been logged
				}
				mu.Lock()
				acked[k]++
				nacked++
				mu.Unlock()
			}
		}()
	}
	wait := func(cond func() bool) {
		for {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	// guaranteed is what must survive the crash: every acknowledged update
	// (batch, group), or those acknowledged before a log position the log
	// then reported durable (periodic).
	var guaranteed []int64
	if mode == commitlog.SyncPeriodic {
		wait(func() bool { return nacked >= after/2 })
		mu.Lock()
		guaranteed = append([]int64(nil), acked...)
		pos := r.CommitLog().Position()
		mu.Unlock()
		wait(func() bool { return nacked >= after && !r.CommitLog().Durable().Less(pos) })
	} else {
		wait(func() bool { return nacked >= after })
	}
	mu.Lock()
	if mode != commitlog.SyncPeriodic {
		guaranteed = append([]int64(nil), acked...)
	}
	ackedAtCrash, nAtCrash := append([]int64(nil), acked...), nacked
	crashed := mem.CrashClone(vfs.CrashOptions{TearUnsynced: true, Seed: seed})
	mu.Unlock()
	close(stop)
	wg.Wait()
	r.Close() // the old replica runs on the old filesystem; its fate does not matter

	r2, err := Open(memCrashConfig(crashed, mode))
	if err != nil {
		t.Fatalf("round %d (crash after %d acknowledged updates): reopen on the crashed filesystem: %v", round, after, err)
	}
	got := memCrashValues(t, r2)
	lost := int64(0)
	for i := range got {
		lo, hi := base[i]+guaranteed[i], base[i]+attempted[i]
		if got[i] < lo || got[i] > hi {
			r2.Close()
			t.Fatalf("round %d: %s = %d after the crash, want within [%d, %d] (start %d, guaranteed %d, acknowledged %d, attempted %d)",
				round, memCrashKey(i), got[i], lo, hi, base[i], guaranteed[i], acked[i], attempted[i])
		}
		lost += max(base[i]+ackedAtCrash[i]-got[i], 0)
	}
	t.Logf("round %d (%s): crash after %d acknowledged updates, %d of them lost, %d records replayed",
		round, mode, nAtCrash, lost, r2.Stats().ReplayedRecords)
	return r2, crashed, got
}
