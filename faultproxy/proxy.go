// Package faultproxy is a CQL-aware fault proxy: one proxy per server node,
// in front of any CQL server (idemkv or Apache Cassandra), that forwards
// frames both ways, knows which response answers which request (by stream
// id), and injects the bench's faults into the requests a filter selects
// (counter UPDATEs by default): a lost acknowledgement (the request is
// forwarded and applied, the server's answer dropped), an answer delayed
// past the client's timeout, or a reset connection. Handshakes, OPTIONS,
// STARTUP, REGISTER, PREPARE and system table reads are never faulted.
//
// The proxies of a Group share their schedule, the attempt numbers of op
// ids and their event log, and rewrite the server addresses in
// system.local, system.peers and system.peers_v2 rows and in TOPOLOGY and
// STATUS events into proxy addresses: a driver discovers only the proxies,
// with the servers' tokens, so token-aware routing stays honest.
package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/cql/frame"
)

// Config configures a Group.
type Config struct {
	Schedule Schedule
	// Match selects, by statement, the requests that may be faulted: a
	// QUERY's text, the text an EXECUTE's id was prepared from, any
	// statement of a BATCH. Default IsUpdate.
	Match func(stmt string) bool
	// OnEvent, when set, is called with every fault as it is injected,
	// from the connection's goroutine; it must not block.
	OnEvent func(Event)
	// Logger receives a line per connection closed on an error (a
	// malformed frame, a failed dial). Default: discard.
	Logger *slog.Logger
	// DialTimeout bounds the dial to the server (default 5 s).
	DialTimeout time.Duration
	// ForgetAfter, when positive, bounds the memory of op ids: an op id
	// not seen for between ForgetAfter and twice that is forgotten (a
	// later attempt counts as a first). Set it above the clients' retry
	// horizon. Zero keeps every op id until Forget.
	ForgetAfter time.Duration
}

// Group is a set of proxies, one per server node, that share a fault
// schedule, the attempt numbers of op ids, the prepared statements seen,
// the address map and an event log. It is safe for concurrent use.
type Group struct {
	cfg   Config
	sched atomic.Pointer[Schedule]
	addrs atomic.Pointer[addrMap]

	mu       sync.Mutex
	proxies  []*Proxy
	prepared map[string]prepared
	ops      map[client.OpID]*opState
	oldOps   map[client.OpID]*opState // the previous generation, under ForgetAfter
	rotated  time.Time
	now      func() time.Time // time.Now; tests fake it
	anon     uint64
	dups     map[uint64]int64
	events   []Event
	counts   map[string]int64
	closed   bool
}

// prepared is what a group knows of a prepared statement.
type prepared struct {
	match bool               // the filter selects it
	table string             // the system peer table it reads, or ""
	cols  []frame.ColumnSpec // its result metadata
}

// opState is what a group knows of an op id.
type opState struct {
	arrivals int
	acked    bool // the server acknowledged an attempt
}

// NewGroup returns a group with no proxies.
func NewGroup(cfg Config) (*Group, error) {
	if err := cfg.Schedule.Validate(); err != nil {
		return nil, err
	}
	if cfg.Match == nil {
		cfg.Match = IsUpdate
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	g := &Group{cfg: cfg, prepared: map[string]prepared{}, ops: map[client.OpID]*opState{}, rotated: time.Now(), now: time.Now,
		dups: map[uint64]int64{}, counts: map[string]int64{}}
	g.addrs.Store(&addrMap{})
	if err := g.SetSchedule(cfg.Schedule); err != nil {
		return nil, err
	}
	return g, nil
}

// SetSchedule replaces the fault schedule; requests that arrive from now
// on follow it.
func (g *Group) SetSchedule(s Schedule) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.DelayBy == 0 {
		s.DelayBy = DefaultDelayBy
	}
	g.sched.Store(&s)
	return nil
}

// Schedule returns the current fault schedule.
func (g *Group) Schedule() Schedule { return *g.sched.Load() }

// Listen starts a proxy that accepts connections on listen (host:port; port
// 0 picks one) and forwards them to the server at target (host:port). The
// proxy's node number is its 1-based position in the group.
func (g *Group) Listen(listen, target string) (*Proxy, error) {
	taddr, err := net.ResolveTCPAddr("tcp", target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: server %s: %w", target, err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	laddr := ln.Addr().(*net.TCPAddr).AddrPort()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		_ = ln.Close()
		return nil, errors.New("faultproxy: group closed")
	}
	p := &Proxy{g: g, node: len(g.proxies) + 1, ln: ln, target: target, open: map[*conn]struct{}{}}
	g.proxies = append(g.proxies, p)
	old := g.addrs.Load()
	m := &addrMap{pairs: append(append([]addrPair(nil), old.pairs...),
		addrPair{server: netip.AddrPortFrom(taddr.AddrPort().Addr().Unmap(), taddr.AddrPort().Port()), proxy: netip.AddrPortFrom(laddr.Addr().Unmap(), laddr.Port())})}
	g.addrs.Store(m)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Proxies returns the group's proxies in the order they were started.
func (g *Group) Proxies() []*Proxy {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*Proxy(nil), g.proxies...)
}

