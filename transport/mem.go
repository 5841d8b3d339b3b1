package transport

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"
)

// Fault describes what happens to messages on a directed link. Probabilities
// are in [0, 1]; the zero Fault delivers everything at once and in order.
type Fault struct {
	// Drop is the probability that a message is lost.
	Drop float64
	// Duplicate is the probability that a message is delivered twice (the
	// copy right after the original).
	Duplicate float64
	// Delay is added to every message, and a uniform random part of Jitter
	// on top of it. Messages with different delays overtake each other.
	Delay, Jitter time.Duration
	// Reorder is the probability that a message is held back until the next
	// message on the link has passed it (or, if none comes, for
	// ReorderHoldMax plus its delay).
	Reorder float64
}

// ReorderHoldMax bounds how long a message chosen for reordering waits for
// a later message to overtake it.
const ReorderHoldMax = 10 * time.Millisecond

// Counts are the in-memory network's counters for one message type. A
// response is counted under the type of the request it answers.
type Counts struct {
	// Sent counts messages handed to the network (requests, responses,
	// error responses and one-way messages).
	Sent uint64
	// Delivered counts messages that reached an open endpoint, duplicates
	// included.
	Delivered uint64
	// Dropped counts messages lost to a Drop fault, a partition, the
	// OnDeliver hook, or a destination that closed while they travelled.
	Dropped uint64
	// Duplicated counts the extra copies made by Duplicate faults.
	Duplicated uint64
	// Delayed counts messages held by a positive Delay or Jitter.
	Delayed uint64
	// Reordered counts messages chosen to be overtaken by a Reorder fault.
	Reordered uint64
	// Late counts responses that found no request waiting for them: the
	// requester timed out, or the request was duplicated.
	Late uint64
}

func (c *Counts) add(o Counts) {
	c.Sent += o.Sent
	c.Delivered += o.Delivered
	c.Dropped += o.Dropped
	c.Duplicated += o.Duplicated
	c.Delayed += o.Delayed
	c.Reordered += o.Reordered
	c.Late += o.Late
}

// MemNetwork is an in-memory network of endpoints, for tests that run many
// nodes in one process. Delivery is asynchronous and has TCP's semantics
// (requests to an address nobody listens on fail with ErrUnreachable, ctx
// ends a request with ErrTimeout, Close fails requests in flight), plus
// seeded fault injection per directed link and message type.
//
// Every random decision on the link from A to B is drawn from that link's
// own source, derived from (seed, A, B), and each message on the link draws
// the same number of values whatever the faults, so the i-th message on a
// link meets the same decisions for a given seed, however traffic on other
// links is scheduled and whatever faults are later set. Message delivery is
// FIFO per link unless a Delay, Jitter or Reorder fault says otherwise.
//
// A network made by NewSteppedNetwork delivers nothing by itself: the test
// steps every delivery and a virtual clock (see mem_stepped.go).
type MemNetwork struct {
	seed uint64

	mu        sync.RWMutex
	eps       map[Addr]*memEndpoint
	links     map[linkKey]*memLink
	faults    map[linkKey]*faultRules
	blocked   map[linkKey]bool
	isolated  map[Addr]bool
	onDeliver func(from, to Addr, m Message, isResponse bool) bool
	tracing   bool          // tests: record each link's decisions
	step      *steppedState // nil unless stepped; set at creation

	statsMu sync.Mutex
	stats   map[Type]*Counts
}

type linkKey struct{ from, to Addr }

type faultRules struct {
	all    *Fault
	byType map[Type]Fault
}

// NewMemNetwork returns an empty network whose random decisions derive from
// seed.
func NewMemNetwork(seed uint64) *MemNetwork {
	return &MemNetwork{
		seed:     seed,
		eps:      make(map[Addr]*memEndpoint),
		links:    make(map[linkKey]*memLink),
		faults:   make(map[linkKey]*faultRules),
		blocked:  make(map[linkKey]bool),
		isolated: make(map[Addr]bool),
		stats:    make(map[Type]*Counts),
	}
}

