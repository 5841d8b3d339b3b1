package handoff

import (
	"bytes"
	"maps"
	"testing"
)

func tid(n byte) ID { return ID{0: 0xaa, 15: n} }

var (
	idI = tid(1) // the C_i of the helpers' tests
	idJ = tid(2) // the C_j
	idK = tid(3) // a third node
)

// st builds a counter state directly, for the helpers' tests.
func st(id ID, tier int, vals map[ID]Count) *State[Count] {
	s := Init[Count](id, tier)
	maps.Copy(s.vals, vals)
	return s
}

func enc(t *testing.T, s *State[Count]) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestInitFetchIncr(t *testing.T) {
	c := NewCounter(idI, 1)
	if c.Fetch() != 0 || c.ID() != idI || c.Tier() != 1 || !c.Handed() {
		t.Fatalf("init: %+v", c.State)
	}
	c.Incr()
	c.Incr()
	c.Add(5)
	if c.Fetch() != 7 || c.Pending() != 7 || c.Handed() {
		t.Fatalf("after 7 increments: fetch %d pending %d", c.Fetch(), c.Pending())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Init with a negative tier did not panic")
		}
	}()
	Init[Count](idI, -1)
}

// TestFigure2 replays the handoff of Figure 2: node i (tier 1) moves a count
// of 9 to node j (tier 0) in four merges, after which neither holds an entry
// for the other.
func TestFigure2(t *testing.T) {
	i, j := NewCounter(idI, 1), NewCounter(idJ, 0)
	i.Add(9)
	j.Merge(i) // 1: slot for i at j
	if ck, ok := j.slots[idI]; !ok || ck != (Clock{0, 0}) || j.dck != 1 {
		t.Fatalf("step 1: slots %v dck %d", j.slots, j.dck)
	}
	i.Merge(j) // 2: token for the slot, value moved into it
	if tk, ok := i.tokens[Pair{idI, idJ}]; !ok || tk != (Token[Count]{Clock{0, 0}, 9}) || i.Pending() != 0 || i.sck != 1 {
		t.Fatalf("step 2: tokens %v pending %d sck %d", i.tokens, i.Pending(), i.sck)
	}
	j.Merge(i) // 3: token acquired, slot filled
	if j.Slots() != 0 || j.Pending() != 9 || j.Fetch() != 9 {
		t.Fatalf("step 3: slots %v vals %v val %d", j.slots, j.vals, j.val)
	}
	i.Merge(j) // 4: token discarded
	if i.Tokens() != 0 || !i.Handed() || i.Fetch() != 9 || i.below != 9 {
		t.Fatalf("step 4: tokens %v val %d below %d", i.tokens, i.val, i.below)
	}
	// Duplicates of every message change nothing.
	j.Merge(i)
	i.Merge(j)
	if j.Slots() != 0 || j.Fetch() != 9 || i.Fetch() != 9 || i.Tokens() != 0 {
		t.Fatalf("after duplicates: i %+v j %+v", i.State, j.State)
	}
}

func TestMergeSelfIsIdentity(t *testing.T) {
	c := NewCounter(idI, 1)
	c.Add(3)
	old := c.Clone()
	c.Incr()
	c.Merge(old)
	if c.Fetch() != 4 {
		t.Fatalf("merging an old copy of itself: fetch %d, want 4", c.Fetch())
	}
}

func TestMergeLeavesArgumentAlone(t *testing.T) {
	s := newSim(7, checkerConfig{steps: 3000})
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	for _, a := range s.nodes {
		for _, b := range s.nodes {
			x, y := a.mem.Clone(), b.mem.Clone()
			before := enc(t, y)
			x.Merge(y)
			if !bytes.Equal(before, enc(t, y)) {
				t.Fatalf("merge modified its argument")
			}
		}
	}
}

