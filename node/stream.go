package node

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/schema"
	"github.com/idemkv/idemkv/transport"
	"github.com/idemkv/idemkv/vfs"
)

// This file is range streaming: the bootstrap of a joining node and the
// decommission of a leaving one (docs/operations.md, "Adding and removing
// nodes").
//
// # Stream messages
//
// Two node message types carry rows between nodes, every integer big-endian:
//
//	TypeStreamPull request:  u64 table | i64 start | i64 end | u32 limit |
//	                         u8 hasAfter | [u32 len | after key bytes]
//	TypeStreamPull response: a batch
//	TypeStreamPush request:  a batch
//	TypeStreamPush response: empty
//
//	batch: u8 flags | u32 rows | u32 len | last key bytes | u32 n |
//	       n × (u32 len | mutation bytes, as coordinator.EncodeMutation)
//
// A pull asks the receiver for up to limit rows of a table whose token lies
// in (start, end] and, when hasAfter is 1, whose key is after the given key
// (token order, then key bytes), from its memtables and SSTables; limit is
// at most 4096. The answer's rows is how many rows it holds (fewer than
// limit: the range is done), the last key that of the last row (empty when
// rows is 0), and each cell of each row is one mutation. A push hands such
// a batch to a node that becomes a replica of its rows; flags bit 0 (flush)
// asks it to flush every table before it answers, which the sender sets on
// its last, empty, batch. Every other flag bit must be 0, and no byte may
// follow the last mutation. The receiver applies each mutation as a
// replica mutation (replica.ApplyMutation: each column type's merge, a
// counter's shards by clock), so that a row streamed twice, or streamed and
// also replicated live, is counted once.

//
// Columns whose type is coltype.Joinable (reset_counter and its map form)
// are not streamed as stored cells: the new replica adopts a snapshot that
// a current replica makes for it (docs/reset-counter.md, "Joining and
// leaving"), after every current replica of the range has prepared its
// cells for it. Two more message types carry that, the joiner's 16-byte
// host id first:
//
//	TypeStreamPrepare request:  joiner (16 bytes) | u64 table | i64 start | i64 end
//	TypeStreamPrepare response: empty
//	TypeStreamPullFor request:  joiner (16 bytes) | a TypeStreamPull request
//	TypeStreamPullFor response: a batch
//
// A prepare asks the receiver, a current replica of the range, to prepare
// every Joinable cell it holds of the table in (start, end] for the joiner
// (coltype.Joinable.PrepareJoin) before it answers. A pull-for is a pull
// whose batch carries, in place of each Joinable cell, the snapshot the
// receiver makes for the joiner (coltype.Joinable.SnapshotFor; no cell
// when it holds nothing of it). A decommissioning node pushes batches
// built the same way for each new owner.

// Stream message types, in the node's 48–63 range.
const (
	TypeStreamPull    transport.Type = 54
	TypeStreamPush    transport.Type = 55
	TypeStreamPrepare transport.Type = 56
	TypeStreamPullFor transport.Type = 57
)

const (
	streamPage     = 512  // rows per stream message
	maxStreamPage  = 4096 // the most rows a pull may ask for
	maxStreamCells = 1 << 20
	flagFlush      = 1
	// bootstrapFile marks a data directory whose node has not finished its
	// bootstrap: the next start streams again.
	bootstrapFile = "bootstrapping"
	// decommissionedFile marks a data directory whose node was
	// decommissioned: it refuses to start.
	decommissionedFile = "decommissioned"
)

// StreamStats counts the rows a node streamed, both ways.
type StreamStats struct {
	// RangesIn, RowsIn, CellsIn, BytesIn: received by this node's bootstrap
	// (or from a decommissioning node's pushes).
	RangesIn, RowsIn, CellsIn, BytesIn uint64
	// RangesOut, RowsOut, CellsOut, BytesOut: sent by this node's
	// decommission (or served to a bootstrapping node's pulls).
	RangesOut, RowsOut, CellsOut, BytesOut uint64
}

type streamCounters struct {
	rangesIn, rowsIn, cellsIn, bytesIn     atomic.Uint64
	rangesOut, rowsOut, cellsOut, bytesOut atomic.Uint64
}

// StreamStats returns the node's stream counts since it started.
func (n *Node) StreamStats() StreamStats {
	s := &n.stream
	return StreamStats{
		RangesIn: s.rangesIn.Load(), RowsIn: s.rowsIn.Load(), CellsIn: s.cellsIn.Load(), BytesIn: s.bytesIn.Load(),
		RangesOut: s.rangesOut.Load(), RowsOut: s.rowsOut.Load(), CellsOut: s.cellsOut.Load(), BytesOut: s.bytesOut.Load(),
	}
}

// batch is a decoded batch.
type batch struct {
	flags uint8
	rows  int
	last  []byte
	muts  []coltype.Mutation
}

