package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/replica"
	"github.com/idemkv/idemkv/transport"
)

// writeOpAt is writeOp at a chosen consistency level, with the client id 1.
func (c *testCluster) writeOpAt(via int, key string, delta int64, seq uint64, cl coordinator.ConsistencyLevel) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := replica.Update{Table: 43, Key: []byte(key), Column: "c", Delta: delta, HasOp: true, OpTime: time.Now().UnixNano()}
	u.OpID[7], u.OpID[15] = 1, byte(seq)
	return c.node(via).Coordinator().CounterWrite(ctx, u, cl)
}

// TestFBFDismissedRetryWaitsForConsistency: a retry that the leader's
// filter dismisses is acknowledged only once the first attempt is on as
// many replicas as the retry's level asks. With every replication message
// lost, the first attempt at ALL times out and so must the retry; once the
// network heals, the retry succeeds and every replica holds the update.
func TestFBFDismissedRetryWaitsForConsistency(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterWriteTimeoutMS = 500 })
	c.createTable(3)
	c.createFBFTable()
	var block atomic.Bool
	block.Store(true)
	c.net.OnDeliver(func(from, to transport.Addr, m transport.Message, isResponse bool) bool {
		return block.Load() && !isResponse && m.Type == coordinator.TypeMutation
	})
	var wt *coordinator.WriteTimeoutError
	if err := c.writeOpAt(1, "d", 7, 1, coordinator.All); !errors.As(err, &wt) {
		t.Fatalf("first attempt with replication lost: %v, want a write timeout", err)
	}
	if err := c.writeOpAt(1, "d", 7, 1, coordinator.All); !errors.As(err, &wt) {
		t.Fatalf("retry at ALL while only the leader holds the update: %v, want a write timeout (acknowledging it would claim ALL)", err)
	}
	block.Store(false)
	if err := c.writeOpAt(1, "d", 7, 1, coordinator.All); err != nil {
		t.Fatalf("retry at ALL after the network healed: %v", err)
	}
	for i := 1; i <= 3; i++ {
		if v, _, err := c.node(i).Replica().Value(43, []byte("d"), "c"); err != nil || v != 7 {
			t.Fatalf("node %d holds %d (%v) after the acknowledged retry at ALL, want 7", i, v, err)
		}
	}
}