func TestFillslots(t *testing.T) {
	i := st(idI, 0, map[ID]Count{idI: 5})
	i.slots[idJ] = Clock{3, 7}
	i.slots[idK] = Clock{1, 2}
	j := st(idJ, 1, nil)
	j.tokens[Pair{idJ, idI}] = Token[Count]{Clock{3, 7}, 4}  // matches: acquired
	j.tokens[Pair{idK, idI}] = Token[Count]{Clock{1, 1}, 10} // other dck: not
	j.tokens[Pair{idJ, idK}] = Token[Count]{Clock{1, 2}, 20} // other destination
	i.fillslots(j)
	if i.vals[idI] != 9 {
		t.Fatalf("vals_i(i) = %d, want 9", i.vals[idI])
	}
	if _, ok := i.slots[idJ]; ok || len(i.slots) != 1 {
		t.Fatalf("slots %v, want only k's", i.slots)
	}
	// Tokens from two sources fill two slots in one merge.
	i = st(idI, 0, nil)
	i.slots[idJ] = Clock{0, 0}
	i.slots[idK] = Clock{0, 1}
	j.tokens = map[Pair]Token[Count]{
		{idJ, idI}: {Clock{0, 0}, 2},
		{idK, idI}: {Clock{0, 1}, 3},
	}
	i.fillslots(j)
	if i.vals[idI] != 5 || len(i.slots) != 0 {
		t.Fatalf("vals %v slots %v", i.vals, i.slots)
	}
}

func TestDiscardslot(t *testing.T) {
	for _, c := range []struct {
		sckJ uint64
		kept bool
	}{{2, true}, {3, true}, {4, false}} {
		i := st(idI, 0, nil)
		i.slots[idJ] = Clock{3, 1}
		i.slots[idK] = Clock{0, 0}
		j := st(idJ, 1, nil)
		j.sck = c.sckJ
		i.discardslot(j)
		if _, ok := i.slots[idJ]; ok != c.kept {
			t.Errorf("sck_j %d: slot kept %v, want %v", c.sckJ, ok, c.kept)
		}
		if _, ok := i.slots[idK]; !ok {
			t.Errorf("sck_j %d: another source's slot was discarded", c.sckJ)
		}
	}
}

func TestCreateslot(t *testing.T) {
	for _, c := range []struct {
		name         string
		tierI, tierJ int
		valsJ        Count
		existing     bool
		created      bool
	}{
		{"higher tier with a value", 0, 1, 3, false, true},
		{"equal tier", 1, 1, 3, false, false},
		{"smaller tier", 1, 0, 3, false, false},
		{"nothing to hand off", 0, 1, 0, false, false},
		{"slot already there", 0, 2, 3, true, false},
	} {
		i := st(idI, c.tierI, nil)
		i.dck = 5
		if c.existing {
			i.slots[idJ] = Clock{1, 1}
		}
		j := st(idJ, c.tierJ, map[ID]Count{idJ: c.valsJ})
		j.sck, j.dck = 8, 100
		i.createslot(j)
		got, ok := i.slots[idJ]
		switch {
		case c.created && (!ok || got != Clock{8, 5} || i.dck != 6):
			t.Errorf("%s: slot %v (%v) dck %d, want (8,5) and dck 6", c.name, got, ok, i.dck)
		case !c.created && (i.dck != 5 || ok != c.existing):
			t.Errorf("%s: slot %v (%v) dck %d, want no new slot", c.name, got, ok, i.dck)
		}
	}
}

func TestMergevectors(t *testing.T) {
	i := st(idI, 0, map[ID]Count{idI: 5, idK: 1})
	j := st(idJ, 0, map[ID]Count{idJ: 4, idK: 3, idI: 2})
	i.mergevectors(j)
	want := map[ID]Count{idI: 5, idJ: 4, idK: 3}
	if !maps.Equal(i.vals, want) {
		t.Fatalf("vals %v, want %v", i.vals, want)
	}
	// Not between tiers.
	i = st(idI, 0, map[ID]Count{idI: 5})
	j = st(idJ, 1, map[ID]Count{idJ: 4})
	i.mergevectors(j)
	if len(i.vals) != 1 {
		t.Fatalf("merged with a tier-1 state: %v", i.vals)
	}
}