// Listen opens an endpoint at addr served by h (nil: every request is
// answered with an error). It fails if an open endpoint
// already has addr; a closed endpoint's address can be listened on again (a
// node restart).
func (n *MemNetwork) Listen(addr Addr, h Handler) (Transport, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.eps[addr]; ok {
		return nil, fmt.Errorf("transport: mem listen on %s: address in use", addr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &memEndpoint{
		n:       n,
		addr:    addr,
		h:       h,
		ctx:     ctx,
		cancel:  cancel,
		pending: make(map[uint64]*memCall),
	}
	n.eps[addr] = e
	return e, nil
}

// SetFault sets the fault of messages travelling from from to to whose type
// is in types (nil: every type, replacing the link's per-type faults). An
// empty from or to matches any address; a rule for the exact link is
// preferred to (from, any), then (any, to), then (any, any). A response
// travels the reverse direction of its request and is selected by the
// request's type, so SetFault(b, a, ...) loses the acknowledgements of a's
// requests to b. The zero Fault removes a fault.
func (n *MemNetwork) SetFault(from, to Addr, types []Type, f Fault) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := linkKey{from, to}
	r := n.faults[k]
	if r == nil {
		r = &faultRules{byType: make(map[Type]Fault)}
		n.faults[k] = r
	}
	if types == nil {
		r.all = &f
		clear(r.byType)
		return
	}
	for _, t := range types {
		r.byType[t] = f
	}
}

// ClearFaults removes every fault set by SetFault. Partitions stay.
func (n *MemNetwork) ClearFaults() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.faults)
}

// Partition cuts every link between groupA and groupB, both directions:
// messages are silently lost, so requests across time out (they do not fail
// with ErrUnreachable). Partitions add up until Heal.
func (n *MemNetwork) Partition(groupA, groupB []Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range groupA {
		for _, b := range groupB {
			if a != b {
				n.blocked[linkKey{a, b}] = true
				n.blocked[linkKey{b, a}] = true
			}
		}
	}
}

// Isolate cuts addr from every other address, including ones that start
// listening later, until Heal. Its messages to itself still flow.
func (n *MemNetwork) Isolate(addr Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.isolated[addr] = true
}

// Heal removes every partition and isolation. Faults stay.
func (n *MemNetwork) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.blocked)
	clear(n.isolated)
}

// OnDeliver installs a hook called for every message about to reach an
// endpoint, after faults and delays, duplicates included; returning true
// drops the message. For a response, m is the handler's answer; for an error
// response, m has the request's type and the error text as body. The hook
// may be called concurrently. nil removes it.
func (n *MemNetwork) OnDeliver(hook func(from, to Addr, m Message, isResponse bool) (drop bool)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.onDeliver = hook
}

// Stats returns a snapshot of the counters, by message type.
func (n *MemNetwork) Stats() map[Type]Counts {
	n.statsMu.Lock()
	defer n.statsMu.Unlock()
	out := make(map[Type]Counts, len(n.stats))
	for t, c := range n.stats {
		out[t] = *c
	}
	return out
}

// TotalStats returns the counters summed over every message type.
func (n *MemNetwork) TotalStats() Counts {
	var sum Counts
	for _, c := range n.Stats() {
		sum.add(c)
	}
	return sum
}

func (n *MemNetwork) count(t Type, f func(*Counts)) {
	n.statsMu.Lock()
	c := n.stats[t]
	if c == nil {
		c = new(Counts)
		n.stats[t] = c
	}
	f(c)
	n.statsMu.Unlock()
}

// cutLocked reports whether the link is partitioned; n.mu is held.
func (n *MemNetwork) cutLocked(from, to Addr) bool {
	if from == to {
		return false
	}
	return n.blocked[linkKey{from, to}] || n.isolated[from] || n.isolated[to]
}

func (n *MemNetwork) faultLocked(from, to Addr, t Type) Fault {
	for _, k := range [...]linkKey{{from, to}, {from, ""}, {"", to}, {"", ""}} {
		r := n.faults[k]
		if r == nil {
			continue
		}
		if f, ok := r.byType[t]; ok {
			return f
		}
		if r.all != nil {
			return *r.all
		}
	}
	return Fault{}
}

