package fbf

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func snapFilter(t testing.TB) (*Filter, Config) {
	c := Config{Bits: 300, Hashes: 3, Past: 2, Period: time.Second, Start: epoch}
	f := mustNew(t, c)
	for i := range 40 {
		f.TestAndAdd(id(1, uint64(i)))
		if i%10 == 9 {
			f.Advance(at(time.Duration(i/10+1) * time.Second))
		}
	}
	return f, c
}

func TestSnapshotRoundTrip(t *testing.T) {
	f, c := snapFilter(t)
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g := mustNew(t, c)
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		x := id(uint64(i%3), uint64(i))
		if f.Contains(x) != g.Contains(x) || f.ContainsSimple(x) != g.ContainsSimple(x) {
			t.Fatalf("restored filter disagrees on id %d", i)
		}
	}
	fs, gs := f.Stats(), g.Stats()
	if fs.Past != gs.Past || fs.Period != gs.Period || !fs.Now.Equal(gs.Now) || fs.EstimatedFPP != gs.EstimatedFPP || fs.Remembered != gs.Remembered {
		t.Fatalf("stats differ:\n%+v\n%+v", fs, gs)
	}
	b2, _ := g.MarshalBinary()
	if !bytes.Equal(b, b2) {
		t.Fatal("re-encoding differs")
	}
	// the restored filter keeps ageing on schedule
	f.Advance(at(10 * time.Second))
	g.Advance(at(10 * time.Second))
	if f.Stats().Remembered != g.Stats().Remembered || g.Stats().Remembered != 0 {
		t.Fatal("restored filter does not forget on schedule")
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	f, c := snapFilter(t)
	b, _ := f.MarshalBinary()
	g := mustNew(t, c)
	before, _ := g.MarshalBinary()
	for i := range b { // every single-bit flip is caught
		for bit := 0; bit < 8; bit++ {
			d := bytes.Clone(b)
			d[i] ^= 1 << bit
			if err := g.UnmarshalBinary(d); !errors.Is(err, ErrSnapshot) {
				t.Fatalf("flip of byte %d bit %d: err = %v", i, bit, err)
			}
		}
	}
	for n := 0; n < len(b); n++ {
		if err := g.UnmarshalBinary(b[:n]); !errors.Is(err, ErrSnapshot) {
			t.Fatalf("truncated to %d bytes: err = %v", n, err)
		}
	}
	if err := g.UnmarshalBinary(append(bytes.Clone(b), 0)); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("trailing byte: err = %v", err)
	}
	after, _ := g.MarshalBinary()
	if !bytes.Equal(before, after) {
		t.Fatal("a failed restore changed the filter")
	}
	other := mustNew(t, Config{Bits: 301, Hashes: 3, Past: 2, Period: time.Second})
	if err := other.UnmarshalBinary(b); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("m mismatch: err = %v", err)
	}
}

func TestSnapshotClampsToConfig(t *testing.T) {
	f, _ := snapFilter(t) // N=2, t=1s: window 3s
	b, _ := f.MarshalBinary()
	g := mustNew(t, Config{Bits: 300, Hashes: 3, Past: 4, Period: time.Second, RetryHorizon: 5 * time.Second})
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if w := g.Window(); w < 5*time.Second {
		t.Fatalf("restored window %v below the configured horizon", w)
	}
}

func FuzzUnmarshal(fz *testing.F) {
	f, c := snapFilter(fz)
	b, _ := f.MarshalBinary()
	fz.Add(b)
	empty, _ := mustNew(fz, c).MarshalBinary()
	fz.Add(empty)
	fz.Add([]byte{})
	fz.Add([]byte("IFBF\x01\x00\x00\x00"))
	fz.Fuzz(func(t *testing.T, data []byte) {
		g := mustNew(t, c)
		if err := g.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("error not wrapping ErrSnapshot: %v", err)
			}
			return
		}
		// A snapshot that decodes must give a usable filter whose encoding
		// is stable.
		g.TestAndAdd([]byte("x"))
		g.Advance(g.Stats().Now.Add(time.Second))
		e1, _ := g.MarshalBinary()
		h := mustNew(t, c)
		if err := h.UnmarshalBinary(e1); err != nil {
			t.Fatalf("re-decoding our own encoding: %v", err)
		}
		e2, _ := h.MarshalBinary()
		if !bytes.Equal(e1, e2) {
			t.Fatal("encoding not stable")
		}
	})
}
