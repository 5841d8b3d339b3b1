package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

func TestHandoffCounterFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "h.state")
	h, err := NewHandoffCounter(nil, "ks.t", "c", "k = ?", HandoffOptions{File: file}, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !h.Handed() || h.Retire(context.Background()) != nil {
		t.Fatal("a fresh counter is not handed off and retirable")
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) || h.Add(1) != ErrRetired {
		t.Fatalf("after Retire: file %v, Add not refused", err)
	}
	h, err = NewHandoffCounter(nil, "ks.t", "c", "k = ?", HandoffOptions{File: file}, "k")
	if err != nil {
		t.Fatal(err)
	}
	id := h.ID()
	if err := h.Add(3); err != nil {
		t.Fatal(err)
	}
	back, err := NewHandoffCounter(nil, "ks.t", "c", "k = ?", HandoffOptions{File: file}, "k")
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != id || back.Value() != 3 || back.Handed() {
		t.Fatalf("reopened: id %v value %d handed %v; want %v, 3, false", back.ID(), back.Value(), back.Handed(), id)
	}
	// A retiring counter's frozen state and notice are in the file: reopened,
	// it refuses to count and goes on retiring.
	back.notice = back.state.State.Retire()
	if err := back.persist(); err != nil {
		t.Fatal(err)
	}
	again, err := NewHandoffCounter(nil, "ks.t", "c", "k = ?", HandoffOptions{File: file}, "k")
	if err != nil {
		t.Fatal(err)
	}
	if again.notice == nil || again.notice.ID != id || again.Add(1) != ErrRetired || again.Exchange(context.Background()) != ErrRetired {
		t.Fatal("a retiring counter reopened from its file is not retiring")
	}
	if h.stmt != "UPDATE ks.t SET c = c + ? WHERE k = ?" {
		t.Fatalf("statement %q", h.stmt)
	}
}
