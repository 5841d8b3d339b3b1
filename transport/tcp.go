package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/internal/deadline"
	"github.com/idemkv/idemkv/internal/workpool"
)

// TCPOptions configures ListenTCP. The zero value selects every default.
type TCPOptions struct {
	// DialTimeout bounds dialling a peer and the preamble exchange, both
	// outbound and inbound. Default 1s.
	DialTimeout time.Duration
	// MaxFrame is the largest frame body accepted or sent, in bytes. A peer
	// announcing a larger frame has its connection closed. Default 64 MiB.
	MaxFrame int
	// Logger receives connection errors (malformed frames are logged at
	// Error level, ordinary disconnections at Debug). Default slog.Default().
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before a peer whose dial
	// failed is dialled again; it doubles after each failed dial and is
	// reset by a successful one. Defaults 50ms and 2s.
	MinBackoff, MaxBackoff time.Duration
}

func (o *TCPOptions) setDefaults() {
	if o.DialTimeout <= 0 {
		o.DialTimeout = time.Second
	}
	if o.MaxFrame <= 0 || o.MaxFrame > 1<<32-1 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(2*time.Second, o.MinBackoff)
	}
}

// TCP is a Transport over TCP. See the package comment for the wire format
// and the connection model.
type TCP struct {
	addr   Addr
	ln     net.Listener
	h      Handler
	opts   TCPOptions
	log    *slog.Logger
	ctx    context.Context // ends at Close; handlers and dials use it
	cancel context.CancelFunc
	closed atomic.Bool

	mu    sync.Mutex
	peers map[Addr]*peer        // outbound connection per peer
	raw   map[net.Conn]struct{} // every open connection, for Close
	wg    sync.WaitGroup        // every goroutine this endpoint started
	// inbound holds the connection each peer dialled to this endpoint, by
	// the peer's listen address: a peer whose address orders before this
	// endpoint's carries this endpoint's requests too (see peerConn).
	inbound map[Addr]*conn

	// serving runs inbound requests on goroutines kept between requests,
	// whose stacks have grown already (internal/workpool).
	serving *workpool.Pool
}

var _ Transport = (*TCP)(nil)

// ListenTCP listens on addr and serves requests with h (nil: every request
// is answered with an error). If addr's port is 0, the port chosen by the
// system becomes part of the endpoint's Addr.
func ListenTCP(addr Addr, h Handler, opts TCPOptions) (*TCP, error) {
	opts.setDefaults()
	ln, err := net.Listen("tcp", string(addr))
	if err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", addr, err)
	}
	if _, port, err := net.SplitHostPort(string(addr)); err == nil && port == "0" {
		addr = Addr(ln.Addr().String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCP{
		addr:   addr,
		ln:     ln,
		h:      h,
		opts:   opts,
		log:    opts.Logger.With("node", string(addr)),
		ctx:    deadline.Root(ctx), // handlers share their timeouts' contexts
		cancel: cancel,
		peers:  make(map[Addr]*peer),
		raw:    make(map[net.Conn]struct{}),

		inbound: make(map[Addr]*conn),

		serving: workpool.New(0),
	}
	t.wg.Add(1)
	go t.acceptLoop()
	return t, nil
}

// Addr returns the endpoint's address, the one announced to peers.
func (t *TCP) Addr() Addr { return t.addr }

// Request sends req to the peer at to and waits for its response. It fails
// with ErrUnreachable (wrapping the cause) if no connection can be made or
// the connection breaks before the response arrives (the peer may or may not
// have handled the request), with ErrTimeout and ctx.Err() when ctx ends
// first, with ErrClosed once t is closed, and with a *RemoteError if the
// peer's handler returned an error. req.Body must not be modified until
// Request returns; after a timeout it may still be queued for writing, so a
// caller that reuses buffers must not reuse that one.
func (t *TCP) Request(ctx context.Context, to Addr, req Message) (Message, error) {
	if err := t.checkSend(ctx, to, req); err != nil {
		return Message{}, err
	}
	c, err := t.peerConn(ctx, to, req.Type)
	if err != nil {
		if errors.Is(err, ErrUnreachable) {
			err = fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return Message{}, err
	}
	cl, err := c.call(req)
	if err != nil {
		return Message{}, err
	}
	select {
	case r := <-cl.ch:
		putCall(cl)
		return r.msg, r.err
	case <-ctx.Done():
		if c.forget(cl.id) {
			putCall(cl)
		}
		return Message{}, timeoutError(to, req.Type, ctx)
	}
}

// Send queues a one-way message for the peer at to. It fails fast with
// ErrUnreachable if no connection can be made; once queued, the message is
// lost if the connection breaks. msg.Body must not be modified afterwards.
func (t *TCP) Send(ctx context.Context, to Addr, msg Message) error {
	if err := t.checkSend(ctx, to, msg); err != nil {
		return err
	}
	c, err := t.peerConn(ctx, to, msg.Type)
	if err != nil {
		return err
	}
	return c.enqueue(kindOneWay, 0, msg.Type, msg.Body)
}

func (t *TCP) checkSend(ctx context.Context, to Addr, m Message) error {
	if t.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, t.addr)
	}
	if ctx.Err() != nil {
		return timeoutError(to, m.Type, ctx)
	}
	if len(m.Body) > t.opts.MaxFrame {
		return fmt.Errorf("transport: message of type %d to %s: body of %d bytes exceeds the frame limit of %d", m.Type, to, len(m.Body), t.opts.MaxFrame)
	}
	return nil
}

