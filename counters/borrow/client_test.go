package borrow

import (
	"errors"
	"testing"
)

// TestClientRetriesAnywhere: every write carries the dot's cumulative count,
// so a write lost, resent, duplicated or reordered, to any replica, counts
// once; the retirement brings every replica to the total with no borrowed
// dot left.
func TestClientRetriesAnywhere(t *testing.T) {
	a, c := New(), New()
	a.Create(idA, idA)
	c.Create(idC, idC)
	cl := NewClient(tid(40))
	if _, err := cl.Add(1); !errors.Is(err, ErrNoLoan) {
		t.Fatalf("Add before a loan: %v", err)
	}
	if err := cl.Ask(idA); err != nil {
		t.Fatal(err)
	}
	if err := cl.Lent(a.Create(idA, cl.ID())); err != nil {
		t.Fatal(err)
	}
	w1, _ := cl.Add(3)
	w2, _ := cl.Add(4)
	c.Join(w2) // reaches c first, before a's state
	a.Join(w2)
	a.Join(w1) // late duplicate of an older write
	c.Join(w1)
	c.Join(w2)
	mustValue(t, a, 7)
	mustValue(t, c, 7)
	ret, err := cl.Retire()
	if err != nil {
		t.Fatal(err)
	}
	c.Join(ret) // the durable holder is c, not the creator
	c.Join(w2)
	a.Join(c)
	if got := c.TransferAll(idC); got != 0 {
		t.Fatalf("c transferred %d", got)
	}
	if got := a.TransferAll(idA); got != 7 {
		t.Fatalf("a transferred %d, want 7", got)
	}
	c.Join(w2) // a retry arriving after everything
	c.Join(a)
	a.Join(w1)
	for _, s := range []*State{a, c} {
		mustValue(t, s, 7)
		if s.Borrowed() != 0 {
			t.Fatalf("borrowed dots left: %v", s.Dots())
		}
	}
}

// TestClientLostAnswer is decision (c): the answer from a is lost, the
// client borrows from c instead; it must learn a's dot (asking a again gets
// the same dot) before it may retire, so a's dot is frozen too and no dot
// is left active forever.
func TestClientLostAnswer(t *testing.T) {
	a, c := New(), New()
	a.Create(idA, idA)
	c.Create(idC, idC)
	cl := NewClient(tid(41))
	_ = cl.Ask(idA)
	lost := a.Create(idA, cl.ID()) // the answer never arrives
	_ = cl.Ask(idC)
	if err := cl.Lent(c.Create(idC, cl.ID())); err != nil {
		t.Fatal(err)
	}
	w, _ := cl.Add(5)
	a.Join(w)
	if _, err := cl.Retire(); !errors.Is(err, ErrUnknownLoans) {
		t.Fatalf("Retire with an unknown answer: %v", err)
	}
	if u := cl.Unknown(); len(u) != 1 || u[0] != idA {
		t.Fatalf("unknown %v", u)
	}
	again := a.Create(idA, cl.ID())
	if again != lost {
		t.Fatalf("a lent %v, then %v", lost, again)
	}
	if err := cl.Lent(again); err != nil {
		t.Fatal(err)
	}
	ret, err := cl.Retire()
	if err != nil {
		t.Fatal(err)
	}
	a.Join(ret)
	a.TransferAll(idA)
	c.Join(a)
	c.TransferAll(idC)
	a.Join(c)
	for _, s := range []*State{a, c} {
		mustValue(t, s, 5)
		if s.Borrowed() != 0 {
			t.Fatalf("borrowed dots left: %v", s.Dots())
		}
	}
	if _, err := cl.Add(1); !errors.Is(err, ErrRetired) {
		t.Fatalf("Add after Retire: %v", err)
	}
}

// TestClientLentTwice: a creator that answers with another dot than before
// (it lost its state) is an error, not a silent switch.
func TestClientLentTwice(t *testing.T) {
	cl := NewClient(tid(42))
	_ = cl.Ask(idA)
	if err := cl.Lent(Dot{idA, 2}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Lent(Dot{idA, 2}); err != nil {
		t.Fatalf("duplicate answer: %v", err)
	}
	if err := cl.Lent(Dot{idA, 3}); err == nil {
		t.Fatal("a second dot from the same creator was accepted")
	}
	if err := cl.Lent(Dot{idB, 1}); err == nil {
		t.Fatal("an answer from a creator not asked was accepted")
	}
}
