package reset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Version is the version byte that starts every encoding of this package.
const Version = 1

// The type byte after the version.
const (
	typeCounter = byte(KindCounter) // a state of a one-counter cell
	typeMap     = byte(KindMap)     // a state of a map cell
	typeInc     = 0x11              // an increment op
	typeReset   = 0x12              // a reset op
	typeContext = 0x13              // a reset context
	typeOutbox  = 0x21              // an outbox
	typeInbox   = 0x22              // an inbox's delivered count
)

var errCorrupt = errors.New("reset: corrupt encoding")

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendKey(b []byte, k string) []byte {
	b = appendUvarint(b, uint64(len(k)))
	return append(b, k...)
}

func readUvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, errCorrupt
	}
	if n > 1 && b[n-1] == 0 {
		return 0, nil, errors.New("reset: non-minimal varint")
	}
	return v, b[n:], nil
}

func readID(b []byte) (ID, []byte, error) {
	var id ID
	if len(b) < IDLen {
		return id, nil, errCorrupt
	}
	copy(id[:], b)
	return id, b[IDLen:], nil
}

func readKey(b []byte) (string, []byte, error) {
	n, b, err := readUvarint(b)
	if err != nil {
		return "", nil, err
	}
	if n > uint64(len(b)) {
		return "", nil, errCorrupt
	}
	return string(b[:n]), b[n:], nil
}

func readHeader(b []byte, types ...byte) (byte, []byte, error) {
	if len(b) < 2 {
		return 0, nil, errCorrupt
	}
	if b[0] != Version {
		return 0, nil, fmt.Errorf("reset: unknown encoding version %d", b[0])
	}
	if !slices.Contains(types, b[1]) {
		return 0, nil, fmt.Errorf("reset: encoding of type %#x, want one of %#x", b[1], types)
	}
	return b[1], b[2:], nil
}

// MarshalBinary encodes the state; see AppendBinary.
func (s *State) MarshalBinary() ([]byte, error) {
	n := 2 + IDLen + 1 + 20*len(s.c)
	for k, m := range s.m {
		n += 2 + len(k) + 24*len(m)
	}
	return s.AppendBinary(make([]byte, 0, n))
}

