package borrow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Version is the version byte that starts every encoding of this package.
const Version = 1

// Kind bytes follow the version byte.
const (
	kindState  = 1 // a State (a full state, a client's write, a retirement)
	kindClient = 2 // a Client
)

var errCorrupt = errors.New("borrow: corrupt encoding")

// MarshalBinary encodes the state; see AppendBinary.
func (s *State) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, 8+24*len(s.ctx)+40*len(s.dots)))
}

// AppendBinary appends the canonical encoding of the state to b (the layout
// is in the package comment). Equal states encode to equal bytes.
func (s *State) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, Version, kindState)
	n := 0
	for _, e := range s.ctx {
		if e.base > 0 || len(e.cloud) > 0 {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, e := range s.ctx {
		if e.base == 0 && len(e.cloud) == 0 {
			continue
		}
		b = append(b, e.creator[:]...)
		b = binary.AppendUvarint(b, e.base)
		b = binary.AppendUvarint(b, uint64(len(e.cloud)))
		prev := e.base + 1
		for _, q := range e.cloud {
			b = binary.AppendUvarint(b, q-prev-1)
			prev = q
		}
	}
	owners := 0
	for i, o := range s.dots {
		if i == 0 || o.Owner != s.dots[i-1].Owner {
			owners++
		}
	}
	b = binary.AppendUvarint(b, uint64(owners))
	for lo := 0; lo < len(s.dots); {
		owner := s.dots[lo].Owner
		hi := lo + 1
		for hi < len(s.dots) && s.dots[hi].Owner == owner {
			hi++
		}
		b = append(b, owner[:]...)
		b = binary.AppendUvarint(b, uint64(hi-lo))
		for _, o := range s.dots[lo:hi] {
			b = binary.AppendUvarint(b, uint64(s.ctx.index(o.Dot.Creator)))
			b = binary.AppendUvarint(b, o.Dot.Seq)
			var flag byte
			if o.Cell.Frozen {
				flag = 1
			}
			b = append(b, flag)
			b = binary.AppendUvarint(b, o.Cell.Count)
		}
		lo = hi
	}
	return b, nil
}

// UnmarshalBinary decodes an encoding made by AppendBinary into s, replacing
// its contents. Bad bytes (wrong version or kind, truncation, trailing
// bytes, non-minimal varints, ids out of order, an empty context entry or
// owner entry, a dot outside the context, a flag other than 0 or 1) are an
// error and leave s unchanged.
func (s *State) UnmarshalBinary(data []byte) error {
	d, err := decodeState(data)
	if err != nil {
		return err
	}
	*s = *d
	return nil
}

func header(b []byte, kind byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, errCorrupt
	}
	if b[0] != Version {
		return nil, fmt.Errorf("borrow: unknown encoding version %d", b[0])
	}
	if b[1] != kind {
		return nil, fmt.Errorf("borrow: encoding of kind %d, want %d", b[1], kind)
	}
	return b[2:], nil
}

func decodeState(b []byte) (*State, error) {
	b, err := header(b, kindState)
	if err != nil {
		return nil, err
	}
	n, b, err := readCount(b, IDLen+2)
	if err != nil {
		return nil, err
	}
	s := &State{ctx: make(context, 0, n)}
	creators := make([]ID, 0, n)
	for i := range n {
		var id ID
		if id, b, err = readID(b, creators, i); err != nil {
			return nil, err
		}
		creators = append(creators, id)
		e := ctxEntry{creator: id}
		if e.base, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		var k int
		if k, b, err = readCount(b, 1); err != nil {
			return nil, err
		}
		if e.base == 0 && k == 0 {
			return nil, errors.New("borrow: empty context entry")
		}
		prev := e.base + 1
		for range k {
			var gap uint64
			if gap, b, err = readUvarint(b); err != nil {
				return nil, err
			}
			q := prev + gap + 1
			if q <= prev || q <= e.base {
				return nil, errors.New("borrow: context sequence overflow")
			}
			e.cloud = append(e.cloud, q)
			prev = q
		}
		s.ctx = append(s.ctx, e)
	}
	if n, b, err = readCount(b, IDLen+1); err != nil {
		return nil, err
	}
	owners := make([]ID, 0, n)
	s.dots = make([]Owned, 0, n)
	for i := range n {
		var id ID
		if id, b, err = readID(b, owners, i); err != nil {
			return nil, err
		}
		owners = append(owners, id)
		var k int
		if k, b, err = readCount(b, 4); err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, errors.New("borrow: empty owner entry")
		}
		var prev Dot
		var prevIdx uint64
		for j := range k {
			var idx uint64
			if idx, b, err = readUvarint(b); err != nil {
				return nil, err
			}
			if idx >= uint64(len(creators)) {
				return nil, errors.New("borrow: dot of a creator outside the context")
			}
			d := Dot{Creator: creators[idx]}
			if d.Seq, b, err = readUvarint(b); err != nil {
				return nil, err
			}
			if j > 0 && (idx < prevIdx || idx == prevIdx && d.Seq <= prev.Seq) {
				return nil, errors.New("borrow: dots not in strictly ascending order")
			}
			prev, prevIdx = d, idx
			if !s.ctx.contains(d) {
				return nil, errors.New("borrow: dot outside the context")
			}
			if len(b) == 0 || b[0] > 1 {
				return nil, errors.New("borrow: bad frozen flag")
			}
			c := Cell{Frozen: b[0] == 1}
			if c.Count, b, err = readUvarint(b[1:]); err != nil {
				return nil, err
			}
			s.dots = append(s.dots, Owned{Owner: id, Dot: d, Cell: c})
		}
	}
	if len(b) != 0 {
		return nil, errors.New("borrow: trailing bytes after the state")
	}
	return s, nil
}

