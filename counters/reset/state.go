package reset

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// IDLen is the length of a replica id (a node's host id).
const IDLen = 16

// ID identifies a replica: a host id fits.
type ID [IDLen]byte

// SortedIDs appends the keys of m to buf in ascending order and returns
// the result: the order of the encodings, without the allocation of a
// collected slice when buf has room (a few peers).
func SortedIDs[V any](buf []ID, m map[ID]V) []ID {
	for id := range m {
		buf = append(buf, id)
	}
	slices.SortFunc(buf, ID.Compare)
	return buf
}

// Compare orders ids as unsigned bytes (the order of the encoding).
func (id ID) Compare(o ID) int { return bytes.Compare(id[:], o[:]) }

// String renders the id as hex.
func (id ID) String() string { return fmt.Sprintf("%x", id[:]) }

// Kind says whether a cell holds one counter or a map of named counters.
type Kind byte

const (
	// KindCounter is a cell holding one counter, stored under the key "".
	KindCounter Kind = 1
	// KindMap is a cell holding a map of counters keyed by string, all
	// sharing the cell's clock C.
	KindMap Kind = 2
)

// Errors returned by the operations.
var (
	// ErrDecrement: the observed-reset counter only counts up; a negative
	// delta is refused (a reset is the only way down).
	ErrDecrement = errors.New("reset: decrements are not supported by an observed-reset counter")
	// ErrZeroDelta: an increment by 0 generates no op.
	ErrZeroDelta = errors.New("reset: increment by 0")
	// ErrOverflow: a replica's total of increments in one cell would pass
	// 2^64 − 1.
	ErrOverflow = errors.New("reset: increment total overflows")
	// ErrKey: a counter cell only has the key "".
	ErrKey = errors.New(`reset: a counter cell has only the key ""`)
	// ErrOwnOp: an op is applied by its generator already; applying it again
	// (or an op claiming to come from this replica) is refused.
	ErrOwnOp = errors.New("reset: op from this replica")
	// ErrInvalidOp: an op or context whose fields no replica can produce,
	// or a context naming an increment of this replica it never made.
	ErrInvalidOp = errors.New("reset: invalid op")
	// ErrOrder: an increment that cannot be the next one of its sender: the
	// channel delivered an op twice, lost one or reordered them (a start
	// increment must have p = C[j] + w, any increment p ≤ C[j] + w).
	ErrOrder = errors.New("reset: increment out of FIFO order")
)

// Entry is one entry M[j] of a counter: the largest increment p of replica
// j known here, the part n of it that is cancelled, and the number c of j's
// increments (of the whole cell) up to and including the one that carried p.
type Entry struct {
	ID      ID
	P, N, C uint64
}

type pnc struct{ p, n, c uint64 }

func maxPNC(a, b pnc) pnc { return pnc{max(a.p, b.p), max(a.n, b.n), max(a.c, b.c)} }

// State is one replica's state of one cell: the clock C (per sender, the
// total weight of the increments of this cell received from it, its own
// included) and the map M of every counter of the cell. Its zero value is
// not usable; make one with NewCounter or NewMap, or UnmarshalBinary.
type State struct {
	self ID
	kind Kind
	c    map[ID]uint64
	m    map[string]map[ID]pnc
}

// NewCounter returns the empty state of a one-counter cell at replica self.
func NewCounter(self ID) *State { return newState(self, KindCounter) }

// NewMap returns the empty state of a map-of-counters cell at replica self.
func NewMap(self ID) *State { return newState(self, KindMap) }

func newState(self ID, k Kind) *State {
	return &State{self: self, kind: k, c: map[ID]uint64{}, m: map[string]map[ID]pnc{}}
}

// Self returns the replica id the state belongs to.
func (s *State) Self() ID { return s.self }

// Kind returns the cell's kind.
func (s *State) Kind() Kind { return s.kind }

// Clone returns a deep copy.
func (s *State) Clone() *State {
	d := newState(s.self, s.kind)
	maps.Copy(d.c, s.c)
	for k, m := range s.m {
		d.m[k] = maps.Clone(m)
	}
	return d
}

func (s *State) checkKey(key string) error {
	if s.kind == KindCounter && key != "" {
		return ErrKey
	}
	return nil
}

// Value returns the value of the counter under key: Σ (p − n) over its
// entries. A key never incremented, or fully reset, reads 0.
func (s *State) Value(key string) uint64 {
	var v uint64
	for _, e := range s.m[key] {
		v += e.p - e.n
	}
	return v
}

