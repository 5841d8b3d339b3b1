package cql

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/internal/deadline"
)

// Lingering close: after a fatal error answer the server stops writing and
// reads (and drops) what the client still sends, for at most this long and
// this much, so that closing with unread input does not reset the
// connection before the client has read the answer. After a frame refused
// as too large whose body is longer than lingerBytes, the server does not
// linger: the client goes on sending that body, which the linger could not
// outlast, and reading a megabyte of it was the oversized frame's whole
// cost to the node.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 1 << 20
)

// connection states, changed by the read loop only.
const (
	stateNew  = iota // before STARTUP
	stateAuth        // STARTUP answered with AUTHENTICATE
	stateReady
)

// outFrame is an encoded frame queued for the writer; last marks the fatal
// answer after which nothing more is written.
// cost is the in-flight cost of the request it answers, released once it is
// written (0 for events and fatal answers).
type outFrame struct {
	b    []byte
	last bool
	cost int64
}

type conn struct {
	s      *Server
	nc     net.Conn
	ip     string // source address, for the per-address limits
	ctx    context.Context
	cancel context.CancelFunc

	dead      atomic.Bool  // closed: a reader waiting for room gives up
	lastWrite atomic.Int64 // unix nanoseconds of the last flush, for the idle timeout

	// Guarded by s.flow.mu: the requests in flight and their bytes.
	reqs  int64
	bytes int64

	// Read loop only.
	rd      *frame.Reader
	dr      *deadlineReader
	version byte // protocol version of the connection, set by its first frame
	state   int
	events  map[string]bool
	unsub   func()

	// comp is the compression STARTUP chose, set by the read loop before it
	// answers STARTUP and before any other goroutine sends (statements and
	// events start after the handshake); read by send and fatal, which
	// compress every frame from that answer on.
	comp frame.Compression

	sessMu sync.Mutex
	sess   Session

	mu       sync.Mutex
	wq       []outFrame
	evQueued int64 // bytes of the events in wq, bounded by MaxInFlightBytesPerConn
	wspare   []outFrame
	closed   bool
	draining bool          // a last frame is queued: nothing more is accepted
	writing  bool          // a writer goroutine runs; it clears this when it has drained wq
	done     chan struct{} // closed by close
	wlast    chan struct{} // closed once the last frame is written (or could not be)
	once     sync.Once
	evMu     sync.Mutex // guards unsub against close
}

func newConn(s *Server, nc net.Conn, ip string) *conn {
	// Not derived from the server's context: a child would be kept in the
	// server context's map of children, which grows with the most
	// connections ever open and never shrinks. Close closes every
	// connection, which cancels its context. It is a deadline.Root: the
	// counter writes of the connection's requests share their timeouts'
	// contexts.
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s: s, nc: nc, ip: ip,
		ctx: deadline.Root(ctx), cancel: cancel,
		done: make(chan struct{}), wlast: make(chan struct{}),
	}
	c.dr = &deadlineReader{nc: nc, idle: s.cfg.IdleTimeout, halfFrame: max(s.cfg.HalfFrameTimeout, 0)}
	c.rd = frame.NewPooledReader(c.dr, s.cfg.MaxHandshakeFrame)
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		c.sess.Client = ta.IP
	}
	c.lastWrite.Store(time.Now().UnixNano())
	return c
}

// logger is the server's logger with the connection's remote address; made
// when something is logged only, so that a connection that logs nothing
// (most do) costs no logger.
func (c *conn) logger() *slog.Logger {
	return c.s.log.With("remote", c.nc.RemoteAddr().String())
}

// debug logs at the debug level, if the server's logger logs it.
func (c *conn) debug(msg string, args ...any) {
	if c.s.log.Enabled(context.Background(), slog.LevelDebug) {
		c.logger().Debug(msg, args...)
	}
}

// close ends the connection: it cancels the requests in flight, stops the
// writer, unsubscribes from events and closes the socket. Only the first
// call counts.
func (c *conn) close(cause error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		dropped := c.wq
		c.wq = nil
		c.mu.Unlock()
		c.dead.Store(true)
		for _, f := range dropped {
			c.s.stats.queued.Add(-int64(len(f.b)))
			c.s.release(c, f.cost)
		}
		c.s.wake()
		c.cancel()
		close(c.done)
		c.nc.Close()
		if cause != nil && !errors.Is(cause, io.EOF) && !errors.Is(cause, net.ErrClosed) {
			c.debug("connection closed", "cause", cause)
		}
		c.evMu.Lock()
		if c.unsub != nil {
			c.unsub()
			c.unsub = nil
		}
		c.evMu.Unlock()
		c.s.forget(c)
	})
}