// Close stops every proxy and closes every connection.
func (g *Group) Close() error {
	g.mu.Lock()
	g.closed = true
	ps := append([]*Proxy(nil), g.proxies...)
	g.mu.Unlock()
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// Events returns a copy of the faults injected so far, in order.
func (g *Group) Events() []Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Event(nil), g.events...)
}

// Counts returns how many faults of each kind were injected.
func (g *Group) Counts() map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := make(map[string]int64, len(g.counts))
	for k, v := range g.counts {
		m[k] = v
	}
	return m
}

// Duplicates returns, per op-id client id, the updates that reached a
// server after an earlier attempt of their op had been acknowledged by it:
// the retries a correct FBF counter dismisses and a vanilla counter counts
// again.
func (g *Group) Duplicates() map[uint64]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := make(map[uint64]int64, len(g.dups))
	for k, v := range g.dups {
		m[k] = v
	}
	return m
}

// Forget drops what the group knows of op ids (attempt numbers, which were
// acknowledged), so that memory does not grow from run to run; the counts
// and duplicates stay.
func (g *Group) Forget() {
	g.mu.Lock()
	g.ops, g.oldOps = map[client.OpID]*opState{}, nil
	g.mu.Unlock()
}

func (g *Group) record(ev Event) {
	ev.At = time.Now()
	g.mu.Lock()
	g.events = append(g.events, ev)
	g.counts[ev.Kind]++
	g.mu.Unlock()
	if g.cfg.OnEvent != nil {
		g.cfg.OnEvent(ev)
	}
}

// arrive numbers an attempt of op (or, without one, the next anonymous
// request) and counts a duplicate when an earlier attempt was acknowledged.
func (g *Group) arrive(op client.OpID, hasOp bool, statements int) (*opState, client.OpID, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !hasOp {
		g.anon++
		return nil, client.OpID{Sequence: g.anon}, 1
	}
	if d := g.cfg.ForgetAfter; d > 0 {
		if now := g.now(); now.Sub(g.rotated) >= d {
			g.oldOps, g.ops, g.rotated = g.ops, map[client.OpID]*opState{}, now
		}
	}
	st := g.ops[op]
	if st == nil {
		if st = g.oldOps[op]; st == nil {
			st = &opState{}
		}
		g.ops[op] = st
	}
	st.arrivals++
	if st.acked {
		g.dups[op.Client] += int64(statements)
	}
	return st, op, st.arrivals
}

func (g *Group) acked(st *opState) {
	g.mu.Lock()
	st.acked = true
	g.mu.Unlock()
}

func (g *Group) preparedInfo(id []byte) (prepared, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.prepared[string(id)]
	return p, ok
}

func (g *Group) addPrepared(id []byte, stmt string, cols []frame.ColumnSpec) {
	p := prepared{match: g.cfg.Match(stmt), table: systemTable(stmt), cols: cols}
	g.mu.Lock()
	g.prepared[string(id)] = p
	g.mu.Unlock()
}

// Stats are a proxy's counts.
type Stats struct {
	Conns    int64 // connections accepted
	Requests int64 // request frames forwarded
	Matched  int64 // requests the filter selected
	Faults   int64 // faults injected
	Rewrites int64 // result and event frames whose addresses were rewritten
	Events   int64 // of which TOPOLOGY_CHANGE and STATUS_CHANGE events
}

// Proxy is one proxy of a Group, in front of one server.
type Proxy struct {
	g      *Group
	node   int
	ln     net.Listener
	target string

	conns, requests, matched, faults, rewrites, events atomic.Int64

	mu     sync.Mutex
	open   map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Addr is the proxy's listen address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the server's address.
func (p *Proxy) Target() string { return p.target }

// Node is the proxy's 1-based position in its group.
func (p *Proxy) Node() int { return p.node }

// Stats returns the proxy's counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{Conns: p.conns.Load(), Requests: p.requests.Load(), Matched: p.matched.Load(),
		Faults: p.faults.Load(), Rewrites: p.rewrites.Load(), Events: p.events.Load()}
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	cs := make([]*conn, 0, len(p.open))
	for c := range p.open {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("faultproxy: close %s: %w", p.Addr(), err)
	}
	return nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.g.cfg.Logger.Warn("faultproxy: accept", "proxy", p.Addr(), "err", err)
			}
			return
		}
		p.conns.Add(1)
		sc, err := net.DialTimeout("tcp", p.target, p.g.cfg.DialTimeout)
		if err != nil {
			p.g.cfg.Logger.Warn("faultproxy: dial server, closing client connection", "proxy", p.Addr(), "server", p.target, "err", err)
			_ = cc.Close()
			continue
		}
		c := &conn{p: p, client: cc, server: sc, cw: bufio.NewWriterSize(cc, 64<<10), pending: map[int16]*request{}, timers: map[*time.Timer]struct{}{}}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = cc.Close()
			_ = sc.Close()
			return
		}
		p.open[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go c.fromClient()
		go c.fromServer()
	}
}