// MarshalBinary encodes the client; the layout is in the package comment.
func (c *Client) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 24+40*len(c.loans))
	b = append(b, Version, kindClient)
	b = append(b, c.id[:]...)
	var flags byte
	if c.retired {
		flags = 1
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(c.current+1))
	b = binary.AppendUvarint(b, uint64(len(c.loans)))
	for _, l := range c.loans {
		b = append(b, l.Creator[:]...)
		b = binary.AppendUvarint(b, l.Dot.Seq)
		b = binary.AppendUvarint(b, l.Count)
	}
	return b, nil
}

// UnmarshalBinary decodes a client encoded by MarshalBinary into c. Bad
// bytes (besides those State.UnmarshalBinary rejects: creators out of order,
// a count in an unknown loan, a current loan that is unknown or missing, a
// retired client with an unknown loan) are an error and leave c unchanged.
func (c *Client) UnmarshalBinary(data []byte) error {
	b, err := header(data, kindClient)
	if err != nil {
		return err
	}
	if len(b) < IDLen+1 {
		return errCorrupt
	}
	d := &Client{}
	copy(d.id[:], b)
	flags := b[IDLen]
	if flags > 1 {
		return errors.New("borrow: bad client flags")
	}
	d.retired = flags == 1
	b = b[IDLen+1:]
	cur, b, err := readUvarint(b)
	if err != nil {
		return err
	}
	n, b, err := readCount(b, IDLen+2)
	if err != nil {
		return err
	}
	if cur > uint64(n) {
		return errors.New("borrow: current loan out of range")
	}
	d.current = int(cur) - 1
	creators := make([]ID, 0, n)
	for i := range n {
		var l Loan
		if l.Creator, b, err = readID(b, creators, i); err != nil {
			return err
		}
		creators = append(creators, l.Creator)
		l.Dot.Creator = l.Creator
		if l.Dot.Seq, b, err = readUvarint(b); err != nil {
			return err
		}
		if l.Count, b, err = readUvarint(b); err != nil {
			return err
		}
		if !l.Known() && (l.Count != 0 || d.retired) {
			return errors.New("borrow: unknown loan with a count, or in a retired client")
		}
		d.loans = append(d.loans, l)
	}
	if len(b) != 0 {
		return errors.New("borrow: trailing bytes after the client")
	}
	known := slices.ContainsFunc(d.loans, Loan.Known)
	if known != (d.current >= 0) || d.current >= 0 && !d.loans[d.current].Known() {
		return errors.New("borrow: current loan unknown or missing")
	}
	*c = *d
	return nil
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

// readID reads the i-th id of a list, which must be greater than the one
// before it.
func readID(b []byte, prev []ID, i int) (ID, []byte, error) {
	var id ID
	if len(b) < IDLen {
		return id, nil, errCorrupt
	}
	copy(id[:], b)
	if i > 0 && prev[i-1].Compare(id) >= 0 {
		return id, nil, errors.New("borrow: ids not in strictly ascending order")
	}
	return id, b[IDLen:], nil
}

// readUvarint reads a minimal uvarint (a longer encoding of the same number
// is rejected, so decoding and re-encoding gives the same bytes).
func readUvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, errCorrupt
	}
	if n > 1 && b[n-1] == 0 {
		return 0, nil, errors.New("borrow: non-minimal varint")
	}
	return v, b[n:], nil
}
