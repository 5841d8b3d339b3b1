package fbf

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bitset"
)

// slot is one constituent Bloom filter. Its bits are set with atomic OR and
// read with atomic loads; its other fields are guarded by Filter.mu.
type slot struct {
	bits  *bitset.BitSet
	words []uint64 // bits' backing words
	ids   atomic.Int64
	// noFuture marks the initial present filter, which was never the future
	// filter: it holds no future copies, so it never needs the "alone"
	// check. Immutable.
	noFuture bool
	_        [40]byte // keep the hot counter off the next slot's line

	// guarded by Filter.mu
	open     bool  // still the future filter (receives future copies)
	closedAt int64 // unix ns at which it stopped being the future filter
}

// generation is an immutable list of the real constituent filters, future
// first, oldest last, followed by pad placeholder filters: empty filters
// appended by a scale-up that are never written nor probed.
type generation struct {
	slots []*slot
	pad   int
}

// filters returns the number of constituent filters, placeholders included
// (N+2 in steady state).
func (g *generation) filters() int { return len(g.slots) + g.pad }

// paddedMutex is a mutex alone on its cache line.
type paddedMutex struct {
	sync.Mutex
	_ [56]byte
}

// stripes serializes TestAndAdd calls on the same id (by hash) across all
// filters; calls on different ids almost never meet.
var stripes [256]paddedMutex

// Filter is a Forgetful Bloom Filter. Its methods are safe for concurrent
// use. Create one with New.
type Filter struct {
	cfg    Config
	m      uint64
	k      uint64
	nwords int

	gen      atomic.Pointer[generation]
	deadline atomic.Int64 // unix ns of the next refresh or adaptation
	capacity atomic.Int64 // ids in the present filter that trigger an early refresh
	running  atomic.Bool  // background refresher started

	mu          sync.Mutex    // serializes changes of structure and the fields below
	past        int           // nominal N
	period      time.Duration // t
	now         int64         // latest time advanced to
	periodStart int64         // time of the latest refresh (or Start)
	nextRefresh int64
	nextAdapt   int64
	lastFPP     float64
	counters    Counters

	runMu sync.Mutex // guards stop and done
	stop  chan struct{}
	done  chan struct{}
}

// Counters counts the filter's structural events.
type Counters struct {
	Refreshes      uint64 // refreshes, scheduled and early
	EarlyRefreshes uint64 // refreshes triggered by the capacity guard
	ScaleUps       uint64 // adaptation steps that grew N or shortened t
	ScaleDowns     uint64 // adaptation steps that shrank N or lengthened t
	Saturated      uint64 // scale-ups wanted but impossible within the bounds
	DelayedDrops   uint64 // refreshes that kept a filter younger than RetryHorizon
}

// New returns an empty filter, or an error if cfg is invalid.
func New(cfg Config) (*Filter, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	f := &Filter{
		cfg:    c,
		m:      uint64(c.Bits),
		k:      uint64(c.Hashes),
		nwords: int((uint64(c.Bits) + 63) / 64),
		past:   c.Past,
		period: c.Period,
	}
	start := c.Start.UnixNano()
	f.now = start
	f.periodStart = start
	f.nextRefresh = start + int64(c.Period)
	f.nextAdapt = start + int64(c.AdaptEvery)
	fut, pres := f.newSlot(), f.newSlot()
	fut.open = true
	pres.closedAt = start
	pres.noFuture = true
	f.gen.Store(&generation{slots: []*slot{fut, pres}, pad: c.Past})
	f.setCapacity()
	f.publishDeadline()
	return f, nil
}

func (f *Filter) newSlot() *slot {
	b := bitset.New(uint(f.m))
	return &slot{bits: b, words: b.Words()}
}

func (f *Filter) adaptive() bool { return f.cfg.TargetFPP > 0 }