func timeoutError(to Addr, typ Type, ctx context.Context) error {
	return fmt.Errorf("%w: %s, type %d: %w", ErrTimeout, to, typ, ctx.Err())
}

// Close stops accepting connections, fails requests in flight with
// ErrClosed, closes every connection and waits for the endpoint's goroutines,
// handlers included (their ctx ends). Calling Close again does nothing.
func (t *TCP) Close() error {
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		return nil
	}
	t.closed.Store(true)
	raw := make([]net.Conn, 0, len(t.raw))
	for nc := range t.raw {
		raw = append(raw, nc)
	}
	t.mu.Unlock()

	// Connections first, then handlers' ctx: an answer to a cancelled
	// handler must not leave a closed node.
	err := t.ln.Close()
	for _, nc := range raw {
		nc.Close()
	}
	t.cancel()
	t.wg.Wait()
	t.serving.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("transport: close listener %s: %w", t.addr, err)
	}
	return nil
}

// goTracked runs f on a goroutine counted by t.wg, unless t is closed.
func (t *TCP) goTracked(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// track registers an open connection so that Close can close it; it refuses
// (and the caller closes nc) once t is closed.
func (t *TCP) track(nc net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return false
	}
	t.raw[nc] = struct{}{}
	return true
}

func (t *TCP) untrack(nc net.Conn) {
	t.mu.Lock()
	delete(t.raw, nc)
	t.mu.Unlock()
}

func (t *TCP) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		nc, err := t.ln.Accept()
		if err != nil {
			if t.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait a little, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.log.Error("transport: accept failed", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		if !t.track(nc) {
			nc.Close()
			return
		}
		t.wg.Add(1) // this goroutine holds a count, so Add cannot race Wait
		go t.serveInbound(nc)
	}
}

// serveInbound answers the preamble of an accepted connection, then reads
// its frames until it breaks.
func (t *TCP) serveInbound(nc net.Conn) {
	defer t.wg.Done()
	nc.SetDeadline(time.Now().Add(t.opts.DialTimeout))
	br := bufio.NewReaderSize(nc, 32<<10)
	from, err := readPreamble(br)
	if err != nil {
		var ve *versionError
		if errors.As(err, &ve) {
			// Tell the dialer which version we speak, so it can report it.
			nc.Write(appendPreamble(nil, ProtocolVersion, t.addr))
		}
		if !t.closed.Load() {
			t.log.Error("transport: refusing inbound connection", "remote", nc.RemoteAddr().String(), "err", err)
		}
		nc.Close()
		t.untrack(nc)
		return
	}
	if _, err := nc.Write(appendPreamble(nil, ProtocolVersion, t.addr)); err != nil {
		t.log.Debug("transport: inbound handshake failed", "peer", string(from), "err", err)
		nc.Close()
		t.untrack(nc)
		return
	}
	nc.SetDeadline(time.Time{})
	c := newConn(t, nc, br, from)
	t.mu.Lock()
	t.inbound[from] = c // the latest: an older one is breaking or idle
	p := t.peers[from]
	t.mu.Unlock()
	if p != nil {
		// The peer has just reached us: it is up, so a dial to it need not
		// wait out the backoff of its downtime (a restarted node would
		// otherwise be unreachable from here for up to MaxBackoff while
		// its gossip says it is up).
		p.mu.Lock()
		p.retryAt, p.backoff = time.Time{}, 0
		p.mu.Unlock()
	}
	t.wg.Add(1)
	go c.writeLoop()
	c.readLoop()
	t.mu.Lock()
	if t.inbound[from] == c {
		delete(t.inbound, from)
	}
	t.mu.Unlock()
}

