package coordinator

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/transport"
)

// TypeHandoffExchange carries a handoff counter exchange to a replica of the
// key (a tier-0 node): table, key, column and an encoded handoff state or
// view; the answer is an outcome and, on success, the replica's view for the
// sender. Clients' exchanges (forwarded by their coordinator) and the
// replicas' anti-entropy use it alike.
const TypeHandoffExchange transport.Type = 20

// HandoffStore is what the handoff counter paths need of the local replica
// (replica.Replica implements it). A Store without it serves no handoff
// counters.
type HandoffStore interface {
	Exchange(table uint64, key []byte, column string, incoming []byte) ([]byte, error)
	SyncView(table uint64, key []byte, column string, peer counters.ID) ([]byte, error)
	TakeDirty() []coltype.CellRef
	MarkDirty(c coltype.CellRef)
	Sweep() (held int, err error)
}

// repairPolicy is implemented by Stores with columns that must not be read
// repaired (handoff counters: each replica holds its own state).
type repairPolicy interface {
	Repairs(table uint64, column string) bool
}

func (c *Coordinator) handoffStore() (HandoffStore, error) {
	h, ok := c.cfg.Store.(HandoffStore)
	if !ok {
		return nil, &InvalidError{Msg: "this node's store serves no handoff counters"}
	}
	return h, nil
}

// HandoffExchange forwards a client's handoff exchange (its encoded state or
// view, tier ≥ 1, or a handoff.Message with its retirement notice, whose
// servers the coordinator sets to the key's natural replicas) to one live
// natural replica of the key: one the client
// holds a token for if any is live (the client drops a token only on
// hearing from its destination), else the first live one in ring order (so
// that a client keeps meeting the same tier-0 node while it lives; any
// replica would be safe), trying the next live ones if it fails, and returns that replica's view for the client. The replica answers
// only once its merged state is durable. The consistency level is not used:
// an exchange involves one tier-0 node, and a client's increments stay in
// its own state (a token) until a tier-0 node has acquired them.
func (c *Coordinator) HandoffExchange(ctx context.Context, table uint64, key []byte, column string, state []byte) ([]byte, error) {
	reply, _, err := c.handoffExchange(ctx, table, key, column, state)
	return reply, err
}

// handoffExchange is HandoffExchange, also reporting whether an attempt
// with some replica failed before the one that answered (the failed one may
// have received the state and opened a slot).
func (c *Coordinator) handoffExchange(ctx context.Context, table uint64, key []byte, column string, state []byte) (reply []byte, failedAttempt bool, err error) {
	c.stats.handoffExchanges.Add(1)
	c.stats.handoffBytes.Add(uint64(len(state)))
	if _, err := c.handoffStore(); err != nil {
		return nil, false, err
	}
	msg, bare, err := handoff.DecodeMessage(state)
	if err != nil {
		return nil, false, &InvalidError{Msg: "handoff exchange: " + err.Error()}
	}
	in := msg.State
	if in.Tier() == 0 {
		return nil, false, &InvalidError{Msg: "handoff exchange: a client's state has tier 0 (the replicas' tier)"}
	}
	natural, live, _, err := c.placement(table, key, One)
	if err != nil {
		return nil, false, err
	}
	if !bare && len(msg.Notices) > 0 {
		var servers []handoff.ID
		for _, e := range natural {
			if id, err := parseHostID(e.ID); err == nil {
				servers = append(servers, id)
			}
		}
		slices.SortFunc(servers, handoff.ID.Compare)
		for _, h := range msg.Notices {
			h.Servers, h.Seen, h.Created = servers, nil, 0
		}
		if state, err = msg.MarshalBinary(); err != nil {
			return nil, false, err
		}
	}
	if len(live) == 0 {
		c.stats.unavailable.Add(1)
		return nil, false, &UnavailableError{CL: One, Required: 1, Alive: 0}
	}
	live = tokenDestinationsFirst(live, in.TokenDestinations())
	ctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.CounterWriteTimeout)
	defer cancel()
	var last error
	for _, e := range live {
		reply, err := c.exchangeWith(ctx, e, table, key, column, state)
		if err == nil {
			c.stats.handoffBytes.Add(uint64(len(reply)))
			return reply, failedAttempt, nil
		}
		var inv *InvalidError
		if errors.As(err, &inv) || ctx.Err() != nil {
			return nil, true, c.countTimeout(handoffTimeout(err))
		}
		last, failedAttempt = err, true
		c.logger.Debug("handoff exchange with replica failed", "replica", e.ID, "err", err)
	}
	return nil, true, c.countTimeout(handoffTimeout(last))
}

