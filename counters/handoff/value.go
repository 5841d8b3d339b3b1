package handoff

import (
	"errors"
	"maps"
	"slices"
)

// Value is the value domain M of §8: a commutative monoid (⊕, 𝟎) that is
// also a join-semilattice (⊔, ⊥) with ⊥ = 𝟎 and x ⊔ y ⊑ x ⊕ y. The zero
// value of a Value type is 𝟎. Values are immutable: add and join return
// fresh values and never modify their operands, so a value may be shared
// between states (a token cached at another node, say).
//
// The set is closed: Count (the paper's counter), Counts (the map of
// counters of §8.1) and PN (the PN-counter of §8.2).
type Value[V any] interface {
	add(V) V      // ⊕
	join(V) V     // ⊔
	isZero() bool // = 𝟎 (createslot's "vals_j(j) > 0" is "vals_j(j) ≠ 𝟎")
	appendValue([]byte) []byte
	readValue([]byte) (V, []byte, error) // decodes; called on the zero value
	domain() byte                        // tag written in the encoding
}

// Domain tags of the encoding.
const (
	domainCount  = 1
	domainCounts = 2
	domainPN     = 3
)

// Count is the paper's counter value: a non-negative integer, ⊕ = +, ⊔ = max.
type Count uint64

func (a Count) add(b Count) Count  { return a + b }
func (a Count) join(b Count) Count { return max(a, b) }
func (a Count) isZero() bool       { return a == 0 }
func (a Count) domain() byte       { return domainCount }
func (a Count) appendValue(b []byte) []byte {
	return appendUvarint(b, uint64(a))
}
func (Count) readValue(b []byte) (Count, []byte, error) {
	v, rest, err := readUvarint(b)
	return Count(v), rest, err
}

// PN is the PN-counter value of §8.2: the map {p ↦ P, n ↦ N} of the
// map-of-counters example with its two keys fixed, so ⊕ and ⊔ are pointwise
// + and max.
type PN struct {
	P uint64 // increments
	N uint64 // decrements
}

func (a PN) add(b PN) PN  { return PN{a.P + b.P, a.N + b.N} }
func (a PN) join(b PN) PN { return PN{max(a.P, b.P), max(a.N, b.N)} }
func (a PN) isZero() bool { return a.P == 0 && a.N == 0 }
func (a PN) domain() byte { return domainPN }
func (a PN) appendValue(b []byte) []byte {
	return appendUvarint(appendUvarint(b, a.P), a.N)
}
func (PN) readValue(b []byte) (PN, []byte, error) {
	p, b, err := readUvarint(b)
	if err != nil {
		return PN{}, nil, err
	}
	n, b, err := readUvarint(b)
	return PN{p, n}, b, err
}

// Counts is the map-of-counters value of §8.1: a map from counter name to
// count, 𝟎 = {}, ⊕ = ∪⁺ (union adding common keys), ⊔ = ∪^max. A Counts never
// holds a zero entry (an absent key counts 0), so equal values have equal
// encodings. Treat a Counts as immutable.
type Counts map[string]uint64

func (a Counts) add(b Counts) Counts {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	m := maps.Clone(a)
	for k, v := range b {
		if s := m[k] + v; s != 0 {
			m[k] = s
		} else {
			delete(m, k) // only on uint64 wrap-around
		}
	}
	return m
}

func (a Counts) join(b Counts) Counts {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	changed := false
	for k, v := range b {
		if v > a[k] {
			changed = true
			break
		}
	}
	if !changed {
		return a
	}
	m := maps.Clone(a)
	for k, v := range b {
		m[k] = max(m[k], v)
	}
	return m
}

func (a Counts) isZero() bool { return len(a) == 0 }
func (a Counts) domain() byte { return domainCounts }

func (a Counts) appendValue(b []byte) []byte {
	b = appendUvarint(b, uint64(len(a)))
	for _, k := range slices.Sorted(maps.Keys(a)) {
		b = appendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = appendUvarint(b, a[k])
	}
	return b
}

func (Counts) readValue(b []byte) (Counts, []byte, error) {
	n, b, err := readUvarint(b)
	if err != nil {
		return nil, nil, err
	}
	if n > uint64(len(b))/2 { // an entry takes at least 2 bytes
		return nil, nil, errCorrupt
	}
	if n == 0 {
		return nil, b, nil
	}
	m := make(Counts, n)
	prev := ""
	for i := uint64(0); i < n; i++ {
		var l uint64
		if l, b, err = readUvarint(b); err != nil {
			return nil, nil, err
		}
		if l > uint64(len(b)) {
			return nil, nil, errCorrupt
		}
		k := string(b[:l])
		b = b[l:]
		if i > 0 && k <= prev {
			return nil, nil, errors.New("handoff: counts keys not strictly ascending")
		}
		prev = k
		var v uint64
		if v, b, err = readUvarint(b); err != nil {
			return nil, nil, err
		}
		if v == 0 {
			return nil, nil, errors.New("handoff: counts entry of zero")
		}
		m[k] = v
	}
	return m, b, nil
}
