package client

import (
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

func TestOpIDWireForm(t *testing.T) {
	r := testseed.Rand(t)
	for i := 0; i < 1000; i++ {
		op := OpID{Client: r.Uint64(), Sequence: r.Uint64()}
		b := op.Bytes()
		if len(b) != 16 {
			t.Fatalf("op id is %d bytes", len(b))
		}
		back, err := ParseOpID(b)
		if err != nil || back != op {
			t.Fatalf("round trip of %+v: %+v, %v", op, back, err)
		}
	}
	b := OpID{Client: 1, Sequence: 2}.Bytes()
	if b[7] != 1 || b[15] != 2 {
		t.Fatalf("not big-endian client then sequence: %x", b)
	}
	if _, err := ParseOpID(make([]byte, 15)); err == nil {
		t.Fatal("a 15-byte op id parsed")
	}
}

func TestSequencesAreReserved(t *testing.T) {
	c := New(nil, Options{ClientID: 7, StartSequence: 100})
	if got := c.reserve(1); got != 100 {
		t.Fatalf("first sequence %d, want 100", got)
	}
	if got := c.reserve(50); got != 101 {
		t.Fatalf("batch of 50 starts at %d, want 101", got)
	}
	if got := c.reserve(1); got != 151 {
		t.Fatalf("after a batch of 50: %d, want 151", got)
	}
	if New(nil, Options{}).ID() == 0 {
		t.Fatal("a random client id is 0")
	}
}
