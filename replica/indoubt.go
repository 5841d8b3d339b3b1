package replica

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/vfs"
)

// In-doubt updates.
//
// An FBF leader applies an update, logs it and replicates it. If it dies
// before any other replica has the op id, the client's retry can reach
// another replica as leader, whose filter has never seen the id, and be
// counted there too; when the first leader comes back its shard holds the
// first application and the counter has counted the update twice. The
// paper leaves this case open. idemkv closes it at the first leader's
// restart: every update it led in the last moments before an unclean stop
// (within twice the counter write timeout of the last one: any older
// update's replication had ended, acknowledged or hinted), and every
// update whose hint still waits, is *in doubt* until every natural replica
// of its cell has said
// whether another leader counted the same op; a cell with an update in
// doubt is neither read nor led here until then (coltype.ErrInDoubt), so that the
// leader's old shard cannot reach another replica and blur the evidence.
//
// Each replica answers from what it holds (coltype.OpAnswer): whether its filter
// has the op id, its copy of the cell, and whether it led the op itself and
// in which shard at which clock. Another leader's counted replication of
// the op that reaches this node while it holds the op in doubt (a retry's)
// is evidence too, kept with the doubt (ApplyCounted, coltype.InDoubtOp's
// CountedBy). The update stays counted unless another
// leader counted it too (coltype.Decide); if so, the restarted leader takes its
// delta back under its current counter id with a compensation record in its
// commit log, which a later restart reads as the decision. When two
// restarted leaders hold the same op in doubt at once, the one with the
// lower counter id keeps it. Every led record carries its delta (commitlog's
// led flag) so that the compensation is exact.
//
// An answer that settles an update alone (coltype.DecideEarly) settles it
// at once, with the replicas the leader can reach; keeping one needs every
// answer. A replica keeps what it answered a settling leader (OpSettle)
// until the decision arrives, beyond its filter window.
//
// What remains: the evidence is a Bloom filter, so a false positive at
// another replica can take back a real update (with the filter's
// false-positive probability, as a dismissed fresh update already is); and
// if a leader's replication reached another replica only after that replica
// had counted a retry of the same op (a delivery delayed past the client's
// timeout), the answers cannot tell the two apart and the update counts
// twice, as it would without any crash.

type ledKey struct {
	table  uint64
	column string
	key    string
	op     [16]byte
}

type cellRef struct {
	table uint64
	key   string
}

type ledOp struct {
	coltype.InDoubtOp
	status coltype.OpStatus
	// settledUntil (unix ns) keeps an op this node settled (ResolveInDoubt)
	// past the filter window, as long as evidence pins last: another
	// leader may still hold the same op in doubt and must hear that this
	// one kept it (coltype.DecideEarly's first rule), not "not led".
	settledUntil int64
}

// expiringOps is a set of ops on cells, each until its expiry: the
// reservations (ops another leader is settling: it asked this replica about
// them and the filter had not seen them, so this replica leads none of them
// until the asker's decision arrives, a mutation with the op id, or the
// reservation expires, and a retry cannot be counted here between the
// question and the decision) and the ops taken back (conflict.go).
type expiringOps struct {
	n  atomic.Int64 // len(m); 0 makes the checks free
	mu sync.Mutex
	m  map[ledKey]int64 // expiry, unix nanoseconds
}

// add puts an op in the set until at least until.
func (e *expiringOps) add(k ledKey, until int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[ledKey]int64{}
	}
	e.m[k] = max(e.m[k], until)
	e.n.Store(int64(len(e.m)))
}

// claim puts an op in the set until until, and reports false if it was
// there already.
func (e *expiringOps) claim(k ledKey, now, until int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expire(now)
	if _, ok := e.m[k]; ok {
		return false
	}
	if e.m == nil {
		e.m = map[ledKey]int64{}
	}
	e.m[k] = until
	e.n.Store(int64(len(e.m)))
	return true
}

// has reports whether an op is in the set at now.
func (e *expiringOps) has(k ledKey, now int64) bool {
	if e.n.Load() == 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expire(now)
	_, ok := e.m[k]
	return ok
}

