package reset

import (
	"errors"
	"slices"
)

// The algorithm needs every op of a cell applied exactly once at every other
// replica, in the order its sender generated it. Outbox and Inbox give that
// over a network that loses, duplicates and reorders: one Outbox per
// (sender, cell, destination) numbers the ops and keeps each until the
// destination acknowledges it, one Inbox per (receiver, cell, sender) hands
// them over in order, once. Both are pure; the caller moves Envelopes and
// acks over its transport and resends Pending now and then.
//
// Durability: the Outbox must be durable with the state that generated its
// ops (an op is generated, applied locally and pushed in one write), and an
// Inbox's Delivered count must be durable with the state the delivered ops
// were applied to (apply the op from Next and store the new count in one
// write). Ops buffered beyond a gap are not durable: Forget drops them after
// a crash, and the sender's resend brings them back.

// Envelope is an op's payload with its sequence number on one channel.
type Envelope struct {
	Seq     uint64 // 1, 2, … per channel
	Payload []byte
}

// Outbox numbers the ops a replica sends to one destination and keeps them
// until acknowledged.
type Outbox struct {
	acked   uint64   // every seq ≤ acked is acknowledged
	pending [][]byte // payloads of seqs acked+1, acked+2, …
}

// Push appends an op's payload and returns its envelope, to be sent now.
func (o *Outbox) Push(payload []byte) Envelope {
	o.pending = append(o.pending, payload)
	return Envelope{o.acked + uint64(len(o.pending)), payload}
}

// Pending returns the envelopes not yet acknowledged, in order: what to
// resend.
func (o *Outbox) Pending() []Envelope {
	out := make([]Envelope, len(o.pending))
	for k, p := range o.pending {
		out[k] = Envelope{o.acked + uint64(k) + 1, p}
	}
	return out
}

// Len returns the number of ops not yet acknowledged.
func (o *Outbox) Len() int { return len(o.pending) }

// Ack records a cumulative acknowledgement: every seq ≤ upTo arrived. Old or
// duplicated acks are ignored, and so is one beyond what was sent.
func (o *Outbox) Ack(upTo uint64) {
	if upTo <= o.acked || upTo > o.acked+uint64(len(o.pending)) {
		return
	}
	k := upTo - o.acked
	o.pending = slices.Delete(o.pending, 0, int(k))
	o.acked = upTo
}

// Inbox delivers one sender's ops in order and exactly once.
type Inbox struct {
	delivered uint64            // every seq ≤ delivered was handed over
	held      map[uint64][]byte // seqs beyond a gap
}

// MaxHeld bounds the ops an Inbox holds beyond a gap; later ones are dropped
// (the sender resends them).
const MaxHeld = 1024

// Receive takes an envelope off the network: an old or duplicate one is
// ignored, a later one is held until the gap before it is filled. It
// returns the cumulative ack to send back.
func (in *Inbox) Receive(e Envelope) (ack uint64) {
	if e.Seq > in.delivered && e.Seq <= in.delivered+MaxHeld {
		if in.held == nil {
			in.held = map[uint64][]byte{}
		}
		in.held[e.Seq] = e.Payload
	}
	return in.delivered
}

// Next hands over the next op in order, if it has arrived, and counts it
// delivered.
func (in *Inbox) Next() ([]byte, bool) {
	p, ok := in.held[in.delivered+1]
	if !ok {
		return nil, false
	}
	delete(in.held, in.delivered+1)
	in.delivered++
	return p, true
}

// Delivered returns the count of ops handed over: the cumulative ack.
func (in *Inbox) Delivered() uint64 { return in.delivered }

// Forget drops the ops held beyond a gap (they are not durable).
func (in *Inbox) Forget() { in.held = nil }

// MarshalBinary encodes what of the outbox is durable: version byte, type
// byte 0x21, acked (uvarint), n (uvarint), then n × (payload length uvarint,
// payload).
func (o *Outbox) MarshalBinary() ([]byte, error) { return o.AppendBinary(nil) }

// AppendBinary appends the outbox's encoding (MarshalBinary's) to b.
func (o *Outbox) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, Version, typeOutbox)
	b = appendUvarint(b, o.acked)
	b = appendUvarint(b, uint64(len(o.pending)))
	for _, p := range o.pending {
		b = appendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b, nil
}

// UnmarshalBinary decodes an outbox encoded by MarshalBinary; bad bytes are
// an error and o is unchanged then.
func (o *Outbox) UnmarshalBinary(b []byte) error {
	_, b, err := readHeader(b, typeOutbox)
	if err != nil {
		return err
	}
	var d Outbox
	var n uint64
	if d.acked, b, err = readUvarint(b); err != nil {
		return err
	}
	if n, b, err = readUvarint(b); err != nil {
		return err
	}
	if n > uint64(len(b)) || d.acked+n < d.acked {
		return errCorrupt
	}
	for range n {
		var l uint64
		if l, b, err = readUvarint(b); err != nil {
			return err
		}
		if l > uint64(len(b)) {
			return errCorrupt
		}
		d.pending = append(d.pending, slices.Clone(b[:l]))
		b = b[l:]
	}
	if len(b) != 0 {
		return errors.New("reset: trailing bytes")
	}
	*o = d
	return nil
}

// MarshalBinary encodes what of the inbox is durable: version byte, type
// byte 0x22, delivered (uvarint).
func (in *Inbox) MarshalBinary() ([]byte, error) { return in.AppendBinary(nil) }

// AppendBinary appends the inbox's encoding (MarshalBinary's) to b.
func (in *Inbox) AppendBinary(b []byte) ([]byte, error) {
	return appendUvarint(append(b, Version, typeInbox), in.delivered), nil
}

// UnmarshalBinary decodes an inbox encoded by MarshalBinary (with nothing
// held); bad bytes are an error and in is unchanged then.
func (in *Inbox) UnmarshalBinary(b []byte) error {
	_, b, err := readHeader(b, typeInbox)
	if err != nil {
		return err
	}
	d, b, err := readUvarint(b)
	if err != nil {
		return err
	}
	if len(b) != 0 {
		return errors.New("reset: trailing bytes")
	}
	*in = Inbox{delivered: d}
	return nil
}

// OutboxAt returns an empty outbox whose next op gets sequence acked+1: the
// channel to a replica that already has (from another replica's state it
// adopted) every op of this sender numbered up to acked.
func OutboxAt(acked uint64) *Outbox { return &Outbox{acked: acked} }

// Fork returns a copy of the outbox: a channel to another destination that
// numbers the same ops the same way and holds every op this one holds.
func (o *Outbox) Fork() *Outbox {
	return &Outbox{acked: o.acked, pending: slices.Clone(o.pending)}
}

// Acked returns the cumulative acknowledgement: every seq ≤ Acked arrived.
func (o *Outbox) Acked() uint64 { return o.acked }

// InboxAt returns an inbox that has delivered every seq ≤ delivered: the
// channel from a sender whose ops up to delivered are in a state the
// receiver adopted.
func InboxAt(delivered uint64) *Inbox { return &Inbox{delivered: delivered} }

// Skip counts every seq ≤ to delivered (their ops are in a state the
// receiver adopted) and drops what it held of them; an inbox already
// beyond to is left as is.
func (in *Inbox) Skip(to uint64) {
	if to <= in.delivered {
		return
	}
	for s := range in.held {
		if s <= to {
			delete(in.held, s)
		}
	}
	in.delivered = to
}
