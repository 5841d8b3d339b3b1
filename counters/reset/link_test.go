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
