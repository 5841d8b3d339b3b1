package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/faultproxy"
)

// Counter modes: each is a table of keyspace bench, created through CQL.
const (
	ModeVanilla = "vanilla" // bench.vanilla: Cassandra's counter, the op id ignored
	ModeFBF     = "fbf"     // bench.fbf: WITH idempotence = {'class': 'fbf', ...}
	// ModeHandoff is bench.handoff (c handoff_counter): clients are tier-1
	// handoff participants (client.HandoffCounter), see handoff.go.
	ModeHandoff = "handoff"
	// ModeBorrow is bench.borrow (c borrow_counter): clients borrow a dot
	// (client.BorrowCounter), see borrow.go.
	ModeBorrow = "borrow"
)

// knownModes fixes each mode's number, carried in its clients' ids.
var knownModes = []string{ModeVanilla, ModeFBF, ModeHandoff, ModeReset, ModeBorrow}

func modeNumber(mode string) (uint64, bool) {
	for i, m := range knownModes {
		if m == mode {
			return uint64(i), true
		}
	}
	return 0, false
}

// Client ids: bits 0–15 the client's index, bits 16–23 the mode's number,
// bits 24–63 a per-run nonce. Faults are decided from the client's index,
// the sequence number and the attempt, so they hit the same op of every
// mode and of every run with the same seed.
const (
	modeShift = 16
	modeMask  = uint64(0xff) << modeShift
	// MaxClients is the most concurrent clients a run may have.
	MaxClients = 1 << 16
)

// ClientID is the op-id client id of client c of mode under a run's nonce.
func ClientID(nonce uint64, mode string, c int) uint64 {
	m, _ := modeNumber(mode)
	return nonce&^(1<<24-1) | m<<modeShift | uint64(c)&0xffff
}

func modeOf(clientID uint64) string {
	m := int((clientID & modeMask) >> modeShift)
	if m < len(knownModes) {
		return knownModes[m]
	}
	return fmt.Sprintf("mode%d", m)
}

// Fault kinds, as logged.
const (
	FaultLostAck       = "lost_ack"        // the coordinator applied the op, its answer was replaced by a write timeout
	FaultDelay         = "delay"           // the coordinator applied the op and answered after the client's timeout
	FaultClientLostAck = "client_lost_ack" // a running ring: the client dropped an acknowledgement it received
	FaultClientAbandon = "client_abandon"  // a running ring: the client gave up on an attempt still in flight
	FaultKill          = "kill"            // an embedded node stopped
	FaultRestart       = "restart"         // an embedded node started again
	FaultPause         = "pause"           // an embedded node's CQL executor stalls every request for a while
)

// Faults are the faults of a run. Every decision is seeded: whether an
// attempt's answer is lost or delayed is a hash of the seed, the client's
// index, the op's sequence number and the attempt number, so the same op of
// every mode meets the same faults.
type Faults struct {
	// LostAck is the probability that an attempt's answer is lost after
	// the op applied (on an embedded ring the coordinator's executor
	// answers a COUNTER write timeout instead; on a running ring the client
	// drops the acknowledgement it received).
	LostAck float64
	// Delay is the probability that an attempt's answer comes after the
	// client's timeout (embedded: the executor applies the op, then waits
	// DelayBy; running ring: the client abandons the attempt in flight and
	// retries at once).
	Delay float64
	// DelayBy is how long a delayed answer waits (default: the client
	// timeout plus 100 ms).
	DelayBy time.Duration
	// KillEvery stops a seeded random node of an embedded ring every
	// period; it starts again after Down (default 2 s).
	KillEvery, Down time.Duration
	// PauseEvery stalls a seeded random node's CQL executor every period
	// for PauseFor (default 1.5 × the client timeout).
	PauseEvery, PauseFor time.Duration
	// Reset is the probability that a fault proxy (Target.Proxies) closes
	// the connection after forwarding an attempt; without proxies it is
	// ignored.
	Reset float64
}

// Any reports whether a fault is configured.
func (f Faults) Any() bool {
	return f.LostAck > 0 || f.Delay > 0 || f.KillEvery > 0 || f.PauseEvery > 0 || f.Reset > 0
}