// remove takes an op out of the set.
func (e *expiringOps) remove(k ledKey) {
	if e.n.Load() == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, k)
	e.n.Store(int64(len(e.m)))
}

// expire drops the ops expired at now; e.mu is held.
func (e *expiringOps) expire(now int64) {
	for o, until := range e.m {
		if until <= now {
			delete(e.m, o)
		}
	}
	e.n.Store(int64(len(e.m)))
}

// ledOps are the updates this replica led within the filter window before
// its last start, as its commit log shows them, with their status, and
// those its in_doubt file holds in doubt.
type ledOps struct {
	pending atomic.Int64 // ops in coltype.OpPending; 0 makes the checks free
	mu      sync.Mutex
	ops     map[ledKey]*ledOp
	cells   map[cellRef]int // pending ops per partition
	// covered is, per counter id, the highest clock of its led ops whose
	// doubt the in_doubt file accounts for (see inDoubtFile).
	covered map[counters.ID]int64
	// dirty: the pending ops changed since the file was last written.
	dirty bool
	// saveMu serialises the writers of the file.
	saveMu sync.Mutex
	// lastExpire is when expireLedOps last swept ops (unix ns; under mu).
	lastExpire int64
}

// remember records a led record found at replay.
func (l *ledOps) remember(rec commitlog.Record) error {
	s, err := ledShard(rec)
	if err != nil {
		return err
	}
	l.rememberOp(rec, s.ID, commitlog.CarriedOp{OpID: rec.OpID, OpTime: rec.OpTime, Delta: rec.Delta, Clock: s.Clock, Compensation: rec.Compensation})
	return nil
}

// ledShard is the leader's shard a led record holds, its only one.
func ledShard(rec commitlog.Record) (counters.Shard, error) {
	ctx, err := counters.Decode(rec.Payload)
	if err != nil {
		return counters.Shard{}, err
	}
	shards := ctx.Shards()
	if len(shards) != 1 {
		return counters.Shard{}, fmt.Errorf("led record holds %d shards, want the leader's one", len(shards))
	}
	return shards[0], nil
}

// rememberCarried remembers the ops a led record carries (ops of the same
// shard logged after it, if at all; see commitlog.Record.Carried) that are
// younger than window at now.
func (l *ledOps) rememberCarried(rec commitlog.Record, now time.Time, window time.Duration) error {
	if len(rec.Carried) == 0 {
		return nil
	}
	s, err := ledShard(rec)
	if err != nil {
		return err
	}
	for _, o := range rec.Carried {
		if now.Sub(time.Unix(0, o.OpTime)) < window {
			l.rememberOp(rec, s.ID, o)
		}
	}
	return nil
}

// rememberOp remembers one op this node led, of rec's cell, under counter
// id: counted, or taken back (o.Compensation).
func (l *ledOps) rememberOp(rec commitlog.Record, id counters.ID, o commitlog.CarriedOp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops == nil {
		l.ops, l.cells = map[ledKey]*ledOp{}, map[cellRef]int{}
	}
	k := ledKey{rec.Table, rec.Column, string(rec.Key), o.OpID}
	op, ok := l.ops[k]
	if o.Compensation {
		if ok && op.status == coltype.OpPending {
			l.unpend(op)
		}
		if !ok {
			op = &ledOp{InDoubtOp: coltype.InDoubtOp{Table: rec.Table, Key: rec.Key, Column: rec.Column, OpID: o.OpID, OpTime: o.OpTime}}
			l.ops[k] = op
		}
		op.status = coltype.OpDropped
		// Answered for as long as a settlement is (settledUntil), from
		// when it was taken back (the record's timestamp), not one window
		// from the op: another leader of the op may ask later.
		if rec.Timestamp > 0 {
			op.settledUntil = max(op.settledUntil, time.UnixMicro(rec.Timestamp).Add(settleEvidenceLifetime).UnixNano())
		}
		return
	}
	if ok {
		return // a second led record of one op: the first one counted it
	}
	l.ops[k] = &ledOp{InDoubtOp: coltype.InDoubtOp{Table: rec.Table, Key: rec.Key, Column: rec.Column, OpID: o.OpID, OpTime: o.OpTime,
		CounterID: id, Clock: o.Clock, Delta: o.Delta}, status: coltype.OpKept}
}

