// Package coordinator routes counter writes and reads through the ring as
// Cassandra does. A coordinator computes the key's token and natural
// replicas, checks the consistency level can be met, and forwards a counter
// update to one leader replica; the leader applies it through its local
// replica (the column type decides how), replicates the resulting state to
// the other replicas, hints the ones that are down, and answers once the
// consistency level is met, itself included. Reads ask the replicas, merge
// their cells, and repair the replicas that answered with stale state.
//
// The coordinator knows no counter design: it finds a column's capabilities
// (package coltype) by type assertion. Designs updated by a client exchange
// in a custom payload (coltype.Exchanger) go through Exchange, which hands
// the request to the type's own coordinator-side logic when it is
// coltype.Coordinated (with a coltype.Coordination of the cell: its
// replicas, exchanges with them, the timeout), else forwards the payload
// unchanged (DirectExchange); a plain update of a Coordinated column goes
// through CoordinatedWrite. Exchanges travel as TypeExchange, served on the
// replica by its Exchanger. RunAntiEntropy reconciles the cells of every
// coltype.AntiEntropy column with the other replicas in the background
// (antientropy.go).
package coordinator

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/cql/trace"
	"github.com/idemkv/idemkv/internal/deadline"
	"github.com/idemkv/idemkv/internal/workpool"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/transport"
)

// Cluster is the coordinator's view of the ring, kept by the node from
// gossip. It must be safe for concurrent use.
type Cluster interface {
	// Self is this node.
	Self() ring.Endpoint
	// Metadata is the current token map.
	Metadata() *ring.Metadata
	// Addr is the peer address of a node.
	Addr(hostID string) (transport.Addr, bool)
	// IsUp reports whether the failure detector holds the node up.
	IsUp(hostID string) bool
}

// pendingCluster is implemented by Clusters that know the ring's range
// movements (a node joining or leaving): Rings returns the current token
// map and, while movements are under way, the map once they complete (nil
// otherwise), both from one snapshot. A key's pending replicas are those
// of the future map that are not natural replicas now. A leader sends them
// its replication too, as Cassandra sends writes to pending replicas, but
// they do not count toward the consistency level (Cassandra adds them to
// blockFor instead; idemkv keeps the level's meaning of the natural
// replicas, so that a slow joining node cannot make a write time out). A
// pending replica that cannot be reached gets a hint, as a natural one
// does. Both sets come from the same snapshot: a leader that saw the
// current map of one snapshot and the future map of the next (movement
// done) would send to neither the old nor the new replica.
type pendingCluster interface {
	Rings() (current, future *ring.Metadata)
}

// Tables resolves a table to the replication of its keyspace.
type Tables interface {
	Strategy(table uint64) (ring.Strategy, error)
}

// leaderRules is implemented by Tables that know a table's leader rule:
// the one its options set, or its counter design's default.
type leaderRules interface {
	LeaderRule(table uint64) (coltype.LeaderRule, coltype.RuleSource)
}

// Store is the local replica.
type Store interface {
	Apply(u coltype.Update) (coltype.Mutation, error)
	ApplyMutation(m coltype.Mutation) error
	ReadRow(table uint64, key []byte) (row.Row, bool, error)
	MergeCells(table uint64, a, b row.Cell) (row.Cell, error)
}

// Config configures a coordinator.
type Config struct {
	Cluster   Cluster
	Tables    Tables
	Store     Store
	Transport transport.Transport
	Hints     *Hints // nil: no hints are kept

	// LeaderRule chooses counter leaders (default coltype.LeaderRandom,
	// Cassandra's). LeaderRuleSet says the operator chose it: it then
	// overrides the counter designs' defaults, but not a table's own
	// option (see coltype.RuleSource).
	LeaderRule    coltype.LeaderRule
	LeaderRuleSet bool
	// CounterWriteTimeout bounds a counter write (Cassandra's
	// counter_write_request_timeout_in_ms, default 5 s).
	CounterWriteTimeout time.Duration
	// ReadTimeout bounds a read (read_request_timeout_in_ms, default 5 s).
	ReadTimeout time.Duration
	// Rand chooses random leaders; default a source seeded from Now.
	Rand *rand.Rand
	// Now is the clock the coordinator reads (delete timestamps); default
	// time.Now. Tests inject virtual time.
	Now func() time.Time
	// WithTimeout makes the contexts of the coordinator's timeouts (counter
	// writes, reads, exchanges); default context.WithTimeout, and for a
	// counter write and its replication a context shared with the writes
	// whose deadlines fall within 1/1024 of the timeout of each other
	// (internal/deadline). Tests inject contexts that end on virtual time.
	WithTimeout func(context.Context, time.Duration) (context.Context, context.CancelFunc)
	// IDs is the source of the random ids of coordinated types' temporary
	// participants (coltype.Coordination.NewID; handoff counters' plain
	// updates); default crypto/rand. It must be safe for concurrent use.
	IDs    io.Reader
	Logger *slog.Logger
	// RefuseWrites, when set, names the tables whose mutations this
	// replica refuses: regular cells, tombstones, counter updates it
	// would lead, replicated state, hints and read repairs (node option
	// test_fail_writes_keyspace, Cassandra's cassandra.test.fail_writes_ks
	// test hook). A coordinator answers a write that too many replicas
	// refused with a *WriteFailureError.
	RefuseWrites func(table uint64) bool
}

