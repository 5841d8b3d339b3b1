package handoff

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Version is the version byte that starts every encoded state.
const Version = 1

var errCorrupt = errors.New("handoff: corrupt encoding")

// MarshalBinary encodes the state; see AppendBinary.
func (s *State[V]) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, s.sizeHint()))
}

func (s *State[V]) sizeHint() int {
	return 32 + 24*len(s.vals) + 24*len(s.slots) + 48*len(s.tokens)
}

// AppendBinary appends the encoding of the state to b. The encoding is
// canonical (maps in ascending key order, minimal varints), so equal states
// encode to equal bytes:
//
//	version byte (1) | domain byte (1 Count, 2 Counts, 3 PN) | id [16]
//	tier, sck, dck                                 uvarint
//	val, below                                     value
//	vals:   n uvarint, n × (id [16], value)         ascending id
//	slots:  n uvarint, n × (src [16], sck, dck)     ascending src
//	tokens: n uvarint, n × (src [16], dst [16], sck, dck, value)
//	                                               ascending (src, dst)
//
// A Count value is a uvarint, a PN two uvarints (P, N), a Counts a uvarint n
// then n × (key length uvarint, key bytes, count uvarint) in ascending key
// order with no zero count.
func (s *State[V]) AppendBinary(b []byte) ([]byte, error) {
	var zero V
	b = append(b, Version, zero.domain())
	b = append(b, s.id[:]...)
	b = appendUvarint(b, uint64(s.tier))
	b = appendUvarint(b, s.sck)
	b = appendUvarint(b, s.dck)
	b = s.val.appendValue(b)
	b = s.below.appendValue(b)
	b = appendUvarint(b, uint64(len(s.vals)))
	for _, k := range slices.SortedFunc(maps.Keys(s.vals), ID.Compare) {
		b = append(b, k[:]...)
		b = s.vals[k].appendValue(b)
	}
	b = appendUvarint(b, uint64(len(s.slots)))
	for _, k := range slices.SortedFunc(maps.Keys(s.slots), ID.Compare) {
		ck := s.slots[k]
		b = append(b, k[:]...)
		b = appendUvarint(b, ck.Sck)
		b = appendUvarint(b, ck.Dck)
	}
	b = appendUvarint(b, uint64(len(s.tokens)))
	for _, k := range slices.SortedFunc(maps.Keys(s.tokens), comparePair) {
		t := s.tokens[k]
		b = append(b, k.Src[:]...)
		b = append(b, k.Dst[:]...)
		b = appendUvarint(b, t.Clock.Sck)
		b = appendUvarint(b, t.Clock.Dck)
		b = t.N.appendValue(b)
	}
	return b, nil
}

func comparePair(a, b Pair) int {
	if c := a.Src.Compare(b.Src); c != 0 {
		return c
	}
	return a.Dst.Compare(b.Dst)
}

// UnmarshalBinary decodes an encoding made by AppendBinary into s, replacing
// its contents. Bad bytes (wrong version or domain, truncation, trailing
// bytes, non-canonical order or varints, a state without its self entry, a
// non-tier-0 state with other vals entries, a slot for itself, a token from
// a node to itself) are an error; s is unchanged then.
func (s *State[V]) UnmarshalBinary(data []byte) error {
	d, err := decode[V](data)
	if err != nil {
		return err
	}
	*s = *d
	return nil
}

