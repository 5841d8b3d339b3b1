package borrow

import (
	"bytes"
	"fmt"
	"slices"
)

// IDLen is the length of a node id.
const IDLen = 16

// ID is a globally unique node id: a permanent node's host id or a client's
// random id. The same type serves both, as in counters/handoff.
type ID [IDLen]byte

// Compare orders ids as unsigned bytes (the order of the encoding).
func (id ID) Compare(o ID) int { return bytes.Compare(id[:], o[:]) }

// String renders the id as hex.
func (id ID) String() string { return fmt.Sprintf("%x", id[:]) }

// Dot is a unique event: the node that created it and that node's sequence
// number for it (§2.1). Sequence numbers start at 1.
type Dot struct {
	Creator ID
	Seq     uint64
}

// Compare orders dots by creator, then sequence number.
func (d Dot) Compare(o Dot) int {
	if c := d.Creator.Compare(o.Creator); c != 0 {
		return c
	}
	switch {
	case d.Seq < o.Seq:
		return -1
	case d.Seq > o.Seq:
		return 1
	}
	return 0
}

// String renders the dot as creator:seq in hex and decimal.
func (d Dot) String() string { return fmt.Sprintf("%x:%d", d.Creator[:], d.Seq) }

// ctxEntry is the part of a causal context for one creator: every sequence
// number in [1, base] plus the ones in cloud, each > base+1, ascending.
type ctxEntry struct {
	creator ID
	base    uint64
	cloud   []uint64
}

// context is a causal context (a set of dots, §2.1) kept compact: per
// creator a contiguous prefix and the dots beyond it (a "cloud"), one entry
// per creator in ascending creator order. A creator whose state is durable
// and whose full states travel has no cloud anywhere once its states
// arrive; a cloud only holds dots learnt from a client's write before the
// creator's state. A slice rather than a map: a cell has a few creators
// (its replicas), and a sorted slice decodes, encodes and joins without
// hashing or sorting.
type context []ctxEntry

// find returns the index of creator's entry, or where it would go.
func (c context) find(creator ID) (int, bool) {
	return slices.BinarySearchFunc(c, creator, func(e ctxEntry, id ID) int { return e.creator.Compare(id) })
}

func (c context) contains(d Dot) bool {
	if d.Seq == 0 {
		return false
	}
	i, ok := c.find(d.Creator)
	if !ok {
		return false
	}
	e := c[i]
	if d.Seq <= e.base {
		return true
	}
	_, found := slices.BinarySearch(e.cloud, d.Seq)
	return found
}

// index returns the position of creator's entry among the non-empty ones:
// the creator index of the encoding. The creator must have an entry.
func (c context) index(creator ID) int {
	i, _ := c.find(creator)
	n := 0
	for _, e := range c[:i] {
		if e.base > 0 || len(e.cloud) > 0 {
			n++
		}
	}
	return n
}

// max returns max_i(c) of §2.1.
func (c context) max(creator ID) uint64 {
	i, ok := c.find(creator)
	if !ok {
		return 0
	}
	e := c[i]
	if n := len(e.cloud); n > 0 {
		return e.cloud[n-1]
	}
	return e.base
}

// add puts d in the context.
func (c *context) add(d Dot) {
	if d.Seq == 0 || c.contains(d) {
		return
	}
	i, ok := c.find(d.Creator)
	if !ok {
		*c = slices.Insert(*c, i, ctxEntry{creator: d.Creator})
	}
	e := (*c)[i]
	if d.Seq == e.base+1 {
		e.base++
	} else {
		pos, _ := slices.BinarySearch(e.cloud, d.Seq)
		e.cloud = slices.Insert(slices.Clone(e.cloud), pos, d.Seq)
	}
	(*c)[i] = e.compact()
}

// compact moves the start of the cloud into the base while it is contiguous.
func (e ctxEntry) compact() ctxEntry {
	k := 0
	for k < len(e.cloud) && e.cloud[k] <= e.base+1 {
		e.base = max(e.base, e.cloud[k])
		k++
	}
	if k > 0 {
		e.cloud = slices.Clone(e.cloud[k:])
	}
	if len(e.cloud) == 0 {
		e.cloud = nil
	}
	return e
}

// union adds every dot of o to c.
func (c *context) union(o context) {
	if len(o) == 0 {
		return
	}
	if c.covers(o) {
		return
	}
	out := make(context, 0, len(*c)+len(o))
	a := *c
	for len(a) > 0 || len(o) > 0 {
		switch {
		case len(o) == 0 || len(a) > 0 && a[0].creator.Compare(o[0].creator) < 0:
			out = append(out, a[0])
			a = a[1:]
		case len(a) == 0 || o[0].creator.Compare(a[0].creator) < 0:
			e := o[0]
			e.cloud = slices.Clone(e.cloud)
			out = append(out, e)
			o = o[1:]
		default:
			out = append(out, a[0].union(o[0]))
			a, o = a[1:], o[1:]
		}
	}
	*c = out
}

// covers reports whether every dot of o is in c already: then union has
// nothing to do (the usual case: a client's write, a state seen before).
func (c context) covers(o context) bool {
	for _, oe := range o {
		i, ok := c.find(oe.creator)
		if !ok {
			return false
		}
		e := c[i]
		if oe.base > e.base {
			return false // e lacks base + 1: compact never leaves it in the cloud
		}
		for _, q := range oe.cloud {
			if q > e.base {
				if _, found := slices.BinarySearch(e.cloud, q); !found {
					return false
				}
			}
		}
	}
	return true
}

// union returns the entry holding the dots of both (same creator).
func (e ctxEntry) union(o ctxEntry) ctxEntry {
	e.base = max(e.base, o.base)
	merged := make([]uint64, 0, len(e.cloud)+len(o.cloud))
	for _, s := range e.cloud {
		if s > e.base {
			merged = append(merged, s)
		}
	}
	for _, s := range o.cloud {
		if s > e.base {
			merged = append(merged, s)
		}
	}
	slices.Sort(merged)
	merged = slices.Compact(merged)
	e.cloud = merged
	return e.compact()
}

func (c context) clone() context {
	out := slices.Clone(c)
	for i := range out {
		out[i].cloud = slices.Clone(out[i].cloud)
	}
	return out
}

func (c context) equal(o context) bool {
	return slices.EqualFunc(c, o, func(a, b ctxEntry) bool {
		return a.creator == b.creator && a.base == b.base && slices.Equal(a.cloud, b.cloud)
	})
}
