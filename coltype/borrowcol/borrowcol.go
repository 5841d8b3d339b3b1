package borrowcol

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/borrow"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// TypeName is the column type of Borrow-Counters.
const TypeName = "borrow_counter"

// DecodeCell parses a cell value: a borrow.State encoding.
func DecodeCell(v []byte) (*borrow.State, error) {
	s := borrow.New()
	if err := s.UnmarshalBinary(v); err != nil {
		return nil, fmt.Errorf("borrow cell: %w", err)
	}
	return s, nil
}

// EncodeCell returns the cell value of a state.
func EncodeCell(s *borrow.State) ([]byte, error) { return s.MarshalBinary() }

// Type is the registered column type: stateless, it merges and reads
// cells. Configure gives each table column a *Column.
type Type struct{}

func init() { coltype.MustRegister(Type{}) }

// Name implements coltype.ColumnType.
func (Type) Name() string { return TypeName }

// Merge implements coltype.ColumnType: the join of the two states (a
// tombstone wins; no DELETE reaches a borrow column, this keeps Merge total).
func (Type) Merge(a, b row.Cell) (row.Cell, error) {
	ts := max(a.Timestamp, b.Timestamp)
	if a.Tombstone || b.Tombstone {
		return row.Cell{Column: a.Column, Timestamp: ts, Tombstone: true}, nil
	}
	if bytes.Equal(a.Value, b.Value) {
		if _, err := DecodeCell(a.Value); err != nil {
			return row.Cell{}, fmt.Errorf("column %q: %w", a.Column, err)
		}
		out := a
		out.Timestamp = ts
		return out, nil
	}
	sa, err := DecodeCell(a.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", a.Column, err)
	}
	sb, err := DecodeCell(b.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", b.Column, err)
	}
	sa.Join(sb)
	v, err := EncodeCell(sa)
	if err != nil {
		return row.Cell{}, err
	}
	return row.Cell{Column: a.Column, Value: v, Timestamp: ts}, nil
}

// Value implements coltype.ColumnType: the sum of every dot's count.
func (Type) Value(c row.Cell) (int64, error) {
	s, err := DecodeCell(c.Value)
	if err != nil {
		return 0, fmt.Errorf("column %q: %w", c.Column, err)
	}
	return int64(s.Value()), nil
}

// CQLType implements coltype.CQL: drivers see a counter.
func (Type) CQLType() string { return "counter" }

// CheckDelta implements coltype.CQL: a Borrow-Counter only grows.
func (Type) CheckDelta(d int64) error {
	if d < 0 {
		return fmt.Errorf("%s columns can only be incremented (got %d)", TypeName, d)
	}
	return nil
}

// CheckDelete implements coltype.Deleter: a Borrow-Counter cannot be
// deleted (a client's later write would bring its dot back).
func (Type) CheckDelete(column string) error {
	return fmt.Errorf("%s columns cannot be deleted (%s)", TypeName, column)
}

// Delete implements coltype.Deleter: it refuses.
func (t Type) Delete(_ coltype.Leader, d coltype.Deletion) (coltype.Mutation, error) {
	return coltype.Mutation{}, t.CheckDelete(d.Column)
}

// Check implements coltype.Replayer: a replayed record must hold a state.
func (Type) Check(payload []byte) error {
	_, err := DecodeCell(payload)
	return err
}

// Replayed implements coltype.Replayer: states reload from storage.
func (Type) Replayed(commitlog.Record) error { return nil }

// PayloadKey implements coltype.Exchanger.
func (Type) PayloadKey() string { return PayloadKey }

// ExchangeEverywhere implements coltype.DirectExchanger: a client's write
// (its cumulative count, or its retirement) is joined by every replica and
// acknowledged at the statement's consistency level; a borrow request goes
// to one replica, which lends the dot; a replica's state (anti-entropy) is
// never sent by a client.
func (Type) ExchangeEverywhere(payload []byte) bool {
	return len(payload) >= 2 && payload[0] == PayloadVersion && payload[1] == KindWrite
}