func TestAggregate(t *testing.T) {
	mk := func(id ID, tier int, val, below, self Count) *State[Count] {
		s := st(id, tier, map[ID]Count{id: self})
		s.val, s.below = val, below
		return s
	}
	for _, c := range []struct {
		name      string
		i, j      *State[Count]
		val, blow Count
	}{
		// tier 0: val is the sum of the vector; below stays.
		{"tier 0 from tier 0", func() *State[Count] {
			s := mk(idI, 0, 3, 0, 3)
			s.vals[idK] = 4
			return s
		}(), mk(idJ, 0, 50, 0, 50), 7, 0},
		{"tier 0 from tier 1", mk(idI, 0, 3, 0, 3), mk(idJ, 1, 50, 40, 10), 3, 0},
		// same tier: below = max of belows, val = max(val_i, val_j, b + vals_i(i))
		// (Figure 5 adds vals_j(j) too; see TestAggregateSameTierOldState).
		{"same tier, b + self wins", mk(idI, 1, 8, 5, 4), mk(idJ, 1, 9, 6, 3), 10, 6},
		{"same tier, val_j wins", mk(idI, 1, 10, 5, 4), mk(idJ, 1, 20, 6, 3), 20, 6},
		// higher i: below = max(below_i, val_j), val = max(val_i, b + self).
		{"from a smaller tier", mk(idI, 2, 10, 5, 4), mk(idJ, 1, 30, 20, 7), 34, 30},
		{"from a smaller tier, val_i wins", mk(idI, 2, 40, 5, 4), mk(idJ, 1, 30, 20, 7), 40, 30},
		// smaller i (not tier 0): below stays, val = max(val_i, below + self).
		{"from a higher tier", mk(idI, 1, 10, 8, 4), mk(idJ, 2, 30, 20, 7), 12, 8},
	} {
		c.i.aggregate(c.j)
		if c.i.val != c.val || c.i.below != c.blow {
			t.Errorf("%s: val %d below %d, want %d %d", c.name, c.i.val, c.i.below, c.val, c.blow)
		}
	}
}

func TestDiscardtokens(t *testing.T) {
	tok := Token[Count]{Clock{2, 5}, 9}
	for _, c := range []struct {
		name    string
		slot    *Clock // j's slot for the token's source
		dckJ    uint64
		dropped bool
	}{
		{"slot with a later dck", &Clock{3, 6}, 10, true},
		{"slot with the same dck (not acquired)", &Clock{2, 5}, 10, false},
		{"no slot, dck_j past the token", nil, 6, true},
		{"no slot, dck_j equal (slot not created yet)", nil, 5, false},
	} {
		i := st(idI, 1, nil)
		i.tokens[Pair{idI, idJ}] = tok
		i.tokens[Pair{idI, idK}] = tok // to another destination: untouched
		j := st(idJ, 0, nil)
		j.dck = c.dckJ
		if c.slot != nil {
			j.slots[idI] = *c.slot
		}
		i.discardtokens(j)
		if _, ok := i.tokens[Pair{idI, idJ}]; ok == c.dropped {
			t.Errorf("%s: token kept %v", c.name, ok)
		}
		if _, ok := i.tokens[Pair{idI, idK}]; !ok {
			t.Errorf("%s: a token for another destination was dropped", c.name)
		}
	}
	// A cached token (another source) is judged by j's slot for that source.
	i := st(idI, 1, nil)
	i.tokens[Pair{idK, idJ}] = tok
	j := st(idJ, 0, nil)
	j.dck = 10
	j.slots[idK] = Clock{2, 5}
	i.discardtokens(j)
	if len(i.tokens) != 1 {
		t.Fatal("a cached token whose slot is still at the destination was dropped")
	}
}