// Stats are a coordinator's running counts.
type Stats struct {
	Writes, WritesLed, Unavailable, WriteTimeouts uint64
	Reads, ReadTimeouts, ReadRepairs              uint64
	ReplicaMutations                              uint64
	// Dismissed counts the updates this node led that its column recognised
	// as retries (FBF counters) and acknowledged without applying.
	Dismissed uint64
	// Exchanges counts the exchanges this node coordinated (clients'
	// custom payloads, and those a coordinated type's logic ran, e.g. for
	// a plain update of a handoff counter); ExchangeBytes the payloads they
	// carried, both ways.
	Exchanges, ExchangeBytes uint64
	// AntiEntropyMessages counts the anti-entropy exchanges this node sent
	// to other replicas; AntiEntropyBytes their payloads, both ways.
	AntiEntropyMessages, AntiEntropyBytes uint64
	// Retirements counts the temporary participants of plain updates that
	// a coordinated type retired in the background (handoff counters: an
	// exchange failed, or the update timed out).
	Retirements uint64
	// InDoubtResolved counts the updates this node led before an unclean
	// stop that it resolved after restarting; InDoubtDropped those it took
	// back because another leader had counted them.
	InDoubtResolved, InDoubtDropped uint64
	// ConflictsTakenBack counts the FBF updates this node led, and took back
	// when it learned that another leader counted them too (conflict.go).
	ConflictsTakenBack uint64
	// OpsAsked counts the ops this node asked the other replicas about
	// before leading them, its filter possibly lacking them (after an
	// unclean start, or a change in the live replicas); OpsLearned those
	// another replica had seen, which this node then dismissed.
	OpsAsked, OpsLearned uint64
	// HintPulls counts the completed pulls of the hints a peer held for
	// this node (PeerUp), after which it leads deduplicated updates again.
	HintPulls uint64
}

// errLeaderInDoubt says a leader applied nothing and another may lead: its
// cell holds an update in doubt, or the update could not be sent to it.
var errLeaderInDoubt = errors.New("coordinator: the leader applied nothing (its cell holds an update in doubt, or it is unreachable)")

// inDoubtPoll is how often a leader update waiting for its cell's in-doubt
// updates to be settled tries again.
const inDoubtPoll = 10 * time.Millisecond

// Coordinator serves counter writes and reads for one node.
type Coordinator struct {
	cfg    Config
	logger *slog.Logger
	randMu sync.Mutex
	// resolverStart is when this node began resolving its updates in doubt.
	resolverStart atomic.Value // time.Time
	// unsent are updates in doubt settled before the rest of their cell's.
	unsent settledUnsent
	// catchUp holds the peers whose hints for this node are being pulled.
	catchUpMu sync.Mutex
	catchUp   map[string]bool
	catchUpN  atomic.Int32 // len(catchUp), read without the lock
	started   time.Time
	// churned is when this node last saw a replica's liveness change
	// (unix nanoseconds, 0: never; see NoteLivenessChange).
	churned atomic.Int64
	// moves are the range movements this node saw complete, oldest first
	// (see NoteRangeMovement); movesMu serialises their writers.
	movesMu sync.Mutex
	moves   atomic.Pointer[[]movement]
	// closeMu, closed and leading let Close wait for the updates this node
	// leads, their replication included.
	closeMu sync.RWMutex
	closed  bool
	leading sync.WaitGroup
	// replicating runs the sends of a led update to the other replicas on
	// goroutines kept between updates (internal/workpool).
	replicating *workpool.Pool
	// writeDeadlines makes the contexts of the counter write timeout, one
	// timer shared by many writes; nil when Config.WithTimeout is set.
	writeDeadlines *deadline.Timeouts

	stats struct {
		writes, led, unavailable, writeTimeouts atomic.Uint64
		reads, readTimeouts, repairs, mutations atomic.Uint64
		dismissed                               atomic.Uint64
		exchanges, exchangeBytes                atomic.Uint64
		antiEntropyMessages, antiEntropyBytes   atomic.Uint64
		retirements                             atomic.Uint64
		inDoubtResolved, inDoubtDropped         atomic.Uint64
		conflictsTakenBack                      atomic.Uint64
		opsLearned, opsAsked                    atomic.Uint64
		hintPulls                               atomic.Uint64
	}
}

