package coordinator

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/vfs"
)

// TestHintWindow: hints for a node down longer than max_hint_window are not
// stored (counted, and logged once per outage, with Cassandra's words);
// within the window, and once the node is back, they are. The clock is a
// fake one: the downtime is what the test says.
func TestHintWindow(t *testing.T) {
	var logs bytes.Buffer
	h, err := OpenHints(vfs.NewMem(), "/d/hints", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	const a, b = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	var mu sync.Mutex
	start := time.Unix(1700000000, 0)
	now := start
	downSince := map[string]time.Time{a: start, b: start} // both go down at start
	up := map[string]bool{}
	h.SetWindow(DefaultMaxHintWindow, func(target string) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if up[target] {
			return 0
		}
		return now.Sub(downSince[target])
	})
	advance := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
	m := coltype.Mutation{Table: 1, Key: []byte("k"), Cell: row.Cell{Column: "c", Value: []byte{1}}}
	store := func(target string) {
		t.Helper()
		if err := h.Store(target, m); err != nil {
			t.Fatal(err)
		}
	}
	store(a)
	advance(3 * time.Hour) // exactly the window: still hinted
	store(a)
	advance(time.Millisecond)
	store(a)
	store(a)
	store(b)
	if got := h.Pending(); got[a] != 2 || got[b] != 0 {
		t.Fatalf("pending %v, want 2 hints for a (within the window) and none for b", got)
	}
	if n := h.NotStored(); n != 3 {
		t.Fatalf("NotStored %d, want 3", n)
	}
	if n := strings.Count(logs.String(), "Not hinting "+a+" which has been down 10800001 ms"); n != 1 {
		t.Fatalf("the outage of a logged %d times, want once:\n%s", n, logs.String())
	}
	// a comes back, then goes down again: hinted again, and a new outage
	// past the window is logged again.
	mu.Lock()
	up[a] = true
	mu.Unlock()
	store(a)
	mu.Lock()
	up[a] = false
	downSince[a] = now
	mu.Unlock()
	store(a)
	if got := h.Pending()[a]; got != 4 {
		t.Fatalf("pending for a %d, want 4", got)
	}
	advance(4 * time.Hour)
	store(a)
	if n := strings.Count(logs.String(), "Not hinting "+a); n != 2 {
		t.Fatalf("two outages of a logged %d times, want twice", n)
	}
	// No window: every hint is kept.
	h.SetWindow(0, nil)
	store(b)
	if got := h.Pending()[b]; got != 1 {
		t.Fatalf("without a window, pending for b %d, want 1", got)
	}
}
