package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkv/idemkv/transport"
)

// TypeHintPull asks a peer to deliver at once the hints it holds for the
// asker. Request: the asker's host id (length-prefixed string). Answer:
// empty, once the peer holds the asker up (from then on it replicates to
// it directly) and holds no hint for it (or its hints wait for updates in
// doubt of its own to be settled, see Hints.Pause); an error otherwise.
const TypeHintPull transport.Type = 22

// Catching up.
//
// A replica that was down or unreachable missed replicated state, which its
// peers keep as hints and deliver when they see it again. Until then its
// FBF filters lack the op ids of those updates, and a retry that reaches it
// as leader would be counted a second time. So a node pulls its hints from
// every peer that comes up in its view (at start-up, every peer it knows)
// and, while a pull is pending, leads no update that carries an op id: it
// applies nothing and the coordinator lets another live replica lead. A pull
// gives up after catchUpBound (the peer may be gone), and
// a peer that holds hints while it is down settles them itself when it
// restarts: its own updates behind them are in doubt (replica.InDoubt).

// catchUpPoll is how often a pending pull waits for its peer to be up or
// tries again.
const catchUpPoll = 20 * time.Millisecond

// catchUpBound is how long a node tries to pull its hints from one peer
// before it gives up: long enough for a restarted node's failure detector
// to see its peers up.
func catchUpBound(writeTimeout time.Duration) time.Duration {
	return max(10*time.Second, 4*writeTimeout)
}

// PeerUp starts pulling the hints a peer holds for this node; the node calls
// it for every peer it knows at start-up and whenever one comes up.
func (c *Coordinator) PeerUp(ctx context.Context, hostID string) {
	if hostID == c.cfg.Cluster.Self().ID {
		return
	}
	c.catchUpMu.Lock()
	if c.catchUp == nil {
		c.catchUp = map[string]bool{}
	}
	if c.catchUp[hostID] {
		c.catchUpMu.Unlock()
		return
	}
	c.catchUp[hostID] = true
	c.catchUpN.Store(int32(len(c.catchUp)))
	c.catchUpMu.Unlock()
	go func() {
		defer func() {
			c.catchUpMu.Lock()
			delete(c.catchUp, hostID)
			c.catchUpN.Store(int32(len(c.catchUp)))
			c.catchUpMu.Unlock()
		}()
		deadline := c.cfg.Now().Add(catchUpBound(c.cfg.CounterWriteTimeout))
		for c.cfg.Now().Before(deadline) {
			// A peer the failure detector does not hold up yet is tried
			// all the same in the first moments after this node's start.
			if c.cfg.Cluster.IsUp(hostID) || c.cfg.Now().Sub(c.started) < catchUpDiscovery {
				err := c.pullHints(ctx, hostID)
				if err == nil {
					c.stats.hintPulls.Add(1)
					return
				}
				if errors.Is(err, transport.ErrNotSent) {
					// Nothing listens there: the peer is down, its hints
					// wait with it (and their updates are in doubt when
					// it restarts, which pulls again through PeerUp).
					c.logger.Debug("hint pull: peer is down", "peer", hostID, "err", err)
					return
				}
				c.logger.Debug("hint pull failed", "peer", hostID, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(catchUpPoll):
			}
		}
		c.logger.Warn("gave up pulling hints from a peer; its updates in doubt are settled when it restarts", "peer", hostID)
	}()
}

// dedupTables is implemented by Tables that know which tables deduplicate
// updates by op id (FBF tables).
type dedupTables interface {
	Deduplicates(table uint64) bool
}

// deduplicates reports whether a table's counters dismiss retried op ids;
// without the knowledge, every table is taken to.
func (c *Coordinator) deduplicates(table uint64) bool {
	d, ok := c.cfg.Tables.(dedupTables)
	return !ok || d.Deduplicates(table)
}

// catchUpDiscovery is how long after its start a node counts every pull
// as pending, even to a peer its failure detector does not hold up yet: a
// restarted node hears from its peers only after a few gossip rounds.
const catchUpDiscovery = 3 * time.Second

// CatchingUp reports whether this node is pulling hints from a peer that
// came up (or restarted), and meanwhile leads no deduplicated update: the
// hints may hold op ids its filters lack, and another live replica leads
// those updates instead.
func (c *Coordinator) CatchingUp() bool { return c.catchingUp() }

// catchingUp reports whether a hint pull is pending from a peer that is up
// (a peer that is down delivers nothing; the updates behind its hints are
// in doubt when it restarts), or from any peer in the first moments after
// this node's start.
func (c *Coordinator) catchingUp() bool {
	if c.catchUpN.Load() == 0 {
		return false
	}
	c.catchUpMu.Lock()
	defer c.catchUpMu.Unlock()
	if len(c.catchUp) == 0 {
		return false
	}
	if c.cfg.Now().Sub(c.started) < catchUpDiscovery {
		return true
	}
	for peer := range c.catchUp {
		if c.cfg.Cluster.IsUp(peer) {
			return true
		}
	}
	return false
}

func (c *Coordinator) pullHints(ctx context.Context, hostID string) error {
	addr, ok := c.cfg.Cluster.Addr(hostID)
	if !ok {
		return fmt.Errorf("no address for %s", hostID)
	}
	e := newEnc()
	e.str(c.cfg.Cluster.Self().ID)
	// The peer may hold many hints for this node (all it missed while
	// down): the pull may take longer than one write.
	rctx, cancel := c.cfg.WithTimeout(ctx, catchUpBound(c.cfg.CounterWriteTimeout))
	defer cancel()
	_, err := c.cfg.Transport.Request(rctx, addr, transport.Message{Type: TypeHintPull, Body: e.b})
	return err
}

func (c *Coordinator) handleHintPull(ctx context.Context, body []byte) (transport.Message, error) {
	d := newDec(body)
	target := d.str()
	if err := d.end(); err != nil {
		return transport.Message{}, err
	}
	if !c.cfg.Cluster.IsUp(target) {
		// While this node holds the asker down it still hints what it
		// replicates to it, rather than sending it: a pull answered now
		// would end the asker's catching up before those hints exist,
		// and a retry of such an update led by the asker would count
		// twice. The asker pulls again until this node sees it up.
		return transport.Message{}, fmt.Errorf("coordinator: %s is not up in this node's view yet; it would still be hinted", target)
	}
	if c.cfg.Hints == nil {
		return transport.Message{Type: TypeHintPull}, nil
	}
	// Bounded: the asker may be cut off meanwhile, and a delivery holds the
	// hints' delivery lock.
	ctx, cancel := c.cfg.WithTimeout(ctx, 2*c.cfg.CounterWriteTimeout)
	defer cancel()
	left, err := c.cfg.Hints.DeliverTo(ctx, target, c.cfg.Cluster, c.cfg.Transport)
	if err != nil {
		return transport.Message{}, err
	}
	if left > 0 {
		return transport.Message{}, fmt.Errorf("coordinator: %d hints for %s not delivered yet", left, target)
	}
	return transport.Message{Type: TypeHintPull}, nil
}