// AppendBinary appends the canonical encoding of the state to b (see the
// package comment).
func (s *State) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, Version, byte(s.kind))
	b = append(b, s.self[:]...)
	var ids [8]ID
	b = appendUvarint(b, uint64(len(s.c)))
	for _, j := range SortedIDs(ids[:0], s.c) {
		b = append(b, j[:]...)
		b = appendUvarint(b, s.c[j])
	}
	b = appendUvarint(b, uint64(len(s.m)))
	for _, k := range slices.Sorted(maps.Keys(s.m)) {
		m := s.m[k]
		b = appendKey(b, k)
		b = appendUvarint(b, uint64(len(m)))
		for _, j := range SortedIDs(ids[:0], m) {
			e := m[j]
			b = append(b, j[:]...)
			b = appendUvarint(b, e.p)
			b = appendUvarint(b, e.n)
			b = appendUvarint(b, e.c)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes an encoding made by AppendBinary into s,
// replacing its contents. Bad bytes are an error, and s is unchanged then:
// a wrong version or type, truncation, trailing bytes, non-minimal varints,
// ids or keys out of order or repeated, a zero C entry, a key without
// entries, a key other than "" in a counter cell, or an entry no execution
// of the algorithm can leave (p = 0, n > p, p > c, p = n with c ≤ C[j],
// p > n with c > C[j]).
func (s *State) UnmarshalBinary(data []byte) error {
	d, err := decodeState(data)
	if err != nil {
		return err
	}
	*s = *d
	return nil
}

func decodeState(b []byte) (*State, error) {
	t, b, err := readHeader(b, typeCounter, typeMap)
	if err != nil {
		return nil, err
	}
	self, b, err := readID(b)
	if err != nil {
		return nil, err
	}
	s := newState(self, Kind(t))
	n, b, err := readUvarint(b)
	if err != nil {
		return nil, err
	}
	var prev ID
	for x := uint64(0); x < n; x++ {
		var j ID
		var v uint64
		if j, b, err = readID(b); err != nil {
			return nil, err
		}
		if x > 0 && prev.Compare(j) >= 0 {
			return nil, errors.New("reset: clock ids out of order")
		}
		if v, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if v == 0 {
			return nil, errors.New("reset: zero clock entry")
		}
		s.c[j], prev = v, j
	}
	if n, b, err = readUvarint(b); err != nil {
		return nil, err
	}
	var prevKey string
	for x := uint64(0); x < n; x++ {
		var k string
		if k, b, err = readKey(b); err != nil {
			return nil, err
		}
		if x > 0 && prevKey >= k {
			return nil, errors.New("reset: keys out of order")
		}
		if err := s.checkKey(k); err != nil {
			return nil, err
		}
		prevKey = k
		var cnt uint64
		if cnt, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if cnt == 0 {
			return nil, errors.New("reset: key without entries")
		}
		if cnt > uint64(len(b)) {
			return nil, errCorrupt
		}
		m := make(map[ID]pnc, cnt)
		for y := uint64(0); y < cnt; y++ {
			var j ID
			var e pnc
			if j, b, err = readID(b); err != nil {
				return nil, err
			}
			if y > 0 && prev.Compare(j) >= 0 {
				return nil, errors.New("reset: entry ids out of order")
			}
			prev = j
			for _, f := range []*uint64{&e.p, &e.n, &e.c} {
				if *f, b, err = readUvarint(b); err != nil {
					return nil, err
				}
			}
			if e.p == 0 || e.n > e.p || e.p > e.c ||
				e.p == e.n && e.c <= s.c[j] || e.p > e.n && e.c > s.c[j] {
				return nil, fmt.Errorf("reset: impossible entry %d/%d/%d for %v (C %d)", e.p, e.n, e.c, j, s.c[j])
			}
			m[j] = e
		}
		s.m[k] = m
	}
	if len(b) != 0 {
		return nil, errors.New("reset: trailing bytes")
	}
	return s, nil
}

// MarshalBinary encodes the op; see AppendBinary.
func (op Op) MarshalBinary() ([]byte, error) {
	return op.AppendBinary(make([]byte, 0, 32+len(op.Key)))
}

// AppendBinary appends the canonical encoding of the op to b (see the
// package comment). An invalid op is an error.
func (op Op) AppendBinary(b []byte) ([]byte, error) {
	if err := op.validate(); err != nil {
		return nil, err
	}
	if op.Kind == OpInc {
		b = append(b, Version, typeInc)
		b = append(b, op.From[:]...)
		b = appendKey(b, op.Key)
		b = appendUvarint(b, op.P)
		b = appendUvarint(b, op.W)
		start := byte(0)
		if op.Start {
			start = 1
		}
		return append(b, start), nil
	}
	b = append(b, Version, typeReset)
	b = append(b, op.From[:]...)
	return op.Reset.appendBody(b), nil
}

// UnmarshalBinary decodes an encoding made by AppendBinary into op. Bad
// bytes (wrong version or type, truncation, trailing bytes, non-minimal
// varints, a start byte other than 0 or 1, w = 0, p < w, or a context that
// Context.UnmarshalBinary rejects) are an error; op is unchanged then.
func (op *Op) UnmarshalBinary(b []byte) error {
	t, b, err := readHeader(b, typeInc, typeReset)
	if err != nil {
		return err
	}
	var d Op
	if d.From, b, err = readID(b); err != nil {
		return err
	}
	if t == typeReset {
		d.Kind = OpReset
		if d.Reset, err = decodeContextBody(b); err != nil {
			return err
		}
		*op = d
		return nil
	}
	d.Kind = OpInc
	if d.Key, b, err = readKey(b); err != nil {
		return err
	}
	if d.P, b, err = readUvarint(b); err != nil {
		return err
	}
	if d.W, b, err = readUvarint(b); err != nil {
		return err
	}
	if len(b) != 1 || b[0] > 1 {
		return errCorrupt
	}
	d.Start = b[0] == 1
	if err := d.validate(); err != nil {
		return err
	}
	*op = d
	return nil
}

// MarshalBinary encodes the context (for a client to hand back with a
// DELETE); see the package comment.
func (c Context) MarshalBinary() ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c.appendBody([]byte{Version, typeContext}), nil
}

// UnmarshalBinary decodes a context encoded by MarshalBinary; bad bytes
// (keys or ids out of order or repeated, a key without entries, p = 0,
// p > c, truncation, trailing bytes) are an error and c is unchanged then.
func (c *Context) UnmarshalBinary(b []byte) error {
	_, b, err := readHeader(b, typeContext)
	if err != nil {
		return err
	}
	d, err := decodeContextBody(b)
	if err != nil {
		return err
	}
	*c = d
	return nil
}

func (c Context) appendBody(b []byte) []byte {
	b = appendUvarint(b, uint64(len(c.Keys)))
	for _, k := range c.Keys {
		b = appendKey(b, k.Key)
		b = appendUvarint(b, uint64(len(k.Entries)))
		for _, o := range k.Entries {
			b = append(b, o.ID[:]...)
			b = appendUvarint(b, o.P)
			b = appendUvarint(b, o.C)
		}
	}
	return b
}

func decodeContextBody(b []byte) (Context, error) {
	var c Context
	n, b, err := readUvarint(b)
	if err != nil {
		return c, err
	}
	if n > uint64(len(b)) {
		return c, errCorrupt
	}
	for range n {
		var kc KeyContext
		if kc.Key, b, err = readKey(b); err != nil {
			return c, err
		}
		var cnt uint64
		if cnt, b, err = readUvarint(b); err != nil {
			return c, err
		}
		if cnt > uint64(len(b)) {
			return c, errCorrupt
		}
		for range cnt {
			var o Observed
			if o.ID, b, err = readID(b); err != nil {
				return c, err
			}
			if o.P, b, err = readUvarint(b); err != nil {
				return c, err
			}
			if o.C, b, err = readUvarint(b); err != nil {
				return c, err
			}
			kc.Entries = append(kc.Entries, o)
		}
		c.Keys = append(c.Keys, kc)
	}
	if len(b) != 0 {
		return c, errors.New("reset: trailing bytes")
	}
	if err := c.validate(); err != nil {
		return Context{}, err
	}
	return c, nil
}