// New returns a coordinator.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Cluster == nil || cfg.Tables == nil || cfg.Store == nil || cfg.Transport == nil {
		return nil, errors.New("coordinator: Cluster, Tables, Store and Transport are required")
	}
	if cfg.CounterWriteTimeout <= 0 {
		cfg.CounterWriteTimeout = 5 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(uint64(cfg.Now().UnixNano()), 0x5eed))
	}
	var writeDeadlines *deadline.Timeouts
	if cfg.WithTimeout == nil {
		cfg.WithTimeout = context.WithTimeout
		writeDeadlines = deadline.New(cfg.CounterWriteTimeout)
	}
	if cfg.IDs == nil {
		cfg.IDs = crand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Coordinator{cfg: cfg, logger: cfg.Logger, started: cfg.Now(), replicating: workpool.New(0), writeDeadlines: writeDeadlines}
	if cfg.Hints != nil {
		cfg.Hints.SetConflicts(c.stillCounted, c.mutationAnswered)
	}
	return c, nil
}

// writeTimeout bounds a counter write by the counter write timeout: with a
// context shared by the writes of the same instant (whose CancelFunc does
// nothing: nothing may wait for the context to end once the write
// returns), or when ctx's cancellation cannot be shared (see
// deadline.Timeouts.Context) or a test injects WithTimeout, with
// Config.WithTimeout.
func (c *Coordinator) writeTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.writeDeadlines != nil {
		if sctx, ok := c.writeDeadlines.Context(ctx); ok {
			return sctx, func() {}
		}
	}
	return c.cfg.WithTimeout(ctx, c.cfg.CounterWriteTimeout)
}

// Stats returns the running counts.
func (c *Coordinator) Stats() Stats {
	s := &c.stats
	return Stats{
		Writes: s.writes.Load(), WritesLed: s.led.Load(), Unavailable: s.unavailable.Load(), WriteTimeouts: s.writeTimeouts.Load(),
		Reads: s.reads.Load(), ReadTimeouts: s.readTimeouts.Load(), ReadRepairs: s.repairs.Load(), ReplicaMutations: s.mutations.Load(),
		Dismissed: s.dismissed.Load(),
		Exchanges: s.exchanges.Load(), ExchangeBytes: s.exchangeBytes.Load(),
		AntiEntropyMessages: s.antiEntropyMessages.Load(), AntiEntropyBytes: s.antiEntropyBytes.Load(),
		Retirements:     s.retirements.Load(),
		InDoubtResolved: s.inDoubtResolved.Load(), InDoubtDropped: s.inDoubtDropped.Load(),
		ConflictsTakenBack: s.conflictsTakenBack.Load(),
		OpsLearned:         s.opsLearned.Load(), OpsAsked: s.opsAsked.Load(),
		HintPulls: s.hintPulls.Load(),
	}
}

// placement returns a key's natural replicas, the live ones among them, and
// what the consistency level requires of them.
func (c *Coordinator) placement(table uint64, key []byte, cl ConsistencyLevel) (natural, live []ring.Endpoint, req requirement, err error) {
	natural, _, live, req, err = c.placementPending(table, key, cl)
	return natural, live, req, err
}

// placementPending is placement with the key's pending replicas (see
// pendingCluster), from the same snapshot of the ring.
func (c *Coordinator) placementPending(table uint64, key []byte, cl ConsistencyLevel) (natural, pending, live []ring.Endpoint, req requirement, err error) {
	s, err := c.cfg.Tables.Strategy(table)
	if err != nil {
		return nil, nil, nil, req, &InvalidError{Msg: err.Error()}
	}
	token := ring.Token(key)
	cur, fut := c.cfg.Cluster.Metadata(), (*ring.Metadata)(nil)
	if pc, ok := c.cfg.Cluster.(pendingCluster); ok {
		cur, fut = pc.Rings()
	}
	natural = s.Replicas(cur, token)
	if fut != nil {
		for _, e := range s.Replicas(fut, token) {
			if !slices.ContainsFunc(natural, func(n ring.Endpoint) bool { return n.ID == e.ID }) {
				pending = append(pending, e)
			}
		}
	}
	live = make([]ring.Endpoint, 0, len(natural))
	for _, e := range natural {
		if c.cfg.Cluster.IsUp(e.ID) {
			live = append(live, e)
		}
	}
	return natural, pending, live, newRequirement(cl, s, c.cfg.Cluster.Self().DC), nil
}

