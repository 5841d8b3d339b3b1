package fbf

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Shape of the aging filter (see the package comment and docs/fbf.md).
const (
	// AgingBucketSlots is b, the slots of a bucket: 4, the choice of Fan et
	// al. that fills a cuckoo table to about 95 % before an insert fails,
	// and the one their semi-sorting encodes (a bucket of f-bit
	// fingerprints takes 4·(f + AgingTagBits − 1) bits).
	AgingBucketSlots = 4
	// AgingTagBits is the width of the epoch tag of a slot.
	AgingTagBits = 3
	// AgingEpochs is L, the window in epochs: an id is remembered while
	// now's epoch − its epoch ≤ L. With 3 tag bits, the ages 0..L are
	// told apart modulo 2^3 = L+1, since a shard is swept (its expired
	// slots emptied) before any other access in a new epoch.
	AgingEpochs = 1<<AgingTagBits - 1
	// DefaultAgingLoad is the default designed load of the tables at the
	// peak of the sized rate, rate × (window + one epoch) ids (see
	// AgingConfig.Load).
	DefaultAgingLoad = 0.90
	// MaxAgingLoad bounds AgingConfig.Load: below the ~95 % where a cuckoo
	// insert with b = 4 starts failing, with room for the spread of the
	// load between shards.
	MaxAgingLoad = 0.96
	// AgingMaxKicks bounds an insert's cuckoo walk (Fan et al.'s 500).
	AgingMaxKicks = 500
	// AgingMaxTables bounds the tables of a shard: its first and up to
	// AgingMaxTables−1 grown ones.
	AgingMaxTables = 8
	// MaxAgingFingerprintBits bounds f (a slot's value in a grown table,
	// fingerprint and tag, is f+AgingGrowthBits+3 ≤ 64 bits).
	MaxAgingFingerprintBits = 56
	// AgingGrowthBits is the extra fingerprint bits of a grown table.
	AgingGrowthBits = 2
	// MaxAgingBytes bounds the memory of one aging filter (1 TiB): a guard
	// against overflow; callers set their own, smaller bound.
	MaxAgingBytes int64 = 1 << 40
	// AgingSemiSortAbove is the multiple of the Bloom optimum
	// 1.44·log₂(1/TargetFPP), in designed bits per id over an epoch, above
	// which AgingLayoutAuto semi-sorts the buckets.
	AgingSemiSortAbove = 1.5
)

// AgingLayout is how the tables of an aging filter hold their slots.
type AgingLayout int

const (
	// AgingLayoutAuto packs the slots unless packed slots would take more
	// than AgingSemiSortAbove times the Bloom optimum per id (at the
	// designed load, over an epoch); then it semi-sorts the buckets. Of
	// the targets 0.01, 0.001 and 0.0001 at the default load, it
	// semi-sorts at 0.01 only.
	AgingLayoutAuto AgingLayout = iota
	// AgingLayoutPacked packs the slots, f + AgingTagBits bits each: the
	// faster test-and-add.
	AgingLayoutPacked
	// AgingLayoutSemiSorted semi-sorts the buckets (Fan et al.'s §5.2): a
	// slot takes f + AgingTagBits − 1 bits, and a test-and-add decodes and
	// encodes the buckets it touches (20 to 40 % more time a test-and-add
	// at steady state; see BENCHMARKS.md).
	AgingLayoutSemiSorted
)

func (l AgingLayout) String() string {
	switch l {
	case AgingLayoutAuto:
		return "auto"
	case AgingLayoutPacked:
		return "packed"
	case AgingLayoutSemiSorted:
		return "semi-sorted"
	}
	return fmt.Sprintf("AgingLayout(%d)", int(l))
}