// setCapacity computes the capacity guard: the number of ids l at which
// FilterFPP(m, k, l) = CapacityFraction × TargetFPP.
func (f *Filter) setCapacity() {
	if !f.adaptive() || f.cfg.CapacityFraction < 0 {
		f.capacity.Store(math.MaxInt64)
		return
	}
	c := f.cfg.CapacityFraction * f.cfg.TargetFPP
	l := -float64(f.m) / float64(f.k) * math.Log1p(-math.Pow(c, 1/float64(f.k)))
	f.capacity.Store(max(1, int64(l)))
}

// Config returns the filter's configuration, defaults filled in.
func (f *Filter) Config() Config { return f.cfg }

// ---- membership ----

// has reports whether all k bits of h are set in s.
func (f *Filter) has(s *slot, h Hash) bool {
	for i := uint64(0); i < f.k; i++ {
		p := h.position(i, f.m)
		if atomic.LoadUint64(&s.words[p>>6])&(1<<(p&63)) == 0 {
			return false
		}
	}
	return true
}

// set sets the k bits of h in s (skipping bits already set, so that hot
// words are not written needlessly) and counts the id.
func (f *Filter) set(s *slot, h Hash) int64 {
	for i := uint64(0); i < f.k; i++ {
		p := h.position(i, f.m)
		w := &s.words[p>>6]
		mask := uint64(1) << (p & 63)
		if atomic.LoadUint64(w)&mask == 0 {
			atomic.OrUint64(w, mask)
		}
	}
	return s.ids.Add(1)
}

// containsIn is the optimized check (Algorithm 2, corrected): future alone,
// any consecutive pair (i, i+1) with i ≥ 1, or the oldest real filter alone
// (unless it never was the future filter and so holds only present copies,
// whose future copies are in the filter before it).
func (f *Filter) containsIn(g *generation, h Hash) bool {
	s := g.slots
	if f.has(s[0], h) {
		return true
	}
	last := len(s) - 1
	prev := false
	for i := 1; i <= last; i++ {
		cur := f.has(s[i], h)
		if cur && (prev || (i == last && !s[i].noFuture)) {
			return true
		}
		prev = cur
	}
	return false
}

// Contains reports whether id is present, with the optimized check.
func (f *Filter) Contains(id []byte) bool { return f.ContainsHash(HashID(id)) }

// ContainsHash is Contains for an id hashed with HashID.
func (f *Filter) ContainsHash(h Hash) bool {
	f.autoAdvance()
	return f.containsIn(f.gen.Load(), h)
}

// ContainsSimple reports whether id is in any constituent filter (the
// paper's simple check, with a higher false-positive rate).
func (f *Filter) ContainsSimple(id []byte) bool { return f.ContainsSimpleHash(HashID(id)) }

// ContainsSimpleHash is ContainsSimple for an id hashed with HashID.
func (f *Filter) ContainsSimpleHash(h Hash) bool {
	f.autoAdvance()
	for _, s := range f.gen.Load().slots {
		if f.has(s, h) {
			return true
		}
	}
	return false
}

// TestAndAdd reports whether id was already present and, if it was not,
// inserts it (into the future and present filters), in one atomic step: of
// concurrent calls with the same id at most one returns false.
func (f *Filter) TestAndAdd(id []byte) (present bool) { return f.TestAndAddHash(HashID(id)) }

// TestAndAddHash is TestAndAdd for an id hashed with HashID.
func (f *Filter) TestAndAddHash(h Hash) (present bool) {
	f.autoAdvance()
	mu := &stripes[h.H1>>56]
	mu.Lock()
	g := f.gen.Load()
	if f.containsIn(g, h) {
		mu.Unlock()
		return true
	}
	f.set(g.slots[0], h)
	n := f.set(g.slots[1], h)
	for {
		// A refresh published a new generation while we inserted: the id
		// must be in the new future and present filters too, or it would
		// age one period early. (Bits left in the older filter are harmless.)
		g2 := f.gen.Load()
		if g2 == g {
			break
		}
		if g2.slots[0] != g.slots[0] && g2.slots[0] != g.slots[1] {
			f.set(g2.slots[0], h)
		}
		if g2.slots[1] != g.slots[0] && g2.slots[1] != g.slots[1] {
			n = f.set(g2.slots[1], h)
		}
		g = g2
	}
	mu.Unlock()
	if n >= f.capacity.Load() {
		f.capacityRefresh(g)
	}
	return false
}

