package handoff

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
)

// IDLen is the length of a node id.
const IDLen = 16

// ID is a globally unique node id (a server's host id, a client's random id).
type ID [IDLen]byte

// Compare orders ids as unsigned bytes (the order of the encoding).
func (id ID) Compare(o ID) int { return bytes.Compare(id[:], o[:]) }

// String renders the id as hex.
func (id ID) String() string { return fmt.Sprintf("%x", id[:]) }

// MaxTier is the largest tier a state may have.
const MaxTier = 255

// Clock is the pair of logical clocks (sck, dck) that, with the source and
// destination ids, identifies a slot or a token.
type Clock struct {
	Sck uint64 // the source's source clock when the slot was created
	Dck uint64 // the destination's destination clock when the slot was created
}

// Pair is the key of the tokens map: (source id, destination id).
type Pair struct {
	Src, Dst ID
}

// Token is an entry of the tokens map: the clocks of the slot it was created
// for and the value handed off in it.
type Token[V any] struct {
	Clock Clock // the slot's (sck, dck)
	N     V     // the value handed off
}

// State is one node's replica of a handoff counter over the value domain V:
// the record of Figure 3. Its methods modify the receiver in place (the
// paper's C_i := op(C_i)) and never modify or retain mutable parts of an
// argument. A State is not safe for concurrent use.
type State[V Value[V]] struct {
	id     ID
	tier   int
	val    V                 // maximum value that can be safely reported
	below  V                 // lower bound of values accounted in smaller tiers
	vals   map[ID]V          // self entry; other tier-0 entries at tier 0
	sck    uint64            // source clock, bumped when creating tokens
	dck    uint64            // destination clock, bumped when creating slots
	slots  map[ID]Clock      // source id → (sck, dck)
	tokens map[Pair]Token[V] // (src, dst) → ((sck, dck), n)
}

// Init returns init(id, tier) of Figure 4. It must be called once per
// globally unique id; a node that crashes resumes from its stored state, not
// from Init. It panics if tier is outside [0, MaxTier].
func Init[V Value[V]](id ID, tier int) *State[V] {
	if tier < 0 || tier > MaxTier {
		panic(fmt.Sprintf("handoff: tier %d outside [0, %d]", tier, MaxTier))
	}
	var zero V
	return &State[V]{
		id:     id,
		tier:   tier,
		vals:   map[ID]V{id: zero},
		slots:  map[ID]Clock{},
		tokens: map[Pair]Token[V]{},
	}
}

// ID returns the node's id.
func (s *State[V]) ID() ID { return s.id }

// Tier returns the node's tier.
func (s *State[V]) Tier() int { return s.tier }

// Fetch returns fetch(C_i) = val_i of Figure 4: the largest value this node
// can safely report.
func (s *State[V]) Fetch() V { return s.val }

// Inflate is the generalised incr of §8: val_i ⊕= d and vals_i(i) ⊕= d. For
// the counter, Inflate(1) is incr of Figure 4.
func (s *State[V]) Inflate(d V) {
	s.val = s.val.add(d)
	s.vals[s.id] = s.vals[s.id].add(d)
}

// Pending returns vals_i(i): the value accounted at this node that it has
// not yet handed off (moved into a token).
func (s *State[V]) Pending() V { return s.vals[s.id] }

// Slots returns the number of slots the node holds (handoffs it has offered
// to receive and not yet completed or discarded).
func (s *State[V]) Slots() int { return len(s.slots) }

// Tokens returns the number of tokens the node holds (its own, not yet known
// to be acquired, and cached ones).
func (s *State[V]) Tokens() int { return len(s.tokens) }

// Handed reports whether everything accounted at this node has been handed
// off and acknowledged: vals_i(i) = 𝟎 and no token left, the normal
// retirement condition of §7.4. A client that sees Handed may stop
// exchanging messages without losing anything it accounted.
func (s *State[V]) Handed() bool { return s.vals[s.id].isZero() && len(s.tokens) == 0 }