// AgingConfig describes an AgingFilter. Window, Rate and TargetFPP are
// required; the zero value of every other field selects the documented
// default.
type AgingConfig struct {
	// Window W: an id is remembered for at least W after its insertion,
	// and forgotten within W + W/AgingEpochs (one epoch).
	Window time.Duration
	// Rate is the expected rate of fresh ids, per second. The filter is
	// sized for Rate × (W + one epoch) ids at TargetFPP.
	Rate float64
	// TargetFPP is the false-positive probability at the sized load; it
	// sets the fingerprint bits f.
	TargetFPP float64
	// RetryHorizon H ≤ W: under overload, past MaxBytes, ids older than
	// H may be forgotten early (counted in EvictedEarly); ids younger
	// than H never are. Zero: every id may be evicted under overload.
	RetryHorizon time.Duration
	// Load is the load of the tables at the peak of the sized rate: the
	// tables have PeakIDs / Load slots. Higher is fewer bits per id and
	// slower inserts (more of them move fingerprints to make room): at
	// 0.94, 42 % of inserts at the peak find both their buckets full,
	// at 0.90 33 %, at 0.85 24 %. Default DefaultAgingLoad; 0.5 …
	// MaxAgingLoad.
	Load float64
	// MaxBytes bounds the memory of the tables the filter may grow to
	// when more ids arrive than it was sized for. Default: twice the
	// initial tables. Less than the initial tables is an error.
	MaxBytes int64
	// Shards is the number of independently locked shards, a power of
	// two. Default: about one per 8192 buckets, 16 … 1024.
	Shards int
	// Clock supplies the time of every operation. Default: SystemClock.
	Clock Clock
	// Start is the filter's time zero (epoch 0 starts here). Default:
	// Clock.Now() at NewAging.
	Start time.Time
	// Layout is how the tables hold their slots. Default AgingLayoutAuto.
	Layout AgingLayout
}

// AgingSizing is what an AgingConfig allocates, computed without
// allocating it (see AgingConfig.Sizing).
type AgingSizing struct {
	Epoch            time.Duration // W / AgingEpochs, rounded up
	MaxWindow        time.Duration // AgingEpochs+1 epochs: ids are forgotten within it
	PeakIDs          float64       // Rate × MaxWindow: the live ids at the sized rate's peak
	Load             float64       // the tables' load at the peak (AgingConfig.Load)
	FingerprintBits  uint          // f
	Layout           AgingLayout   // packed or semi-sorted (never auto)
	SlotBits         uint          // bits a slot takes: f + AgingTagBits, less 1 when semi-sorted
	Shards           int
	BucketsPerShard  uint64 // of each shard's first table
	Slots            uint64 // of the first tables
	InitialBytes     int64  // the first tables
	MaxBytes         int64  // the bound of growth
	DesignFPP        float64
	DesignBitsPerID  float64 // SlotBits / Load: bits per live id at the peak
	OptimalBitsPerID float64 // 1.44·log2(1/TargetFPP)
}

