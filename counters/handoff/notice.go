package handoff

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Notice is a retirement notice (§7.4): what a node that will never send
// again leaves behind so that (1) the increments it moved into tokens are
// still delivered although it no longer answers, and (2) the slots servers
// opened for it are garbage-collected although it will never fill or
// discard them.
//
// The paper sketches the second use: a server that receives the intention
// to retire keeps a copy of the client's last token and disseminates it to
// the servers the client used; a server that sees it drops the client's
// slots with an older source clock, after the normal merge, so that a slot
// whose token is cached elsewhere is filled first. This package makes the
// notice carry every outstanding token of the node, not only the last: the
// node's state is frozen when the notice is made, so a slot for the node
// anywhere either (a) was filled already, (b) has its token in the notice,
// or (c) never got a token and never will. Collect fills (b) from the
// notice, then drops what is left, so no increment is lost and no slot is
// left behind, whatever order notices and old messages arrive in. The same
// argument is what lets a node retire as soon as one server holds its
// notice durably: its tokens are held elsewhere (§7.4's condition for
// retirement), by a holder that delivers them itself instead of waiting to
// be asked.
type Notice[V Value[V]] struct {
	ID     ID              // the retiring node
	Sck    uint64          // its final source clock (every slot for it has Sck ≤ this)
	Tokens map[ID]Token[V] // its own tokens not known to be acquired, by destination
}

// Retire freezes s and returns its retirement notice. The caller must never
// send or merge anything for s again (nor reuse its id): the notice is only
// right for a state that no longer changes. Whatever s still has pending
// (Pending ≠ 𝟎) is not in the notice and is abandoned: never counted. A
// client flushes (Handed, or at least Pending = 𝟎) before it retires; a
// coordinator that gives up on a request abandons it on purpose.
func (s *State[V]) Retire() *Notice[V] {
	n := &Notice[V]{ID: s.id, Sck: s.sck, Tokens: map[ID]Token[V]{}}
	for k, t := range s.tokens {
		if k.Src == s.id && mut != mutNoticeWithoutTokens {
			n.Tokens[k.Dst] = t
		}
	}
	return n
}

// Unused reports whether nothing was ever accounted at s: no increment, so
// no server ever opened a slot for it and it needs no retirement notice
// (nothing pending, no token ever made).
func (s *State[V]) Unused() bool {
	return s.sck == 0 && s.vals[s.id].isZero() && len(s.tokens) == 0
}

// Clone returns a copy of the notice (values are immutable and shared).
func (n *Notice[V]) Clone() *Notice[V] {
	c := *n
	c.Tokens = maps.Clone(n.Tokens)
	return &c
}

// Collect applies a retirement notice at s, after any merge: each token of
// n addressed to s that matches s's slot for n.ID is acquired (as
// fillslots), then s's slot for n.ID is dropped if its source clock is at
// most n.Sck (n.ID will never create a token for it). Applying a notice
// again, or applying it to a state that never heard of n.ID, changes
// nothing. It reports whether s changed.
func (s *State[V]) Collect(n *Notice[V]) bool {
	if n == nil || n.ID == s.id {
		return false
	}
	ck, ok := s.slots[n.ID]
	if !ok {
		return false
	}
	if mut != mutCollectWithoutFill {
		if t, ok := n.Tokens[s.id]; ok && t.Clock == ck {
			s.vals[s.id] = s.vals[s.id].add(t.N)
			delete(s.slots, n.ID)
			s.refresh()
			return true
		}
	}
	if ck.Sck <= n.Sck {
		delete(s.slots, n.ID)
		return true
	}
	return false
}

// refresh recomputes val after s's self entry grew outside a merge: the sum
// of the vector at tier 0, else at least below plus the self entry.
func (s *State[V]) refresh() {
	if s.tier == 0 {
		s.val = s.sumVals()
		return
	}
	s.val = s.val.join(s.below.add(s.vals[s.id]))
}

// NoticeVersion is the version byte that starts every encoded notice.
const NoticeVersion = 1

// MarshalBinary encodes the notice; see AppendBinary.
func (n *Notice[V]) MarshalBinary() ([]byte, error) {
	return n.AppendBinary(make([]byte, 0, 32+48*len(n.Tokens)))
}

// AppendBinary appends the canonical encoding of the notice to b:
//
//	version byte (1) | domain byte | id [16] | sck uvarint
//	tokens: n uvarint, n × (dst [16], sck, dck uvarint, value)  ascending dst
func (n *Notice[V]) AppendBinary(b []byte) ([]byte, error) {
	var zero V
	b = append(b, NoticeVersion, zero.domain())
	b = append(b, n.ID[:]...)
	b = appendUvarint(b, n.Sck)
	b = appendUvarint(b, uint64(len(n.Tokens)))
	for _, k := range slices.SortedFunc(maps.Keys(n.Tokens), ID.Compare) {
		t := n.Tokens[k]
		b = append(b, k[:]...)
		b = appendUvarint(b, t.Clock.Sck)
		b = appendUvarint(b, t.Clock.Dck)
		b = t.N.appendValue(b)
	}
	return b, nil
}

// UnmarshalBinary decodes an encoding made by AppendBinary into n. Bad bytes
// (wrong version or domain, truncation, trailing bytes, destinations out of
// order, a token to the node itself or with a source clock not below the
// notice's) are an error; n is unchanged then.
func (n *Notice[V]) UnmarshalBinary(b []byte) error {
	var zero V
	if len(b) < 2+IDLen {
		return errCorrupt
	}
	if b[0] != NoticeVersion {
		return fmt.Errorf("handoff: unknown notice version %d", b[0])
	}
	if b[1] != zero.domain() {
		return fmt.Errorf("handoff: notice of value domain %d, want %d", b[1], zero.domain())
	}
	out := Notice[V]{}
	copy(out.ID[:], b[2:])
	b = b[2+IDLen:]
	var err error
	if out.Sck, b, err = readUvarint(b); err != nil {
		return err
	}
	cnt, b, err := readCount(b, IDLen+3)
	if err != nil {
		return err
	}
	out.Tokens = make(map[ID]Token[V], cnt)
	var prev ID
	for i := range cnt {
		var k ID
		if k, b, err = readID(b, prev, i > 0); err != nil {
			return err
		}
		prev = k
		if k == out.ID {
			return errors.New("handoff: notice with a token to its own node")
		}
		var t Token[V]
		if t.Clock.Sck, b, err = readUvarint(b); err != nil {
			return err
		}
		if t.Clock.Dck, b, err = readUvarint(b); err != nil {
			return err
		}
		if t.Clock.Sck >= out.Sck {
			return errors.New("handoff: notice with a token newer than its source clock")
		}
		if t.N, b, err = zero.readValue(b); err != nil {
			return err
		}
		out.Tokens[k] = t
	}
	if len(b) != 0 {
		return errors.New("handoff: trailing bytes after the notice")
	}
	*n = out
	return nil
}