// chooseLeader applies the table's leader rule to the live replicas.
//
// The random rule is Cassandra's uniform draw among the live replicas of
// the coordinator's data center, with one difference for an update that
// carries an op id: the draw is keyed by the op id (rendezvous hashing,
// opLeader), so every attempt of one op meets the same leader, and the op
// ids it remembers (an FBF's filter, a reset_counter cell's recent ops),
// while the live replicas stay the same. A vanilla counter ignores op ids:
// which replica leads each attempt changes nothing in what it counts.
// Drawn afresh per attempt, a retry sent while the first attempt is still
// in flight (a client that gave up on it) is led elsewhere before the
// first leader's replication arrives, and both count it: 303 over-counted
// updates in 100,000 on a 3-node ring with 2 % of attempts abandoned
// (issue 19). Keyed, the leaders are still spread uniformly over the
// replicas.
func (c *Coordinator) chooseLeader(u coltype.Update, live []ring.Endpoint) ring.Endpoint {
	table := u.Table
	rule := c.cfg.LeaderRule
	if lr, ok := c.cfg.Tables.(leaderRules); ok {
		r, src := lr.LeaderRule(table)
		if src == coltype.RuleTableOption || src == coltype.RuleDesignDefault && !c.cfg.LeaderRuleSet {
			rule = r
		}
	}
	if rule == coltype.LeaderFirst {
		return live[0]
	}
	dc := c.cfg.Cluster.Self().DC
	var local []ring.Endpoint
	for _, e := range live {
		if e.DC == dc {
			local = append(local, e)
		}
	}
	if len(local) == 0 {
		return live[0]
	}
	if u.HasOp {
		return opLeader(u.OpID, local)
	}
	c.randMu.Lock()
	i := c.cfg.Rand.IntN(len(local))
	c.randMu.Unlock()
	return local[i]
}

// opLeader draws the leader of an op among candidates by rendezvous
// hashing: the candidate with the highest score of (op id, host id). Every
// coordinator computes the same draw (the hash is fixed, not seeded per
// process); a candidate that leaves the set moves only the ops it led.
func opLeader(op [16]byte, candidates []ring.Endpoint) ring.Endpoint {
	const offset64, prime64 = 14695981039346656037, 1099511628211 // FNV-1a
	h0 := uint64(offset64)
	for _, b := range op {
		h0 = (h0 ^ uint64(b)) * prime64
	}
	best, bestScore := candidates[0], uint64(0)
	for i, e := range candidates {
		h := h0
		for j := 0; j < len(e.ID); j++ {
			h = (h ^ uint64(e.ID[j])) * prime64
		}
		if score := mix64(h); i == 0 || score > bestScore {
			best, bestScore = e, score
		}
	}
	return best
}

// mix64 is splitmix64's finalizer: FNV's low bits are weak for inputs that
// differ only in their last bytes (the host ids).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// CounterWrite applies a client's counter update at a consistency level: it
// chooses a leader, forwards the update, and waits for the leader's answer
// up to the counter write timeout. On a timeout the update may or may not
// have been applied: the error is a *WriteTimeoutError of type COUNTER.
func (c *Coordinator) CounterWrite(ctx context.Context, u coltype.Update, cl ConsistencyLevel) error {
	c.stats.writes.Add(1)
	if err := validateCounterWrite(cl); err != nil {
		return err
	}
	var pl placed
	var err error
	pl.natural, pl.pending, pl.live, pl.req, err = c.placementPending(u.Table, u.Key, cl)
	if err != nil {
		return err
	}
	live, req := pl.live, pl.req
	if err := req.sufficient(live); err != nil {
		c.stats.unavailable.Add(1)
		return err
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Counter write of column %s at %v: %d live replicas, %d acks needed", u.Column, cl, len(live), req.blockFor)
	}
	ctx, cancel := c.writeTimeout(ctx)
	defer cancel()
	w := counterWrite{cl: cl, localDC: req.localDC, u: u}
	// A leader whose cell holds an update in doubt (it restarted after an
	// unclean stop and has not settled it yet) applies nothing and says so,
	// and a leader the update cannot even be sent to never saw it: the next
	// live replica leads instead, and if none can, the coordinator waits
	// and tries them again until the write timeout.
	candidates := live
	for {
		leader := c.chooseLeader(u, candidates)
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadRequest, "Leader chosen: %s (of %d candidates)", c.endpointName(leader), len(candidates))
		}
		dismissed, err := c.writeVia(ctx, leader, w, &pl)
		if !errors.Is(err, errLeaderInDoubt) {
			if err != nil && trace.On(ctx) {
				trace.Eventf(ctx, trace.ThreadRequest, "Counter write failed: %v", err)
			}
			if err == nil && dismissed {
				noteDismissed(ctx)
			}
			return c.countTimeout(err)
		}
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadRequest, "Leader %s cannot lead the update now (in doubt or unreachable); trying another", c.endpointName(leader))
		}
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(e ring.Endpoint) bool { return e.ID == leader.ID })
		if len(candidates) == 0 {
			select {
			case <-ctx.Done():
				return c.countTimeout(&WriteTimeoutError{CL: cl, BlockFor: req.blockFor, WriteType: WriteTypeCounter})
			case <-time.After(inDoubtPoll):
			}
			candidates = live
		}
	}
}

