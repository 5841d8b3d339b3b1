package reset

import (
	"errors"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

func TestInboxOrderAndDuplicates(t *testing.T) {
	var o Outbox
	var in Inbox
	e1, e2, e3 := o.Push([]byte{1}), o.Push([]byte{2}), o.Push([]byte{3})
	var got []byte
	drain := func() {
		for {
			p, ok := in.Next()
			if !ok {
				return
			}
			got = append(got, p[0])
		}
	}
	in.Receive(e3)
	in.Receive(e2)
	drain()
	if len(got) != 0 {
		t.Fatalf("delivered %v across a gap", got)
	}
	o.Ack(in.Receive(e1))
	drain()
	in.Receive(e2) // a duplicate
	drain()
	o.Ack(in.Receive(e1))
	if string(got) != "\x01\x02\x03" || in.Delivered() != 3 {
		t.Fatalf("delivered %v, %d", got, in.Delivered())
	}
	o.Ack(3)
	o.Ack(2) // stale
	o.Ack(9) // beyond what was sent
	if o.Len() != 0 || o.Push(nil).Seq != 4 {
		t.Fatalf("outbox after acks: %d pending", o.Len())
	}
	var bad Outbox
	for _, b := range [][]byte{nil, {Version, typeInbox, 0}, {Version, typeOutbox, 0, 2, 0}} {
		if bad.UnmarshalBinary(b) == nil {
			t.Errorf("outbox %x decoded", b)
		}
	}
}

// Over a network that loses, duplicates and reorders, with resends, every
// op is handed over once and in order.
func TestLinkExactlyOnceFIFO(t *testing.T) {
	r := testseed.Rand(t)
	var o Outbox
	var in Inbox
	var net []Envelope
	var acks []uint64
	pushed := 0
	var got []byte
	for step := 0; step < 5000 || o.Len() > 0; step++ {
		switch x := r.IntN(10); {
		case x < 1 && step < 5000:
			net = append(net, o.Push([]byte{byte(pushed)}))
			pushed++
		case x < 2:
			p := o.Pending()
			net = append(net, p[:min(len(p), 2)]...) // a resend window
		case x < 9 && len(net) > 0:
			k := r.IntN(len(net))
			e := net[k]
			if r.IntN(8) != 0 { // else duplicated
				net[k] = net[len(net)-1]
				net = net[:len(net)-1]
			}
			if r.IntN(5) == 0 {
				continue // lost
			}
			acks = append(acks, in.Receive(e))
			for {
				p, ok := in.Next()
				if !ok {
					break
				}
				got = append(got, p[0])
			}
		case len(acks) > 0:
			k := r.IntN(len(acks))
			o.Ack(acks[k])
			acks = append(acks[:k], acks[k+1:]...)
		}
		if r.IntN(500) == 0 {
			in.Forget() // a crash of the receiver
		}
	}
	if len(got) != pushed || len(got) != int(in.Delivered()) {
		t.Fatalf("%d handed over of %d, delivered %d", len(got), pushed, in.Delivered())
	}
	for k, b := range got {
		if b != byte(k) {
			t.Fatalf("op %d handed over as %d", k, b)
		}
	}
}

// Why C is scoped per cell: when one C is shared by cells that different
// replicas receive (vnodes give each partition its own replica set), a
// receiver's C[j] misses the increments of j it never receives. Apply
// refuses such an increment (ErrOrder: its p is not C[j] + w); forced in,
// a reset's c stays beyond the receiver's C[j], waits for ever, and the
// counter is never forgotten.
func TestSharedClockAcrossReplicaSetsLeaks(t *testing.T) {
	a, b := NewMap(rid(1)), NewMap(rid(2))
	must(a.Inc("other partition", 1)) // b does not replicate it
	inc := must(a.Inc("x", 1))
	if err := b.Apply(inc); !errors.Is(err, ErrOrder) {
		t.Fatalf("apply: %v, want ErrOrder", err)
	}
	if err := b.effectInc(inc.From, inc.Key, inc.P, inc.W, inc.Start); err != nil {
		t.Fatal(err)
	}
	apply(t, b, must(a.ResetKey("x")))
	if a.Value("x") != 0 || b.Value("x") != 0 {
		t.Fatal("the reset did not reset")
	}
	if len(b.Entries("x")) == 0 {
		t.Fatal("expected the shared clock to leave an entry behind")
	}
	// Per cell, the same ops leave nothing.
	a, b = NewMap(rid(1)), NewMap(rid(2))
	apply(t, b, must(a.Inc("x", 1)))
	apply(t, b, must(a.ResetKey("x")))
	if len(a.Entries("x"))+len(b.Entries("x")) != 0 {
		t.Fatal("per-cell clock left an entry")
	}
}

// Apply detects some FIFO violations: a duplicated or early start
// increment, an increment beyond what its sender can have generated.
func TestApplyDetectsDisorder(t *testing.T) {
	a, b := NewCounter(rid(1)), NewCounter(rid(2))
	i1 := must(a.Inc("", 1))
	i2 := must(a.Inc("", 1))
	if err := b.Apply(i2); !errors.Is(err, ErrOrder) {
		t.Errorf("second before first: %v", err)
	}
	apply(t, b, i1)
	if err := b.Apply(i1); !errors.Is(err, ErrOrder) {
		t.Errorf("duplicate start: %v", err)
	}
	apply(t, b, i2)
	if b.Value("") != 2 {
		t.Errorf("b reads %d", b.Value(""))
	}
	// A context naming increments of b it never made.
	forged := Context{Keys: []KeyContext{{Entries: []Observed{{rid(2), 1, 9}}}}}
	if _, err := b.Reset(forged); !errors.Is(err, ErrInvalidOp) {
		t.Errorf("forged context: %v", err)
	}
}

// TestForkedChannels: an outbox forked from another numbers the same ops
// the same way, and an inbox started at a count (adopting a state that
// holds the ops up to it) delivers exactly what follows, from either.
func TestForkedChannels(t *testing.T) {
	a := &Outbox{}
	for i := range 5 {
		a.Push([]byte{byte(i + 1)})
	}
	a.Ack(2)
	b := a.Fork()
	if b.Acked() != 2 || b.Len() != 3 {
		t.Fatalf("fork: acked %d, %d pending", b.Acked(), b.Len())
	}
	if e, f := a.Push([]byte{6}), b.Push([]byte{6}); e.Seq != 6 || f.Seq != 6 {
		t.Fatalf("seqs after the fork: %d and %d, want 6", e.Seq, f.Seq)
	}
	if e := OutboxAt(5).Push([]byte{6}); e.Seq != 6 {
		t.Fatalf("OutboxAt(5)'s first seq = %d", e.Seq)
	}
	in := InboxAt(4)
	for _, e := range b.Pending() {
		in.Receive(e)
	}
	var got []byte
	for p, ok := in.Next(); ok; p, ok = in.Next() {
		got = append(got, p[0])
	}
	if string(got) != "\x05\x06" || in.Delivered() != 6 {
		t.Fatalf("delivered %v up to %d, want [5 6] up to 6", got, in.Delivered())
	}
	held := &Inbox{}
	held.Receive(Envelope{Seq: 3, Payload: []byte{3}})
	held.Receive(Envelope{Seq: 5, Payload: []byte{5}})
	held.Skip(4)
	if p, ok := held.Next(); !ok || p[0] != 5 || held.Delivered() != 5 {
		t.Fatalf("after Skip(4): %v %v, delivered %d", p, ok, held.Delivered())
	}
	held.Skip(2) // behind: nothing changes
	if held.Delivered() != 5 {
		t.Fatalf("Skip backwards moved delivered to %d", held.Delivered())
	}
}
