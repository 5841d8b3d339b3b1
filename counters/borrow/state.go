package borrow

import (
	"errors"
	"iter"
	"slices"
)

// Cell is the value a dot maps to: the pair B × N of §3.2, ordered as a
// product lattice (False < True, then the naturals). An active dot is one
// with Frozen false.
type Cell struct {
	Frozen bool
	Count  uint64
}

// join is the product-lattice join of two cells.
func (c Cell) join(o Cell) Cell {
	return Cell{Frozen: c.Frozen || o.Frozen, Count: max(c.Count, o.Count)}
}

// State is a replica of one Borrow-Counter: the causal DotMap from owner ids
// to the owner's dots (each mapped to a Cell) with its causal context, §3.2.
// Every dot of the store is in the context. Its methods modify the receiver
// in place and never retain mutable parts of an argument. A State is not
// safe for concurrent use. The zero State is ⊥, as New returns.
//
// The DotMap is one slice of (owner, dot, cell) in (owner, dot) order, the
// order of the encoding: a cell holds a dot per replica and per client
// active now (a few dozen), which a sorted slice decodes, encodes, lists
// and joins in one pass without hashing, sorting or an allocation per
// owner. An owner with no dot has no element, so the DotMap has no empty
// DotFun by construction.
type State struct {
	dots []Owned
	ctx  context
}

// New returns ⊥: no dots, an empty causal context.
func New() *State { return &State{} }

// Clone returns a deep copy of the state.
func (s *State) Clone() *State {
	return &State{dots: slices.Clone(s.dots), ctx: s.ctx.clone()}
}

// Equal reports whether two states are the same element of the lattice.
func (s *State) Equal(o *State) bool {
	return s.ctx.equal(o.ctx) && slices.Equal(s.dots, o.dots)
}

// cmpOwned orders the store: by owner, then dot.
func cmpOwned(a, b Owned) int {
	if c := a.Owner.Compare(b.Owner); c != 0 {
		return c
	}
	return a.Dot.Compare(b.Dot)
}

// find returns the index of owner's dot d, or where it would go.
func (s *State) find(owner ID, d Dot) (int, bool) {
	return slices.BinarySearchFunc(s.dots, Owned{Owner: owner, Dot: d}, cmpOwned)
}

// entry returns the bounds [lo, hi) of owner's dots in s.dots.
func (s *State) entry(owner ID) (lo, hi int) {
	lo, _ = slices.BinarySearchFunc(s.dots, owner, func(o Owned, id ID) int { return o.Owner.Compare(id) })
	hi = lo
	for hi < len(s.dots) && s.dots[hi].Owner == owner {
		hi++
	}
	return lo, hi
}

// put maps owner's dot d to c, inserting it in order if it is new.
func (s *State) put(owner ID, d Dot, c Cell) {
	i, ok := s.find(owner, d)
	if ok {
		s.dots[i].Cell = c
		return
	}
	s.dots = slices.Insert(s.dots, i, Owned{Owner: owner, Dot: d, Cell: c})
}

// Value returns value((m, c)) of §3.2: the sum of the counts of every dot,
// active or frozen.
func (s *State) Value() uint64 {
	var v uint64
	for _, o := range s.dots {
		v += o.Cell.Count
	}
	return v
}

// Create is create_i((m, c), j) of §3.2, made idempotent per (creator,
// owner): if owner's entry already holds a dot created by creator, active or
// frozen, that dot is returned and nothing changes; otherwise creator makes
// the dot next_creator(c), maps it to (False, 0) in owner's entry and adds
// it to the context. Create(i, i) is a permanent node's dot for itself.
//
// Only creator may call it, on its own durable state, and it must persist
// the state before the dot leaves the node (the answer to a borrow request):
// a creator that resumed from an older state could lend the same dot twice.
func (s *State) Create(creator, owner ID) Dot {
	if d, ok := s.dotBy(creator, owner); ok && mut != mutCreateNotIdempotent {
		return d
	}
	d := Dot{Creator: creator, Seq: s.ctx.max(creator) + 1}
	s.put(owner, d, Cell{})
	s.ctx.add(d)
	return d
}

// ErrLateBorrow is returned by Lend for a client that has retired.
var ErrLateBorrow = errors.New("borrow: the client has retired; a late borrow request is refused")

