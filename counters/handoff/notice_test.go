package handoff

import (
	"bytes"
	"testing"
)

// handoffToToken runs steps 1 and 2 of Figure 2 between client i and server
// j: j opens a slot for i, i moves its pending value into a token for it.
func handoffToToken(i, j *State[Count]) {
	j.Merge(i)
	i.Merge(j)
}

func TestRetireNotice(t *testing.T) {
	i, j, k := Init[Count](idI, 1), Init[Count](idJ, 0), Init[Count](idK, 0)
	if !i.Unused() {
		t.Fatal("a fresh state is not unused")
	}
	i.Inflate(4)
	if i.Unused() {
		t.Fatal("a state with an increment is unused")
	}
	handoffToToken(i, j)
	n := i.Retire()
	if i.Unused() {
		t.Fatal("a state that made a token is unused")
	}
	if n.ID != idI || n.Sck != i.sck || len(n.Tokens) != 1 {
		t.Fatalf("notice %+v, want id i, sck %d, one token", n, i.sck)
	}
	if tk := n.Tokens[idJ]; tk != i.tokens[Pair{idI, idJ}] {
		t.Fatalf("notice token %+v, state's %+v", tk, i.tokens[Pair{idI, idJ}])
	}
	// Tokens i caches for others are not its own, and stay out.
	k.Merge(i) // k caches i's token to j
	k.tokens[Pair{idJ, idK}] = Token[Count]{Clock{1, 1}, 2}
	if n := k.Retire(); len(n.Tokens) != 0 {
		t.Fatalf("a notice carries tokens of other sources: %+v", n.Tokens)
	}
}

// TestCollectFillsThenDrops: the retiring client's only token for j is in
// the notice (its reply from j was lost, so j never saw the token); j
// acquires it from the notice, and a stray slot at k (whose reply was lost
// before the client made a token) is dropped.
func TestCollectFillsThenDrops(t *testing.T) {
	i, j, k := Init[Count](idI, 1), Init[Count](idJ, 0), Init[Count](idK, 0)
	i.Inflate(5)
	handoffToToken(i, j) // token (i→j) at i; j does not know it yet
	k.Merge(i)           // i's state reached k too (pending 0 now: no slot)...
	if k.Slots() != 0 {
		t.Fatalf("k opened a slot for a client with nothing pending: %v", k.slots)
	}
	old := Init[Count](idI, 1)
	old.Inflate(5)
	k.Merge(old) // ...but an older message did open one
	if k.Slots() != 1 {
		t.Fatalf("k slots %v, want one for i", k.slots)
	}
	n := i.Retire()
	if !j.Collect(n) || j.Slots() != 0 || j.Pending() != 5 || j.Fetch() != 5 {
		t.Fatalf("j after the notice: slots %v vals %v val %d", j.slots, j.vals, j.val)
	}
	if !k.Collect(n) || k.Slots() != 0 || k.Fetch() != 0 {
		t.Fatalf("k after the notice: slots %v val %d", k.slots, k.val)
	}
	// Again, and on a node that never heard of i: nothing changes.
	before := enc(t, j)
	if j.Collect(n) || !bytes.Equal(before, enc(t, j)) {
		t.Fatal("a second Collect changed j")
	}
	other := Init[Count](tid(9), 0)
	if other.Collect(n) || other.Collect(nil) || i.Collect(n) {
		t.Fatal("Collect changed a state it does not concern")
	}
	// The client's token cached at k arriving later finds no slot: counted once.
	j.Merge(k)
	if j.Fetch() != 5 {
		t.Fatalf("j fetch %d after the cached copy arrived, want 5", j.Fetch())
	}
}

// TestCollectKeepsNewerSlots: a slot whose source clock is past the notice's
// (not from the node that retired with that notice) is left alone.
func TestCollectKeepsNewerSlots(t *testing.T) {
	j := Init[Count](idJ, 0)
	j.slots[idI] = Clock{Sck: 7, Dck: 0}
	j.dck = 1
	if j.Collect(&Notice[Count]{ID: idI, Sck: 6}) || j.Slots() != 1 {
		t.Fatalf("a slot with a newer source clock was dropped: %v", j.slots)
	}
	if !j.Collect(&Notice[Count]{ID: idI, Sck: 7}) || j.Slots() != 0 {
		t.Fatalf("a slot with the notice's source clock was kept: %v", j.slots)
	}
}

// TestCollectAtHigherTier: Collect keeps val right above tier 0.
func TestCollectAtHigherTier(t *testing.T) {
	i, j := Init[Count](idI, 2), Init[Count](idJ, 1)
	j.below = 10
	j.val = 10
	i.Inflate(3)
	handoffToToken(i, j)
	if !j.Collect(i.Retire()) || j.Pending() != 3 || j.Fetch() != 13 {
		t.Fatalf("tier-1 j after Collect: pending %d fetch %d, want 3 and 13", j.Pending(), j.Fetch())
	}
}

