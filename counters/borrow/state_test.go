package borrow

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// tid makes a test id: n in the last two bytes, a marker in the first.
func tid(n int) ID {
	var id ID
	id[0] = 0xb0
	id[14] = byte(n >> 8)
	id[15] = byte(n)
	return id
}

var (
	idA = tid(1)
	idB = tid(2)
	idC = tid(3)
)

func mustValue(t *testing.T, s *State, want uint64) {
	t.Helper()
	if got := s.Value(); got != want {
		t.Fatalf("value %d, want %d; dots %v", got, want, s.Dots())
	}
}

// TestFigure2 replays the paper's example step by step: a permanent, b
// transient.
func TestFigure2(t *testing.T) {
	s := New()
	a1 := s.Create(idA, idA) // s1
	if a1 != (Dot{idA, 1}) || s.ctx.max(idA) != 1 {
		t.Fatalf("s1: dot %v, max_a %d", a1, s.ctx.max(idA))
	}
	a2 := s.Create(idA, idB) // s2
	if a2 != (Dot{idA, 2}) || s.ctx.max(idA) != 2 {
		t.Fatalf("s2: dot %v, max_a %d", a2, s.ctx.max(idA))
	}
	if err := s.Inc(idA, 9); err != nil { // s3
		t.Fatal(err)
	}
	if err := s.Inc(idB, 8); err != nil { // s4
		t.Fatal(err)
	}
	want := []Owned{{idA, a1, Cell{false, 9}}, {idB, a2, Cell{false, 8}}}
	if got := s.Dots(); !equalOwned(got, want) {
		t.Fatalf("s4: %v, want %v", got, want)
	}
	s.Retire(idB) // s5
	want[1].Cell.Frozen = true
	if got := s.Dots(); !equalOwned(got, want) {
		t.Fatalf("s5: %v, want %v", got, want)
	}
	mustValue(t, s, 17)
	if n := s.Transfer(idA, idB); n != 8 { // s6
		t.Fatalf("transfer moved %d, want 8", n)
	}
	want = []Owned{{idA, a1, Cell{false, 17}}}
	if got := s.Dots(); !equalOwned(got, want) {
		t.Fatalf("s6: %v, want %v", got, want)
	}
	if !s.Seen(a2) || s.ctx.max(idA) != 2 || len(s.ctx) != 1 {
		t.Fatalf("s6: context %v, want {a ↦ 2}", s.ctx)
	}
	mustValue(t, s, 17)
	if s.Borrowed() != 0 {
		t.Fatalf("s6: %d borrowed dots left", s.Borrowed())
	}
}

func equalOwned(a, b []Owned) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// retiredClientAt builds the situation of decision (a): a and c are
// permanent, a lent b a dot, b counted 8 and retired, and both a and c have
// joined b's retirement.
func retiredClientAt(t *testing.T) (a, c *State) {
	t.Helper()
	a, c = New(), New()
	a.Create(idA, idA)
	c.Create(idC, idC)
	if err := a.Inc(idA, 9); err != nil {
		t.Fatal(err)
	}
	if err := c.Inc(idC, 4); err != nil {
		t.Fatal(err)
	}
	d := a.Create(idA, idB)
	ret := Write(idB, d, Cell{Frozen: true, Count: 8})
	a.Join(ret)
	c.Join(a)
	c.Join(ret)
	a.Join(c)
	mustValue(t, a, 21)
	mustValue(t, c, 21)
	return a, c
}