func TestCreatetoken(t *testing.T) {
	i := st(idI, 1, map[ID]Count{idI: 6})
	i.sck = 4
	j := st(idJ, 0, nil)
	j.slots[idI] = Clock{3, 9} // an older source clock: no token
	i.createtoken(j)
	if len(i.tokens) != 0 || i.sck != 4 || i.vals[idI] != 6 {
		t.Fatalf("token for a stale slot: %v", i.tokens)
	}
	j.slots[idI] = Clock{4, 9}
	i.createtoken(j)
	if tk := i.tokens[Pair{idI, idJ}]; tk != (Token[Count]{Clock{4, 9}, 6}) || i.sck != 5 || i.vals[idI] != 0 {
		t.Fatalf("token %v sck %d vals %v", tk, i.sck, i.vals)
	}
	// The same slot seen again (a duplicate message) creates nothing.
	i.Inflate(2)
	i.createtoken(j)
	if tk := i.tokens[Pair{idI, idJ}]; tk.N != 6 || i.sck != 5 || i.vals[idI] != 2 {
		t.Fatalf("second token for one slot: %v sck %d", tk, i.sck)
	}
}

func TestCachetokens(t *testing.T) {
	j := st(idJ, 2, nil)
	j.tokens[Pair{idJ, idK}] = Token[Count]{Clock{5, 1}, 7}    // cached by i
	j.tokens[Pair{idJ, idI}] = Token[Count]{Clock{5, 2}, 8}    // for i itself: not cached
	j.tokens[Pair{tid(9), idK}] = Token[Count]{Clock{1, 1}, 3} // not j's own: not cached
	i := st(idI, 1, nil)
	i.cachetokens(j)
	if len(i.tokens) != 1 || i.tokens[Pair{idJ, idK}].N != 7 {
		t.Fatalf("cached %v", i.tokens)
	}
	// A newer token replaces an older one; an older one or a tie does not.
	i.tokens[Pair{idJ, idK}] = Token[Count]{Clock{4, 0}, 1}
	i.cachetokens(j)
	if i.tokens[Pair{idJ, idK}].Clock.Sck != 5 {
		t.Fatal("a newer token did not replace the cached one")
	}
	i.tokens[Pair{idJ, idK}] = Token[Count]{Clock{6, 0}, 1}
	i.cachetokens(j)
	if i.tokens[Pair{idJ, idK}].Clock.Sck != 6 {
		t.Fatal("an older token replaced the cached one")
	}
	i.tokens[Pair{idJ, idK}] = Token[Count]{Clock{5, 1}, 7}
	i.cachetokens(j)
	// Equal or higher tier: nothing cached.
	for _, tier := range []int{2, 3} {
		i := st(idI, tier, nil)
		i.cachetokens(j)
		if len(i.tokens) != 0 {
			t.Fatalf("tier %d cached tokens of a tier-2 node", tier)
		}
	}
}

// TestAggregateSameTierOldState is the over-count that Figure 5's aggregate
// allows between two nodes of the same tier above 0: a's state with 5
// accounted is delayed on its way to b; meanwhile a hands the 5 off to s and
// b learns them from s as below; then the old state arrives, and
// b + vals_b(b) + vals_a(a) counts the 5 twice. This package leaves the
// vals_j(j) term out.
func TestAggregateSameTierOldState(t *testing.T) {
	for _, paper := range []bool{false, true} {
		if paper {
			mut = mutPaperSameTierSum
		}
		s := NewCounter(idI, 0)
		a, b := NewCounter(idJ, 1), NewCounter(idK, 1)
		a.Add(5)
		old := a.Clone() // in flight from a to b, delayed
		for range 2 {
			s.Merge(a)
			a.Merge(s)
		}
		b.Merge(s)
		b.Merge(old)
		mut = mutNone
		if paper && b.Fetch() != 10 {
			t.Fatalf("Figure 5's aggregate: b fetches %d, expected the over-count 10", b.Fetch())
		}
		if !paper && b.Fetch() != 5 {
			t.Fatalf("b fetches %d of 5 increments", b.Fetch())
		}
	}
}
