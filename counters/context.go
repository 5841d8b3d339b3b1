// Package counters holds Cassandra's counter cell: the counter context, its
// shards, their merge rules and a stable binary encoding. It is pure: no I/O,
// no clock, no goroutines.
//
// # The context
//
// A counter's value is split into shards, one per replica that ever led an
// update to it. A shard is (counterId, clock, count): the 16-byte id of the
// node that owns it, a logical clock the owner bumps on each update, and the
// owner's running total. The counter's value is the sum of the counts of all
// shards. Since Cassandra 2.1 every shard is global: only its owner changes it,
// by writing a whole new (clock+1, count+delta) shard under a lock, and a
// replica that receives a shard keeps the one with the higher clock. Merging
// global shards is therefore commutative, associative and idempotent, which is
// why a 2.1+ commit log can be replayed any number of times.
//
// Cassandra 2.0 wrote local shards instead: the leader logged the delta itself
// as a local shard (clock 1, count delta), and local shards merge by summing
// counts and clocks. That merge is not idempotent, so re-applying a logged
// delta (a replay of already flushed data, say) counts it twice. The legacy
// kinds are kept here to demonstrate exactly that.
//
// # Encoding
//
// The encoding is Cassandra's CounterContext layout, big-endian:
//
//	header: int16 n                      number of global + local shards
//	        n × int16 index              one per global/local shard, ascending:
//	                                     local: i; global: i + math.MinInt16 (negative)
//	body:   shards sorted by counterId (unsigned bytes), 32 bytes each:
//	        counterId [16]byte | clock int64 | count int64
//
// Shards of the body not named in the header are remote. A 2.1+ context with a
// single global shard is 36 bytes: 00 01 | 80 00 | id | clock | count.
// Cassandra's negative n ("clear local shards") is never written here and is
// rejected by Decode.
package counters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// IDLen is the length of a counter id (a node's host id).
const IDLen = 16

// shardLen is the encoded size of one shard in the body.
const shardLen = IDLen + 8 + 8

// ID identifies the node that owns a shard.
type ID [IDLen]byte

// Compare orders ids as unsigned bytes, as Cassandra sorts shards.
func (id ID) Compare(o ID) int { return bytes.Compare(id[:], o[:]) }

// String renders the id as hex.
func (id ID) String() string { return fmt.Sprintf("%x", id[:]) }

// Kind is a shard's type.
type Kind uint8

const (
	// Global shards (Cassandra ≥ 2.1) merge by highest clock.
	Global Kind = iota
	// Local shards (Cassandra ≤ 2.0, the leader's own deltas) merge by summing.
	Local
	// Remote shards (Cassandra ≤ 2.0, another node's local shard) merge by highest clock.
	Remote
)