// decide is the fault schedule's draw, shared with the fault proxies
// (faultproxy.Decide), so that an in-node injector, the client and a proxy
// fault the same attempts for the same seed.
var decide = faultproxy.Decide

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

const (
	saltLost  = faultproxy.SaltLostAck
	saltDelay = faultproxy.SaltDelay
	saltNode  = 0x70de
)

// FaultEvent is one injected fault.
type FaultEvent struct {
	AtMS    float64 `json:"at_ms"` // since the log started
	Kind    string  `json:"kind"`
	Node    int     `json:"node,omitempty"` // 1-based node of an embedded ring
	Mode    string  `json:"mode,omitempty"`
	Client  uint64  `json:"client,omitempty"`
	Seq     uint64  `json:"seq,omitempty"`
	Attempt int     `json:"attempt,omitempty"`
	Detail  string  `json:"detail,omitempty"`
}

// FaultLog records the faults of a run. It is safe for concurrent use.
type FaultLog struct {
	start  time.Time
	mu     sync.Mutex
	events []FaultEvent
}

// NewFaultLog returns a log whose times count from now.
func NewFaultLog() *FaultLog { return &FaultLog{start: time.Now()} }

// Add appends an event, stamping its time.
func (l *FaultLog) Add(e FaultEvent) {
	e.AtMS = float64(time.Since(l.start).Microseconds()) / 1000
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// Events returns a copy of the events in time order.
func (l *FaultLog) Events() []FaultEvent { return l.Since(0) }

// Len returns the number of events logged so far.
func (l *FaultLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// Since returns the events logged after the first n, in time order.
func (l *FaultLog) Since(n int) []FaultEvent {
	l.mu.Lock()
	out := append([]FaultEvent(nil), l.events[min(n, len(l.events)):]...)
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].AtMS < out[j].AtMS })
	return out
}

// CountKinds returns how many events of each kind evs holds.
func CountKinds(evs []FaultEvent) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		m[e.Kind]++
	}
	return m
}

// WriteJSONL writes one JSON object per event and line.
func (l *FaultLog) WriteJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, e := range l.Events() {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("bench: fault log: %w", err)
		}
	}
	return nil
}

// Injector injects the server-side faults of an embedded ring: it wraps
// every node's CQL executor (node.Options.WrapExecutor) and sees every
// attempt of every counter operation that carries an op id. It also counts,
// per mode, the updates that reached a node after an earlier attempt of the
// same op had applied: the retries a correct FBF counter dismisses.
type Injector struct {
	seed uint64
	log  *FaultLog
	cfg  atomic.Pointer[Faults]

	mu     sync.Mutex
	ops    map[client.OpID]*opState
	paused map[int]time.Time
	dups   map[string]int64
}

type opState struct {
	arrivals int
	applied  bool
}

// NewInjector returns an injector with no faults armed.
func NewInjector(seed uint64, log *FaultLog) *Injector {
	in := &Injector{seed: seed, log: log, ops: map[client.OpID]*opState{}, paused: map[int]time.Time{}, dups: map[string]int64{}}
	in.cfg.Store(&Faults{})
	return in
}

// Set arms the lost-ack and delay faults (the other fields are ignored
// here: kills and pauses are scheduled by the caller).
func (in *Injector) Set(f Faults) { in.cfg.Store(&f) }

// Log is the injector's fault log.
func (in *Injector) Log() *FaultLog { return in.log }

// Pause stalls node i's executor until until.
func (in *Injector) Pause(i int, until time.Time) {
	in.mu.Lock()
	in.paused[i] = until
	in.mu.Unlock()
}

// Duplicates returns, per mode, the updates that reached a coordinator
// after an earlier attempt of their op had applied.
func (in *Injector) Duplicates() map[string]int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	m := make(map[string]int64, len(in.dups))
	for k, v := range in.dups {
		m[k] = v
	}
	return m
}

// Forget drops what the injector knows of every op (attempt numbers, which
// applied): a run calls it when its ops are over, so memory does not grow
// from run to run. The duplicate counts stay.
func (in *Injector) Forget() {
	in.mu.Lock()
	in.ops = map[client.OpID]*opState{}
	in.mu.Unlock()
}

