package handoffcol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// TypeName is the column type of handoff counters
// (counters/handoff): the replicas of a key are the counter's tier-0 nodes,
// clients (and coordinators acting for plain driver updates) are tier 1.
//
// # The cell
//
// Each replica stores, in each cell, its OWN tier-0 handoff state (id = its
// host id) and the retirement notices it holds for the cell, together with
// a version number it bumps on every change:
//
//	1 byte  format (2)
//	uvarint version
//	...     handoff.Message: the state and the held notices
//
// (format 1, still read, has the bare state, handoff.State.MarshalBinary,
// after the version).
//
// # Retirement notices
//
// A client that retires (client.HandoffCounter.Retire) sends its
// handoff.Notice with its last exchange; the coordinator records the cell's
// natural replicas as the notice's servers. A replica that receives a notice
// keeps it in the cell with the set of replicas known to have processed it,
// applies every notice it holds (handoff.State.Collect) after every merge,
// passes its notices to the other replicas in anti-entropy (every notice
// sweep puts a cell whose notices are not yet processed everywhere back in
// anti-entropy), and answers the client with its notice once it is durable
// (the client may then stop). A notice is dropped once every server has
// processed it and the retention (NoticeRetentionSetting) has passed since
// it was first received.
//
// A cell is never written with another node's state: an update is an
// Exchange (merge a received state or view into the local one, persist, then
// answer with the view for the sender), and replicas converge by exchanging
// views in the background (coordinator's anti-entropy), not by copying cells.
//
// # Merging two versions of a cell (Merge)
//
// Two uses, one function:
//
//   - storage (memtables, SSTables, compaction, commit log replay) only ever
//     holds this replica's own states, so it merges versions of the same
//     owner: the higher version wins. Versions of one owner are totally
//     ordered and the newer state supersedes the older (it was derived from
//     it), so max-by-version is a semilattice (commutative, associative,
//     idempotent).
//   - a coordinator merging the answers of several replicas (reads, scans)
//     sees states of different owners: the one with the larger Fetch wins,
//     ties broken by the larger owner id. That is the maximum of what the
//     replicas report, as `SELECT` promises.
//
// Together they are the maximum under the lexicographic order on
// (fetch, owner id, version): a tier-0 fetch never decreases as its state
// evolves (local monotonicity, §3.2), so for one owner a higher version has
// a fetch at least as large, and ordering by (fetch, version) agrees with
// ordering by version. A maximum under a total order is commutative,
// associative and idempotent whatever mix of owners is merged. A tombstone
// wins over any live cell, as for the other counters (no DELETE reaches a
// handoff column through CQL; this only keeps Merge total).
const TypeName = "handoff_counter"

// Cell formats (the first byte of a cell value).
const (
	CellFormatState   = 1 // version, bare state
	CellFormatMessage = 2 // version, handoff.Message (state and notices)
)

// DefaultNoticeRetention is how long a retirement notice is kept once
// every replica of its cell has processed it, unless the replica's setting
// NoticeRetentionSetting (a Go duration) says otherwise.
const DefaultNoticeRetention = time.Minute

// NoticeRetentionSetting is the name of the replica setting
// (coltype.Env.Setting) of the notice retention.
const NoticeRetentionSetting = "handoff_notice_retention"

// EncodeCell returns the cell value of an encoded handoff.Message (state
// and notices) at a version.
func EncodeCell(version uint64, msg []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(msg))
	b = append(b, CellFormatMessage)
	b = binary.AppendUvarint(b, version)
	return append(b, msg...)
}

// DecodeCell parses a cell value: its version, state and
// notices.
func DecodeCell(v []byte) (version uint64, c *handoff.Counter, notices []*handoff.HeldNotice, err error) {
	if len(v) == 0 || v[0] != CellFormatState && v[0] != CellFormatMessage {
		return 0, nil, nil, errors.New("handoff cell: bad format byte")
	}
	version, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return 0, nil, nil, errors.New("handoff cell: bad version")
	}
	body := v[1+n:]
	if v[0] == CellFormatState {
		c = handoff.NewCounter(handoff.ID{}, 0)
		err = c.UnmarshalBinary(body)
	} else {
		var m *handoff.Message
		var bare bool
		if m, bare, err = handoff.DecodeMessage(body); err == nil && bare {
			err = errors.New("a bare state in a message cell")
		}
		if err == nil {
			c, notices = m.State, m.Notices
		}
	}
	if err != nil {
		return 0, nil, nil, fmt.Errorf("handoff cell: %w", err)
	}
	if c.Tier() != 0 {
		return 0, nil, nil, fmt.Errorf("handoff cell: a stored state has tier %d, want 0", c.Tier())
	}
	return version, c, notices, nil
}

