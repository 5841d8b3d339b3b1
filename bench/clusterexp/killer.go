package clusterexp

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/peer/cassandra"
)

// PeerKiller is a Cassandra peer ring (package peer/cassandra) as a
// bench.Killer: Kill sends SIGKILL to node i's JVM, Restart starts it again
// on its data and waits until the whole ring is up (a restart takes
// seconds, so the bench's kill loop, which restarts before it kills again,
// never has two nodes down). The bench draws the node to kill from the
// run's seed.
type PeerKiller struct {
	ring  cassandra.Ring
	nodes int
	log   *bench.FaultLog
	// Timeout bounds a restart and WaitUp (default 3 min).
	Timeout time.Duration
}

// NewPeerKiller opens the peer ring in dir.
func NewPeerKiller(dir string) (*PeerKiller, error) {
	r := cassandra.Ring{Dir: dir}
	st, err := r.State()
	if err != nil {
		return nil, fmt.Errorf("clusterexp: peer ring in %s: %w", dir, err)
	}
	return &PeerKiller{ring: r, nodes: st.Nodes, log: bench.NewFaultLog(), Timeout: 3 * time.Minute}, nil
}

// Hosts are the CQL addresses of the ring's nodes.
func (k *PeerKiller) Hosts() []string {
	var out []string
	for i := 1; i <= k.nodes; i++ {
		out = append(out, fmt.Sprintf("%s:%d", cassandra.Address(i), cassandra.CQLPort))
	}
	return out
}

// Size is the number of nodes.
func (k *PeerKiller) Size() int { return k.nodes }

// Log is where kills and restarts are logged.
func (k *PeerKiller) Log() *bench.FaultLog { return k.log }

// Kill sends SIGKILL to node i's JVM.
func (k *PeerKiller) Kill(i int) error {
	if err := k.ring.Kill(i); err != nil {
		return err
	}
	k.log.Add(bench.FaultEvent{Kind: bench.FaultKill, Node: i, Mode: cassandraVanilla, Detail: "SIGKILL"})
	return nil
}

// Restart starts node i again and waits until the ring is up.
func (k *PeerKiller) Restart(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), k.Timeout)
	defer cancel()
	start := time.Now()
	if err := k.ring.Restart(ctx, i); err != nil {
		return err
	}
	k.log.Add(bench.FaultEvent{Kind: bench.FaultRestart, Node: i, Mode: cassandraVanilla, Detail: fmt.Sprintf("up after %s", time.Since(start).Round(100*time.Millisecond))})
	return nil
}

// WaitUp waits until every node runs and the ring is up.
func (k *PeerKiller) WaitUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, k.Timeout)
	defer cancel()
	return k.ring.WaitUp(ctx)
}

var _ bench.Killer = (*PeerKiller)(nil)