// dial connects to a peer and exchanges preambles.
func (t *TCP) dial(to Addr) (*conn, error) {
	d := net.Dialer{Timeout: t.opts.DialTimeout}
	nc, err := d.DialContext(t.ctx, "tcp", string(to))
	if err != nil {
		return nil, err
	}
	if !t.track(nc) {
		nc.Close()
		return nil, ErrClosed
	}
	fail := func(err error) (*conn, error) {
		nc.Close()
		t.untrack(nc)
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(t.opts.DialTimeout))
	if _, err := nc.Write(appendPreamble(nil, ProtocolVersion, t.addr)); err != nil {
		return fail(fmt.Errorf("handshake: %w", err))
	}
	br := bufio.NewReaderSize(nc, 32<<10)
	if _, err := readPreamble(br); err != nil {
		return fail(fmt.Errorf("handshake: %w", err))
	}
	nc.SetDeadline(time.Time{})
	c := newConn(t, nc, br, to)
	t.wg.Add(2) // the dialling goroutine holds a count
	go c.writeLoop()
	go func() {
		defer t.wg.Done()
		c.readLoop()
	}()
	return c, nil
}

// peer is the outbound side of one peer: its connection, dialled lazily and
// again after it breaks, with backoff after failed dials.
type peer struct {
	addr Addr

	mu      sync.Mutex
	c       *conn
	dialing chan struct{} // closed when the dial in progress ends; nil if none
	lastErr error         // why the last dial failed
	retryAt time.Time     // no dial before this
	backoff time.Duration
}