// Sizing validates c and returns what NewAging would allocate, without
// allocating anything. Its error wraps ErrConfig.
func (c AgingConfig) Sizing() (AgingSizing, error) {
	var z AgingSizing
	if c.Window <= 0 || c.Window > 100*365*24*time.Hour {
		return z, configErr("Window = %v, want > 0 and at most 100 years", c.Window)
	}
	if !(c.Rate > 0) || math.IsInf(c.Rate, 0) {
		return z, configErr("Rate = %v, want > 0", c.Rate)
	}
	if !(c.TargetFPP > 0 && c.TargetFPP < 1) {
		return z, configErr("TargetFPP = %v, want in (0, 1)", c.TargetFPP)
	}
	if c.RetryHorizon < 0 || c.RetryHorizon > c.Window {
		return z, configErr("RetryHorizon = %v, want 0 … Window (%v)", c.RetryHorizon, c.Window)
	}
	if c.Shards < 0 || c.Shards > 1<<16 || c.Shards&(c.Shards-1) != 0 {
		return z, configErr("Shards = %d, want 0 (automatic) or a power of two ≤ 65536", c.Shards)
	}
	if c.MaxBytes < 0 {
		return z, configErr("MaxBytes = %d, want ≥ 0", c.MaxBytes)
	}
	if c.Layout < AgingLayoutAuto || c.Layout > AgingLayoutSemiSorted {
		return z, configErr("Layout = %v, want auto, packed or semi-sorted", c.Layout)
	}
	load := c.Load
	if load == 0 {
		load = DefaultAgingLoad
	}
	if !(load >= 0.5 && load <= MaxAgingLoad) {
		return z, configErr("Load = %v, want 0 (default %v) or 0.5 … %v", c.Load, DefaultAgingLoad, MaxAgingLoad)
	}
	s := AgingSizing{Epoch: (c.Window + AgingEpochs - 1) / AgingEpochs, Load: load}
	s.MaxWindow = (AgingEpochs + 1) * s.Epoch
	s.PeakIDs = c.Rate * s.MaxWindow.Seconds()
	// A query meets 2b slots, each occupied with probability Load at the
	// peak, each matching with probability 1/agingFingerprints(f) =
	// 1/(16·(2^(f−4) − 1)).
	f := agingPrefixBits + uint(math.Ceil(math.Log2(2*AgingBucketSlots*load/c.TargetFPP/(1<<agingPrefixBits)+1)))
	s.FingerprintBits = min(max(f, agingPrefixBits+1), MaxAgingFingerprintBits)
	s.OptimalBitsPerID = OptimalBitsPerID(c.TargetFPP)
	s.Layout = c.Layout
	if s.Layout == AgingLayoutAuto {
		s.Layout = AgingLayoutPacked
		// The tables hold AgingEpochs+1 epochs of ids at the peak,
		// AgingEpochs+0.5 on average over an epoch.
		packed := float64(agingBucketBits(s.FingerprintBits, false)) / AgingBucketSlots / load * (AgingEpochs + 1) / (AgingEpochs + 0.5)
		if packed > AgingSemiSortAbove*s.OptimalBitsPerID {
			s.Layout = AgingLayoutSemiSorted
		}
	}
	semi := s.Layout == AgingLayoutSemiSorted
	s.SlotBits = uint(agingBucketBits(s.FingerprintBits, semi) / AgingBucketSlots)
	slots := math.Ceil(s.PeakIDs / load)
	if slots*float64(s.SlotBits)/8 > float64(MaxAgingBytes) {
		return z, configErr("Rate × window = %.3g ids need more than %d bytes", s.PeakIDs, MaxAgingBytes)
	}
	buckets := uint64(math.Ceil(slots / AgingBucketSlots))
	s.Shards = c.Shards
	if s.Shards == 0 {
		s.Shards = 1 << min(max(bits.Len64(buckets/8192)-1, 4), 10)
	}
	s.BucketsPerShard = max((buckets+uint64(s.Shards)-1)/uint64(s.Shards), 4)
	s.Slots = s.BucketsPerShard * AgingBucketSlots * uint64(s.Shards)
	s.InitialBytes = int64(s.Shards) * tableBytes(s.BucketsPerShard, s.FingerprintBits, semi)
	s.MaxBytes = c.MaxBytes
	if s.MaxBytes == 0 {
		s.MaxBytes = min(2*s.InitialBytes, MaxAgingBytes)
	}
	if s.MaxBytes < s.InitialBytes {
		return z, configErr("MaxBytes = %d is less than the %d bytes of the tables sized for Rate %g × window %v at TargetFPP %g",
			s.MaxBytes, s.InitialBytes, c.Rate, s.MaxWindow, c.TargetFPP)
	}
	s.DesignFPP = agingFPP(2*load*AgingBucketSlots, s.FingerprintBits)
	s.DesignBitsPerID = float64(s.SlotBits) / load
	return s, nil
}

// agingFPP is the probability that one of occupied slots met by a query
// holds its f-bit fingerprint (one of agingFingerprints(f)): 1 − (1 −
// 1/agingFingerprints(f))^occupied.
func agingFPP(occupied float64, f uint) float64 {
	return -math.Expm1(occupied * math.Log1p(-1/agingFingerprints(f)))
}

