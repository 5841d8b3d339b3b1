package coordinator

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/transport"
)

// AntiEntropyStore is what the anti-entropy rounds need of the local
// replica (replica.Replica implements it): the cells of its
// coltype.AntiEntropy columns to reconcile, their payloads for a peer, and
// its Exchanger to take in a peer's answer. A Store without it runs no
// anti-entropy.
type AntiEntropyStore interface {
	ExchangeStore
	SyncView(table uint64, key []byte, column string, peer counters.ID) ([]byte, error)
	TakeDirty() []coltype.CellRef
	MarkDirty(c coltype.CellRef)
	Sweep() (held int, err error)
}

// DefaultAntiEntropyInterval is the default period of RunAntiEntropy.
const DefaultAntiEntropyInterval = time.Second

// antiEntropyWorkers bounds the concurrent exchanges of one round.
const antiEntropyWorkers = 8

// RunAntiEntropy reconciles the cells of the column types that are
// coltype.AntiEntropy (handoff counters, for one) with the other replicas:
// every interval, each such cell this replica changed since the last round
// is exchanged with every other natural replica of its key (this replica's
// payload for the peer, AntiEntropy.View, out; the peer's answer back and
// taken in through this replica's Exchanger). A cell whose exchange with
// some peer failed (or whose peer is down) is kept for the next round. It
// returns when ctx ends.
func (c *Coordinator) RunAntiEntropy(ctx context.Context, interval time.Duration) {
	h, ok := c.cfg.Store.(AntiEntropyStore)
	if !ok {
		return
	}
	if interval <= 0 {
		interval = DefaultAntiEntropyInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c.AntiEntropyRound(ctx, h)
	}
}

// AntiEntropyRound runs one anti-entropy round (see RunAntiEntropy), after
// the types' housekeeping (AntiEntropy.Sweep: handoff counters drop the
// retirement notices whose retention has passed).
func (c *Coordinator) AntiEntropyRound(ctx context.Context, h AntiEntropyStore) {
	if _, err := h.Sweep(); err != nil {
		c.logger.Warn("anti-entropy sweep failed", "err", err)
	}
	cells := h.TakeDirty()
	if len(cells) == 0 {
		return
	}
	jobs := make(chan coltype.CellRef)
	var wg sync.WaitGroup
	for range min(antiEntropyWorkers, len(cells)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cell := range jobs {
				if !c.syncCell(ctx, h, cell) {
					h.MarkDirty(cell)
				}
			}
		}()
	}
	for _, cell := range cells {
		jobs <- cell
	}
	close(jobs)
	wg.Wait()
}

// syncCell exchanges one cell with every other natural replica, and with
// its pending replicas (a joining node, the new owner of a leaving node's
// range: they get the leader's replication too); false if some exchange
// did not complete.
//
// The pending replicas are included for every AntiEntropy column, not
// only the Joinable ones: a client's exchange (handoff, Borrow) reaches
// only natural replicas, and a cell a pending replica streamed before the
// exchange, or not at all (a key first written after its range was
// streamed), would otherwise reach it only if the cell changed again
// after the movement. An anti-entropy exchange is a merge of this
// replica's view for the peer (handoff: the state for another tier-0 node)
// answered by the peer's, as the pending replica's own rounds already run
// with the natural replicas while it joins; no client's tokens or slots
// are placed with it.
func (c *Coordinator) syncCell(ctx context.Context, h AntiEntropyStore, cell coltype.CellRef) bool {
	natural, pending, _, _, err := c.placementPending(cell.Table, cell.Key, One)
	if err != nil {
		return true // a dropped table: nothing to do
	}
	self := c.cfg.Cluster.Self().ID
	ok := true
	for _, e := range slices.Concat(natural, pending) {
		if e.ID == self {
			continue
		}
		if !c.cfg.Cluster.IsUp(e.ID) {
			ok = false
			continue
		}
		if err := c.syncWith(ctx, h, cell, e); err != nil {
			c.logger.Debug("anti-entropy exchange failed", "peer", e.ID, "err", err)
			ok = false
		}
	}
	return ok
}

func (c *Coordinator) syncWith(ctx context.Context, h AntiEntropyStore, cell coltype.CellRef, e ring.Endpoint) error {
	peer, err := parseHostID(e.ID)
	if err != nil {
		return err
	}
	view, err := h.SyncView(cell.Table, cell.Key, cell.Column, peer)
	if err != nil {
		return err
	}
	addr, ok := c.cfg.Cluster.Addr(e.ID)
	if !ok {
		return transport.ErrUnreachable
	}
	rctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.CounterWriteTimeout)
	defer cancel()
	c.stats.antiEntropyMessages.Add(1)
	c.stats.antiEntropyBytes.Add(uint64(len(view)))
	resp, err := c.cfg.Transport.Request(rctx, addr, transport.Message{Type: TypeExchange, Body: encodeExchange(cell.Table, cell.Key, cell.Column, view)})
	if err != nil {
		return err
	}
	reply, err := decodeExchangeReply(resp.Body)
	if err != nil {
		return err
	}
	c.stats.antiEntropyBytes.Add(uint64(len(reply)))
	_, err = h.Exchange(cell.Table, cell.Key, cell.Column, reply)
	return err
}