var errUnconfigured = errors.New("borrowcol: the column's configured instance is needed")

// Exchange implements coltype.Exchanger for the registered value; the
// replica calls the configured *Column's.
func (Type) Exchange(coltype.Leader, uint64, []byte, string, []byte) ([]byte, error) {
	return nil, errUnconfigured
}

// Lead implements coltype.Leading for the registered value; the replica
// calls the configured *Column's.
func (Type) Lead(coltype.Leader, coltype.Update) (coltype.Mutation, error) {
	return coltype.Mutation{}, errUnconfigured
}

// Configure implements coltype.Configurable.
func (Type) Configure(env coltype.Env, d coltype.TableDef, column string, prev coltype.ColumnType) (coltype.ColumnType, error) {
	if p, ok := prev.(*Column); ok {
		return p, nil
	}
	return &Column{env: env, self: borrow.ID(env.HostID()), id: coltype.ColumnID{Table: d.ID, Column: column},
		retired: cellcache.Of(env), retiredNS: cellcache.NewNamespace()}, nil
}

// Column is one borrow column of a table on one replica. It keeps no
// state in memory but the cells changed since the last anti-entropy round
// and its running counts: every operation reads the cell from storage
// under the cell's lock, changes it and writes it back.
type Column struct {
	Type
	env  coltype.Env
	self borrow.ID        // this replica's permanent id: its host id
	id   coltype.ColumnID // the column's table and name, and its cells' names

	dirtyMu sync.Mutex
	dirty   map[string]coltype.CellRef

	// retired remembers the retired clients seen, by cell and client, with
	// when one was last seen (a time.Time), in the replica's counter cache
	// (namespace retiredNS): bounded by counter_cache_size_in_mb with the
	// other designs' cell states, least recently seen evicted first.
	retired   *cellcache.Cache
	retiredNS uint64

	borrows, writes, transferred, closed, leads, late atomic.Uint64
	maxCell                                           atomic.Uint64 // bytes of the largest cell written
	views, syncBytes                                  atomic.Uint64
}

var (
	_ coltype.Leading         = (*Column)(nil)
	_ coltype.Observer        = (*Column)(nil)
	_ coltype.DirectExchanger = (*Column)(nil)
	_ coltype.AntiEntropy     = (*Column)(nil)
	_ coltype.Deleter         = (*Column)(nil)
	_ coltype.CQL             = (*Column)(nil)
	_ coltype.Replayer        = (*Column)(nil)
	_ coltype.Configurable    = Type{}
)

func rowKey(key []byte) row.Key { return row.Key{Token: ring.Token(key), Partition: key} }

// load reads this replica's state of a cell and its encoding (nil: none).
// The cell's lock is held.
func (col *Column) load(l coltype.Leader, key []byte, name string) (*borrow.State, []byte, error) {
	c, found, err := l.Cell(rowKey(key), col.id.CellName(name))
	if err != nil {
		return nil, nil, err
	}
	if !found || c.Tombstone {
		return borrow.New(), nil, nil
	}
	s, err := DecodeCell(c.Value)
	if err != nil {
		return nil, nil, err
	}
	return s, c.Value, nil
}

// settle applies this replica's rules after a join: it closes the loans a
// retired client never learnt (closeUnlearnt) and transfers every frozen
// dot it created into its own dot.
func (col *Column) settle(me borrow.ID, s *borrow.State) (changed bool) {
	n := closeUnlearnt(me, s)
	col.closed.Add(uint64(n))
	before := s.Borrowed()
	col.transferred.Add(s.TransferAll(me))
	return n > 0 || s.Borrowed() != before
}