// tokenDestinationsFirst orders the live replicas for an exchange: those
// the sender holds tokens for first (it can drop a token only on hearing
// from its destination, §7.4), then ring order.
func tokenDestinationsFirst(live []ring.Endpoint, dsts []handoff.ID) []ring.Endpoint {
	if len(dsts) == 0 {
		return live
	}
	out := make([]ring.Endpoint, 0, len(live))
	rest := make([]ring.Endpoint, 0, len(live))
	for _, e := range live {
		id, err := parseHostID(e.ID)
		if err == nil && slices.Contains(dsts, id) {
			out = append(out, e)
		} else {
			rest = append(rest, e)
		}
	}
	return append(out, rest...)
}

func handoffTimeout(err error) error {
	var inv *InvalidError
	if errors.As(err, &inv) {
		return err
	}
	return &WriteTimeoutError{CL: One, BlockFor: 1, WriteType: WriteTypeCounter}
}

// exchangeWith runs one exchange with replica e (this node or a peer).
func (c *Coordinator) exchangeWith(ctx context.Context, e ring.Endpoint, table uint64, key []byte, column string, state []byte) ([]byte, error) {
	if e.ID == c.cfg.Cluster.Self().ID {
		h, err := c.handoffStore()
		if err != nil {
			return nil, err
		}
		reply, err := h.Exchange(table, key, column, state)
		if err != nil {
			return nil, &InvalidError{Msg: err.Error()}
		}
		return reply, nil
	}
	addr, ok := c.cfg.Cluster.Addr(e.ID)
	if !ok {
		return nil, transport.ErrUnreachable
	}
	resp, err := c.cfg.Transport.Request(ctx, addr, transport.Message{Type: TypeHandoffExchange, Body: encodeHandoffExchange(table, key, column, state)})
	if err != nil {
		return nil, err
	}
	return decodeHandoffReply(resp.Body)
}

// handoffAttempts bounds the exchanges of HandoffIncrement.
const handoffAttempts = 8

// HandoffIncrement serves a plain `UPDATE ... SET c = c + n` of a handoff
// column (a driver without the client helper): the coordinator acts as the
// tier-1 participant for this one request, with a fresh random id, adds n,
// and exchanges with a replica until its increments are handed off (a
// bounded number of exchanges within the counter write timeout). It answers
// success only once handed off, so a success counts n exactly once. On a
// timeout the increment may or may not have been acquired by a replica, and
// the temporary participant retires: with the driver's retry the update is
// at-least-once between the driver and the coordinator (a retry of an update
// whose answer was lost counts again), as a vanilla counter is.
//
// Retiring: a participant whose exchanges all succeeded left nothing behind.
// One that saw an exchange fail may have left a slot at a replica (the
// request arrived, the answer did not), and one that gives up may hold a
// token; it then retires in the background with a retirement notice
// (counters/handoff Notice), which delivers its tokens and drops its slots.
// Increments it had not yet moved into a token are abandoned (never
// counted), as the timeout allows.
func (c *Coordinator) HandoffIncrement(ctx context.Context, table uint64, key []byte, column string, n uint64) error {
	if n == 0 {
		return nil
	}
	var id handoff.ID
	if _, err := io.ReadFull(c.cfg.IDs, id[:]); err != nil {
		return err
	}
	p := handoff.NewCounter(id, 1)
	p.Add(n)
	rctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.CounterWriteTimeout)
	defer cancel()
	// touched: some replica may have received the participant's state;
	// failed: one may have kept a slot for it without the answer arriving.
	var touched, failed bool
	defer func() {
		if touched && (failed || !p.Handed()) {
			c.retireParticipant(context.WithoutCancel(ctx), table, key, column, p)
		}
	}()
	for i := 0; i < handoffAttempts && !p.Handed(); i++ {
		view, err := p.View(handoff.ID{}, 0).MarshalBinary()
		if err != nil {
			return err
		}
		reply, failedAttempt, err := c.handoffExchange(rctx, table, key, column, view)
		if err != nil {
			var inv *InvalidError
			var un *UnavailableError
			if errors.As(err, &inv) || errors.As(err, &un) {
				return err // refused or not sent
			}
			touched, failed = true, true
			if rctx.Err() != nil {
				return err
			}
			continue
		}
		touched, failed = true, failed || failedAttempt
		r := handoff.NewCounter(handoff.ID{}, 0)
		if err := r.UnmarshalBinary(reply); err != nil {
			return err
		}
		p.Merge(r)
	}
	if !p.Handed() {
		c.stats.writeTimeouts.Add(1)
		return &WriteTimeoutError{CL: One, BlockFor: 1, WriteType: WriteTypeCounter}
	}
	return nil
}