// peerConn returns the outbound connection to a peer, dialling it if
// needed; typ only labels a timeout error.
//
// Of two peers, the one whose address orders first dials, and the other
// sends its requests on that connection while it is open, rather than on
// one of its own: the frames each node sends the other (its requests, its
// answers to the other's) then leave together, in fewer system calls, and
// arrive on one reader. Before the first has dialled, or once its
// connection broke, the second dials its own, as every endpoint did.
func (t *TCP) peerConn(ctx context.Context, to Addr, typ Type) (*conn, error) {
	t.mu.Lock()
	if to < t.addr {
		if c := t.inbound[to]; c != nil && !c.isClosed() {
			t.mu.Unlock()
			return c, nil
		}
	}
	p := t.peers[to]
	if p == nil {
		p = &peer{addr: to}
		t.peers[to] = p
	}
	t.mu.Unlock()

	p.mu.Lock()
	if c := p.c; c != nil && !c.isClosed() {
		p.mu.Unlock()
		return c, nil
	}
	if p.dialing == nil {
		if wait := time.Until(p.retryAt); wait > 0 {
			err := p.lastErr
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %s: %w (next dial in %v)", ErrUnreachable, to, err, wait.Round(time.Millisecond))
		}
		ch := make(chan struct{})
		if !t.goTracked(func() { t.dialPeer(p, ch) }) {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", ErrClosed, t.addr)
		}
		p.dialing = ch
	}
	ch := p.dialing
	p.mu.Unlock()

	select {
	case <-ch:
	case <-ctx.Done():
		return nil, timeoutError(to, typ, ctx)
	}
	if t.closed.Load() {
		return nil, fmt.Errorf("%w: %s", ErrClosed, t.addr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.c; c != nil && !c.isClosed() {
		return c, nil
	}
	if p.lastErr == nil {
		return nil, fmt.Errorf("%w: %s: connection lost right after dialling", ErrUnreachable, to)
	}
	return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, to, p.lastErr)
}

func (t *TCP) dialPeer(p *peer, done chan struct{}) {
	c, err := t.dial(p.addr)
	p.mu.Lock()
	if err != nil {
		p.backoff = min(max(2*p.backoff, t.opts.MinBackoff), t.opts.MaxBackoff)
		p.lastErr = err
		p.retryAt = time.Now().Add(p.backoff)
		if !t.closed.Load() {
			t.log.Debug("transport: dial failed", "peer", string(p.addr), "err", err, "retry_in", p.backoff)
		}
	} else {
		p.c, p.lastErr, p.backoff, p.retryAt = c, nil, 0, time.Time{}
	}
	p.dialing = nil
	close(done)
	p.mu.Unlock()
}

// conn is one TCP connection, either direction. Outbound connections carry
// this endpoint's requests and their responses; inbound ones carry the
// peer's requests and our responses. The code does not depend on the
// direction: frames of any kind are handled on any connection.
type conn struct {
	t    *TCP
	nc   net.Conn
	peer Addr // the peer's listen address, from the preamble or the dial
	br   *bufio.Reader
	wsig chan struct{} // wakes the writer; capacity 1
	done chan struct{} // closed when the connection is closed

	mu      sync.Mutex
	closed  bool
	wq      []outFrame // frames waiting for the writer
	wspare  []outFrame // the writer's previous batch, reused
	pending map[uint64]*call
	nextID  uint64

	closeOnce sync.Once
}

type outFrame struct {
	kind byte
	id   uint64
	typ  Type
	body []byte
}

type result struct {
	msg Message
	err error
}

// call is a request waiting for its response.
type call struct {
	id uint64
	ch chan result // capacity 1: the reader never blocks on it
}

var callPool = sync.Pool{New: func() any { return &call{ch: make(chan result, 1)} }}

func getCall() *call  { return callPool.Get().(*call) }
func putCall(c *call) { callPool.Put(c) }

func newConn(t *TCP, nc net.Conn, br *bufio.Reader, peer Addr) *conn {
	return &conn{
		t:       t,
		nc:      nc,
		peer:    peer,
		br:      br,
		wsig:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		pending: make(map[uint64]*call),
	}
}

func (c *conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// closedError is what an operation on a closed connection fails with.
func (c *conn) closedError(cause error) error {
	if c.t.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, c.t.addr)
	}
	if cause == nil {
		return fmt.Errorf("%w: %s: connection closed", ErrUnreachable, c.peer)
	}
	return fmt.Errorf("%w: %s: connection lost: %w", ErrUnreachable, c.peer, cause)
}

// call registers a request and queues its frame.
func (c *conn) call(req Message) (*call, error) {
	cl := getCall()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		putCall(cl)
		return nil, c.closedError(nil)
	}
	c.nextID++
	cl.id = c.nextID
	c.pending[cl.id] = cl
	c.wq = append(c.wq, outFrame{kindRequest, cl.id, req.Type, req.Body})
	c.mu.Unlock()
	c.wake()
	return cl, nil
}

// forget unregisters a request whose caller gave up. It reports whether the
// call was still pending, i.e. whether no result was or will be sent on it.
func (c *conn) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; ok {
		delete(c.pending, id)
		return true
	}
	return false
}

func (c *conn) enqueue(kind byte, id uint64, typ Type, body []byte) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.closedError(nil)
	}
	c.wq = append(c.wq, outFrame{kind, id, typ, body})
	c.mu.Unlock()
	c.wake()
	return nil
}

func (c *conn) wake() {
	select {
	case c.wsig <- struct{}{}:
	default:
	}
}

// close closes the connection once and fails its pending requests.
func (c *conn) close(cause error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		pend := c.pending
		c.pending = nil
		c.wq = nil
		c.mu.Unlock()
		close(c.done)
		c.nc.Close()
		c.t.untrack(c.nc)
		if len(pend) > 0 {
			err := c.closedError(cause)
			for _, cl := range pend {
				cl.ch <- result{err: err}
			}
		}
	})
}