// writeVia sends the update to one leader (or leads it here) and returns
// the leader's answer: whether it dismissed the update as a retry, and its
// error.
func (c *Coordinator) writeVia(ctx context.Context, leader ring.Endpoint, w counterWrite, pl *placed) (dismissed bool, err error) {
	if leader.ID == c.cfg.Cluster.Self().ID {
		return c.lead(ctx, w, pl)
	}
	req := pl.req
	addr, ok := c.cfg.Cluster.Addr(leader.ID)
	if !ok {
		return false, &WriteTimeoutError{CL: w.cl, BlockFor: req.blockFor, WriteType: WriteTypeCounter}
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Sending COUNTER_WRITE message to leader %s", addr)
	}
	resp, err := c.cfg.Transport.Request(ctx, addr, transport.Message{Type: TypeCounterWrite, Body: encodeCounterWrite(w)})
	if err == nil && trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Leader %s answered", addr)
	}
	if errors.Is(err, transport.ErrNotSent) {
		// The leader is gone (killed, not yet convicted by the failure
		// detector) and never saw the update: another live replica leads.
		return false, errLeaderInDoubt
	}
	if err != nil {
		// The leader may have applied the update: its outcome is unknown.
		c.logger.Debug("counter write to leader failed", "leader", addr, "err", err)
		return false, &WriteTimeoutError{CL: w.cl, BlockFor: req.blockFor, WriteType: WriteTypeCounter}
	}
	return decodeResult(resp.Body)
}

// dismissalKey is the context key of WithDismissals' count.
type dismissalKey struct{}

// WithDismissals returns a context for CounterWrite and a function that
// reports how many of the writes made with it that returned nil their
// leaders dismissed as retries of op ids their filters had (nothing was
// applied by those attempts; an earlier one's copy is on as many replicas
// as the level asks). A first attempt dismissed is a false positive of the
// filter: the op was never counted.
func WithDismissals(ctx context.Context) (context.Context, func() int) {
	c := &dismissalsCtx{Context: ctx}
	return c, func() int { return int(c.n.Load()) }
}

// dismissalsCtx is WithDismissals' context and count, in one allocation.
type dismissalsCtx struct {
	context.Context
	n atomic.Int32
}

func (c *dismissalsCtx) Value(key any) any {
	if key == (dismissalKey{}) {
		return &c.n
	}
	return c.Context.Value(key)
}