// retireAttempts bounds the attempts to deliver a participant's notice.
const retireAttempts = 8

// retireParticipant retires a coordinator's temporary participant in the
// background: its retirement notice goes to a live replica (up to
// retireAttempts attempts of half the counter write timeout each), which
// disseminates it. If it never gets
// there, the participant's leftover slots stay, and a token it held is lost
// with the timeout its request already reported.
func (c *Coordinator) retireParticipant(ctx context.Context, table uint64, key []byte, column string, p *handoff.Counter) {
	msg := &handoff.Message{State: p.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{{Notice: p.State.Retire()}}}
	b, err := msg.MarshalBinary()
	if err != nil {
		return
	}
	c.stats.handoffRetirements.Add(1)
	go func() {
		// Several attempts, each bounded by a fraction of the budget: a lost
		// message must not use it all.
		ctx, cancel := c.cfg.WithTimeout(ctx, retireAttempts*c.cfg.CounterWriteTimeout/2)
		defer cancel()
		pause := 20 * time.Millisecond
		for ctx.Err() == nil {
			actx, acancel := c.cfg.WithTimeout(ctx, c.cfg.CounterWriteTimeout/2)
			_, err := c.HandoffExchange(actx, table, key, column, b)
			acancel()
			if err == nil {
				return
			}
			var inv *InvalidError
			if errors.As(err, &inv) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
		}
		c.logger.Debug("handoff participant's retirement notice not delivered", "err", ctx.Err())
	}()
}

// handleHandoffExchange serves TypeHandoffExchange on a replica.
func (c *Coordinator) handleHandoffExchange(body []byte) (transport.Message, error) {
	table, key, column, state, err := decodeHandoffExchange(body)
	if err != nil {
		return transport.Message{}, err
	}
	h, err := c.handoffStore()
	if err != nil {
		return transport.Message{Type: TypeHandoffExchange, Body: encodeHandoffReply(nil, err)}, nil
	}
	reply, err := h.Exchange(table, key, column, state)
	if err != nil {
		err = &InvalidError{Msg: err.Error()}
	}
	return transport.Message{Type: TypeHandoffExchange, Body: encodeHandoffReply(reply, err)}, nil
}

// DefaultHandoffSyncInterval is the default period of RunHandoffSync.
const DefaultHandoffSyncInterval = time.Second

// handoffSyncWorkers bounds the concurrent exchanges of one round.
const handoffSyncWorkers = 8

// RunHandoffSync is the tier-0 anti-entropy of handoff counters: every
// interval, each handoff cell this replica changed since the last round is
// exchanged with every other natural replica of its key (this replica's
// View(peer, 0) out, the peer's view for it back and merged). A cell whose
// exchange with some peer failed (or whose peer is down) is kept for the
// next round. It returns when ctx ends.
func (c *Coordinator) RunHandoffSync(ctx context.Context, interval time.Duration) {
	h, ok := c.cfg.Store.(HandoffStore)
	if !ok {
		return
	}
	if interval <= 0 {
		interval = DefaultHandoffSyncInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c.HandoffSyncRound(ctx, h)
	}
}

