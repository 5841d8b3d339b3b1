package borrow

import (
	"bytes"
	"fmt"
	"maps"
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
	base  uint64
	cloud []uint64
}

// context is a causal context (a set of dots, §2.1) kept compact: per
// creator a contiguous prefix and the dots beyond it. A creator whose state
// is durable and whose full states travel has no cloud anywhere once its
// states arrive; a cloud only holds dots learnt from a client's write before
// the creator's state.
type context map[ID]ctxEntry

func (c context) contains(d Dot) bool {
	e, ok := c[d.Creator]
	if !ok || d.Seq == 0 {
		return false
	}
	if d.Seq <= e.base {
		return true
	}
	_, found := slices.BinarySearch(e.cloud, d.Seq)
	return found
}

// max returns max_i(c) of §2.1.
func (c context) max(i ID) uint64 {
	e := c[i]
	if n := len(e.cloud); n > 0 {
		return e.cloud[n-1]
	}
	return e.base
}

// add puts d in the context.
func (c context) add(d Dot) {
	if d.Seq == 0 || c.contains(d) {
		return
	}
	e := c[d.Creator]
	if d.Seq == e.base+1 {
		e.base++
	} else {
		pos, _ := slices.BinarySearch(e.cloud, d.Seq)
		e.cloud = slices.Insert(slices.Clone(e.cloud), pos, d.Seq)
	}
	c[d.Creator] = e.compact()
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
func (c context) union(o context) {
	for id, oe := range o {
		e := c[id]
		e.base = max(e.base, oe.base)
		merged := make([]uint64, 0, len(e.cloud)+len(oe.cloud))
		for _, s := range e.cloud {
			if s > e.base {
				merged = append(merged, s)
			}
		}
		for _, s := range oe.cloud {
			if s > e.base {
				merged = append(merged, s)
			}
		}
		slices.Sort(merged)
		merged = slices.Compact(merged)
		e.cloud = merged
		c[id] = e.compact()
	}
}

func (c context) clone() context {
	out := make(context, len(c))
	for id, e := range c {
		e.cloud = slices.Clone(e.cloud)
		out[id] = e
	}
	return out
}

func (c context) equal(o context) bool {
	return maps.EqualFunc(c, o, func(a, b ctxEntry) bool {
		return a.base == b.base && slices.Equal(a.cloud, b.cloud)
	})
}
