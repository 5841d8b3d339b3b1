package resetcol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/idemkv/idemkv/counters/reset"
)

// The three encodings of the package, told apart by their first byte.
const (
	// FormatCell is a replica's stored cell (EncodeCell).
	FormatCell = 1
	// FormatOp is a replicated op, the value of a leader's Mutation (EncodeOp).
	FormatOp = 2
	// FormatSync is an anti-entropy message between two replicas (EncodeSync).
	FormatSync = 3
	// FormatMapCell is a replica's stored cell of the map form (EncodeCell
	// of a blob whose state is a map, reset.KindMap): FormatCell's layout
	// after its first byte.
	FormatMapCell = 4
)

// ErrCorrupt is wrapped by every decoding error of the package.
var ErrCorrupt = errors.New("resetcol: bad encoding")

// Blob is one replica's durable state of one cell.
type Blob struct {
	Version uint64 // bumped on every write
	Gen     uint64 // ops this replica generated in the cell
	State   *reset.State
	Out     map[reset.ID]*reset.Outbox // to each peer: ops not acknowledged
	In      map[reset.ID]*reset.Inbox  // from each origin: ops delivered
	// Recent are the client op ids of the increments the write of this
	// version applied (led or delivered), ascending id. The op ids of the
	// whole window are kept beside the cells (recentOps), learnt from these
	// at a start; a blob written before that held all of them.
	Recent []OpRecord
}

// OpRecord is a client's op id with the time it was first seen (unix
// nanoseconds, the client's OpTime).
type OpRecord struct {
	ID   [16]byte
	Time int64
}

// Delivered returns the sum of the blob's delivered-sequence vector: the
// ops it generated plus the ops it delivered from every other replica.
func (b *Blob) Delivered() uint64 {
	s := b.Gen
	for _, in := range b.In {
		s += in.Delivered()
	}
	return s
}

// Pending returns the number of ops its outboxes hold, summed over peers.
func (b *Blob) Pending() int {
	n := 0
	for _, o := range b.Out {
		n += o.Len()
	}
	return n
}

// EncodeCell returns the cell value of a blob:
//
//	1 byte   FormatCell (a counter), or FormatMapCell (a map of counters)
//	uvarint  version
//	uvarint  gen
//	uvarint  length, then reset.State.MarshalBinary (one counter, KindCounter,
//	         after FormatCell; a map, KindMap, after FormatMapCell)
//	uvarint  n, then n × (peer id [16], uvarint length, reset.Outbox bytes), ascending id
//	uvarint  n, then n × (origin id [16], uvarint length, reset.Inbox bytes), ascending id
//	uvarint  n, then n × (client op id [16], uvarint time ≥ 0), ascending op id:
//	         the op ids the write of this version applied (Blob.Recent)
func EncodeCell(b *Blob) ([]byte, error) { return AppendCell(nil, b) }

// AppendCell appends EncodeCell's bytes to out: a writer that knows the
// blob's last size passes a buffer that holds it, and the nested
// encodings are written in place rather than each in a slice of its own.
func AppendCell(out []byte, b *Blob) ([]byte, error) {
	format := byte(FormatCell)
	if b.State.Kind() == reset.KindMap {
		format = FormatMapCell
	}
	out = append(out, format)
	out = binary.AppendUvarint(out, b.Version)
	out = binary.AppendUvarint(out, b.Gen)
	out, err := appendNested(out, b.State.AppendBinary)
	if err != nil {
		return nil, fmt.Errorf("resetcol: encode state: %w", err)
	}
	var ids [8]reset.ID
	out = binary.AppendUvarint(out, uint64(len(b.Out)))
	for _, id := range reset.SortedIDs(ids[:0], b.Out) {
		out = append(out, id[:]...)
		if out, err = appendNested(out, b.Out[id].AppendBinary); err != nil {
			return nil, fmt.Errorf("resetcol: encode outbox: %w", err)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(b.In)))
	for _, id := range reset.SortedIDs(ids[:0], b.In) {
		out = append(out, id[:]...)
		if out, err = appendNested(out, b.In[id].AppendBinary); err != nil {
			return nil, fmt.Errorf("resetcol: encode inbox: %w", err)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(b.Recent)))
	for _, r := range b.Recent {
		out = append(out, r.ID[:]...)
		out = binary.AppendUvarint(out, uint64(r.Time))
	}
	return out, nil
}