// Values returns every counter whose value is not 0. A key with entries but
// value 0 (a reset that overtook increments it cancels, still waiting for
// them) is left out, as a read leaves it out.
func (s *State) Values() map[string]uint64 {
	out := map[string]uint64{}
	for k := range s.m {
		if v := s.Value(k); v != 0 {
			out[k] = v
		}
	}
	return out
}

// Keys returns the keys that hold at least one entry, in ascending order.
func (s *State) Keys() []string { return slices.Sorted(maps.Keys(s.m)) }

// Entries returns the entries of key's counter in ascending id order: what
// the state stores for it (none for a fully reset counter whose cancelled
// increments have all arrived).
func (s *State) Entries(key string) []Entry {
	m := s.m[key]
	out := make([]Entry, 0, len(m))
	for _, j := range slices.SortedFunc(maps.Keys(m), ID.Compare) {
		e := m[j]
		out = append(out, Entry{j, e.p, e.n, e.c})
	}
	return out
}

// Clock returns C[j]: the total weight of j's increments of this cell
// applied here.
func (s *State) Clock(j ID) uint64 { return s.c[j] }

// ClockIDs returns the ids with a non-zero C entry, ascending.
func (s *State) ClockIDs() []ID { return slices.SortedFunc(maps.Keys(s.c), ID.Compare) }

// Inc generates the increment of key's counter by delta, applies it here,
// and returns the op to send to every other replica of the cell over its
// exactly-once FIFO channel. A delta of w is one op counting as w unit
// increments (see the package comment); delta < 0 is ErrDecrement and 0 is
// ErrZeroDelta.
func (s *State) Inc(key string, delta int64) (Op, error) {
	if err := s.checkKey(key); err != nil {
		return Op{}, err
	}
	switch {
	case delta < 0:
		return Op{}, ErrDecrement
	case delta == 0:
		return Op{}, ErrZeroDelta
	}
	w := uint64(delta)
	op := Op{Kind: OpInc, From: s.self, Key: key, W: w}
	if e, ok := s.m[key][s.self]; ok {
		op.P = e.p + w
	} else {
		// A new generation: its first unit is C[i] + 1, and every earlier
		// increment of i on this counter is cancelled (Algorithm 1, line 14).
		op.Start = true
		op.P = s.c[s.self] + w
	}
	if op.P < w {
		return Op{}, ErrOverflow
	}
	if s.c[s.self]+w < w {
		return Op{}, ErrOverflow
	}
	if err := s.effectInc(s.self, key, op.P, w, op.Start); err != nil {
		return Op{}, err
	}
	return op, nil
}

// effectInc is the inc effector of Algorithm 1 for an increment of weight w
// from j whose last unit is p.
func (s *State) effectInc(j ID, key string, p, w uint64, start bool) error {
	if w == 0 || p < w {
		return ErrInvalidOp
	}
	c := s.c[j] + w
	if c < w {
		return ErrOverflow
	}
	m := s.m[key]
	if m == nil {
		m = map[ID]pnc{}
		s.m[key] = m
	}
	e, ok := m[j]
	var add pnc
	switch {
	case mut == mutNoGenerationFix:
		add = pnc{p, 0, c}
	case start || !ok && mut != mutNoAbsentFix:
		add = pnc{p, p - w, c} // every earlier unit of j is cancelled
	default:
		add = pnc{p, 0, c}
	}
	if mut == mutNoStartFix && start && ok {
		add = pnc{p, 0, c}
	}
	e = maxPNC(e, add)
	m[j] = e
	gone := e.p == e.n && e.c == c
	if mut == mutDeleteEager {
		gone = e.p == e.n
	}
	if mut == mutLiteralI {
		// Algorithm 1's lines 25–26 read literally: the receiver's own entry
		// and clock.
		if gone {
			delete(m, s.self)
		}
		s.c[s.self] = c
	} else {
		if gone {
			delete(m, j)
		}
		s.c[j] = c
	}
	if len(m) == 0 {
		delete(s.m, key)
	}
	return nil
}

// effectReset is the reset effector of Algorithm 1 for one counter.
func (s *State) effectReset(key string, obs []Observed) {
	m := s.m[key]
	if m == nil {
		m = map[ID]pnc{}
		s.m[key] = m
	}
	for _, o := range obs {
		e, ok := m[o.ID]
		if !ok {
			// An entry already deleted here, or never seen: keep the reset
			// only for increments not yet received.
			if o.C > s.c[o.ID] && mut != mutResetDropsPending || mut == mutResetKeepsAll {
				m[o.ID] = pnc{o.P, o.P, o.C}
			}
			continue
		}
		e = maxPNC(e, pnc{o.P, o.P, o.C})
		if e.p == e.n && (e.c <= s.c[o.ID] || mut == mutDeleteEager) {
			delete(m, o.ID)
		} else {
			m[o.ID] = e
		}
	}
	if len(m) == 0 {
		delete(s.m, key)
	}
}