// link returns the directed link's state, creating it with its own random
// source on first use.
func (n *MemNetwork) link(from, to Addr) *memLink {
	k := linkKey{from, to}
	n.mu.RLock()
	l := n.links[k]
	n.mu.RUnlock()
	if l != nil {
		return l
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if l = n.links[k]; l == nil {
		l = &memLink{n: n, rng: rand.New(rand.NewPCG(linkSeed(n.seed, from, to)))}
		n.links[k] = l
	}
	return l
}

// linkSeed derives a link's two PCG seeds from the network seed and the
// link's ends.
func linkSeed(seed uint64, from, to Addr) (uint64, uint64) {
	h := fnv.New64a()
	h.Write([]byte(from))
	h.Write([]byte{0})
	h.Write([]byte(to))
	x := h.Sum64()
	return splitmix(seed ^ x), splitmix(seed + 0x9e3779b97f4a7c15*x)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// envelope is one message in flight.
type envelope struct {
	from, to Addr
	kind     byte
	id       uint64
	class    Type // the request's type: selects faults and counters
	msg      Message
	dst      *memEndpoint // the instance the message is for
	src      *memEndpoint // for a request: the requesting instance
	reorder  bool
	seq      uint64 // stepped mode: the message's number
}

// decision is what a link decided for one message.
type decision struct {
	Drop, Dup, Reorder bool
	Delay              time.Duration
}

// memLink is one directed link: its random source and its delivery queue.
type memLink struct {
	n *MemNetwork

	mu       sync.Mutex
	rng      *rand.Rand
	trace    []decision
	queue    []*envelope
	draining bool
	held     *envelope
	holdT    *time.Timer
}

// decide draws the decisions for the next message on the link. It always
// draws four values, whatever f, so that later decisions do not depend on
// which faults were set.
func (l *memLink) decide(f Fault, tracing bool) decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	u1, u2, u3, u4 := l.rng.Float64(), l.rng.Float64(), l.rng.Float64(), l.rng.Float64()
	d := decision{
		Drop:    u1 < f.Drop,
		Dup:     u2 < f.Duplicate,
		Reorder: u3 < f.Reorder,
		Delay:   f.Delay + time.Duration(u4*float64(f.Jitter)),
	}
	if tracing {
		l.trace = append(l.trace, d)
	}
	return d
}

// send puts a message on the network from env.from to env.to.
func (n *MemNetwork) send(env *envelope) {
	n.mu.RLock()
	f := n.faultLocked(env.from, env.to, env.class)
	cut := n.cutLocked(env.from, env.to)
	tracing := n.tracing
	n.mu.RUnlock()
	l := n.link(env.from, env.to)
	d := l.decide(f, tracing)

	n.count(env.class, func(c *Counts) {
		c.Sent++
		switch {
		case cut || d.Drop:
			c.Dropped++
		default:
			if d.Dup {
				c.Duplicated++
			}
			if d.Delay > 0 {
				c.Delayed++
			}
			if d.Reorder {
				c.Reordered++
			}
		}
	})
	if cut || d.Drop || env.dst == nil {
		return
	}
	if n.step != nil {
		n.enqueueStepped(env)
		if d.Dup {
			dup := *env
			dup.seq = 0
			dup.msg.Body = bytes.Clone(env.msg.Body)
			n.enqueueStepped(&dup)
		}
		return
	}
	env.reorder = d.Reorder
	copies := []*envelope{env}
	if d.Dup {
		dup := *env
		dup.reorder = false
		dup.msg.Body = bytes.Clone(env.msg.Body)
		copies = append(copies, &dup)
	}
	if d.Delay > 0 {
		time.AfterFunc(d.Delay, func() {
			for _, e := range copies {
				l.enqueue(e)
			}
		})
		return
	}
	for _, e := range copies {
		l.enqueue(e)
	}
}

// enqueue adds a message to the link's FIFO queue, unless it is chosen to be
// overtaken: then it is held until the next message passes it.
func (l *memLink) enqueue(e *envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.reorder && l.held == nil {
		l.held = e
		l.holdT = time.AfterFunc(ReorderHoldMax, func() { l.release(e) })
		return
	}
	l.queue = append(l.queue, e)
	if l.held != nil {
		l.queue = append(l.queue, l.held)
		l.held = nil
		l.holdT.Stop()
	}
	l.startDrainLocked()
}

func (l *memLink) release(e *envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != e {
		return
	}
	l.held = nil
	l.queue = append(l.queue, e)
	l.startDrainLocked()
}

func (l *memLink) startDrainLocked() {
	if !l.draining {
		l.draining = true
		go l.drain()
	}
}

// drain delivers the queue in order and ends when it is empty, so an idle
// link has no goroutine.
func (l *memLink) drain() {
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.draining = false
			l.queue = nil
			l.mu.Unlock()
			return
		}
		e := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.mu.Unlock()
		l.n.deliver(e)
	}
}

