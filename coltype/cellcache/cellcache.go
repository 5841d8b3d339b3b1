// Package cellcache is the bounded cache of per-cell state that the counter
// designs keep in memory (the vanilla and FBF leader's own shard of a cell,
// a handoff cell's encoded tier-0 state, an observed-reset cell's blob):
// Cassandra's counter cache (counter_cache_size_in_mb, default min(2.5 % of
// the heap, 50 MB)), shared by every column of a replica.
//
// An entry is pinned while a design uses it (Acquire … Release) and is
// never evicted while pinned, so that two goroutines working on one cell
// always share one state. An unpinned entry is evicted, least recently used
// first, when the entries' estimated bytes exceed the bound; the design
// then reloads it from the replica's storage (memtables and SSTables) on
// its next use, exactly as a cold start does. Every design writes a state
// to the commit log and the memtable before installing it in its cell, and
// releases the cell only after, so an evicted state is never lost.
//
// Pinned entries count towards the bound but are not evicted: a cache whose
// pinned entries alone exceed the bound holds more than the bound until they
// are released (each pin is held for one operation on one cell).
//
// A key passed to any method may alias memory its caller reuses afterwards
// (a view of a request's bytes, e.g. unsafe.String): the cache copies a key
// when it stores a new entry and keeps no other reference to it.
//
// Columns keep their entries apart by namespace (NewNamespace): a column
// instance that starts with empty state takes a fresh one, and an instance
// that takes over another's state (ALTER TABLE) keeps its namespace. A user
// that guards a state by a lock of its own (the replica's vanilla shards,
// under the cell lock) may use Get and Put, which do not pin.
//
// The recency order is golang-lru's (github.com/hashicorp/golang-lru/v2,
// simplelru.LRU): each shard keeps all its entries, pinned or not, in an
// LRU, most recently used first; pinning an entry moves it to the front,
// and pinning or releasing allocates nothing (they run on every counter
// write of the designs). The LRU's own size bound is not used (it is made
// too large ever to evict): the bound is the entries' estimated bytes, not
// their number, and pinned entries, which count towards it, must stay. The
// shard evicts the LRU's oldest unpinned entries while its cost exceeds
// its bound, moving a pinned one it meets to the front.
package cellcache

import (
	"hash/maphash"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/idemkv/idemkv/internal/memlimit"
)

// SizeSetting is the replica setting (coltype.Env.Setting) of the cache's
// size in MiB, with Cassandra's name: "" or "0" is Cassandra's default
// (DefaultBytes), a negative value no bound.
const SizeSetting = "counter_cache_size_in_mb"

// DefaultMaxBytes is the upper bound of the default size: Cassandra's 50 MB.
const DefaultMaxBytes = 50 << 20

// EntryOverhead is the estimated bytes of an entry besides its key and its
// state: its slot in the LRU's map, the LRU's list element (112 bytes,
// with expiry fields this cache does not use), the entry, and the design's
// cell struct (mutex, pointers). The designs add their state's own
// estimate. Measured with replica's BenchmarkCellStateMemory (unbounded
// cache, the live heap per counter against the estimate).
const EntryOverhead = 200

// DefaultBytes is Cassandra's default counter cache size: min(2.5 % of
// the heap, 50 MB). Go has no fixed heap; the heap is the soft memory limit
// (GOMEMLIMIT, debug.SetMemoryLimit) when one is set, else there is no
// 2.5 % term and the default is 50 MB.
func DefaultBytes() int64 {
	limit, ok := memlimit.Heap()
	if !ok {
		return DefaultMaxBytes
	}
	return max(1<<20, min(limit/40, DefaultMaxBytes))
}