func (k Kind) String() string {
	switch k {
	case Global:
		return "global"
	case Local:
		return "local"
	case Remote:
		return "remote"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Shard is one node's part of a counter.
type Shard struct {
	ID    ID
	Clock int64
	Count int64
	Kind  Kind
}

// Context is a counter cell's value: shards sorted by id, one per id. The zero
// Context is an empty counter (value 0). A Context is immutable: every method
// that changes it returns a new one.
type Context struct {
	shards []Shard
}

// NewGlobal returns a context holding one global shard, as a 2.1+ leader writes.
func NewGlobal(id ID, clock, count int64) Context {
	return Context{shards: []Shard{{ID: id, Clock: clock, Count: count, Kind: Global}}}
}

// NewLegacyDelta returns the context a 2.0 leader logged for an update of delta:
// one local shard with clock 1.
func NewLegacyDelta(id ID, delta int64) Context {
	return Context{shards: []Shard{{ID: id, Clock: 1, Count: delta, Kind: Local}}}
}

// FromShards builds a context from shards in any order. Shards with the same
// id are merged by the merge rules.
func FromShards(shards ...Shard) Context {
	var c Context
	for _, s := range shards {
		c = c.Merge(Context{shards: []Shard{s}})
	}
	return c
}

// Shards returns the shards in id order. The slice must not be modified.
func (c Context) Shards() []Shard { return c.shards }

// Len returns the number of shards.
func (c Context) Len() int { return len(c.shards) }

// Value returns the counter's value: the sum of all shards' counts, wrapping
// on overflow as Cassandra's long arithmetic does.
func (c Context) Value() int64 {
	var v int64
	for _, s := range c.shards {
		v += s.Count
	}
	return v
}

// Shard returns the shard owned by id, if any.
func (c Context) Shard(id ID) (Shard, bool) {
	lo, hi := 0, len(c.shards)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch x := c.shards[m].ID.Compare(id); {
		case x == 0:
			return c.shards[m], true
		case x < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return Shard{}, false
}

// ClockAndCount returns the clock and count of id's shard, or (0, 0) when the
// context has none: Cassandra's getLocalClockAndCount.
func (c Context) ClockAndCount(id ID) (clock, count int64) {
	s, ok := c.Shard(id)
	if !ok {
		return 0, 0
	}
	return s.Clock, s.Count
}

// Equal reports whether two contexts hold the same shards.
func (c Context) Equal(o Context) bool {
	if len(c.shards) != len(o.shards) {
		return false
	}
	for i := range c.shards {
		if c.shards[i] != o.shards[i] {
			return false
		}
	}
	return true
}

// String renders the context for tests and logs.
func (c Context) String() string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, s := range c.shards {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%x:%d:%d", s.Kind, s.ID[:4], s.Clock, s.Count)
	}
	b.WriteByte(']')
	return b.String()
}

// MergeShard reconciles two shards with the same id by Cassandra's rules:
//
//	global + global: highest clock; equal clocks, highest count
//	global + local/remote: the global one
//	local + local: counts and clocks summed (the 2.0 delta mechanism)
//	local + remote: the local one
//	remote + remote: highest clock; equal clocks, highest count
func MergeShard(a, b Shard) Shard {
	switch {
	case a.Kind == Global && b.Kind == Global, a.Kind == Remote && b.Kind == Remote:
		if a.Clock > b.Clock || (a.Clock == b.Clock && a.Count >= b.Count) {
			return a
		}
		return b
	case a.Kind == Global:
		return a
	case b.Kind == Global:
		return b
	case a.Kind == Local && b.Kind == Local:
		return Shard{ID: a.ID, Clock: a.Clock + b.Clock, Count: a.Count + b.Count, Kind: Local}
	case a.Kind == Local:
		return a
	default:
		return b
	}
}

// Merge returns the union of two contexts, shards with the same id merged by
// MergeShard. When one side already contains the other (the common case of a
// replica receiving a newer shard), no shard is copied needlessly.
func (c Context) Merge(o Context) Context {
	switch {
	case len(o.shards) == 0:
		return c
	case len(c.shards) == 0:
		return o
	}
	return Context{shards: mergeShards(make([]Shard, 0, len(c.shards)+len(o.shards)), c.shards, o.shards)}
}

// mergeShards appends to out the union of two id-sorted shard lists, shards
// with the same id merged by MergeShard.
func mergeShards(out, a, b []Shard) []Shard {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch x := a[i].ID.Compare(b[j].ID); {
		case x < 0:
			out = append(out, a[i])
			i++
		case x > 0:
			out = append(out, b[j])
			j++
		default:
			out = append(out, MergeShard(a[i], b[j]))
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// MergeEncoded returns the encoding of the merge of two encoded contexts,
// as Decode, Merge and MarshalBinary would, in a new slice; the shards of
// small contexts are decoded and merged on the stack. Replicas merge every
// cell they receive this way.
func MergeEncoded(a, b []byte) ([]byte, error) {
	var bufA, bufB [4]Shard
	var bufOut [8]Shard
	sa, err := decodeShards(bufA[:0], a)
	if err != nil {
		return nil, err
	}
	sb, err := decodeShards(bufB[:0], b)
	if err != nil {
		return nil, err
	}
	out := mergeShards(bufOut[:0], sa, sb)
	return appendShards(make([]byte, 0, encodedLen(out)), out)
}

// EncodedLen returns the length of c's encoding.
func (c Context) EncodedLen() int { return encodedLen(c.shards) }

func encodedLen(shards []Shard) int {
	n := 0
	for _, s := range shards {
		if s.Kind != Remote {
			n++
		}
	}
	return 2 + 2*n + shardLen*len(shards)
}

// AppendBinary appends c's encoding to dst.
func (c Context) AppendBinary(dst []byte) ([]byte, error) { return appendShards(dst, c.shards) }

func appendShards(dst []byte, shards []Shard) ([]byte, error) {
	if len(shards) > math.MaxInt16 {
		return dst, fmt.Errorf("counters: context has %d shards, more than %d", len(shards), math.MaxInt16)
	}
	n := 0
	for _, s := range shards {
		if s.Kind != Remote {
			n++
		}
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	for i, s := range shards {
		switch s.Kind {
		case Global:
			dst = binary.BigEndian.AppendUint16(dst, uint16(int16(i+math.MinInt16)))
		case Local:
			dst = binary.BigEndian.AppendUint16(dst, uint16(i))
		}
	}
	for _, s := range shards {
		dst = append(dst, s.ID[:]...)
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.Clock))
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.Count))
	}
	return dst, nil
}

// MarshalBinary returns c's encoding.
func (c Context) MarshalBinary() ([]byte, error) {
	return c.AppendBinary(make([]byte, 0, c.EncodedLen()))
}

// ErrCorrupt is wrapped by every Decode error.
var ErrCorrupt = errors.New("counters: corrupt context")

// Decode parses an encoded context, checking every invariant: the header
// indexes ascend and stay in the body, the body is whole shards, ids ascend
// strictly. The empty input decodes to the empty context.
func Decode(b []byte) (Context, error) {
	shards, err := decodeShards(nil, b)
	if err != nil {
		return Context{}, err
	}
	return Context{shards: shards}, nil
}

// EncodedShard returns the shard owned by id in an encoded context, which
// it validates as Decode does, without allocating for contexts of up to 8
// shards (a replica checking whether a replicated context holds its own
// shard).
func EncodedShard(b []byte, id ID) (s Shard, ok bool, err error) {
	var buf [8]Shard
	shards, err := decodeShards(buf[:0], b)
	if err != nil {
		return Shard{}, false, err
	}
	s, ok = Context{shards: shards}.Shard(id)
	return s, ok, nil
}

// decodeShards is Decode appending the shards to buf (nil for an empty
// context).
func decodeShards(buf []Shard, b []byte) ([]Shard, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, header needs 2", ErrCorrupt, len(b))
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	if n < 0 {
		return nil, fmt.Errorf("%w: header count %d (clear-local flag) not supported", ErrCorrupt, n)
	}
	hdr := 2 + 2*n
	if len(b) < hdr {
		return nil, fmt.Errorf("%w: header of %d entries needs %d bytes, have %d", ErrCorrupt, n, hdr, len(b))
	}
	body := b[hdr:]
	if len(body)%shardLen != 0 {
		return nil, fmt.Errorf("%w: body of %d bytes is not whole %d-byte shards", ErrCorrupt, len(body), shardLen)
	}
	count := len(body) / shardLen
	if n > count {
		return nil, fmt.Errorf("%w: header names %d shards, body holds %d", ErrCorrupt, n, count)
	}
	shards := slices.Grow(buf[:0], count)[:count]
	for i := range shards {
		s := body[i*shardLen:]
		copy(shards[i].ID[:], s[:IDLen])
		shards[i].Clock = int64(binary.BigEndian.Uint64(s[IDLen:]))
		shards[i].Count = int64(binary.BigEndian.Uint64(s[IDLen+8:]))
		shards[i].Kind = Remote
		if i > 0 && shards[i-1].ID.Compare(shards[i].ID) >= 0 {
			return nil, fmt.Errorf("%w: shard %d id %s not above shard %d", ErrCorrupt, i, shards[i].ID, i-1)
		}
	}
	prev := -1
	for h := 0; h < n; h++ {
		v := int(int16(binary.BigEndian.Uint16(b[2+2*h:])))
		kind := Local
		if v < 0 {
			kind = Global
			v -= math.MinInt16
		}
		if v <= prev || v >= count {
			return nil, fmt.Errorf("%w: header entry %d names shard %d (previous %d, %d shards)", ErrCorrupt, h, v, prev, count)
		}
		shards[v].Kind = kind
		prev = v
	}
	return shards, nil
}

// ClearLocal returns the context with its local shards turned remote:
// what a Cassandra 2.0 replica stored when it received another node's
// context (CounterContext.clearAllLocal).
func (c Context) ClearLocal() Context {
	out := Context{shards: make([]Shard, len(c.shards))}
	for i, s := range c.shards {
		if s.Kind == Local {
			s.Kind = Remote
		}
		out.shards[i] = s
	}
	return out
}
