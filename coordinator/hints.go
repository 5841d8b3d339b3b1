package coordinator

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/transport"
	"github.com/idemkv/idemkv/vfs"
)

// Hints keeps the mutations a leader could not deliver to a replica that was
// down, one commit log per target node under Dir/<hostID>, and replays them
// in order when the target is up again. Mutations are replicated state
// (shards), so delivering a hint twice is harmless.
type Hints struct {
	fsys   vfs.FS
	dir    string
	logger *slog.Logger

	mu      sync.Mutex
	targets map[string]*hintQueue
	// closed is set by Close: a hint stored later (a write still in flight
	// while the node stops) must not reopen a log that nothing closes and
	// that the next Hints on the same directory would share.
	closed bool
	// deliverMu serializes deliveries, so that two triggers (the periodic
	// loop and a node coming up) never send or trim a queue twice.
	deliverMu sync.Mutex

	stored, delivered atomic.Uint64
	// notStored counts the hints Store dropped: their target was down
	// longer than the window (see SetWindow).
	notStored atomic.Uint64
	// expired counts the hints delivery dropped: older than their table's
	// gc_grace_seconds (see SetExpiry).
	expired  atomic.Uint64
	grace    func(table uint64) (time.Duration, bool)
	now      func() time.Time
	window   time.Duration
	downtime func(target string) time.Duration
	// refused holds the targets whose hints are being dropped, so that
	// the log says it once per outage.
	refused map[string]bool
	// held is, per target, how many hints at the head of its queue wait
	// for Resume: those queued when Pause was called. Hints are replicated
	// state, so the ones stored later may go first.
	held map[string]int
	// conflicts, when set (SetConflicts), vets and answers the leader's
	// replications of counted ops among the hints (conflict.go).
	conflicts atomic.Pointer[hintConflicts]
}

// hintConflicts are the coordinator's hooks on the hints of a leader's
// replications of ops it counted (see counted): stillCounted tells whether
// the leader still counts the op (one it took back since goes without its
// mark, so that no replica takes its own application back for it), and
// answered reads the target's answer.
type hintConflicts struct {
	stillCounted func(m coltype.Mutation) bool
	answered     func(ctx context.Context, m coltype.Mutation, answer []byte)
}

// SetConflicts installs the coordinator's conflict hooks.
func (h *Hints) SetConflicts(stillCounted func(m coltype.Mutation) bool, answered func(ctx context.Context, m coltype.Mutation, answer []byte)) {
	h.conflicts.Store(&hintConflicts{stillCounted: stillCounted, answered: answered})
}

// Pause holds back the hints queued now until Resume; hints stored later
// are delivered as usual. A node that restarts with updates in doubt holds
// the hints it had (their updates are among those in doubt) until they
// are settled.
func (h *Hints) Pause() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = map[string]int{}
	for t, q := range h.targets {
		h.held[t] = len(q.pending)
	}
}

// Resume lets the hints held by Pause go.
func (h *Hints) Resume() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = nil
}

type hintQueue struct {
	log     *commitlog.Log
	pending []coltype.Mutation
}

// OpenHints opens the hints directory dir on fsys (nil means vfs.Default)
// and loads the hints it holds.
func OpenHints(fsys vfs.FS, dir string, logger *slog.Logger) (*Hints, error) {
	if logger == nil {
		logger = slog.Default()
	}
	fsys = vfs.Or(fsys)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("coordinator: hints dir: %w", err)
	}
	h := &Hints{fsys: fsys, dir: dir, logger: logger, targets: map[string]*hintQueue{}}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("coordinator: hints dir: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := hex.DecodeString(e.Name()); err != nil {
			continue
		}
		if _, err := h.queue(e.Name()); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// ErrHintsClosed is returned by Store after Close.
var ErrHintsClosed = errors.New("coordinator: hints closed")

