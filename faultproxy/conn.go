package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/cql/frame"
)

// conn is one proxied driver connection and its server connection.
type conn struct {
	p              *Proxy
	client, server net.Conn

	wmu sync.Mutex    // serialises writes to the client
	cw  *bufio.Writer // to the client, under wmu

	// comp is the frame compression the client's STARTUP asked for (a
	// frame.Compression), set by fromClient and read by fromServer: frames
	// with the compression flag are decompressed to be inspected, and a
	// rewritten one is compressed again.
	comp atomic.Uint32

	mu      sync.Mutex
	pending map[int16]*request
	timers  map[*time.Timer]struct{}
	closed  bool
	once    sync.Once
}

// request is what a connection remembers of a forwarded request until its
// response.
type request struct {
	op    frame.Opcode
	fault fault
	ev    Event    // the fault's event, filled in at arrival
	st    *opState // the op id's state, nil without one
	// prepare is the text of a PREPARE, to learn its id from the result.
	prepare string
	// table is the system peer table a QUERY or EXECUTE reads; cols the
	// prepared result metadata of an EXECUTE (rows may come without).
	table string
	cols  []frame.ColumnSpec
}

func (c *conn) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
		c.mu.Lock()
		c.closed = true
		for t := range c.timers {
			t.Stop()
		}
		c.timers = nil
		c.mu.Unlock()
		c.p.mu.Lock()
		delete(c.p.open, c)
		c.p.mu.Unlock()
	})
}

// fail logs why the connection closes and closes it.
func (c *conn) fail(side string, err error) {
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.p.g.cfg.Logger.Warn("faultproxy: closing connection", "proxy", c.p.Addr(), "server", c.p.target,
			"side", side, "client", c.client.RemoteAddr().String(), "err", err)
	}
	c.close()
}

func frameBytes(h frame.Header, body []byte) []byte {
	b := make([]byte, 0, h.Size()+len(body))
	return append(frame.AppendHeader(b, h), body...)
}

