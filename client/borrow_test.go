package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemkv/idemkv/counters/borrow"
)

// TestBorrowCounterFile: the state file keeps the id and a retirement
// across a reopen; a client that never borrowed retires at once (no
// exchange) and removes its file. The ring paths are in compat.
func TestBorrowCounterFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "b.state")
	b, err := NewBorrowCounter(nil, "ks.t", "c", "k = ?", BorrowOptions{File: file, ID: borrow.ID{7}}, "k")
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewBorrowCounter(nil, "ks.t", "c", "k = ?", BorrowOptions{File: file}, "k")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID() != (borrow.ID{7}) {
		t.Fatalf("reopened id %v, want 07…", again.ID())
	}
	if err := b.Retire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !b.Retired() {
		t.Fatal("not retired")
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file after Retire: %v", err)
	}
	if err := b.Add(context.Background(), 1); !errors.Is(err, ErrBorrowRetired) {
		t.Fatalf("Add after Retire: %v", err)
	}
	if err := os.WriteFile(file, []byte{1, 2, 3}, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBorrowCounter(nil, "ks.t", "c", "k = ?", BorrowOptions{File: file}, "k"); err == nil {
		t.Fatal("a corrupt state file was accepted")
	}
}