// agingShard is one independently locked part of the filter: an id's shard
// is fixed by its hash, and both its buckets in every table of the shard.
type agingShard struct {
	mu     sync.Mutex
	swept  int64 // the epoch the shard was last swept at
	rng    uint64
	tables []*agingTable // the first table, then the grown ones
	_      [64 - 8 - 8 - 8 - 24]byte
}

// AgingFilter is a set of recent ids that remembers each id for a fixed
// window: a sharded cuckoo filter of fingerprints tagged with a coarse
// epoch (see the package comment). Its methods are safe for concurrent
// use. Create one with NewAging.
type AgingFilter struct {
	cfg       AgingConfig
	size      AgingSizing
	epochNs   int64
	start     int64
	shardBits uint
	evictAge  int64 // ages (in epochs) at which an id is older than RetryHorizon; > AgingEpochs: none
	shards    []agingShard
	latest    atomic.Int64 // the latest epoch seen
	bytes     atomic.Int64 // memory of the tables

	grown, released, evicted, saturated, expired atomic.Uint64
}

// NewAging returns an empty aging filter, or an error wrapping ErrConfig if
// cfg is invalid.
func NewAging(cfg AgingConfig) (*AgingFilter, error) {
	s, err := cfg.Sizing()
	if err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Start.IsZero() {
		cfg.Start = cfg.Clock.Now()
	}
	if cfg.Start.UnixNano() <= 0 || cfg.Start.Year() > 2200 {
		return nil, configErr("Start %v out of range (1970..2200)", cfg.Start)
	}
	cfg.MaxBytes, cfg.Load, cfg.Shards, cfg.Layout = s.MaxBytes, s.Load, s.Shards, s.Layout
	f := &AgingFilter{cfg: cfg, size: s, epochNs: int64(s.Epoch), start: cfg.Start.UnixNano(),
		shardBits: uint(bits.TrailingZeros(uint(s.Shards))), shards: make([]agingShard, s.Shards),
		// An id of age a epochs was inserted more than a−1 epochs ago.
		evictAge: int64((cfg.RetryHorizon+s.Epoch-1)/s.Epoch) + 1}
	// The shards' first tables are cut from one arena in huge pages.
	semi := s.Layout == AgingLayoutSemiSorted
	perTable := int(tableBytes(s.BucketsPerShard, s.FingerprintBits, semi) / 8)
	arena := hugeWords(perTable * s.Shards)
	for i := range f.shards {
		sh := &f.shards[i]
		sh.rng = uint64(i)*0x9e3779b97f4a7c15 + 1
		t := newAgingTableIn(s.BucketsPerShard, s.FingerprintBits, semi, arena[i*perTable:(i+1)*perTable:(i+1)*perTable])
		sh.tables = []*agingTable{t}
	}
	f.bytes.Store(s.InitialBytes)
	return f, nil
}

// Config returns the filter's configuration, defaults filled in.
func (f *AgingFilter) Config() AgingConfig { return f.cfg }

// Sizing returns the filter's sizing.
func (f *AgingFilter) Sizing() AgingSizing { return f.size }

// Window returns the guaranteed window W: an id inserted now is remembered
// for at least W (unless it is evicted early under overload, counted in
// Stats().EvictedEarly, and never before RetryHorizon).
func (f *AgingFilter) Window() time.Duration { return f.cfg.Window }

// MaxWindow returns how long an id may be remembered at most: W plus one
// epoch.
func (f *AgingFilter) MaxWindow() time.Duration { return f.size.MaxWindow }

// BitsInUse returns the bits of the slots of every table.
func (f *AgingFilter) BitsInUse() uint64 {
	var n uint64
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		for _, t := range sh.tables {
			n += t.bits()
		}
		sh.mu.Unlock()
	}
	return n
}