// closeUnlearnt freezes, in s, every active dot that me created, lent to a
// client that has a frozen dot in s, and whose count is 0, and returns how
// many it froze. A client's retirement freezes every dot it knows in one
// state, which is joined as a whole; so a client with a frozen dot has
// retired and any dot of it still active was never learnt by it, never
// written, and never will be: its count is 0 for ever, and freezing it
// changes no value. Its creator then transfers it like any other.
func closeUnlearnt(me borrow.ID, s *borrow.State) int {
	var retired map[borrow.ID]bool // usually none: no map then
	for o := range s.All() {
		if o.Owner != o.Dot.Creator && o.Cell.Frozen {
			if retired == nil {
				retired = map[borrow.ID]bool{}
			}
			retired[o.Owner] = true
		}
	}
	if retired == nil {
		return 0
	}
	var unlearnt []borrow.Owned
	for o := range s.All() {
		if retired[o.Owner] && o.Dot.Creator == me && !o.Cell.Frozen && o.Cell.Count == 0 {
			unlearnt = append(unlearnt, o)
		}
	}
	for _, o := range unlearnt {
		s.Join(borrow.Write(o.Owner, o.Dot, borrow.Cell{Frozen: true}))
	}
	return len(unlearnt)
}

// commit writes s as the cell if it differs from prev (the stored
// encoding) and returns its encoding; dirty marks the cell for the next
// anti-entropy round when it changed. With fsync, it then makes the log
// durable (syncLog): the caller sets it when s holds something this
// replica authored (a loan, its own dot's count, a fold, a closed loan) or
// a retirement it is about to acknowledge. The cell's lock is held.
func (col *Column) commit(l coltype.Leader, key []byte, name string, s *borrow.State, prev []byte, dirty, fsync bool) ([]byte, error) {
	enc, err := EncodeCell(s)
	if err != nil {
		return nil, err
	}
	col.noteRetired(l.Now(), key, name, s)
	if !bytes.Equal(enc, prev) {
		// s joined prev (load) under the cell's lock: it supersedes it.
		m := coltype.Mutation{Table: col.id.Table, Key: key, Cell: row.Cell{Column: col.id.CellName(name), Value: enc, Timestamp: l.Now().UnixMicro()}, Supersedes: prev}
		if err := l.Write(rowKey(key), m, commitlog.PayloadShard); err != nil {
			return nil, err
		}
		storeMax(&col.maxCell, uint64(len(enc)))
		if dirty {
			col.MarkDirty(col.id.CellRef(key, name))
		}
	}
	if fsync {
		if err := syncLog(l); err != nil {
			return nil, err
		}
	}
	return enc, nil
}

// storeMax raises v to n if n is larger.
func storeMax(v *atomic.Uint64, n uint64) {
	for old := v.Load(); n > old && !v.CompareAndSwap(old, n); old = v.Load() {
	}
}

// syncLog makes everything the replica's commit log holds durable against
// a machine crash (coltype.LogSyncer; a Leader without it, a test's, is
// taken as durable already). In periodic mode a write is acknowledged
// once it reaches the operating system, and a machine crash may take the
// last records back. What this replica authors must not go back once
// anything derived from it may have left: a creator brought back to an
// older state could lend a dot it already lent, count on from an older
// count of its own dot, or fold differently what it already folded; the
// join keeps one branch and loses or doubles the other's counts. A new
// identity after an unclean start does not cure it: the dots lent under
// the old identity must still be folded, and neither place to fold them is
// safe (see docs/borrow-counter.md, Durability). What others authored (a
// client's write, a peer's state) may go back at this replica: its author
// or another replica still holds it, and the join restores it. So the
// column fsyncs after every change it authors and before acknowledging a
// retirement (the client leaves on it), whatever the log's mode; a
// client's plain write is acknowledged as the mode promises, as for any
// other column.
func syncLog(l coltype.Leader) error {
	ls, ok := l.(coltype.LogSyncer)
	if !ok {
		return nil
	}
	if err := ls.SyncLog(); err != nil {
		return fmt.Errorf("borrow: sync the commit log: %w", err)
	}
	return nil
}

