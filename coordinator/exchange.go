package coordinator

import (
	"context"
	"errors"
)

// DirectExchange forwards a client's exchange payload unchanged to one live
// natural replica of the key, the first in ring order (so that a client
// keeps meeting the same replica while it lives), trying the next live ones
// if it fails, and returns that replica's answer. It serves the column
// types that are coltype.DirectExchanger; the replica runs the type's
// Exchange, which answers only once what it changed is durable. The
// consistency level is not used: an exchange involves one replica, and
// the type spreads what it changed (by anti-entropy). A replica that
// refuses the payload (*InvalidError) ends the attempts.
func (c *Coordinator) DirectExchange(ctx context.Context, table uint64, key []byte, column string, payload []byte) ([]byte, error) {
	_, live, _, err := c.placement(table, key, One)
	if err != nil {
		return nil, err
	}
	if len(live) == 0 {
		c.stats.unavailable.Add(1)
		return nil, &UnavailableError{CL: One, Required: 1, Alive: 0}
	}
	ctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.CounterWriteTimeout)
	defer cancel()
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