// TokenDestinations returns the destinations of the tokens s created itself
// and still holds, in id order: the nodes a client must exchange with again
// to finish its handoffs (§7.4's normal way: a token is dropped only on
// hearing from its destination).
func (s *State[V]) TokenDestinations() []ID {
	var out []ID
	for k := range s.tokens {
		if k.Src == s.id {
			out = append(out, k.Dst)
		}
	}
	slices.SortFunc(out, ID.Compare)
	return out
}

// Clone returns a deep copy of the state (values are immutable and shared).
func (s *State[V]) Clone() *State[V] {
	c := *s
	c.vals = maps.Clone(s.vals)
	c.slots = maps.Clone(s.slots)
	c.tokens = maps.Clone(s.tokens)
	return &c
}

// Merge applies merge(C_i, C_j) of Figure 4 with s as C_i and o as C_j: the
// composition fillslots, discardslot, createslot, mergevectors, aggregate,
// discardtokens, createtoken, cachetokens of Figure 5, each applied to the
// result of the previous one and to the received o. o may be a full state or
// a View of its sender for s. Merging a state that carries s's own id is the
// identity (the paper never sends a node its own state; see the package
// comment).
func (s *State[V]) Merge(o *State[V]) {
	if o == nil || o.id == s.id {
		return
	}
	s.fillslots(o)
	if mut != mutSkipDiscardSlot {
		s.discardslot(o)
	}
	s.createslot(o)
	s.mergevectors(o)
	s.aggregate(o)
	s.discardtokens(o)
	s.createtoken(o)
	s.cachetokens(o)
}

// fillslots acquires every token in o addressed to s whose clocks match s's
// slot for its source: the token's value is added to vals_i(i) and the slot
// is removed (filled).
func (s *State[V]) fillslots(o *State[V]) {
	self := s.vals[s.id]
	for k, t := range o.tokens {
		if k.Dst != s.id {
			continue
		}
		if ck, ok := s.slots[k.Src]; ok && ck == t.Clock {
			self = self.add(t.N)
			if mut != mutFillKeepsSlot {
				delete(s.slots, k.Src)
			}
		}
	}
	s.vals[s.id] = self
}

// discardslot drops s's slot for o's id if o's source clock has moved past
// the slot's: o can then never create the matching token.
func (s *State[V]) discardslot(o *State[V]) {
	if ck, ok := s.slots[o.id]; ok && o.sck > ck.Sck {
		delete(s.slots, o.id)
	}
}

// createslot opens a slot for a higher-tier o that has something to hand
// off and has no slot at s yet; the slot records o's source clock and s's
// destination clock, which is then bumped so the slot is never created again.
func (s *State[V]) createslot(o *State[V]) {
	if s.tier < o.tier && !o.vals[o.id].isZero() {
		if _, ok := s.slots[o.id]; !ok {
			s.slots[o.id] = Clock{Sck: o.sck, Dck: s.dck}
			if mut != mutSlotTwice {
				s.dck++
			}
		}
	}
}

// mergevectors takes the pointwise join of the version vectors of two tier-0
// nodes.
func (s *State[V]) mergevectors(o *State[V]) {
	if s.tier != 0 || o.tier != 0 {
		return
	}
	for k, v := range o.vals {
		if w, ok := s.vals[k]; ok {
			if mut == mutSumVectors {
				s.vals[k] = w.add(v)
			} else {
				s.vals[k] = w.join(v)
			}
		} else {
			s.vals[k] = v
		}
	}
}

// aggregate updates below and val from what o knows: below takes the value
// of a smaller-tier o (or the below of a same-tier o); val is the tier-0 sum
// of the version vector, or the best of the known bounds elsewhere. It
// departs from Figure 5 in one term, for safety: between two nodes of the
// same tier above 0, val is max(val_i, val_j, b + vals_i(i)), without the
// paper's + vals_j(j).
func (s *State[V]) aggregate(o *State[V]) {
	var b V
	switch {
	case s.tier == o.tier:
		b = s.below.join(o.below)
	case s.tier > o.tier:
		b = s.below.join(o.val)
	default:
		b = s.below
	}
	var v V
	switch {
	case s.tier == 0:
		v = s.sumVals()
	case s.tier == o.tier:
		// Figure 5 also adds vals_j(j) here; that over-counts when o is an
		// old state whose vals_j(j) has since been handed off and reached s
		// through below (see the package comment), so it is left out.
		v = s.val.join(o.val).join(b.add(s.vals[s.id]))
		if mut == mutPaperSameTierSum {
			v = v.join(b.add(s.vals[s.id]).add(o.vals[o.id]))
		}
	default:
		if mut == mutAggregateAddsPeer {
			v = s.val.join(b.add(s.vals[s.id]).add(o.vals[o.id]))
		} else {
			v = s.val.join(b.add(s.vals[s.id]))
		}
	}
	s.below, s.val = b, v
}