// queue returns the target's queue, opening its log (and loading its
// hints) on first use; h.mu is held or the Hints is not shared yet.
func (h *Hints) queue(target string) (*hintQueue, error) {
	if h.closed {
		return nil, ErrHintsClosed
	}
	if q, ok := h.targets[target]; ok {
		return q, nil
	}
	q := &hintQueue{}
	log, err := commitlog.Open(commitlog.Options{
		Dir: filepath.Join(h.dir, target),
		FS:  h.fsys,
		// Group commit: a hint is durable before the replication that
		// failed is counted as done, since a queued hint of an FBF update
		// is what puts it in doubt after the leader restarts (and hints are
		// written only while a replica is unreachable).
		Sync: commitlog.SyncGroup,
		// Written only while a replica is unreachable: a mapped segment
		// would hold its full size on disk (and in memory) for every
		// target ever hinted, to save a system call per group.
		Access: commitlog.AccessStandard,
		Logger: h.logger,
	}, func(_ commitlog.Position, rec commitlog.Record) error {
		q.pending = append(q.pending, recordMutation(rec))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("coordinator: open hints for %s: %w", target, err)
	}
	q.log = log
	h.targets[target] = q
	return q, nil
}

func mutationRecord(m coltype.Mutation) commitlog.Record {
	kind := commitlog.PayloadShard
	if m.Cell.Tombstone {
		kind = commitlog.PayloadTombstone
	}
	r := commitlog.Record{
		Table: m.Table, Key: m.Key, Column: m.Cell.Column, Kind: kind,
		Payload: m.Cell.Value, Timestamp: m.Cell.Timestamp,
		HasOp: m.HasOp, OpID: m.OpID, OpTime: m.OpTime,
	}
	if counted(m) {
		// A leader's replication of an op it counted keeps its mark, so
		// that the delivered hint can meet a conflict too (conflict.go).
		r.Led, r.Delta = true, m.Log.Delta
	}
	return r
}

func recordMutation(r commitlog.Record) coltype.Mutation {
	m := coltype.Mutation{
		Table: r.Table, Key: r.Key,
		Cell:  replicaCell(r),
		HasOp: r.HasOp, OpID: r.OpID, OpTime: r.OpTime,
	}
	if r.HasOp && r.Led && !r.Compensation {
		m.Log.Led, m.Log.Delta = true, r.Delta
	}
	return m
}

// DefaultMaxHintWindow is Cassandra's max_hint_window default: 3 hours.
const DefaultMaxHintWindow = 3 * time.Hour

// SetWindow makes Store drop the hints of a target that downtime says has
// been down longer than window (cassandra.yaml's max_hint_window), as
// Cassandra's StorageProxy.shouldHint does: a node down that long must be
// repaired, and its hints would only pile up. window ≤ 0 or a nil downtime
// keeps every hint. Call it before the first Store.
func (h *Hints) SetWindow(window time.Duration, downtime func(target string) time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.window, h.downtime = window, downtime
}

// SetExpiry makes delivery drop a hint whose cell timestamp is older than
// its table's gc_grace_seconds, as Cassandra's hints expire then (a hint's
// TTL is the smallest gc_grace_seconds of its tables): by then a tombstone
// the hinted cell predates may have been purged, and the hint would bring
// the deleted value back. grace reports a table's gc_grace_seconds (false:
// unknown table, the hint is delivered and the target decides); now is the
// clock. Call it before the first delivery.
func (h *Hints) SetExpiry(grace func(table uint64) (time.Duration, bool), now func() time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grace, h.now = grace, now
}

// Expired returns how many hints delivery dropped since opening, older
// than their table's gc_grace_seconds.
func (h *Hints) Expired() uint64 { return h.expired.Load() }

// expiredHint reports whether m is older than its table's gc_grace_seconds.
func (h *Hints) expiredHint(m coltype.Mutation, grace func(uint64) (time.Duration, bool), now func() time.Time) bool {
	if grace == nil || now == nil {
		return false
	}
	g, ok := grace(m.Table)
	return ok && m.Cell.Timestamp < now().Add(-g).UnixMicro()
}

// NotStored returns how many hints Store dropped since opening: their
// target was down longer than the hint window.
func (h *Hints) NotStored() uint64 { return h.notStored.Load() }

// Store keeps a mutation for a target node, unless the target has been
// down longer than the hint window (see SetWindow): then the hint is
// dropped, counted (NotStored) and logged once per outage.
func (h *Hints) Store(target string, m coltype.Mutation) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.window > 0 && h.downtime != nil {
		if down := h.downtime(target); down > h.window {
			h.notStored.Add(1)
			if !h.refused[target] {
				if h.refused == nil {
					h.refused = map[string]bool{}
				}
				h.refused[target] = true
				h.logger.Warn(fmt.Sprintf("Not hinting %s which has been down %d ms (max_hint_window %v): its hints are dropped until it is back; repair it",
					target, down.Milliseconds(), h.window), "target", target)
			}
			return nil
		}
		delete(h.refused, target)
	}
	q, err := h.queue(target)
	if err != nil {
		return err
	}
	rec := mutationRecord(m)
	if _, err := q.log.Append(&rec); err != nil {
		return fmt.Errorf("coordinator: store hint for %s: %w", target, err)
	}
	q.pending = append(q.pending, m)
	h.stored.Add(1)
	return nil
}

// Queued returns a copy of every hint waiting, for every target.
func (h *Hints) Queued() []coltype.Mutation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []coltype.Mutation
	for _, q := range h.targets {
		out = append(out, q.pending...)
	}
	return out
}

// Pending returns how many hints each target has waiting.
func (h *Hints) Pending() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for t, q := range h.targets {
		if len(q.pending) > 0 {
			out[t] = len(q.pending)
		}
	}
	return out
}

// Counts returns how many hints were stored and delivered since opening.
func (h *Hints) Counts() (stored, delivered uint64) { return h.stored.Load(), h.delivered.Load() }

