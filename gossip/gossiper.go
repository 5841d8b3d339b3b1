package gossip

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemkv/idemkv/transport"
)

// Defaults of Config.
const (
	DefaultInterval            = time.Second
	DefaultPhiConvictThreshold = 8.0
)

// maxGenerationJump is how far ahead of the known generation of a node a
// new generation may be (Cassandra's MAX_GENERATION_DIFFERENCE, one year):
// a larger jump is taken for a corrupt state and ignored.
const maxGenerationJump = int64(365 * 24 * time.Hour)

// Config configures a Gossiper.
type Config struct {
	// Self is the node's initial state. HostID is required; Addr defaults
	// to Transport.Addr(), Status to normal, Generation to Now() in unix
	// nanoseconds.
	Self NodeState
	// Seeds are the peer addresses a node contacts to learn the cluster.
	// The node's own address may be among them.
	Seeds []transport.Addr
	// Known are states of peers remembered from an earlier run (a node's
	// persisted peers, as Cassandra's system.peers). The gossiper starts
	// knowing them, Down, so that their tokens are in the ring view and
	// its rounds contact them as unreachable peers besides the seeds; the
	// first fresh state heard of a peer replaces its remembered one
	// (whatever the generation gap) and marks it Up. Give them a dead
	// status (shutdown) so that nodes that learn them second-hand do not
	// take them for up either. States that are invalid, of this node
	// itself, or of a host id already given are ignored.
	Known []NodeState
	// Transport carries the node's gossip messages.
	Transport transport.Transport
	// Interval is the period of Start's rounds, and the timeout of each
	// exchange; the failure detector's initial and maximum recorded
	// inter-arrival time are twice it. Default 1s.
	Interval time.Duration
	// PhiConvictThreshold is the failure detector's sensitivity: a peer is
	// convicted (Down) when phi exceeds it. Higher is slower and surer.
	// Default 8 (Cassandra's phi_convict_threshold).
	PhiConvictThreshold float64
	// Now is the clock; default time.Now. Tests inject virtual time.
	Now func() time.Time
	// Rand chooses gossip peers; default a generator seeded from the clock.
	// The gossiper serializes its use.
	Rand *rand.Rand
	// Logger receives membership changes (Info) and failed exchanges
	// (Debug); default discards.
	Logger *slog.Logger
}

// Gossiper is one node's view of cluster membership, kept up to date by
// gossip. Its methods are safe for concurrent use.
type Gossiper struct {
	cfg      Config
	tr       transport.Transport
	log      *slog.Logger
	seeds    []transport.Addr // without self
	maxPause time.Duration

	mu        sync.Mutex
	self      NodeState
	peers     map[string]*peer
	order     []string // host ids of peers, sorted
	rng       *rand.Rand
	lastCheck time.Time // last failure-detector pass
	pausedAt  time.Time // last detected local pause
	stopped   bool
	cancel    context.CancelFunc // of Start's loop
	done      chan struct{}      // closed when Start's loop returns
	queue     []pending          // events not yet delivered
	subs      []*subscriber
	nextSub   uint64

	deliverMu sync.Mutex // held while delivering events, one at a time
}

type peer struct {
	state NodeState
	up    bool
	fd    arrivalWindow
	// remembered: the state came from Config.Known and nothing fresher
	// was heard since.
	remembered bool
}

type subscriber struct {
	id uint64
	fn func(Event)
}

type pending struct {
	ev   Event
	subs []*subscriber
}

