package node

import (
	"testing"

	"github.com/idemkv/idemkv/coordinator"
)

// TestHintWindowDropsHints: with max_hint_window_in_ms of 1 ms, a node
// seen down has been down longer than the window, so no hint is stored
// for it (counted in NotStored); the writes still succeed at QUORUM. The
// window is compared with the time since gossip last heard the node,
// which is past the failure detector's conviction: no timing is asserted.
func TestHintWindowDropsHints(t *testing.T) {
	c := newTestCluster(t, 3, func(_ int, cfg *Config) { cfg.MaxHintWindowMS = 1 })
	c.createTable(3)
	c.stop(3)
	// Either live node may lead the update (and hint node 3): both must
	// know that node 3 is down.
	c.seenDown(1, 3)
	c.seenDown(2, 3)
	for i := 0; i < 5; i++ {
		if err := c.write(1, "k", 1, coordinator.Quorum); err != nil {
			t.Fatalf("QUORUM with one node down: %v", err)
		}
	}
	var notStored uint64
	for i := 1; i <= 2; i++ {
		h := c.node(i).Hints()
		if p := h.Pending(); len(p) != 0 {
			t.Fatalf("node %d stored hints for a node down longer than the window: %v", i, p)
		}
		notStored += h.NotStored()
	}
	if notStored == 0 {
		t.Fatal("no hint counted as not stored")
	}
}
