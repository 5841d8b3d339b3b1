package coordinator

import (
	"context"
	"errors"
	"sync"

	"github.com/idemkv/idemkv/ring"
)

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
		return c.exchangeEverywhere(ctx, table, key, column, payload, req, live)
	}
	var last error
	for _, e := range live {
		reply, err := c.exchangeWith(ctx, e, table, key, column, payload)
		if err == nil {
			return reply, nil
		}
		var inv *InvalidError
		if errors.As(err, &inv) || ctx.Err() != nil {
			return nil, c.countTimeout(handoffTimeout(err))
		}
		last = err
		c.logger.Debug("direct exchange with replica failed", "replica", e.ID, "err", err)
	}
	return nil, c.countTimeout(handoffTimeout(last))
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
