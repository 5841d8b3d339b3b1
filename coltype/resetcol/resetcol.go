package resetcol

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/reset"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// TypeName is the column type of observed-reset counters (see the package
// documentation).
const TypeName = "reset_counter"

// PayloadKey names the type's exchanges (coltype.Exchanger). They are the
// replicas' anti-entropy messages (EncodeSync), not a client protocol.
const PayloadKey = "idemkv-reset-sync"

// MapTypeName is the column type of the embedded map form: a map of
// observed-reset counters in one cell, sharing the cell's clock C and its
// channels, which drivers read as map<text, bigint> (see MapType).
const MapTypeName = "map<text, reset_counter>"

// Type is the registered column type: stateless, it merges and reads
// cells. Configure gives each table column a *Column, which holds this
// replica's blobs of the column's cells and implements the writes.
type Type struct{}

// MapType is the registered column type of the map form (MapTypeName):
// Type's merge and reads, plus coltype.CounterMap. Configure gives each
// table column a *MapColumn.
type MapType struct{ Type }

func init() {
	coltype.MustRegister(Type{})
	coltype.MustRegister(MapType{})
}

// errUnconfigured is returned by the registered value's write methods: the
// replica calls the configured *Column's.
var errUnconfigured = errors.New("resetcol: a write needs the column's configured instance")

// Name implements coltype.ColumnType.
func (Type) Name() string { return TypeName }

// Configure implements coltype.Configurable: a column's blobs carry on
// across ALTER TABLE (prev).
func (Type) Configure(env coltype.Env, d coltype.TableDef, column string, prev coltype.ColumnType) (coltype.ColumnType, error) {
	if p, ok := prev.(*Column); ok {
		return p, nil
	}
	return configure(env, d, column, false)
}

// Name implements coltype.ColumnType.
func (MapType) Name() string { return MapTypeName }

// CQLType implements coltype.CQL: drivers see a map<text, bigint>.
func (MapType) CQLType() string { return "map<text, bigint>" }

// MapValue implements coltype.CounterMap: the cell's counters whose value
// is not 0.
func (MapType) MapValue(c row.Cell) (map[string]int64, error) {
	b, err := DecodeCell(c.Value)
	if err != nil {
		return nil, fmt.Errorf("column %q: %w", c.Column, err)
	}
	out := map[string]int64{}
	for k, v := range b.State.Values() {
		out[k] = int64(v)
	}
	return out, nil
}

// Configure implements coltype.Configurable for the map form.
func (MapType) Configure(env coltype.Env, d coltype.TableDef, column string, prev coltype.ColumnType) (coltype.ColumnType, error) {
	if p, ok := prev.(*MapColumn); ok {
		return p, nil
	}
	col, err := configure(env, d, column, true)
	if err != nil {
		return nil, err
	}
	return &MapColumn{col}, nil
}

func configure(env coltype.Env, d coltype.TableDef, column string, isMap bool) (*Column, error) {
	window := DefaultOpWindow
	if v := env.Setting(OpWindowSetting); v != "" {
		w, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("setting %s = %q: %w", OpWindowSetting, v, err)
		}
		window = w
	}
	return &Column{env: env, self: reset.ID(env.HostID()), id: coltype.ColumnID{Table: d.ID, Column: column}, window: window, isMap: isMap,
		cells: cellcache.Of(env), ns: cellcache.NewNamespace(), recent: &recentOps{}}, nil
}

// DefaultOpWindow is how long a replica remembers the client op ids of the
// increments it applied (Blob.Recent), so that a client's retry is
// dismissed, unless the replica setting OpWindowSetting (a Go duration)
// says otherwise.
const DefaultOpWindow = 10 * time.Second

// OpWindowSetting is the name of the replica setting (coltype.Env.Setting)
// of the op window.
const OpWindowSetting = "reset_op_window"

// Merge implements coltype.ColumnType: the maximum under the total order
// (delivered sum, owner, version, bytes), never a combination of two
// states (see the package documentation). A live cell wins over a
// tombstone (no reset_counter cell is ever a tombstone; this only keeps
// Merge total).
func (Type) Merge(a, b row.Cell) (row.Cell, error) {
	ts := max(a.Timestamp, b.Timestamp)
	switch {
	case a.Tombstone && b.Tombstone:
		return row.Cell{Column: a.Column, Timestamp: ts, Tombstone: true}, nil
	case a.Tombstone:
		return b, nil
	case b.Tombstone:
		return a, nil
	}
	ba, err := DecodeCell(a.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", a.Column, err)
	}
	bb, err := DecodeCell(b.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", b.Column, err)
	}
	out := b
	if Compare(ba, bb, a.Value, b.Value) >= 0 {
		out = a
	}
	out.Timestamp = ts
	return out, nil
}