// noteDismissed counts one dismissal in WithDismissals' count of ctx, if it
// has one.
func noteDismissed(ctx context.Context) {
	if n, ok := ctx.Value(dismissalKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
}

func (c *Coordinator) countTimeout(err error) error {
	if err == nil {
		return nil // before errors.As's targets escape to the heap
	}
	var wt *WriteTimeoutError
	var un *UnavailableError
	switch {
	case errors.As(err, &wt):
		c.stats.writeTimeouts.Add(1)
	case errors.As(err, &un):
		c.stats.unavailable.Add(1)
	}
	return err
}

// ErrClosed is returned for an update to lead after Close; nothing was
// applied.
var ErrClosed = errors.New("coordinator: closed")

// Close refuses further updates to lead and waits for those under way,
// replication included (bounded by the counter write timeout). A node
// calls it after closing its transport, so that replication to a replica
// fails at once into a hint, and before closing its hints: an update it
// applied whose replication was cut by the stop must be in a hint, which
// the restarted node holds in doubt; otherwise a retry led elsewhere meanwhile
// would be counted twice.
func (c *Coordinator) Close() {
	c.closeMu.Lock()
	c.closed = true
	c.closeMu.Unlock()
	c.leading.Wait()
	c.replicating.Close()
}

// enterLead counts an update to lead in c.leading, unless closed.
func (c *Coordinator) enterLead() bool {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed {
		return false
	}
	c.leading.Add(1)
	return true
}

// placed is a key's placement as a coordinator computed it: its natural,
// pending and live replicas and the level's requirement.
type placed struct {
	natural, pending, live []ring.Endpoint
	req                    requirement
}

// lead is the leader's part: apply locally, replicate the resulting state,
// and return once the consistency level is met (counting this node). pl is
// the placement the coordinator computed when it is this node (it checked
// the live replicas already), nil on a remote coordinator's request.
func (c *Coordinator) lead(ctx context.Context, w counterWrite, pl *placed) (dismissed bool, err error) {
	if !c.enterLead() {
		return false, ErrClosed
	}
	defer c.leading.Done()
	var natural, pending []ring.Endpoint
	var req requirement
	if pl != nil {
		natural, pending, req = pl.natural, pl.pending, pl.req
	} else {
		var live []ring.Endpoint
		natural, pending, live, _, err = c.placementPending(w.u.Table, w.u.Key, w.cl)
		if err != nil {
			return false, err
		}
		req = newRequirementFor(w, c)
		if err := req.sufficient(live); err != nil {
			return false, err
		}
	}
	if w.u.HasOp && c.catchingUp() && c.deduplicates(w.u.Table) {
		// Hints for this node may still hold op ids its filters lack: it
		// leads no deduplicated update until it has them (see PeerUp).
		return false, errLeaderInDoubt
	}
	if w.u.HasOp {
		// Free unless the filter may lack the op.
		if err := c.learnOp(ctx, w.u, natural); err != nil {
			return false, err
		}
	}
	w.u.Replicas, w.u.Pending = replicaIDs(natural), replicaIDs(pending)
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadWrite, "Leading the update here: applying it to the local replica")
	}
	if c.refused(w.u.Table) {
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadWrite, "This replica refuses writes to the table: the update fails")
		}
		return false, &WriteFailureError{CL: w.cl, BlockFor: req.blockFor, Failures: 1,
			FailedReplicas: []string{c.cfg.Cluster.Self().ID}, WriteType: WriteTypeCounter}
	}
	m, err := c.cfg.Store.Apply(w.u)
	for errors.Is(err, coltype.ErrOpInDoubt) {
		// A retry of the very update this node holds in doubt: it waits
		// for the update to be settled (then the filter dismisses it), so
		// that no other leader counts it meanwhile.
		select {
		case <-ctx.Done():
			return false, &WriteTimeoutError{CL: w.cl, BlockFor: req.blockFor, WriteType: WriteTypeCounter}
		case <-time.After(inDoubtPoll):
		}
		m, err = c.cfg.Store.Apply(w.u)
	}
	if errors.Is(err, coltype.ErrInDoubt) {
		// The cell holds another update this node led before an unclean
		// stop: nothing was applied; the coordinator tries another leader.
		return false, errLeaderInDoubt
	}
	if err != nil {
		return false, err
	}
	c.stats.led.Add(1)
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadWrite, "Applied on the leader (dismissed as a retry: %t); replicating to %d other replicas", m.Dismissed, len(natural)-1+len(pending))
	}
	if m.Dismissed {
		// A retry the column recognised: nothing was applied, but the first
		// attempt may not have reached the other replicas (it timed out).
		// The leader's copy of the cell, which holds it, is replicated like
		// a fresh update and the retry waits for the same consistency level.
		c.stats.dismissed.Add(1)
		if m.Cell.Value == nil && !m.Cell.Tombstone {
			// The cell is empty here (a false positive of the filter on a
			// cell never written): there is nothing to make durable.
			return m.Dismissed, nil
		}
	}
	self := c.cfg.Cluster.Self()
	acks := make(chan string, len(natural))
	acks <- self.DC
	remotes := 0
	// Replication outlives the answer: once the level is met the leader
	// answers, and the other replicas still get the shard (or a hint). Its
	// context is shared with the updates led at the same instant, which
	// need no cancelling; an injected WithTimeout's is cancelled once
	// every replica is done.
	var rctx context.Context
	var rcancel context.CancelFunc
	var wg *sync.WaitGroup
	if c.writeDeadlines != nil {
		rctx = c.writeDeadlines.Detached(ctx)
	} else {
		rctx, rcancel = c.cfg.WithTimeout(context.WithoutCancel(ctx), c.cfg.CounterWriteTimeout)
		wg = new(sync.WaitGroup)
	}
	var body []byte // m's encoding, shared by the replicas
	if len(natural)+len(pending) > 1 {
		body = EncodeMutation(m)
	}
	send := func(e ring.Endpoint, acks chan<- string) {
		if wg != nil {
			wg.Add(1)
		}
		c.leading.Add(1) // lead holds a count: never from zero
		c.replicating.Go(func() {
			defer c.leading.Done()
			if wg != nil {
				defer wg.Done()
			}
			c.replicateEncoded(rctx, e, m, body, acks)
		})
	}
	for _, e := range natural {
		if e.ID == self.ID {
			continue
		}
		remotes++
		send(e, acks)
	}
	for _, e := range pending {
		if e.ID == self.ID {
			continue
		}
		send(e, make(chan string, 1)) // not counted toward the level
	}
	if wg != nil {
		c.replicating.Go(func() {
			wg.Wait()
			rcancel()
		})
	}
	t := req.newTally()
	for received := 0; received <= remotes; {
		select {
		case dc := <-acks:
			received++
			if dc != "" {
				t.add(dc)
			}
			if t.met() {
				if trace.On(ctx) {
					trace.Eventf(ctx, trace.ThreadWrite, "Consistency level %v met: %d acks", w.cl, t.total)
				}
				return m.Dismissed, nil
			}
		case <-ctx.Done():
			return false, &WriteTimeoutError{CL: w.cl, Received: t.total, BlockFor: req.blockFor, WriteType: WriteTypeCounter}
		}
	}
	// Every replica answered and the level is still not met (some failed).
	return false, &WriteTimeoutError{CL: w.cl, Received: t.total, BlockFor: req.blockFor, WriteType: WriteTypeCounter}
}