// New returns a gossiper that knows only itself. It sends nothing until
// Round or Start; the node's transport handler must pass it the gossip
// message types (IsGossipType) through Handle.
func New(cfg Config) (*Gossiper, error) {
	if cfg.Transport == nil {
		return nil, errors.New("gossip: Config.Transport is nil")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("gossip: negative Interval %v", cfg.Interval)
	}
	if cfg.PhiConvictThreshold == 0 {
		cfg.PhiConvictThreshold = DefaultPhiConvictThreshold
	}
	if !(cfg.PhiConvictThreshold > 0) {
		return nil, fmt.Errorf("gossip: PhiConvictThreshold %v is not positive", cfg.PhiConvictThreshold)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	self := cfg.Self.clone()
	if self.Addr == "" {
		self.Addr = cfg.Transport.Addr()
	}
	if self.Status == "" {
		self.Status = StatusNormal
	}
	if self.Generation == 0 {
		self.Generation = cfg.Now().UnixNano()
	}
	if err := self.validate(); err != nil {
		return nil, err
	}
	if cfg.Rand == nil {
		h := fnv.New64a()
		h.Write([]byte(self.HostID))
		cfg.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), h.Sum64()))
	}
	g := &Gossiper{
		cfg:      cfg,
		tr:       cfg.Transport,
		log:      cfg.Logger.With("host", self.HostID[:8]),
		maxPause: 5 * cfg.Interval,
		self:     self,
		peers:    make(map[string]*peer),
		rng:      cfg.Rand,
	}
	for _, s := range cfg.Seeds {
		if s != self.Addr && s != cfg.Transport.Addr() && !slices.Contains(g.seeds, s) {
			g.seeds = append(g.seeds, s)
		}
	}
	for _, k := range cfg.Known {
		k = k.clone()
		if k.validate() != nil || k.HostID == self.HostID || k.Addr == self.Addr {
			continue
		}
		if _, dup := g.peers[k.HostID]; dup {
			continue
		}
		g.peers[k.HostID] = &peer{state: k, fd: newArrivalWindow(2*cfg.Interval, 2*cfg.Interval), remembered: true}
		i, _ := slices.BinarySearch(g.order, k.HostID)
		g.order = slices.Insert(g.order, i, k.HostID)
	}
	return g, nil
}

// Self returns the node's own current state.
func (g *Gossiper) Self() NodeState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.self.clone()
}

// UpdateSelf changes the node's own state through f and bumps its Version;
// the change is gossiped from the next round on. f must not block; it may
// not change HostID, Generation or Version (such changes are undone). It
// panics if the result cannot be announced (unknown status, fields beyond
// the wire limits): that is a bug of the caller.
func (g *Gossiper) UpdateSelf(f func(*NodeState)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.self.clone()
	f(&s)
	s.HostID, s.Generation, s.Version = g.self.HostID, g.self.Generation, g.self.Version+1
	if err := s.validate(); err != nil {
		panic(fmt.Sprintf("gossip: UpdateSelf: %v", err))
	}
	g.self = s
}

// Nodes returns every known node, self included (always Up), sorted by
// HostID. Nodes that left or shut down are included, Down.
func (g *Gossiper) Nodes() []Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	out := make([]Node, 0, len(g.order)+1)
	for _, id := range g.order {
		out = append(out, g.nodeLocked(g.peers[id], now))
	}
	i, _ := slices.BinarySearchFunc(out, g.self.HostID, func(n Node, id string) int {
		return strings.Compare(n.HostID, id)
	})
	return slices.Insert(out, i, g.selfNodeLocked(now))
}

// Node returns the node with the given host id.
func (g *Gossiper) Node(hostID string) (Node, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	if hostID == g.self.HostID {
		return g.selfNodeLocked(now), true
	}
	p, ok := g.peers[hostID]
	if !ok {
		return Node{}, false
	}
	return g.nodeLocked(p, now), true
}

// Addr returns the peer address of the node with hostID, as Node does
// without copying the node's state (the coordinator asks it for every
// message it sends).
func (g *Gossiper) Addr(hostID string) (transport.Addr, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if hostID == g.self.HostID {
		return g.self.Addr, true
	}
	p, ok := g.peers[hostID]
	if !ok {
		return "", false
	}
	return p.state.Addr, true
}

