package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// HandoffCounterType is the column type of handoff counters
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
// (the client may then stop). A
// notice is dropped once every server has processed it and
// Config.HandoffNoticeRetention has passed since it was first received.
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
const HandoffCounterType = "handoff_counter"

// Handoff cell formats (the first byte of a cell value).
const (
	handoffCellFormatState   = 1 // version, bare state
	handoffCellFormatMessage = 2 // version, handoff.Message (state and notices)
)

// DefaultHandoffNoticeRetention is the default Config.HandoffNoticeRetention.
const DefaultHandoffNoticeRetention = time.Minute

// ErrHandoffLead is returned by the leader path of a handoff column: its
// updates are exchanges (Replica.Exchange).
var ErrHandoffLead = errors.New("handoff_counter columns are updated by state exchange, not by the counter leader path")

// encodeHandoffCell is the cell value of an encoded handoff.Message (state
// and notices) at a version.
func encodeHandoffCell(version uint64, msg []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(msg))
	b = append(b, handoffCellFormatMessage)
	b = binary.AppendUvarint(b, version)
	return append(b, msg...)
}

// decodeHandoffCell parses a handoff cell value: its version, state and
// notices.
func decodeHandoffCell(v []byte) (version uint64, c *handoff.Counter, notices []*handoff.HeldNotice, err error) {
	if len(v) == 0 || v[0] != handoffCellFormatState && v[0] != handoffCellFormatMessage {
		return 0, nil, nil, errors.New("handoff cell: bad format byte")
	}
	version, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return 0, nil, nil, errors.New("handoff cell: bad version")
	}
	body := v[1+n:]
	if v[0] == handoffCellFormatState {
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

// HandoffCellValue returns the fetch, owner and version of a handoff cell
// value (for tests and tools).
func HandoffCellValue(v []byte) (fetch uint64, owner handoff.ID, version uint64, err error) {
	version, c, _, err := decodeHandoffCell(v)
	if err != nil {
		return 0, owner, 0, err
	}
	return c.Fetch(), c.ID(), version, nil
}

// handoffCounter is the column type; the states live in the replica's
// handoff cells.
type handoffCounter struct{}

func init() { coltype.MustRegister(handoffCounter{}) }

func (handoffCounter) Name() string { return HandoffCounterType }

func (handoffCounter) Lead(coltype.Leader, coltype.Update) (coltype.Mutation, error) {
	return coltype.Mutation{}, ErrHandoffLead
}

// replicaOf returns the replica behind a Leader: the handoff states live
// in the replica (Replica.Exchange and the anti-entropy methods), until
// they move behind the Exchanger and AntiEntropy capabilities.
func replicaOf(l coltype.Leader) (leader, error) {
	ld, ok := l.(leader)
	if !ok {
		return leader{}, fmt.Errorf("replica: %s needs the replica's own leader, got %T", HandoffCounterType, l)
	}
	return ld, nil
}

// ApplyReplicated implements coltype.Replicated: see applyHandoffMutation.
func (handoffCounter) ApplyReplicated(l coltype.Leader, m coltype.Mutation) error {
	ld, err := replicaOf(l)
	if err != nil {
		return err
	}
	return ld.r.applyHandoffMutation(ld.t, m)
}

// CheckDelete implements coltype.Deleter: a handoff counter cannot be
// deleted (a client's state would bring it back).
func (handoffCounter) CheckDelete(column string) error {
	return fmt.Errorf("%s columns cannot be deleted (%s)", HandoffCounterType, column)
}

// Delete implements coltype.Deleter: it refuses.
func (h handoffCounter) Delete(_ coltype.Leader, d coltype.Deletion) (coltype.Mutation, error) {
	return coltype.Mutation{}, h.CheckDelete(d.Column)
}

// ReadRule implements coltype.ReadPolicy: every replica holds its own
// state, so the merged cell (the largest fetch) differs from all but one;
// replicas converge by anti-entropy, not read repair.
func (handoffCounter) ReadRule() coltype.ReadRule { return coltype.ReadNoRepair }

// CQLType implements coltype.CQL.
func (handoffCounter) CQLType() string { return "counter" }

// CheckDelta implements coltype.CQL: handoff counters only grow.
func (handoffCounter) CheckDelta(d int64) error {
	if d < 0 {
		return fmt.Errorf("%s columns can only be incremented (got %d)", HandoffCounterType, d)
	}
	return nil
}

// HandoffPayloadKey is the CQL custom payload key of a handoff exchange.
const HandoffPayloadKey = "idemkv-handoff"

// PayloadKey implements coltype.Exchanger.
func (handoffCounter) PayloadKey() string { return HandoffPayloadKey }

// Exchange implements coltype.Exchanger: see Replica.Exchange.
func (handoffCounter) Exchange(l coltype.Leader, table uint64, key []byte, column string, incoming []byte) ([]byte, error) {
	ld, err := replicaOf(l)
	if err != nil {
		return nil, err
	}
	return ld.r.Exchange(table, key, column, incoming)
}

// Check implements coltype.Replayer: a replayed record must hold a handoff cell.
func (handoffCounter) Check(payload []byte) error {
	_, _, _, err := decodeHandoffCell(payload)
	return err
}

// Replayed implements coltype.Replayer: the states reload from storage.
func (handoffCounter) Replayed(commitlog.Record) error { return nil }

func (handoffCounter) Merge(a, b row.Cell) (row.Cell, error) {
	ts := max(a.Timestamp, b.Timestamp)
	if a.Tombstone || b.Tombstone {
		return row.Cell{Column: a.Column, Timestamp: ts, Tombstone: true}, nil
	}
	va, ca, _, err := decodeHandoffCell(a.Value)
	if err != nil {
		return row.Cell{}, fmt.Errorf("column %q: %w", a.Column, err)
	}
	vb, cb, _, err := decodeHandoffCell(b.Value)
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

func (handoffCounter) Value(c row.Cell) (int64, error) {
	_, st, _, err := decodeHandoffCell(c.Value)
	if err != nil {
		return 0, fmt.Errorf("column %q: %w", c.Column, err)
	}
	return int64(st.Fetch()), nil
}

// handoffKey is a handoff cell's key in the replica's maps.
func handoffKey(c coltype.CellRef) string { return cacheKey(c.Table, c.Column, c.Key) }

// handoffCell is this replica's state of one cell, loaded once from storage
// and then changed only under mu.
type handoffCell struct {
	mu      sync.Mutex
	loaded  bool
	state   *handoff.Counter
	notices map[handoff.ID]*handoff.HeldNotice // retirement notices held
	enc     []byte                             // the encoded message (state and notices)
	version uint64
}

// message returns the cell's state and notices as a handoff.Message.
func (c *handoffCell) message(state *handoff.Counter, notices map[handoff.ID]*handoff.HeldNotice) *handoff.Message {
	m := &handoff.Message{State: state}
	for _, k := range slices.SortedFunc(maps.Keys(notices), handoff.ID.Compare) {
		m.Notices = append(m.Notices, notices[k])
	}
	return m
}

// handoffCells is the replica's in-memory handoff states and the cells
// changed since the last anti-entropy round.
type handoffCells struct {
	cells sync.Map // cache key → *handoffCell

	dirtyMu sync.Mutex
	dirty   map[string]coltype.CellRef

	noticeMu    sync.Mutex
	noticeCells map[string]coltype.CellRef // cells holding notices, for the sweep

	exchanges, writes, collected atomic.Uint64
}

// trackNotices records whether a cell holds notices (for the sweep).
func (h *handoffCells) trackNotices(c coltype.CellRef, holds bool) {
	h.noticeMu.Lock()
	defer h.noticeMu.Unlock()
	if !holds {
		delete(h.noticeCells, handoffKey(c))
		return
	}
	if h.noticeCells == nil {
		h.noticeCells = map[string]coltype.CellRef{}
	}
	h.noticeCells[handoffKey(c)] = c
}

func (h *handoffCells) markDirty(c coltype.CellRef) {
	h.dirtyMu.Lock()
	if h.dirty == nil {
		h.dirty = map[string]coltype.CellRef{}
	}
	h.dirty[handoffKey(c)] = c
	h.dirtyMu.Unlock()
}

// handoffColumn resolves a handoff column of a table.
func (r *Replica) handoffColumn(tableID uint64, column string) (*table, error) {
	t, err := r.table(tableID)
	if err != nil {
		return nil, err
	}
	col, ok := t.col(column)
	if !ok {
		return nil, fmt.Errorf("replica: table %s.%s has no column %q", t.def.Keyspace, t.def.Name, column)
	}
	if _, ok := col.(handoffCounter); !ok {
		return nil, fmt.Errorf("replica: column %s.%s.%s is not a %s", t.def.Keyspace, t.def.Name, column, HandoffCounterType)
	}
	return t, nil
}

// IsHandoff reports whether a table's column is a handoff counter.
func (r *Replica) IsHandoff(tableID uint64, column string) bool {
	_, err := r.handoffColumn(tableID, column)
	return err == nil
}

// handoffCell returns the cell's in-memory state, locked, loading it from
// storage on first use. The caller unlocks c.mu.
func (r *Replica) lockHandoffCell(t *table, hc coltype.CellRef) (*handoffCell, error) {
	k := handoffKey(hc)
	v, ok := r.handoff.cells.Load(k)
	if !ok {
		v, _ = r.handoff.cells.LoadOrStore(k, &handoffCell{})
	}
	c := v.(*handoffCell)
	c.mu.Lock()
	if c.loaded {
		return c, nil
	}
	self := handoff.ID(r.hostID)
	c.state = handoff.NewCounter(self, 0)
	c.notices = map[handoff.ID]*handoff.HeldNotice{}
	rw, found, err := t.read(row.Key{Token: ring.Token(hc.Key), Partition: hc.Key})
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if found {
		if cell, ok := rw.Cell(hc.Column); ok && !cell.Tombstone {
			version, st, notices, err := decodeHandoffCell(cell.Value)
			if err != nil {
				c.mu.Unlock()
				return nil, err
			}
			c.version = version
			if st.ID() == self {
				c.state = st
				for _, n := range notices {
					c.notices[n.Notice.ID] = n
				}
				r.handoff.trackNotices(hc, len(c.notices) > 0)
			} else {
				// Never written by this replica; merge rather than adopt.
				c.state.Merge(st)
			}
		}
	}
	if c.enc, err = c.message(c.state, c.notices).MarshalBinary(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.loaded = true
	return c, nil
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
func (r *Replica) Exchange(tableID uint64, key []byte, column string, incoming []byte) ([]byte, error) {
	t, err := r.handoffColumn(tableID, column)
	if err != nil {
		return nil, err
	}
	msg, bare, err := handoff.DecodeMessage(incoming)
	if err != nil {
		return nil, fmt.Errorf("replica: handoff exchange: %w", err)
	}
	in := msg.State
	for _, h := range msg.Notices {
		switch {
		case in.Tier() > 0 && h.Notice.ID != in.ID():
			return nil, fmt.Errorf("replica: handoff exchange: a client (tier %d) carries another node's retirement notice", in.Tier())
		case len(h.Servers) == 0:
			return nil, errors.New("replica: handoff exchange: a retirement notice without servers")
		}
	}
	r.handoff.exchanges.Add(1)
	hc := coltype.CellRef{Table: tableID, Key: key, Column: column}
	c, err := r.lockHandoffCell(t, hc)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	next := c.state.Clone()
	next.Merge(in)
	notices := r.takeNotices(c, msg.Notices)
	expired, err := r.commitHandoffCell(t, hc, c, next, notices)
	if err != nil {
		return nil, err
	}
	view := c.state.View(in.ID(), in.Tier())
	if bare {
		return view.MarshalBinary()
	}
	// The answer carries the notices held, and those that expired just now
	// (a sender whose copy is not complete learns that it is done, which it
	// would not from a notice that is simply absent).
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
func (r *Replica) takeNotices(c *handoffCell, incoming []*handoff.HeldNotice) map[handoff.ID]*handoff.HeldNotice {
	out := make(map[handoff.ID]*handoff.HeldNotice, len(c.notices)+len(incoming))
	for k, h := range c.notices {
		out[k] = h.Clone()
	}
	now := r.cfg.Now().UnixMilli()
	for _, h := range incoming {
		if cur, ok := out[h.Notice.ID]; ok {
			cur.Absorb(h)
			continue
		}
		if r.noticeExpired(h, now) {
			continue
		}
		nh := h.Clone()
		if nh.Created == 0 {
			nh.Created = now
		}
		out[h.Notice.ID] = nh
	}
	return out
}

func (r *Replica) noticeExpired(h *handoff.HeldNotice, nowMilli int64) bool {
	return h.Done() && nowMilli-h.Created >= r.cfg.HandoffNoticeRetention.Milliseconds()
}

// commitHandoffCell applies the notices to next (Collect, after the merge
// the caller made), marks this replica as having processed each, drops the
// expired ones (and returns them) and, if the cell changed, writes it with a
// new version and installs it in c. c.mu is held.
func (r *Replica) commitHandoffCell(t *table, hc coltype.CellRef, c *handoffCell, next *handoff.Counter, notices map[handoff.ID]*handoff.HeldNotice) (expired map[handoff.ID]*handoff.HeldNotice, err error) {
	self := handoff.ID(r.hostID)
	now := r.cfg.Now().UnixMilli()
	var collected uint64
	for k, h := range notices {
		if next.Collect(h.Notice) {
			collected++
		}
		h.Seen = handoff.UnionIDs(h.Seen, []handoff.ID{self})
		if r.noticeExpired(h, now) {
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
	m := coltype.Mutation{Table: hc.Table, Key: hc.Key, Cell: row.Cell{Column: hc.Column, Value: encodeHandoffCell(version, enc), Timestamp: r.cfg.Now().UnixMicro()}}
	if err := t.write(row.Key{Token: ring.Token(hc.Key), Partition: hc.Key}, m, commitlog.PayloadShard); err != nil {
		return nil, err
	}
	c.state, c.notices, c.enc, c.version = next, notices, enc, version
	r.handoff.writes.Add(1)
	r.handoff.collected.Add(collected)
	r.handoff.trackNotices(hc, len(notices) > 0)
	r.handoff.markDirty(hc)
	return expired, nil
}

// SweepHandoffNotices drops the expired retirement notices of the cells in
// memory (writing the cells that change) and returns how many notices are
// still held.
func (r *Replica) SweepHandoffNotices() (held int, err error) {
	h := &r.handoff
	h.noticeMu.Lock()
	cells := slices.Collect(maps.Values(h.noticeCells))
	h.noticeMu.Unlock()
	for _, hc := range cells {
		t, terr := r.handoffColumn(hc.Table, hc.Column)
		if terr != nil {
			h.trackNotices(hc, false) // a dropped table or column
			continue
		}
		c, lerr := r.lockHandoffCell(t, hc)
		if lerr != nil {
			err = errors.Join(err, lerr)
			continue
		}
		notices := r.takeNotices(c, nil)
		if _, cerr := r.commitHandoffCell(t, hc, c, c.state.Clone(), notices); cerr != nil {
			err = errors.Join(err, cerr)
		}
		held += len(c.notices)
		// A notice not yet processed by every server keeps its cell in
		// anti-entropy: an exchange that succeeded may still have left a
		// peer (or this replica) without another's mark, and nothing else
		// would bring the cell back.
		for _, n := range c.notices {
			if !n.Done() {
				h.markDirty(hc)
				break
			}
		}
		c.mu.Unlock()
	}
	return held, err
}

// HandoffView returns this replica's view of a cell for another tier-0 node
// (View(peer, 0)) with the notices it holds, an encoded handoff.Message, for
// anti-entropy.
func (r *Replica) HandoffView(tableID uint64, key []byte, column string, peer handoff.ID) ([]byte, error) {
	t, err := r.handoffColumn(tableID, column)
	if err != nil {
		return nil, err
	}
	c, err := r.lockHandoffCell(t, coltype.CellRef{Table: tableID, Key: key, Column: column})
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	return c.message(c.state.View(peer, 0), c.notices).MarshalBinary()
}

// TakeHandoffDirty returns the handoff cells changed since the last call
// and forgets them.
func (r *Replica) TakeHandoffDirty() []coltype.CellRef {
	h := &r.handoff
	h.dirtyMu.Lock()
	defer h.dirtyMu.Unlock()
	out := make([]coltype.CellRef, 0, len(h.dirty))
	for _, c := range h.dirty {
		out = append(out, c)
	}
	h.dirty = nil
	return out
}

// MarkHandoffDirty puts a cell back in the set of cells to synchronise (an
// anti-entropy exchange with a peer failed).
func (r *Replica) MarkHandoffDirty(c coltype.CellRef) { r.handoff.markDirty(c) }

// HandoffStats are this replica's handoff counters.
type HandoffStats struct {
	Exchanges uint64 // Exchange calls
	Writes    uint64 // new state versions written
	Cells     int    // cells in memory
	Slots     int    // slots held, summed over the cells in memory
	Tokens    int    // tokens held (cached for other nodes), summed likewise
	Notices   int    // retirement notices held, summed likewise
	Collected uint64 // slots filled or dropped by retirement notices
}

// HandoffStats returns the running counts and the slots and tokens the
// states in memory hold.
func (r *Replica) HandoffStats() HandoffStats {
	s := HandoffStats{Exchanges: r.handoff.exchanges.Load(), Writes: r.handoff.writes.Load(), Collected: r.handoff.collected.Load()}
	r.handoff.cells.Range(func(_, v any) bool {
		c := v.(*handoffCell)
		c.mu.Lock()
		if c.loaded {
			s.Cells++
			s.Slots += c.state.Slots()
			s.Tokens += c.state.Tokens()
			s.Notices += len(c.notices)
		}
		c.mu.Unlock()
		return true
	})
	return s
}

// applyHandoffMutation takes a handoff cell received as replicated state (a
// coordinator's read repair, an operator's tool). This replica's own state
// is stored as is (storage keeps the higher version) and reloaded; another
// replica's state is merged into ours by an exchange, never stored as ours.
func (r *Replica) applyHandoffMutation(t *table, m coltype.Mutation) error {
	if m.Cell.Tombstone {
		return fmt.Errorf("replica: %s columns cannot be deleted", HandoffCounterType)
	}
	_, st, _, err := decodeHandoffCell(m.Cell.Value)
	if err != nil {
		return fmt.Errorf("replica: mutation for %s.%s: %w", t.def.Keyspace, t.def.Name, err)
	}
	if st.ID() != handoff.ID(r.hostID) {
		enc, err := st.MarshalBinary()
		if err != nil {
			return err
		}
		_, err = r.Exchange(m.Table, m.Key, m.Cell.Column, enc)
		return err
	}
	hc := coltype.CellRef{Table: m.Table, Key: m.Key, Column: m.Cell.Column}
	c, err := r.lockHandoffCell(t, hc)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := t.write(row.Key{Token: ring.Token(m.Key), Partition: m.Key}, m, commitlog.PayloadShard); err != nil {
		return err
	}
	c.loaded = false // reload the merged version on next use
	return nil
}

// Repairs reports whether a coordinator's read repair should send a merged
// cell of the column back to replicas: false for the types whose ReadPolicy
// says so (handoff counters: every replica holds its own state, and
// replicas converge by anti-entropy instead).
func (r *Replica) Repairs(tableID uint64, column string) bool {
	t, err := r.table(tableID)
	if err != nil {
		return true
	}
	col, ok := t.col(column)
	return !ok || coltype.ReadRuleOf(col) == coltype.ReadMerge
}
