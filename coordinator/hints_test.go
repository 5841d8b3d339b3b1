package coordinator

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/vfs"
)

// TestHintStoredAfterCloseIsRefused: a write still in flight while its node
// stops may store a hint after the hints are closed. It must fail, not
// reopen the target's log: that log would never be closed, and the next
// Hints opened on the directory (the restarted node) would share it, its
// segments interleaving with the new ones (seen as a corrupt segment at the
// next start).
func TestHintStoredAfterCloseIsRefused(t *testing.T) {
	mem := vfs.NewMem()
	const dir, target = "/d/hints", "0123456789abcdef0123456789abcdef"
	h, err := OpenHints(mem, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := coltype.Mutation{Table: 1, Key: []byte("k"), Cell: row.Cell{Column: "c", Value: []byte{1}}}
	if err := h.Store(target, m); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := mem.ReadDir(filepath.Join(dir, target))
	if err := h.Store(target, m); !errors.Is(err, ErrHintsClosed) {
		t.Fatalf("Store after Close: %v, want ErrHintsClosed", err)
	}
	after, _ := mem.ReadDir(filepath.Join(dir, target))
	if len(after) != len(before) {
		t.Fatalf("Store after Close changed the target's directory: %d entries, then %d", len(before), len(after))
	}
	h2, err := OpenHints(mem, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if got := len(h2.Queued()); got != 1 {
		t.Fatalf("reopened hints hold %d mutations, want the 1 stored before Close", got)
	}
}