// NodeByAddr returns the node announcing peer address a. Should two host
// ids announce the same address (a node replaced by a new one), the one of
// highest generation wins.
func (g *Gossiper) NodeByAddr(a transport.Addr) (Node, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	if a == g.self.Addr {
		return g.selfNodeLocked(now), true
	}
	var best *peer
	for _, id := range g.order {
		p := g.peers[id]
		if p.state.Addr == a && (best == nil || p.state.Generation > best.state.Generation) {
			best = p
		}
	}
	if best == nil {
		return Node{}, false
	}
	return g.nodeLocked(best, now), true
}

// IsUp reports whether the node is known and up; self is always up.
func (g *Gossiper) IsUp(hostID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if hostID == g.self.HostID {
		return true
	}
	p, ok := g.peers[hostID]
	return ok && p.up
}

// Subscribe registers fn to receive events about other nodes, in the order
// they happen, one at a time, never while the gossiper's lock is held (fn
// may call the gossiper's methods). Events are delivered on the goroutine
// whose call (Round, Handle, Stop) caused them, before that call returns,
// unless another delivery is in progress, which then delivers them. fn
// should be quick and must not call Stop (Stop waits for a round that may
// be delivering). cancel stops later deliveries; one already started may
// still complete.
func (g *Gossiper) Subscribe(fn func(Event)) (cancel func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextSub++
	s := &subscriber{id: g.nextSub, fn: fn}
	g.subs = append(g.subs, s)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.subs = slices.DeleteFunc(g.subs, func(x *subscriber) bool { return x == s })
		for i := range g.queue {
			g.queue[i].subs = slices.DeleteFunc(slices.Clone(g.queue[i].subs), func(x *subscriber) bool { return x == s })
		}
	}
}

// Handle serves a gossip message (IsGossipType) from a peer and returns the
// response.
func (g *Gossiper) Handle(ctx context.Context, from transport.Addr, m transport.Message) (transport.Message, error) {
	switch m.Type {
	case TypeSyn:
		ds, err := decodeSyn(m.Body)
		if err != nil {
			return transport.Message{}, err
		}
		g.mu.Lock()
		states, reqs := g.examineLocked(ds)
		g.mu.Unlock()
		return transport.Message{Type: TypeAck, Body: encodeAck(states, reqs)}, nil
	case TypeAck2, TypeShutdown:
		ss, err := decodeStates(m.Body)
		if err != nil {
			return transport.Message{}, fmt.Errorf("%v: %w", m.Type, err)
		}
		if m.Type == TypeShutdown && (len(ss) != 1 || ss[0].Status != StatusShutdown) {
			return transport.Message{}, fmt.Errorf("gossip: SHUTDOWN from %s does not carry one shutdown state", from)
		}
		g.mu.Lock()
		g.applyLocked(ss, g.cfg.Now())
		g.mu.Unlock()
		g.flush()
		return transport.Message{Type: m.Type, Body: encodeStates(nil)}, nil
	}
	return transport.Message{}, fmt.Errorf("gossip: unknown message type %d from %s", m.Type, from)
}

// Round runs one gossip round now: it bumps the node's heartbeat, exchanges
// states with one random live peer, perhaps with one unreachable peer
// (probability unreachable/(live+1)) and perhaps with a seed (always when
// no peer is live; else, unless the live peer was a seed and there are at
// least as many live peers as seeds, with probability seeds/(live+unreachable)),
// then runs the failure detector. Each exchange waits at most Interval.
// Round does nothing after Stop.
func (g *Gossiper) Round(ctx context.Context) {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return
	}
	g.self.Version++
	targets := g.chooseTargetsLocked()
	g.mu.Unlock()

	for _, to := range targets {
		g.exchange(ctx, to)
	}

	g.mu.Lock()
	g.checkLocked(g.cfg.Now())
	g.mu.Unlock()
	g.flush()
}

