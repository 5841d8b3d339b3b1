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
	"sync"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
)

// Lingering close: after a fatal error answer the server stops writing and
// reads (and drops) what the client still sends, for at most this long and
// this much, so that closing with unread input does not reset the
// connection before the client has read the answer.
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
type outFrame struct {
	b    []byte
	last bool
}

type conn struct {
	s      *Server
	nc     net.Conn
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	// Read loop only.
	version byte // protocol version of the connection, set by its first frame
	state   int
	events  map[string]bool
	unsub   func()

	sessMu sync.Mutex
	sess   Session

	mu       sync.Mutex
	wq       []outFrame
	wspare   []outFrame
	closed   bool
	draining bool // a last frame is queued: nothing more is accepted
	wsig     chan struct{}
	done     chan struct{} // closed by close
	wdone    chan struct{} // closed when the writer returns
	once     sync.Once
	evMu     sync.Mutex // guards unsub against close
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	return &conn{
		s: s, nc: nc, log: s.log.With("remote", nc.RemoteAddr().String()),
		ctx: ctx, cancel: cancel,
		wsig: make(chan struct{}, 1), done: make(chan struct{}), wdone: make(chan struct{}),
	}
}

// close ends the connection: it cancels the requests in flight, stops the
// writer, unsubscribes from events and closes the socket. Only the first
// call counts.
func (c *conn) close(cause error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.wq = nil
		c.mu.Unlock()
		c.cancel()
		close(c.done)
		c.nc.Close()
		if cause != nil && !errors.Is(cause, io.EOF) && !errors.Is(cause, net.ErrClosed) {
			c.log.Debug("connection closed", "cause", cause)
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

// enqueue queues an encoded frame for the writer. It reports false when
// the connection is closed or closing.
func (c *conn) enqueue(b []byte, last bool) bool {
	c.mu.Lock()
	if c.closed || c.draining {
		c.mu.Unlock()
		return false
	}
	c.wq = append(c.wq, outFrame{b: b, last: last})
	if last {
		c.draining = true
	}
	c.mu.Unlock()
	select {
	case c.wsig <- struct{}{}:
	default:
	}
	return true
}

// send encodes a frame in the connection's version and queues it. A frame
// that does not encode (an executor's result that breaks the protocol's
// limits) is answered with a server error instead.
func (c *conn) send(f *frame.Frame) {
	if f.Version == 0 {
		f.Version = c.version
	}
	b, err := frame.AppendFrame(nil, f)
	if err != nil {
		c.log.Error("encode response", "op", f.Message.Opcode(), "stream", f.Stream, "err", err)
		b, err = frame.AppendFrame(nil, &frame.Frame{Version: f.Version, Stream: f.Stream,
			Message: frame.Errorf(frame.ErrServer, "cannot encode the response: %v", err)})
		if err != nil {
			return
		}
	}
	c.enqueue(b, false)
}

// fatal answers a frame the connection cannot go on from with a protocol
// error on its stream, in its version and header layout, then closes the
// connection once that answer is written.
func (c *conn) fatal(h frame.Header, msg string) {
	c.log.Debug("protocol error", "stream", h.Stream, "err", msg)
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
	c.enqueue(b, true)
	// Wait for the writer to write the answer and half-close, then read and
	// drop what the client still sends until it closes, so that the answer
	// is not lost to a reset.
	<-c.wdone
	c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, c.nc, lingerBytes)
	c.close(errors.New(msg))
}

// writeLoop drains the queue into a buffered writer and flushes only when
// the queue is empty (after yielding once), so frames queued together leave
// in one system call.
func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	defer close(c.wdone)
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
				c.wq = c.wspare[:0]
				c.wspare = nil
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
			for i := range batch {
				if _, err := bw.Write(batch[i].b); err != nil {
					c.close(fmt.Errorf("write: %w", err))
					return
				}
				if batch[i].last {
					if bw.Flush() == nil {
						if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
							tc.CloseWrite()
						}
					}
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
		if err := bw.Flush(); err != nil {
			c.close(fmt.Errorf("write: %w", err))
			return
		}
	}
}