// replicaIDs returns the host ids of endpoints (coltype.Update.Replicas);
// an endpoint whose id is not a host id is left out.
func replicaIDs(es []ring.Endpoint) []counters.ID {
	out := make([]counters.ID, 0, len(es))
	for _, e := range es {
		if id, err := parseHostID(e.ID); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// newRequirementFor rebuilds the coordinator's requirement on the leader:
// local levels refer to the coordinator's data center.
func newRequirementFor(w counterWrite, c *Coordinator) requirement {
	s, err := c.cfg.Tables.Strategy(w.u.Table)
	if err != nil {
		return requirement{cl: w.cl, blockFor: 1 << 30}
	}
	return newRequirement(w.cl, s, w.localDC)
}

// replicate sends the leader's new state to one replica; a replica that is
// down or does not answer gets a hint. It reports the replica's DC on ack,
// "" on failure.
func (c *Coordinator) replicate(ctx context.Context, e ring.Endpoint, m coltype.Mutation, acks chan<- string) {
	c.replicateEncoded(ctx, e, m, nil, acks)
}

// replicateEncoded is replicate with m's encoding (EncodeMutation), which
// the sends of one mutation to its replicas share; nil encodes it here.
func (c *Coordinator) replicateEncoded(ctx context.Context, e ring.Endpoint, m coltype.Mutation, body []byte, acks chan<- string) {
	if c.sendEncoded(ctx, e, m, body) == mutationAcked {
		if m.Acked != nil {
			if id, err := parseHostID(e.ID); err == nil {
				m.Acked(id)
			}
		}
		acks <- e.DC
		return
	}
	acks <- ""
}

// mutationOutcome is a replica's answer to one mutation.
type mutationOutcome int

const (
	mutationAcked   mutationOutcome = iota
	mutationNoAck                   // down or unanswered: hinted
	mutationRefused                 // the replica refused it (RefuseWrites): not hinted
)

// sendMutation sends one mutation to a replica (not this node) and returns
// its outcome; a replica that is down or does not acknowledge gets a hint,
// one that refuses the write (errWritesRefused) does not: it would refuse
// the hint as well.
func (c *Coordinator) sendMutation(ctx context.Context, e ring.Endpoint, m coltype.Mutation) mutationOutcome {
	return c.sendEncoded(ctx, e, m, nil)
}

// sendEncoded is sendMutation with m's encoding, nil to encode it here. The
// encoding is only read: the sends to several replicas share it.
func (c *Coordinator) sendEncoded(ctx context.Context, e ring.Endpoint, m coltype.Mutation, body []byte) mutationOutcome {
	addr, ok := c.cfg.Cluster.Addr(e.ID)
	if !ok || !c.cfg.Cluster.IsUp(e.ID) {
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadWrite, "Replica %s is down: storing a hint", c.endpointName(e))
		}
		c.hint(e.ID, m)
		return mutationNoAck
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadWrite, "Sending MUTATION message to replica %s", addr)
	}
	if body == nil {
		body = EncodeMutation(m)
	}
	resp, err := c.cfg.Transport.Request(ctx, addr, transport.Message{Type: TypeMutation, Body: body})
	for pause := time.Millisecond; isHeld(err) && ctx.Err() == nil; pause = min(2*pause, 50*time.Millisecond) {
		// The replica holds the op behind an earlier one of its cell that
		// is still on its way (replicated concurrently): send it again
		// once that one had time to arrive; a duplicate is ignored.
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadWrite, "Replica %s holds the op behind an earlier one: sending it again", addr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
			resp, err = c.cfg.Transport.Request(ctx, addr, transport.Message{Type: TypeMutation, Body: body})
		}
	}
	if isWritesRefused(err) {
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadWrite, "Replica %s refused the write", addr)
		}
		return mutationRefused
	}
	if err != nil {
		c.logger.Debug("replication failed; hinting", "replica", addr, "err", err)
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadWrite, "Replica %s did not acknowledge (%v): storing a hint", addr, err)
		}
		c.hint(e.ID, m)
		return mutationNoAck
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadWrite, "Replica %s acknowledged", addr)
	}
	c.mutationAnswered(ctx, m, resp.Body)
	return mutationAcked
}