// Compare orders two blobs by (delivered sum, owner, version), then by
// their encodings: the order Merge takes the maximum of.
func Compare(a, b *Blob, encA, encB []byte) int {
	if c := cmpU(a.Delivered(), b.Delivered()); c != 0 {
		return c
	}
	if c := a.State.Self().Compare(b.State.Self()); c != 0 {
		return c
	}
	if c := cmpU(a.Version, b.Version); c != 0 {
		return c
	}
	return bytes.Compare(encA, encB)
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Value implements coltype.ColumnType: the counter's value in the blob;
// for a map cell, the sum of its counters (CQL reads a map cell through
// coltype.CounterMap instead).
func (Type) Value(c row.Cell) (int64, error) {
	b, err := DecodeCell(c.Value)
	if err != nil {
		return 0, fmt.Errorf("column %q: %w", c.Column, err)
	}
	if b.State.Kind() == reset.KindMap {
		var sum uint64
		for _, v := range b.State.Values() {
			sum += v
		}
		return int64(sum), nil
	}
	return int64(b.State.Value("")), nil
}

// Lead implements coltype.Leading for the registered value (an error).
func (Type) Lead(coltype.Leader, coltype.Update) (coltype.Mutation, error) {
	return coltype.Mutation{}, errUnconfigured
}

// CheckDelete implements coltype.Deleter: DELETE is a reset, always allowed.
func (Type) CheckDelete(string) error { return nil }

// Delete implements coltype.Deleter for the registered value (an error).
func (Type) Delete(coltype.Leader, coltype.Deletion) (coltype.Mutation, error) {
	return coltype.Mutation{}, errUnconfigured
}

// ReadRule implements coltype.ReadPolicy: answers are never merged entry by
// entry nor repaired; Merge picks the dominant replica's state.
func (Type) ReadRule() coltype.ReadRule { return coltype.ReadDominant }

// CQLType implements coltype.CQL: drivers see a counter.
func (Type) CQLType() string { return "counter" }

// CheckDelta implements coltype.CQL: increments only.
func (Type) CheckDelta(d int64) error {
	if d < 0 {
		return fmt.Errorf("%s columns can only be incremented, got %d (DELETE resets them): %w", TypeName, d, reset.ErrDecrement)
	}
	return nil
}

// ContextPayloadKey is the CQL custom payload key of a reset context
// (coltype.ReadContext): a SELECT of one reset_counter carrying it gets
// the context of what it read; a DELETE carrying it cancels exactly that.
const ContextPayloadKey = "idemkv-reset-context"

// ContextKey implements coltype.ReadContext.
func (Type) ContextKey() string { return ContextPayloadKey }

// ContextOf implements coltype.ReadContext: the reset context
// (reset.Context, encoded) of what a read cell observes (of every key of
// a map cell).
func (Type) ContextOf(c row.Cell) ([]byte, error) {
	b, err := DecodeCell(c.Value)
	if err != nil {
		return nil, fmt.Errorf("column %q: %w", c.Column, err)
	}
	return b.State.ObserveAll().MarshalBinary()
}

// Check implements coltype.Replayer: a replayed record must hold a cell.
func (Type) Check(payload []byte) error {
	_, err := DecodeCell(payload)
	return err
}

// Replayed implements coltype.Replayer for the registered value.
func (Type) Replayed(commitlog.Record) error { return nil }

// Column is one reset_counter column of a table on one replica: this
// replica's blobs of its cells in memory, the cells changed since the last
// anti-entropy round and those whose outboxes hold ops.
type Column struct {
	Type
	env    coltype.Env
	self   reset.ID
	id     coltype.ColumnID // the column's table and name, and its cells' names
	window time.Duration
	isMap  bool // a *MapColumn's: the cells hold maps of counters

	// recent are the op ids applied within the window, per cell (see
	// recentOps); the blobs hold only those of their last write.
	recent *recentOps

	// cells are this replica's blobs of the column's cells in the
	// replica's bounded cell cache (namespace ns, partition key → *cell).
	// Every blob is written before the cell is unlocked (or the cell is
	// marked for a reload), and a cell is pinned while locked, so an
	// evicted cell is read again from storage, outboxes and inboxes
	// included; the dirty and pending sets hold CellRefs.
	cells *cellcache.Cache
	ns    uint64

	dirtyMu sync.Mutex
	dirty   map[string]coltype.CellRef
	pending map[string]pendingCell // cells whose outboxes hold ops

	generated, delivered, writes, syncs, dismissed atomic.Uint64

	statsScan coltype.StatsScan[Stats] // MetricsStats' last scan
}

// MapColumn is one column of the map form (MapTypeName) on one replica:
// a Column whose cells hold maps of counters.
type MapColumn struct{ *Column }

// Name implements coltype.ColumnType.
func (*MapColumn) Name() string { return MapTypeName }

// CQLType implements coltype.CQL.
func (*MapColumn) CQLType() string { return MapType{}.CQLType() }

// MapValue implements coltype.CounterMap.
func (*MapColumn) MapValue(c row.Cell) (map[string]int64, error) { return MapType{}.MapValue(c) }

// newState is an empty state of one of the column's cells.
func (col *Column) newState() *reset.State {
	if col.isMap {
		return reset.NewMap(col.self)
	}
	return reset.NewCounter(col.self)
}

// checkElement refuses a map key on a counter column (and, for a map, is
// the key checks a write needs).
func (col *Column) checkElement(e string) error {
	if e != "" && !col.isMap {
		return fmt.Errorf("%s: column %s is not a map, it has no key %q", TypeName, col.id.Column, e)
	}
	return nil
}

// pendingCell is a cell whose outboxes hold ops, and how many (as of its
// last load or write: Sweep counts them without loading the cell).
type pendingCell struct {
	ref coltype.CellRef
	ops int
}

// cell is this replica's blob of one cell, loaded from storage on first
// use (and after an eviction) and then changed only under mu.
type cell struct {
	mu     sync.Mutex
	loaded bool
	b      *Blob
	size   int // bytes of the stored blob
	// enc is the stored blob's encoding as loaded or last written (nil:
	// none): the next write supersedes it (coltype.Mutation.Supersedes).
	enc []byte
	// unsaved: acknowledgements trimmed the outboxes in memory since the
	// blob was last written (the next anti-entropy exchange writes it).
	unsaved bool

	// acks are the replicas' acknowledgements of this replica's ops, by
	// peer the highest op sequence number acknowledged (Mutation.Acked),
	// taken into the outboxes when the cell is next locked. Under ackMu,
	// not mu: an ack must not wait for a write of the cell.
	ackMu sync.Mutex
	acks  map[reset.ID]uint64
}

// cellBytes estimates the bytes of a cell's blob in memory besides the
// cache's overhead: the decoded state's maps, outboxes and inboxes (about
// 1.1 KiB for a cell of one entry, live heap measured by the replica's
// BenchmarkCellStateMemory), growing with the stored size, and the stored
// encoding it keeps (cell.enc).
func cellBytes(c *cell) int64 { return 768 + int64(5*c.size) }

// lock returns the cell, locked, loaded and pinned in the cell cache. The
// caller calls unlock, which records the cell's size, unlocks c.mu and
// unpins the cell.
func (col *Column) lock(l coltype.Leader, key []byte, name string) (c *cell, unlock func(), err error) {
	h, _ := col.cells.Acquire(col.ns, col.id.CellKey(key, name), func() any { return &cell{} })
	c = h.Value().(*cell)
	c.mu.Lock()
	unlock = func() {
		if c.loaded {
			h.SetSize(cellBytes(c))
		}
		c.mu.Unlock()
		h.Release()
	}
	if !c.loaded {
		if err := col.load(l, key, name, c); err != nil {
			unlock()
			return nil, nil, err
		}
	}
	col.takeAcks(c)
	return c, unlock, nil
}

// load reads a cell's blob from storage, as a cold start does. c.mu is
// held.
func (col *Column) load(l coltype.Leader, key []byte, name string, c *cell) error {
	b := &Blob{State: col.newState(), Out: map[reset.ID]*reset.Outbox{}, In: map[reset.ID]*reset.Inbox{}}
	stored, found, err := l.Cell(row.Key{Token: ring.Token(key), Partition: key}, col.id.CellName(name))
	if err != nil {
		return err
	}
	c.size, c.enc = 0, nil
	if found && !stored.Tombstone {
		sb, err := DecodeCell(stored.Value)
		if err != nil {
			return err
		}
		if sb.State.Self() != col.self {
			return fmt.Errorf("resetcol: the stored cell belongs to replica %s, not %s", sb.State.Self(), col.self)
		}
		if sb.State.Kind() != col.newState().Kind() {
			return fmt.Errorf("%w: column %s: the stored cell's kind is not the column's", ErrCorrupt, col.id.Column)
		}
		b, c.size, c.enc = sb, len(stored.Value), stored.Value
		// The op ids its last write applied (all of the window's, in a
		// blob written before recentOps): durable, so remembered.
		col.recent.add(col.id.CellKey(key, name), b.Recent, col.horizon())
		b.Recent = nil
	}
	c.b, c.loaded = b, true
	col.track(key, name, b)
	return nil
}

// track records whether a cell's outboxes hold ops (Sweep resends them).
func (col *Column) track(key []byte, name string, b *Blob) {
	col.dirtyMu.Lock()
	defer col.dirtyMu.Unlock()
	n := b.Pending()
	if n == 0 {
		delete(col.pending, col.id.CellKey(key, name))
		return
	}
	if col.pending == nil {
		col.pending = map[string]pendingCell{}
	}
	col.pending[col.id.CellKey(key, name)] = pendingCell{col.id.CellRef(key, name), n}
}

// write stores the cell's blob with a new version. On error the cell is
// reloaded from storage on next use (its in-memory blob may be ahead).
// c.mu is held.
//
// The blob carries the op ids this write applies (c.b.Recent, which the
// write empties), and the record the newest op time of them, so that the
// commit log keeps it for the op window (OpIDWindow); once the write is
// durable they join the column's recent op ids.
func (col *Column) write(l coltype.Leader, key []byte, name string, c *cell, ts int64) error {
	c.b.Version++
	enc, err := AppendCell(make([]byte, 0, c.size+64), c.b) // about its last size
	applied := c.b.Recent
	c.b.Recent = nil
	if err == nil {
		if ts == 0 {
			ts = col.env.Now().UnixMicro()
		}
		// Merge keeps the blob of the larger (delivered sum, owner,
		// version): the new blob has the same owner, a delivered sum at
		// least the old one's and the next version, so it supersedes the
		// one it was loaded from or last written as.
		m := coltype.Mutation{Table: col.id.Table, Key: key, Cell: row.Cell{Column: col.id.CellName(name), Value: enc, Timestamp: ts}, Supersedes: c.enc}
		for _, r := range applied {
			if !m.HasOp || r.Time > m.OpTime {
				m.HasOp, m.OpID, m.OpTime = true, r.ID, r.Time
			}
		}
		err = l.Write(row.Key{Token: ring.Token(key), Partition: key}, m, commitlog.PayloadShard)
	}
	if err != nil {
		c.loaded = false
		return err
	}
	c.size, c.enc, c.unsaved = len(enc), enc, false
	col.writes.Add(1)
	col.recent.add(col.id.CellKey(key, name), applied, col.horizon())
	col.track(key, name, c.b)
	return nil
}

// horizon is the oldest op time within the op window now (unix
// nanoseconds).
func (col *Column) horizon() int64 { return col.env.Now().Add(-col.window).UnixNano() }

// OpIDWindow is how long the commit log must keep a record of the column
// that carries op ids (package replica keeps its segment): a start learns
// the window's op ids from them again (Replayed).
func (col *Column) OpIDWindow() time.Duration { return col.window }

// Lead implements coltype.Leading: the increment is generated and applied
// here, pushed to every other replica's outbox and written durably; the
// returned mutation carries it with its sequence numbers.
func (col *Column) Lead(l coltype.Leader, u coltype.Update) (coltype.Mutation, error) {
	if err := col.CheckDelta(u.Delta); err != nil {
		return coltype.Mutation{}, err
	}
	if err := col.checkElement(u.Element); err != nil {
		return coltype.Mutation{}, err
	}
	if u.Delta == 0 {
		// c = c + 0 changes nothing: an op addressed to nobody.
		return coltype.Mutation{Table: col.id.Table, Key: u.Key, Cell: row.Cell{Column: col.id.CellName(u.Column), Value: EncodeOp(col.self, nil, nil), Timestamp: u.Timestamp}}, nil
	}
	c, unlock, err := col.lock(l, u.Key, u.Column)
	if err != nil {
		return coltype.Mutation{}, err
	}
	defer unlock()
	var rec *OpRecord
	if u.HasOp {
		if col.seen(u.Key, u.Column, u.OpID) {
			// A retry of an increment applied here (led or delivered):
			// nothing is applied; the replica answers with its cell,
			// which the coordinator re-sends to the other replicas
			// (ApplyReplicated takes their ops from it).
			col.dismissed.Add(1)
			return coltype.Mutation{Table: col.id.Table, Key: u.Key, Cell: row.Cell{Column: col.id.CellName(u.Column)}, HasOp: true, OpID: u.OpID, OpTime: u.OpTime, Dismissed: true}, nil
		}
		rec = &OpRecord{ID: u.OpID, Time: u.OpTime}
		if rec.Time <= 0 {
			rec.Time = col.env.Now().UnixNano()
		}
	}
	op, err := c.b.State.Inc(u.Element, u.Delta)
	if err != nil {
		return coltype.Mutation{}, fmt.Errorf("%s: %w", TypeName, err)
	}
	if rec != nil {
		remember(c.b, *rec)
	}
	return col.emit(l, u.Key, u.Column, c, op, rec, u.Replicas, u.Pending, u.Timestamp)
}

// acked records that a peer acknowledged this replica's ops of a cell up to
// seq (it answered the replication of op seq, and a replica answers only
// once it delivered every op before it: its inbox is FIFO). The outbox is
// trimmed in memory when the cell is next locked (takeAcks) and in storage
// with the cell's next write; a crash before it resends ops the peer
// ignores as duplicates. Without it only the anti-entropy rounds trimmed
// the outboxes, and a hot cell's outboxes held the ops of a round or two
// (4,500 at 2,500 updates/s), which every write of the cell rewrote.
func (col *Column) acked(key []byte, name string, peer reset.ID, seq uint64) {
	h, _ := col.cells.Acquire(col.ns, col.id.CellKey(key, name), func() any { return &cell{} })
	defer h.Release()
	c := h.Value().(*cell)
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if c.acks == nil {
		c.acks = map[reset.ID]uint64{}
	}
	c.acks[peer] = max(c.acks[peer], seq)
}

// takeAcks trims the outboxes of a locked, loaded cell by the peers'
// acknowledgements recorded since (acked). c.mu is held.
func (col *Column) takeAcks(c *cell) {
	c.ackMu.Lock()
	acks := c.acks
	c.acks = nil
	c.ackMu.Unlock()
	for p, seq := range acks {
		if o := c.b.Out[p]; o != nil {
			n := o.Len()
			o.Ack(seq)
			c.unsaved = c.unsaved || o.Len() != n
		}
	}
}

// seen reports whether a client op id is among the cell's recent ones.
func (col *Column) seen(key []byte, name string, id [16]byte) bool {
	return col.recent.has(col.id.CellKey(key, name), id, col.horizon())
}

// remember adds an op id to the ones a blob's next write applies (kept
// sorted by id).
func remember(b *Blob, r OpRecord) {
	i, found := slices.BinarySearchFunc(b.Recent, r.ID, func(x OpRecord, id [16]byte) int { return bytes.Compare(x.ID[:], id[:]) })
	if !found {
		b.Recent = slices.Insert(b.Recent, i, r)
	}
}

// Delete implements coltype.Deleter: a reset of what the deletion's
// context observed, or of what this (the leading) replica observes now.
//
// On a map column, Deletion.Element names the key removed (DELETE
// m['a']): only that key's counter is reset, and a context is narrowed to
// that key; without an Element every key is.
func (col *Column) Delete(l coltype.Leader, d coltype.Deletion) (coltype.Mutation, error) {
	if err := col.checkElement(d.Element); err != nil {
		return coltype.Mutation{}, err
	}
	c, unlock, err := col.lock(l, d.Key, d.Column)
	if err != nil {
		return coltype.Mutation{}, err
	}
	defer unlock()
	var ctx reset.Context
	switch {
	case len(d.Context) > 0:
		if err := ctx.UnmarshalBinary(d.Context); err != nil {
			return coltype.Mutation{}, fmt.Errorf("%s: reset context: %w", TypeName, err)
		}
		if d.Element != "" {
			ctx.Keys = slices.DeleteFunc(ctx.Keys, func(k reset.KeyContext) bool { return k.Key != d.Element })
		}
	case d.Element != "":
		ctx = c.b.State.Observe(d.Element)
	default:
		ctx = c.b.State.ObserveAll()
	}
	if ctx.Empty() {
		// Nothing to cancel: an op addressed to nobody.
		return coltype.Mutation{Table: d.Table, Key: d.Key, Cell: row.Cell{Column: d.Column, Value: EncodeOp(col.self, nil, nil), Timestamp: d.Timestamp}}, nil
	}
	op, err := c.b.State.Reset(ctx)
	if err != nil {
		c.loaded = false
		return coltype.Mutation{}, fmt.Errorf("%s: %w", TypeName, err)
	}
	return col.emit(l, d.Key, d.Column, c, op, nil, d.Replicas, d.Pending, d.Timestamp)
}

// emit pushes an op this replica generated (and applied to c.b.State) to
// the outbox of every peer (the natural and pending replicas given, and
// those the cell already has an outbox for), writes the blob and returns
// the mutation to replicate. c.mu is held.
func (col *Column) emit(l coltype.Leader, key []byte, name string, c *cell, op reset.Op, rec *OpRecord, replicas, pending []counters.ID, ts int64) (coltype.Mutation, error) {
	enc, err := op.MarshalBinary()
	if err != nil {
		c.loaded = false
		return coltype.Mutation{}, fmt.Errorf("%s: %w", TypeName, err)
	}
	payload := EncodeChannelOp(enc, rec)
	for _, id := range col.peers(c, replicas, pending) {
		if c.b.Out[id] == nil {
			c.b.Out[id] = col.newOutbox(c, false)
		}
	}
	var seqs []Seq
	for _, id := range slices.SortedFunc(maps.Keys(c.b.Out), reset.ID.Compare) {
		e := c.b.Out[id].Push(payload)
		seqs = append(seqs, Seq{Peer: id, Seq: e.Seq})
	}
	c.b.Gen++
	if err := col.write(l, key, name, c, ts); err != nil {
		return coltype.Mutation{}, err
	}
	// Anti-entropy only has to push ops and bring acks back: a new op
	// puts its cell in the next round, and Sweep keeps a cell whose
	// outboxes hold ops in every round after. A cell with nothing pending
	// needs no round (its peers' rounds carry their ops and its acks).
	col.MarkDirty(col.id.CellRef(key, name))
	col.generated.Add(1)
	m := coltype.Mutation{Table: col.id.Table, Key: key, Cell: row.Cell{Column: col.id.CellName(name), Value: EncodeOp(col.self, payload, seqs), Timestamp: ts}}
	m.Acked = func(peer counters.ID) {
		for _, s := range seqs {
			if s.Peer == reset.ID(peer) {
				col.acked(key, name, s.Peer, s.Seq)
			}
		}
	}
	if rec != nil {
		m.HasOp, m.OpID, m.OpTime = true, rec.ID, rec.Time
	}
	return m, nil
}

// peers returns the replicas an op generated here must reach besides those
// the cell already has an outbox to: the natural and pending replicas the
// coordinator names (coltype.Update.Replicas, coltype.Deletion.Replicas),
// or, for a write that does not come through the coordinator (no replica
// named: the replica-level Delete, a Lead without Replicas), every origin
// the cell delivered ops from. Such an origin is a replica of the cell:
// skipping it would send this op to nobody, and its outbox, created at a
// later op, would number from 0 and never carry this one (the replicas
// would diverge for good: an observed reset of its increments applied here
// and never there). With a replica list the list alone is used: it names
// every natural and pending replica, while the inboxes also name nodes
// that left the ring, to which a new outbox would never drain. c.mu is
// held.
func (col *Column) peers(c *cell, replicas, pending []counters.ID) []reset.ID {
	var out []reset.ID
	for _, r := range slices.Concat(replicas, pending) {
		if id := reset.ID(r); id != col.self {
			out = append(out, id)
		}
	}
	if len(replicas) == 0 && len(pending) == 0 {
		for id := range c.b.In {
			if id != col.self {
				out = append(out, id)
			}
		}
	}
	return out
}

// ApplyReplicated implements coltype.Replicated: an op another replica
// led (its mutation, a hint, a retry) goes to this replica's inbox for its
// origin, which delivers it once and in order; what is deliverable is
// applied and written durably before the replica acknowledges.
func (col *Column) ApplyReplicated(l coltype.Leader, m coltype.Mutation) error {
	if m.Cell.Tombstone {
		return fmt.Errorf("%s columns are reset by DELETE through a leader, never tombstoned", TypeName)
	}
	if len(m.Cell.Value) > 0 && (m.Cell.Value[0] == FormatCell || m.Cell.Value[0] == FormatMapCell) {
		return col.applyCell(l, m)
	}
	origin, payload, seqs, err := DecodeOp(m.Cell.Value)
	if err != nil {
		return err
	}
	if origin == col.self {
		return nil // our own op, echoed
	}
	i := slices.IndexFunc(seqs, func(s Seq) bool { return s.Peer == col.self })
	if i < 0 {
		return nil // not addressed to this replica
	}
	c, unlock, err := col.lock(l, m.Key, m.Cell.Column)
	if err != nil {
		return err
	}
	defer unlock()
	seq := seqs[i].Seq
	if err := col.receive(l, m.Key, m.Cell.Column, c, origin, []reset.Envelope{{Seq: seq, Payload: payload}}, false); err != nil {
		return err
	}
	if d := c.b.In[origin].Delivered(); d < seq {
		// Held beyond a gap: not applied, so not acknowledged (the
		// coordinator hints it; anti-entropy fills the gap).
		return fmt.Errorf("%w: op %d from %s, %d delivered", ErrHeld, seq, origin, d)
	}
	return nil
}

// ErrHeld is returned for a replicated op that arrived before an earlier
// op of its origin: it is held, not applied, until the gap fills, and the
// replica does not acknowledge it.
var ErrHeld = fmt.Errorf("resetcol: %w", coltype.ErrHeld)

// applyCell takes another replica's cell sent as a mutation (a leader
// re-sends its cell when it dismisses a retry): its ops for this replica
// are received as if from the channel. Not acknowledged while some are
// held beyond a gap.
func (col *Column) applyCell(l coltype.Leader, m coltype.Mutation) error {
	b, err := DecodeCell(m.Cell.Value)
	if err != nil {
		return err
	}
	origin := b.State.Self()
	if origin == col.self {
		if b.Gen > 0 || len(b.Out) > 0 {
			return nil // our own cell, echoed
		}
		// A snapshot made for this replica, joining the cell's replica
		// set (SnapshotFor: no ops generated, no outboxes).
		return col.adopt(l, m.Key, m.Cell.Column, b)
	}
	out := b.Out[col.self]
	if out == nil || out.Len() == 0 {
		return nil
	}
	envs := out.Pending()
	c, unlock, err := col.lock(l, m.Key, m.Cell.Column)
	if err != nil {
		return err
	}
	defer unlock()
	if err := col.receive(l, m.Key, m.Cell.Column, c, origin, envs, false); err != nil {
		return err
	}
	last := envs[len(envs)-1].Seq
	if d := c.b.In[origin].Delivered(); d < last {
		return fmt.Errorf("%w: ops to %d from %s, %d delivered", ErrHeld, last, origin, d)
	}
	return nil
}

// receive takes envelopes from an origin into its inbox, applies every op
// now deliverable and writes the blob if anything changed (or force).
// c.mu is held.
func (col *Column) receive(l coltype.Leader, key []byte, name string, c *cell, origin reset.ID, envs []reset.Envelope, force bool) error {
	in := c.b.In[origin]
	if in == nil {
		in = &reset.Inbox{}
		c.b.In[origin] = in
	}
	before := in.Delivered()
	for _, e := range envs {
		in.Receive(e)
	}
	for {
		p, ok := in.Next()
		if !ok {
			break
		}
		op, rec, err := DecodeChannelOp(p)
		if err == nil && op.From != origin {
			err = fmt.Errorf("%w: an op of %s on %s's channel", ErrCorrupt, op.From, origin)
		}
		if err == nil {
			err = c.b.State.Apply(op)
		}
		if err != nil {
			c.loaded = false
			return fmt.Errorf("%s: op %d from %s: %w", TypeName, in.Delivered(), origin, err)
		}
		if rec != nil {
			remember(c.b, *rec)
		}
	}
	n := in.Delivered() - before
	if n == 0 && !force {
		return nil
	}
	if err := col.write(l, key, name, c, 0); err != nil {
		return err
	}
	col.delivered.Add(n)
	return nil
}

// View implements coltype.AntiEntropy: this replica's Sync for a peer —
// its ack of the peer's ops and its own ops the peer has not acknowledged.
func (col *Column) View(l coltype.Leader, key []byte, name string, peer counters.ID) ([]byte, error) {
	c, unlock, err := col.lock(l, key, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	col.syncs.Add(1)
	return EncodeSync(col.syncFor(c, reset.ID(peer))), nil
}

func (col *Column) syncFor(c *cell, peer reset.ID) Sync {
	s := Sync{From: col.self, To: peer}
	if in := c.b.In[peer]; in != nil {
		s.Ack = in.Delivered()
	}
	if o := c.b.Out[peer]; o != nil {
		s.Ops = o.Pending()
	}
	return s
}

// PayloadKey implements coltype.Exchanger. Only the configured *Column
// is an Exchanger, for the anti-entropy exchanges between replicas: the
// registered Type is not, so that the CQL layer does not take the type
// for one updated by a client exchange.
func (col *Column) PayloadKey() string { return PayloadKey }

// Exchange implements coltype.Exchanger: a peer's Sync (anti-entropy). The
// ack trims this replica's outbox to the peer, the ops are delivered as
// replicated ops are, and the answer is this replica's Sync for the peer.
func (col *Column) Exchange(l coltype.Leader, _ uint64, key []byte, name string, incoming []byte) ([]byte, error) {
	s, err := DecodeSync(incoming)
	if err != nil {
		return nil, err
	}
	if s.To != col.self {
		return nil, fmt.Errorf("%s: a sync message for %s reached %s", TypeName, s.To, col.self)
	}
	c, unlock, err := col.lock(l, key, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Written when the exchange trims an outbox, or when the replication's
	// answers did since the last write (takeAcks): the stored blob and the
	// set of cells whose outboxes hold ops (track) then catch up.
	trimmed := c.unsaved
	if o := c.b.Out[s.From]; o != nil {
		n := o.Len()
		o.Ack(s.Ack)
		trimmed = trimmed || o.Len() != n
	}
	if err := col.receive(l, key, name, c, s.From, s.Ops, trimmed); err != nil {
		return nil, err
	}
	return EncodeSync(col.syncFor(c, s.From)), nil
}

// MarkDirty implements coltype.AntiEntropy.
func (col *Column) MarkDirty(c coltype.CellRef) {
	col.dirtyMu.Lock()
	if col.dirty == nil {
		col.dirty = map[string]coltype.CellRef{}
	}
	if k := col.id.CellKey(c.Key, c.Column); col.dirty[k].Key == nil {
		c.Column = col.id.CellName(c.Column)
		col.dirty[k] = c // c owns its key (coltype.AntiEntropy)
	}
	col.dirtyMu.Unlock()
}

// TakeDirty implements coltype.AntiEntropy: the cells changed since the
// last call, forgotten.
func (col *Column) TakeDirty() []coltype.CellRef {
	col.dirtyMu.Lock()
	defer col.dirtyMu.Unlock()
	out := slices.Collect(maps.Values(col.dirty))
	col.dirty = nil
	return out
}

// Sweep implements coltype.AntiEntropy: every cell whose outboxes hold ops
// goes back into the next round; held is the ops they hold.
func (col *Column) Sweep(coltype.Leader) (held int, err error) {
	col.recent.sweep(col.env.Now(), col.window)
	col.dirtyMu.Lock()
	refs := slices.Collect(maps.Values(col.pending))
	col.dirtyMu.Unlock()
	for _, p := range refs {
		col.MarkDirty(p.ref)
		held += p.ops
	}
	return held, nil
}

// Replayed implements coltype.Replayer: a replayed cell whose outboxes
// hold ops goes into anti-entropy, so that a restarted replica resends
// them.
func (col *Column) Replayed(rec commitlog.Record) error {
	if rec.Kind == commitlog.PayloadTombstone {
		return nil
	}
	b, err := DecodeCell(rec.Payload)
	if err != nil {
		return err
	}
	if b.Pending() > 0 {
		col.MarkDirty(col.id.CellRef(rec.Key, rec.Column))
	}
	// The op ids the write applied: the log keeps the record for the op
	// window (OpIDWindow), so every op id of the window is replayed.
	col.recent.add(col.id.CellKey(rec.Key, rec.Column), b.Recent, col.horizon())
	return nil
}

// Stats are a replica's observed-reset counts.
type Stats struct {
	Generated uint64 // ops led here (increments and resets)
	Delivered uint64 // ops of other replicas applied here
	Writes    uint64 // blob versions written
	Syncs     uint64 // anti-entropy messages built
	Dismissed uint64 // client retries recognised by their op id
	Cells     int    // cells in memory
	Bytes     int    // bytes of their stored blobs
	Entries   int    // counter entries (M) in them
	Pending   int    // ops in their outboxes
	Recent    int    // client op ids remembered within the op window, every cell
}

// Stats returns the column's running counts and what its cells in memory
// hold.
func (col *Column) Stats() Stats {
	s := Stats{Generated: col.generated.Load(), Delivered: col.delivered.Load(), Writes: col.writes.Load(), Syncs: col.syncs.Load(), Dismissed: col.dismissed.Load(),
		Recent: col.recent.len()}
	for _, v := range col.cells.Values(col.ns) {
		c := v.(*cell)
		c.mu.Lock()
		if c.loaded {
			col.takeAcks(c)
			s.Cells++
			s.Bytes += c.size
			for _, k := range c.b.State.Keys() {
				s.Entries += len(c.b.State.Entries(k))
			}
			s.Pending += c.b.Pending()
		}
		c.mu.Unlock()
	}
	return s
}

// MetricsStats is Stats for the node's metrics and tablestats: the sums
// over the cells in memory (Cells, Bytes, Entries, Pending: a scan of the
// cell cache under each cell's lock) are those of a scan at most
// coltype.StatsScanEvery old; the running counts are current.
func (col *Column) MetricsStats() Stats {
	s := col.statsScan.Get(col.env.Now(), col.Stats)
	s.Generated, s.Delivered, s.Writes = col.generated.Load(), col.delivered.Load(), col.writes.Load()
	s.Syncs, s.Dismissed, s.Recent = col.syncs.Load(), col.dismissed.Load(), col.recent.len()
	return s
}

// ColumnLister is what ReplicaStats needs of a replica (replica.Replica
// implements it): every column instance of every table.
type ColumnLister interface {
	ColumnTypes() []coltype.ColumnType
}

// ReplicaStats sums the Stats of a replica's reset_counter columns, map
// columns included.
func ReplicaStats(r ColumnLister) Stats {
	var out Stats
	for _, t := range r.ColumnTypes() {
		col, ok := t.(*Column)
		if m, isMap := t.(*MapColumn); isMap {
			col, ok = m.Column, true
		}
		if !ok {
			continue
		}
		s := col.Stats()
		out.Generated += s.Generated
		out.Delivered += s.Delivered
		out.Writes += s.Writes
		out.Syncs += s.Syncs
		out.Dismissed += s.Dismissed
		out.Cells += s.Cells
		out.Bytes += s.Bytes
		out.Entries += s.Entries
		out.Pending += s.Pending
		out.Recent += s.Recent
	}
	return out
}

// PendingTo returns the ops the column's cells hold in their outboxes to
// the given peers (a leaving node waits until its peers in the ring
// acknowledged everything; an outbox to a node that left the ring earlier
// is kept, and not waited for).
func (col *Column) PendingTo(l coltype.Leader, peers []counters.ID) (int, error) {
	col.dirtyMu.Lock()
	refs := slices.Collect(maps.Values(col.pending))
	col.dirtyMu.Unlock()
	n := 0
	for _, p := range refs {
		c, unlock, err := col.lock(l, p.ref.Key, p.ref.Column)
		if err != nil {
			return n, err
		}
		for _, id := range peers {
			if o := c.b.Out[reset.ID(id)]; o != nil {
				n += o.Len()
			}
		}
		unlock()
	}
	return n, nil
}

var _ coltype.AntiEntropy = (*Column)(nil)

// ServesClustering implements coltype.Clustered for the registry's
// instances, which CREATE TABLE checks.
func (Type) ServesClustering() {}

// ServesClustering implements coltype.Clustered.
func (MapType) ServesClustering() {}

var _ coltype.Clustered = (*Column)(nil)

var (
	_ coltype.Joinable   = (*Column)(nil)
	_ coltype.Replicated = (*Column)(nil)
	_ coltype.Exchanger  = (*Column)(nil)
	_ coltype.Deleter    = (*Column)(nil)
	_ coltype.Leading    = (*Column)(nil)
	_ coltype.Replayer   = (*Column)(nil)
)