// TestTransferOnlyOwnCreations is decision (a): with the paper's formula
// both a and c fold b's 8 (created by a) into their own dots and every
// replica then counts them twice; restricted to the creator, only a does.
func TestTransferOnlyOwnCreations(t *testing.T) {
	t.Run("restricted", func(t *testing.T) {
		a, c := retiredClientAt(t)
		if n := c.TransferAll(idC); n != 0 {
			t.Fatalf("c transferred %d of a dot a created", n)
		}
		if n := a.TransferAll(idA); n != 8 {
			t.Fatalf("a transferred %d, want 8", n)
		}
		a.Join(c)
		c.Join(a)
		mustValue(t, a, 21)
		mustValue(t, c, 21)
		if a.Borrowed()+c.Borrowed() != 0 {
			t.Fatal("a borrowed dot is left")
		}
	})
	t.Run("unrestricted over-counts", func(t *testing.T) {
		mut = mutUnrestrictedTransfer
		defer func() { mut = mutNone }()
		a, c := retiredClientAt(t)
		a.TransferAll(idA)
		c.TransferAll(idC)
		a.Join(c)
		if got := a.Value(); got != 29 {
			t.Fatalf("value %d after both transfers, want the over-count 29", got)
		}
	})
}

// TestDeltaAfterTransfer is decision (b): after a folds b's dot into a1, a
// replica r that still holds b's frozen dot must learn that the dot is gone
// in the same join that raises a1. A delta carrying a1 alone (context {a1})
// over-counts at r until a's full state arrives; a delta whose context also
// holds the folded dot, or a's full state, does not. This package sends
// full states between permanent nodes.
func TestDeltaAfterTransfer(t *testing.T) {
	a, _ := retiredClientAt(t)
	r := a.Clone()
	a2, _ := a.Lent(idA, idB)
	a.TransferAll(idA)
	a1 := Dot{idA, 1}
	cell, _ := a.Get(idA, a1)

	naive := r.Clone()
	naive.Join(Write(idA, a1, cell))
	if got := naive.Value(); got != 21+8 {
		t.Fatalf("naive delta: value %d, want the over-count %d", got, 21+8)
	}

	withFolded := Write(idA, a1, cell)
	withFolded.ctx.add(a2)
	carried := r.Clone()
	carried.Join(withFolded)
	mustValue(t, carried, 21)

	full := r.Clone()
	full.Join(a)
	mustValue(t, full, 21)
	if full.Borrowed() != 0 {
		t.Fatal("b's dot survived a's full state")
	}
}

// TestCreateIdempotent is decision (c): a repeated borrow request from the
// same client to the same creator gets the same dot, active or frozen; a
// different creator lends its own.
func TestCreateIdempotent(t *testing.T) {
	a := New()
	a.Create(idA, idA)
	d1 := a.Create(idA, idB)
	d2 := a.Create(idA, idB)
	if d1 != d2 {
		t.Fatalf("second create gave %v, first %v", d2, d1)
	}
	a.Retire(idB)
	if d3 := a.Create(idA, idB); d3 != d1 {
		t.Fatalf("create after retirement gave %v, want the frozen %v", d3, d1)
	}
	c := New()
	c.Join(a)
	if d := c.Create(idC, idB); d.Creator != idC || d.Seq != 1 {
		t.Fatalf("c lent %v", d)
	}
	if n := len(a.Dots()); n != 2 {
		t.Fatalf("%d dots at a, want 2", n)
	}
}

// TestStaleWriteAfterTransfer: a client's write delayed past the transfer of
// its dot is dropped by every replica that saw the transfer.
func TestStaleWriteAfterTransfer(t *testing.T) {
	a := New()
	a.Create(idA, idA)
	d := a.Create(idA, idB)
	old := Write(idB, d, Cell{Count: 3})
	a.Join(Write(idB, d, Cell{Frozen: true, Count: 5}))
	a.TransferAll(idA)
	a.Join(old)
	mustValue(t, a, 5)
	if a.Borrowed() != 0 {
		t.Fatal("a stale write brought a transferred dot back")
	}
}

