package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemkv/idemkv/localring"
)

// Killer kills and restarts the nodes of a ring under load: an embedded
// Cluster (a kill is node.Crash inside this process) or a ProcessRing (a
// kill is SIGKILL of a node process).
type Killer interface {
	Size() int
	// Kill stops node i (1-based) uncleanly; Restart starts it again on
	// its data directory. Both log the event in Log.
	Kill(i int) error
	Restart(i int) error
	// WaitUp waits until every node runs and sees every other up.
	WaitUp(ctx context.Context) error
	Log() *FaultLog
}

var _ Killer = (*Cluster)(nil)

// killLoop kills a node drawn by pick every `every`, keeps it down for
// down, and starts it again, until stopped reports true or ctx ends. A
// node killed is always restarted, even when the run stops while it is
// down, so that the final read finds every node back. It returns the
// first error (a failed restart ends the loop).
func killLoop(ctx context.Context, k Killer, pick func() int, every, down time.Duration, stopped func() bool) error {
	var firstErr error
	for wait(ctx, every, stopped) {
		i := pick()
		if err := k.Kill(i); err != nil && firstErr == nil {
			firstErr = err
		}
		wait(ctx, down, stopped)
		if err := k.Restart(i); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return firstErr
		}
	}
	return firstErr
}

// ProcessRing is a ring of node processes started by 'idemkv ring up'
// (package localring), as a Killer: Kill sends SIGKILL to node i's process
// and Restart starts it again and waits until it answers and sees the
// running nodes (as 'idemkv ring kill I' and 'idemkv ring start I' do).
type ProcessRing struct {
	ring  localring.Ring
	nodes []int
	log   *FaultLog
	// Timeout bounds a restart and WaitUp (default 60 s).
	Timeout time.Duration
	mu      sync.Mutex
	rng     *rand.Rand
}

// OpenProcessRing opens the ring in dir; seed draws the nodes to kill,
// in the order the embedded ring draws them with the same seed.
func OpenProcessRing(dir string, seed uint64) (*ProcessRing, error) {
	r := localring.Ring{Dir: dir}
	ns, err := r.Nodes()
	if err != nil {
		return nil, err
	}
	for k, n := range ns {
		if n != k+1 {
			return nil, fmt.Errorf("bench: the ring in %s has nodes %v: want 1 to %d", dir, ns, len(ns))
		}
	}
	return &ProcessRing{ring: r, nodes: ns, log: NewFaultLog(), Timeout: time.Minute, rng: rand.New(rand.NewPCG(seed, saltNode))}, nil
}

// Size is the number of nodes.
func (p *ProcessRing) Size() int { return len(p.nodes) }

// Log is where kills and restarts are logged.
func (p *ProcessRing) Log() *FaultLog { return p.log }

// Hosts are the nodes' CQL addresses, from their configurations.
func (p *ProcessRing) Hosts() ([]string, error) {
	var out []string
	for _, i := range p.nodes {
		c, err := p.ring.Config(i)
		if err != nil {
			return nil, err
		}
		out = append(out, c.CQLAddr())
	}
	return out, nil
}

// CommitLogSync is the nodes' commit log sync mode ("mixed" when they
// differ).
func (p *ProcessRing) CommitLogSync() string {
	mode := ""
	for _, i := range p.nodes {
		c, err := p.ring.Config(i)
		if err != nil {
			return "?"
		}
		if mode != "" && c.CommitLogSync != mode {
			return "mixed"
		}
		mode = c.CommitLogSync
	}
	return mode
}

// Kill sends SIGKILL to node i; a node that was not running is an error
// (it stopped by itself, or someone else stopped it).
func (p *ProcessRing) Kill(i int) error {
	res, err := p.ring.Kill(i)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if res.What != localring.DidKill {
		return fmt.Errorf("bench: kill: %s", res)
	}
	p.log.Add(FaultEvent{Kind: FaultKill, Node: i, Detail: fmt.Sprintf("SIGKILL pid %d", res.PID)})
	return nil
}

// Restart starts node i again and waits until it is up.
func (p *ProcessRing) Restart(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	res, err := p.ring.StartNode(ctx, i)
	if err != nil {
		return fmt.Errorf("bench: restart: %w", err)
	}
	p.log.Add(FaultEvent{Kind: FaultRestart, Node: i, Detail: fmt.Sprintf("pid %d", res.PID)})
	return nil
}

// WaitUp waits until every node process runs and sees every other up.
func (p *ProcessRing) WaitUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	if err := p.ring.WaitUp(ctx); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// randomNode returns a seeded random node number.
func (p *ProcessRing) randomNode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return 1 + p.rng.IntN(len(p.nodes))
}
