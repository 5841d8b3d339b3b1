package replica

import (
	"fmt"

	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/row"
)

// ColumnType is a column type: it knows how a leader applies a client's
// update, how two versions of a cell merge, and how to read a value. The
// vanilla counter is one implementation; FBF and handoff counters are others,
// added by registering a new type, not by a new code path.
type ColumnType interface {
	// Name is the type's name in schemas ("counter").
	Name() string
	// Lead applies a client's update on the leader replica and returns the
	// mutation to send to the other replicas.
	Lead(l Leader, u Update) (Mutation, error)
	// Merge reconciles two versions of one cell. For replicated state it must
	// be commutative, associative and idempotent.
	Merge(a, b row.Cell) (row.Cell, error)
	// Value reads a live cell's value.
	Value(c row.Cell) (int64, error)
}

// Leader is what a column type may do on the leader: the primitives of the
// replica's write path.
type Leader interface {
	// CounterID is the id this node's shards are written under now (the
	// host id until the node's first unclean start).
	CounterID() counters.ID
	// Lock takes the striped lock of one cell and returns its unlock.
	Lock(key row.Key, column string) (unlock func())
	// LocalShard returns this node's (clock, count) in the cell: from the
	// counter cache, else from the memtables and SSTables; (0, 0) if none.
	LocalShard(key row.Key, column string) (clock, count int64, err error)
	// Write logs the mutation's cell and applies it to the memtable. It
	// returns once the record is durable as the log's sync mode promises.
	Write(key row.Key, m Mutation, kind commitlog.PayloadKind) error
	// CacheLocalShard records this node's (clock, count) in the counter cache.
	CacheLocalShard(key row.Key, column string, clock, count int64)
}

// columnTypes are the registered column types by name.
var columnTypes = map[string]ColumnType{
	"counter":          vanillaCounter{},
	"legacy_counter":   legacyCounter{},
	HandoffCounterType: handoffCounter{},
}

// RegisterColumnType adds a column type. It is meant for init functions of
// packages that bring new counter designs.
func RegisterColumnType(t ColumnType) {
	if _, dup := columnTypes[t.Name()]; dup {
		panic("replica: column type registered twice: " + t.Name())
	}
	columnTypes[t.Name()] = t
}

// vanillaCounter is Cassandra's ≥ 2.1 counter: the leader locks the cell,
// reads its own shard, writes (clock+1, count+delta) as a global shard and
// replicates that shard.
type vanillaCounter struct{}

func (vanillaCounter) Name() string { return "counter" }

func (vanillaCounter) Lead(l Leader, u Update) (Mutation, error) {
	key := u.rowKey()
	unlock := l.Lock(key, u.Column)
	defer unlock()
	clock, count, err := l.LocalShard(key, u.Column)
	if err != nil {
		return Mutation{}, err
	}
	clock, count = clock+1, count+u.Delta
	m, err := u.mutation(counters.NewGlobal(l.CounterID(), clock, count))
	if err != nil {
		return Mutation{}, err
	}
	if err := l.Write(key, m, commitlog.PayloadShard); err != nil {
		return Mutation{}, err
	}
	l.CacheLocalShard(key, u.Column, clock, count)
	return m, nil
}

func (vanillaCounter) Merge(a, b row.Cell) (row.Cell, error) { return mergeCounterCells(a, b) }
func (vanillaCounter) Value(c row.Cell) (int64, error)       { return counterValue(c) }

// legacyCounter is Cassandra ≤ 2.0's counter, kept to show why it was
// replaced: the leader logs the delta itself as a local shard, with no read
// before write, and local shards sum when merged. Replaying a logged delta
// that is already in an SSTable counts it twice.
type legacyCounter struct{}

func (legacyCounter) Name() string { return "legacy_counter" }

func (legacyCounter) Lead(l Leader, u Update) (Mutation, error) {
	m, err := u.mutation(counters.NewLegacyDelta(l.CounterID(), u.Delta))
	if err != nil {
		return Mutation{}, err
	}
	if err := l.Write(u.rowKey(), m, commitlog.PayloadDelta); err != nil {
		return Mutation{}, err
	}
	return m, nil
}

func (legacyCounter) Merge(a, b row.Cell) (row.Cell, error) { return mergeCounterCells(a, b) }
func (legacyCounter) Value(c row.Cell) (int64, error)       { return counterValue(c) }

// mergeCounterCells merges two counter cells: a tombstone wins over any live
// cell whatever the timestamps (CASSANDRA-7346: a deleted counter cannot be
// used again); live cells merge their contexts.
func mergeCounterCells(a, b row.Cell) (row.Cell, error) {
	ts := max(a.Timestamp, b.Timestamp)
	if a.Tombstone || b.Tombstone {
		return row.Cell{Column: a.Column, Timestamp: ts, Tombstone: true}, nil
	}
	ca, err := counters.Decode(a.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", a.Column, err)
	}
	cb, err := counters.Decode(b.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", b.Column, err)
	}
	v, err := ca.Merge(cb).MarshalBinary()
	if err != nil {
		return row.Cell{}, err
	}
	return row.Cell{Column: a.Column, Value: v, Timestamp: ts}, nil
}

func counterValue(c row.Cell) (int64, error) {
	ctx, err := counters.Decode(c.Value)
	if err != nil {
		return 0, fmt.Errorf("column %q: %w", c.Column, err)
	}
	return ctx.Value(), nil
}