// readLoop reads frames until the connection ends.
func (c *conn) readLoop() {
	defer c.s.wg.Done()
	rd := frame.NewReader(c.nc, c.s.cfg.MaxFrame)
	for {
		h, body, err := rd.Read()
		if err != nil {
			var ve *frame.VersionError
			var tl *frame.TooLargeError
			switch {
			case errors.As(err, &ve):
				c.fatal(h, ve.Error())
			case errors.As(err, &tl):
				c.fatal(h, tl.Error())
			case errors.Is(err, io.ErrUnexpectedEOF):
				c.fatal(h, "Truncated frame: the stream ended inside a frame")
			default:
				c.close(err)
			}
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
		f, err := frame.DecodeFrame(h, body)
		if err != nil {
			c.fatal(h, err.Error())
			return
		}
		c.dispatch(h, f)
	}
}

// reply queues a response on the request's stream.
func (c *conn) reply(h frame.Header, m frame.Message) {
	c.send(&frame.Frame{Stream: h.Stream, Message: m})
}

func protocolErrorf(format string, args ...any) *frame.Error {
	return frame.Errorf(frame.ErrProtocol, format, args...)
}

// dispatch answers the handshake messages in order, here, and hands
// statements to goroutines of their own.
func (c *conn) dispatch(h frame.Header, f *frame.Frame) {
	op := h.Op
	switch c.state {
	case stateNew:
		if op != frame.OpStartup && op != frame.OpOptions {
			c.reply(h, protocolErrorf("Unexpected message %v, expecting STARTUP or OPTIONS", op))
			return
		}
	case stateAuth:
		if op != frame.OpAuthResponse && op != frame.OpOptions {
			c.reply(h, protocolErrorf("Unexpected message %v, expecting SASL_RESPONSE", op))
			return
		}
	case stateReady:
		if op == frame.OpStartup {
			c.reply(h, protocolErrorf("Unexpected message STARTUP, the connection is already initialized"))
			return
		}
		if op == frame.OpAuthResponse {
			c.reply(h, protocolErrorf("Unexpected message AUTH_RESPONSE, the connection is already authenticated"))
			return
		}
	}
	switch m := f.Message.(type) {
	case *frame.Options:
		c.reply(h, &frame.Supported{Options: supported})
	case *frame.Startup:
		c.startup(h, m)
	case *frame.AuthResponse:
		c.authResponse(h, m)
	case *frame.Register:
		c.register(h, m)
	case *frame.Query, *frame.Prepare, *frame.Execute, *frame.Batch:
		c.s.wg.Add(1)
		go c.execute(h, f)
	default:
		c.reply(h, protocolErrorf("Unexpected message %v", op))
	}
}

func (c *conn) startup(h frame.Header, m *frame.Startup) {
	if _, ok := m.Options["CQL_VERSION"]; !ok {
		c.reply(h, protocolErrorf("Missing value CQL_VERSION in STARTUP message"))
		return
	}
	if comp, ok := m.Options["COMPRESSION"]; ok && comp != "" {
		c.reply(h, protocolErrorf("Unknown compression algorithm: %s", comp))
		return
	}
	if c.s.cfg.Auth != nil {
		c.state = stateAuth
		c.reply(h, &frame.Authenticate{Authenticator: Authenticator})
		return
	}
	c.state = stateReady
	c.reply(h, &frame.Ready{})
}

// authResponse checks a SASL PLAIN token, "authzid\x00user\x00password"
// (drivers send an empty authzid), as Cassandra's PasswordAuthenticator.
// A failed attempt leaves the connection waiting for another.
func (c *conn) authResponse(h frame.Header, m *frame.AuthResponse) {
	parts := bytes.Split(m.Token, []byte{0})
	if len(parts) < 2 || len(parts) > 3 {
		c.reply(h, frame.Errorf(frame.ErrBadCredentials, "Authentication ID must not be null"))
		return
	}
	pass := string(parts[len(parts)-1])
	user := string(parts[len(parts)-2])
	if user == "" {
		c.reply(h, frame.Errorf(frame.ErrBadCredentials, "Authentication ID must not be null"))
		return
	}
	if want, ok := c.s.cfg.Auth[user]; !ok || want != pass {
		c.reply(h, frame.Errorf(frame.ErrBadCredentials, "Provided username %s and/or password are incorrect", user))
		return
	}
	c.sessMu.Lock()
	c.sess.User = user
	c.sessMu.Unlock()
	c.state = stateReady
	c.reply(h, &frame.AuthSuccess{})
}

var eventTypes = []string{frame.EventTopologyChange, frame.EventStatusChange, frame.EventSchemaChange}

// register adds event types to the connection's subscription.
func (c *conn) register(h frame.Header, m *frame.Register) {
	for _, t := range m.Events {
		if !slices.Contains(eventTypes, t) {
			c.reply(h, protocolErrorf("Invalid value '%s' for Event.Type", t))
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
					c.send(&frame.Frame{Version: version, Stream: -1, Message: ev})
				}
			})
		}
		c.evMu.Unlock()
	}
	c.reply(h, &frame.Ready{})
}

func (c *conn) closedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// execute runs one statement request on the executor and answers it. The
// executor gets its own copy of the connection's Session; a keyspace it sets
// (USE) is kept for the requests that start after it returns.
func (c *conn) execute(h frame.Header, f *frame.Frame) {
	defer c.s.wg.Done()
	var out Outcome
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				c.log.Error("panic in request", "op", h.Op, "stream", h.Stream, "panic", r, "stack", string(debug.Stack()))
				err = frame.Errorf(frame.ErrServer, "internal error: %v", r)
			}
		}()
		c.sessMu.Lock()
		sess := c.sess
		c.sessMu.Unlock()
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
	resp := &frame.Frame{Stream: h.Stream, Payload: out.Payload, Warnings: out.Warnings}
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
	c.send(resp)
}