// discardtokens drops the tokens addressed to o that o has acquired: o has a
// slot for the token's source with a later destination clock, or no slot for
// it and a destination clock past the token's.
func (s *State[V]) discardtokens(o *State[V]) {
	for k, t := range s.tokens {
		if k.Dst != o.id {
			continue
		}
		var acquired bool
		if ck, ok := o.slots[k.Src]; ok {
			acquired = ck.Dck > t.Clock.Dck
		} else {
			acquired = o.dck > t.Clock.Dck
		}
		if mut == mutDiscardTokensEarly {
			if ck, ok := o.slots[k.Src]; ok {
				acquired = ck.Dck >= t.Clock.Dck
			}
		}
		if acquired {
			delete(s.tokens, k)
		}
	}
}

// createtoken moves vals_i(i) into a token for o's slot for s, if that slot
// carries s's current source clock, and bumps the source clock so no second
// token is ever created for the slot.
func (s *State[V]) createtoken(o *State[V]) {
	ck, ok := o.slots[s.id]
	if !ok || ck.Sck != s.sck {
		return
	}
	var zero V
	s.tokens[Pair{Src: s.id, Dst: o.id}] = Token[V]{Clock: ck, N: s.vals[s.id]}
	s.vals[s.id] = zero
	if mut != mutTokenTwice {
		s.sck++
	}
}

// cachetokens keeps, at a smaller-tier s, a copy of the tokens a higher-tier
// o created for other destinations, keeping the newer (larger source clock)
// of two tokens for the same pair, the local one on a tie.
func (s *State[V]) cachetokens(o *State[V]) {
	if s.tier >= o.tier {
		return
	}
	for k, t := range o.tokens {
		if k.Src != o.id || k.Dst == s.id {
			continue
		}
		if cur, ok := s.tokens[k]; !ok || cur.Clock.Sck < t.Clock.Sck {
			s.tokens[k] = t
		}
	}
}

// View returns view(C_i, j) of §7.3 for a peer with the given id and tier:
// the part of s that a merge at the peer reads, for sending to that peer
// instead of the full state. It keeps
//
//   - slots: only the peer's slot when the peer's tier is larger, none when
//     it is smaller, all when it is equal (the paper's view);
//   - tokens: those addressed to the peer, and s's own tokens when the peer's
//     tier is smaller (the only ones its cachetokens takes);
//   - vals: the whole vector between two tier-0 nodes, else the self entry.
//
// The view is for sending only: never adopt it as a node's own state.
func (s *State[V]) View(peer ID, peerTier int) *State[V] {
	v := &State[V]{
		id: s.id, tier: s.tier, val: s.val, below: s.below,
		sck: s.sck, dck: s.dck,
		slots:  map[ID]Clock{},
		tokens: map[Pair]Token[V]{},
	}
	if s.tier == 0 && peerTier == 0 {
		v.vals = maps.Clone(s.vals)
	} else {
		v.vals = map[ID]V{s.id: s.vals[s.id]}
	}
	switch {
	case s.tier < peerTier:
		if ck, ok := s.slots[peer]; ok {
			v.slots[peer] = ck
		}
	case s.tier == peerTier:
		v.slots = maps.Clone(s.slots)
	}
	for k, t := range s.tokens {
		if k.Dst == peer || (k.Src == s.id && peerTier < s.tier) {
			v.tokens[k] = t
		}
	}
	return v
}

// sumVals is the sum of the version vector: a tier-0 node's val.
func (s *State[V]) sumVals() V {
	var v V
	for _, n := range s.vals {
		v = v.add(n)
	}
	return v
}
