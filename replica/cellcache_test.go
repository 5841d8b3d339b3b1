package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/internal/testseed"
)

// The tests of this file run each design with a cell cache of two entries
// over many keys, interleaved so that cells are evicted and reloaded from
// storage (memtables and, after random flushes, SSTables), and compare the
// values with the exact ones and with the same run on an unbounded cache.

const tinyCache = 2

// cacheConfig is testConfig with a cell cache.
func cacheConfig(dir string, c *cellcache.Cache) Config {
	cfg := testConfig(dir)
	cfg.CellCache = c
	return cfg
}

// checkBound fails when a cache bounded by entries holds more than its
// bound (nothing is pinned between operations).
func checkBound(t *testing.T, c *cellcache.Cache, when string) {
	t.Helper()
	if c.Bound() > 0 && int64(c.Len()) > c.Bound() {
		t.Fatalf("%s: the cell cache holds %d entries, bound %d", when, c.Len(), c.Bound())
	}
}

// TestCellCacheFBF: FBF increments and retries over 16 keys with a cell
// cache of 2, flushes and restarts: every value is exact, every retry of an
// applied op id (its cell evicted in between) is dismissed, and the run
// agrees with an unbounded cache.
func TestCellCacheFBF(t *testing.T) {
	seed := testseed.Seed(t)
	bounded := runFBFCache(t, seed, func() *cellcache.Cache { return cellcache.NewEntries(tinyCache) })
	unbounded := runFBFCache(t, seed, func() *cellcache.Cache { return cellcache.New(0) })
	if fmt.Sprint(bounded) != fmt.Sprint(unbounded) {
		t.Fatalf("bounded cache %v, unbounded %v", bounded, unbounded)
	}
}

func runFBFCache(t *testing.T, seed uint64, newCache func() *cellcache.Cache) map[string]int64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	cache := newCache()
	r := mustOpen(t, cacheConfig(dir, cache))
	defer func() { r.Close() }()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	type applied struct {
		key string
		id  [16]byte
	}
	var done []applied
	for i := range 1500 {
		key := fmt.Sprintf("k%d", rng.IntN(16))
		switch x := rng.IntN(20); {
		case x < 5 && len(done) > 0: // a retry of an applied op
			a := done[rng.IntN(len(done))]
			m, err := r.Apply(fbfUpdate(a.key, 1000, a.id))
			if err != nil || !m.Dismissed {
				t.Fatalf("op %d: retry of an applied op on %s: %+v, %v; want dismissed", i, a.key, m, err)
			}
		case x == 5:
			if err := r.Flush(fbfTable.ID); err != nil {
				t.Fatal(err)
			}
		case x == 6 && rng.IntN(10) == 0:
			r.Close()
			cache = newCache()
			r = mustOpen(t, cacheConfig(dir, cache))
		case x == 7: // an update without an op id
			d := int64(rng.IntN(7) - 3)
			if _, err := r.Apply(coltype.Update{Table: fbfTable.ID, Key: []byte(key), Column: "c", Delta: d}); err != nil {
				t.Fatal(err)
			}
			want[key] += d
		default:
			id := op(seed, uint64(i))
			d := int64(rng.IntN(10) + 1)
			m, err := r.Apply(fbfUpdate(key, d, id))
			if err != nil || m.Dismissed {
				t.Fatalf("op %d: fresh update of %s: %+v, %v", i, key, m, err)
			}
			want[key] += d
			done = append(done, applied{key, id})
		}
		checkBound(t, cache, fmt.Sprintf("op %d", i))
	}
	// Concurrent leaders on few keys: the shards' compare-and-swap and
	// the pins under eviction.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				key := fmt.Sprintf("k%d", (g+i)%5)
				if _, err := r.Apply(fbfUpdate(key, 1, op(seed+uint64(g)+1, uint64(i)))); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	checkBound(t, cache, "after the concurrent leaders")
	got := map[string]int64{}
	for key, w := range want {
		if got[key] = value(t, r, fbfTable.ID, key, "c"); got[key] != w {
			t.Errorf("%s: value %d, want %d", key, got[key], w)
		}
	}
	if b := cache.Bound(); b > 0 && cache.Stats().Evictions == 0 {
		t.Fatal("no cell was evicted: the test does not test eviction")
	}
	return got
}