// Wrap returns the executor wrapper of node i (1-based), for
// node.Options.WrapExecutor.
func (in *Injector) Wrap(i int) func(cql.Executor) cql.Executor {
	return func(e cql.Executor) cql.Executor { return &faultExec{in: in, node: i, inner: e} }
}

func (in *Injector) waitPause(ctx context.Context, i int) {
	for {
		in.mu.Lock()
		until := in.paused[i]
		in.mu.Unlock()
		d := time.Until(until)
		if d <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

type faultExec struct {
	in    *Injector
	node  int
	inner cql.Executor
}

func (e *faultExec) intercept(ctx context.Context, isUpdate bool, statements int, cons frame.Consistency, payload map[string][]byte, run func() (cql.Outcome, error)) (cql.Outcome, error) {
	in := e.in
	raw, ok := payload[client.PayloadKey]
	if !isUpdate || !ok {
		in.waitPause(ctx, e.node)
		return run()
	}
	op, err := client.ParseOpID(raw)
	if err != nil {
		in.waitPause(ctx, e.node)
		return run()
	}
	in.mu.Lock()
	st := in.ops[op]
	if st == nil {
		st = &opState{}
		in.ops[op] = st
	}
	st.arrivals++
	attempt := st.arrivals
	in.mu.Unlock()
	in.waitPause(ctx, e.node)
	mode := modeOf(op.Client)
	in.mu.Lock()
	if st.applied {
		in.dups[mode] += int64(statements)
	}
	in.mu.Unlock()
	out, err := run()
	if err != nil {
		return out, err
	}
	in.mu.Lock()
	st.applied = true
	in.mu.Unlock()
	f := in.cfg.Load()
	ev := FaultEvent{Node: e.node, Mode: mode, Client: op.Client, Seq: op.Sequence, Attempt: attempt}
	if f.LostAck > 0 && decide(in.seed, saltLost, op, attempt) < f.LostAck {
		ev.Kind = FaultLostAck
		in.log.Add(ev)
		return cql.Outcome{}, &frame.Error{Code: frame.ErrWriteTimeout, Message: "Operation timed out - received only 0 responses.",
			Consistency: cons, BlockFor: 1, WriteType: "COUNTER"}
	}
	if f.Delay > 0 && decide(in.seed, saltDelay, op, attempt) < f.Delay {
		ev.Kind, ev.Detail = FaultDelay, f.DelayBy.String()
		in.log.Add(ev)
		select {
		case <-ctx.Done():
		case <-time.After(f.DelayBy):
		}
	}
	return out, nil
}

func (e *faultExec) Query(ctx context.Context, s *cql.Session, q string, p frame.QueryParams, payload map[string][]byte) (cql.Outcome, error) {
	isUpdate := len(q) >= 6 && strings.EqualFold(strings.TrimSpace(q)[:6], "UPDATE")
	return e.intercept(ctx, isUpdate, 1, p.Consistency, payload, func() (cql.Outcome, error) { return e.inner.Query(ctx, s, q, p, payload) })
}

func (e *faultExec) Prepare(ctx context.Context, s *cql.Session, q string, payload map[string][]byte) (cql.Outcome, error) {
	e.in.waitPause(ctx, e.node)
	return e.inner.Prepare(ctx, s, q, payload)
}

func (e *faultExec) Execute(ctx context.Context, s *cql.Session, id []byte, p frame.QueryParams, payload map[string][]byte) (cql.Outcome, error) {
	return e.intercept(ctx, true, 1, p.Consistency, payload, func() (cql.Outcome, error) { return e.inner.Execute(ctx, s, id, p, payload) })
}

func (e *faultExec) Batch(ctx context.Context, s *cql.Session, b frame.Batch, payload map[string][]byte) (cql.Outcome, error) {
	return e.intercept(ctx, true, len(b.Statements), b.Consistency, payload, func() (cql.Outcome, error) { return e.inner.Batch(ctx, s, b, payload) })
}