// HandoffSyncRound runs one anti-entropy round (see RunHandoffSync), after
// dropping the retirement notices whose retention has passed.
func (c *Coordinator) HandoffSyncRound(ctx context.Context, h HandoffStore) {
	if _, err := h.Sweep(); err != nil {
		c.logger.Warn("handoff notice sweep failed", "err", err)
	}
	cells := h.TakeDirty()
	if len(cells) == 0 {
		return
	}
	jobs := make(chan coltype.CellRef)
	var wg sync.WaitGroup
	for range min(handoffSyncWorkers, len(cells)) {
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

// syncCell exchanges one cell with every other natural replica; false if
// some exchange did not complete.
func (c *Coordinator) syncCell(ctx context.Context, h HandoffStore, cell coltype.CellRef) bool {
	s, err := c.cfg.Tables.Strategy(cell.Table)
	if err != nil {
		return true // a dropped table: nothing to do
	}
	self := c.cfg.Cluster.Self().ID
	ok := true
	for _, e := range s.Replicas(c.cfg.Cluster.Metadata(), ring.Token(cell.Key)) {
		if e.ID == self {
			continue
		}
		if !c.cfg.Cluster.IsUp(e.ID) {
			ok = false
			continue
		}
		if err := c.syncWith(ctx, h, cell, e); err != nil {
			c.logger.Debug("handoff anti-entropy exchange failed", "peer", e.ID, "err", err)
			ok = false
		}
	}
	return ok
}

func (c *Coordinator) syncWith(ctx context.Context, h HandoffStore, cell coltype.CellRef, e ring.Endpoint) error {
	peer, err := parseHostID(e.ID)
	if err != nil {
		return err
	}
	view, err := h.SyncView(cell.Table, cell.Key, cell.Column, counters.ID(peer))
	if err != nil {
		return err
	}
	addr, ok := c.cfg.Cluster.Addr(e.ID)
	if !ok {
		return transport.ErrUnreachable
	}
	rctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.CounterWriteTimeout)
	defer cancel()
	c.stats.handoffSyncMessages.Add(1)
	c.stats.handoffSyncBytes.Add(uint64(len(view)))
	resp, err := c.cfg.Transport.Request(rctx, addr, transport.Message{Type: TypeHandoffExchange, Body: encodeHandoffExchange(cell.Table, cell.Key, cell.Column, view)})
	if err != nil {
		return err
	}
	reply, err := decodeHandoffReply(resp.Body)
	if err != nil {
		return err
	}
	c.stats.handoffSyncBytes.Add(uint64(len(reply)))
	_, err = h.Exchange(cell.Table, cell.Key, cell.Column, reply)
	return err
}

func parseHostID(s string) (handoff.ID, error) {
	var id handoff.ID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("coordinator: host id %q is not 16 hex bytes", s)
	}
	copy(id[:], b)
	return id, nil
}

func encodeHandoffExchange(table uint64, key []byte, column string, state []byte) []byte {
	e := newEnc()
	e.u64(table)
	e.bytes(key)
	e.str(column)
	e.bytes(state)
	return e.b
}

func decodeHandoffExchange(b []byte) (table uint64, key []byte, column string, state []byte, err error) {
	d := newDec(b)
	table, key, column, state = d.u64(), d.bytes(), d.str(), d.bytes()
	return table, key, column, state, d.end()
}

func encodeHandoffReply(reply []byte, err error) []byte {
	out := encodeResult(err)
	if err == nil {
		e := &enc{b: out}
		e.bytes(reply)
		out = e.b
	}
	return out
}

func decodeHandoffReply(b []byte) ([]byte, error) {
	d := newDec(b)
	if s := d.u8(); d.err != nil || s != statusOK {
		return nil, decodeResult(b)
	}
	reply := d.bytes()
	return reply, d.end()
}