// ParseSize reads the setting's value (MiB) as a cache bound in bytes: ""
// or "0" is DefaultBytes, a negative value is 0 (no bound).
func ParseSize(v string) (int64, error) {
	if v == "" {
		return DefaultBytes(), nil
	}
	mb, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, err
	}
	switch {
	case mb == 0:
		return DefaultBytes(), nil
	case mb < 0:
		return 0, nil
	case mb > math.MaxInt64>>20:
		return math.MaxInt64, nil
	}
	return mb << 20, nil
}

var namespaces atomic.Uint64

// NewNamespace returns a namespace no other column has used in this
// process.
func NewNamespace() uint64 { return namespaces.Add(1) }

// Provider is the optional capability of a coltype.Env that shares one
// cache between the columns of a replica (replica's env implements it).
type Provider interface {
	CellCache() *Cache
}

// Of returns the cache of an environment (a coltype.Env): its shared one
// when it is a Provider, else a new cache sized by its SizeSetting (a
// column's own, for environments that share none).
func Of(env interface{ Setting(string) string }) *Cache {
	if p, ok := env.(Provider); ok {
		if c := p.CellCache(); c != nil {
			return c
		}
	}
	n, err := ParseSize(env.Setting(SizeSetting))
	if err != nil {
		n = DefaultBytes()
	}
	return New(n)
}

// Cache is a bounded, pinning LRU cache of per-cell state. The zero value
// is not usable; see New and NewEntries. It is safe for concurrent use.
type Cache struct {
	seed      maphash.Seed
	shards    []shard
	byEntries bool // every entry costs 1: the bound is a number of entries
	bound     int64

	hits, misses, evictions atomic.Uint64
}

// shard is a part of the cache with its own lock, LRU and share of the
// bound. Its LRU holds every entry, pinned or not, most recently used
// first; eviction skips the pinned ones.
type shard struct {
	mu     sync.Mutex
	lru    *simplelru.LRU[key, *entry]
	pinned int   // entries with pins > 0
	bound  int64 // 0: none
	cost   int64
	_      [32]byte
}

type key struct {
	ns uint64
	k  string
}

// entry is a cached value with its estimated cost and its pins. Pinning
// and releasing an entry change only its pins (and the LRU's order, on a
// pin): no allocation on the designs' write paths.
type entry struct {
	val      any
	cost     int64
	pins     int32
	detached bool // no longer in the cache (removed or evicted); its handles keep the value
}

// New returns a cache bounded by an estimate of maxBytes bytes; 0 (or
// less) is no bound.
func New(maxBytes int64) *Cache { return newCache(max(maxBytes, 0), false) }

// NewEntries returns a cache bounded by a number of entries (tests, and
// tools that size by count); 0 (or less) is no bound.
func NewEntries(n int) *Cache { return newCache(int64(max(n, 0)), true) }

func newCache(bound int64, byEntries bool) *Cache {
	// Shards divide the lock; a small bound keeps one so that its LRU
	// order and its bound are exact.
	n := 16
	if bound > 0 && (byEntries && bound < 1024 || !byEntries && bound < 16<<20) {
		n = 1
	}
	c := &Cache{seed: maphash.MakeSeed(), shards: make([]shard, n), byEntries: byEntries, bound: bound}
	for i := range c.shards {
		s := &c.shards[i]
		// Too large ever to evict by itself: evict evicts by cost.
		lru, err := simplelru.NewLRU[key, *entry](math.MaxInt, nil)
		if err != nil {
			panic(err) // only for a size <= 0
		}
		s.lru = lru
		if bound > 0 {
			s.bound = max(bound/int64(n), 1)
		}
	}
	return c
}

// Bound is the cache's bound: bytes (New), entries (NewEntries), 0 none.
func (c *Cache) Bound() int64 { return c.bound }

// ByEntries reports whether the bound is a number of entries.
func (c *Cache) ByEntries() bool { return c.byEntries }

func (c *Cache) shard(k key) *shard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	var b [8]byte
	for i := range b {
		b[i] = byte(k.ns >> (8 * i))
	}
	h.Write(b[:])
	h.WriteString(k.k)
	return &c.shards[h.Sum64()%uint64(len(c.shards))]
}

