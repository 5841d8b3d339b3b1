package reset

import (
	"errors"
	"testing"
)

func rid(n int) ID {
	var id ID
	id[0] = 0xa0
	id[15] = byte(n)
	return id
}

func must(op Op, err error) Op {
	if err != nil {
		panic(err)
	}
	return op
}

func apply(t testing.TB, s *State, ops ...Op) {
	t.Helper()
	for _, op := range ops {
		if err := s.Apply(op); err != nil {
			t.Fatalf("apply %+v at %v: %v", op, s.Self(), err)
		}
	}
}

func entries(s *State) int {
	n := 0
	for _, k := range s.Keys() {
		n += len(s.Entries(k))
	}
	return n
}

// The scenario: five increments everywhere, then an increment at A
// concurrent with a reset at B. Every replica ends at 1 (reset-wins would
// read 0, a reset that is ignored 6), and holds only A's entry.
func TestConcurrentIncrementSurvives(t *testing.T) {
	a, b, c := NewCounter(rid(1)), NewCounter(rid(2)), NewCounter(rid(3))
	for range 5 {
		op := must(a.Inc("", 1))
		apply(t, b, op)
		apply(t, c, op)
	}
	inc := must(a.Inc("", 1))
	rst := must(b.ResetKey(""))
	if b.Value("") != 0 || entries(b) != 0 {
		t.Fatalf("after its reset b reads %d with %d entries", b.Value(""), entries(b))
	}
	apply(t, a, rst)
	apply(t, b, inc)
	apply(t, c, rst, inc) // the reset first here
	for _, s := range []*State{a, b, c} {
		if v := s.Value(""); v != 1 || entries(s) != 1 {
			t.Errorf("%v reads %d with %d entries, want 1 with 1", s.Self(), v, entries(s))
		}
	}
}

// A reset that overtakes the increments it cancels waits for them (an entry
// with c > C[j]) and then disappears: obliviousness under FIFO only.
func TestResetOvertakesIncrements(t *testing.T) {
	a, b, c := NewMap(rid(1)), NewMap(rid(2)), NewMap(rid(3))
	i1 := must(a.Inc("x", 2))
	i2 := must(a.Inc("y", 1))
	i3 := must(a.Inc("x", 3))
	apply(t, b, i1, i2, i3)
	r := must(b.ResetKey("x"))
	apply(t, c, r)
	if c.Value("x") != 0 || len(c.Entries("x")) != 1 {
		t.Fatalf("c holds %v for x, want one pending entry", c.Entries("x"))
	}
	apply(t, c, i1, i2)
	if len(c.Entries("x")) != 1 {
		t.Fatal("the pending entry went before the last cancelled increment arrived")
	}
	apply(t, c, i3)
	apply(t, a, r)
	for _, s := range []*State{a, b, c} {
		if s.Value("x") != 0 || len(s.Entries("x")) != 0 || s.Value("y") != 1 {
			t.Errorf("%v: x=%d (%v) y=%d, want x=0 with no entry, y=1", s.Self(), s.Value("x"), s.Entries("x"), s.Value("y"))
		}
	}
	// Counting again after the reset starts a new generation.
	i4 := must(a.Inc("x", 1))
	if !i4.Start {
		t.Error("the first increment after a reset does not start a generation")
	}
	apply(t, b, i4)
	apply(t, c, i4)
	for _, s := range []*State{a, b, c} {
		if s.Value("x") != 1 {
			t.Errorf("%v: x=%d after counting again, want 1", s.Self(), s.Value("x"))
		}
	}
}

// The inc effector's last two lines are written with i (the receiver) in
// the paper; read that way, a receiver never advances C[j], so its reset
// entries for j wait for increments that already arrived and the counter is
// never forgotten. With j (the sender, as Algorithm 2 and the proofs read),
// it is.
func TestLiteralIReadingBreaksObliviousness(t *testing.T) {
	run := func() (held int) {
		a, b := NewCounter(rid(1)), NewCounter(rid(2))
		inc := must(a.Inc("", 1))
		apply(t, b, inc)
		r := must(b.ResetKey(""))
		apply(t, a, r)
		return entries(a) + entries(b)
	}
	if n := run(); n != 0 {
		t.Fatalf("reading j: %d entries held after a full reset, want 0", n)
	}
	mut = mutLiteralI
	defer func() { mut = mutNone }()
	if n := run(); n == 0 {
		t.Fatal("reading i: the reset counter is forgotten, expected an entry held forever")
	}
}

func TestResetReplayIsHarmless(t *testing.T) {
	a, b := NewMap(rid(1)), NewMap(rid(2))
	apply(t, b, must(a.Inc("k", 4)))
	ctx := b.Observe("k") // a client read at b
	late := must(a.Inc("k", 3))
	apply(t, b, late)
	r1 := must(a.Reset(ctx))
	apply(t, b, r1)
	r2 := must(b.Reset(ctx)) // the DELETE replayed at another replica
	apply(t, a, r2)
	for _, s := range []*State{a, b} {
		if s.Value("k") != 3 {
			t.Errorf("%v reads %d, want the 3 counted after the read", s.Self(), s.Value("k"))
		}
	}
}

func TestRefusals(t *testing.T) {
	s := NewCounter(rid(1))
	if _, err := s.Inc("", -1); !errors.Is(err, ErrDecrement) {
		t.Errorf("decrement: %v", err)
	}
	if _, err := s.Inc("", 0); !errors.Is(err, ErrZeroDelta) {
		t.Errorf("zero: %v", err)
	}
	if _, err := s.Inc("k", 1); !errors.Is(err, ErrKey) {
		t.Errorf("key in a counter: %v", err)
	}
	op := must(s.Inc("", 1))
	if err := s.Apply(op); !errors.Is(err, ErrOwnOp) {
		t.Errorf("own op: %v", err)
	}
	o := NewCounter(rid(2))
	for _, bad := range []Op{
		{Kind: OpInc, From: rid(1), P: 1},
		{Kind: OpInc, From: rid(1), P: 1, W: 2},
		{Kind: 9, From: rid(1)},
		{Kind: OpReset, From: rid(1), Reset: Context{Keys: []KeyContext{{Key: ""}}}},
		{Kind: OpReset, From: rid(1), Reset: Context{Keys: []KeyContext{{Entries: []Observed{{rid(1), 2, 1}}}}}},
	} {
		if err := o.Apply(bad); err == nil {
			t.Errorf("applied %+v", bad)
		}
	}
	if entries(o) != 0 || len(o.ClockIDs()) != 0 {
		t.Error("a refused op changed the state")
	}
	big := NewCounter(rid(3))
	for range 2 {
		must(big.Inc("", 1<<62))
	}
	must(big.Inc("", 1<<62-1))
	must(big.Inc("", 1<<62))
	if _, err := big.Inc("", 1); !errors.Is(err, ErrOverflow) {
		t.Errorf("overflow: %v", err)
	}
}

// A weighted increment is the same as that many unit increments, whatever
// resets are interleaved (the randomized checker proves it against the
// oracle in general; this is the simplest case).
func TestWeightedIsUnits(t *testing.T) {
	w, u := NewCounter(rid(1)), NewCounter(rid(1))
	must(w.Inc("", 5))
	for range 5 {
		must(u.Inc("", 1))
	}
	bw, _ := w.MarshalBinary()
	bu, _ := u.MarshalBinary()
	if string(bw) != string(bu) {
		t.Fatalf("inc 5 %x, five inc 1 %x", bw, bu)
	}
}