// Lead implements coltype.Leading: a plain driver update adds its delta to
// the leader's own dot (created first if it has none); the mutation is the
// leader's full state, written durably before it is returned.
func (col *Column) Lead(l coltype.Leader, u coltype.Update) (coltype.Mutation, error) {
	if err := col.CheckDelta(u.Delta); err != nil {
		return coltype.Mutation{}, err
	}
	key := u.RowKey()
	unlock := l.Lock(key, u.Column)
	defer unlock()
	s, prev, err := col.load(l, u.Key, u.Column)
	if err != nil {
		return coltype.Mutation{}, err
	}
	me := col.self
	col.settle(me, s)
	if err := s.Inc(me, uint64(u.Delta)); errors.Is(err, borrow.ErrNoActiveDot) {
		s.Create(me, me)
		err = s.Inc(me, uint64(u.Delta))
		if err != nil {
			return coltype.Mutation{}, err
		}
	}
	enc, err := col.commit(l, u.Key, u.Column, s, prev, false, true)
	if err != nil {
		return coltype.Mutation{}, err
	}
	col.leads.Add(1)
	return u.Mutation(enc), nil
}

// Observe implements coltype.Observer: a replicated state (a leader's
// mutation, a hint, a read repair) that holds frozen dots this replica
// created, or a retired client's loans it never learnt, is joined here and
// settled (transfers) before the engine writes the mutation itself; the
// result spreads by anti-entropy.
func (col *Column) Observe(l coltype.Leader, m coltype.Mutation) error {
	if m.Cell.Tombstone {
		return fmt.Errorf("%s columns cannot be deleted", TypeName)
	}
	in, err := DecodeCell(m.Cell.Value)
	if err != nil {
		return err
	}
	col.noteRetired(l.Now(), m.Key, m.Cell.Column, in)
	me := col.self
	if !concerns(me, in) {
		return nil
	}
	unlock := l.Lock(m.RowKey(), col.id.CellName(m.Cell.Column))
	defer unlock()
	s, prev, err := col.load(l, m.Key, m.Cell.Column)
	if err != nil {
		return err
	}
	s.Join(in)
	settled := col.settle(me, s)
	_, err = col.commit(l, m.Key, m.Cell.Column, s, prev, true, settled)
	return err
}

// concerns reports whether a state holds a frozen dot me created, or a
// retired client (one with a frozen dot) with an active dot me created.
func concerns(me borrow.ID, s *borrow.State) bool {
	var retired, mine []borrow.ID
	for o := range s.All() {
		if o.Owner == o.Dot.Creator {
			continue
		}
		if o.Cell.Frozen {
			if o.Dot.Creator == me {
				return true
			}
			retired = append(retired, o.Owner)
		} else if o.Dot.Creator == me {
			mine = append(mine, o.Owner)
		}
	}
	for _, id := range mine {
		if slices.Contains(retired, id) {
			return true
		}
	}
	return false
}

