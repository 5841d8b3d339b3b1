package handoff

// Counter is the handoff counter of §5: State over Count with the paper's
// incr and fetch. The embedded State gives Inflate, Pending, Slots, Tokens,
// Handed, ID, Tier and the binary encoding.
type Counter struct {
	State[Count]
}

// NewCounter returns init(id, tier) for a counter.
func NewCounter(id ID, tier int) *Counter { return &Counter{*Init[Count](id, tier)} }

// Incr is incr of Figure 4.
func (c *Counter) Incr() { c.State.Inflate(1) }

// Add counts n increments at once (n applications of Incr).
func (c *Counter) Add(n uint64) { c.State.Inflate(Count(n)) }

// Fetch is fetch of Figure 4.
func (c *Counter) Fetch() uint64 { return uint64(c.State.Fetch()) }

// Merge is merge of Figure 4, o being a received state or view.
func (c *Counter) Merge(o *Counter) { c.State.Merge(&o.State) }

// View is view of §7.3 for a peer of the given id and tier.
func (c *Counter) View(peer ID, peerTier int) *Counter {
	return &Counter{*c.State.View(peer, peerTier)}
}

// Clone returns a deep copy.
func (c *Counter) Clone() *Counter { return &Counter{*c.State.Clone()} }

// Map is the map of counters of §8.1: one handoff state holding a group of
// named counters, so the state's overhead is shared by the group.
type Map struct {
	State[Counts]
}

// NewMap returns init(id, tier) for a map of counters.
func NewMap(id ID, tier int) *Map { return &Map{*Init[Counts](id, tier)} }

// Incr is incr(C_i, c) of §8.1: counter c gains one.
func (m *Map) Incr(c string) { m.Add(c, 1) }

// Add counts n increments of counter c (nothing when n is 0).
func (m *Map) Add(c string, n uint64) {
	if n != 0 {
		m.State.Inflate(Counts{c: n})
	}
}

// Fetch is fetch(C_i, c) of §8.1: val_i(c).
func (m *Map) Fetch(c string) uint64 { return m.State.Fetch()[c] }

// FetchAll returns every counter's value. The map must not be modified.
func (m *Map) FetchAll() Counts { return m.State.Fetch() }

// Merge is merge of Figure 4 over Counts.
func (m *Map) Merge(o *Map) { m.State.Merge(&o.State) }

// View is view of §7.3 for a peer of the given id and tier.
func (m *Map) View(peer ID, peerTier int) *Map { return &Map{*m.State.View(peer, peerTier)} }

// Clone returns a deep copy.
func (m *Map) Clone() *Map { return &Map{*m.State.Clone()} }

// PNCounter is the PN-counter of §8.2: increments and decrements counted as
// the p and n entries of a map of counters, fetch being their difference.
type PNCounter struct {
	State[PN]
}

// NewPNCounter returns init(id, tier) for a PN-counter.
func NewPNCounter(id ID, tier int) *PNCounter { return &PNCounter{*Init[PN](id, tier)} }

// Incr is incr(C_i) = incr(C_i, p) of §8.2.
func (c *PNCounter) Incr() { c.State.Inflate(PN{P: 1}) }

// Decr is decr(C_i) = incr(C_i, n) of §8.2.
func (c *PNCounter) Decr() { c.State.Inflate(PN{N: 1}) }

// Add applies a signed delta: |d| increments or decrements.
func (c *PNCounter) Add(d int64) {
	switch {
	case d > 0:
		c.State.Inflate(PN{P: uint64(d)})
	case d < 0:
		c.State.Inflate(PN{N: uint64(-(d + 1)) + 1})
	}
}

// Fetch is fetch(C_i, p) − fetch(C_i, n) of §8.2 (wrapping like int64).
func (c *PNCounter) Fetch() int64 {
	v := c.State.Fetch()
	return int64(v.P - v.N)
}

// Merge is merge of Figure 4 over PN.
func (c *PNCounter) Merge(o *PNCounter) { c.State.Merge(&o.State) }

// View is view of §7.3 for a peer of the given id and tier.
func (c *PNCounter) View(peer ID, peerTier int) *PNCounter {
	return &PNCounter{*c.State.View(peer, peerTier)}
}

// Clone returns a deep copy.
func (c *PNCounter) Clone() *PNCounter { return &PNCounter{*c.State.Clone()} }