// afterReplay puts in doubt, once the commit log is replayed, the updates
// the in_doubt file holds in doubt (f; empty without a file) and, after an
// unclean stop, the led ops whose replication may have been under way when
// the node stopped and that the file does not account for: those led
// within span of the last one of their run (their counter id). An older
// op's replication had ended before the stop, acknowledged by every
// replica or failed into a hint, and a queued hint puts its op in doubt at
// start-up (MarkInDoubt). The span is per run, and the file decides for the
// ops it accounts for: an op a run held in doubt without settling it (a
// replica of its cell was down) stays in doubt at the next start whatever
// that run led later, and however long ago it was led (its record may be
// gone from the log), while the ops of an earlier run that were settled
// and kept are not asked about again (keeping is not logged). Without a
// file (a data directory of an earlier version) every run's last ops are
// put back in doubt.
func (l *ledOps) afterReplay(f inDoubtState, unclean bool, span time.Duration, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops == nil {
		l.ops, l.cells = map[ledKey]*ledOp{}, map[cellRef]int{}
	}
	for _, op := range f.ops {
		k := ledKey{op.Table, op.Column, string(op.Key), op.OpID}
		e, ok := l.ops[k]
		if !ok {
			// Led longer ago than the log keeps.
			e = &ledOp{InDoubtOp: op, status: coltype.OpKept}
			l.ops[k] = e
		}
		e.identify(op)
		if e.status == coltype.OpKept { // a compensation in the log settled it (OpDropped)
			e.CountedBy = op.CountedBy
			l.pend(e)
		}
	}
	if unclean {
		last := map[counters.ID]int64{}
		for _, op := range l.ops {
			last[op.CounterID] = max(last[op.CounterID], op.OpTime)
		}
		for _, op := range l.ops {
			if c, ok := f.covered[op.CounterID]; ok && op.Clock <= c {
				continue // the file decided
			}
			if op.status == coltype.OpKept && op.OpTime >= last[op.CounterID]-span.Nanoseconds() {
				l.pend(op)
			}
		}
	}
	// The updates an earlier run settled keep their decisions for as long
	// as the file says (see settledUntil), unless in doubt again.
	for _, o := range f.settled {
		if o.until <= now.UnixNano() {
			continue
		}
		k := ledKey{o.op.Table, o.op.Column, string(o.op.Key), o.op.OpID}
		e, ok := l.ops[k]
		if !ok {
			e = &ledOp{InDoubtOp: o.op}
			l.ops[k] = e
		}
		e.identify(o.op)
		if e.status == coltype.OpPending {
			continue
		}
		if e.status != coltype.OpDropped { // a compensation in the log decided it
			e.status = coltype.OpDropped
			if o.kept {
				e.status = coltype.OpKept
			}
		}
		e.settledUntil = max(e.settledUntil, o.until)
	}
	// From now on the file accounts for every op replayed.
	l.covered = map[counters.ID]int64{}
	for _, op := range l.ops {
		if op.CounterID == (counters.ID{}) {
			continue // a compensation's entry: no led record
		}
		c, ok := l.covered[op.CounterID]
		if !ok {
			c = f.covered[op.CounterID]
		}
		l.covered[op.CounterID] = max(c, op.Clock)
	}
	l.dirty = true
}

// identify gives an op known only from its compensation record (replayed
// past the op's window: the record names the op, not the shard and clock
// that counted it) the shard, clock and delta the in_doubt file holds for
// it, so that this node's answers about it name the leader that counted
// it: a replica's copy of the cell holding that shard then explains the
// op id to a leader that asks (coltype.Decide's fourth rule). Without them
// it answered "dropped" under no counter id, and the other leader of the
// op took its own application back too (TestRandomCluster, batch).
func (e *ledOp) identify(op coltype.InDoubtOp) {
	if e.CounterID != (counters.ID{}) || op.CounterID == (counters.ID{}) {
		return
	}
	e.CounterID, e.Clock, e.Delta = op.CounterID, op.Clock, op.Delta
	if e.OpTime == 0 {
		e.OpTime = op.OpTime
	}
}