// enqueue queues an encoded frame for the writer, answering a request of
// the given in-flight cost (released once written). It reports false (and
// releases the cost) when the connection is closed or closing.
func (c *conn) enqueue(b []byte, last bool, cost int64) bool {
	c.mu.Lock()
	if c.closed || c.draining {
		c.mu.Unlock()
		c.s.release(c, cost)
		return false
	}
	if cost == 0 && !last { // an event: no request holds it back
		if lim := c.s.cfg.MaxInFlightBytesPerConn; lim > 0 && c.evQueued > 0 && c.evQueued+int64(len(b)) > lim {
			queued := c.evQueued
			c.draining = true // nothing more is queued
			// Closed on a goroutine of its own: this one may be the events
			// source's, which close's unsubscribing would re-enter. The
			// connection's reader, alive while it is not closed, holds the
			// wait group.
			c.s.wg.Add(1)
			c.mu.Unlock()
			c.s.stats.eventOverflows.Add(1)
			go func() {
				defer c.s.wg.Done()
				c.close(fmt.Errorf("%d bytes of events queued and not written (the client reads nothing)", queued))
			}()
			return false
		}
		c.evQueued += int64(len(b))
	}
	c.s.stats.queued.Add(int64(len(b)))
	c.wq = append(c.wq, outFrame{b: b, last: last, cost: cost})
	if last {
		c.draining = true
	}
	start := !c.writing
	if start {
		// The connection is open, so its reader is alive and holds the
		// server's wait group: adding to it here cannot race Close's Wait.
		c.writing = true
		c.s.wg.Add(1)
	}
	c.mu.Unlock()
	if start {
		go c.writeLoop()
	}
	return true
}

// send encodes a frame in the connection's version and queues it, as the
// answer to a request of the given in-flight cost (0: an event). A frame
// that does not encode (an executor's result that breaks the protocol's
// limits) is answered with a server error instead.
func (c *conn) send(f *frame.Frame, cost int64) {
	if f.Version == 0 {
		f.Version = c.version
	}
	b, err := frame.AppendFrame(nil, f)
	if err != nil {
		c.logger().Error("encode response", "op", f.Message.Opcode(), "stream", f.Stream, "err", err)
		b, err = frame.AppendFrame(nil, &frame.Frame{Version: f.Version, Stream: f.Stream,
			Message: frame.Errorf(frame.ErrServer, "cannot encode the response: %v", err)})
		if err != nil {
			c.s.release(c, cost)
			return
		}
	}
	c.enqueue(c.compress(b), false, cost)
}

// compress compresses an encoded frame's body with the connection's
// compression, if STARTUP chose one. A body that does not compress (only
// one over 2 GiB) is sent as it is, without the flag, which the protocol
// allows.
func (c *conn) compress(b []byte) []byte {
	if c.comp == frame.NoCompression {
		return b
	}
	z, err := frame.CompressFrame(c.comp, b)
	if err != nil {
		c.logger().Error("compress response", "compression", c.comp, "err", err)
		return b
	}
	return z
}

// fatal answers a frame the connection cannot go on from with a protocol
// error on its stream, in its version and header layout, then closes the
// connection once that answer is written, lingering (see lingerTime) unless
// the client is known to be sending more than lingerBytes still (rest: the
// frame body it announced and the server did not read).
func (c *conn) fatal(h frame.Header, msg string) { c.fatalRest(h, msg, 0) }