// Exchange implements coltype.Exchanger (payloads: EncodeBorrow). Under the
// cell's lock it joins what it receives (a client's write, a peer's full
// state) or lends a dot (a borrow request: the client's dots already in
// the state, from any creator, else a new dot of this replica's, Create
// being idempotent per (creator, client); a retired client's late request
// is refused, borrow.ErrLateBorrow), settles (closeUnlearnt, transfers),
// writes the cell if it changed and only then answers: nothing derived
// from the state leaves before it is durable as the log's sync mode
// promises, and a new loan, a transfer or a retirement not before it is
// fsynced (syncLog).
func (col *Column) Exchange(l coltype.Leader, _ uint64, key []byte, name string, incoming []byte) ([]byte, error) {
	p, err := DecodePayload(incoming)
	if err != nil {
		return nil, err
	}
	unlock := l.Lock(rowKey(key), col.id.CellName(name))
	defer unlock()
	s, prev, err := col.load(l, key, name)
	if err != nil {
		return nil, err
	}
	if p.State != nil {
		col.noteRetired(l.Now(), key, name, p.State)
	}
	me := col.self
	var owner borrow.ID
	// The cell goes to anti-entropy if it changed by a borrow (the new
	// dot), a peer's state, a retirement (its creators must see it, even
	// one that is down now) or a transfer. A client's plain write is sent
	// to every live replica (ExchangeEverywhere); a replica that missed it
	// gets it with the retirement, which carries the final count, or by
	// read repair.
	spread := p.Kind != KindWrite
	fsync := false // something authored here, or a retirement acknowledged
	switch p.Kind {
	case KindBorrow:
		owner = p.Client
		if owner == me {
			return nil, errors.New("borrow exchange: a client with this replica's id")
		}
		if s.Retired(owner) || col.retiredRecently(l.Now(), key, name, owner) {
			col.late.Add(1)
			return nil, fmt.Errorf("borrow exchange: client %v: %w", owner, borrow.ErrLateBorrow)
		}
		if !holds(s, owner) {
			if _, err := s.Lend(me, owner); err != nil {
				return nil, err
			}
			fsync = true
		}
		col.borrows.Add(1)
	case KindWrite:
		for o := range p.State.All() {
			owner = o.Owner // one owner (DecodePayload)
			spread = spread || o.Cell.Frozen
			fsync = fsync || o.Cell.Frozen
		}
		s.Join(p.State)
		col.writes.Add(1)
	case KindState:
		s.Join(p.State)
		col.syncBytes.Add(uint64(len(incoming)))
	}
	if col.settle(me, s) {
		spread, fsync = true, true
	}
	if _, err := col.commit(l, key, name, s, prev, spread, fsync); err != nil {
		return nil, err
	}
	if p.Kind == KindState {
		return EncodeState(s)
	}
	return ClientDots(s, owner).MarshalBinary()
}

// RetiredRetention is how long a replica remembers a retired client of a
// cell after it last saw one of its frozen dots, to refuse a late borrow
// request from it (borrow.ErrLateBorrow) once the frozen dots are
// transferred away and the state no longer shows the retirement. A client
// asks for every loan before it retires, so only a request delayed longer
// than this past the client's retirement (or across a restart of the
// replica: the memory is not persisted) can still lend a dot that nobody
// will retire; its count stays 0 and the value right, the dot is never
// collected. Far above the coordinator's request timeouts.
const RetiredRetention = 10 * time.Minute

// retiredEntrySize is the estimated bytes of a retired client's entry in
// the counter cache besides cellcache.EntryOverhead and its key: the boxed
// time.Time and the allocations' rounding, so that an entry costs what a
// heap profile of a borrow soak node measured (about 330 bytes with a
// 38-byte key: 63 MB held for a 50 MB cache at 24 bytes).
const retiredEntrySize = 96

// retiredKey is the cache key of a retired client of a cell: the cell's
// key, then the client's id.
func (col *Column) retiredKey(key []byte, name string, client borrow.ID) string {
	return col.id.CellKey(key, name) + string(client[:])
}

// noteRetired remembers, at now, every client with a frozen dot in s, the
// cell key's state. The memory is best effort: an entry the cache evicted
// (or one older than RetiredRetention) lets a late borrow request lend a
// dot nobody retires, count 0 (see RetiredRetention).
func (col *Column) noteRetired(now time.Time, key []byte, name string, s *borrow.State) {
	for o := range s.All() {
		if o.Cell.Frozen && o.Owner != o.Dot.Creator {
			col.retired.Put(col.retiredNS, col.retiredKey(key, name, o.Owner), now, retiredEntrySize)
		}
	}
}

// retiredRecently reports whether client retired in the cell key less
// than RetiredRetention ago, as far as this replica saw and remembers.
func (col *Column) retiredRecently(now time.Time, key []byte, name string, client borrow.ID) bool {
	v, ok := col.retired.Recall(col.retiredNS, col.retiredKey(key, name, client))
	return ok && now.Sub(v.(time.Time)) <= RetiredRetention
}