// Lend is Create for a client's borrow request: it refuses with ErrLateBorrow
// when the state shows owner retired (Retired), and otherwise returns
// Create(creator, owner). A client asks for loans only before it retires
// (Client.Retire refuses while an answer is unknown, and a retired Client
// asks no more), so a request that arrives once its retirement is here is
// a late copy: a new dot would stay active for ever, since only its owner
// freezes a dot. Once the client's frozen dots are transferred away the
// state no longer shows the retirement; whoever serves borrow requests
// must then remember it for as long as a request may be late
// (coltype/borrowcol keeps the retired clients it saw for a while).
func (s *State) Lend(creator, owner ID) (Dot, error) {
	if s.Retired(owner) {
		return Dot{}, ErrLateBorrow
	}
	return s.Create(creator, owner), nil
}

// Retired reports whether owner has a frozen dot in the store: it froze
// its dots, so it has retired (a permanent node never freezes its own).
func (s *State) Retired(owner ID) bool {
	lo, hi := s.entry(owner)
	for _, o := range s.dots[lo:hi] {
		if o.Cell.Frozen {
			return true
		}
	}
	return false
}

// dotBy returns the smallest dot of owner's entry created by creator.
func (s *State) dotBy(creator, owner ID) (Dot, bool) {
	lo, hi := s.entry(owner)
	for _, o := range s.dots[lo:hi] {
		if o.Dot.Creator == creator {
			return o.Dot, true // dots are in (creator, seq) order
		}
	}
	return Dot{}, false
}

// Lent returns the dot owner holds from creator in this state, if any: what
// a creator answers to a repeated borrow request without changing anything.
func (s *State) Lent(creator, owner ID) (Dot, bool) { return s.dotBy(creator, owner) }

// ErrNoActiveDot is returned by Inc when the node has no active dot.
var ErrNoActiveDot = errors.New("borrow: no active dot to increment")

// Inc is inc_i((m, c), n) of §3.2: it adds n to an active dot of i's entry.
// The paper picks one at random; this package picks the smallest active dot
// i created itself, else the smallest active dot, so that a permanent node
// always counts into the dot it created for itself. It is for a node
// counting on its own state (a permanent node, or the leader counting a
// plain update); a client counts with Client instead.
func (s *State) Inc(i ID, n uint64) error {
	k, ok := s.activeDot(i)
	if !ok {
		return ErrNoActiveDot
	}
	s.dots[k].Cell.Count += n
	return nil
}

// activeDot returns the index in s.dots of the dot Inc counts into: the
// smallest active dot of i's entry that i created, else its smallest
// active dot.
func (s *State) activeDot(i ID) (int, bool) {
	lo, hi := s.entry(i)
	best := -1
	for k := lo; k < hi; k++ {
		o := s.dots[k]
		if o.Cell.Frozen {
			continue
		}
		if o.Dot.Creator == i {
			return k, true
		}
		if best < 0 {
			best = k
		}
	}
	return best, best >= 0
}

// Retire is retire_i((m, c)) of §3.2: every active dot of i's entry is
// frozen. A client retires with Client.Retire, which builds the same frozen
// cells as one write.
func (s *State) Retire(i ID) {
	lo, hi := s.entry(i)
	for k := lo; k < hi; k++ {
		s.dots[k].Cell.Frozen = true
	}
}

// Transfer is transfer_i((m, c), j) of §3.2 restricted to i's own
// creations: the frozen dots of j's entry that i created are removed from
// the store (they stay in the context, so every replica drops them on the
// next join) and the sum of their counts is added to i's own active dot,
// which is created first if i has none. It returns the amount moved. The
// paper's rule takes every frozen dot of j whoever created it; two creators
// would then both fold the same increments (see the package comment).
//
// Only i calls it, on its own state; j = i does nothing.
func (s *State) Transfer(i, j ID) uint64 {
	if i == j {
		return 0
	}
	return s.transfer(i, func(owner ID) bool { return owner == j })
}

// TransferAll applies Transfer(i, j) for every owner j ≠ i and returns the
// total moved.
func (s *State) TransferAll(i ID) uint64 {
	return s.transfer(i, func(owner ID) bool { return owner != i })
}

// transfer moves the frozen dots i created of every owner from which
// picks (never i) into i's own active dot, as Transfer does owner by
// owner: the counts add up the same in any order, and i's dot is created
// once, before the first fold.
func (s *State) transfer(i ID, from func(ID) bool) uint64 {
	var n uint64
	moved := false
	s.dots = slices.DeleteFunc(s.dots, func(o Owned) bool {
		if o.Owner == i || !from(o.Owner) {
			return false
		}
		if !o.Cell.Frozen && mut != mutTransferActive {
			return false
		}
		if o.Dot.Creator != i && mut != mutUnrestrictedTransfer {
			return false
		}
		n += o.Cell.Count
		moved = true
		return true
	})
	if !moved {
		return 0
	}
	if _, ok := s.activeDot(i); !ok {
		s.Create(i, i)
	}
	// Cannot fail: i has an active dot now.
	_ = s.Inc(i, n)
	return n
}