// DecodeCell parses a cell value encoded by EncodeCell. Bad bytes, ids
// out of order and trailing bytes are errors (wrapping ErrCorrupt).
func DecodeCell(v []byte) (*Blob, error) {
	d := &dec{b: v}
	kind := reset.KindCounter
	switch d.byte() {
	case FormatCell:
	case FormatMapCell:
		kind = reset.KindMap
	default:
		return nil, fmt.Errorf("%w: not a reset_counter cell", ErrCorrupt)
	}
	b := &Blob{Version: d.uvarint(), Gen: d.uvarint(), Out: map[reset.ID]*reset.Outbox{}, In: map[reset.ID]*reset.Inbox{}}
	st := d.bytes()
	if d.err != nil {
		return nil, d.err
	}
	b.State = reset.NewCounter(reset.ID{})
	if err := b.State.UnmarshalBinary(st); err != nil {
		return nil, fmt.Errorf("%w: state: %w", ErrCorrupt, err)
	}
	if b.State.Kind() != kind {
		return nil, fmt.Errorf("%w: a state of kind %d in a cell of kind %d", ErrCorrupt, b.State.Kind(), kind)
	}
	var prev *reset.ID
	for n := d.count(); n > 0 && d.err == nil; n-- {
		id, enc := d.id(), d.bytes()
		d.ascending(&prev, id)
		if d.err != nil {
			break
		}
		o := &reset.Outbox{}
		if err := o.UnmarshalBinary(enc); err != nil {
			return nil, fmt.Errorf("%w: outbox: %w", ErrCorrupt, err)
		}
		b.Out[id] = o
	}
	prev = nil
	for n := d.count(); n > 0 && d.err == nil; n-- {
		id, enc := d.id(), d.bytes()
		d.ascending(&prev, id)
		if d.err != nil {
			break
		}
		in := &reset.Inbox{}
		if err := in.UnmarshalBinary(enc); err != nil {
			return nil, fmt.Errorf("%w: inbox: %w", ErrCorrupt, err)
		}
		b.In[id] = in
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		var r OpRecord
		r.ID = d.id()
		t := d.uvarint()
		if t > math.MaxInt64 {
			d.fail("op time out of range")
		}
		r.Time = int64(t)
		if k := len(b.Recent); k > 0 && bytes.Compare(b.Recent[k-1].ID[:], r.ID[:]) >= 0 {
			d.fail("op ids not ascending")
		}
		b.Recent = append(b.Recent, r)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	self := b.State.Self()
	if _, ok := b.Out[self]; ok {
		return nil, fmt.Errorf("%w: an outbox to the cell's own replica", ErrCorrupt)
	}
	if _, ok := b.In[self]; ok {
		return nil, fmt.Errorf("%w: an inbox from the cell's own replica", ErrCorrupt)
	}
	return b, nil
}

// Seq is an op's sequence number on the channel to one peer.
type Seq struct {
	Peer reset.ID
	Seq  uint64
}

// EncodeOp returns the value of a replicated op: the origin, the encoded
// reset.Op, and its sequence number on each peer's channel:
//
//	1 byte   FormatOp
//	[16]     origin id
//	uvarint  length, then the op as EncodeChannelOp encodes it
//	uvarint  n, then n × (peer id [16], uvarint seq ≥ 1), ascending id
//
// An op with no sequence numbers is addressed to nobody (a reset of a
// counter with nothing to cancel).
func EncodeOp(origin reset.ID, op []byte, seqs []Seq) []byte {
	seqs = slices.Clone(seqs)
	slices.SortFunc(seqs, func(a, b Seq) int { return a.Peer.Compare(b.Peer) })
	out := append([]byte{FormatOp}, origin[:]...)
	out = appendBytes(out, op)
	out = binary.AppendUvarint(out, uint64(len(seqs)))
	for _, s := range seqs {
		out = append(out, s.Peer[:]...)
		out = binary.AppendUvarint(out, s.Seq)
	}
	return out
}

// DecodeOp parses a value encoded by EncodeOp. The op itself is checked
// only when it is addressed to someone (it must decode as a reset.Op of
// the origin).
func DecodeOp(v []byte) (origin reset.ID, op []byte, seqs []Seq, err error) {
	d := &dec{b: v}
	if d.byte() != FormatOp {
		return origin, nil, nil, fmt.Errorf("%w: not a reset_counter op", ErrCorrupt)
	}
	origin, op = d.id(), d.bytes()
	var prev *reset.ID
	for n := d.count(); n > 0 && d.err == nil; n-- {
		s := Seq{Peer: d.id(), Seq: d.uvarint()}
		d.ascending(&prev, s.Peer)
		if s.Seq == 0 || s.Peer == origin {
			d.fail("bad sequence number")
		}
		seqs = append(seqs, s)
	}
	if err := d.end(); err != nil {
		return origin, nil, nil, err
	}
	if len(seqs) > 0 {
		o, _, err := DecodeChannelOp(op)
		if err != nil {
			return origin, nil, nil, err
		}
		if o.From != origin {
			return origin, nil, nil, fmt.Errorf("%w: an op of %s sent by %s", ErrCorrupt, o.From, origin)
		}
	}
	return origin, op, seqs, nil
}

// EncodeChannelOp returns what travels on a channel for one op (an
// outbox's payload, a replicated op's op): the client's op id, if the op
// is an increment that carried one, then the reset.Op:
//
//	1 byte   0, or 1 followed by op id [16] and uvarint time
//	...      reset.Op.MarshalBinary
func EncodeChannelOp(op []byte, rec *OpRecord) []byte {
	if rec == nil {
		return append([]byte{0}, op...)
	}
	out := append([]byte{1}, rec.ID[:]...)
	out = binary.AppendUvarint(out, uint64(rec.Time))
	return append(out, op...)
}

// DecodeChannelOp parses bytes encoded by EncodeChannelOp.
func DecodeChannelOp(v []byte) (reset.Op, *OpRecord, error) {
	d := &dec{b: v}
	var rec *OpRecord
	switch d.byte() {
	case 0:
	case 1:
		rec = &OpRecord{ID: d.id()}
		t := d.uvarint()
		if t > math.MaxInt64 {
			d.fail("op time out of range")
		}
		rec.Time = int64(t)
	default:
		d.fail("bad op id flag")
	}
	if d.err != nil {
		return reset.Op{}, nil, d.err
	}
	var o reset.Op
	if err := o.UnmarshalBinary(d.b); err != nil {
		return reset.Op{}, nil, fmt.Errorf("%w: op: %w", ErrCorrupt, err)
	}
	if rec != nil && o.Kind != reset.OpInc {
		return reset.Op{}, nil, fmt.Errorf("%w: an op id on a reset", ErrCorrupt)
	}
	return o, rec, nil
}

// Sync is an anti-entropy message from one replica to another about one
// cell: the sender's ack of the receiver's stream and the sender's ops the
// receiver has not acknowledged.
type Sync struct {
	From, To reset.ID
	Ack      uint64 // ops of To that From delivered
	Ops      []reset.Envelope
}

// EncodeSync returns the bytes of a Sync:
//
//	1 byte   FormatSync
//	[16]     from, [16] to
//	uvarint  ack
//	uvarint  n, then n × (uvarint seq, uvarint length, EncodeChannelOp bytes), ascending seq
func EncodeSync(s Sync) []byte {
	out := append([]byte{FormatSync}, s.From[:]...)
	out = append(out, s.To[:]...)
	out = binary.AppendUvarint(out, s.Ack)
	out = binary.AppendUvarint(out, uint64(len(s.Ops)))
	for _, e := range s.Ops {
		out = binary.AppendUvarint(out, e.Seq)
		out = appendBytes(out, e.Payload)
	}
	return out
}

// DecodeSync parses bytes encoded by EncodeSync.
func DecodeSync(v []byte) (Sync, error) {
	d := &dec{b: v}
	if d.byte() != FormatSync {
		return Sync{}, fmt.Errorf("%w: not a reset_counter sync message", ErrCorrupt)
	}
	s := Sync{From: d.id(), To: d.id(), Ack: d.uvarint()}
	var last uint64
	for n := d.count(); n > 0 && d.err == nil; n-- {
		e := reset.Envelope{Seq: d.uvarint(), Payload: d.bytes()}
		if e.Seq <= last {
			d.fail("sequence numbers not ascending")
		}
		last = e.Seq
		s.Ops = append(s.Ops, e)
	}
	if err := d.end(); err != nil {
		return Sync{}, err
	}
	if s.From == s.To {
		return Sync{}, fmt.Errorf("%w: a sync message to its sender", ErrCorrupt)
	}
	return s, nil
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendNested appends a uvarint length and then what enc appends, as
// appendBytes does with enc's bytes, without a slice of their own: enc
// writes after room for the longest length, and its bytes move back
// behind the length once it is known.
func appendNested(b []byte, enc func([]byte) ([]byte, error)) ([]byte, error) {
	start := len(b)
	b = append(b, make([]byte, binary.MaxVarintLen64)...)
	body := len(b)
	b, err := enc(b)
	if err != nil {
		return nil, err
	}
	n := len(b) - body
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(n))
	copy(b[start+h:], b[body:])
	copy(b[start:], hdr[:h])
	return b[:start+h+n], nil
}

// dec reads the package's encodings; the first error sticks.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, msg)
	}
}

func (d *dec) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != len(binary.AppendUvarint(nil, v)) {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads an element count, bounded by the bytes left (every element
// takes at least one byte).
func (d *dec) count() uint64 {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("count beyond the bytes left")
		return 0
	}
	return n
}

func (d *dec) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("truncated")
		return nil
	}
	v := bytes.Clone(d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *dec) id() reset.ID {
	var id reset.ID
	if d.err != nil || len(d.b) < len(id) {
		d.fail("truncated id")
		return id
	}
	copy(id[:], d.b)
	d.b = d.b[len(id):]
	return id
}

// ascending checks that ids come in strictly ascending order.
func (d *dec) ascending(prev **reset.ID, id reset.ID) {
	if *prev != nil && (*prev).Compare(id) >= 0 {
		d.fail("ids not ascending")
	}
	*prev = &id
}

func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	return d.err
}