// Handle is a pinned entry: its value stays in the cache, and is the one
// every other Acquire of its key gets, until Release.
type Handle struct {
	c *Cache
	s *shard
	k key
	e *entry
}

// pin pins the entry of a key if the shard has it, as the most recently
// used. s.mu is held.
func (s *shard) pin(k key) (*entry, bool) {
	e, ok := s.lru.Get(k)
	if !ok {
		return nil, false
	}
	if e.pins++; e.pins == 1 {
		s.pinned++
	}
	return e, true
}

// Acquire returns the entry of key k in namespace ns, pinned, creating it
// with newValue on a miss (newValue must not block: a design loads the
// state from storage under its own cell lock, or once, after Acquire);
// created reports a miss. The caller must Release the handle.
func (c *Cache) Acquire(ns uint64, k string, newValue func() any) (h Handle, created bool) {
	kk := key{ns, k}
	s := c.shard(kk)
	s.mu.Lock()
	if e, ok := s.pin(kk); ok {
		s.mu.Unlock()
		c.hits.Add(1)
		return Handle{c, s, kk, e}, false
	}
	kk.k = strings.Clone(kk.k) // the caller's key may alias its buffer
	e := &entry{val: newValue(), cost: c.cost(kk, 0), pins: 1}
	s.lru.Add(kk, e)
	s.pinned++
	s.cost += e.cost
	s.evict(c)
	s.mu.Unlock()
	c.misses.Add(1)
	return Handle{c, s, kk, e}, true
}

// Peek returns the entry of a key if it is in the cache, pinned, without
// creating it; the caller must Release the handle when ok.
func (c *Cache) Peek(ns uint64, k string) (h Handle, ok bool) {
	kk := key{ns, k}
	s := c.shard(kk)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.pin(kk)
	if !ok {
		return Handle{}, false
	}
	return Handle{c, s, kk, e}, true
}

// Value is the entry's value.
func (h Handle) Value() any { return h.e.val }

// Get returns the value of a key's entry without pinning it, marking it
// most recently used, for a state its user guards by a lock of its own
// (the vanilla counter's shard, under the cell lock); ok is false on a
// miss. It counts a hit or a miss.
func (c *Cache) Get(ns uint64, k string) (v any, ok bool) {
	v, ok = c.lookup(ns, k)
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return v, ok
}

// lookup is Get without its counts.
func (c *Cache) lookup(ns uint64, k string) (v any, ok bool) {
	kk := key{ns, k}
	s := c.shard(kk)
	s.mu.Lock()
	e, ok := s.lru.Get(kk)
	if ok {
		v = e.val
	}
	s.mu.Unlock()
	return v, ok
}

// Recall is Get for an entry that is not a cell's state (a design's
// best-effort memory kept within the cache's bound, e.g. the retired
// clients of a Borrow-Counter cell): it marks the entry most recently used
// but counts neither a hit nor a miss, so the cache's hit rate stays the
// cells'.
func (c *Cache) Recall(ns uint64, k string) (v any, ok bool) { return c.lookup(ns, k) }

// Put sets a key's value, unpinned, with the estimated bytes of its state
// (see SetSize), creating the entry or replacing the value of the one in
// the cache, and evicts as the bound asks.
func (c *Cache) Put(ns uint64, k string, v any, size int64) {
	kk := key{ns, k}
	s := c.shard(kk)
	s.mu.Lock()
	defer s.mu.Unlock()
	cost := c.cost(kk, size)
	if e, ok := s.lru.Get(kk); ok { // replaced in place, most recently used
		s.cost += cost - e.cost
		e.val, e.cost = v, cost
	} else {
		kk.k = strings.Clone(kk.k) // the caller's key may alias its buffer
		s.lru.Add(kk, &entry{val: v, cost: cost})
		s.cost += cost
	}
	s.evict(c)
}

