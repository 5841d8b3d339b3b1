package borrow

import (
	"slices"
	"testing"
)

// TestRollbackFreshIdentityUnsound shows why a creator brought back to an
// older state by a machine crash (a periodic-mode commit log) is not made
// safe by a fresh identity alone, as vanilla counters are: with a new id
// its new loans and its new increments collide with nothing, but the dots
// it lent under the old id still have to be transferred, and neither place
// to fold them is safe.
//
// Creator c has its own dot at 5 and lent x to k1 (count 4) and y to k2
// (count 3), all fsynced. Then, in the records the crash takes back, it
// saw k1's retirement, folded x (own dot 9), counted 2 more (11), and its
// state reached replica r. It comes back at the fsynced state under a new
// id c2. 14 increments were issued.
//
//   - Folding an old id's dots into that id's own dot (the fold "idempotent
//     against the replicas' max"): c2 folds y, which retired after the
//     crash, into (c, 1): 5 + 3 = 8 against r's 11; the join keeps 11 and
//     drops y: 11 read, 3 lost.
//   - Folding them into the new id's dot: c2 learns x's retirement again
//     (from a replica that holds it, not the fold) and folds x into its
//     new dot; r's (c, 1) already holds x: 18 read for 14 issued.
//
// The column type therefore never lets a state leave before it is fsynced
// (borrowcol's syncLog; the checker's periodicWindow break).
func TestRollbackFreshIdentityUnsound(t *testing.T) {
	c, c2, k1, k2 := tid(10), tid(11), tid(21), tid(22)
	setup := func() (synced, r *State, x, y Dot) {
		s := New()
		s.Create(c, c)
		if err := s.Inc(c, 5); err != nil {
			t.Fatal(err)
		}
		x, y = s.Create(c, k1), s.Create(c, k2)
		s.Join(Write(k1, x, Cell{Count: 4}))
		s.Join(Write(k2, y, Cell{Count: 3}))
		synced = s.Clone()
		// The records the crash takes back.
		s.Join(Write(k1, x, Cell{Frozen: true, Count: 4}))
		if n := s.TransferAll(c); n != 4 {
			t.Fatalf("transferred %d, want 4", n)
		}
		if err := s.Inc(c, 2); err != nil {
			t.Fatal(err)
		}
		r = New()
		r.Join(s)
		mustValue(t, r, 14)
		return synced, r, x, y
	}

	t.Run("fold into the old id's dot loses", func(t *testing.T) {
		p, r, _, y := setup()
		p.Create(c2, c2) // the new identity counts here from now on
		p.Join(Write(k2, y, Cell{Frozen: true, Count: 3}))
		if n := p.Transfer(c, k2); n != 3 { // into (c, 1), at 5 here
			t.Fatalf("transferred %d, want 3", n)
		}
		r.Join(p)
		if v := r.Value(); v != 11 {
			t.Fatalf("value %d; the counterexample expects 11 (3 of 14 lost)", v)
		}
	})
	t.Run("fold into the new id's dot double-counts", func(t *testing.T) {
		p, r, x, _ := setup()
		p.Create(c2, c2)
		p.Join(Write(k1, x, Cell{Frozen: true, Count: 4}))
		// c2 transfers x, created under its old id c, into its new dot.
		p.dots = slices.DeleteFunc(p.dots, func(o Owned) bool { return o.Owner == k1 && o.Dot == x })
		if err := p.Inc(c2, 4); err != nil {
			t.Fatal(err)
		}
		r.Join(p)
		if v := r.Value(); v != 18 {
			t.Fatalf("value %d; the counterexample expects 18 (14 issued, x counted twice)", v)
		}
	})
}