// pend puts an op in doubt; l.mu is held.
func (l *ledOps) pend(op *ledOp) {
	op.status = coltype.OpPending
	l.cells[cellRef{op.Table, string(op.Key)}]++
	l.pending.Add(1)
	l.dirty = true
}

// snapshot returns what the in_doubt file should hold now, and clears
// dirty; l.mu is not held.
func (l *ledOps) snapshot(now time.Time) inDoubtState {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := inDoubtState{covered: maps.Clone(l.covered)}
	for _, op := range l.ops {
		switch {
		case op.status == coltype.OpPending:
			o := op.InDoubtOp
			o.CountedBy = slices.Clone(o.CountedBy)
			s.ops = append(s.ops, o)
		case op.settledUntil > now.UnixNano():
			s.settled = append(s.settled, settledOp{op: op.InDoubtOp, kept: op.status == coltype.OpKept, until: op.settledUntil})
		}
	}
	l.dirty = false
	return s
}

// SaveInDoubt writes the updates in doubt to the in_doubt file if they
// changed since it was last written, after syncing the commit log (an
// update the file no longer lists must have its compensation, if any,
// durable). The coordinator calls it after each round of settlements;
// Open and a clean Close write the file too. A crash before it leaves the
// file listing updates settled since, which the next start asks about
// again: a compensation in the log settles them, and kept ones are kept
// again.
func (r *Replica) SaveInDoubt() error {
	l := &r.led
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	l.mu.Lock()
	dirty := l.dirty
	l.mu.Unlock()
	if !dirty {
		return nil
	}
	if err := r.log.Sync(); err != nil {
		return fmt.Errorf("replica: sync the commit log before writing %s: %w", inDoubtFile, err)
	}
	s := l.snapshot(r.cfg.Now())
	if err := vfs.WriteFileAtomic(r.cfg.FS, r.cfg.Dir, inDoubtFile, encodeInDoubt(s)); err != nil {
		l.mu.Lock()
		l.dirty = true
		l.mu.Unlock()
		return fmt.Errorf("replica: write %s: %w", inDoubtFile, err)
	}
	return nil
}

func (l *ledOps) unpend(op *ledOp) {
	c := cellRef{op.Table, string(op.Key)}
	if l.cells[c]--; l.cells[c] <= 0 {
		delete(l.cells, c)
	}
	l.pending.Add(-1)
	l.dirty = true
}

// inDoubt reports whether a partition holds a pending op.
func (l *ledOps) inDoubt(table uint64, key []byte) bool {
	if l.pending.Load() == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cells[cellRef{table, string(key)}] > 0
}

// MarkInDoubt puts an update this node led, recorded in its recent log
// and counted, back in doubt: the node was stopped cleanly but the
// update's replication to some replica was never confirmed (a hint for it
// is still queued), so a retry may have been counted elsewhere meanwhile.
// It reports whether the op was found.
func (r *Replica) MarkInDoubt(table uint64, key []byte, column string, opID [16]byte) bool {
	l := &r.led
	l.mu.Lock()
	defer l.mu.Unlock()
	op, ok := l.ops[ledKey{table, column, string(key), opID}]
	if !ok || op.status != coltype.OpKept {
		return ok && op.status == coltype.OpPending
	}
	l.pend(op)
	return true
}

// InDoubt lists the updates this node led before an unclean stop that are
// not resolved yet, oldest first.
func (r *Replica) InDoubt() []coltype.InDoubtOp {
	l := &r.led
	if l.pending.Load() == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []coltype.InDoubtOp
	for _, op := range l.ops {
		if op.status == coltype.OpPending {
			o := op.InDoubtOp
			o.CountedBy = slices.Clone(o.CountedBy)
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b coltype.InDoubtOp) int {
		if c := cmp.Compare(a.OpTime, b.OpTime); c != 0 {
			return c
		}
		return bytes.Compare(a.OpID[:], b.OpID[:])
	})
	return out
}

