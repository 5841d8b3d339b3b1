package node

import (
	"errors"
	"os"
	"testing"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/transport"
)

// TestFBFPartitionedLeaderRetriedElsewhere: a leader applies an FBF update
// whose replication is lost and is then cut off by a partition (it keeps
// running); the client's retry is led by another replica, which has never
// seen the op id and counts it. When the partition heals, the first
// leader's hints carry its application to the others: the counter reads
// the update twice. The in-doubt resolution covers a leader that restarts
// (TestFBFInDoubtAfterCrash, TestFBFCleanStopDuringReplication), not one
// that stays up. The same happens whenever a retry's coordinator picks
// another leader while the first leader's replication is lost (message
// loss, and the first leader convicted or, to a coordinator that has just
// restarted, not heard from yet): TestRandomCluster with partitions or
// message loss on finds it. A known gap, not fixed: IDEMKV_KNOWN_BUGS=1
// runs it.
func TestFBFPartitionedLeaderRetriedElsewhere(t *testing.T) {
	if os.Getenv("IDEMKV_KNOWN_BUGS") == "" {
		t.Skip("known gap: a partitioned FBF leader's hinted update and a retry led elsewhere both count; IDEMKV_KNOWN_BUGS=1 runs it")
	}
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterWriteTimeoutMS = 500 })
	block := c.fbfWithMutationsBlocked()
	var wt *coordinator.WriteTimeoutError
	if err := c.writeOpAt(1, "p", 10, 1, coordinator.Quorum); !errors.As(err, &wt) {
		t.Fatalf("update with its replication lost: %v, want a write timeout", err)
	}
	leader := c.fbfLeaderOf()
	c.net.Isolate(transport.Addr(c.cfgs[leader-1].ListenAddress + ":7000"))
	block.Store(false)
	via := 1 + leader%3
	c.seenDown(via, leader)
	if err := c.writeOpAt(via, "p", 10, 1, coordinator.Quorum); err != nil {
		t.Fatalf("the client's retry: %v", err)
	}
	c.net.Heal()
	c.waitUp(3)
	c.waitFor("the leader's hints delivered", func() bool { return len(c.node(leader).Hints().Pending()) == 0 })
	if got := c.readFBF(via, "p"); got != 10 {
		t.Fatalf("counter after a partitioned leader's update and a retry elsewhere: %d, want 10", got)
	}
}