// chooseTargetsLocked applies Cassandra's rules for the peers of one round.
func (g *Gossiper) chooseTargetsLocked() []transport.Addr {
	var live, unreachable []transport.Addr
	for _, id := range g.order {
		p := g.peers[id]
		switch {
		case p.up:
			live = append(live, p.state.Addr)
		case p.state.Status != StatusLeft:
			unreachable = append(unreachable, p.state.Addr)
		}
	}
	var targets []transport.Addr
	toSeed := false
	if len(live) > 0 {
		to := live[g.rng.IntN(len(live))]
		targets = append(targets, to)
		toSeed = slices.Contains(g.seeds, to)
	}
	if len(unreachable) > 0 {
		prob := float64(len(unreachable)) / float64(len(live)+1)
		if g.rng.Float64() < prob {
			targets = append(targets, unreachable[g.rng.IntN(len(unreachable))])
		}
	}
	if len(g.seeds) > 0 && (!toSeed || len(live) < len(g.seeds)) {
		if len(live) == 0 {
			targets = append(targets, g.seeds[g.rng.IntN(len(g.seeds))])
		} else {
			prob := float64(len(g.seeds)) / float64(len(live)+len(unreachable))
			if g.rng.Float64() <= prob {
				targets = append(targets, g.seeds[g.rng.IntN(len(g.seeds))])
			}
		}
	}
	return targets
}

// exchange runs SYN → ACK → ACK2 with one peer.
func (g *Gossiper) exchange(ctx context.Context, to transport.Addr) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Interval)
	defer cancel()
	g.mu.Lock()
	syn := encodeSyn(g.digestsLocked())
	g.mu.Unlock()
	resp, err := g.tr.Request(ctx, to, transport.Message{Type: TypeSyn, Body: syn})
	if err != nil {
		g.log.Debug("gossip: SYN failed", "peer", to, "err", err)
		return
	}
	if resp.Type != TypeAck {
		g.log.Warn("gossip: SYN answered with wrong type", "peer", to, "type", resp.Type)
		return
	}
	states, reqs, err := decodeAck(resp.Body)
	if err != nil {
		g.log.Warn("gossip: bad ACK", "peer", to, "err", err)
		return
	}
	g.mu.Lock()
	g.applyLocked(states, g.cfg.Now())
	reply := g.answerLocked(reqs)
	g.mu.Unlock()
	g.flush()
	if len(reply) == 0 {
		return
	}
	if _, err := g.tr.Request(ctx, to, transport.Message{Type: TypeAck2, Body: encodeStates(reply)}); err != nil {
		g.log.Debug("gossip: ACK2 failed", "peer", to, "err", err)
	}
}

// digestsLocked lists the digests of every known state, self included.
func (g *Gossiper) digestsLocked() []digest {
	ds := make([]digest, 0, len(g.order)+1)
	ds = append(ds, g.self.digest())
	for _, id := range g.order {
		ds = append(ds, g.peers[id].state.digest())
	}
	return ds
}

// localLocked returns the known state of a host id (self included).
func (g *Gossiper) localLocked(id string) (*NodeState, bool) {
	if id == g.self.HostID {
		return &g.self, true
	}
	if p, ok := g.peers[id]; ok {
		return &p.state, true
	}
	return nil, false
}

// examineLocked answers a SYN: the states newer than the sender's digests
// or absent from them, and requests for the states the sender has newer or
// that are unknown here.
func (g *Gossiper) examineLocked(ds []digest) (send []NodeState, reqs []digest) {
	seen := make(map[string]bool, len(ds))
	for _, d := range ds {
		if seen[d.hostID] {
			continue
		}
		seen[d.hostID] = true
		local, ok := g.localLocked(d.hostID)
		switch {
		case !ok:
			reqs = append(reqs, digest{hostID: d.hostID})
		case local.digest().compare(d) > 0:
			send = append(send, local.clone())
		case local.digest().compare(d) < 0 && d.hostID != g.self.HostID:
			reqs = append(reqs, local.digest())
		}
	}
	if !seen[g.self.HostID] {
		send = append(send, g.self.clone())
	}
	for _, id := range g.order {
		if !seen[id] {
			send = append(send, g.peers[id].state.clone())
		}
	}
	return send, reqs
}