// pendingOp reports whether an op on a cell is one of the pending ones.
func (l *ledOps) pendingOp(table uint64, key []byte, column string, opID [16]byte) bool {
	if l.pending.Load() == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	op, ok := l.ops[ledKey{table, column, string(key), opID}]
	return ok && op.status == coltype.OpPending
}

// FilterIncomplete reports whether an FBF column's filter may lack op ids
// this node had acknowledged: for one filter window after an unclean start
// with a periodic-mode commit log, whose last period a power cut loses
// while the other replicas hold what it replicated. A leader then asks the
// other replicas about an op its filter misses before it counts it (see
// package coordinator).
func (r *Replica) FilterIncomplete(table uint64, column string) bool {
	if !r.unclean || r.cfg.CommitLog.Sync != commitlog.SyncPeriodic {
		return false
	}
	t, err := r.table(table)
	if err != nil {
		return false
	}
	d, ok := t.dedup(column)
	return ok && r.cfg.Now().Sub(r.openedAt) < d.Window()
}

// DedupWindow returns how long a column's filter remembers an op id, or
// false for a column that does not deduplicate.
func (r *Replica) DedupWindow(table uint64, column string) (time.Duration, bool) {
	t, err := r.table(table)
	if err != nil {
		return 0, false
	}
	d, ok := t.dedup(column)
	if !ok {
		return 0, false
	}
	return d.Window(), true
}

// OpSeen reports whether an FBF column's filter holds an op id, without
// adding it.
func (r *Replica) OpSeen(table uint64, key []byte, column string, opID [16]byte) bool {
	t, err := r.table(table)
	if err != nil {
		return false
	}
	d, ok := t.dedup(column)
	return ok && d.OpSeen(key, opID)
}

// CellInDoubt reports whether a partition of a table holds an update in
// doubt (see coltype.ErrInDoubt).
func (r *Replica) CellInDoubt(table uint64, key []byte) bool { return r.led.inDoubt(table, key) }

// coltype.OpStatus answers another replica's question about an op on one cell: see
// coltype.OpAnswer. It does not add the op id to the filter; when the filter has
// not seen it, this replica reserves the op for the asker: it leads no
// retry of it (coltype.ErrOpInDoubt) until a mutation with the op id arrives (the
// asker's decision) or twice the counter write timeout has passed.
func (r *Replica) OpStatus(table uint64, key []byte, column string, opID [16]byte) (coltype.OpAnswer, error) {
	return r.opStatus(table, key, column, opID, true)
}

// OpPeek is OpStatus without the reservation: for a leader that only
// checks whether another replica has seen an op before it leads it (a
// change in the live replicas may have sent an earlier attempt elsewhere),
// whose failure must not keep the other replicas from leading the op.
func (r *Replica) OpPeek(table uint64, key []byte, column string, opID [16]byte) (coltype.OpAnswer, error) {
	return r.opStatus(table, key, column, opID, false)
}

// OpSettle is OpStatus for a leader settling an update it holds in doubt
// (see package coordinator): besides reserving the op, this replica keeps
// what its answer shows of the op (its filter has the id; it led the op,
// in which shard at which clock) until the asker's decision arrives (a
// mutation with the op id) or settleEvidenceLifetime has passed, and gives
// it in its later answers although its filter and its record of the ops
// it led forget the op after one window. The asker may have to wait for
// another natural replica for longer than that (a replica down, its own
// restarts), and without this evidence it would keep an update another
// leader counted. The evidence is kept in memory: a restart of this replica
// loses it.
func (r *Replica) OpSettle(table uint64, key []byte, column string, opID [16]byte) (coltype.OpAnswer, error) {
	a, err := r.opStatus(table, key, column, opID, true)
	if err != nil {
		return a, err
	}
	r.pins.pin(ledKey{table, column, string(key), opID}, a, r.cfg.Now())
	return a, nil
}

