package coordinator

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/transport"
)

// TypeExchange carries an exchange to a replica of a cell whose column type
// is a coltype.Exchanger: table, key, column and the payload; the answer is
// an outcome and, on success, the replica's answer (its Exchanger's).
// Clients' exchanges (forwarded by their coordinator, or sent by a
// coltype.Coordinated type's coordinator-side logic) and the replicas'
// anti-entropy use it alike.
const TypeExchange transport.Type = 20

// ExchangeStore is what exchanges need of the local replica
// (replica.Replica implements it): its Exchanger columns. A Store without
// it serves no exchanges.
type ExchangeStore interface {
	Exchange(table uint64, key []byte, column string, incoming []byte) ([]byte, error)
}

func (c *Coordinator) exchangeStore() (ExchangeStore, error) {
	h, ok := c.cfg.Store.(ExchangeStore)
	if !ok {
		return nil, &InvalidError{Msg: "this node's store serves no exchanges"}
	}
	return h, nil
}

// DirectExchange forwards a client's exchange payload unchanged to the
// replicas of the key and returns a replica's answer. It serves the column
// types that are coltype.DirectExchanger; each replica runs the type's
// Exchange, which answers only once what it changed is durable.
//
// Without everywhere, the payload goes to one live natural replica, the
// first in ring order (so that a client keeps meeting the same replica
// while it lives), then the next live ones if it fails; the consistency
// level is not used. With everywhere (the type says the payload may be
// applied by every replica: idempotent and joinable), it goes to every live
// natural replica at once and the answer is the first one, returned once
// the consistency level is met; the replicas not reached catch up by the
// type's anti-entropy. A replica that refuses the payload (*InvalidError)
// ends the exchange.
func (c *Coordinator) DirectExchange(ctx context.Context, table uint64, key []byte, column string, payload []byte, cl ConsistencyLevel, everywhere bool) ([]byte, error) {
	if !everywhere {
		cl = One
	}
	if err := validateCounterWrite(cl); err != nil {
		return nil, err
	}
	_, live, req, err := c.placement(table, key, cl)
	if err != nil {
		return nil, err
	}
	if len(live) == 0 {
		c.stats.unavailable.Add(1)
		return nil, &UnavailableError{CL: One, Required: 1, Alive: 0}
	}
	if everywhere {
		if err := req.sufficient(live); err != nil {
			c.stats.unavailable.Add(1)
			return nil, err
		}
	}
	ctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.CounterWriteTimeout)
	defer cancel()
	if everywhere {
		c.stats.exchanges.Add(1)
		c.stats.exchangeBytes.Add(uint64(len(payload)))
		reply, err := c.exchangeEverywhere(ctx, table, key, column, payload, req, live)
		c.stats.exchangeBytes.Add(uint64(len(reply)))
		return reply, err
	}
	reply, _, err := c.exchangeFirst(ctx, table, key, column, live, payload)
	return reply, err
}

// exchangeEverywhere sends the payload to every live replica and returns
// the first answer once req is met. The sends outlive the answer (bounded
// by the counter write timeout), as a leader's replication does.
func (c *Coordinator) exchangeEverywhere(ctx context.Context, table uint64, key []byte, column string, payload []byte, req requirement, live []ring.Endpoint) ([]byte, error) {
	type result struct {
		reply []byte
		dc    string
		err   error
	}
	results := make(chan result, len(live))
	sctx, scancel := c.cfg.WithTimeout(context.WithoutCancel(ctx), c.cfg.CounterWriteTimeout)
	var wg sync.WaitGroup
	for _, e := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply, err := c.exchangeWith(sctx, e, table, key, column, payload)
			results <- result{reply: reply, dc: e.DC, err: err}
		}()
	}
	go func() {
		wg.Wait()
		scancel()
	}()
	t := req.newTally()
	var first []byte
	for received := 0; received < len(live); {
		select {
		case r := <-results:
			received++
			if r.err != nil {
				var inv *InvalidError
				if errors.As(r.err, &inv) {
					return nil, r.err
				}
				c.logger.Debug("direct exchange with replica failed", "err", r.err)
				continue
			}
			if first == nil {
				first = r.reply
			}
			t.add(r.dc)
			if t.met() {
				return first, nil
			}
		case <-ctx.Done():
			return nil, c.countTimeout(&WriteTimeoutError{CL: req.cl, Received: t.total, BlockFor: req.blockFor, WriteType: WriteTypeCounter})
		}
	}
	return nil, c.countTimeout(&WriteTimeoutError{CL: req.cl, Received: t.total, BlockFor: req.blockFor, WriteType: WriteTypeCounter})
}