// MarkDirty implements coltype.AntiEntropy.
func (col *Column) MarkDirty(c coltype.CellRef) {
	col.dirtyMu.Lock()
	defer col.dirtyMu.Unlock()
	if col.dirty == nil {
		col.dirty = map[string]coltype.CellRef{}
	}
	if k := col.id.CellKey(c.Key, c.Column); col.dirty[k].Key == nil {
		c.Column = col.id.CellName(c.Column)
		col.dirty[k] = c // c owns its key (coltype.AntiEntropy)
	}
}

// TakeDirty implements coltype.AntiEntropy: the cells changed outside the
// leader path since the last call, forgotten.
func (col *Column) TakeDirty() []coltype.CellRef {
	col.dirtyMu.Lock()
	defer col.dirtyMu.Unlock()
	out := make([]coltype.CellRef, 0, len(col.dirty))
	for _, c := range col.dirty {
		out = append(out, c)
	}
	col.dirty = nil
	return out
}

// View implements coltype.AntiEntropy: this replica's full state (a
// KindState payload, the same for every peer), after settling it.
func (col *Column) View(l coltype.Leader, key []byte, name string, _ counters.ID) ([]byte, error) {
	unlock := l.Lock(rowKey(key), col.id.CellName(name))
	defer unlock()
	s, prev, err := col.load(l, key, name)
	if err != nil {
		return nil, err
	}
	settled := col.settle(col.self, s)
	if _, err := col.commit(l, key, name, s, prev, false, settled); err != nil {
		return nil, err
	}
	col.views.Add(1)
	return EncodeState(s)
}

// Sweep implements coltype.AntiEntropy: nothing to sweep.
func (col *Column) Sweep(coltype.Leader) (int, error) { return 0, nil }

// Stats are a replica's Borrow-Counter counts.
type Stats struct {
	Leads       uint64 // plain updates led
	Borrows     uint64 // borrow requests answered
	Writes      uint64 // client writes joined
	Transferred uint64 // increments folded from frozen dots into own dots
	Closed      uint64 // unlearnt loans of retired clients frozen
	LateBorrows uint64 // borrow requests of retired clients refused
	// Views: full states given for anti-entropy (each one sync exchange,
	// a request and its answer); SyncBytes: the bytes of the full states
	// received in sync exchanges, both ways (requests and answers).
	Views     uint64
	SyncBytes uint64
	// MaxCellBytes is the size of the largest cell the replica wrote since
	// it started: a cell holds a dot per replica and per client active in
	// it (docs/borrow-counter.md, "State size").
	MaxCellBytes uint64
}

// Stats returns the column's running counts.
func (col *Column) Stats() Stats {
	return Stats{Leads: col.leads.Load(), Borrows: col.borrows.Load(), Writes: col.writes.Load(),
		Transferred: col.transferred.Load(), Closed: col.closed.Load(), LateBorrows: col.late.Load(), Views: col.views.Load(), SyncBytes: col.syncBytes.Load(),
		MaxCellBytes: col.maxCell.Load()}
}

// ColumnLister is what ReplicaStats needs of a replica (replica.Replica
// implements it).
type ColumnLister interface {
	ColumnTypes() []coltype.ColumnType
}

// ReplicaStats sums the Stats of a replica's borrow columns (the largest
// cell: the largest of theirs).
func ReplicaStats(r ColumnLister) Stats {
	var out Stats
	for _, t := range r.ColumnTypes() {
		col, ok := t.(*Column)
		if !ok {
			continue
		}
		s := col.Stats()
		out.Leads += s.Leads
		out.Borrows += s.Borrows
		out.Writes += s.Writes
		out.Transferred += s.Transferred
		out.Closed += s.Closed
		out.LateBorrows += s.LateBorrows
		out.Views += s.Views
		out.SyncBytes += s.SyncBytes
		out.MaxCellBytes = max(out.MaxCellBytes, s.MaxCellBytes)
	}
	return out
}

var _ coltype.AntiEntropy = (*Column)(nil)

// ServesClustering implements coltype.Clustered for the registry's
// instance, which CREATE TABLE checks.
func (Type) ServesClustering() {}

var _ coltype.Clustered = (*Column)(nil)