// ---- time ----

func (f *Filter) autoAdvance() {
	if !f.cfg.AutoAdvance {
		return
	}
	if now := f.cfg.Clock.Now().UnixNano(); now >= f.deadline.Load() {
		f.mu.Lock()
		f.advanceLocked(now)
		f.mu.Unlock()
	}
}

// Advance moves the filter's time to now, performing in time order every
// refresh (every t) and adaptation step (every AdaptEvery) that falls due at
// or before now. Time going backwards is ignored.
func (f *Filter) Advance(now time.Time) {
	f.mu.Lock()
	f.advanceLocked(now.UnixNano())
	f.mu.Unlock()
}

// Tick is Advance(Clock.Now()).
func (f *Filter) Tick() { f.Advance(f.cfg.Clock.Now()) }

// Refresh performs one refresh now (at the filter's current time) and
// restarts the period. Ids are still never dropped before RetryHorizon, but
// extra refreshes shorten the (N+1)·t window of the ids already inserted.
func (f *Filter) Refresh() {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := f.timeLocked()
	f.refreshLocked(at)
	f.nextRefresh = at + int64(f.period)
	f.publishDeadline()
}

// timeLocked is the filter's notion of now for unscheduled events: the
// clock when the filter follows it, otherwise the latest time advanced to.
func (f *Filter) timeLocked() int64 {
	if f.cfg.AutoAdvance || f.running.Load() {
		if c := f.cfg.Clock.Now().UnixNano(); c > f.now {
			f.advanceLocked(c)
		}
	}
	return f.now
}

func (f *Filter) publishDeadline() {
	d := f.nextRefresh
	if f.adaptive() && f.nextAdapt < d {
		d = f.nextAdapt
	}
	f.deadline.Store(d)
}

func (f *Filter) advanceLocked(now int64) {
	if now < f.now {
		return
	}
	for {
		ev, refresh := f.nextRefresh, true
		if f.adaptive() && f.nextAdapt < ev {
			ev, refresh = f.nextAdapt, false
		}
		if ev > now {
			break
		}
		if f.skipIdleLocked(now) {
			continue
		}
		if refresh {
			f.refreshLocked(ev)
			if f.adaptive() {
				f.adaptLocked(ev)
				if f.nextAdapt <= ev {
					f.nextAdapt += int64(f.cfg.AdaptEvery)
				}
			}
			f.nextRefresh = ev + int64(f.period)
		} else {
			f.adaptLocked(ev)
			f.nextAdapt = ev + int64(f.cfg.AdaptEvery)
		}
	}
	f.now = now
	f.publishDeadline()
}

// skipIdleLocked jumps over the events of a long idle stretch in O(1): when
// every filter is empty and adaptation (if any) has nothing left to change,
// refreshing changes nothing but the schedule.
func (f *Filter) skipIdleLocked(now int64) bool {
	t := int64(f.period)
	if now-f.nextRefresh < 4*t {
		return false
	}
	g := f.gen.Load()
	for _, s := range g.slots {
		if s.ids.Load() != 0 {
			return false
		}
	}
	if f.adaptive() {
		if n, p := f.scaleDownStep(); n != f.past || p != f.period {
			return false
		}
		if g.filters() != f.past+2 {
			return false
		}
	}
	skip := (now - f.nextRefresh) / t
	f.nextRefresh += skip * t
	f.periodStart = f.nextRefresh - t
	f.counters.Refreshes += uint64(skip)
	if f.adaptive() && now-f.nextAdapt > 0 {
		a := int64(f.cfg.AdaptEvery)
		f.nextAdapt += (now - f.nextAdapt) / a * a
	}
	fut, pres := f.newSlot(), f.newSlot()
	fut.open = true
	pres.closedAt = f.periodStart
	pres.noFuture = true
	f.gen.Store(&generation{slots: []*slot{fut, pres}, pad: f.past})
	return true
}