func TestNoticeEncoding(t *testing.T) {
	i, j, k := Init[Count](idI, 1), Init[Count](idJ, 0), Init[Count](idK, 0)
	i.Inflate(2)
	handoffToToken(i, j)
	i.Inflate(1)
	handoffToToken(i, k)
	n := i.Retire()
	b, err := n.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Notice[Count]
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	again, _ := got.MarshalBinary()
	if !bytes.Equal(again, b) || got.ID != n.ID || got.Sck != n.Sck || len(got.Tokens) != 2 {
		t.Fatalf("round trip: %+v from %+v", got, n)
	}
	bad := map[string][]byte{
		"empty":          nil,
		"version":        append([]byte{9}, b[1:]...),
		"domain":         append([]byte{b[0], domainPN}, b[2:]...),
		"truncated":      b[:len(b)-1],
		"trailing":       append(bytes.Clone(b), 0),
		"huge count":     append(append([]byte{}, b[:2+IDLen+1]...), 0xff, 0xff, 0x03),
		"self token":     noticeBytes(t, &Notice[Count]{ID: idI, Sck: 2, Tokens: map[ID]Token[Count]{idI: {Clock{1, 0}, 1}}}),
		"token too new":  noticeBytes(t, &Notice[Count]{ID: idI, Sck: 2, Tokens: map[ID]Token[Count]{idJ: {Clock{2, 0}, 1}}}),
		"state, not one": enc(t, i),
	}
	for name, b := range bad {
		keep := got.Clone()
		if err := got.UnmarshalBinary(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
		if got.ID != keep.ID || got.Sck != keep.Sck || len(got.Tokens) != len(keep.Tokens) {
			t.Errorf("%s: a failed decode changed the notice", name)
		}
	}
}

func noticeBytes(t *testing.T, n *Notice[Count]) []byte {
	t.Helper()
	b, err := n.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeNotice: any bytes either fail to decode or decode to a notice
// that re-encodes to the same bytes and that Collect applies without harm.
func FuzzDecodeNotice(f *testing.F) {
	i, j := Init[Count](idI, 1), Init[Count](idJ, 0)
	i.Inflate(3)
	handoffToToken(i, j)
	for _, n := range []*Notice[Count]{i.Retire(), {ID: idK}} {
		b, _ := n.MarshalBinary()
		f.Add(b)
	}
	pn := Init[PN](idI, 1)
	pb, _ := pn.Retire().MarshalBinary()
	f.Add(pb)
	f.Fuzz(func(t *testing.T, b []byte) {
		var n Notice[Count]
		if n.UnmarshalBinary(b) != nil {
			return
		}
		again, err := n.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded notice re-encodes differently:\n in %x\nout %x", b, again)
		}
		if n.ID == idJ {
			return // a node ignores a notice of its own (checked in TestCollectFillsThenDrops)
		}
		s := Init[Count](idJ, 0)
		s.slots[n.ID] = Clock{Sck: n.Sck, Dck: 0}
		s.dck = 1
		s.Collect(&n)
		if s.Slots() != 0 {
			t.Fatalf("Collect left the retired node's slot: %v", s.slots)
		}
	})
}

func sampleMessage(t testing.TB) *Message {
	i, j := NewCounter(idI, 1), NewCounter(idJ, 0)
	i.Add(3)
	handoffToToken(&i.State, &j.State)
	return &Message{State: j, Notices: []*HeldNotice{
		{Notice: i.State.Retire(), Servers: []ID{idJ, idK}, Seen: []ID{idJ}, Created: 1_700_000_000_000},
		{Notice: &Notice[Count]{ID: tid(9), Sck: 4}, Servers: []ID{idJ}, Seen: []ID{idJ}, Created: 5},
	}}
}

func TestMessageEncoding(t *testing.T) {
	m := sampleMessage(t)
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, bare, err := DecodeMessage(b)
	if err != nil || bare {
		t.Fatalf("decode: bare %v err %v", bare, err)
	}
	again, _ := got.MarshalBinary()
	if !bytes.Equal(again, b) || len(got.Notices) != 2 || !got.Notices[1].Done() || got.Notices[0].Done() {
		t.Fatalf("round trip: %x\nvs %x", again, b)
	}
	// A bare state decodes as a message without notices.
	st, _ := m.State.MarshalBinary()
	if got, bare, err := DecodeMessage(st); err != nil || !bare || got.State.Fetch() != m.State.Fetch() {
		t.Fatalf("bare state: %v %v", bare, err)
	}
	swapped := &Message{State: m.State, Notices: []*HeldNotice{m.Notices[1], m.Notices[0]}}
	sb, _ := swapped.MarshalBinary()
	for name, bad := range map[string][]byte{
		"empty": nil, "unknown": {7}, "truncated": b[:len(b)-3], "trailing": append(bytes.Clone(b), 1),
		"notices out of order": sb,
	} {
		if _, _, err := DecodeMessage(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestHeldNoticeAbsorb(t *testing.T) {
	a := &HeldNotice{Servers: []ID{idI, idJ, idK}, Seen: []ID{idI}, Created: 20}
	b := &HeldNotice{Servers: []ID{idI, idJ, idK}, Seen: []ID{idJ, idK}, Created: 10}
	if !a.Absorb(b) || !a.Done() || a.Created != 10 || len(a.Seen) != 3 {
		t.Fatalf("absorb: %+v", a)
	}
	if a.Absorb(b) {
		t.Fatal("absorbing the same copy again reported a change")
	}
	if (&HeldNotice{}).Done() {
		t.Fatal("a notice with no servers is done")
	}
}

// FuzzDecodeMessage: any bytes either fail to decode or decode to a message
// that re-encodes to the same bytes.
func FuzzDecodeMessage(f *testing.F) {
	b, _ := sampleMessage(f).MarshalBinary()
	f.Add(b)
	st, _ := NewCounter(idI, 1).MarshalBinary()
	f.Add(st)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, bare, err := DecodeMessage(b)
		if err != nil || bare {
			return
		}
		again, err := m.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded message re-encodes differently:\n in %x\nout %x", b, again)
		}
	})
}