// randomStates runs a small random history of 3 permanent nodes and 4
// clients and returns snapshots of their states along the way.
func randomStates(r *rand.Rand, n int) []*State {
	perm := []ID{idA, idB, idC}
	nodes := make([]*State, 3)
	for i := range nodes {
		nodes[i] = New()
		nodes[i].Create(perm[i], perm[i])
	}
	type cl struct {
		id    ID
		dot   Dot
		ok    bool
		count uint64
		done  bool
	}
	clients := make([]cl, 4)
	for i := range clients {
		clients[i].id = tid(100 + i)
	}
	var out []*State
	for len(out) < n {
		i := r.IntN(3)
		switch r.IntN(6) {
		case 0:
			_ = nodes[i].Inc(perm[i], uint64(r.IntN(5)))
		case 1:
			k := &clients[r.IntN(len(clients))]
			if !k.ok && !k.done {
				k.dot, k.ok = nodes[i].Create(perm[i], k.id), true
			}
		case 2:
			k := &clients[r.IntN(len(clients))]
			if k.ok && !k.done {
				k.count += uint64(1 + r.IntN(3))
				k.done = r.IntN(4) == 0
				nodes[i].Join(Write(k.id, k.dot, Cell{k.done, k.count}))
			}
		case 3:
			nodes[i].TransferAll(perm[i])
		default:
			nodes[i].Join(nodes[r.IntN(3)])
		}
		out = append(out, nodes[i].Clone())
	}
	return out
}

// TestJoinLaws: the join is idempotent, commutative and associative over
// states reachable by the mutators.
func TestJoinLaws(t *testing.T) {
	r := testseed.Rand(t)
	states := randomStates(r, 60)
	join := func(x, y *State) *State {
		z := x.Clone()
		z.Join(y)
		return z
	}
	for range 2000 {
		x, y, z := states[r.IntN(len(states))], states[r.IntN(len(states))], states[r.IntN(len(states))]
		if !join(x, x).Equal(x) {
			t.Fatalf("x ⊔ x ≠ x for %v", x.Dots())
		}
		if !join(x, y).Equal(join(y, x)) {
			t.Fatalf("not commutative: %v / %v", x.Dots(), y.Dots())
		}
		if !join(join(x, y), z).Equal(join(x, join(y, z))) {
			t.Fatal("not associative")
		}
	}
}

// TestLateBorrowRequest: a borrow request delayed past the client's
// retirement is refused by Lend while the creator holds the client's frozen
// dot (ErrLateBorrow, nothing created). Once the creator has transferred it,
// the state no longer shows the retirement and Create would make a new dot
// that nobody will ever freeze (count 0, the value stays right, the dot is
// never collected): the gap that coltype/borrowcol closes by remembering
// retired clients for a while (its TestLateBorrowRefused).
func TestLateBorrowRequest(t *testing.T) {
	a := New()
	a.Create(idA, idA)
	d, err := a.Lend(idA, idB)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := a.Lend(idA, idB); err != nil || again != d {
		t.Fatalf("a repeated request: %v, %v; want %v", again, err, d)
	}
	a.Join(Write(idB, d, Cell{Frozen: true, Count: 2}))
	if !a.Retired(idB) || a.Retired(idA) {
		t.Fatal("Retired: want b retired, a not")
	}
	before := a.Clone()
	if _, err := a.Lend(idA, idB); !errors.Is(err, ErrLateBorrow) {
		t.Fatalf("a late request while the frozen dot is held: %v, want ErrLateBorrow", err)
	}
	if !a.Equal(before) {
		t.Fatal("a refused request changed the state")
	}
	// Another creator that holds the frozen dot refuses too.
	c := New()
	c.Join(a)
	if _, err := c.Lend(idC, idB); !errors.Is(err, ErrLateBorrow) {
		t.Fatalf("a late request at another creator: %v, want ErrLateBorrow", err)
	}
	a.TransferAll(idA)
	if a.Retired(idB) {
		t.Fatal("still retired after the transfer")
	}
	late, err := a.Lend(idA, idB) // the gap: nothing here shows b retired
	if err != nil || late == d {
		t.Fatalf("after the transfer: %v, %v", late, err)
	}
	mustValue(t, a, 2)
	if a.Borrowed() != 1 {
		t.Fatalf("%d borrowed dots, want the one orphan", a.Borrowed())
	}
}
