package coordinator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
)

// columnTypeNames is implemented by Stores that know the registered type of
// a table's column (replica.Replica): the coordinator finds a column
// type's coordinator-side capabilities (coltype.Coordinated,
// DirectExchanger) through it.
type columnTypeNames interface {
	ColumnTypeName(table uint64, column string) (string, bool)
}

// columnType returns the registered type of a column, nil when the Store
// cannot tell.
func (c *Coordinator) columnType(table uint64, column string) coltype.ColumnType {
	ns, ok := c.cfg.Store.(columnTypeNames)
	if !ok {
		return nil
	}
	name, ok := ns.ColumnTypeName(table, column)
	if !ok {
		return nil
	}
	t, _ := coltype.Lookup(name)
	return t
}

// Exchange serves a client's exchange of one cell whose column type is a
// coltype.Exchanger (the payload is the custom payload the type names) and
// returns the answer for the client. The column type decides how:
//
//   - a coltype.Coordinated type runs its own coordinator-side logic
//     (CoordinateExchange) with a Coordination of the cell: handoff
//     counters set the servers of a retirement notice and try first the
//     replicas the client holds tokens for;
//   - a coltype.DirectExchanger's payload goes unchanged to the replicas
//     (DirectExchange, everywhere when the type says the payload may be
//     applied by every replica);
//   - any other Exchanger's goes unchanged to one live natural replica, the
//     first in ring order, then the next ones on failure.
//
// The consistency level is used only by the payloads sent everywhere.
func (c *Coordinator) Exchange(ctx context.Context, table uint64, key []byte, column string, payload []byte, cl ConsistencyLevel) ([]byte, error) {
	switch t := c.columnType(table, column).(type) {
	case coltype.Coordinated:
		x, err := c.coordination(table, key, column)
		if err != nil {
			return nil, err
		}
		return t.CoordinateExchange(ctx, x, payload)
	case coltype.DirectExchanger:
		return c.DirectExchange(ctx, table, key, column, payload, cl, t.ExchangeEverywhere(payload))
	}
	return c.DirectExchange(ctx, table, key, column, payload, One, false)
}

// CoordinatedWrite serves a plain update `c = c + delta` of a cell whose
// column type is coltype.Coordinated (a client that sent no custom
// payload): the type's CoordinateWrite runs with a Coordination of the
// cell (handoff counters act as a temporary tier-1 participant for the
// request). The other types are updated by CounterWrite.
func (c *Coordinator) CoordinatedWrite(ctx context.Context, table uint64, key []byte, column string, delta int64) error {
	t, ok := c.columnType(table, column).(coltype.Coordinated)
	if !ok {
		return &InvalidError{Msg: fmt.Sprintf("column %s has no coordinator-side logic (not a coordinated type)", column)}
	}
	x, err := c.coordination(table, key, column)
	if err != nil {
		return err
	}
	return t.CoordinateWrite(ctx, x, delta)
}

// coordination returns the Coordination of one cell.
func (c *Coordinator) coordination(table uint64, key []byte, column string) (*coordination, error) {
	natural, _, _, err := c.placement(table, key, One)
	if err != nil {
		return nil, err
	}
	return &coordination{c: c, cell: coltype.CellRef{Table: table, Key: key, Column: column}, natural: natural}, nil
}

// coordination is the coordinator as a coltype.Coordinated type sees it,
// for one cell.
type coordination struct {
	c       *Coordinator
	cell    coltype.CellRef
	natural []ring.Endpoint
}

var _ coltype.Coordination = (*coordination)(nil)

func (x *coordination) Cell() coltype.CellRef { return x.cell }

func (x *coordination) Natural() []counters.ID { return replicaIDs(x.natural) }

// Live is the natural replicas the failure detector holds up now.
func (x *coordination) Live() []counters.ID { return replicaIDs(x.live()) }

func (x *coordination) live() []ring.Endpoint {
	var out []ring.Endpoint
	for _, e := range x.natural {
		if x.c.cfg.Cluster.IsUp(e.ID) {
			out = append(out, e)
		}
	}
	return out
}

// Exchange resolves the replicas among the natural ones (an id that is not
// one is refused) and runs exchangeFirst.
func (x *coordination) Exchange(ctx context.Context, replicas []counters.ID, payload []byte) ([]byte, bool, error) {
	es := make([]ring.Endpoint, 0, len(replicas))
	for _, id := range replicas {
		found := false
		for _, e := range x.natural {
			if eid, err := parseHostID(e.ID); err == nil && eid == id {
				es, found = append(es, e), true
				break
			}
		}
		if !found {
			return nil, false, &InvalidError{Msg: fmt.Sprintf("coordinator: %x is not a natural replica of the cell", id[:])}
		}
	}
	return x.c.exchangeFirst(ctx, x.cell.Table, x.cell.Key, x.cell.Column, es, payload)
}

func (x *coordination) Timeout() time.Duration { return x.c.cfg.CounterWriteTimeout }

func (x *coordination) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return x.c.cfg.WithTimeout(ctx, d)
}

func (x *coordination) NewID() (counters.ID, error) {
	var id counters.ID
	_, err := io.ReadFull(x.c.cfg.IDs, id[:])
	return id, err
}

func (x *coordination) Refused(msg string) error { return &InvalidError{Msg: msg} }

func (x *coordination) TimedOut() error {
	x.c.stats.writeTimeouts.Add(1)
	return &WriteTimeoutError{CL: One, BlockFor: 1, WriteType: WriteTypeCounter}
}

func (x *coordination) Retired() { x.c.stats.retirements.Add(1) }

func (x *coordination) Logger() *slog.Logger { return x.c.logger }