// DropNamespace removes every entry of a namespace (its user is gone, or
// its states are stale). Handles that pin one keep their value.
func (c *Cache) DropNamespace(ns uint64) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, k := range s.lru.Keys() {
			if k.ns == ns {
				s.remove(k)
			}
		}
		s.mu.Unlock()
	}
}

// SetSize records the estimated bytes of the entry's state (besides
// EntryOverhead and its key), for a cache bounded by bytes.
func (h Handle) SetSize(n int64) {
	if h.c.byEntries {
		return
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	c := h.c.cost(h.k, n)
	if !h.e.detached {
		h.s.cost += c - h.e.cost
	}
	h.e.cost = c
}

// Release unpins the entry: once no handle pins it, it may be evicted.
func (h Handle) Release() {
	s, e := h.s, h.e
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.pins--; e.pins > 0 || e.detached {
		return
	}
	s.pinned--
	s.evict(h.c)
}

// Remove drops the handle's entry from the cache (its state is stale):
// the next Acquire of its key creates a new one. Handles that pin it keep
// their value.
func (h Handle) Remove() {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if cur, ok := h.s.lru.Peek(h.k); ok && cur == h.e {
		h.s.remove(h.k)
	}
}

// Remove drops a key's entry, pinned or not (its state is stale, e.g. the
// cell was deleted).
func (c *Cache) Remove(ns uint64, k string) {
	kk := key{ns, k}
	s := c.shard(kk)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(kk)
}

// remove drops a key's entry, if the shard has one; its handles keep
// the value. s.mu is held.
func (s *shard) remove(k key) {
	e, ok := s.lru.Peek(k)
	if !ok {
		return
	}
	s.lru.Remove(k)
	s.drop(e)
}

// drop accounts for an entry that left the LRU. s.mu is held.
func (s *shard) drop(e *entry) {
	s.cost -= e.cost
	e.detached = true
	if e.pins > 0 {
		s.pinned--
	}
}

func (c *Cache) cost(k key, size int64) int64 {
	if c.byEntries {
		return 1
	}
	return EntryOverhead + int64(len(k.k)) + max(size, 0)
}

// evict drops unpinned entries, least recently used first, while the
// shard is over its bound. A pinned entry met on the way is moved to the
// front (it is in use); when every entry is pinned the shard stays over
// its bound until they are released. s.mu is held.
func (s *shard) evict(c *Cache) {
	if s.bound <= 0 {
		return
	}
	for skipped := 0; s.cost > s.bound; {
		k, e, ok := s.lru.GetOldest()
		if !ok {
			return
		}
		if e.pins > 0 {
			if skipped >= s.pinned {
				return // the rest is pinned
			}
			s.lru.Get(k) // to the front
			skipped++
			continue
		}
		s.lru.RemoveOldest()
		s.drop(e)
		c.evictions.Add(1)
	}
}

// Stats are a cache's counts.
type Stats struct {
	Entries, Pinned int
	Cost            int64 // estimated bytes (entries for NewEntries)
	Bound           int64
	Hits, Misses    uint64
	Evictions       uint64
}

// Stats returns the cache's counts.
func (c *Cache) Stats() Stats {
	st := Stats{Bound: c.bound, Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Entries += s.lru.Len()
		st.Pinned += s.pinned
		st.Cost += s.cost
		s.mu.Unlock()
	}
	return st
}

// Len is the number of entries in the cache.
func (c *Cache) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.lru.Len()
		s.mu.Unlock()
	}
	return n
}

// Values returns the values of a namespace's entries in the cache (a
// snapshot, for the designs' statistics): they are not pinned, so a caller
// must only read them under the design's own cell lock.
func (c *Cache) Values(ns uint64) []any {
	var out []any
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, k := range s.lru.Keys() {
			if k.ns == ns {
				e, _ := s.lru.Peek(k)
				out = append(out, e.val)
			}
		}
		s.mu.Unlock()
	}
	return out
}
