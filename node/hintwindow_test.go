package node

import (
	"testing"
	"time"

	"github.com/idemkv/idemkv/coordinator"
)

// TestHintWindowDropsHints: with max_hint_window_in_ms of 1 ms, a node
// seen down has been down longer than the window, so no hint is stored
// for it (counted in NotStored); the writes still succeed at QUORUM. The
// window is compared with the time since gossip last heard the node; the
// test waits until that is past the window on both live nodes (either may
// lead the update and hint node 3): no timing is asserted.
func TestHintWindowDropsHints(t *testing.T) {
	c := newTestCluster(t, 3, func(_ int, cfg *Config) { cfg.MaxHintWindowMS = 1 })
	c.createTable(3)
	down := c.node(3).HostID()
	c.stop(3)
	// Either live node may lead the update (and hint node 3): both must
	// know that node 3 is down.
	c.seenDown(1, 3)
	c.seenDown(2, 3)
	// A clean stop announces itself: a node marks node 3 down the moment
	// it hears so, which is also when it last heard from it. Writes in the
	// same millisecond would still be within the window.
	c.waitFor("node 3 down longer than the window on nodes 1 and 2", func() bool {
		return c.node(1).view.downtime(down, time.Now()) > time.Millisecond &&
			c.node(2).view.downtime(down, time.Now()) > time.Millisecond
	})
	for i := 0; i < 5; i++ {
		if err := c.write(1, "k", 1, coordinator.Quorum); err != nil {
			t.Fatalf("QUORUM with one node down: %v", err)
		}
	}
	var notStored uint64
	for i := 1; i <= 2; i++ {
		h := c.node(i).Hints()
		// A hint for a live node (a replication message that timed out on
		// a loaded machine) is allowed; none for node 3.
		if p := h.Pending(); p[down] != 0 {
			t.Fatalf("node %d stored hints for a node down longer than the window: %v", i, p)
		}
		notStored += h.NotStored()
	}
	if notStored == 0 {
		t.Fatal("no hint counted as not stored")
	}
}