// Observe returns the reset context of key's counter: what this replica has
// observed of it. Reset(ctx), here or at another replica of the cell, now or
// later, cancels exactly those increments.
func (s *State) Observe(key string) Context {
	var ctx Context
	s.observeInto(&ctx, key)
	return ctx
}

// ObserveAll returns the reset context of every counter of the cell (a
// DELETE of the whole map or row).
func (s *State) ObserveAll() Context {
	var ctx Context
	for _, k := range s.Keys() {
		s.observeInto(&ctx, k)
	}
	return ctx
}

func (s *State) observeInto(ctx *Context, key string) {
	m := s.m[key]
	if len(m) == 0 {
		return
	}
	kc := KeyContext{Key: key, Entries: make([]Observed, 0, len(m))}
	for _, j := range slices.SortedFunc(maps.Keys(m), ID.Compare) {
		e := m[j]
		kc.Entries = append(kc.Entries, Observed{j, e.p, e.c})
	}
	ctx.Keys = append(ctx.Keys, kc)
}

// Reset generates the reset of what ctx observed, applies it here and
// returns the op to send to every other replica. ctx comes from Observe or
// ObserveAll at any replica of this cell (a client's read, say), possibly
// long ago: the reset cancels exactly the increments ctx observed, whatever
// has been counted since, and resetting with the same context again changes
// nothing. An empty context gives an op that changes nothing (callers may
// skip sending it). A context must come from a replica of this very cell:
// one made up, or from another cell, can cancel increments nobody observed.
func (s *State) Reset(ctx Context) (Op, error) {
	if err := ctx.validate(); err != nil {
		return Op{}, err
	}
	if err := s.checkContext(ctx); err != nil {
		return Op{}, err
	}
	op := Op{Kind: OpReset, From: s.self, Reset: ctx.clone()}
	for _, kc := range op.Reset.Keys {
		s.effectReset(kc.Key, kc.Entries)
	}
	return op, nil
}

// checkContext refuses a context with a key this cell cannot have, or one
// naming an increment of this replica it never made (a context from
// another cell).
func (s *State) checkContext(ctx Context) error {
	for _, kc := range ctx.Keys {
		if err := s.checkKey(kc.Key); err != nil {
			return err
		}
		for _, o := range kc.Entries {
			if o.ID == s.self && o.C > s.c[s.self] {
				return ErrInvalidOp
			}
		}
	}
	return nil
}

// ResetKey resets key's counter as observed here now (Reset(Observe(key))):
// the removal of key from a map.
func (s *State) ResetKey(key string) (Op, error) { return s.Reset(s.Observe(key)) }

// ResetAll resets every counter of the cell as observed here now.
func (s *State) ResetAll() (Op, error) { return s.Reset(s.ObserveAll()) }

// Apply applies an op generated by another replica of the cell. Ops from a
// given replica must be applied exactly once each and in the order it
// generated them (FIFO per sender, across all the cell's counters); see
// Outbox and Inbox. Some violations are detected (ErrOrder), not all.
// Nothing changes when an error is returned.
func (s *State) Apply(op Op) error {
	if op.From == s.self {
		return ErrOwnOp
	}
	if err := op.validate(); err != nil {
		return err
	}
	switch op.Kind {
	case OpInc:
		if err := s.checkKey(op.Key); err != nil {
			return err
		}
		c := s.c[op.From] + op.W
		if c < op.W {
			return ErrOverflow
		}
		if op.Start && op.P != c || op.P > c {
			return ErrOrder
		}
		return s.effectInc(op.From, op.Key, op.P, op.W, op.Start)
	case OpReset:
		if err := s.checkContext(op.Reset); err != nil {
			return err
		}
		for _, kc := range op.Reset.Keys {
			s.effectReset(kc.Key, kc.Entries)
		}
		return nil
	}
	return ErrInvalidOp
}

// CloneAs returns a deep copy owned by replica self: the starting state of
// a replica that joins the cell's replica set by adopting this one (it
// holds every op this state applied, and generates its own from C[self]).
func (s *State) CloneAs(self ID) *State {
	d := s.Clone()
	d.self = self
	return d
}