// isHeld reports whether err is a replica's coltype.ErrHeld, here or from
// a peer.
func isHeld(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, coltype.ErrHeld) {
		return true
	}
	var re *transport.RemoteError
	return errors.As(err, &re) && strings.Contains(re.Msg, coltype.HeldMessage)
}

// isWritesRefused reports whether err is a replica's errWritesRefused, here
// or from a peer.
func isWritesRefused(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errWritesRefused) {
		return true
	}
	var re *transport.RemoteError
	return errors.As(err, &re) && strings.Contains(re.Msg, writesRefusedMsg)
}

// refused reports whether this replica refuses writes to table.
func (c *Coordinator) refused(table uint64) bool {
	return c.cfg.RefuseWrites != nil && c.cfg.RefuseWrites(table)
}

// applyMutation applies a mutation to the local replica, unless it
// refuses writes to the table.
func (c *Coordinator) applyMutation(m coltype.Mutation) error {
	if c.refused(m.Table) {
		return errWritesRefused
	}
	return c.cfg.Store.ApplyMutation(m)
}

// endpointName names a replica in trace events: its address, or "this
// node".
func (c *Coordinator) endpointName(e ring.Endpoint) string {
	if e.ID == c.cfg.Cluster.Self().ID {
		return "this node"
	}
	if addr, ok := c.cfg.Cluster.Addr(e.ID); ok {
		return string(addr)
	}
	return e.ID
}

func (c *Coordinator) hint(hostID string, m coltype.Mutation) {
	if c.cfg.Hints == nil {
		return
	}
	if err := c.cfg.Hints.Store(hostID, m); err != nil {
		c.logger.Error("storing hint failed", "target", hostID, "err", err)
	}
}

// Handle serves the coordinator's message types; the node's transport
// handler passes them here.
func (c *Coordinator) Handle(ctx context.Context, from transport.Addr, m transport.Message) (transport.Message, error) {
	switch m.Type {
	case TypeCounterWrite:
		w, err := decodeCounterWrite(m.Body)
		if err != nil {
			return transport.Message{}, err
		}
		ctx, cancel := c.writeTimeout(ctx)
		defer cancel()
		dismissed, err := c.lead(ctx, w, nil)
		return transport.Message{Type: TypeCounterWrite, Body: encodeResult(dismissed, err)}, nil
	case TypeMutation:
		return c.handleMutation(ctx, m.Body)
	case TypeScan:
		return c.handleScan(m.Body)
	case TypeExchange:
		return c.handleExchange(m.Body)
	case TypeOpStatus:
		return c.handleOpStatus(m.Body)
	case TypeHintPull:
		return c.handleHintPull(ctx, m.Body)
	case TypeRead:
		table, key, err := decodeRead(m.Body)
		if err != nil {
			return transport.Message{}, err
		}
		ctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.ReadTimeout)
		defer cancel()
		r, found, err := c.readLocal(ctx, table, key)
		if err != nil {
			return transport.Message{}, err
		}
		return transport.Message{Type: TypeRead, Body: encodeRow(r, found)}, nil
	}
	return transport.Message{}, fmt.Errorf("coordinator: unexpected message type %d", m.Type)
}
