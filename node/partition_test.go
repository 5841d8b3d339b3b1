package node

import (
	"errors"
	"testing"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/transport"
)

// TestFBFPartitionedLeaderRetriedElsewhere: a leader applies an FBF update
// whose replication is lost and is then cut off by a partition (it keeps
// running); the client's retry is led by another replica, which has never
// seen the op id and counts it. When the partition heals, the first
// leader's hints carry its application to the others, and the counter read
// the update twice (20 where 10 were added): the in-doubt resolution covers
// a leader that restarts, not one that stays up. Now the replica that
// receives another leader's application of an op it counts itself makes
// the leader with the higher counter id take its application back
// (coordinator/conflict.go; the scenarios fbf_partitioned_leader_hints_*
// replay both orders of the two hints step by step). TestRandomCluster
// with partitions and message loss found the same double count.
func TestFBFPartitionedLeaderRetriedElsewhere(t *testing.T) {
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
