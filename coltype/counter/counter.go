package counter

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/row"
)

func init() {
	coltype.MustRegister(Vanilla{})
	coltype.MustRegister(Legacy{})
	if err := coltype.RegisterOption(idempotence{}); err != nil {
		panic(err)
	}
}

// Vanilla, the `counter` type, is Cassandra's ≥ 2.1 counter: the leader locks the cell,
// reads its own shard, writes (clock+1, count+delta) as a global shard and
// replicates that shard.
type Vanilla struct{}

// Name implements coltype.ColumnType.
func (Vanilla) Name() string { return "counter" }

// Lead implements coltype.Leading.
func (Vanilla) Lead(l coltype.Leader, u coltype.Update) (coltype.Mutation, error) {
	key := u.RowKey()
	unlock := l.Lock(key, u.Column)
	defer unlock()
	clock, count, err := l.LocalShard(key, u.Column)
	if err != nil {
		return coltype.Mutation{}, err
	}
	clock, count = clock+1, count+u.Delta
	v, err := counters.NewGlobal(l.CounterID(), clock, count).MarshalBinary()
	if err != nil {
		return coltype.Mutation{}, err
	}
	m := u.Mutation(v)
	if err := l.Write(key, m, commitlog.PayloadShard); err != nil {
		return coltype.Mutation{}, err
	}
	l.CacheLocalShard(key, u.Column, clock, count)
	return m, nil
}

// Merge implements coltype.ColumnType: see MergeCells.
func (Vanilla) Merge(a, b row.Cell) (row.Cell, error) { return MergeCells(a, b) }

// Value implements coltype.ColumnType: the sum of the shards.
func (Vanilla) Value(c row.Cell) (int64, error) { return CellValue(c) }

// Configure implements coltype.Configurable: a table that sets the
// idempotence option gets an FBF counter column, with its own filter and
// in-memory shards; prev (ALTER TABLE) hands its state over: the shards
// carry on, and a filter whose options changed stays consulted until every
// id it holds is older than its window.
func (Vanilla) Configure(env coltype.Env, d coltype.TableDef, column string, prev coltype.ColumnType) (coltype.ColumnType, error) {
	fo, on, clamped, err := tableFBF(d, env.CounterWriteTimeout())
	if err != nil || !on {
		return Vanilla{}, err
	}
	if len(clamped) > 0 {
		if lg, ok := env.(interface{ Logger() *slog.Logger }); ok && lg.Logger() != nil {
			lg.Logger().Warn(fmt.Sprintf("table %s.%s: idempotence options out of range, clamped to their limits: %s; the filter uses the limits. "+
				"To choose the values, run ALTER TABLE %s.%s WITH idempotence = {...} with values within the limits (docs/fbf.md)",
				d.Keyspace, d.Name, strings.Join(clamped, ", "), d.Keyspace, d.Name), "table", d.Keyspace+"."+d.Name, "column", column)
		}
	}
	old, _ := prev.(*fbfCounter)
	if old != nil && old.opts == fo {
		return old, nil
	}
	f, err := newFBFCounter(env, d.ID, column, fo)
	if err != nil {
		return nil, err
	}
	if old != nil {
		f.retire(old)
	}
	return f, nil
}

// Observe implements coltype.Observer: a replicated cell must decode, and
// when it carries this node's own shard (a repair, a hint) the cached copy
// may be older.
func (Vanilla) Observe(l coltype.Leader, m coltype.Mutation) error {
	if m.Cell.Tombstone {
		return nil
	}
	_, ours, err := counters.EncodedShard(m.Cell.Value, l.CounterID())
	if err != nil {
		return err
	}
	if ours {
		l.ForgetLocalShard(m.RowKey(), m.Cell.Column)
	}
	return nil
}

// Check implements coltype.Replayer: a replayed record holds a counter context.
func (Vanilla) Check(payload []byte) error {
	_, err := counters.Decode(payload)
	return err
}

// Replayed implements coltype.Replayer; a vanilla counter keeps no state.
func (Vanilla) Replayed(commitlog.Record) error { return nil }

// Legacy, the `legacy_counter` type, is Cassandra ≤ 2.0's counter, kept to show why it was
// replaced: the leader logs the delta itself as a local shard, with no read
// before write, and local shards sum when merged. Replaying a logged delta
// that is already in an SSTable counts it twice.
type Legacy struct{}

// Name implements coltype.ColumnType.
func (Legacy) Name() string { return "legacy_counter" }

// Lead implements coltype.Leading.
func (Legacy) Lead(l coltype.Leader, u coltype.Update) (coltype.Mutation, error) {
	v, err := counters.NewLegacyDelta(l.CounterID(), u.Delta).MarshalBinary()
	if err != nil {
		return coltype.Mutation{}, err
	}
	m := u.Mutation(v)
	if err := l.Write(u.RowKey(), m, commitlog.PayloadDelta); err != nil {
		return coltype.Mutation{}, err
	}
	return m, nil
}

// Merge implements coltype.ColumnType: see MergeCells.
func (Legacy) Merge(a, b row.Cell) (row.Cell, error) { return MergeCells(a, b) }

// Value implements coltype.ColumnType: the sum of the shards.
func (Legacy) Value(c row.Cell) (int64, error) { return CellValue(c) }

// Observe implements coltype.Observer as the vanilla counter does.
func (Legacy) Observe(l coltype.Leader, m coltype.Mutation) error {
	return Vanilla{}.Observe(l, m)
}

// Check implements coltype.Replayer as the vanilla counter does.
func (Legacy) Check(payload []byte) error { return Vanilla{}.Check(payload) }

// Replayed implements coltype.Replayer; nothing to restore.
func (Legacy) Replayed(commitlog.Record) error { return nil }

// MergeCells merges two counters.Context cells: a tombstone wins over any live
// cell whatever the timestamps (CASSANDRA-7346: a deleted counter cannot be
// used again); live cells merge their contexts.
func MergeCells(a, b row.Cell) (row.Cell, error) {
	ts := max(a.Timestamp, b.Timestamp)
	if a.Tombstone || b.Tombstone {
		return row.Cell{Column: a.Column, Timestamp: ts, Tombstone: true}, nil
	}
	v, err := counters.MergeEncoded(a.Value, b.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", a.Column, err)
	}
	return row.Cell{Column: a.Column, Value: v, Timestamp: ts}, nil
}

// CellValue reads a counters.Context cell.
func CellValue(c row.Cell) (int64, error) {
	ctx, err := counters.Decode(c.Value)
	if err != nil {
		return 0, fmt.Errorf("column %q: %w", c.Column, err)
	}
	return ctx.Value(), nil
}

// ServesClustering implements coltype.Clustered: the vanilla counter's
// state is its cells, the FBF's leader shards are kept per cell name.
func (Vanilla) ServesClustering() {}

// ServesClustering implements coltype.Clustered.
func (Legacy) ServesClustering() {}

// ServesClustering implements coltype.Clustered.
func (*fbfCounter) ServesClustering() {}