// epochAt is the epoch of a time in unix nanoseconds.
func (f *AgingFilter) epochAt(t int64) int64 {
	d := t - f.start
	e := d / f.epochNs
	if d < 0 && d%f.epochNs != 0 {
		e--
	}
	return e
}

// current returns the epoch of the clock, never going back.
func (f *AgingFilter) current() int64 {
	e := f.epochAt(f.cfg.Clock.Now().UnixNano())
	for {
		last := f.latest.Load()
		if e <= last {
			return last
		}
		if f.latest.CompareAndSwap(last, e) {
			return e
		}
	}
}

// locate returns the shard of h and the key its buckets derive from (its
// fingerprints derive from h.H2).
func (f *AgingFilter) locate(h Hash) (*agingShard, uint64) {
	var sh uint64
	if f.shardBits > 0 {
		sh = h.H1 >> (64 - f.shardBits)
	}
	return &f.shards[sh], h.H1 << f.shardBits
}

// sweep empties the slots of sh that expired since it was last swept, at
// epoch cur, and drops grown tables left empty. It holds sh.mu. Every
// occupied slot of a swept shard has an epoch in [swept−L, swept], so its
// tag (the epoch mod L+1) tells its epoch.
func (f *AgingFilter) sweep(sh *agingShard, cur int64) {
	gap := cur - sh.swept
	if gap <= 0 {
		return
	}
	var expired int64
	for _, t := range sh.tables {
		if t.live == 0 {
			continue
		}
		if gap > AgingEpochs {
			expired += t.live
			clear(t.words)
			t.live = 0
			continue
		}
		// The tags whose epoch is now more than AgingEpochs old.
		var dead uint64
		for tag := range uint64(AgingEpochs + 1) {
			if (uint64(sh.swept)-tag)&AgingEpochs+uint64(gap) > AgingEpochs {
				dead |= 1 << tag
			}
		}
		n := t.expireAll(dead)
		t.live -= n
		expired += n
	}
	sh.swept = cur
	f.expired.Add(uint64(expired))
	kept := sh.tables[:1]
	for _, t := range sh.tables[1:] {
		if t.live == 0 {
			f.bytes.Add(-t.bytes())
			f.released.Add(1)
			continue
		}
		kept = append(kept, t)
	}
	clear(sh.tables[len(kept):])
	sh.tables = kept
}

