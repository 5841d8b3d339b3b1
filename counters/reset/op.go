package reset

import "slices"

// OpKind tells an increment op from a reset op.
type OpKind byte

const (
	// OpInc is an increment: (inc, j, p, start) of Algorithm 1, with a
	// weight.
	OpInc OpKind = 1
	// OpReset is a reset: (reset, R) of Algorithm 1, for one or more
	// counters of the cell.
	OpReset OpKind = 2
)

// Op is a message from one replica of a cell to the others: what a
// generator returns and an effector consumes.
type Op struct {
	Kind OpKind
	From ID // the generating replica (j in the effectors)

	// OpInc: the counter's key, the last unit p of the increment, its weight
	// w ≥ 1 (it stands for the units p − w + 1 … p) and whether it starts a
	// new generation (every earlier unit of From on this counter is
	// cancelled).
	Key   string
	P, W  uint64
	Start bool

	// OpReset: the observed context it cancels.
	Reset Context
}

// Context is what a replica observed of some counters of a cell: for each
// key, the set R of Algorithm 1's reset message. It is what a read hands a
// client so that a later DELETE resets exactly what the client saw.
type Context struct {
	Keys []KeyContext // ascending Key, each with at least one entry
}

// KeyContext is the observed part of one counter.
type KeyContext struct {
	Key     string
	Entries []Observed // ascending ID
}

// Observed is one triple (j, p, c) of a reset: every unit of j up to p on
// this counter is cancelled, and the unit p was carried by j's c-th unit of
// increments of the cell.
type Observed struct {
	ID   ID
	P, C uint64
}

// Empty reports whether the context observed nothing.
func (c Context) Empty() bool { return len(c.Keys) == 0 }

func (c Context) clone() Context {
	out := Context{Keys: make([]KeyContext, len(c.Keys))}
	for i, k := range c.Keys {
		out.Keys[i] = KeyContext{k.Key, slices.Clone(k.Entries)}
	}
	return out
}

// validate checks what every real context satisfies: keys strictly
// ascending with entries, ids strictly ascending, 1 ≤ p ≤ c.
func (c Context) validate() error {
	for i, k := range c.Keys {
		if i > 0 && c.Keys[i-1].Key >= k.Key || len(k.Entries) == 0 {
			return ErrInvalidOp
		}
		for x, o := range k.Entries {
			if x > 0 && k.Entries[x-1].ID.Compare(o.ID) >= 0 || o.P == 0 || o.P > o.C {
				return ErrInvalidOp
			}
		}
	}
	return nil
}

func (op Op) validate() error {
	switch op.Kind {
	case OpInc:
		if op.W == 0 || op.P < op.W || op.Reset.Keys != nil {
			return ErrInvalidOp
		}
		return nil
	case OpReset:
		if op.Key != "" || op.P != 0 || op.W != 0 || op.Start {
			return ErrInvalidOp
		}
		return op.Reset.validate()
	}
	return ErrInvalidOp
}