func encodeBatch(flags uint8, rows []row.Row, table uint64) (b []byte, cells int) {
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(len(rows)))
	var last []byte
	if len(rows) > 0 {
		last = rows[len(rows)-1].Key.Partition
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(last)))
	b = append(b, last...)
	at := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	for _, r := range rows {
		for _, c := range r.Cells {
			m := coordinator.EncodeMutation(coltype.Mutation{Table: table, Key: r.Key.Partition, Cell: c})
			b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
			b = append(b, m...)
			cells++
		}
	}
	binary.BigEndian.PutUint32(b[at:], uint32(cells))
	return b, cells
}

// streamDec reads a stream message; the first error sticks.
type streamDec struct {
	b   []byte
	err error
}

func (d *streamDec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errors.New("node: stream message truncated")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *streamDec) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *streamDec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *streamDec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *streamDec) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("node: %d bytes after a stream message", len(d.b))
	}
	return d.err
}

func decodeBatch(b []byte) (batch, error) {
	d := &streamDec{b: b}
	bt := batch{flags: d.u8(), rows: int(d.u32())}
	bt.last = d.take(int(d.u32()))
	n := d.u32()
	if d.err == nil && (bt.flags&^flagFlush != 0 || bt.rows > maxStreamPage || n > maxStreamCells) {
		return batch{}, fmt.Errorf("node: bad stream batch (flags %#x, %d rows, %d cells)", bt.flags, bt.rows, n)
	}
	for i := uint32(0); i < n && d.err == nil; i++ {
		mb := d.take(int(d.u32()))
		if d.err != nil {
			break
		}
		m, err := coordinator.DecodeMutation(mb)
		if err != nil {
			return batch{}, fmt.Errorf("node: stream batch: %w", err)
		}
		bt.muts = append(bt.muts, m)
	}
	return bt, d.end()
}

type pullRequest struct {
	table      uint64
	start, end int64
	limit      int
	after      *row.Key
}

func encodePull(r pullRequest) []byte {
	b := binary.BigEndian.AppendUint64(nil, r.table)
	b = binary.BigEndian.AppendUint64(b, uint64(r.start))
	b = binary.BigEndian.AppendUint64(b, uint64(r.end))
	b = binary.BigEndian.AppendUint32(b, uint32(r.limit))
	if r.after == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.after.Partition)))
	return append(b, r.after.Partition...)
}

func decodePull(b []byte) (pullRequest, error) {
	d := &streamDec{b: b}
	r := pullRequest{table: d.u64(), start: int64(d.u64()), end: int64(d.u64()), limit: int(d.u32())}
	switch d.u8() {
	case 0:
	case 1:
		k := d.take(int(d.u32()))
		r.after = &row.Key{Token: ring.Token(k), Partition: k}
	default:
		return r, errors.New("node: bad stream pull (hasAfter)")
	}
	if err := d.end(); err != nil {
		return r, err
	}
	if r.limit <= 0 || r.limit > maxStreamPage {
		return r, fmt.Errorf("node: stream pull of %d rows", r.limit)
	}
	return r, nil
}

// handleStream serves TypeStreamPull, TypeStreamPullFor, TypeStreamPrepare
// and TypeStreamPush.
func (n *Node) handleStream(m transport.Message) (transport.Message, error) {
	switch m.Type {
	case TypeStreamPrepare:
		d := &streamDec{b: m.Body}
		var joiner counters.ID
		copy(joiner[:], d.take(len(joiner)))
		table, start, end := d.u64(), int64(d.u64()), int64(d.u64())
		if err := d.end(); err != nil {
			return transport.Message{}, err
		}
		if err := n.prepareRange(table, start, end, joiner); err != nil {
			return transport.Message{}, err
		}
		return transport.Message{Type: TypeStreamPrepare}, nil
	case TypeStreamPull, TypeStreamPullFor:
		body := m.Body
		var joiner *counters.ID
		if m.Type == TypeStreamPullFor {
			if len(body) < len(counters.ID{}) {
				return transport.Message{}, errors.New("node: stream pull-for truncated")
			}
			joiner = new(counters.ID)
			body = body[copy(joiner[:], body):]
		}
		r, err := decodePull(body)
		if err != nil {
			return transport.Message{}, err
		}
		rows, err := n.replica.Scan(r.table, r.after, r.start, r.end, r.limit)
		if err != nil {
			return transport.Message{}, fmt.Errorf("node: stream pull: %w", err)
		}
		if joiner != nil {
			if rows, err = n.snapshotRows(r.table, rows, *joiner); err != nil {
				return transport.Message{}, fmt.Errorf("node: stream pull: %w", err)
			}
		}
		b, cells := encodeBatch(0, rows, r.table)
		n.stream.rowsOut.Add(uint64(len(rows)))
		n.stream.cellsOut.Add(uint64(cells))
		n.stream.bytesOut.Add(uint64(len(b)))
		return transport.Message{Type: TypeStreamPull, Body: b}, nil
	default: // TypeStreamPush
		bt, err := decodeBatch(m.Body)
		if err != nil {
			return transport.Message{}, err
		}
		if err := n.applyBatch(bt, len(m.Body)); err != nil {
			return transport.Message{}, err
		}
		if bt.flags&flagFlush != 0 {
			if err := n.replica.FlushAll(); err != nil {
				return transport.Message{}, fmt.Errorf("node: stream flush: %w", err)
			}
		}
		return transport.Message{Type: TypeStreamPush}, nil
	}
}