// ContainsHash reports whether the id hashed to h is remembered.
func (f *AgingFilter) ContainsHash(h Hash) bool {
	cur := f.current()
	sh, key := f.locate(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f.sweep(sh, cur)
	return sh.find(key, h.H2)
}

// Contains reports whether id is remembered.
func (f *AgingFilter) Contains(id []byte) bool { return f.ContainsHash(HashID(id)) }

func (sh *agingShard) find(key, h2 uint64) bool {
	for _, t := range sh.tables {
		fp := t.fingerprint(h2)
		i := t.index(key)
		// (has2 itself, a call more on the hot path.)
		if t.semi && t.has2Semi(i, t.alt(i, fp), fp) || !t.semi && t.has2Packed(i, t.alt(i, fp), fp) {
			return true
		}
	}
	return false
}

// TestAndAdd reports whether id was already remembered and, if it was not,
// remembers it from now on, in one atomic step: of concurrent calls with
// the same id at most one returns false.
func (f *AgingFilter) TestAndAdd(id []byte) (present bool) { return f.TestAndAddHash(HashID(id)) }

// TestAndAddHash is TestAndAdd for an id hashed with HashID.
func (f *AgingFilter) TestAndAddHash(h Hash) (present bool) {
	return f.testAndAdd(h, 0, false)
}

// TestAndAddHashAt is TestAndAddHash for an id first seen at time at (a
// commit log replay): the id is remembered for the window from at (from
// now if at is later), not from now, so that the replayed ids of a
// restart do not hold the tables for a window longer than they would have.
// An id whose window from at is over is not added (and reported absent).
func (f *AgingFilter) TestAndAddHashAt(h Hash, at time.Time) (present bool) {
	return f.testAndAdd(h, at.UnixNano(), true)
}

func (f *AgingFilter) testAndAdd(h Hash, at int64, hasAt bool) bool {
	cur := f.current()
	sh, key := f.locate(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f.sweep(sh, cur)
	// Another call may have swept the shard to a later epoch since cur was
	// read: insert at that epoch, so that every slot's epoch stays within
	// [swept − L, swept] and its tag tells it.
	cur = max(cur, sh.swept)
	if sh.find(key, h.H2) {
		return true
	}
	e := cur
	if hasAt {
		e = min(cur, f.epochAt(at))
		if cur-e > AgingEpochs {
			return false
		}
	}
	tag := uint64(e) & AgingEpochs
	for _, t := range sh.tables {
		v := t.fingerprint(h.H2)<<AgingTagBits | tag
		if ok, _ := sh.place(t, key, v, evictNone); ok {
			t.live++
			return false
		}
	}
	if t := f.grow(sh); t != nil {
		if ok, _ := sh.place(t, key, t.fingerprint(h.H2)<<AgingTagBits|tag, evictNone); ok {
			t.live++
			return false
		}
	}
	// Full and unable to grow: forget an id older than the horizon.
	if f.evictAge <= AgingEpochs {
		ev := evictPolicy{cur: uint64(cur), age: uint64(f.evictAge)}
		for _, t := range sh.tables {
			if ok, evicted := sh.place(t, key, t.fingerprint(h.H2)<<AgingTagBits|tag, ev); ok {
				if evicted {
					f.evicted.Add(1)
				} else {
					t.live++
				}
				return false
			}
		}
	}
	// Nothing may be forgotten: report the id present (the update is
	// dismissed, as on a false positive) rather than forget one.
	f.saturated.Add(1)
	return true
}

// grow adds a table to sh, a quarter of the first one and then twice the
// previous grown one, within MaxBytes; nil when it may not. A grown table
// has AgingGrowthBits more fingerprint bits than the first one, so that
// its false positives add at most about 1/2^AgingGrowthBits of the
// target.
func (f *AgingFilter) grow(sh *agingShard) *agingTable {
	if len(sh.tables) >= AgingMaxTables {
		return nil
	}
	nb := max(sh.tables[0].nb/4, 4)
	if n := len(sh.tables); n > 1 {
		nb = 2 * sh.tables[n-1].nb
	}
	fb := min(f.size.FingerprintBits+AgingGrowthBits, MaxAgingFingerprintBits+AgingGrowthBits)
	semi := f.size.Layout == AgingLayoutSemiSorted
	b := tableBytes(nb, fb, semi)
	for {
		used := f.bytes.Load()
		if used+b > f.cfg.MaxBytes {
			return nil
		}
		if f.bytes.CompareAndSwap(used, used+b) {
			break
		}
	}
	t := newAgingTable(nb, fb, semi)
	sh.tables = append(sh.tables, t)
	f.grown.Add(1)
	return t
}

// kick is one step of a cuckoo walk, kept to undo it: in bucket i, in
// took the place of out.
type kick struct{ i, in, out uint64 }

// evictPolicy says which slots count as free: the empty ones, and with
// age > 0 those whose id is at least age epochs old at epoch cur.
type evictPolicy struct{ cur, age uint64 }

var evictNone = evictPolicy{}

// place puts slot value v of key in table t: in a free slot of one of its
// buckets, or by a cuckoo walk of at most AgingMaxKicks kicks, undone if it
// finds no free slot. evicted is true when the slot taken held an id ev
// let it forget (the caller counts it).
func (sh *agingShard) place(t *agingTable, key, v uint64, ev evictPolicy) (ok, evicted bool) {
	fp := v >> AgingTagBits
	i1 := t.index(key)
	i2 := t.alt(i1, fp)
	if ok, evicted := t.putFree(i1, v, ev); ok {
		return true, evicted
	}
	if ok, evicted := t.putFree(i2, v, ev); ok {
		return true, evicted
	}
	if ok, evicted := t.hop(i1, i2, v, ev); ok {
		return true, evicted
	}
	return sh.walk(t, i1, i2, v, ev)
}

// replace puts in in the place of one out in bucket i.
func (t *agingTable) replace(i, out, in uint64) {
	b := t.load(i)
	for j, v := range b {
		if v == out {
			b.put(j, in)
			break
		}
	}
	t.store(i, b)
}

// hop looks one step ahead before a random walk: the other buckets of the
// 2b ids of buckets i1 and i2 are read together (their cache misses
// overlap, where a walk's come one after the other), and the first id
// whose other bucket has a free slot moves there, leaving its slot to v.
func (t *agingTable) hop(i1, i2, v uint64, ev evictPolicy) (ok, evicted bool) {
	var olds, alts [2 * AgingBucketSlots]uint64
	b1, b2 := t.load(i1), t.load(i2)
	copy(olds[:], b1[:])
	copy(olds[AgingBucketSlots:], b2[:])
	var sink uint64
	for n, old := range olds {
		b := i1
		if n >= AgingBucketSlots {
			b = i2
		}
		a := t.alt(b, old>>AgingTagBits)
		alts[n] = a
		sink += t.words[(a*t.bb)>>6] // start the loads together
	}
	_ = sink
	for n, a := range alts {
		b := i1
		if n >= AgingBucketSlots {
			b = i2
		}
		if ok, evicted := t.putFree(a, olds[n], ev); ok {
			if a == b {
				// putFree took a slot ev freed in b itself: old's slot
				// may have moved.
				t.replace(b, olds[n], v)
			} else {
				t.set(b, uint(n%AgingBucketSlots), v)
			}
			return true, evicted
		}
	}
	return false, false
}

func (sh *agingShard) next() uint64 {
	// xorshift64*
	x := sh.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	sh.rng = x
	return x * 0x2545f4914f6cdd1d
}

// walk is the cuckoo walk of place.
func (sh *agingShard) walk(t *agingTable, i1, i2, v uint64, ev evictPolicy) (ok, evicted bool) {
	var small [16]kick // most walks are short: no zeroing of AgingMaxKicks kicks
	path := small[:0]
	r := sh.next()
	i := i1
	if r&1 == 1 {
		i = i2
	}
	for n := range AgingMaxKicks {
		if n%16 == 15 {
			r = sh.next()
		}
		old := t.set(i, uint(r>>(2+2*(n%16))%AgingBucketSlots), v)
		path = append(path, kick{i, v, old})
		v = old
		i = t.alt(i, v>>AgingTagBits)
		if ok, evicted := t.putFree(i, v, ev); ok {
			return true, evicted
		}
	}
	for n := len(path) - 1; n >= 0; n-- {
		t.replace(path[n].i, path[n].in, path[n].out)
	}
	return false, false
}

// putFree writes v in a free slot of bucket i (see evictPolicy), if it
// has one: an empty one first.
func (t *agingTable) putFree(i, v uint64, ev evictPolicy) (ok, evicted bool) {
	if t.semi && t.addSemi(i, v) || !t.semi && t.addPacked(i, v) { // add, a call less
		return true, false
	}
	if ev.age == 0 {
		return false, false
	}
	b := t.load(i)
	for j, old := range b {
		if (ev.cur-old)&AgingEpochs >= ev.age {
			b.put(j, v)
			t.store(i, b)
			return true, true
		}
	}
	return false, false
}

// String describes the filter's shape.
func (f *AgingFilter) String() string {
	return fmt.Sprintf("aging filter: window %v (+%v), %d shards, f = %d, %v", f.cfg.Window, f.size.Epoch, len(f.shards), f.size.FingerprintBits, f.size.Layout)
}
