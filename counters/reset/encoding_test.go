package reset

import (
	"bytes"
	"testing"
)

// samples returns real states and ops: a small scenario with a pending
// reset entry, a map, a counter, and what the randomized checker reaches.
func samples(t testing.TB) (states, ops [][]byte) {
	a, b, c := NewMap(rid(1)), NewMap(rid(2)), NewMap(rid(3))
	var all []Op
	all = append(all, must(a.Inc("x", 2)), must(a.Inc("y", 1)), must(a.Inc("x", 300)))
	for _, op := range all {
		apply(t, b, op)
	}
	r := must(b.ResetKey("x"))
	apply(t, c, r)
	all = append(all, r, must(c.Inc("x", 1)), must(b.ResetAll()))
	cnt := NewCounter(rid(4))
	all = append(all, must(cnt.Inc("", 7)))
	for _, s := range []*State{a, b, c, cnt, NewCounter(rid(5))} {
		e, _ := s.MarshalBinary()
		states = append(states, e)
	}
	for _, op := range all {
		e, err := op.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, e)
	}
	rs, ro := reachable(t, 5, 3000)
	return append(states, rs...), append(ops, ro...)
}

func roundTripState(t testing.TB, b []byte) bool {
	t.Helper()
	var s State
	if s.UnmarshalBinary(b) != nil {
		return false
	}
	again, err := s.MarshalBinary()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("state re-encodes differently:\n in %x\nout %x", b, again)
	}
	return true
}

func roundTripOp(t testing.TB, b []byte) bool {
	t.Helper()
	var op Op
	if op.UnmarshalBinary(b) != nil {
		return false
	}
	again, err := op.MarshalBinary()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("op re-encodes differently:\n in %x\nout %x", b, again)
	}
	return true
}

func TestEncodingRoundTrip(t *testing.T) {
	states, ops := samples(t)
	for _, b := range states {
		if !roundTripState(t, b) {
			t.Fatalf("a real state does not decode: %x", b)
		}
	}
	for _, b := range ops {
		if !roundTripOp(t, b) {
			t.Fatalf("a real op does not decode: %x", b)
		}
	}
	s := NewMap(rid(1))
	must(s.Inc("k", 1))
	ctx := s.ObserveAll()
	cb, err := ctx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Context
	if err := back.UnmarshalBinary(cb); err != nil {
		t.Fatal(err)
	}
	if again, _ := back.MarshalBinary(); !bytes.Equal(again, cb) {
		t.Fatal("context round trip")
	}
	var o Outbox
	o.Push([]byte("a"))
	o.Push(nil)
	o.Ack(1)
	ob, _ := o.MarshalBinary()
	var o2 Outbox
	if err := o2.UnmarshalBinary(ob); err != nil || o2.Len() != 1 || o2.Pending()[0].Seq != 2 {
		t.Fatalf("outbox round trip: %v %+v", err, o2)
	}
	in := Inbox{delivered: 9}
	ib, _ := in.MarshalBinary()
	var in2 Inbox
	if err := in2.UnmarshalBinary(ib); err != nil || in2.Delivered() != 9 {
		t.Fatalf("inbox round trip: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	s := NewMap(rid(1))
	must(s.Inc("k", 1))
	good, _ := s.MarshalBinary()
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, b := range map[string][]byte{
		"empty":       nil,
		"version":     mod(func(b []byte) []byte { b[0] = 2; return b }),
		"type":        mod(func(b []byte) []byte { b[1] = 9; return b }),
		"truncated":   good[:len(good)-1],
		"trailing":    append(append([]byte(nil), good...), 0),
		"n > p":       mod(func(b []byte) []byte { b[len(b)-2] = 2; return b }),
		"p = n = c":   mod(func(b []byte) []byte { b[len(b)-2] = 1; return b }),
		"zero clock":  mod(func(b []byte) []byte { b[2+IDLen+1+IDLen] = 0; return b }),
		"counter key": mod(func(b []byte) []byte { b[1] = byte(KindCounter); return b }),
	} {
		var d State
		if err := d.UnmarshalBinary(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	op, _ := must(s.Inc("k", 1)).MarshalBinary()
	for name, b := range map[string][]byte{
		"start byte": append(append([]byte(nil), op[:len(op)-1]...), 2),
		"as state":   good,
		"truncated":  op[:5],
	} {
		var d Op
		if err := d.UnmarshalBinary(b); err == nil {
			t.Errorf("op %s: decoded", name)
		}
	}
	// A failed decode leaves the receiver alone.
	before, _ := s.MarshalBinary()
	if err := s.UnmarshalBinary(good[:10]); err == nil {
		t.Fatal("decoded a truncation")
	}
	if after, _ := s.MarshalBinary(); !bytes.Equal(before, after) {
		t.Error("a failed decode changed the state")
	}
}

// FuzzDecodeState: decoding arbitrary bytes never panics; a state that
// decodes re-encodes to the same bytes and accepts ops.
func FuzzDecodeState(f *testing.F) {
	states, _ := samples(f)
	for _, b := range states {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !roundTripState(t, b) {
			return
		}
		var s State
		_ = s.UnmarshalBinary(b)
		_, _ = s.Inc("", 1)
		_, _ = s.ResetAll()
		_ = s.Apply(Op{Kind: OpInc, From: rid(200), P: 3, W: 1})
	})
}

// FuzzDecodeOp: decoding arbitrary bytes never panics; an op that decodes
// re-encodes to the same bytes, and applying it does not panic.
func FuzzDecodeOp(f *testing.F) {
	_, ops := samples(f)
	for _, b := range ops {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !roundTripOp(t, b) {
			return
		}
		var op Op
		_ = op.UnmarshalBinary(b)
		_ = NewMap(rid(201)).Apply(op)
		_ = NewCounter(rid(201)).Apply(op)
	})
}