// applyBatch merges a batch's cells into the local replica.
func (n *Node) applyBatch(bt batch, size int) error {
	for _, m := range bt.muts {
		if err := n.replica.ApplyMutation(m); err != nil {
			return fmt.Errorf("node: apply streamed row: %w", err)
		}
	}
	n.stream.rowsIn.Add(uint64(bt.rows))
	n.stream.cellsIn.Add(uint64(len(bt.muts)))
	n.stream.bytesIn.Add(uint64(size))
	return nil
}

// hasJoinable reports whether a table has a coltype.Joinable column.
func (n *Node) hasJoinable(table uint64, d coltype.TableDef) bool {
	return slices.ContainsFunc(d.Columns, func(c coltype.ColumnDef) bool { return n.replica.Joinable(table, c.Name) })
}

// snapshotRows replaces each Joinable cell of rows by the snapshot this
// replica makes of it for the joiner (or drops it: nothing to adopt).
func (n *Node) snapshotRows(table uint64, rows []row.Row, joiner counters.ID) ([]row.Row, error) {
	out := make([]row.Row, 0, len(rows))
	for _, rw := range rows {
		cells := make([]row.Cell, 0, len(rw.Cells))
		for _, c := range rw.Cells {
			if !n.replica.Joinable(table, c.Column) {
				cells = append(cells, c)
				continue
			}
			sc, ok, err := n.replica.SnapshotFor(table, rw.Key.Partition, c.Column, joiner)
			if err != nil {
				return nil, err
			}
			if ok {
				cells = append(cells, sc)
			}
		}
		rw.Cells = cells
		out = append(out, rw) // kept when empty: the page's row count and last key stay the scan's
	}
	return out, nil
}

// prepareRange prepares every Joinable cell this replica holds of a table
// in (start, end] for a joiner (coltype.Joinable.PrepareJoin).
func (n *Node) prepareRange(table uint64, start, end int64, joiner counters.ID) error {
	var after *row.Key
	for {
		rows, err := n.replica.Scan(table, after, start, end, streamPage)
		if err != nil {
			return fmt.Errorf("node: stream prepare: %w", err)
		}
		for _, rw := range rows {
			for _, c := range rw.Cells {
				if !n.replica.Joinable(table, c.Column) {
					continue
				}
				if err := n.replica.PrepareJoin(table, rw.Key.Partition, c.Column, joiner); err != nil {
					return fmt.Errorf("node: stream prepare: %w", err)
				}
			}
		}
		if len(rows) < streamPage {
			return nil
		}
		after = &rows[len(rows)-1].Key
	}
}