// answerLocked returns the states newer than the requested digests.
func (g *Gossiper) answerLocked(reqs []digest) []NodeState {
	var out []NodeState
	for _, r := range reqs {
		if local, ok := g.localLocked(r.hostID); ok && local.digest().compare(r) > 0 {
			out = append(out, local.clone())
		}
	}
	return out
}

// applyLocked merges states received from a peer.
func (g *Gossiper) applyLocked(ss []NodeState, now time.Time) {
	for i := range ss {
		g.applyOneLocked(ss[i].clone(), now)
	}
}

func (g *Gossiper) applyOneLocked(r NodeState, now time.Time) {
	if r.HostID == g.self.HostID {
		if r.digest().compare(g.self.digest()) > 0 {
			g.log.Warn("gossip: a peer holds a newer state of this node; another process with the same host id?",
				"generation", r.Generation, "version", r.Version)
		}
		return
	}
	p, ok := g.peers[r.HostID]
	if !ok {
		p = &peer{state: r, fd: newArrivalWindow(2*g.cfg.Interval, 2*g.cfg.Interval)}
		p.fd.report(now)
		p.up = !r.Status.dead()
		g.peers[r.HostID] = p
		i, _ := slices.BinarySearch(g.order, r.HostID)
		g.order = slices.Insert(g.order, i, r.HostID)
		g.log.Info("gossip: node joined", "peer", r.HostID, "addr", r.Addr, "status", r.Status, "up", p.up)
		g.emitLocked(EventJoined, p, now)
		return
	}
	l := p.state
	switch {
	case r.Generation > l.Generation:
		if r.Generation-l.Generation > maxGenerationJump && !p.remembered {
			g.log.Warn("gossip: ignoring implausible generation", "peer", r.HostID,
				"known", l.Generation, "received", r.Generation)
			return
		}
		wasUp := p.up
		p.state = r
		p.remembered = false
		p.fd = newArrivalWindow(2*g.cfg.Interval, 2*g.cfg.Interval)
		p.fd.report(now)
		p.up = !r.Status.dead()
		g.log.Info("gossip: node restarted", "peer", r.HostID, "generation", r.Generation, "up", p.up)
		g.emitLocked(EventRestarted, p, now)
		switch {
		case p.up && !wasUp:
			g.emitLocked(EventUp, p, now)
		case !p.up && wasUp:
			g.emitLocked(EventDown, p, now)
		}
	case r.Generation == l.Generation && r.Version > l.Version:
		p.state = r
		p.remembered = false
		p.fd.report(now)
		if !sameContent(l, r) {
			g.emitLocked(EventChanged, p, now)
		}
		switch {
		case r.Status == StatusLeft && l.Status != StatusLeft:
			p.up = false
			g.log.Info("gossip: node left", "peer", r.HostID)
			g.emitLocked(EventLeft, p, now)
		case r.Status.dead():
			if p.up {
				p.up = false
				g.log.Info("gossip: node down", "peer", r.HostID, "status", r.Status)
				g.emitLocked(EventDown, p, now)
			}
		case !p.up:
			p.up = true
			g.log.Info("gossip: node up", "peer", r.HostID)
			g.emitLocked(EventUp, p, now)
		}
	}
}

// checkLocked is the failure detector's pass: it convicts every up peer
// whose phi exceeds the threshold, unless this node itself was paused (no
// pass for 5 intervals): then it convicts nobody for 5 intervals, since the
// silence was its own (Cassandra's MAX_LOCAL_PAUSE rule).
func (g *Gossiper) checkLocked(now time.Time) {
	if !g.lastCheck.IsZero() && now.Sub(g.lastCheck) > g.maxPause {
		g.log.Warn("gossip: local pause; not convicting for a while", "pause", now.Sub(g.lastCheck))
		g.pausedAt = now
	}
	g.lastCheck = now
	if !g.pausedAt.IsZero() && now.Sub(g.pausedAt) < g.maxPause {
		return
	}
	for _, id := range g.order {
		p := g.peers[id]
		if !p.up {
			continue
		}
		if phi := p.fd.phi(now); phi > g.cfg.PhiConvictThreshold {
			p.up = false
			g.log.Info("gossip: node down", "peer", id, "phi", phi)
			g.emitLocked(EventDown, p, now)
		}
	}
}