// deliver hands a message to its endpoint.
func (n *MemNetwork) deliver(e *envelope) {
	n.mu.RLock()
	cut := n.cutLocked(e.from, e.to)
	hook := n.onDeliver
	n.mu.RUnlock()
	isResp := e.kind == kindResponse || e.kind == kindError
	if cut || (hook != nil && hook(e.from, e.to, e.msg, isResp)) || !e.dst.receive(e) {
		n.count(e.class, func(c *Counts) { c.Dropped++ })
	}
}

// memEndpoint is one endpoint of a MemNetwork.
type memEndpoint struct {
	n      *MemNetwork
	addr   Addr
	h      Handler
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	nextID  uint64
	pending map[uint64]*memCall
	wg      sync.WaitGroup // handler goroutines
}

type memCall struct {
	to   *memEndpoint // the destination instance; nil behind a partition
	ch   chan result
	info Pending // stepped mode
}

func (e *memEndpoint) Addr() Addr { return e.addr }

// resolve finds the endpoint listening at to. A partitioned destination is
// not an error (the message is lost on the way, as on a cut network), and
// neither is a missing one behind a partition.
func (e *memEndpoint) resolve(to Addr) (*memEndpoint, error) {
	e.n.mu.RLock()
	defer e.n.mu.RUnlock()
	dst := e.n.eps[to]
	if dst == nil && !e.n.cutLocked(e.addr, to) {
		return nil, fmt.Errorf("%w: %w: %s: nothing listens at this address", ErrNotSent, ErrUnreachable, to)
	}
	return dst, nil
}

func (e *memEndpoint) check(ctx context.Context, to Addr, m Message) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: %s", ErrClosed, e.addr)
	}
	if ctx.Err() != nil {
		return timeoutError(to, m.Type, ctx)
	}
	return nil
}

// Request sends req to to and waits for the response; see Transport.
func (e *memEndpoint) Request(ctx context.Context, to Addr, req Message) (Message, error) {
	if err := e.check(ctx, to, req); err != nil {
		return Message{}, err
	}
	dst, err := e.resolve(to)
	if err != nil {
		return Message{}, err
	}
	cl := &memCall{to: dst, ch: make(chan result, 1)}
	if e.n.step != nil {
		cl.info = e.n.pendingInfo(e.addr, to, req.Type)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Message{}, fmt.Errorf("%w: %s", ErrClosed, e.addr)
	}
	e.nextID++
	id := e.nextID
	e.pending[id] = cl
	e.mu.Unlock()
	// dst sets closed before failing the calls waiting on it: either it
	// finds this call, or this check sees it closed.
	if dst != nil && dst.isClosed() {
		e.forget(id)
		return Message{}, fmt.Errorf("%w: %s: endpoint closed", ErrUnreachable, to)
	}
	e.n.send(&envelope{
		from: e.addr, to: to, kind: kindRequest, id: id, class: req.Type,
		msg: Message{Type: req.Type, Body: bytes.Clone(req.Body)}, dst: dst, src: e,
		seq: cl.info.Seq,
	})
	select {
	case r := <-cl.ch:
		return r.msg, r.err
	case <-ctx.Done():
		e.forget(id)
		return Message{}, timeoutError(to, req.Type, ctx)
	}
}

