package borrow

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func mustMarshal(t testing.TB, s interface{ MarshalBinary() ([]byte, error) }) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleStates returns states covering every part of the encoding: empty,
// Figure 2's steps, a context with a cloud (a client's write seen before its
// creator's state), frozen dots, several creators and owners.
func sampleStates(tb testing.TB) []*State {
	tb.Helper()
	out := []*State{New()}
	s := New()
	s.Create(idA, idA)
	out = append(out, s.Clone())
	d := s.Create(idA, idB)
	_ = s.Inc(idA, 9)
	s.Join(Write(idB, d, Cell{Count: 8}))
	out = append(out, s.Clone())
	s.Retire(idB)
	out = append(out, s.Clone())
	s.TransferAll(idA)
	out = append(out, s.Clone())
	c := New()
	c.Create(idC, idC)
	c.Join(Write(tid(9), Dot{idA, 7}, Cell{Count: 300}))
	c.Join(Write(tid(10), Dot{idA, 5}, Cell{Frozen: true, Count: 1 << 40}))
	out = append(out, c.Clone())
	c.Join(s)
	out = append(out, c)
	out = append(out, randomStates(rand.New(rand.NewPCG(1, 2)), 12)...)
	return out
}

func sampleClients(tb testing.TB) []*Client {
	tb.Helper()
	c := NewClient(tid(50))
	out := []*Client{c}
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	snap := func() {
		var x Client
		must(x.UnmarshalBinary(mustMarshal(tb, c)))
		out = append(out, &x)
	}
	must(c.Ask(idB))
	snap()
	must(c.Ask(idA))
	must(c.Lent(Dot{idB, 4}))
	snap()
	_, err := c.Add(7)
	must(err)
	snap()
	must(c.Lent(Dot{idA, 2}))
	_, err = c.Add(300)
	must(err)
	snap()
	_, err = c.Retire()
	must(err)
	snap()
	return out
}

func TestEncodingRoundTrip(t *testing.T) {
	for i, s := range sampleStates(t) {
		b := mustMarshal(t, s)
		var d State
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		if !d.Equal(s) {
			t.Fatalf("state %d: decoded %v, want %v", i, d.Dots(), s.Dots())
		}
		if !bytes.Equal(mustMarshal(t, &d), b) {
			t.Fatalf("state %d: re-encoding differs", i)
		}
	}
	for i, c := range sampleClients(t) {
		b := mustMarshal(t, c)
		var d Client
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if !bytes.Equal(mustMarshal(t, &d), b) {
			t.Fatalf("client %d: re-encoding differs", i)
		}
	}
}

// TestWriteSize: a client's write is small: version, kind, one context
// entry, one owner with one dot.
func TestWriteSize(t *testing.T) {
	b := mustMarshal(t, Write(idB, Dot{idA, 3}, Cell{Count: 100}))
	// 2 + (1 + 16 + 1 + 1 + 1) + (1 + 16 + 1 + 1 + 1 + 1 + 1)
	if len(b) != 44 {
		t.Fatalf("write of one dot is %d bytes: %x", len(b), b)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := mustMarshal(t, sampleStates(t)[5])
	cases := map[string][]byte{
		"empty":           {},
		"version":         append([]byte{9}, good[1:]...),
		"kind":            append([]byte{Version, kindClient}, good[2:]...),
		"trailing":        append(append([]byte{}, good...), 0),
		"truncated":       good[:len(good)-1],
		"empty ctx entry": append([]byte{Version, kindState, 1}, append(idA[:], 0, 0, 0)...),
		"dot outside ctx": func() []byte {
			b := []byte{Version, kindState, 1}
			b = append(b, idA[:]...)
			b = append(b, 1, 0, 1) // base 1, no cloud; one owner
			b = append(b, idB[:]...)
			return append(b, 1, 0, 2, 0, 5) // dot (a, 2)
		}(),
		"non-minimal varint": func() []byte {
			b := []byte{Version, kindState, 1}
			b = append(b, idA[:]...)
			return append(b, 0x81, 0x00, 0, 0)
		}(),
		"bad flag": func() []byte {
			b := []byte{Version, kindState, 1}
			b = append(b, idA[:]...)
			b = append(b, 1, 0, 1)
			b = append(b, idB[:]...)
			return append(b, 1, 0, 1, 2, 5)
		}(),
	}
	for name, b := range cases {
		var s State
		if err := s.UnmarshalBinary(b); err == nil {
			t.Errorf("%s: decoded %x", name, b)
		}
	}
	cgood := mustMarshal(t, sampleClients(t)[3])
	for name, b := range map[string][]byte{
		"client empty":     {},
		"client as state":  good,
		"client truncated": cgood[:len(cgood)-1],
		"client trailing":  append(append([]byte{}, cgood...), 0),
	} {
		var c Client
		if err := c.UnmarshalBinary(b); err == nil {
			t.Errorf("%s: decoded %x", name, b)
		}
	}
}

// FuzzDecodeState: decoding arbitrary bytes never panics; a state that
// decodes re-encodes to the same bytes, and joining it with a sample, both
// ways, and transferring and counting on the result do not panic.
func FuzzDecodeState(f *testing.F) {
	for _, s := range sampleStates(f) {
		f.Add(mustMarshal(f, s))
	}
	other := sampleStates(f)[6]
	f.Fuzz(func(t *testing.T, b []byte) {
		var s State
		if s.UnmarshalBinary(b) != nil {
			return
		}
		if !bytes.Equal(mustMarshal(t, &s), b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", mustMarshal(t, &s), b)
		}
		x := other.Clone()
		x.Join(&s)
		x.TransferAll(idA)
		y := s.Clone()
		y.Join(other)
		y.TransferAll(idC)
		_ = y.Value()
		y.Create(idA, idB)
	})
}

// FuzzDecodeClient: decoding arbitrary bytes never panics; a client that
// decodes re-encodes to the same bytes and its methods do not panic.
func FuzzDecodeClient(f *testing.F) {
	for _, c := range sampleClients(f) {
		f.Add(mustMarshal(f, c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Client
		if c.UnmarshalBinary(b) != nil {
			return
		}
		if !bytes.Equal(mustMarshal(t, &c), b) {
			t.Fatal("re-encoding differs")
		}
		_, _ = c.Add(1)
		_ = c.Writes()
		c.Abandon(idA)
		_ = c.Ask(idC)
		_ = c.Lent(Dot{idC, 1})
		_, _ = c.Retire()
	})
}