// writeFrame writes a frame to w, unflushed.
func writeFrame(w *bufio.Writer, h frame.Header, body []byte) error {
	var hb [frame.HeaderSize]byte
	if _, err := w.Write(frame.AppendHeader(hb[:0], h)); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// fromClient forwards requests to the server.
func (c *conn) fromClient() {
	defer c.p.wg.Done()
	br := bufio.NewReaderSize(c.client, 64<<10)
	r := frame.NewReader(br, 0)
	sw := bufio.NewWriterSize(c.server, 64<<10)
	for {
		h, body, err := r.Read()
		if err != nil {
			var ve *frame.VersionError
			if errors.As(err, &ve) {
				// Answer as Cassandra does, so that the driver downgrades
				// (the proxy cannot follow v5's framing).
				c.linger(c.versionError(ve.Header))
				err = fmt.Errorf("faultproxy: client: %w", err)
			}
			c.fail("client", err)
			return
		}
		if h.IsResponse() {
			c.fail("client", fmt.Errorf("faultproxy: client sent a response frame (%s)", h.Op))
			return
		}
		if h.Op == frame.OpStartup && h.Flags&frame.FlagCompression == 0 {
			if f, err := frame.DecodeFrame(h, body); err == nil {
				if comp, ok := frame.ParseCompression(f.Message.(*frame.Startup).Options["COMPRESSION"]); ok {
					c.comp.Store(uint32(comp))
				}
			}
		}
		req, err := c.inspect(h, body)
		if err != nil {
			c.fail("client", err)
			return
		}
		c.p.requests.Add(1)
		if req != nil {
			c.mu.Lock()
			c.pending[h.Stream] = req
			c.mu.Unlock()
		}
		// Frames that came together leave together: flush when no
		// further request is buffered, or before a reset.
		err = writeFrame(sw, h, body)
		if err == nil && (br.Buffered() == 0 || req != nil && req.fault == faultReset) {
			err = sw.Flush()
		}
		if err != nil {
			c.fail("server", fmt.Errorf("faultproxy: write to server: %w", err))
			return
		}
		if req != nil && req.fault == faultReset {
			c.inject(req)
			c.close()
			return
		}
	}
}

// linger writes a last answer to the client, half-closes, and drops what
// the client still sends for a moment, so that the answer is not lost to a
// reset.
func (c *conn) linger(b []byte) {
	c.writeClient(b, true)
	if tc, ok := c.client.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = c.client.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.CopyN(io.Discard, c.client, 64<<10)
}

func (c *conn) versionError(h frame.Header) []byte {
	b, err := frame.AppendFrame(nil, &frame.Frame{Version: h.AnswerVersion(), Stream: h.Stream,
		Message: &frame.Error{Code: frame.ErrProtocol, Message: frame.VersionMessage(h.ProtoVersion())}})
	if err != nil {
		return nil
	}
	return b
}

// inspect decodes what the proxy needs of a request: whether the filter
// selects it and its fault, whether its answer holds system peer rows, a
// PREPARE's text. It returns nil for requests it does not track.
func (c *conn) inspect(h frame.Header, body []byte) (*request, error) {
	switch h.Op {
	case frame.OpQuery, frame.OpExecute, frame.OpBatch, frame.OpPrepare:
	default:
		return nil, nil
	}
	h, body, err := c.plain(h, body)
	if err != nil {
		return nil, err
	}
	f, err := frame.DecodeFrame(h, body)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %s request: %w", h.Op, err)
	}
	g := c.p.g
	req := &request{op: h.Op}
	match, statements := false, 1
	switch m := f.Message.(type) {
	case *frame.Prepare:
		req.prepare = m.Query
		return req, nil
	case *frame.Query:
		match = g.cfg.Match(m.Query)
		req.table = systemTable(m.Query)
	case *frame.Execute:
		if p, ok := g.preparedInfo(m.ID); ok {
			match, req.table, req.cols = p.match, p.table, p.cols
		}
	case *frame.Batch:
		statements = len(m.Statements)
		for _, s := range m.Statements {
			if s.PreparedID != nil {
				p, ok := g.preparedInfo(s.PreparedID)
				match = match || ok && p.match
			} else {
				match = match || g.cfg.Match(s.Query)
			}
		}
	}
	if !match {
		if req.table == "" {
			return nil, nil
		}
		return req, nil
	}
	c.p.matched.Add(1)
	var op client.OpID
	hasOp := false
	if raw, ok := f.Payload[client.PayloadKey]; ok {
		if id, err := client.ParseOpID(raw); err == nil {
			op, hasOp = id, true
		}
	}
	st, op, attempt := g.arrive(op, hasOp, statements)
	req.st = st
	req.fault = g.sched.Load().decide(op, attempt)
	req.ev = Event{Node: c.p.node, Proxy: c.p.Addr(), Stream: h.Stream, Op: op, HasOp: hasOp, Attempt: attempt, Statements: statements}
	return req, nil
}

func (c *conn) inject(req *request) {
	switch req.fault {
	case faultLostAck:
		req.ev.Kind = KindLostAck
	case faultDelay:
		req.ev.Kind = KindDelay
	case faultReset:
		req.ev.Kind = KindReset
	default:
		return
	}
	c.p.faults.Add(1)
	c.p.g.record(req.ev)
}

// writeClient writes b to the client, and flushes what is buffered when
// flush is set (b may be nil to flush only).
func (c *conn) writeClient(b []byte, flush bool) {
	c.wmu.Lock()
	_, err := c.cw.Write(b)
	if err == nil && flush {
		err = c.cw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail("client", fmt.Errorf("faultproxy: write to client: %w", err))
	}
}

// fromServer forwards responses and events to the client, applying the
// faults decided at the requests' arrival.
func (c *conn) fromServer() {
	defer c.p.wg.Done()
	br := bufio.NewReaderSize(c.server, 64<<10)
	r := frame.NewReader(br, 0)
	for {
		h, body, err := r.Read()
		if err != nil {
			c.fail("server", err)
			return
		}
		if !h.IsResponse() {
			c.fail("server", fmt.Errorf("faultproxy: server sent a request frame (%s)", h.Op))
			return
		}
		out, err := c.response(h, body)
		if err != nil {
			c.fail("server", err)
			return
		}
		// Answers that came together leave together.
		if flush := br.Buffered() == 0; out != nil || flush {
			c.writeClient(out, flush)
		}
	}
}