// CellValue returns the fetch, owner and version of a handoff cell
// value (for tests and tools).
func CellValue(v []byte) (fetch uint64, owner handoff.ID, version uint64, err error) {
	version, c, _, err := DecodeCell(v)
	if err != nil {
		return 0, owner, 0, err
	}
	return c.Fetch(), c.ID(), version, nil
}

// Type is the registered column type: stateless, it merges and reads
// cells. Configure gives each table column a *Column, which holds this
// replica's states of the column's cells.
type Type struct{}

func init() { coltype.MustRegister(Type{}) }

// Name implements coltype.ColumnType.
func (Type) Name() string { return TypeName }

// Configure implements coltype.Configurable: a column's states carry on
// across ALTER TABLE (prev).
func (Type) Configure(env coltype.Env, d coltype.TableDef, column string, prev coltype.ColumnType) (coltype.ColumnType, error) {
	if p, ok := prev.(*Column); ok {
		return p, nil
	}
	retention := DefaultNoticeRetention
	if v := env.Setting(NoticeRetentionSetting); v != "" {
		r, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("setting %s = %q: %w", NoticeRetentionSetting, v, err)
		}
		if r > 0 {
			retention = r
		}
	}
	return &Column{env: env, self: handoff.ID(env.HostID()), id: coltype.ColumnID{Table: d.ID, Column: column}, retention: retention,
		cells: cellcache.Of(env), ns: cellcache.NewNamespace()}, nil
}

// CheckDelete implements coltype.Deleter: a handoff counter cannot be
// deleted (a client's state would bring it back).
func (Type) CheckDelete(column string) error {
	return fmt.Errorf("%s columns cannot be deleted (%s)", TypeName, column)
}

// Delete implements coltype.Deleter: it refuses.
func (t Type) Delete(_ coltype.Leader, d coltype.Deletion) (coltype.Mutation, error) {
	return coltype.Mutation{}, t.CheckDelete(d.Column)
}

// ReadRule implements coltype.ReadPolicy: every replica holds its own
// state, so the merged cell (the largest fetch) differs from all but one;
// replicas converge by anti-entropy, not read repair.
func (Type) ReadRule() coltype.ReadRule { return coltype.ReadNoRepair }

// CQLType implements coltype.CQL.
func (Type) CQLType() string { return "counter" }

// CheckDelta implements coltype.CQL: handoff counters only grow.
func (Type) CheckDelta(d int64) error {
	if d < 0 {
		return fmt.Errorf("%s columns can only be incremented (got %d)", TypeName, d)
	}
	return nil
}

// PayloadKey is the CQL custom payload key of a handoff exchange.
const PayloadKey = "idemkv-handoff"

// PayloadKey implements coltype.Exchanger.
func (Type) PayloadKey() string { return PayloadKey }

// Exchange implements coltype.Exchanger for the registered value; the
// replica calls the configured *Column's.
func (Type) Exchange(coltype.Leader, uint64, []byte, string, []byte) ([]byte, error) {
	return nil, errors.New("handoffcol: an exchange needs the column's configured instance")
}

// Check implements coltype.Replayer: a replayed record must hold a handoff cell.
func (Type) Check(payload []byte) error {
	_, _, _, err := DecodeCell(payload)
	return err
}

// Replayed implements coltype.Replayer: the states reload from storage.
func (Type) Replayed(commitlog.Record) error { return nil }