// exchangeFirst sends payload to the replicas in turn until one answers and
// returns its answer; failed reports that an attempt failed before (the
// payload may have reached that replica). A refusal (*InvalidError) or the
// end of ctx stops it; when no replica answers the error is a
// *WriteTimeoutError (the outcome is unknown), and with no replica it is
// an *UnavailableError. It counts one exchange.
func (c *Coordinator) exchangeFirst(ctx context.Context, table uint64, key []byte, column string, replicas []ring.Endpoint, payload []byte) (reply []byte, failed bool, err error) {
	c.stats.exchanges.Add(1)
	c.stats.exchangeBytes.Add(uint64(len(payload)))
	if len(replicas) == 0 {
		c.stats.unavailable.Add(1)
		return nil, false, &UnavailableError{CL: One, Required: 1, Alive: 0}
	}
	var last error
	for _, e := range replicas {
		reply, err := c.exchangeWith(ctx, e, table, key, column, payload)
		if err == nil {
			c.stats.exchangeBytes.Add(uint64(len(reply)))
			return reply, failed, nil
		}
		var inv *InvalidError
		if errors.As(err, &inv) || ctx.Err() != nil {
			return nil, true, c.countTimeout(exchangeTimeout(err))
		}
		last, failed = err, true
		c.logger.Debug("exchange with replica failed", "replica", e.ID, "err", err)
	}
	return nil, true, c.countTimeout(exchangeTimeout(last))
}

// exchangeTimeout is the error of an exchange that did not complete: a
// refusal as is, else a counter write timeout at ONE.
func exchangeTimeout(err error) error {
	var inv *InvalidError
	if errors.As(err, &inv) {
		return err
	}
	return &WriteTimeoutError{CL: One, BlockFor: 1, WriteType: WriteTypeCounter}
}

// exchangeWith runs one exchange with replica e (this node or a peer).
func (c *Coordinator) exchangeWith(ctx context.Context, e ring.Endpoint, table uint64, key []byte, column string, payload []byte) ([]byte, error) {
	if e.ID == c.cfg.Cluster.Self().ID {
		h, err := c.exchangeStore()
		if err != nil {
			return nil, err
		}
		reply, err := h.Exchange(table, key, column, payload)
		if err != nil {
			return nil, &InvalidError{Msg: err.Error()}
		}
		return reply, nil
	}
	addr, ok := c.cfg.Cluster.Addr(e.ID)
	if !ok {
		return nil, transport.ErrUnreachable
	}
	resp, err := c.cfg.Transport.Request(ctx, addr, transport.Message{Type: TypeExchange, Body: encodeExchange(table, key, column, payload)})
	if err != nil {
		return nil, err
	}
	return decodeExchangeReply(resp.Body)
}

// handleExchange serves TypeExchange on a replica.
func (c *Coordinator) handleExchange(body []byte) (transport.Message, error) {
	table, key, column, payload, err := decodeExchange(body)
	if err != nil {
		return transport.Message{}, err
	}
	h, err := c.exchangeStore()
	if err != nil {
		return transport.Message{Type: TypeExchange, Body: encodeExchangeReply(nil, err)}, nil
	}
	reply, err := h.Exchange(table, key, column, payload)
	if err != nil {
		err = &InvalidError{Msg: err.Error()}
	}
	return transport.Message{Type: TypeExchange, Body: encodeExchangeReply(reply, err)}, nil
}

// parseHostID parses an endpoint id (a host id in hex).
func parseHostID(s string) (counters.ID, error) {
	var id counters.ID
	if len(s) != hex.EncodedLen(len(id)) {
		return id, fmt.Errorf("coordinator: host id %q is not 16 hex bytes", s)
	}
	// Decoded in place: this runs for every replica of every write.
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return counters.ID{}, fmt.Errorf("coordinator: host id %q is not 16 hex bytes", s)
	}
	return id, nil
}

func encodeExchange(table uint64, key []byte, column string, payload []byte) []byte {
	e := newEnc()
	e.u64(table)
	e.bytes(key)
	e.str(column)
	e.bytes(payload)
	return e.b
}

func decodeExchange(b []byte) (table uint64, key []byte, column string, payload []byte, err error) {
	d := newDec(b)
	table, key, column, payload = d.u64(), d.bytes(), d.str(), d.bytes()
	return table, key, column, payload, d.end()
}

func encodeExchangeReply(reply []byte, err error) []byte {
	out := encodeResult(false, err)
	if err == nil {
		e := &enc{b: out}
		e.bytes(reply)
		out = e.b
	}
	return out
}

func decodeExchangeReply(b []byte) ([]byte, error) {
	d := newDec(b)
	if s := d.u8(); d.err != nil || s != statusOK {
		_, err := decodeResult(b)
		return nil, err
	}
	reply := d.bytes()
	return reply, d.end()
}