// plain returns a frame's header and body uncompressed: as they are
// without the compression flag, else decompressed with the connection's
// compression (none: as they are, which DecodeFrame refuses).
func (c *conn) plain(h frame.Header, body []byte) (frame.Header, []byte, error) {
	comp := frame.Compression(c.comp.Load())
	if h.Flags&frame.FlagCompression == 0 || comp == frame.NoCompression {
		return h, body, nil
	}
	b, err := frame.Decompress(comp, body, frame.DefaultMaxBody)
	if err != nil {
		return h, nil, fmt.Errorf("faultproxy: %s frame: %w", h.Op, err)
	}
	h.Flags &^= frame.FlagCompression
	h.Length = int32(len(b))
	return h, b, nil
}

// recompress compresses a rewritten frame b again if the frame it replaces
// (header h) was compressed.
func (c *conn) recompress(h frame.Header, b []byte) ([]byte, error) {
	if h.Flags&frame.FlagCompression == 0 {
		return b, nil
	}
	return frame.CompressFrame(frame.Compression(c.comp.Load()), b)
}

// response returns the frame to forward for a response or event, nil when
// it is dropped or delayed; an error means it is malformed.
func (c *conn) response(wh frame.Header, wbody []byte) ([]byte, error) {
	addrs := c.p.g.addrs.Load()
	out := frameBytes(wh, wbody)
	// h and body are the frame uncompressed, decompressed only when it is
	// inspected.
	h, body := wh, wbody
	if h.Op == frame.OpEvent {
		var err error
		if h, body, err = c.plain(wh, wbody); err != nil {
			return nil, err
		}
		b, changed, err := addrs.rewriteEvent(h, body)
		if err == nil && changed {
			b, err = c.recompress(wh, b)
		}
		if err != nil {
			return nil, err
		}
		if changed {
			out = b
			c.p.rewrites.Add(1)
			c.p.events.Add(1)
		}
		return out, nil
	}
	c.mu.Lock()
	req := c.pending[h.Stream]
	delete(c.pending, h.Stream)
	c.mu.Unlock()
	if req == nil {
		return out, nil
	}
	if req.fault == faultReset {
		// The connection is being closed: no answer of the request may
		// slip through before it is.
		return nil, nil
	}
	ok := h.Op == frame.OpResult
	if !ok {
		// The server refused or failed the request: its answer goes
		// through, as the bench's injector faults applied ops only.
		return out, nil
	}
	if req.prepare != "" || req.table != "" {
		var err error
		if h, body, err = c.plain(wh, wbody); err != nil {
			return nil, err
		}
	}
	if req.prepare != "" {
		f, err := frame.DecodeFrame(h, body)
		if err != nil {
			return nil, fmt.Errorf("faultproxy: prepared result: %w", err)
		}
		if pr, isPrep := f.Message.(*frame.PreparedResult); isPrep {
			c.p.g.addPrepared(pr.ID, req.prepare, pr.ResultColumns)
		}
	}
	if req.table != "" {
		b, changed, err := addrs.rewriteResult(h, body, req.cols)
		if err == nil && changed {
			b, err = c.recompress(wh, b)
		}
		if err != nil {
			return nil, err
		}
		if changed {
			out = b
			c.p.rewrites.Add(1)
		}
	}
	if req.st != nil {
		c.p.g.acked(req.st)
	}
	switch req.fault {
	case faultLostAck:
		c.inject(req)
		return nil, nil
	case faultDelay:
		c.inject(req)
		c.later(c.p.g.sched.Load().DelayBy, out)
		return nil, nil
	}
	return out, nil
}

// later writes b to the client after d, unless the connection closes
// first.
func (c *conn) later(d time.Duration, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		c.mu.Lock()
		_, live := c.timers[t]
		delete(c.timers, t)
		c.mu.Unlock()
		if live {
			c.writeClient(b, true)
		}
	})
	c.timers[t] = struct{}{}
}