// prepareJoin asks every node of to (self included, locally) to prepare
// the Joinable cells of a table's range for a joiner, trying each for a
// while; every one must answer.
func (n *Node) prepareJoin(ctx context.Context, d coltype.TableDef, r tokenRange, to []ring.Endpoint, joiner string) error {
	jid, err := hostID(joiner)
	if err != nil {
		return err
	}
	body := append(jid[:len(jid):len(jid)], binary.BigEndian.AppendUint64(nil, d.ID)...)
	body = binary.BigEndian.AppendUint64(body, uint64(r.lo))
	body = binary.BigEndian.AppendUint64(body, uint64(r.hi))
	for _, e := range to {
		if e.ID == joiner {
			continue
		}
		if e.ID == n.HostID() {
			if err := n.prepareRange(d.ID, r.lo, r.hi, jid); err != nil {
				return err
			}
			continue
		}
		var last error
		for attempt := 0; ; attempt++ {
			addr, ok := n.view.Addr(e.ID)
			if !ok {
				return fmt.Errorf("node: no address for %s", e.ID)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, last = n.tr.Request(rctx, addr, transport.Message{Type: TypeStreamPrepare, Body: body})
			cancel()
			if last == nil {
				break
			}
			if attempt == 20 {
				return fmt.Errorf("node: prepare range (%d, %d] of %s.%s on %s for %s: %w", r.lo, r.hi, d.Keyspace, d.Name, e.ID, joiner, last)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// hostID parses a host id (32 hex digits).
func hostID(s string) (counters.ID, error) {
	var id counters.ID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("node: host id %q is not 16 hex bytes", s)
	}
	copy(id[:], b)
	return id, nil
}

// staleSnapshot reports whether a (possibly remote) error is a joiner's
// refusal of a snapshot behind it (coltype.ErrStaleSnapshot).
func staleSnapshot(err error) bool {
	return errors.Is(err, coltype.ErrStaleSnapshot) || (err != nil && strings.Contains(err.Error(), coltype.StaleSnapshotMessage))
}

// anyJoinable reports whether a table of the node has a Joinable column.
func (n *Node) anyJoinable() bool {
	return slices.ContainsFunc(n.replica.Tables(), func(d coltype.TableDef) bool { return n.hasJoinable(d.ID, d) })
}

// tokenRange is a range (lo, hi] of tokens; at is the ring token that owns
// it (the range of the first ring token wraps: it is streamed as two
// ranges with the same at).
type tokenRange struct{ lo, hi, at int64 }

// ringRanges returns the ranges of a ring, the wrapping one split in two.
func ringRanges(m *ring.Metadata) []tokenRange {
	r := m.Ring()
	if len(r) == 0 {
		return nil
	}
	first, last := r[0].Token, r[len(r)-1].Token
	out := []tokenRange{{lo: ring.MinToken, hi: first, at: first}}
	for i := 1; i < len(r); i++ {
		out = append(out, tokenRange{lo: r[i-1].Token, hi: r[i].Token, at: r[i].Token})
	}
	if last != ring.MaxToken {
		out = append(out, tokenRange{lo: last, hi: ring.MaxToken, at: first})
	}
	return out
}

func hasEndpoint(es []ring.Endpoint, id string) bool {
	return slices.ContainsFunc(es, func(e ring.Endpoint) bool { return e.ID == id })
}

// refuseUnstreamable returns an error naming the first column of the
// node's tables whose type cannot be streamed to a new replica
// (coltype.Unstreamable: reset_counter and its map form), so that no range
// holding one is moved.
func (n *Node) refuseUnstreamable(what string) error {
	for _, d := range n.replica.Tables() {
		for _, c := range d.Columns {
			ct, ok := coltype.Lookup(c.Type)
			if !ok {
				continue
			}
			if u, ok := ct.(coltype.Unstreamable); ok {
				return fmt.Errorf("node: %s refused: %s.%s has %s column %s: %s; drop the table first, or (bootstrap) start with auto_bootstrap: false to join without its data",
					what, d.Keyspace, d.Name, c.Type, c.Name, u.StreamRefusal())
			}
		}
	}
	return nil
}

// probeSeeds asks the seeds for the cluster's schema before the node
// joins, merges the first answer, and reports whether it holds a table
// (then there is data to stream). No answer: no ring to join, false.
func (n *Node) probeSeeds(seeds []transport.Addr) bool {
	for _, a := range seeds {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := n.tr.Request(ctx, a, transport.Message{Type: TypeSchemaPull})
		cancel()
		if err != nil {
			continue
		}
		var d schema.Doc
		if err := json.Unmarshal(resp.Body, &d); err != nil {
			continue
		}
		if _, err := n.schema.Merge(d); err != nil {
			n.logger.Warn("bootstrap: schema merge failed", "err", err)
		}
		for id := range d.Tables {
			if !d.DroppedTables[id] {
				return true
			}
		}
		return false
	}
	return false
}

// isSeed reports whether this node is one of its own seeds.
func (n *Node) isSeed(seeds []transport.Addr) bool {
	return slices.Contains(seeds, transport.Addr(n.cfg.PeerAddr()))
}

// fileExists reports whether name exists in the data directory.
func (n *Node) fileExists(name string) bool {
	_, err := n.fsys.Stat(filepath.Join(n.cfg.DataDirectory, name))
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// confirmStatus waits until every other live node reports this node as
// want (a left node: not listed), up to limit; it returns the nodes that
// did not confirm.
func (n *Node) confirmStatus(ctx context.Context, want gossip.Status, limit time.Duration) []string {
	deadline := time.Now().Add(limit)
	self := n.HostID()
	for {
		var missing []string
		for _, p := range n.gossip.Nodes() {
			if p.HostID == self || !p.Up {
				continue
			}
			if !n.peerSees(ctx, p.Addr, self, want) {
				missing = append(missing, string(p.Addr))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return missing
		}
		select {
		case <-ctx.Done():
		case <-time.After(ms(n.cfg.GossipIntervalMS)):
		}
	}
}

// peerSees asks a peer for its view of the ring (TypeStatus) and reports
// whether it holds node id in status want.
func (n *Node) peerSees(ctx context.Context, addr transport.Addr, id string, want gossip.Status) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := n.tr.Request(ctx, addr, transport.Message{Type: TypeStatus})
	if err != nil {
		return false
	}
	var ps []PeerStatus
	if err := json.Unmarshal(resp.Body, &ps); err != nil {
		return false
	}
	for _, p := range ps {
		if p.HostID == id {
			return p.Status == string(want)
		}
	}
	return want == gossip.StatusLeft
}

// settle waits for the updates that leaders chose their replicas for
// before they learned this node's new status: their replication ends
// within the counter write timeout (then it is a hint). It is idemkv's
// counterpart of Cassandra's RING_DELAY, once every live node has confirmed
// the status.
func (n *Node) settle(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(ms(n.cfg.CounterWriteTimeoutMS)):
		return nil
	}
}

// bootstrapSchemaDelay is how long a joining node waits for the ring to
// agree on its schema before it gives up: Cassandra's default for the same
// wait (cassandra.schema_delay_ms, 30 s). A loaded ring gossips a new
// version late; a join that gave up after a couple of seconds would fail
// where a retry a moment later succeeds.
const bootstrapSchemaDelay = 30 * time.Second

// awaitBootstrapSchema pulls the schema from a ring node and waits until
// every live node gossips the same version, pulling again (at most once a
// second) from a node that gossips another one: a pull lost to a timeout
// or a schema change made meanwhile is fetched again instead of waited on.
func (n *Node) awaitBootstrapSchema(ctx context.Context, from transport.Addr) error {
	ctx, cancel := context.WithTimeout(ctx, bootstrapSchemaDelay)
	defer cancel()
	n.pullSchema(ctx, from)
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		err := n.WaitSchemaAgreement(actx)
		acancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		v := n.schema.Version()
		for _, p := range n.gossip.Nodes() {
			if p.HostID != n.HostID() && p.Up && p.SchemaVersion != "" && p.SchemaVersion != v {
				n.logger.Info("bootstrap: waiting for schema agreement", "peer", p.Addr, "its_version", p.SchemaVersion, "ours", v)
				n.pullSchema(ctx, p.Addr)
				break
			}
		}
	}
}

// afterBootstrapStream (tests) is called with a bootstrapping node once it
// has streamed every range, before it flushes and announces normal.
var afterBootstrapStream atomic.Pointer[func(*Node)]

// setStatus announces a new status and rebuilds the node's own ring view.
func (n *Node) setStatus(s gossip.Status) {
	n.gossip.UpdateSelf(func(st *gossip.NodeState) { st.Status = s })
	n.view.rebuild()
}

// bootstrap runs a joining node's bootstrap: it finds the ring, learns
// its schema, waits until every live node sends it the writes of the
// ranges it gains, streams those ranges from their current replicas,
// flushes, and announces normal.
func (n *Node) bootstrap(ctx context.Context) error {
	start := time.Now()
	wait := max(20*ms(n.cfg.GossipIntervalMS), 2*time.Second)
	var from transport.Addr
	for deadline := time.Now().Add(wait); from == "" && time.Now().Before(deadline); {
		for _, p := range n.gossip.Nodes() {
			if p.HostID != n.HostID() && p.Up && p.Status == gossip.StatusNormal {
				from = p.Addr
				break
			}
		}
		if from == "" {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(ms(n.cfg.GossipIntervalMS) / 2):
			}
		}
	}
	if from == "" {
		n.logger.Info("bootstrap: no ring found through the seeds; starting as its first node")
		return n.finishBootstrap(0)
	}
	if err := n.awaitBootstrapSchema(ctx, from); err != nil {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	if len(n.replica.Tables()) == 0 {
		n.logger.Info("bootstrap: the ring holds no tables; nothing to stream")
		return n.finishBootstrap(0)
	}
	if err := n.refuseUnstreamable("bootstrap"); err != nil {
		return err
	}
	n.logger.Info("bootstrap: joining; waiting for the ring to send this node its writes")
	cur, fut, err := n.movementRings(ctx, "bootstrap", gossip.StatusJoining)
	if err != nil {
		return err
	}
	self := n.HostID()
	ranges := 0
	for _, d := range n.replica.Tables() {
		s, err := n.schema.Strategy(d.ID)
		if err != nil {
			continue // dropped meanwhile
		}
		before, tableRanges := n.StreamStats(), 0
		for _, r := range ringRanges(fut) {
			if !hasEndpoint(s.Replicas(fut, r.at), self) {
				continue
			}
			var sources []ring.Endpoint
			for _, e := range s.Replicas(cur, r.at) {
				if e.ID != self && n.view.IsUp(e.ID) {
					sources = append(sources, e)
				}
			}
			if len(sources) == 0 {
				return fmt.Errorf("node: bootstrap: no live replica of range (%d, %d] of %s.%s to stream from", r.lo, r.hi, d.Keyspace, d.Name)
			}
			joinable := n.hasJoinable(d.ID, d)
			if joinable {
				// Every current replica prepares its cells before any
				// snapshot of them is taken.
				if err := n.prepareJoin(ctx, d, r, s.Replicas(cur, r.at), self); err != nil {
					return fmt.Errorf("node: bootstrap: %w", err)
				}
			}
			if err := n.pullRange(ctx, d, r, sources, joinable); err != nil {
				return err
			}
			ranges++
			tableRanges++
			n.stream.rangesIn.Add(1)
		}
		after := n.StreamStats()
		n.logger.Info("bootstrap: table streamed", "keyspace", d.Keyspace, "table", d.Name, "ranges", tableRanges,
			"rows", after.RowsIn-before.RowsIn, "bytes", after.BytesIn-before.BytesIn)
	}
	if fn := afterBootstrapStream.Load(); fn != nil {
		(*fn)(n)
	}
	if err := n.replica.FlushAll(); err != nil {
		return fmt.Errorf("node: bootstrap: flush: %w", err)
	}
	st := n.StreamStats()
	n.logger.Info("bootstrap: streamed", "ranges", ranges, "rows", st.RowsIn, "cells", st.CellsIn, "bytes", st.BytesIn, "took", time.Since(start))
	return n.finishBootstrap(ranges)
}

// finishBootstrap marks the bootstrap done and announces normal.
func (n *Node) finishBootstrap(ranges int) error {
	if err := n.fsys.Remove(filepath.Join(n.cfg.DataDirectory, bootstrapFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	n.setStatus(gossip.StatusNormal)
	n.logger.Info("bootstrap complete: normal", "ranges", ranges)
	return nil
}

// pullRange streams one range of a table from the first source that
// serves it, page by page; joinable: the table has Joinable columns, whose
// snapshots for this node the pages carry (TypeStreamPullFor).
func (n *Node) pullRange(ctx context.Context, d coltype.TableDef, r tokenRange, sources []ring.Endpoint, joinable bool) error {
	var after *row.Key
	var last error
	typ, prefix := TypeStreamPull, []byte(nil)
	if joinable {
		self, err := hostID(n.HostID())
		if err != nil {
			return err
		}
		typ, prefix = TypeStreamPullFor, self[:]
	}
	stale := 0
	for attempt := 0; attempt < 50*len(sources); attempt++ {
		e := sources[attempt%len(sources)]
		addr, ok := n.view.Addr(e.ID)
		if !ok {
			continue
		}
		for {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := n.tr.Request(rctx, addr, transport.Message{Type: typ,
				Body: append(slices.Clone(prefix), encodePull(pullRequest{table: d.ID, start: r.lo, end: r.hi, limit: streamPage, after: after})...)})
			cancel()
			if err != nil {
				last = err
				break
			}
			bt, err := decodeBatch(resp.Body)
			if err != nil {
				return fmt.Errorf("node: bootstrap: from %s: %w", addr, err)
			}
			if err := n.applyBatch(bt, len(resp.Body)); err != nil {
				if !staleSnapshot(err) || stale >= 200 {
					return err
				}
				// The source is behind this node on some cell: it is
				// asked again for the same page.
				stale++
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			if bt.rows < streamPage {
				return nil
			}
			after = &row.Key{Token: ring.Token(bt.last), Partition: bt.last}
		}
		n.logger.Debug("bootstrap: stream pull failed; trying again", "from", addr, "err", last)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("node: bootstrap: range (%d, %d] of %s.%s: %w", r.lo, r.hi, d.Keyspace, d.Name, last)
}

// ErrDecommissionRefused wraps the reasons a decommission is refused
// before it starts.
var ErrDecommissionRefused = errors.New("decommission refused")

// Decommission removes the node from the ring as nodetool decommission
// does: it announces leaving, waits until every live node sends the
// writes of its ranges to the nodes that take them over as well, streams
// every range it replicates to those nodes (which flush them), announces
// left, and stops serving (the admin endpoint stays up until Stop). The
// data directory is marked: the node refuses to start again from it. It is
// refused, before anything changes, when the node is not normal, when no
// other node is in the ring, or when a keyspace's replication factor would
// exceed the nodes left (Cassandra's messages).
func (n *Node) Decommission(ctx context.Context) error {
	if err := n.checkDecommission(); err != nil {
		return err
	}
	if err := n.refuseUnstreamable("decommission"); err != nil {
		return fmt.Errorf("%w: %w", ErrDecommissionRefused, err)
	}
	start := time.Now()
	n.setStatus(gossip.StatusLeaving)
	n.logger.Info("decommission: leaving; waiting for the ring to send the new replicas the writes")
	joinable := n.anyJoinable()
	cur, fut, err := n.movementRings(ctx, "decommission", gossip.StatusLeaving)
	if err != nil {
		return err
	}
	self := n.HostID()
	targets := map[string]bool{}
	for _, d := range n.replica.Tables() {
		s, err := n.schema.Strategy(d.ID)
		if err != nil {
			continue
		}
		before := n.StreamStats()
		for _, r := range ringRanges(cur) {
			now := s.Replicas(cur, r.at)
			if !hasEndpoint(now, self) {
				continue
			}
			var to []ring.Endpoint
			for _, e := range s.Replicas(fut, r.at) {
				if !hasEndpoint(now, e.ID) {
					to = append(to, e)
					targets[e.ID] = true
				}
			}
			if len(to) == 0 {
				continue
			}
			tj := n.hasJoinable(d.ID, d)
			if tj && n.skipJoinable {
				continue
			}
			if tj {
				for _, e := range to {
					if err := n.prepareJoin(ctx, d, r, now, e.ID); err != nil {
						return fmt.Errorf("node: decommission: %w", err)
					}
				}
			}
			if err := n.pushRange(ctx, d, r, to, tj); err != nil {
				return err
			}
			n.stream.rangesOut.Add(1)
		}
		after := n.StreamStats()
		n.logger.Info("decommission: table streamed", "keyspace", d.Keyspace, "table", d.Name, "ranges", after.RangesOut-before.RangesOut,
			"rows", after.RowsOut-before.RowsOut, "bytes", after.BytesOut-before.BytesOut)
	}
	for id := range targets {
		if err := n.push(ctx, id, flagFlush, nil, 0); err != nil {
			return fmt.Errorf("node: decommission: flush on %s: %w", id, err)
		}
	}
	st := n.StreamStats()
	n.logger.Info("decommission: streamed", "ranges", st.RangesOut, "rows", st.RowsOut, "cells", st.CellsOut, "bytes", st.BytesOut, "took", time.Since(start))
	// Hints this node holds go out before it leaves.
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = n.hints.Deliver(hctx, n.view, n.tr)
	cancel()
	if err := vfs.WriteFileAtomic(n.fsys, n.cfg.DataDirectory, decommissionedFile, []byte("decommissioned\n")); err != nil {
		return fmt.Errorf("node: decommission: %w", err)
	}
	n.setStatus(gossip.StatusLeft)
	if missing := n.confirmStatus(ctx, gossip.StatusLeft, 10*time.Second); len(missing) > 0 {
		n.logger.Warn("decommission: nodes did not confirm the left status", "nodes", missing)
	}
	if joinable {
		// The ops this node led must reach every replica (the new owners
		// included) before it goes: it leads no more once the others see
		// it left and its last leads are replicated (settle), and its
		// anti-entropy runs until every peer acknowledged them.
		if err := n.settle(ctx); err != nil {
			return err
		}
		if err := n.drainJoinable(ctx, 20*time.Second); err != nil {
			return fmt.Errorf("node: decommission: %w", err)
		}
	}
	n.logger.Info("decommissioned", "took", time.Since(start))
	return n.Drain(ctx)
}

// checkDecommission refuses a decommission as Cassandra's
// StorageService.decommission does.
func (n *Node) checkDecommission() error {
	if st := n.gossip.Self().Status; st != gossip.StatusNormal {
		return fmt.Errorf("%w: Node in %s state; wait for status to become normal or restart", ErrDecommissionRefused, st)
	}
	m := n.view.Metadata()
	if m == nil || len(m.Endpoints()) < 2 {
		return fmt.Errorf("%w: no other normal nodes in the ring; decommission would be pointless", ErrDecommissionRefused)
	}
	doc := n.schema.Doc()
	names := make([]string, 0, len(doc.Keyspaces))
	for name := range doc.Keyspaces {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		k := doc.Keyspaces[name]
		s, err := ring.ParseStrategy(k.Class, k.Options)
		if err != nil {
			continue
		}
		rf, nodes := s.ReplicationFactor(), len(m.Endpoints())
		if _, ok := s.(ring.NetworkTopologyStrategy); ok {
			rf, nodes = ring.DCFactor(s, n.cfg.DC), m.DataCenters()[n.cfg.DC]
		}
		if rf > 0 && nodes <= rf {
			return fmt.Errorf("%w: Not enough live nodes to maintain replication factor in keyspace %s (RF = %d, N = %d). Perform a forceful decommission to ignore",
				ErrDecommissionRefused, name, rf, nodes)
		}
	}
	return nil
}

// drainJoinable waits until the Joinable columns' outboxes to the nodes
// of the ring are empty (every op this node generated acknowledged by
// every replica), up to limit.
func (n *Node) drainJoinable(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var peers []counters.ID
		if m := n.view.Metadata(); m != nil {
			for _, e := range m.Endpoints() {
				if id, err := hostID(e.ID); err == nil && e.ID != n.HostID() {
					peers = append(peers, id)
				}
			}
		}
		held, err := n.replica.JoinablePending(peers)
		if err == nil && held == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d ops not acknowledged by their replicas after %v (err %v)", held, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pushSnapshots sends one range of a table with Joinable columns to a new
// owner, page by page, each page's Joinable cells the snapshots this node
// makes for it, taken again when the owner finds one behind it.
func (n *Node) pushSnapshots(ctx context.Context, d coltype.TableDef, r tokenRange, e ring.Endpoint) error {
	jid, err := hostID(e.ID)
	if err != nil {
		return err
	}
	var after *row.Key
	for stale := 0; ; {
		rows, err := n.replica.Scan(d.ID, after, r.lo, r.hi, streamPage)
		if err != nil {
			return fmt.Errorf("node: decommission: scan %s.%s: %w", d.Keyspace, d.Name, err)
		}
		srows, err := n.snapshotRows(d.ID, rows, jid)
		if err != nil {
			return fmt.Errorf("node: decommission: %w", err)
		}
		b, cells := encodeBatch(0, srows, d.ID)
		if err := n.push(ctx, e.ID, 0, b, len(rows)); err != nil {
			if !staleSnapshot(err) || stale >= 200 {
				return fmt.Errorf("node: decommission: range (%d, %d] of %s.%s to %s: %w", r.lo, r.hi, d.Keyspace, d.Name, e.ID, err)
			}
			stale++
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		n.stream.cellsOut.Add(uint64(cells))
		if len(rows) < streamPage {
			return nil
		}
		after = &rows[len(rows)-1].Key
	}
}

// pushRange sends one range of a local table to the nodes that take it
// over, page by page (joinable: the table has Joinable columns, see
// pushSnapshots).
func (n *Node) pushRange(ctx context.Context, d coltype.TableDef, r tokenRange, to []ring.Endpoint, joinable bool) error {
	if joinable {
		for _, e := range to {
			if err := n.pushSnapshots(ctx, d, r, e); err != nil {
				return err
			}
		}
		return nil
	}
	var after *row.Key
	for {
		rows, err := n.replica.Scan(d.ID, after, r.lo, r.hi, streamPage)
		if err != nil {
			return fmt.Errorf("node: decommission: scan %s.%s: %w", d.Keyspace, d.Name, err)
		}
		b, cells := encodeBatch(0, rows, d.ID)
		for _, e := range to {
			if err := n.push(ctx, e.ID, 0, b, len(rows)); err != nil {
				return fmt.Errorf("node: decommission: range (%d, %d] of %s.%s to %s: %w", r.lo, r.hi, d.Keyspace, d.Name, e.ID, err)
			}
			n.stream.cellsOut.Add(uint64(cells))
		}
		if len(rows) < streamPage {
			return nil
		}
		after = &rows[len(rows)-1].Key
	}
}

// push sends one batch (nil: an empty one with flags) to a node, trying
// again for a while when it fails.
func (n *Node) push(ctx context.Context, id string, flags uint8, b []byte, rows int) error {
	if b == nil {
		b, _ = encodeBatch(flags, nil, 0)
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		addr, ok := n.view.Addr(id)
		if !ok {
			return fmt.Errorf("node: no address for %s", id)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = n.tr.Request(rctx, addr, transport.Message{Type: TypeStreamPush, Body: b})
		cancel()
		if err == nil {
			n.stream.rowsOut.Add(uint64(rows))
			n.stream.bytesOut.Add(uint64(len(b)))
			return nil
		}
		if staleSnapshot(err) {
			return err // the caller takes new snapshots
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}

// movementRings waits until the live nodes confirm this node's status of a
// range movement (joining, leaving), lets in-flight writes settle, and
// returns the ring now and once the movement completes. A node that does
// not confirm is tolerated (logged) unless a table has a column a new
// replica adopts: a leader that does not know of the movement would not
// address its ops to the new replica (docs/reset-counter.md).
func (n *Node) movementRings(ctx context.Context, what string, status gossip.Status) (cur, fut *ring.Metadata, err error) {
	if missing := n.confirmStatus(ctx, status, 30*time.Second); len(missing) > 0 {
		if n.anyJoinable() {
			return nil, nil, fmt.Errorf("node: %s: nodes %v did not confirm the %s status, and a table has a column a new replica adopts", what, missing, status)
		}
		n.logger.Warn(what+": nodes did not confirm the "+string(status)+" status; streaming anyway", "nodes", missing)
	}
	if err := n.settle(ctx); err != nil {
		return nil, nil, err
	}
	cur, fut = n.view.Rings()
	if fut == nil {
		return nil, nil, fmt.Errorf("node: %s: this node's movement is not in the ring's future view", what)
	}
	return cur, fut, nil
}