func decode[V Value[V]](b []byte) (*State[V], error) {
	var zero V
	if len(b) < 2+IDLen {
		return nil, errCorrupt
	}
	if b[0] != Version {
		return nil, fmt.Errorf("handoff: unknown encoding version %d", b[0])
	}
	if b[1] != zero.domain() {
		return nil, fmt.Errorf("handoff: encoding of value domain %d, want %d", b[1], zero.domain())
	}
	s := &State[V]{}
	copy(s.id[:], b[2:])
	b = b[2+IDLen:]
	tier, b, err := readUvarint(b)
	if err != nil {
		return nil, err
	}
	if tier > MaxTier {
		return nil, fmt.Errorf("handoff: tier %d > %d", tier, MaxTier)
	}
	s.tier = int(tier)
	if s.sck, b, err = readUvarint(b); err != nil {
		return nil, err
	}
	if s.dck, b, err = readUvarint(b); err != nil {
		return nil, err
	}
	if s.val, b, err = zero.readValue(b); err != nil {
		return nil, err
	}
	if s.below, b, err = zero.readValue(b); err != nil {
		return nil, err
	}

	n, b, err := readCount(b, IDLen+1)
	if err != nil {
		return nil, err
	}
	s.vals = make(map[ID]V, n)
	var prev ID
	for i := range n {
		var k ID
		if k, b, err = readID(b, prev, i > 0); err != nil {
			return nil, err
		}
		prev = k
		if s.vals[k], b, err = zero.readValue(b); err != nil {
			return nil, err
		}
	}
	if _, ok := s.vals[s.id]; !ok {
		return nil, errors.New("handoff: vals without the self entry")
	}
	if s.tier != 0 && len(s.vals) != 1 {
		return nil, errors.New("handoff: vals of a non-tier-0 state has other entries")
	}

	if n, b, err = readCount(b, IDLen+2); err != nil {
		return nil, err
	}
	s.slots = make(map[ID]Clock, n)
	for i := range n {
		var k ID
		if k, b, err = readID(b, prev, i > 0); err != nil {
			return nil, err
		}
		prev = k
		if k == s.id {
			return nil, errors.New("handoff: slot for itself")
		}
		var ck Clock
		if ck.Sck, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if ck.Dck, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		s.slots[k] = ck
	}

	if n, b, err = readCount(b, 2*IDLen+3); err != nil {
		return nil, err
	}
	s.tokens = make(map[Pair]Token[V], n)
	var prevPair Pair
	for i := range n {
		if len(b) < 2*IDLen {
			return nil, errCorrupt
		}
		var k Pair
		copy(k.Src[:], b)
		copy(k.Dst[:], b[IDLen:])
		b = b[2*IDLen:]
		if i > 0 && comparePair(prevPair, k) >= 0 {
			return nil, errors.New("handoff: tokens not in strictly ascending order")
		}
		prevPair = k
		if k.Src == k.Dst {
			return nil, errors.New("handoff: token from a node to itself")
		}
		var t Token[V]
		if t.Clock.Sck, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if t.Clock.Dck, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if t.N, b, err = zero.readValue(b); err != nil {
			return nil, err
		}
		s.tokens[k] = t
	}
	if len(b) != 0 {
		return nil, errors.New("handoff: trailing bytes after the state")
	}
	return s, nil
}

// readCount reads an entry count and checks that the remaining bytes can
// hold that many entries of at least min bytes each.
func readCount(b []byte, min int) (int, []byte, error) {
	n, b, err := readUvarint(b)
	if err != nil {
		return 0, nil, err
	}
	if n > uint64(len(b)/min) {
		return 0, nil, errCorrupt
	}
	return int(n), b, nil
}

// readID reads an id that, when ordered is set, must be greater than prev.
func readID(b []byte, prev ID, ordered bool) (ID, []byte, error) {
	var k ID
	if len(b) < IDLen {
		return k, nil, errCorrupt
	}
	copy(k[:], b)
	if ordered && bytes.Compare(prev[:], k[:]) >= 0 {
		return k, nil, errors.New("handoff: ids not in strictly ascending order")
	}
	return k, b[IDLen:], nil
}

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// readUvarint reads a minimal uvarint (a longer encoding of the same number
// is rejected, so decoding and re-encoding gives the same bytes).
func readUvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, errCorrupt
	}
	if n > 1 && b[n-1] == 0 {
		return 0, nil, errors.New("handoff: non-minimal varint")
	}
	return v, b[n:], nil
}