// Send sends a one-way message; see Transport.
func (e *memEndpoint) Send(ctx context.Context, to Addr, msg Message) error {
	if err := e.check(ctx, to, msg); err != nil {
		return err
	}
	dst, err := e.resolve(to)
	if err != nil {
		return err
	}
	e.n.send(&envelope{
		from: e.addr, to: to, kind: kindOneWay, class: msg.Type,
		msg: Message{Type: msg.Type, Body: bytes.Clone(msg.Body)}, dst: dst,
	})
	return nil
}

func (e *memEndpoint) forget(id uint64) {
	e.mu.Lock()
	delete(e.pending, id)
	e.mu.Unlock()
}

func (e *memEndpoint) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// receive takes a message arriving at the endpoint; false if it is lost
// because the endpoint is closed.
func (e *memEndpoint) receive(env *envelope) bool {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	switch env.kind {
	case kindRequest, kindOneWay:
		e.wg.Add(1)
		e.mu.Unlock()
		e.n.count(env.class, func(c *Counts) { c.Delivered++ })
		go e.serve(env)
		return true
	}
	cl := e.pending[env.id]
	delete(e.pending, env.id)
	e.mu.Unlock()
	e.n.count(env.class, func(c *Counts) {
		c.Delivered++
		if cl == nil {
			c.Late++
		}
	})
	if cl != nil {
		if env.kind == kindError {
			cl.ch <- result{err: &RemoteError{Peer: env.from, Msg: string(env.msg.Body)}}
		} else {
			cl.ch <- result{msg: env.msg}
		}
	}
	return true
}

func (e *memEndpoint) serve(env *envelope) {
	defer e.wg.Done()
	resp, err := callHandler(e.ctx, e.h, env.from, env.msg)
	if env.kind == kindOneWay || e.isClosed() {
		return // a closed endpoint answers nothing
	}
	back := &envelope{from: e.addr, to: env.from, id: env.id, class: env.class, dst: env.src}
	if err != nil {
		back.kind = kindError
		back.msg = Message{Type: env.class, Body: []byte(err.Error())}
	} else {
		back.kind = kindResponse
		back.msg = Message{Type: resp.Type, Body: bytes.Clone(resp.Body)}
	}
	e.n.send(back)
}

// Close closes the endpoint: its requests in flight fail with ErrClosed,
// requests of other endpoints waiting on it fail with ErrUnreachable (as
// when a TCP connection breaks), and Close waits for its handlers, whose
// ctx ends. Its address can then be listened on again.
func (e *memEndpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	pend := e.pending
	e.pending = nil
	e.mu.Unlock()
	e.cancel()

	n := e.n
	n.mu.Lock()
	if n.eps[e.addr] == e {
		delete(n.eps, e.addr)
	}
	others := make([]*memEndpoint, 0, len(n.eps))
	for _, o := range n.eps {
		others = append(others, o)
	}
	n.mu.Unlock()

	for _, cl := range pend {
		cl.ch <- result{err: fmt.Errorf("%w: %s", ErrClosed, e.addr)}
	}
	for _, o := range others {
		o.peerClosed(e)
	}
	e.wg.Wait()
	return nil
}

// peerClosed fails the requests waiting on a closed endpoint, unless a
// partition stands between (nothing would tell the requester).
func (e *memEndpoint) peerClosed(p *memEndpoint) {
	e.n.mu.RLock()
	cut := e.n.cutLocked(p.addr, e.addr)
	e.n.mu.RUnlock()
	if cut {
		return
	}
	e.mu.Lock()
	var failed []*memCall
	for id, cl := range e.pending {
		if cl.to == p {
			delete(e.pending, id)
			failed = append(failed, cl)
		}
	}
	e.mu.Unlock()
	for _, cl := range failed {
		cl.ch <- result{err: fmt.Errorf("%w: %s: endpoint closed", ErrUnreachable, p.addr)}
	}
}

// traceDecisions makes every link record its decisions (tests).
func (n *MemNetwork) traceDecisions() {
	n.mu.Lock()
	n.tracing = true
	n.mu.Unlock()
}

// linkTrace returns the decisions recorded on a link (tests).
func (n *MemNetwork) linkTrace(from, to Addr) []decision {
	l := n.link(from, to)
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]decision(nil), l.trace...)
}