// refreshLocked drops the oldest filter, shifts the others and adds a new
// empty future filter, at time at.
func (f *Filter) refreshLocked(at int64) {
	g := f.gen.Load()
	old := g.slots
	old[0].open = false
	old[0].closedAt = at
	ns := f.newSlot()
	ns.open = true
	slots := make([]*slot, 0, len(old)+1)
	slots = append(slots, ns)
	slots = append(slots, old...)
	ng := f.trim(&generation{slots: slots, pad: g.pad}, at)
	f.gen.Store(ng)
	f.periodStart = at
	f.counters.Refreshes++
}

// trim drops placeholders, then the oldest real filters, while there are
// more than N+2 filters — but never a filter that may hold an id inserted
// less than RetryHorizon before at.
func (f *Filter) trim(g *generation, at int64) *generation {
	for g.filters() > f.past+2 && g.pad > 0 {
		g.pad--
	}
	for g.filters() > f.past+2 && len(g.slots) > 2 {
		o := g.slots[len(g.slots)-1]
		if o.open || (o.ids.Load() != 0 && o.closedAt+int64(f.cfg.RetryHorizon) > at) {
			f.counters.DelayedDrops++
			break
		}
		g.slots = g.slots[:len(g.slots)-1]
	}
	return g
}

// capacityRefresh ends the period early when the present filter of g is
// full (see Config.CapacityFraction).
func (f *Filter) capacityRefresh(g *generation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := f.timeLocked()
	cur := f.gen.Load()
	if cur.slots[1] != g.slots[1] || cur.slots[1].ids.Load() < f.capacity.Load() {
		return // someone refreshed already
	}
	// Refresh only if the filter count stays within MaxPast+2 (the oldest
	// can be dropped, or there is room for one more filter).
	o := cur.slots[len(cur.slots)-1]
	droppable := cur.pad > 0 || (!o.open && (o.ids.Load() == 0 || o.closedAt+int64(f.cfg.RetryHorizon) <= at))
	if !droppable && cur.filters() >= f.cfg.MaxPast+2 {
		f.counters.Saturated++
		return
	}
	if !droppable {
		// keep the window: one more filter for now
		f.past = min(f.past+1, f.cfg.MaxPast)
	}
	f.refreshLocked(at)
	f.counters.EarlyRefreshes++
	f.nextRefresh = at + int64(f.period)
	f.publishDeadline()
}

// ---- adaptation ----

func ceilDiv(a time.Duration, b int) time.Duration {
	return (a + time.Duration(b) - 1) / time.Duration(b)
}

// scaleDownStep returns the (N, t) a scale-down would move to.
func (f *Filter) scaleDownStep() (int, time.Duration) {
	n, t := f.past, f.period
	nn := max(n-1, f.cfg.MinPast)
	nt := min(t+f.cfg.PeriodStep, f.cfg.MaxPeriod)
	if window(nn, nt) < f.cfg.RetryHorizon {
		nn = n
	}
	return nn, nt
}