// Merge implements coltype.ColumnType: see the package documentation.
func (Type) Merge(a, b row.Cell) (row.Cell, error) {
	ts := max(a.Timestamp, b.Timestamp)
	if a.Tombstone || b.Tombstone {
		return row.Cell{Column: a.Column, Timestamp: ts, Tombstone: true}, nil
	}
	va, ca, _, err := DecodeCell(a.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", a.Column, err)
	}
	vb, cb, _, err := DecodeCell(b.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", b.Column, err)
	}
	var aWins bool
	if ca.ID() == cb.ID() {
		aWins = va > vb || (va == vb && bytes.Compare(a.Value, b.Value) >= 0)
	} else {
		fa, fb := ca.Fetch(), cb.Fetch()
		aWins = fa > fb || (fa == fb && ca.ID().Compare(cb.ID()) > 0)
	}
	out := b
	if aWins {
		out = a
	}
	out.Timestamp = ts
	return out, nil
}

// Value implements coltype.ColumnType: the state's fetch.
func (Type) Value(c row.Cell) (int64, error) {
	_, st, _, err := DecodeCell(c.Value)
	if err != nil {
		return 0, fmt.Errorf("column %q: %w", c.Column, err)
	}
	return int64(st.Fetch()), nil
}

// Column is one handoff column of a table on one replica: this replica's
// in-memory states of its cells and the cells changed since the last
// anti-entropy round. It implements coltype.Exchanger, Replicated and
// AntiEntropy on top of Type.
type Column struct {
	Type
	env       coltype.Env
	self      handoff.ID       // this replica's tier-0 id: its host id
	id        coltype.ColumnID // the column's table and name, and its cells' names
	retention time.Duration

	// cells are this replica's states of the column's cells in the
	// replica's bounded cell cache (namespace ns, partition key → *cell).
	// Every state is written (commit) before it is installed, and a cell
	// is pinned while locked, so an evicted cell is read again from
	// storage, notices included; the dirty and notice sets hold CellRefs.
	cells *cellcache.Cache
	ns    uint64

	dirtyMu sync.Mutex
	dirty   map[string]coltype.CellRef

	noticeMu    sync.Mutex
	noticeCells map[string]noticeCell // cells holding notices, for the sweep
	noticesHeld int                   // Σ noticeCells' notices

	exchanges, writes, collected atomic.Uint64

	statsScan coltype.StatsScan[Stats] // MetricsStats' last scan
}

// cell is this replica's state of one cell, loaded from storage on first
// use (and after an eviction) and then changed only under mu.
//
// Between uses the cell cache keeps only its encoding (enc, version, what
// storage holds): state and notices are decoded from enc when the cell is
// locked and dropped when it is unlocked. A decoded state is many small
// objects (maps, slices); kept for every cached cell, allocated among the
// garbage of the exchanges around them, they held partly used heap spans
// in use well above the live heap (docs/limits.md, counter state memory).
type cell struct {
	mu      sync.Mutex
	loaded  bool
	state   *handoff.Counter                   // decoded while locked, else nil
	notices map[handoff.ID]*handoff.HeldNotice // retirement notices held; decoded while locked
	enc     []byte                             // the encoded message (state and notices)
	version uint64
}

// decode sets the cell's state and notices from its encoding. c.mu is
// held.
func (c *cell) decode() error {
	m, _, err := handoff.DecodeMessage(c.enc)
	if err != nil {
		return fmt.Errorf("handoff cell in memory: %w", err)
	}
	c.state = m.State
	c.notices = make(map[handoff.ID]*handoff.HeldNotice, len(m.Notices))
	for _, n := range m.Notices {
		c.notices[n.Notice.ID] = n
	}
	return nil
}

// message returns the cell's state and notices as a handoff.Message.
func (c *cell) message(state *handoff.Counter, notices map[handoff.ID]*handoff.HeldNotice) *handoff.Message {
	m := &handoff.Message{State: state}
	for _, k := range slices.SortedFunc(maps.Keys(notices), handoff.ID.Compare) {
		m.Notices = append(m.Notices, notices[k])
	}
	return m
}

// noticeCell is a cell holding retirement notices, in the sweep's set,
// whose key is the cell's CellKey (the set holds one per retirement in the
// last retention, so an entry is kept small: the cell's reference is
// rebuilt from the key when the cell is swept).
type noticeCell struct {
	// due is when the sweep has something to do in the cell (Unix ms):
	// the earliest expiry of its notices when every server has processed
	// them all, else 0 (every round: a notice not processed everywhere
	// puts its cell back in anti-entropy at each sweep).
	due       int64
	notices   int32
	composite bool // the cell has a name of its own: the key is CellKey's composite form
}