// settleEvidenceLifetime bounds how long a replica keeps the evidence its
// answers to a settling leader showed (OpSettle): as long as a hint waits
// for a node by default (Cassandra's max_hint_window), after which the
// settling leader's decision would not reach a replica that missed it
// either.
const settleEvidenceLifetime = 3 * time.Hour

// evidencePins are what this replica's answers to settling leaders showed
// of their ops (OpSettle), per op on a cell.
type evidencePins struct {
	n         atomic.Int64 // len(m); 0 makes the lookups free
	mu        sync.Mutex
	m         map[ledKey]pinnedAnswer
	lastSweep int64
}

type pinnedAnswer struct {
	until     int64 // unix nanoseconds
	seen      bool
	status    coltype.OpStatus
	counterID counters.ID
	clock     int64
}

// pin keeps the evidence of an answer: the op id seen, or the op led here.
func (p *evidencePins) pin(k ledKey, a coltype.OpAnswer, now time.Time) {
	if !a.Seen && a.Status == coltype.OpNotLed {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[ledKey]pinnedAnswer{}
	}
	ns := now.UnixNano()
	if ns-p.lastSweep > time.Minute.Nanoseconds() {
		p.lastSweep = ns
		maps.DeleteFunc(p.m, func(_ ledKey, e pinnedAnswer) bool { return e.until <= ns })
	}
	e := p.m[k]
	e.until = now.Add(settleEvidenceLifetime).UnixNano()
	e.seen = e.seen || a.Seen
	if a.Status != coltype.OpNotLed {
		e.status, e.counterID, e.clock = a.Status, a.CounterID, a.Clock
	}
	p.m[k] = e
	p.n.Store(int64(len(p.m)))
}

// apply adds what was pinned of an op to an answer that no longer shows it.
func (p *evidencePins) apply(k ledKey, a *coltype.OpAnswer, now int64) {
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	e, ok := p.m[k]
	p.mu.Unlock()
	if !ok || e.until <= now {
		return
	}
	a.Seen = a.Seen || e.seen
	if a.Status == coltype.OpNotLed && e.status != coltype.OpNotLed {
		a.Status, a.CounterID, a.Clock = e.status, e.counterID, e.clock
	}
}

// release forgets the evidence of an op: the settling leader's decision
// has arrived.
func (p *evidencePins) release(k ledKey) {
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, k)
	p.n.Store(int64(len(p.m)))
}

func (r *Replica) opStatus(table uint64, key []byte, column string, opID [16]byte, reserve bool) (coltype.OpAnswer, error) {
	t, err := r.table(table)
	if err != nil {
		return coltype.OpAnswer{}, err
	}
	var a coltype.OpAnswer
	if d, ok := t.dedup(column); ok {
		r.expireLedOps(d.Window())
		a.Seen = r.OpSeen(table, key, column, opID)
	}
	k := ledKey{table, column, string(key), opID}
	r.led.mu.Lock()
	if op, ok := r.led.ops[k]; ok {
		a.Status, a.CounterID, a.Clock = op.status, op.CounterID, op.Clock
	}
	r.led.mu.Unlock()
	ledNow := a.Status == coltype.OpNotLed && r.ledNow.find(table, column, key, opID, r.cfg.Now().UnixNano())
	if !a.Seen && reserve {
		r.reserved.add(k, r.cfg.Now().Add(2*r.cfg.CounterWriteTimeout).UnixNano())
	}
	rw, found, err := t.read(row.Key{Token: ring.Token(key), Partition: key})
	if err != nil {
		return coltype.OpAnswer{}, err
	}
	if found {
		a.Cell, a.Found = rw.Cell(column)
	}
	if ledNow {
		// Led by this run: counted in its current shard, whose clock in the
		// cell is at or past the op's.
		a.Status, a.CounterID = coltype.OpKept, r.counterIDs.current
		if r.taken.has(k, r.cfg.Now().UnixNano()) {
			// Taken back since: another leader counts it (conflict.go).
			a.Status = coltype.OpDropped
		}
		if a.Found && !a.Cell.Tombstone {
			if ctx, err := counters.Decode(a.Cell.Value); err == nil {
				a.Clock, _ = ctx.ClockAndCount(a.CounterID)
			}
		}
	}
	r.pins.apply(k, &a, r.cfg.Now().UnixNano())
	return a, nil
}

