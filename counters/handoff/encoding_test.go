package handoff

import (
	"bytes"
	"testing"
)

// sampleEncodings returns encodings of real states: reached in checker runs,
// and maps of counters and PN-counters mid-handoff.
func sampleEncodings(t testing.TB) [][]byte {
	var out [][]byte
	for _, s := range reachable(t, 11, 1, 2000, 400) {
		b, _ := s.MarshalBinary()
		out = append(out, b)
	}
	srv, cli := NewMap(tid(1), 0), NewMap(tid(2), 1)
	cli.Incr("likes")
	cli.Add("views", 300)
	srv.Merge(cli)
	cli.Merge(srv)
	pn, pnSrv := NewPNCounter(tid(3), 1), NewPNCounter(tid(4), 0)
	pn.Add(5)
	pn.Decr()
	pnSrv.Merge(pn)
	pn.Merge(pnSrv)
	for _, m := range []interface{ MarshalBinary() ([]byte, error) }{srv, cli, pn, pnSrv} {
		b, _ := m.MarshalBinary()
		out = append(out, b)
	}
	return out
}

// roundTrip decodes b in whichever domain it names; a state that decodes
// must re-encode to b. It reports whether b decoded.
func roundTrip(t testing.TB, b []byte) bool {
	t.Helper()
	var c Counter
	var m Map
	var p PNCounter
	for _, u := range []interface {
		UnmarshalBinary([]byte) error
		MarshalBinary() ([]byte, error)
	}{&c, &m, &p} {
		if err := u.UnmarshalBinary(b); err != nil {
			continue
		}
		again, err := u.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded state re-encodes differently:\n in %x\nout %x", b, again)
		}
		return true
	}
	return false
}

func TestEncodingRoundTrip(t *testing.T) {
	samples := sampleEncodings(t)
	for _, b := range samples {
		if !roundTrip(t, b) {
			t.Fatalf("a real state does not decode: %x", b)
		}
	}
	// Decoded states behave like the originals.
	c := NewCounter(tid(1), 1)
	c.Add(41)
	s := NewCounter(tid(2), 0)
	s.Merge(c)
	b, _ := s.MarshalBinary()
	var d Counter
	if err := d.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	c.Merge(&d)
	b, _ = c.MarshalBinary()
	var e Counter
	if err := e.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	d.Merge(&e)
	if d.Fetch() != 41 || d.Slots() != 0 {
		t.Fatalf("handoff through encodings: fetch %d, %d slots", d.Fetch(), d.Slots())
	}
	if len(b) > 80 {
		t.Errorf("a client state with one token is %d bytes", len(b))
	}
	t.Logf("client state with one token: %d bytes; fresh counter: %d bytes", len(b), len(mustMarshal(NewCounter(tid(1), 1))))
}

func mustMarshal(m interface{ MarshalBinary() ([]byte, error) }) []byte {
	b, err := m.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return b
}

func TestDecodeRejects(t *testing.T) {
	good := mustMarshal(func() *Counter {
		s := NewCounter(tid(2), 0)
		c := NewCounter(tid(1), 1)
		c.Add(200)
		s.Merge(c)
		c.Merge(s)
		s.Incr()
		return s
	}())
	cli := NewCounter(tid(1), 1)
	cli.Incr()
	var c Counter
	if err := c.UnmarshalBinary(good); err != nil {
		t.Fatal(err)
	}
	// Every proper prefix and one trailing byte are errors.
	for n := range len(good) {
		if err := c.UnmarshalBinary(good[:n]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", n)
		}
	}
	if err := c.UnmarshalBinary(append(good[:len(good):len(good)], 0)); err == nil {
		t.Fatal("trailing byte decoded")
	}
	mod := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	for name, b := range map[string][]byte{
		"version":           mod(func(b []byte) []byte { b[0] = 2; return b }),
		"domain":            mod(func(b []byte) []byte { b[1] = domainPN; return b }),
		"non-minimal tier":  append(append(append([]byte(nil), good[:18]...), 0x80, 0x00), good[19:]...),
		"tier too large":    append(append(append([]byte(nil), good[:18]...), 0x80, 0x02), good[19:]...),
		"missing self vals": mod(func(b []byte) []byte { b[2] ^= 1; return b }),
	} {
		if err := c.UnmarshalBinary(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	var m Map
	if err := m.UnmarshalBinary(good); err == nil {
		t.Error("a counter decoded as a map")
	}
	// A failed decode leaves the receiver alone.
	before := mustMarshal(cli)
	if err := cli.UnmarshalBinary(good[:10]); err == nil || !bytes.Equal(before, mustMarshal(cli)) {
		t.Error("a failed decode changed the state")
	}
}

// FuzzDecode: decoding arbitrary bytes never panics; a state that decodes
// re-encodes to the same bytes, and merging it or taking its view does not
// panic either.
func FuzzDecode(f *testing.F) {
	for _, b := range sampleEncodings(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !roundTrip(t, b) {
			return
		}
		var c Counter
		if c.UnmarshalBinary(b) != nil {
			return
		}
		for _, tier := range []int{0, 1, 2} {
			x := NewCounter(tid(77), tier)
			x.Incr()
			x.Merge(&c)
			x.Merge(c.View(x.ID(), tier))
			c.Clone().Merge(x)
		}
	})
}