// trackNotices records the notices a cell holds, for the sweep: the cell
// is left out of the set when it holds none, else swept when due.
func (col *Column) trackNotices(key []byte, name string, notices map[handoff.ID]*handoff.HeldNotice) {
	k := col.id.CellKey(key, name)
	col.noticeMu.Lock()
	defer col.noticeMu.Unlock()
	prev := col.noticeCells[k]
	if len(notices) == 0 {
		delete(col.noticeCells, k)
		col.noticesHeld -= int(prev.notices)
		return
	}
	var due int64
	for _, h := range notices {
		if !h.Done() {
			due = 0
			break
		}
		if exp := h.Created + col.retention.Milliseconds(); due == 0 || exp < due {
			due = exp
		}
	}
	if col.noticeCells == nil {
		col.noticeCells = map[string]noticeCell{}
	}
	col.noticesHeld += len(notices) - int(prev.notices)
	col.noticeCells[k] = noticeCell{due: due, notices: int32(min(len(notices), math.MaxInt32)),
		composite: col.id.CellName(name) != col.id.Column}
}

// noticeRef rebuilds the reference of a cell of the sweep's set from its
// CellKey.
func (col *Column) noticeRef(k string, nc noticeCell) (coltype.CellRef, bool) {
	if !nc.composite {
		return coltype.CellRef{Table: col.id.Table, Key: []byte(k), Column: col.id.Column}, true
	}
	n, w := binary.Uvarint([]byte(k))
	if w <= 0 || n > uint64(len(k)-w) {
		return coltype.CellRef{}, false
	}
	return coltype.CellRef{Table: col.id.Table, Key: []byte(k[w : w+int(n)]), Column: k[w+int(n):]}, true
}

// MarkDirty implements coltype.AntiEntropy: the cell is synchronised again
// in the next round (an anti-entropy exchange with a peer failed).
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
	out := make([]coltype.CellRef, 0, len(col.dirty))
	for _, c := range col.dirty {
		out = append(out, c)
	}
	col.dirty = nil
	return out
}

// cellBytes estimates the bytes of a cached cell besides the cache's
// overhead: its encoding (the decoded state lives only while the cell is
// locked), calibrated on the live heap measured by the replica's
// BenchmarkCellStateMemory.
func cellBytes(c *cell) int64 { return CellBytesBase + int64(cap(c.enc)) }

// CellBytesBase is the estimated bytes of a cached cell besides the cache's
// overhead and its encoding.
const CellBytesBase = 72

// lock returns the cell's in-memory state, locked and pinned in the cell
// cache, loading it from storage on first use (or after an eviction), or
// decoding it from the cell's encoding. The caller calls unlock, which
// drops the decoded state, records the cell's size, unlocks c.mu and
// unpins the cell.
func (col *Column) lock(l coltype.Leader, key []byte, name string) (c *cell, unlock func(), err error) {
	h, _ := col.cells.Acquire(col.ns, col.id.CellKey(key, name), func() any { return &cell{} })
	c = h.Value().(*cell)
	c.mu.Lock()
	unlock = func() {
		c.state, c.notices = nil, nil
		if c.loaded {
			h.SetSize(cellBytes(c))
		} else {
			c.enc = nil
		}
		c.mu.Unlock()
		h.Release()
	}
	if c.loaded {
		if err := c.decode(); err != nil {
			c.loaded = false
			unlock()
			return nil, nil, err
		}
		return c, unlock, nil
	}
	if err := col.load(l, key, name, c); err != nil {
		unlock()
		return nil, nil, err
	}
	return c, unlock, nil
}

// load reads a cell's state from storage, as a cold start does. c.mu is
// held.
func (col *Column) load(l coltype.Leader, key []byte, name string, c *cell) (err error) {
	c.state = handoff.NewCounter(col.self, 0)
	c.notices = map[handoff.ID]*handoff.HeldNotice{}
	c.version = 0
	stored, found, err := l.Cell(row.Key{Token: ring.Token(key), Partition: key}, col.id.CellName(name))
	if err != nil {
		return err
	}
	if found && !stored.Tombstone {
		version, st, notices, err := DecodeCell(stored.Value)
		if err != nil {
			return err
		}
		c.version = version
		if st.ID() == col.self {
			c.state = st
			for _, n := range notices {
				c.notices[n.Notice.ID] = n
			}
			col.trackNotices(key, name, c.notices)
		} else {
			// Never written by this replica; merge rather than adopt.
			c.state.Merge(st)
		}
	}
	enc, err := c.message(c.state, c.notices).MarshalBinary()
	if err != nil {
		return err
	}
	c.enc = bytes.Clone(enc) // no spare capacity kept in the cache
	c.loaded = true
	return nil
}