// ResolveInDoubt settles an update in doubt. Kept, it is counted as it is;
// dropped, its delta is taken back under the current counter id and the
// compensation is logged. Either way the returned mutation, this replica's
// copy of the cell with the op id, is what the other replicas must receive
// so that their filters learn the op and their cells hold the decision.
func (r *Replica) ResolveInDoubt(op coltype.InDoubtOp, keep bool) (coltype.Mutation, error) {
	t, err := r.table(op.Table)
	if err != nil {
		return coltype.Mutation{}, err
	}
	l := &r.led
	l.mu.Lock()
	e, ok := l.ops[ledKey{op.Table, op.Column, string(op.Key), op.OpID}]
	if !ok || e.status != coltype.OpPending {
		l.mu.Unlock()
		return coltype.Mutation{}, fmt.Errorf("replica: op %x on %s.%s is not in doubt", op.OpID, t.def.Keyspace, t.def.Name)
	}
	l.mu.Unlock()
	if !keep {
		d, ok := t.dedup(op.Column)
		if !ok {
			return coltype.Mutation{}, fmt.Errorf("replica: column %s.%s.%s no longer deduplicates op ids (an FBF counter)", t.def.Keyspace, t.def.Name, op.Column)
		}
		u := coltype.Update{Table: op.Table, Key: op.Key, Column: op.Column, Delta: op.Delta, Timestamp: r.cfg.Now().UnixMicro(),
			HasOp: true, OpID: op.OpID, OpTime: op.OpTime}
		t.modeMu.RLock()
		err := d.Compensate(leader{r: r, t: t}, u)
		t.modeMu.RUnlock()
		if err != nil {
			return coltype.Mutation{}, fmt.Errorf("replica: take back op %x on %s.%s: %w", op.OpID, t.def.Keyspace, t.def.Name, err)
		}
	}
	l.mu.Lock()
	if e.status == coltype.OpPending {
		l.unpend(e)
	}
	e.status = coltype.OpKept
	if !keep {
		e.status = coltype.OpDropped
	}
	e.settledUntil = r.cfg.Now().Add(settleEvidenceLifetime).UnixNano()
	l.mu.Unlock()
	if !keep {
		// The file forgets the doubt at once (after syncing the log, so
		// the compensation is durable first), not at the end of the
		// resolver's round, which waits for the settled cell's replication:
		// a crash in between listed the op in doubt again at the next
		// start, and past the op's window, when its records are not
		// replayed, it was taken back twice (TestRandomCluster, group).
		if err := r.SaveInDoubt(); err != nil {
			r.logger.Error("writing the updates in doubt after taking one back failed; the resolver's round writes them again", "err", err)
		}
	}
	m := coltype.Mutation{Table: op.Table, Key: op.Key, HasOp: true, OpID: op.OpID, OpTime: op.OpTime}
	rw, found, err := t.read(row.Key{Token: ring.Token(op.Key), Partition: op.Key})
	if err != nil {
		return coltype.Mutation{}, err
	}
	m.Cell.Column = op.Column
	if found {
		if c, ok := rw.Cell(op.Column); ok {
			m.Cell = c
		}
	}
	return m, nil
}

// expireLedOps forgets resolved ops older than the window, when no retry
// of them can arrive any more; an op this node settled is kept as long as
// the evidence of a settlement (settleEvidenceLifetime), for the other
// leaders that may still hold it in doubt.
func (r *Replica) expireLedOps(window time.Duration) {
	l := &r.led
	now := r.cfg.Now()
	cutoff := now.Add(-window).UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	// One sweep a second at most: every question about an op calls this,
	// and settled ops stay for hours. An op kept a moment past its window
	// is harmless: it was counted here, which is what the answer says.
	if now.UnixNano()-l.lastExpire < int64(time.Second) {
		return
	}
	l.lastExpire = now.UnixNano()
	for k, op := range l.ops {
		if op.status != coltype.OpPending && op.OpTime < cutoff && op.settledUntil <= now.UnixNano() {
			delete(l.ops, k)
		}
	}
}