// adaptLocked is Algorithm 3 with the window floor.
func (f *Filter) adaptLocked(at int64) {
	g := f.gen.Load()
	est := f.estimate(g)
	f.lastFPP = est
	target := f.cfg.TargetFPP
	switch {
	case est >= f.cfg.UpperFraction*target:
		n, t := f.past, f.period
		nn := min(2*(n+2)-2, f.cfg.MaxPast)
		nt := t - f.cfg.PeriodStep
		floor := max(f.cfg.MinPeriod, ceilDiv(f.cfg.RetryHorizon, nn+1))
		nt = min(max(nt, floor), t)
		if nn == n && nt == t {
			f.counters.Saturated++
			return
		}
		f.past, f.period = nn, nt
		if add := nn + 2 - g.filters(); add > 0 {
			f.gen.Store(&generation{slots: g.slots, pad: g.pad + add})
		}
		f.counters.ScaleUps++
	case est <= f.cfg.LowerFraction*target:
		nn, nt := f.scaleDownStep()
		if nn == f.past && nt == f.period {
			return
		}
		f.past, f.period = nn, nt
		ng := f.trim(&generation{slots: g.slots, pad: g.pad}, at)
		if ng.filters() != g.filters() {
			f.gen.Store(ng)
		}
		f.counters.ScaleDowns++
	}
}

// ---- analysis ----

func (f *Filter) popcount(s *slot) uint {
	n := 0
	for i := range s.words {
		n += bits.OnesCount64(atomic.LoadUint64(&s.words[i]))
	}
	return uint(n)
}

// probabilities returns the per-filter false-positive probabilities of the
// real filters of g, from the id counts or from the set bits.
func (f *Filter) probabilities(g *generation, fromBits bool) []float64 {
	ps := make([]float64, len(g.slots))
	for i, s := range g.slots {
		if fromBits {
			ps[i] = FilterFPPFromBits(f.cfg.Bits, f.cfg.Hashes, f.popcount(s))
		} else {
			ps[i] = FilterFPP(f.cfg.Bits, f.cfg.Hashes, float64(s.ids.Load()))
		}
	}
	return ps
}

func (f *Filter) estimate(g *generation) float64 {
	return f.estimateFrom(g, f.cfg.EstimateFromBits)
}

// estimateFrom is Eq. 3 over the real filters; when the oldest was never the
// future filter it has no "alone" term (the check does not test it alone),
// only its pair with the filter before it.
func (f *Filter) estimateFrom(g *generation, fromBits bool) float64 {
	ps := f.probabilities(g, fromBits)
	if g.slots[len(g.slots)-1].noFuture {
		return FBFFPP(append(ps, 0))
	}
	return FBFFPP(ps)
}

// EstimatedFPP returns Equation (3) for the current state: the probability
// that the optimized check reports a never-inserted id as present. It uses
// the id counts, or the set bits if Config.EstimateFromBits.
func (f *Filter) EstimatedFPP() float64 { return f.estimate(f.gen.Load()) }

// EstimatedFPPFromBits returns Equation (3) with each filter's probability
// computed from its set bits, (set/m)^k.
func (f *Filter) EstimatedFPPFromBits() float64 {
	return f.estimateFrom(f.gen.Load(), true)
}

// freshCounts returns, for each real filter, the number of ids whose newest
// copy it holds: filter j holds fresh[j] + fresh[j−1] ids.
func freshCounts(g *generation) []float64 {
	out := make([]float64, len(g.slots))
	prev := int64(0)
	for i, s := range g.slots {
		prev = max(0, s.ids.Load()-prev)
		out[i] = float64(prev)
	}
	return out
}

// EstimatedFPPCorrelated returns FBFFPPCorrelated for the current state: a
// closer estimate than Eq. 3 when the filters are loaded (see the package
// comment and the fbf experiments).
func (f *Filter) EstimatedFPPCorrelated() float64 {
	return FBFFPPCorrelated(f.cfg.Bits, f.cfg.Hashes, freshCounts(f.gen.Load()))
}

// EstimatedFPPSimple returns the analytic false-positive probability of the
// simple check, 1 − Π(1 − pᵢ), from the id counts.
func (f *Filter) EstimatedFPPSimple() float64 {
	return SimpleFPP(f.probabilities(f.gen.Load(), false))
}

func loadWord(w *uint64) uint64 { return atomic.LoadUint64(w) }