// Exchange is a handoff exchange with this replica (tier 0) for one cell.
// incoming is an encoded handoff state or view (of a client, a coordinator
// acting as one, or another tier-0 replica) or a handoff.Message (the same
// with retirement notices: a retiring client's own, or those another replica
// holds). Under the cell's lock it merges the state into its own, takes in
// the notices, applies every notice it holds (handoff.State.Collect), drops
// expired ones, writes the new state with a new version to the commit log
// and the memtable, and once that is durable as the log's sync mode promises
// (§7.2: nothing derived from a state leaves the node before the state is
// persisted) returns the view of the new state for the sender
// (View(sender, senderTier)), encoded as the request was: a bare view, or a
// Message that also carries the notices the sender needs (a client: its own
// notice, the acknowledgement of its retirement; a replica: all). A merge
// that changes nothing writes nothing. Exchanging the same message again is
// harmless.
func (col *Column) Exchange(l coltype.Leader, _ uint64, key []byte, name string, incoming []byte) ([]byte, error) {
	msg, bare, err := handoff.DecodeMessage(incoming)
	if err != nil {
		return nil, fmt.Errorf("handoff exchange: %w", err)
	}
	in := msg.State
	for _, h := range msg.Notices {
		switch {
		case in.Tier() > 0 && h.Notice.ID != in.ID():
			return nil, fmt.Errorf("handoff exchange: a client (tier %d) carries another node's retirement notice", in.Tier())
		case len(h.Servers) == 0:
			return nil, errors.New("handoff exchange: a retirement notice without servers")
		}
	}
	col.exchanges.Add(1)
	c, unlock, err := col.lock(l, key, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	next := c.state // decoded for this lock: dropped at unlock, so no clone
	next.Merge(in)
	notices, settled := col.takeNotices(c, msg.Notices)
	expired, err := col.commit(l, key, name, c, next, notices)
	if err != nil {
		return nil, err
	}
	if expired == nil {
		expired = settled
	} else {
		maps.Copy(expired, settled)
	}
	view := c.state.View(in.ID(), in.Tier())
	if bare {
		return view.MarshalBinary()
	}
	// The answer carries the notices held, and those that expired just now
	// or earlier (a sender whose copy is not complete learns that it is
	// done, which it would not from a notice that is simply absent).
	out := maps.Clone(c.notices)
	maps.Copy(out, expired)
	reply := c.message(view, out)
	if in.Tier() > 0 {
		var own []*handoff.HeldNotice
		for _, h := range reply.Notices {
			if h.Notice.ID == in.ID() {
				own = append(own, h)
			}
		}
		reply.Notices = own
	}
	return reply.MarshalBinary()
}

// takeNotices returns the cell's notices with the incoming ones taken in:
// a known notice absorbs what the copy knows (servers seen), a new one is
// added unless it is expired (it was processed everywhere and dropped
// here). c.mu is held; c.notices is not modified.
//
// An incoming notice that this replica is seen to have processed but no
// longer holds was dropped here, and a replica drops only a notice that
// every server has processed: settled returns it as done (seen by all its
// servers) for the answer, instead of taking it in again. Without that, a
// stale copy still travelling between two replicas that had each dropped
// the notice once would bring it back at one, whose copy would bring it
// back at the other, and so on: the notice would never be collected.
func (col *Column) takeNotices(c *cell, incoming []*handoff.HeldNotice) (out, settled map[handoff.ID]*handoff.HeldNotice) {
	out = make(map[handoff.ID]*handoff.HeldNotice, len(c.notices)+len(incoming))
	for k, h := range c.notices {
		out[k] = h.Clone()
	}
	now := col.env.Now().UnixMilli()
	for _, h := range incoming {
		if cur, ok := out[h.Notice.ID]; ok {
			cur.Absorb(h)
			continue
		}
		if col.noticeExpired(h, now) {
			continue
		}
		if _, processed := slices.BinarySearchFunc(h.Seen, col.self, handoff.ID.Compare); processed {
			done := h.Clone()
			done.Seen = handoff.UnionIDs(done.Seen, done.Servers)
			if settled == nil {
				settled = map[handoff.ID]*handoff.HeldNotice{}
			}
			settled[h.Notice.ID] = done
			continue
		}
		nh := h.Clone()
		if nh.Created == 0 {
			nh.Created = now
		}
		out[h.Notice.ID] = nh
	}
	return out, settled
}

func (col *Column) noticeExpired(h *handoff.HeldNotice, nowMilli int64) bool {
	return h.Done() && nowMilli-h.Created >= col.retention.Milliseconds()
}

// commit applies the notices to next (Collect, after the merge the caller
// made), marks this replica as having processed each, drops the expired
// ones (and returns them) and, if the cell changed, writes it with a new
// version and installs it in c. c.mu is held.
func (col *Column) commit(l coltype.Leader, key []byte, name string, c *cell, next *handoff.Counter, notices map[handoff.ID]*handoff.HeldNotice) (expired map[handoff.ID]*handoff.HeldNotice, err error) {
	now := col.env.Now().UnixMilli()
	var collected uint64
	for k, h := range notices {
		if next.Collect(h.Notice) {
			collected++
		}
		h.Seen = handoff.UnionIDs(h.Seen, []handoff.ID{col.self})
		if col.noticeExpired(h, now) {
			if expired == nil {
				expired = map[handoff.ID]*handoff.HeldNotice{}
			}
			expired[k] = h
			delete(notices, k)
		}
	}
	enc, err := c.message(next, notices).MarshalBinary()
	if err != nil {
		return nil, err
	}
	if bytes.Equal(enc, c.enc) {
		return expired, nil
	}
	version := c.version + 1
	m := coltype.Mutation{Table: col.id.Table, Key: key, Cell: row.Cell{Column: col.id.CellName(name), Value: EncodeCell(version, enc), Timestamp: col.env.Now().UnixMicro()}}
	if err := l.Write(row.Key{Token: ring.Token(key), Partition: key}, m, commitlog.PayloadShard); err != nil {
		return nil, err
	}
	c.state, c.notices, c.enc, c.version = next, notices, bytes.Clone(enc), version
	col.writes.Add(1)
	col.collected.Add(collected)
	col.trackNotices(key, name, notices)
	col.MarkDirty(col.id.CellRef(key, name))
	return expired, nil
}

// Sweep implements coltype.AntiEntropy: it drops the expired retirement
// notices of the cells holding notices that are due (writing the cells
// that change), puts back in anti-entropy the cells holding a notice not
// yet processed by every server, and returns how many notices are still
// held. A cell whose notices are all processed everywhere is not loaded
// before its first notice expires.
func (col *Column) Sweep(l coltype.Leader) (held int, err error) {
	now := col.env.Now().UnixMilli()
	var cells []coltype.CellRef
	col.noticeMu.Lock()
	for k, nc := range col.noticeCells {
		if nc.due > now {
			continue
		}
		if ref, ok := col.noticeRef(k, nc); ok {
			cells = append(cells, ref)
		}
	}
	col.noticeMu.Unlock()
	for _, hc := range cells {
		c, unlock, lerr := col.lock(l, hc.Key, hc.Column)
		if lerr != nil {
			err = errors.Join(err, lerr)
			continue
		}
		notices, _ := col.takeNotices(c, nil)
		if _, cerr := col.commit(l, hc.Key, hc.Column, c, c.state.Clone(), notices); cerr != nil {
			err = errors.Join(err, cerr)
		}
		// A notice not yet processed by every server keeps its cell in
		// anti-entropy: an exchange that succeeded may still have left a
		// peer (or this replica) without another's mark, and nothing else
		// would bring the cell back.
		for _, n := range c.notices {
			if !n.Done() {
				col.MarkDirty(hc)
				break
			}
		}
		unlock()
	}
	col.noticeMu.Lock()
	held = col.noticesHeld
	col.noticeMu.Unlock()
	return held, err
}

// View implements coltype.AntiEntropy: this replica's view of a cell for
// another tier-0 node (View(peer, 0)) with the notices it holds, an encoded
// handoff.Message, for anti-entropy.
func (col *Column) View(l coltype.Leader, key []byte, name string, peer counters.ID) ([]byte, error) {
	c, unlock, err := col.lock(l, key, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return c.message(c.state.View(handoff.ID(peer), 0), c.notices).MarshalBinary()
}

// Stats are a replica's handoff counts.
type Stats struct {
	Exchanges uint64 // Exchange calls
	Writes    uint64 // new state versions written
	Cells     int    // cells in memory
	Slots     int    // slots held, summed over the cells in memory
	Tokens    int    // tokens held (cached for other nodes), summed likewise
	Notices   int    // retirement notices held, summed likewise
	Collected uint64 // slots filled or dropped by retirement notices
}

// Stats returns the column's running counts and the slots and tokens its
// states in memory hold.
func (col *Column) Stats() Stats {
	s := Stats{Exchanges: col.exchanges.Load(), Writes: col.writes.Load(), Collected: col.collected.Load()}
	for _, v := range col.cells.Values(col.ns) {
		c := v.(*cell)
		c.mu.Lock()
		if c.loaded {
			if m, _, err := handoff.DecodeMessage(c.enc); err == nil {
				s.Cells++
				s.Slots += m.State.Slots()
				s.Tokens += m.State.Tokens()
				s.Notices += len(m.Notices)
			}
		}
		c.mu.Unlock()
	}
	return s
}

// MetricsStats is Stats for the node's metrics and tablestats: the sums
// over the cells in memory (Cells, Slots, Tokens, Notices: a scan of the
// cell cache decoding every cell, under each cell's lock) are those of a
// scan at most coltype.StatsScanEvery old; the running counts are current.
func (col *Column) MetricsStats() Stats {
	s := col.statsScan.Get(col.env.Now(), col.Stats)
	s.Exchanges, s.Writes, s.Collected = col.exchanges.Load(), col.writes.Load(), col.collected.Load()
	return s
}

// ColumnLister is what ReplicaStats needs of a replica (replica.Replica
// implements it): every column instance of every table.
type ColumnLister interface {
	ColumnTypes() []coltype.ColumnType
}

// ReplicaStats sums the Stats of a replica's handoff columns.
func ReplicaStats(r ColumnLister) Stats {
	var out Stats
	for _, t := range r.ColumnTypes() {
		col, ok := t.(*Column)
		if !ok {
			continue
		}
		s := col.Stats()
		out.Exchanges += s.Exchanges
		out.Writes += s.Writes
		out.Cells += s.Cells
		out.Slots += s.Slots
		out.Tokens += s.Tokens
		out.Notices += s.Notices
		out.Collected += s.Collected
	}
	return out
}

// ApplyReplicated implements coltype.Replicated: a handoff cell received as
// replicated state (a coordinator's read repair, an operator's tool). This
// replica's own state is stored as is (storage keeps the higher version)
// and reloaded; another replica's state is merged into ours by an
// exchange, never stored as ours.
func (col *Column) ApplyReplicated(l coltype.Leader, m coltype.Mutation) error {
	if m.Cell.Tombstone {
		return fmt.Errorf("%s columns cannot be deleted", TypeName)
	}
	_, st, _, err := DecodeCell(m.Cell.Value)
	if err != nil {
		return err
	}
	if st.ID() != col.self {
		enc, err := st.MarshalBinary()
		if err != nil {
			return err
		}
		_, err = col.Exchange(l, m.Table, m.Key, m.Cell.Column, enc)
		return err
	}
	c, unlock, err := col.lock(l, m.Key, m.Cell.Column)
	if err != nil {
		return err
	}
	defer unlock()
	if err := l.Write(row.Key{Token: ring.Token(m.Key), Partition: m.Key}, m, commitlog.PayloadShard); err != nil {
		return err
	}
	c.loaded = false // reload the merged version on next use
	return nil
}

// ServesClustering implements coltype.Clustered, for the registry's instance
// CREATE TABLE checks and, promoted, for the configured Column: a cell's
// state, cache entry, notices and anti-entropy are kept per cell name.
func (Type) ServesClustering() {}

var (
	_ coltype.AntiEntropy = (*Column)(nil)
	_ coltype.Exchanger   = (*Column)(nil)
	_ coltype.Replicated  = (*Column)(nil)
	_ coltype.Clustered   = (*Column)(nil)
)
