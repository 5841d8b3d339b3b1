package borrow

import (
	"errors"
	"maps"
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

// dotFun is DotFun⟨B × N⟩ of §3.2: the dots of one owner.
type dotFun map[Dot]Cell

// State is a replica of one Borrow-Counter: the causal DotMap from owner ids
// to the owner's dots (each mapped to a Cell) with its causal context, §3.2.
// Every dot of the store is in the context. Its methods modify the receiver
// in place and never retain mutable parts of an argument. A State is not
// safe for concurrent use. The zero State is not usable; call New.
type State struct {
	owners map[ID]dotFun // DotMap: owner → DotFun; no empty DotFun
	ctx    context
}

// New returns ⊥: no dots, an empty causal context.
func New() *State {
	return &State{owners: map[ID]dotFun{}, ctx: context{}}
}

// Clone returns a deep copy of the state.
func (s *State) Clone() *State {
	c := &State{owners: make(map[ID]dotFun, len(s.owners)), ctx: s.ctx.clone()}
	for id, f := range s.owners {
		c.owners[id] = maps.Clone(f)
	}
	return c
}

// Equal reports whether two states are the same element of the lattice.
func (s *State) Equal(o *State) bool {
	return s.ctx.equal(o.ctx) && maps.EqualFunc(s.owners, o.owners, func(a, b dotFun) bool { return maps.Equal(a, b) })
}

// Value returns value((m, c)) of §3.2: the sum of the counts of every dot,
// active or frozen.
func (s *State) Value() uint64 {
	var v uint64
	for _, f := range s.owners {
		for _, c := range f {
			v += c.Count
		}
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
	f := s.owners[owner]
	if f == nil {
		f = dotFun{}
		s.owners[owner] = f
	}
	f[d] = Cell{}
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
	for _, c := range s.owners[owner] {
		if c.Frozen {
			return true
		}
	}
	return false
}

// dotBy returns the smallest dot of owner's entry created by creator.
func (s *State) dotBy(creator, owner ID) (Dot, bool) {
	var best Dot
	found := false
	for d := range s.owners[owner] {
		if d.Creator == creator && (!found || d.Seq < best.Seq) {
			best, found = d, true
		}
	}
	return best, found
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
	d, ok := s.activeDot(i)
	if !ok {
		return ErrNoActiveDot
	}
	c := s.owners[i][d]
	c.Count += n
	s.owners[i][d] = c
	return nil
}

func (s *State) activeDot(i ID) (Dot, bool) {
	var best Dot
	found, own := false, false
	for d, c := range s.owners[i] {
		if c.Frozen {
			continue
		}
		dOwn := d.Creator == i
		switch {
		case !found, dOwn && !own, dOwn == own && d.Compare(best) < 0:
			best, found, own = d, true, dOwn
		}
	}
	return best, found
}

// Retire is retire_i((m, c)) of §3.2: every active dot of i's entry is
// frozen. A client retires with Client.Retire, which builds the same frozen
// cells as one write.
func (s *State) Retire(i ID) {
	for d, c := range s.owners[i] {
		c.Frozen = true
		s.owners[i][d] = c
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
	f := s.owners[j]
	var n uint64
	var moved []Dot
	for d, c := range f {
		if !c.Frozen && mut != mutTransferActive {
			continue
		}
		if d.Creator != i && mut != mutUnrestrictedTransfer {
			continue
		}
		n += c.Count
		moved = append(moved, d)
	}
	if len(moved) == 0 {
		return 0
	}
	if _, ok := s.activeDot(i); !ok {
		s.Create(i, i)
	}
	for _, d := range moved {
		delete(f, d)
	}
	if len(f) == 0 {
		delete(s.owners, j)
	}
	// Cannot fail: i has an active dot now.
	_ = s.Inc(i, n)
	return n
}

// TransferAll applies Transfer(i, j) for every owner j ≠ i and returns the
// total moved.
func (s *State) TransferAll(i ID) uint64 {
	var n uint64
	for _, j := range slices.SortedFunc(maps.Keys(s.owners), ID.Compare) {
		n += s.Transfer(i, j)
	}
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
	for id, f := range s.owners {
		of := o.owners[id]
		for d, c := range f {
			if oc, ok := of[d]; ok {
				f[d] = c.join(oc)
			} else if o.ctx.contains(d) && !ignore {
				delete(f, d)
			}
		}
	}
	for id, of := range o.owners {
		f := s.owners[id]
		for d, oc := range of {
			if _, ok := f[d]; ok {
				continue
			}
			if s.ctx.contains(d) && !ignore {
				continue
			}
			if f == nil {
				f = dotFun{}
				s.owners[id] = f
			}
			f[d] = oc
		}
	}
	for id, f := range s.owners {
		if len(f) == 0 {
			delete(s.owners, id)
		}
	}
	s.ctx.union(o.ctx)
}

// Owned is one dot of the store with its owner, as Dots lists them.
type Owned struct {
	Owner ID
	Dot   Dot
	Cell  Cell
}

// Dots lists every dot of the store in (owner, dot) order.
func (s *State) Dots() []Owned {
	var out []Owned
	for _, id := range slices.SortedFunc(maps.Keys(s.owners), ID.Compare) {
		f := s.owners[id]
		for _, d := range slices.SortedFunc(maps.Keys(f), Dot.Compare) {
			out = append(out, Owned{Owner: id, Dot: d, Cell: f[d]})
		}
	}
	return out
}

// Borrowed returns the number of dots in the store lent to another node
// (owner ≠ creator): the entries a retired client leaves until its creator
// transfers them, and what garbage collection must bring back to 0.
func (s *State) Borrowed() int {
	n := 0
	for id, f := range s.owners {
		for d := range f {
			if d.Creator != id {
				n++
			}
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
	c, ok := s.owners[owner][d]
	return c, ok
}

// Write returns the state that carries one dot of one owner and nothing
// else: ({owner ↦ {d ↦ c}}, {d}). It is the delta a client sends for its dot
// (its cumulative count, or its frozen final count), and joining it
// anywhere, any number of times, in any order with other writes of the same
// dot, is harmless. A permanent node's dot never travels this way once
// anything was transferred into it (see the package comment); its full
// state does.
func Write(owner ID, d Dot, c Cell) *State {
	s := New()
	s.owners[owner] = dotFun{d: c}
	s.ctx.add(d)
	return s
}