// Join sets s to s ⊔ o, the join of Figure 1 for Causal⟨DotMap⟨I,
// DotFun⟨B × N⟩⟩⟩: per owner, a dot present on both sides maps to the join
// of its cells; a dot present on one side only survives if the other side's
// context does not hold it (else the other side has seen it and dropped it,
// which only a transfer does); the contexts are united and empty entries
// disappear. o is any state or write: a full state, a client's write, a
// retirement.
func (s *State) Join(o *State) {
	ignore := mut == mutJoinIgnoresContext
	// Both stores are in (owner, dot) order: one merge pass. Most joins
	// raise a dot or two of a store that holds dozens (a client's write, a
	// state seen before), which is done in place; out is only built from
	// the first dot dropped or added on.
	var out []Owned
	grown := false
	grow := func(i int) {
		if !grown {
			out = append(make([]Owned, 0, len(s.dots)+len(o.dots)), s.dots[:i]...)
			grown = true
		}
	}
	i, j := 0, 0
	for i < len(s.dots) || j < len(o.dots) {
		var c int
		switch {
		case j == len(o.dots):
			c = -1
		case i == len(s.dots):
			c = 1
		default:
			c = cmpOwned(s.dots[i], o.dots[j])
		}
		switch {
		case c == 0:
			x := s.dots[i]
			x.Cell = x.Cell.join(o.dots[j].Cell)
			if grown {
				out = append(out, x)
			} else {
				s.dots[i] = x
			}
			i, j = i+1, j+1
		case c < 0: // in s only: o saw it and dropped it, or never saw it
			if o.ctx.contains(s.dots[i].Dot) && !ignore {
				grow(i)
			} else if grown {
				out = append(out, s.dots[i])
			}
			i++
		default: // in o only: s saw it and dropped it, or never saw it
			if !s.ctx.contains(o.dots[j].Dot) || ignore {
				grow(i)
				out = append(out, o.dots[j])
			}
			j++
		}
	}
	if grown {
		s.dots = out
	}
	s.ctx.union(o.ctx)
}

// Owned is one dot of the store with its owner, as Dots lists them.
type Owned struct {
	Owner ID
	Dot   Dot
	Cell  Cell
}

// Dots lists every dot of the store in (owner, dot) order, in a slice the
// caller owns.
func (s *State) Dots() []Owned { return slices.Clone(s.dots) }

// All yields every dot of the store in (owner, dot) order without copying
// the store; the state must not change while it runs.
func (s *State) All() iter.Seq[Owned] {
	return func(yield func(Owned) bool) {
		for _, o := range s.dots {
			if !yield(o) {
				return
			}
		}
	}
}

// Borrowed returns the number of dots in the store lent to another node
// (owner ≠ creator): the entries a retired client leaves until its creator
// transfers them, and what garbage collection must bring back to 0.
func (s *State) Borrowed() int {
	n := 0
	for _, o := range s.dots {
		if o.Dot.Creator != o.Owner {
			n++
		}
	}
	return n
}

// Seen reports whether d is in the causal context: some state joined into
// this one created or learnt it. A dot seen but not in the store was
// transferred by its creator.
func (s *State) Seen(d Dot) bool { return s.ctx.contains(d) }

// Get returns the cell owner's entry maps d to, if any.
func (s *State) Get(owner ID, d Dot) (Cell, bool) {
	i, ok := s.find(owner, d)
	if !ok {
		return Cell{}, false
	}
	return s.dots[i].Cell, true
}

// Write returns the state that carries one dot of one owner and nothing
// else: ({owner ↦ {d ↦ c}}, {d}). It is the delta a client sends for its dot
// (its cumulative count, or its frozen final count), and joining it
// anywhere, any number of times, in any order with other writes of the same
// dot, is harmless. A permanent node's dot never travels this way once
// anything was transferred into it (see the package comment); its full
// state does.
func Write(owner ID, d Dot, c Cell) *State {
	s := &State{dots: []Owned{{Owner: owner, Dot: d, Cell: c}}}
	s.ctx.add(d)
	return s
}