// TestCellCacheHandoff: handoff clients on 12 keys of two replicas with
// cell caches of 2, tier-0 anti-entropy and a restart: once every client
// is handed off and the replicas have exchanged views, both read the exact
// totals, as with unbounded caches.
func TestCellCacheHandoff(t *testing.T) {
	seed := testseed.Seed(t)
	bounded := runHandoffCache(t, seed, func() *cellcache.Cache { return cellcache.NewEntries(tinyCache) })
	unbounded := runHandoffCache(t, seed, func() *cellcache.Cache { return cellcache.New(0) })
	if fmt.Sprint(bounded) != fmt.Sprint(unbounded) {
		t.Fatalf("bounded cache %v, unbounded %v", bounded, unbounded)
	}
}

func openHandoffCache(t *testing.T, dir string, c *cellcache.Cache) *Replica {
	t.Helper()
	r := mustOpen(t, cacheConfig(dir, c))
	if _, err := r.table(handoffTable.ID); err != nil {
		if err := r.CreateTable(handoffTable); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func runHandoffCache(t *testing.T, seed uint64, newCache func() *cellcache.Cache) map[string]int64 {
	rng := rand.New(rand.NewPCG(seed, 2))
	dirs := []string{t.TempDir(), t.TempDir()}
	caches := []*cellcache.Cache{newCache(), newCache()}
	reps := []*Replica{openHandoffCache(t, dirs[0], caches[0]), openHandoffCache(t, dirs[1], caches[1])}
	defer func() {
		for _, r := range reps {
			r.Close()
		}
	}()
	const keys = 12
	type client struct {
		c   *handoff.Counter
		key string
		rep int
	}
	var clients []*client
	for k := range keys {
		for rep := range 2 {
			clients = append(clients, &client{handoff.NewCounter(newID(t), 1), fmt.Sprintf("k%d", k), rep})
		}
	}
	want := map[string]int64{}
	for i := range 1500 {
		cl := clients[rng.IntN(len(clients))]
		switch x := rng.IntN(10); {
		case x < 4:
			n := uint64(rng.IntN(5) + 1)
			cl.c.Add(n)
			want[cl.key] += int64(n)
		case x < 8:
			exchange(t, reps[cl.rep], cl.key, cl.c)
		case x == 8:
			from := rng.IntN(2)
			syncPair(t, reps[from], reps[1-from], cl.key)
		case rng.IntN(20) == 0:
			n := rng.IntN(2)
			if err := reps[n].Flush(handoffTable.ID); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(2) == 0 {
				reps[n].Close()
				caches[n] = newCache()
				reps[n] = openHandoffCache(t, dirs[n], caches[n])
			}
		}
		for n, c := range caches {
			checkBound(t, c, fmt.Sprintf("op %d, replica %d", i, n))
		}
	}
	for _, cl := range clients {
		for i := 0; !cl.c.Handed(); i++ {
			if i > 8 {
				t.Fatalf("client of %s not handed off", cl.key)
			}
			exchange(t, reps[cl.rep], cl.key, cl.c)
		}
	}
	for range 2 {
		for k := range keys {
			syncPair(t, reps[0], reps[1], fmt.Sprintf("k%d", k))
		}
	}
	got := map[string]int64{}
	for key, w := range want {
		for n, r := range reps {
			if v := value(t, r, handoffTable.ID, key, "h"); v != w {
				t.Errorf("replica %d, %s: value %d, want %d", n, key, v, w)
			}
		}
		got[key] = value(t, reps[0], handoffTable.ID, key, "h")
	}
	if caches[0].Bound() > 0 && caches[0].Stats().Evictions == 0 {
		t.Fatal("no cell was evicted: the test does not test eviction")
	}
	return got
}

var resetTable = coltype.TableDef{ID: 31, Keyspace: "ks", Name: "r", Columns: []coltype.ColumnDef{{Name: "r", Type: resetcol.TypeName}}}

// TestCellCacheReset: observed-reset increments, retries and resets on 12
// keys of two replicas with cell caches of 2, replicated mutations lost at
// random and recovered by anti-entropy, flushes: the increments alone are
// exact on both replicas, retries of applied op ids are dismissed after
// their cells were evicted, and with resets the converged values agree
// with unbounded caches.
func TestCellCacheReset(t *testing.T) {
	seed := testseed.Seed(t)
	for _, resets := range []bool{false, true} {
		bounded := runResetCache(t, seed, resets, func() *cellcache.Cache { return cellcache.NewEntries(tinyCache) })
		unbounded := runResetCache(t, seed, resets, func() *cellcache.Cache { return cellcache.New(0) })
		if fmt.Sprint(bounded) != fmt.Sprint(unbounded) {
			t.Fatalf("resets %v: bounded cache %v, unbounded %v", resets, bounded, unbounded)
		}
	}
}

// TestCellCacheResetSeedPeers replays TestCellCacheReset's seed
// 1795749349682173512, whose k4 diverged (474 and 485): replica A's first
// op of the cell was a DELETE through Replica.Delete (no replica list),
// an observed reset of B's increments that A had delivered; it went to
// nobody, and A's later outbox to B, numbered from 0, never carried it.
// resetcol now addresses a write without a replica list to every origin
// the cell delivered ops from (coltype/resetcol
// TestResetOutsideCoordinatorReachesKnownPeers).
func TestCellCacheResetSeedPeers(t *testing.T) {
	const seed = 1795749349682173512
	bounded := runResetCache(t, seed, true, func() *cellcache.Cache { return cellcache.NewEntries(tinyCache) })
	unbounded := runResetCache(t, seed, true, func() *cellcache.Cache { return cellcache.New(0) })
	if fmt.Sprint(bounded) != fmt.Sprint(unbounded) {
		t.Fatalf("bounded cache %v, unbounded %v", bounded, unbounded)
	}
}

func openResetCache(t *testing.T, dir string, c *cellcache.Cache) *Replica {
	t.Helper()
	cfg := cacheConfig(dir, c)
	// The run retries ops applied any time before: under the race detector
	// on a loaded machine it outlasted the default 10 s op window, and a
	// retry of an op applied more than 10 s before was, rightly, counted
	// (CI, seed 1795771686583115553).
	cfg.Settings = map[string]string{resetcol.OpWindowSetting: "1h"}
	r := mustOpen(t, cfg)
	if _, err := r.table(resetTable.ID); err != nil {
		if err := r.CreateTable(resetTable); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// syncReset runs one anti-entropy exchange of a cell from a to b.
func syncReset(t *testing.T, a, b *Replica, key string) {
	t.Helper()
	view, err := a.SyncView(resetTable.ID, []byte(key), "r", b.HostID())
	if err != nil {
		t.Fatal(err)
	}
	reply, err := b.Exchange(resetTable.ID, []byte(key), "r", view)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exchange(resetTable.ID, []byte(key), "r", reply); err != nil {
		t.Fatal(err)
	}
}

func runResetCache(t *testing.T, seed uint64, resets bool, newCache func() *cellcache.Cache) map[string]int64 {
	rng := rand.New(rand.NewPCG(seed, 3))
	caches := []*cellcache.Cache{newCache(), newCache()}
	reps := []*Replica{openResetCache(t, t.TempDir(), caches[0]), openResetCache(t, t.TempDir(), caches[1])}
	defer func() {
		for _, r := range reps {
			r.Close()
		}
	}()
	ids := []counters.ID{reps[0].HostID(), reps[1].HostID()}
	deliver := func(to int, m coltype.Mutation) {
		if err := reps[to].ApplyMutation(m); err != nil && !errors.Is(err, resetcol.ErrHeld) {
			t.Fatal(err)
		}
	}
	const keys = 12
	want := map[string]int64{}
	type applied struct {
		key    string
		leader int
		id     [16]byte
	}
	var done []applied
	for i := range 1500 {
		key := fmt.Sprintf("k%d", rng.IntN(keys))
		leader := rng.IntN(2)
		switch x := rng.IntN(20); {
		case x < 3 && len(done) > 0:
			a := done[rng.IntN(len(done))]
			m, err := reps[a.leader].Apply(coltype.Update{Table: resetTable.ID, Key: []byte(a.key), Column: "r", Delta: 1000,
				HasOp: true, OpID: a.id, OpTime: time.Now().UnixNano(), Replicas: ids})
			if err != nil || !m.Dismissed {
				t.Fatalf("op %d: retry of an applied op on %s: %+v, %v; want dismissed", i, a.key, m, err)
			}
		case x < 5:
			syncReset(t, reps[leader], reps[1-leader], key)
		case x == 5:
			if err := reps[leader].Flush(resetTable.ID); err != nil {
				t.Fatal(err)
			}
		case x == 6 && resets:
			m, err := reps[leader].Delete(resetTable.ID, []byte(key), 0, "r")
			if err != nil {
				t.Fatal(err)
			}
			if rng.IntN(3) > 0 {
				deliver(1-leader, m[0])
			}
		default:
			id := op(seed, uint64(i))
			d := int64(rng.IntN(10) + 1)
			m, err := reps[leader].Apply(coltype.Update{Table: resetTable.ID, Key: []byte(key), Column: "r", Delta: d,
				HasOp: true, OpID: id, OpTime: time.Now().UnixNano(), Replicas: ids})
			if err != nil || m.Dismissed {
				t.Fatalf("op %d: fresh update of %s: %+v, %v", i, key, m, err)
			}
			want[key] += d
			done = append(done, applied{key, leader, id})
			if rng.IntN(3) > 0 { // else lost: anti-entropy delivers it
				deliver(1-leader, m)
			}
		}
		for n, c := range caches {
			checkBound(t, c, fmt.Sprintf("op %d, replica %d", i, n))
		}
	}
	for range 3 {
		for k := range keys {
			syncReset(t, reps[0], reps[1], fmt.Sprintf("k%d", k))
		}
	}
	for n, r := range reps {
		if held, err := r.Sweep(); err != nil || held != 0 {
			t.Fatalf("replica %d: %d ops still held after anti-entropy (%v)", n, held, err)
		}
	}
	got := map[string]int64{}
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		v0, v1 := value(t, reps[0], resetTable.ID, key, "r"), value(t, reps[1], resetTable.ID, key, "r")
		if v0 != v1 {
			t.Errorf("%s: replicas read %d and %d after anti-entropy", key, v0, v1)
		}
		if !resets && v0 != want[key] {
			t.Errorf("%s: value %d, want %d", key, v0, want[key])
		}
		got[key] = v0
	}
	if caches[0].Bound() > 0 && caches[0].Stats().Evictions == 0 {
		t.Fatal("no cell was evicted: the test does not test eviction")
	}
	return got
}

// TestCellCacheSetting: the replica sizes its cell cache by the setting
// counter_cache_size_in_mb ("" and "0": Cassandra's default, -1: none) and
// refuses a value that is not a number.
func TestCellCacheSetting(t *testing.T) {
	for v, want := range map[string]int64{"": cellcache.DefaultBytes(), "0": cellcache.DefaultBytes(), "3": 3 << 20, "-1": 0} {
		cfg := testConfig(t.TempDir())
		cfg.Settings = map[string]string{cellcache.SizeSetting: v}
		r := mustOpen(t, cfg)
		if got := r.CellCache().Bound(); got != want {
			t.Errorf("%s = %q: bound %d, want %d", cellcache.SizeSetting, v, got, want)
		}
		r.Close()
	}
	cfg := testConfig(t.TempDir())
	cfg.Settings = map[string]string{cellcache.SizeSetting: "lots"}
	if r, err := Open(cfg); err == nil {
		r.Close()
		t.Fatal("a cache size that is not a number opened")
	}
}