// writeLoop drains the queue into a buffered writer and flushes only when
// the queue is empty (after yielding once), so frames queued together leave
// in one system call.
func (c *conn) writeLoop() {
	defer c.t.wg.Done()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	for {
		select {
		case <-c.wsig:
		case <-c.done:
			return
		}
		yielded := false
		for {
			c.mu.Lock()
			batch := c.wq
			if len(batch) > 0 {
				// The two slices take turns: one fills while the other is written.
				c.wq = c.wspare[:0]
				c.wspare = nil
			}
			c.mu.Unlock()
			if len(batch) == 0 {
				if yielded {
					break
				}
				// Before paying for a system call, let the goroutines
				// that are about to queue a frame (callers, handlers)
				// run once: under load this turns ~1.4 frames per write
				// into ~7-15 (see BenchmarkTCPRoundTrip).
				yielded = true
				runtime.Gosched()
				continue
			}
			for i := range batch {
				f := &batch[i]
				if err := writeFrame(bw, f.kind, f.id, f.typ, f.body); err != nil {
					c.close(fmt.Errorf("write: %w", err))
					return
				}
			}
			clear(batch) // drop references to bodies
			c.mu.Lock()
			if !c.closed {
				c.wspare = batch[:0]
			}
			c.mu.Unlock()
		}
		if err := bw.Flush(); err != nil {
			c.close(fmt.Errorf("write: %w", err))
			return
		}
	}
}

// readLoop reads frames until the connection breaks: requests go to the
// handler, each on its own goroutine; responses go to their callers.
func (c *conn) readLoop() {
	var hdr frameBuf
	max := uint32(c.t.opts.MaxFrame)
	for {
		f, err := readFrame(c.br, max, &hdr)
		if err != nil {
			switch {
			case c.t.closed.Load() || c.isClosed():
			case errors.Is(err, ErrProtocol):
				c.t.log.Error("transport: closing connection after protocol error", "peer", string(c.peer), "remote", c.nc.RemoteAddr().String(), "err", err)
			default:
				c.t.log.Debug("transport: connection closed", "peer", string(c.peer), "err", err)
			}
			c.close(err)
			return
		}
		switch f.kind {
		case kindRequest, kindOneWay:
			c.t.wg.Add(1) // the reader's own count keeps Add from racing Wait
			c.t.serving.Go(func() { c.serve(f) })
		case kindResponse, kindError:
			c.mu.Lock()
			cl := c.pending[f.id]
			delete(c.pending, f.id)
			c.mu.Unlock()
			if cl == nil {
				continue // its caller gave up: a late response
			}
			if f.kind == kindError {
				cl.ch <- result{err: &RemoteError{Peer: c.peer, Msg: string(f.body)}}
			} else {
				cl.ch <- result{msg: Message{Type: f.typ, Body: f.body}}
			}
		}
	}
}

// serve runs the handler for one inbound request and queues its answer.
func (c *conn) serve(f frame) {
	defer c.t.wg.Done()
	resp, err := callHandler(c.t.ctx, c.t.h, c.peer, Message{Type: f.typ, Body: f.body})
	if f.kind == kindOneWay {
		if err != nil {
			c.t.log.Debug("transport: one-way handler failed", "peer", string(c.peer), "type", f.typ, "err", err)
		}
		return
	}
	if err == nil && len(resp.Body) > c.t.opts.MaxFrame {
		err = fmt.Errorf("response of type %d: body of %d bytes exceeds the frame limit of %d", resp.Type, len(resp.Body), c.t.opts.MaxFrame)
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > c.t.opts.MaxFrame {
			msg = msg[:c.t.opts.MaxFrame]
		}
		c.enqueue(kindError, f.id, f.typ, []byte(msg))
		return
	}
	c.enqueue(kindResponse, f.id, resp.Type, resp.Body)
}

// errNoHandler answers requests to an endpoint opened without a handler.
var errNoHandler = errors.New("transport: this endpoint serves no requests")

func callHandler(ctx context.Context, h Handler, from Addr, req Message) (Message, error) {
	if h == nil {
		return Message{}, errNoHandler
	}
	return h(ctx, from, req)
}