func (c *conn) fatalRest(h frame.Header, msg string, rest int64) {
	c.debug("protocol error", "stream", h.Stream, "err", msg)
	if h.Version == 0 { // the stream ended inside the header
		h = frame.Header{Version: max(c.version, frame.Version4)}
	}
	v := h.ProtoVersion()
	b, err := frame.AppendFrame(nil, &frame.Frame{Version: v, Stream: h.Stream,
		Message: &frame.Error{Code: frame.ErrProtocol, Message: msg}})
	if err != nil {
		c.close(err)
		return
	}
	c.enqueue(c.compress(b), true, 0)
	// Wait for the writer to write the answer and half-close, then read and
	// drop what the client still sends until it closes, so that the answer
	// is not lost to a reset.
	select {
	case <-c.wlast:
	case <-c.done:
	}
	if rest <= lingerBytes {
		c.nc.SetReadDeadline(time.Now().Add(lingerTime))
		io.CopyN(io.Discard, c.nc, lingerBytes)
	}
	c.close(errors.New(msg))
}

// writeBufs are the connections' write buffers, held while writing only.
var writeBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// writeLoop drains the queue into a buffered writer and flushes only when
// the queue is empty (after yielding once), so frames queued together leave
// in one system call. A frame's in-flight cost is released once it is in
// the buffered writer, whose size bounds what is held past that. A write
// that stays blocked past the write timeout (the client reads nothing)
// closes the connection.
//
// The writer runs only while there is something to write: enqueue starts
// it when it is not running, and it returns once it has flushed and found
// the queue still empty, so that an idle connection holds no goroutine but
// its reader, and no buffer.
func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	// The buffer is taken from a pool for a batch and put back once it is
	// flushed, so that an idle connection holds none.
	var bw *bufio.Writer
	defer func() {
		if bw != nil {
			bw.Reset(nil)
			writeBufs.Put(bw)
		}
	}()
	timeout := c.s.cfg.WriteTimeout
	armed := false
	arm := func() { // before a write that reaches the socket
		if timeout > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(timeout))
			armed = true
		} else if armed {
			c.nc.SetWriteDeadline(time.Time{})
			armed = false
		}
	}
	fail := func(err error) {
		if isTimeout(err) {
			c.s.stats.writeOut.Add(1)
			err = fmt.Errorf("write blocked for %v (the client reads nothing): %w", timeout, err)
		}
		c.close(fmt.Errorf("write: %w", err))
	}
	for {
		yielded := false
		for {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				return
			}
			batch := c.wq
			if len(batch) > 0 {
				c.wq = c.wspare[:0]
				c.wspare = nil
				c.evQueued = 0 // every queued event is in the batch
			}
			c.mu.Unlock()
			if len(batch) == 0 {
				if yielded {
					break
				}
				yielded = true
				runtime.Gosched()
				continue
			}
			if bw == nil {
				bw = writeBufs.Get().(*bufio.Writer)
				bw.Reset(c.nc)
			}
			for i := range batch {
				if len(batch[i].b) > bw.Available() {
					arm()
				}
				_, err := bw.Write(batch[i].b)
				c.s.stats.queued.Add(-int64(len(batch[i].b)))
				c.s.release(c, batch[i].cost)
				if err != nil {
					for _, f := range batch[i+1:] {
						c.s.stats.queued.Add(-int64(len(f.b)))
						c.s.release(c, f.cost)
					}
					fail(err)
					return
				}
				if batch[i].last {
					arm()
					if bw.Flush() == nil {
						if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
							tc.CloseWrite()
						}
					}
					close(c.wlast)
					return
				}
			}
			clear(batch)
			c.mu.Lock()
			if !c.closed {
				c.wspare = batch[:0]
			}
			c.mu.Unlock()
		}
		if bw != nil {
			arm()
			if err := bw.Flush(); err != nil {
				fail(err)
				return
			}
			bw.Reset(nil)
			writeBufs.Put(bw)
			bw = nil
			c.lastWrite.Store(time.Now().UnixNano())
		}
		// Everything taken is written: stop, unless more came meanwhile.
		c.mu.Lock()
		if len(c.wq) == 0 || c.closed {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// readLoop reads frames until the connection ends. Between frames the
// socket read waits at most the idle timeout (and only while nothing is in
// flight and nothing was written for that long); inside a frame it waits at
// most the half-frame timeout for each next byte. A request's cost is
// reserved after its header is read and before its body is: over an
// in-flight limit, the loop stops reading until answers are written.
func (c *conn) readLoop() {
	defer c.s.wg.Done()
	rd := c.rd
	defer rd.Release()
	for {
		c.dr.mid = false
		if err := rd.ReadFirstByte(); err != nil {
			if isTimeout(err) && c.s.cfg.IdleTimeout > 0 {
				idle := time.Since(time.Unix(0, c.lastWrite.Load()))
				if c.s.inFlight(c) > 0 || idle < c.s.cfg.IdleTimeout {
					continue
				}
				c.s.stats.idle.Add(1)
				c.close(fmt.Errorf("idle for %v: %w", c.s.cfg.IdleTimeout, err))
				return
			}
			c.close(err)
			return
		}
		c.dr.mid = true
		h, err := rd.ReadHeaderRest()
		if err != nil {
			c.readError(h, err)
			return
		}
		if c.version == 0 {
			c.version = h.ProtoVersion()
			c.sessMu.Lock()
			c.sess.ProtocolVersion = c.version
			c.sessMu.Unlock()
		} else if h.ProtoVersion() != c.version {
			c.fatal(h, fmt.Sprintf("Invalid message version. Got %d but previous messages on this connection had version %d",
				h.ProtoVersion(), c.version))
			return
		}
		cost := frameCost(h)
		if err := c.s.reserve(c, cost, c.state == stateReady); err != nil {
			c.close(err)
			return
		}
		body, err := rd.ReadBody(h)
		if err != nil {
			c.s.release(c, cost)
			c.readError(h, err)
			return
		}
		if h.Flags&frame.FlagCompression != 0 && c.comp != frame.NoCompression {
			var err error
			if body, cost, err = c.decompress(h, body, cost); err != nil {
				c.close(err)
				return
			}
			if body == nil { // answered with a protocol error
				continue
			}
			h.Flags &^= frame.FlagCompression
			h.Length = int32(len(body))
		}
		f, err := frame.DecodeFrame(h, body)
		if err != nil {
			c.s.release(c, cost)
			c.fatal(h, err.Error())
			return
		}
		c.dispatch(h, f, cost)
	}
}

// decompress decompresses a frame body that has the compression flag. The
// request's in-flight cost, reserved for the compressed body, is first
// raised to the decompressed length the body claims, so the in-flight
// limits count what the request holds once decompressed; a claim over the
// frame limit (MaxFrame, as for an uncompressed body) is refused before
// anything of its size is allocated. A body that does not decompress, or
// claims too much, is answered with a protocol error on its stream and
// decompress returns a nil body: the frame was read whole, so the
// connection is still in step and stays open, as Cassandra keeps it after
// a non-fatal protocol error. An error means the connection closed while
// waiting for room.
func (c *conn) decompress(h frame.Header, body []byte, cost int64) ([]byte, int64, error) {
	n, err := frame.DecompressedLen(c.comp, body)
	if err == nil && n > c.rd.MaxBody() {
		c.s.stats.tooLarge.Add(1)
		_, err = frame.Decompress(c.comp, body, c.rd.MaxBody())
	}
	if err == nil && n > len(body) {
		c.s.release(c, cost)
		cost = int64(h.Size()) + int64(n)
		if err := c.s.reserve(c, cost, c.state == stateReady); err != nil {
			return nil, 0, err
		}
	}
	if err == nil {
		var out []byte
		if out, err = frame.Decompress(c.comp, body, c.rd.MaxBody()); err == nil {
			return out, cost, nil
		}
	}
	c.reply(h, protocolErrorf("%s", err.Error()), cost)
	return nil, cost, nil
}

// readError ends the connection after a failed frame read: with a protocol
// error for a frame it cannot serve, or at once for a stalled one.
func (c *conn) readError(h frame.Header, err error) {
	var ve *frame.VersionError
	var tl *frame.TooLargeError
	switch {
	case errors.As(err, &ve):
		h.Version = h.AnswerVersion() // a version above 4 is answered in v4
		c.fatal(h, ve.Error())
	case errors.As(err, &tl):
		c.s.stats.tooLarge.Add(1)
		c.fatalRest(h, tl.Error(), int64(tl.Header.Length))
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.fatal(h, "Truncated frame: the stream ended inside a frame")
	case isTimeout(err):
		c.s.stats.halfFrame.Add(1)
		c.close(fmt.Errorf("a frame stalled half-read for %v: %w", c.s.cfg.HalfFrameTimeout, err))
	default:
		c.close(err)
	}
}

// reply queues a response on the request's stream.
func (c *conn) reply(h frame.Header, m frame.Message, cost int64) {
	c.send(&frame.Frame{Stream: h.Stream, Message: m}, cost)
}

func protocolErrorf(format string, args ...any) *frame.Error {
	return frame.Errorf(frame.ErrProtocol, format, args...)
}

// dispatch answers the handshake messages in order, here, and hands
// statements to goroutines of their own.
func (c *conn) dispatch(h frame.Header, f *frame.Frame, cost int64) {
	op := h.Op
	switch c.state {
	case stateNew:
		if op != frame.OpStartup && op != frame.OpOptions {
			c.reply(h, protocolErrorf("Unexpected message %v, expecting STARTUP or OPTIONS", op), cost)
			return
		}
	case stateAuth:
		if op != frame.OpAuthResponse && op != frame.OpOptions {
			c.reply(h, protocolErrorf("Unexpected message %v, expecting SASL_RESPONSE", op), cost)
			return
		}
	case stateReady:
		if op == frame.OpStartup {
			c.reply(h, protocolErrorf("Unexpected message STARTUP, the connection is already initialized"), cost)
			return
		}
		if op == frame.OpAuthResponse {
			c.reply(h, protocolErrorf("Unexpected message AUTH_RESPONSE, the connection is already authenticated"), cost)
			return
		}
	}
	switch m := f.Message.(type) {
	case *frame.Options:
		c.reply(h, &frame.Supported{Options: supported}, cost)
	case *frame.Startup:
		c.startup(h, m, cost)
	case *frame.AuthResponse:
		c.authResponse(h, m, cost)
	case *frame.Register:
		c.register(h, m, cost)
	case *frame.Query, *frame.Prepare, *frame.Execute, *frame.Batch:
		c.s.wg.Add(1)
		c.s.executing.Go(func() { c.execute(h, f, cost) })
	default:
		c.reply(h, protocolErrorf("Unexpected message %v", op), cost)
	}
}

func (c *conn) startup(h frame.Header, m *frame.Startup, cost int64) {
	if _, ok := m.Options["CQL_VERSION"]; !ok {
		c.reply(h, protocolErrorf("Missing value CQL_VERSION in STARTUP message"), cost)
		return
	}
	comp, ok := frame.ParseCompression(m.Options["COMPRESSION"])
	if !ok {
		// Cassandra lower-cases the name before it matches it.
		c.reply(h, protocolErrorf("Unknown compression algorithm: %s", strings.ToLower(m.Options["COMPRESSION"])), cost)
		return
	}
	// From the answer to STARTUP (READY or AUTHENTICATE) on, every frame is
	// compressed: Cassandra's StartupMessage sets the connection's
	// compressor before its answer is encoded, and its encoder spares only
	// STARTUP frames (the v4 spec, §5: "including the response to the
	// STARTUP request"). An ERROR answer to STARTUP is not compressed.
	c.comp = comp
	if c.s.cfg.Auth != nil {
		c.state = stateAuth
		c.reply(h, &frame.Authenticate{Authenticator: Authenticator}, cost)
		return
	}
	c.ready()
	c.reply(h, &frame.Ready{}, cost)
}

// authResponse checks a SASL PLAIN token, "authzid\x00user\x00password"
// (drivers send an empty authzid), as Cassandra's PasswordAuthenticator.
// A failed attempt leaves the connection waiting for another.
func (c *conn) authResponse(h frame.Header, m *frame.AuthResponse, cost int64) {
	parts := bytes.Split(m.Token, []byte{0})
	if len(parts) < 2 || len(parts) > 3 {
		c.reply(h, frame.Errorf(frame.ErrBadCredentials, "Authentication ID must not be null"), cost)
		return
	}
	pass := string(parts[len(parts)-1])
	user := string(parts[len(parts)-2])
	if user == "" {
		c.reply(h, frame.Errorf(frame.ErrBadCredentials, "Authentication ID must not be null"), cost)
		return
	}
	if want, ok := c.s.cfg.Auth[user]; !ok || want != pass {
		c.reply(h, frame.Errorf(frame.ErrBadCredentials, "Provided username %s and/or password are incorrect", user), cost)
		return
	}
	c.sessMu.Lock()
	c.sess.User = user
	c.sessMu.Unlock()
	c.ready()
	c.reply(h, &frame.AuthSuccess{}, cost)
}

var eventTypes = []string{frame.EventTopologyChange, frame.EventStatusChange, frame.EventSchemaChange}

// register adds event types to the connection's subscription.
func (c *conn) register(h frame.Header, m *frame.Register, cost int64) {
	for _, t := range m.Events {
		if !slices.Contains(eventTypes, t) {
			c.reply(h, protocolErrorf("Invalid value '%s' for Event.Type", t), cost)
			return
		}
	}
	if c.events == nil {
		c.events = map[string]bool{}
	}
	for _, t := range m.Events {
		c.events[t] = true
	}
	if c.s.cfg.Events != nil {
		want := make(map[string]bool, len(c.events))
		for t := range c.events {
			want[t] = true
		}
		c.evMu.Lock()
		if !c.closedNow() {
			if c.unsub != nil {
				c.unsub()
			}
			version := c.version
			c.unsub = c.s.cfg.Events.Subscribe(func(ev frame.Event) {
				if want[ev.Type] {
					c.send(&frame.Frame{Version: version, Stream: -1, Message: ev}, 0)
				}
			})
		}
		c.evMu.Unlock()
	}
	c.reply(h, &frame.Ready{}, cost)
}

// ready ends the handshake: from now on, frames up to MaxFrame are read.
func (c *conn) ready() {
	c.state = stateReady
	c.rd.SetMaxBody(c.s.cfg.MaxFrame)
}

func (c *conn) closedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// execute runs one statement request on the executor and answers it. The
// executor gets its own copy of the connection's Session; a keyspace it sets
// (USE) is kept for the requests that start after it returns.
func (c *conn) execute(h frame.Header, f *frame.Frame, cost int64) {
	defer c.s.wg.Done()
	var out Outcome
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				c.logger().Error("panic in request", "op", h.Op, "stream", h.Stream, "panic", r, "stack", string(debug.Stack()))
				err = frame.Errorf(frame.ErrServer, "internal error: %v", r)
			}
		}()
		c.sessMu.Lock()
		sess := c.sess
		c.sessMu.Unlock()
		sess.Trace = f.Tracing
		before := sess.Keyspace
		ex := c.s.cfg.Executor
		switch m := f.Message.(type) {
		case *frame.Query:
			out, err = ex.Query(c.ctx, &sess, m.Query, m.Params, f.Payload)
		case *frame.Prepare:
			out, err = ex.Prepare(c.ctx, &sess, m.Query, f.Payload)
		case *frame.Execute:
			out, err = ex.Execute(c.ctx, &sess, m.ID, m.Params, f.Payload)
		case *frame.Batch:
			out, err = ex.Batch(c.ctx, &sess, *m, f.Payload)
		}
		ks := sess.Keyspace
		if r, ok := out.Result.(frame.SetKeyspaceResult); ok && err == nil {
			ks = r.Keyspace
		} else if r, ok := out.Result.(*frame.SetKeyspaceResult); ok && r != nil && err == nil {
			ks = r.Keyspace
		}
		if ks != before {
			c.sessMu.Lock()
			c.sess.Keyspace = ks
			c.sessMu.Unlock()
		}
	}()
	// A traced request's answer, result or error, carries its trace id
	// (Cassandra 4's Message.Request.execute; STARTUP, OPTIONS, REGISTER
	// and AUTH_RESPONSE are not traced, as Cassandra's isTraceable).
	resp := &frame.Frame{Stream: h.Stream, Payload: out.Payload, Warnings: out.Warnings}
	if f.Tracing && len(out.TraceID) == 16 {
		resp.TracingID = out.TraceID
	}
	switch {
	case err != nil:
		var fe *frame.Error
		if !errors.As(err, &fe) {
			fe = &frame.Error{Code: frame.ErrServer, Message: err.Error()}
		}
		resp.Message = fe
	case out.Result == nil:
		resp.Message = frame.VoidResult{}
	default:
		m, ok := out.Result.(frame.Message)
		if !ok {
			m = frame.Errorf(frame.ErrServer, "cannot encode result %T", out.Result)
		}
		resp.Message = m
	}
	c.send(resp, cost)
}
