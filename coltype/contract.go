package coltype

import (
	"errors"
	"sync"
	"time"

	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// ColumnType is the core of a counter design: how two versions of a cell
// merge and how a live cell reads. Everything else a design may need is an
// optional capability below, which the engine, the coordinator and the CQL
// layer detect with a type assertion (as hashicorp/raft detects a
// transport's WithPreVote): a type implements only the capabilities it
// needs, and a new capability does not break existing types.
//
// The capabilities, and the designs that use them:
//
//	Leading       the leader applies a client update          vanilla, legacy, FBF, toy designs
//	Configurable  one instance per table column (options)     FBF (the idempotence option)
//	Observer      replicated mutations seen before writing    FBF (learns op ids), vanilla (counter cache)
//	Replicated    replicated state applied by the type         handoff (per-replica states)
//	Deleter       what DELETE means                          handoff (refused), observed reset (a reset)
//	ReadPolicy    whether replica answers merge and repair    handoff (no), observed reset (dominant answer)
//	Replayer      commit-log records checked and re-learnt    FBF (op ids), handoff (its encoding)
//	Deduplicator  op ids remembered, in-doubt compensation    FBF
//	CQL           the type drivers see, which deltas are valid handoff (bigint, increments only)
//	Exchanger     a client exchange in a custom payload       handoff, Borrow (borrow/inc/retire)
//	DirectExchanger the payload goes unchanged to the replicas Borrow
//	Coordinated   coordinator-side exchanges and plain writes handoff (notice servers, token order, temporary participant)
//	ReadContext   SELECT returns what a DELETE may cancel      observed reset
//	CounterMap    a cell is a map of counters (map<text, bigint>) observed reset (map form)
//	Channel       a per-cell exactly-once FIFO op channel      observed reset
//	AntiEntropy   replicas reconcile cells in the background  handoff sync
//	Unstreamable  cells a new replica cannot take by streaming (none)
//	Joinable      a new replica adopts a current one's cell    observed reset (per-cell channel state)
//	Clustered     cells of tables with clustering columns     every design
//
// A type without a capability gets the default the capability's doc gives
// (a vanilla counter's behaviour).
type ColumnType interface {
	// Name is the type's name in schemas and in CQL ("counter").
	Name() string
	// Merge reconciles two versions of one cell (either may be a
	// tombstone). For replicated state it must be commutative, associative
	// and idempotent: memtables, compaction, replay and hints call it.
	Merge(a, b row.Cell) (row.Cell, error)
	// Value reads a live cell's value.
	Value(c row.Cell) (int64, error)
}

// Leading is the capability of types whose client updates are applied by a
// leader replica (the coordinator's counter write path): vanilla, legacy,
// FBF. A type without it refuses UPDATE through the leader path
// (ErrNotLed); it is updated by an Exchanger or a Channel.
type Leading interface {
	// Lead applies a client's update on the leader replica and returns the
	// mutation to send to the other replicas (Mutation.Dismissed: nothing
	// was applied, a retry was recognised).
	Lead(l Leader, u Update) (Mutation, error)
}

// ErrNotLed is returned for a client update of a type that is not Leading.
var ErrNotLed = errors.New("coltype: the column type is not updated through the leader path")

// Leader is what a column type may do on a replica: the primitives of the
// replica's write path, for one table.
type Leader interface {
	// CounterID is the id this node's shards are written under now (the
	// host id until the node's first unclean start).
	CounterID() counters.ID
	// Now is the replica's clock.
	Now() time.Time
	// Lock takes the striped lock of one cell and returns its unlock.
	Lock(key row.Key, column string) (unlock func())
	// Cell reads this replica's merged copy of a cell (memtables and
	// SSTables); found is false when it holds none. A tombstone is
	// returned (found, Tombstone set) so that a type may build on it.
	Cell(key row.Key, column string) (c row.Cell, found bool, err error)
	// LocalShard returns this node's (clock, count) in a counters.Context
	// cell: from the counter cache, else from the memtables and SSTables;
	// (0, 0) if none.
	LocalShard(key row.Key, column string) (clock, count int64, err error)
	// Write logs the mutation's cell and applies it to the memtable. It
	// returns once the record is durable as the log's sync mode promises.
	// kind says how replay treats the payload: PayloadShard is a state
	// that merges idempotently, PayloadDelta is applied again on replay
	// (legacy), PayloadTombstone is a deletion.
	Write(key row.Key, m Mutation, kind commitlog.PayloadKind) error
	// CacheLocalShard records this node's (clock, count) in the counter cache.
	CacheLocalShard(key row.Key, column string, clock, count int64)
	// ForgetLocalShard drops a cell from the counter cache.
	ForgetLocalShard(key row.Key, column string)
}

// LogSyncer is an optional capability of a Leader (the replica's has it):
// SyncLog writes and fsyncs every record the commit log holds, so that what
// was written survives a machine crash whatever the log's sync mode. In
// batch and group modes Write has already waited for that and SyncLog
// returns at once; in periodic mode it is one fsync. A type that must never lose a write
// it answered for (a Borrow-Counter's creator: a lost loan is lent twice)
// calls it before the answer leaves.
type LogSyncer interface {
	SyncLog() error
}

// Env is what a Configurable type may keep of its replica when it builds a
// column instance.
type Env interface {
	// Now is the replica's clock.
	Now() time.Time
	// CounterID is this node's current counter id.
	CounterID() counters.ID
	// CounterWriteTimeout is the cluster's counter write timeout.
	CounterWriteTimeout() time.Duration
	// HostID is this node's host id, its identity in the ring.
	HostID() counters.ID
	// Setting is the replica's setting of a name for its designs
	// ("" when unset), e.g. handoff_notice_retention.
	Setting(name string) string
}

// Configurable is the capability of types that hold state per table
// column, or read the table's options: the replica calls Configure when a
// table is opened or altered and uses the returned instance for the
// column. prev is the column's previous instance (ALTER TABLE), nil when
// the table is opened. The FBF is the `counter` type configured by the
// table's idempotence option (see the counter design's package).
type Configurable interface {
	Configure(env Env, d TableDef, column string, prev ColumnType) (ColumnType, error)
}

// Observer is the capability of types that look at replicated state before
// a replica writes it (a leader's mutation, a hint, a read repair): the
// FBF adds the op id to its filter, the vanilla counter drops its cached
// shard when its own shard comes back. An error refuses the mutation.
type Observer interface {
	Observe(l Leader, m Mutation) error
}

// SeenObserver is the capability of Observers that deduplicate op ids (the
// FBF): ObserveSeen is Observe, and also reports whether the mutation's op
// id was in the column's filter before it (the same test-and-add), which a
// replica needs to tell a leader's replication of an op it led itself
// (package coordinator, conflict.go).
type SeenObserver interface {
	ObserveSeen(l Leader, m Mutation) (seen bool, err error)
}

// Replicated is the capability of types that apply replicated state
// themselves instead of the engine's merge-and-write (handoff counters,
// whose replicas hold different states). The type writes through l.
type Replicated interface {
	ApplyReplicated(l Leader, m Mutation) error
}

// Deletion is a DELETE of one cell as the replica receives it.
type Deletion struct {
	Table     uint64
	Key       []byte
	Column    string
	Timestamp int64 // microseconds
	// Context is what the client observed (a custom payload), for designs
	// whose DELETE cancels only what was observed (the observed-reset
	// counter); nil when the client sent none.
	Context []byte
	// Replicas are the key's natural replicas when the deletion is led by
	// the coordinator (Update.Replicas); nil otherwise.
	Replicas []counters.ID
	// Pending are the key's pending replicas (Update.Pending).
	Pending []counters.ID
	// Element is the map key a DELETE m['key'] removes from a CounterMap
	// cell (Update.Element); "" deletes the whole cell.
	Element string
}

// RowKey is the deletion's partition as the storage engine keys it.
func (d Deletion) RowKey() row.Key { return row.Key{Token: ring.Token(d.Key), Partition: d.Key} }

// Deleter is the capability of types whose DELETE is not Cassandra's final
// tombstone. Without it, DELETE writes a tombstone that wins over every
// later increment (CASSANDRA-7346), as the vanilla counter's Merge rules.
type Deleter interface {
	// CheckDelete returns nil when DELETE of the column is allowed, else
	// the error CQL reports (handoff counters refuse it).
	CheckDelete(column string) error
	// Delete leads a deletion on a replica, writing through l under the
	// cell's lock it takes itself, and returns the mutation to replicate.
	// The observed reset writes the reset of what Context (or the
	// leader's state) observed, and the counter keeps counting.
	Delete(l Leader, d Deletion) (Mutation, error)
}

// ReadRule says how a coordinator combines replicas' answers for a type.
type ReadRule int

const (
	// ReadMerge merges the answers with the type's Merge and repairs the
	// replicas that lack the merged cell (sound for join-semilattice
	// states: vanilla, FBF, Borrow).
	ReadMerge ReadRule = iota
	// ReadNoRepair merges the answers into the value read but sends no
	// read repair: each replica holds its own state (handoff), which a
	// merged cell must not overwrite.
	ReadNoRepair
	// ReadDominant will answer with the state of the replica whose
	// delivered-sequence vector dominates, without merging entries and
	// without repair (the observed-reset counter: deleted entries forget
	// their n, so a merge can read higher than any real state). The
	// coordinator treats it as ReadNoRepair until that rule lands.
	ReadDominant
)

// ReadPolicy is the capability of types for which merging replica answers
// or read repair is not sound. Without it, ReadMerge applies.
type ReadPolicy interface {
	ReadRule() ReadRule
}

// Replayer is the capability of types that check, or learn from, the
// commit log records of their columns when a replica restarts. Replay
// calls Check on every record before merging it into the memtable (an
// error stops the replica from opening), and Replayed on every record still
// in the log, flushed or not, so that in-memory state (an FBF's filter)
// is rebuilt.
type Replayer interface {
	Check(payload []byte) error
	Replayed(rec commitlog.Record) error
}

// Deduplicator is the capability of types that remember recent op ids (the
// FBF): the replica keeps the commit-log segments holding ids younger than
// Window, answers other replicas' questions about an op (OpSeen), and after
// an unclean restart takes back an update it led that another leader
// counted too (Compensate; see the in-doubt protocol in replica). The
// machinery is generic: any type that deduplicates by op id and logs the
// leader's delta (Mutation.Log) gets it.
type Deduplicator interface {
	// Window is how long an op id is remembered at most.
	Window() time.Duration
	// OpSeen reports whether an op id on a cell is remembered.
	OpSeen(key []byte, opID [16]byte) bool
	// Compensate takes an update this node led back: delta comes off
	// this node's own state, logged with Mutation.Log.Compensation.
	Compensate(l Leader, u Update) error
	// DedupStats are the type's running counts.
	DedupStats() DedupStats
}

// DedupStats are a Deduplicator's running counts.
type DedupStats struct {
	Dismissed uint64 // retries recognised and acknowledged without applying
	Applied   uint64 // fresh operations applied on this node as leader
	NoOpID    uint64 // updates without an op id, applied without dedup
	// EstimatedFPP is the estimated false-positive probability: the
	// expected share of fresh operations dropped.
	EstimatedFPP float64
	BitsInUse    uint64
}

// CQL is the capability of types that drivers should see as another CQL
// type than counter, or that accept only some deltas. Without it a column
// is a CQL counter and takes any delta.
type CQL interface {
	// CQLType is the CQL type drivers see ("counter", "bigint").
	CQLType() string
	// CheckDelta returns nil when `c = c + delta` is valid for the type.
	CheckDelta(delta int64) error
}

// Exchanger is the capability of types updated by a client exchange
// carried in a CQL custom payload rather than by a delta: handoff counters
// (the client's state for the replica's view) and, next, Borrow-Counter
// (borrow a dot, count into it, retire). PayloadKey names the custom
// payload; Exchange runs on the replica that serves the client (and on a
// peer in anti-entropy) and returns the answer to put in the response's
// custom payload.
type Exchanger interface {
	PayloadKey() string
	Exchange(l Leader, table uint64, key []byte, column string, incoming []byte) ([]byte, error)
}

// ReadContext is the capability of types whose DELETE can cancel exactly
// what a client read (the observed-reset counter): a request carrying the
// custom payload ContextKey (any value) on a SELECT of one partition and
// one column of the type gets back, under the same key, the context of the
// cell as read (ContextOf the cell the coordinator answered with); a
// DELETE of one such column carrying the payload passes its value as the
// Deletion's Context.
type ReadContext interface {
	ContextKey() string
	ContextOf(c row.Cell) ([]byte, error)
}

// CounterMap is the capability of types whose cell holds a map of named
// counters (the observed-reset counter's embedded map form), which drivers
// read as map<text, bigint>: UPDATE t SET m = m + {'a': 1} leads one
// Update per key with Update.Element set, DELETE m['a'] a Delete with
// Element set, and a read shows the counters whose value is not 0.
type CounterMap interface {
	// MapValue reads a live cell: its counters whose value is not 0.
	MapValue(c row.Cell) (map[string]int64, error)
}

// DirectExchanger is the capability of Exchanger types whose client
// exchanges the coordinator forwards unchanged to the replicas of the key,
// and whose plain driver updates are led like a vanilla counter's (the type
// is Leading). An Exchanger without it is served by its own
// coordinator-side logic when it is Coordinated (handoff counters), else its
// payload goes to one live natural replica. Borrow-Counter uses it (borrow
// requests and client writes).
type DirectExchanger interface {
	Exchanger
	// ExchangeEverywhere reports whether a payload may be applied by every
	// replica (idempotent and joinable, as a client's write of its
	// cumulative count): the coordinator then sends it to every live
	// natural replica and answers once the statement's consistency level
	// is met. Otherwise (a borrow request) it goes to one live natural
	// replica, the first in ring order, then the next ones on failure.
	ExchangeEverywhere(payload []byte) bool
}

// Channel is the hook of types whose replicas exchange ops over a per-cell,
// exactly-once FIFO channel instead of state (the observed-reset counter:
// a reset must not overtake the increments it cancels, and a hint or a
// plain mutation gives no FIFO). It is not wired yet; the channel it
// describes will be built by the engine, not by the type:
//
//   - the leader's Lead (or Delete) returns a Mutation whose Cell.Value is
//     the op; the engine gives it the next sequence number of (origin
//     replica, cell), logs it in a durable outbox and sends it to every
//     natural replica, resending until each acknowledges;
//   - a receiver buffers gaps and calls Deliver in sequence order, exactly
//     once per (origin, sequence), logging the delivery with the new state;
//   - Delivered returns the per-origin vector of delivered sequences that
//     ReadDominant compares, and catch-up of a replica that was down
//     replays the outbox from its vector.
type Channel interface {
	Deliver(l Leader, origin counters.ID, seq uint64, op Mutation) error
	Delivered(l Leader, key row.Key, column string) (map[counters.ID]uint64, error)
}

// AntiEntropy is the capability of types whose replicas reconcile cells in
// the background rather than by read repair (handoff sync; the
// coordinator runs the rounds, coordinator.RunAntiEntropy, for every
// column that has it): TakeDirty lists the cells changed since
// the last round, View is this replica's payload for a peer, which the
// peer answers through its Exchanger, MarkDirty keeps a cell whose
// exchange failed for the next round, and Sweep is the type's housekeeping
// before a round (handoff drops expired retirement notices), returning how
// many items it still holds. A type may keep the CellRef MarkDirty is
// given, key included: its key must not change afterwards (ColumnID.CellRef
// and TakeDirty's references own theirs).
type AntiEntropy interface {
	TakeDirty() []CellRef
	MarkDirty(c CellRef)
	View(l Leader, key []byte, column string, peer counters.ID) ([]byte, error)
	Sweep(l Leader) (held int, err error)
}

// CellRef names one cell of a table.
type CellRef struct {
	Table  uint64
	Key    []byte // serialized partition key
	Column string
}

// Unstreamable is implemented by types whose cells a new replica cannot
// take by merging a streamed copy, nor adopt (Joinable): no type has it
// now (reset_counter, which had it, is Joinable). A node refuses to bootstrap into a ring that holds a column of such a
// type, and to be decommissioned while it holds one; without the
// capability a type's cells are streamed and merged like any replicated
// state.
type Unstreamable interface {
	// StreamRefusal says why, for the operator's error message.
	StreamRefusal() string
}

// Joinable is implemented by types whose cells a new replica of a key
// (a pending replica: a node joining the ring, or the new owner of a
// leaving node's range) cannot take by merging a streamed copy, but can
// adopt: one current replica makes it a snapshot of its own cell, after
// every current replica has prepared the cell for it. Streaming calls
// PrepareJoin on every current replica of a range first, then SnapshotFor
// on the one it streams from, and applies the snapshot on the new replica
// as a replicated mutation (Replicated.ApplyReplicated recognises it).
type Joinable interface {
	// PrepareJoin makes this (current) replica keep, for the joining
	// replica, every op of the cell it has not seen acknowledged by all
	// its peers, and send it every op it generates from now on.
	// column is the cell's name (the column's, or a composite one).
	PrepareJoin(l Leader, key []byte, column string, joiner counters.ID) error
	// SnapshotFor returns the cell the joiner adopts; ok is false when
	// this replica holds nothing of the cell (the joiner starts empty).
	SnapshotFor(l Leader, key []byte, column string, joiner counters.ID) (c row.Cell, ok bool, err error)
}

// ErrStaleSnapshot is wrapped by a Joinable type's refusal to adopt a
// snapshot that lacks ops the joining replica already delivered (its
// source is behind the joiner): the streamer takes a new snapshot and
// tries again. StaleSnapshotMessage is in its text, for an error that
// crossed the network.
var ErrStaleSnapshot = errors.New(StaleSnapshotMessage)

// StaleSnapshotMessage is ErrStaleSnapshot's text.
const StaleSnapshotMessage = "snapshot behind the joining replica"

// Clustered is implemented by types that keep their state per cell name,
// so that they serve tables with clustering columns, whose cells carry
// composite names (row.AppendComponent): the name a Leader, an Update or a
// Mutation gives is the cell's, not the column's. A type without it is
// refused in such tables (its state is kept per partition and column).
type Clustered interface {
	ServesClustering()
}

// ErrHeld is wrapped by a replica's refusal of a replicated op it cannot
// apply yet because an earlier op of the same origin has not arrived (a
// per-cell FIFO channel: the observed-reset counter). The op is held, not
// acknowledged; the sender may send it again once the earlier op had time
// to arrive (concurrent updates of one cell are replicated concurrently),
// and hints it if it is still held at its deadline. HeldMessage is in its
// text, for an error that crossed the network.
var ErrHeld = errors.New(HeldMessage)

// HeldMessage is ErrHeld's text.
const HeldMessage = "op held until the ops before it arrive"

// StatsScanEvery is how often at most a design's MetricsStats scans its
// cells in memory for the sums it reports (see replica's designStats); its
// running counts are always current.
const StatsScanEvery = 10 * time.Second

// StatsScan keeps the last result of a design's scan of its cells in
// memory for StatsScanEvery (a design's MetricsStats). The zero value is
// ready to use.
type StatsScan[S any] struct {
	mu sync.Mutex
	s  S
	at time.Time
}

// Get returns the last scan's result, running scan first when there is none
// or it is StatsScanEvery old at now (the replica's clock, Env.Now).
func (c *StatsScan[S]) Get(now time.Time, scan func() S) S {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || now.Sub(c.at) >= StatsScanEvery {
		c.s, c.at = scan(), now
	}
	return c.s
}