// recentLed remembers the FBF updates this run of the node led, within the
// filter window, so that it can answer a restarted leader that holds the
// same op in doubt that it counted it (coltype.OpKept). Without it, such a
// replica answered "not led", and the restarted leader decided from the
// filter and the cell alone (coltype.Decide's third rule), which cannot
// tell an op id received from the restarted leader from one this replica
// led: when a later update of the same cell had carried the restarted
// leader's shard here (its replication or a repair: the shard holds the
// earlier update's delta, not its op id) and this replica then led a retry
// of the earlier update, the restarted leader kept its application too and
// the update counted twice. (The ops the runs before led are in ledOps,
// from the commit log.)
//
// It keeps, per bucket of recentLedSpan, the hash of each op (table,
// column, partition key, op id), sorted once the bucket is closed; a
// bucket is dropped once its last op is older than the longest filter
// window of its ops. 8 bytes per op led within the window; the clock an
// answer gives is the one the shard has reached since (at or past the
// op's).
type recentLed struct {
	mu      sync.Mutex
	buckets []ledBucket
}

type ledBucket struct {
	start, last int64    // unix nanoseconds of the first and last op
	window      int64    // the longest filter window of its ops, nanoseconds
	ops         []uint64 // hashes
	sorted      bool
}

// expired reports whether every op of the bucket is older than its window.
func (b *ledBucket) expired(now int64) bool { return b.last < now-b.window }

// recentLedSpan is the time one bucket of recentLed covers.
const recentLedSpan = time.Second

// ledSeed seeds the hashes of recentLed, which live in this process only.
var ledSeed = maphash.MakeSeed()

// ledHash names an op on one cell: table, column (or cell name), partition
// key and op id, the variable-length ones length-prefixed.
func ledHash(table uint64, column string, key []byte, op [16]byte) uint64 {
	var h maphash.Hash
	h.SetSeed(ledSeed)
	var b [binary.MaxVarintLen64 + 8]byte
	h.Write(binary.BigEndian.AppendUint64(b[:0], table))
	h.Write(binary.AppendUvarint(b[:0], uint64(len(column))))
	h.WriteString(column)
	h.Write(key)
	h.Write(op[:])
	return h.Sum64()
}

// add records an update with an op id this run led.
func (rl *recentLed) add(u coltype.Update, window time.Duration, now int64) {
	if !u.HasOp {
		return
	}
	h := ledHash(u.Table, u.Column, u.Key, u.OpID) // before the lock: the leader path waits on it
	rl.mu.Lock()
	defer rl.mu.Unlock()
	n := len(rl.buckets)
	if n == 0 || now-rl.buckets[n-1].start >= recentLedSpan.Nanoseconds() {
		if n > 0 {
			b := &rl.buckets[n-1]
			slices.Sort(b.ops)
			b.sorted = true
		}
		rl.buckets = slices.DeleteFunc(rl.buckets, func(b ledBucket) bool { return b.expired(now) })
		rl.buckets = append(rl.buckets, ledBucket{start: now})
		n = len(rl.buckets)
	}
	b := &rl.buckets[n-1]
	b.ops = append(b.ops, h)
	b.last = max(b.last, now)
	b.window = max(b.window, window.Nanoseconds())
}

// find reports whether this run led an op within the window.
func (rl *recentLed) find(table uint64, column string, key []byte, op [16]byte, now int64) bool {
	h := ledHash(table, column, key, op)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for i := len(rl.buckets) - 1; i >= 0; i-- {
		b := &rl.buckets[i]
		if b.expired(now) {
			continue
		}
		if b.sorted {
			if _, found := slices.BinarySearch(b.ops, h); found {
				return true
			}
			continue
		}
		if slices.Contains(b.ops, h) {
			return true
		}
	}
	return false
}