func (g *Gossiper) nodeLocked(p *peer, now time.Time) Node {
	return Node{NodeState: p.state.clone(), Up: p.up, LastSeen: p.fd.last, Phi: p.fd.phi(now)}
}

func (g *Gossiper) selfNodeLocked(now time.Time) Node {
	return Node{NodeState: g.self.clone(), Up: true, LastSeen: now}
}

func (g *Gossiper) emitLocked(k EventKind, p *peer, now time.Time) {
	if len(g.subs) == 0 {
		return
	}
	g.queue = append(g.queue, pending{Event{k, g.nodeLocked(p, now)}, slices.Clone(g.subs)})
}

// flush delivers queued events in order. Only one goroutine delivers at a
// time; one that finds another delivering leaves its events to it.
func (g *Gossiper) flush() {
	for {
		if !g.deliverMu.TryLock() {
			return
		}
		for {
			g.mu.Lock()
			if len(g.queue) == 0 {
				g.queue = nil
				g.mu.Unlock()
				break
			}
			e := g.queue[0]
			g.queue = g.queue[1:]
			g.mu.Unlock()
			for _, s := range e.subs {
				s.fn(e.ev)
			}
		}
		g.deliverMu.Unlock()
		g.mu.Lock()
		more := len(g.queue) > 0
		g.mu.Unlock()
		if !more {
			return
		}
	}
}

// Start runs rounds every Interval on the real clock until Stop. It does
// nothing if already started or stopped.
func (g *Gossiper) Start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || g.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		t := time.NewTicker(g.cfg.Interval)
		defer t.Stop()
		for {
			g.Round(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}(g.done)
}

// Abort stops gossiping without telling anyone, as a crashed process
// would: the peers convict this node by its silence. Later calls, and
// Stop after it, do nothing.
func (g *Gossiper) Abort() { g.halt() }

// halt stops the rounds; it reports false if they were already stopped.
func (g *Gossiper) halt() bool {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return false
	}
	g.stopped = true
	cancel, done := g.cancel, g.done
	g.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return true
}

// Stop stops the rounds, sets the node's status to shutdown and announces
// it to every live peer (which mark the node Down at once), waiting for
// their answers until ctx ends. A joining node, or one that left, keeps its
// status and announces nothing. Later calls do nothing. Handle keeps
// answering, with the shutdown state; the transport stays the caller's.
func (g *Gossiper) Stop(ctx context.Context) {
	if !g.halt() {
		return
	}

	g.mu.Lock()
	if g.self.Status == StatusJoining || g.self.Status == StatusLeft {
		// A joining node is not in its peers' rings and a node that left
		// is out of them: announcing shutdown would put its tokens back.
		// It stops silently; the peers convict it by its silence (a left
		// node they already hold down).
		g.mu.Unlock()
		return
	}
	g.self.Status = StatusShutdown
	g.self.Version++
	body := encodeStates([]NodeState{g.self.clone()})
	var live []transport.Addr
	for _, id := range g.order {
		if p := g.peers[id]; p.up {
			live = append(live, p.state.Addr)
		}
	}
	g.mu.Unlock()

	var wg sync.WaitGroup
	for _, to := range live {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, g.cfg.Interval)
			defer cancel()
			if _, err := g.tr.Request(ctx, to, transport.Message{Type: TypeShutdown, Body: body}); err != nil {
				g.log.Debug("gossip: SHUTDOWN failed", "peer", to, "err", err)
			}
		})
	}
	wg.Wait()
}