// Deliver sends the hints of every target that cluster holds up, in order,
// stopping a target's replay at its first failure. A target whose hints are
// all delivered has its log removed.
func (h *Hints) Deliver(ctx context.Context, cluster Cluster, tr transport.Transport) error {
	h.deliverMu.Lock()
	defer h.deliverMu.Unlock()
	h.mu.Lock()
	var targets []string
	for t, q := range h.targets {
		if len(q.pending) > h.held[t] && cluster.IsUp(t) {
			targets = append(targets, t)
		}
	}
	h.mu.Unlock()
	sort.Strings(targets)
	var errs []error
	for _, t := range targets {
		errs = append(errs, h.deliverTo(ctx, t, cluster, tr))
	}
	return errors.Join(errs...)
}

// hintWindow is how many hints to one target are in flight at once.
const hintWindow = 32

// DeliverTo sends the hints held for one target now, whatever the failure
// detector says of it, and returns how many are left. While deliveries are
// paused, the hints held do not count: they wait for this node's own
// updates in doubt to be settled, and those updates are in doubt precisely
// because their hints are queued (see Pause).
func (h *Hints) DeliverTo(ctx context.Context, target string, cluster Cluster, tr transport.Transport) (left int, err error) {
	h.deliverMu.Lock()
	defer h.deliverMu.Unlock()
	err = h.deliverTo(ctx, target, cluster, tr)
	h.mu.Lock()
	defer h.mu.Unlock()
	if q, ok := h.targets[target]; ok {
		left = len(q.pending) - h.held[target]
	}
	return left, err
}

func (h *Hints) deliverTo(ctx context.Context, target string, cluster Cluster, tr transport.Transport) error {
	addr, ok := cluster.Addr(target)
	if !ok {
		return nil
	}
	h.mu.Lock()
	q, ok := h.targets[target]
	if !ok {
		h.mu.Unlock()
		return nil
	}
	skip := min(h.held[target], len(q.pending))
	batch := append([]coltype.Mutation(nil), q.pending[skip:]...)
	grace, now := h.grace, h.now
	h.mu.Unlock()
	// Hints are replicated state, merged in any order: they go
	// hintWindow at a time. sent counts the leading run that arrived; a
	// hint after a failure is sent again later, which is harmless.
	sent := 0
	for sent < len(batch) {
		window := batch[sent:min(sent+hintWindow, len(batch))]
		errs := make([]error, len(window))
		var wg sync.WaitGroup
		for i, m := range window {
			wg.Add(1)
			if h.expiredHint(m, grace, now) {
				// Dropped as delivered: it must never reach the target.
				h.expired.Add(1)
				wg.Done()
				continue
			}
			hc := h.conflicts.Load()
			if counted(m) && (hc == nil || !hc.stillCounted(m)) {
				m.Log = coltype.LeaderLog{}
			}
			go func() {
				defer wg.Done()
				var resp transport.Message
				resp, errs[i] = tr.Request(ctx, addr, transport.Message{Type: TypeMutation, Body: EncodeMutation(m)})
				if errs[i] == nil && hc != nil {
					hc.answered(ctx, m, resp.Body)
				}
			}()
		}
		wg.Wait()
		ok := 0
		for ok < len(errs) && errs[ok] == nil {
			ok++
		}
		sent += ok
		h.delivered.Add(uint64(ok))
		if ok < len(errs) {
			h.logger.Debug("hint replay stopped", "target", target, "delivered", sent, "err", errs[ok])
			break
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.targets[target] != q {
		// Closed meanwhile: the directory may already belong to the
		// next Hints opened on it.
		return nil
	}
	// The hints held stay at the head; those stored while this delivery
	// ran stay behind the ones it sent.
	q.pending = append(append([]coltype.Mutation(nil), q.pending[:skip]...), q.pending[skip+sent:]...)
	if len(q.pending) > 0 {
		return nil
	}
	// Everything delivered: drop the log. Hints stored meanwhile went to
	// pending as well, so an empty pending means none is lost.
	delete(h.targets, target)
	err := q.log.Close()
	if rerr := h.fsys.RemoveAll(filepath.Join(h.dir, target)); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if sent > 0 {
		h.logger.Info("hints replayed", "target", target, "count", sent)
	}
	return err
}

// Run delivers hints every interval until ctx ends.
func (h *Hints) Run(ctx context.Context, interval time.Duration, cluster Cluster, tr transport.Transport) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			dctx, cancel := context.WithTimeout(ctx, interval*4)
			if err := h.Deliver(dctx, cluster, tr); err != nil {
				h.logger.Warn("hint delivery", "err", err)
			}
			cancel()
		}
	}
}

// Close closes the hint logs.
func (h *Hints) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	var errs []error
	for t, q := range h.targets {
		errs = append(errs, q.log.Close())
		delete(h.targets, t)
	}
	return errors.Join(errs...)
}

var _ io.Closer = (*Hints)(nil)
