package cql

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
)

// waitFor polls cond until it holds, failing the test after the safety
// deadline; it asserts nothing about how long that takes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// flakyListener fails its first Accept calls with the errors in errs.
type flakyListener struct {
	net.Listener
	errs []error
	n    atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if i := int(l.n.Add(1)) - 1; i < len(l.errs) {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: l.errs[i]}
	}
	return l.Listener.Accept()
}

// TestAcceptSurvivesTransientErrors: Accept fails with EMFILE, ENFILE and
// ECONNABORTED, several times; the server retries and answers the next
// client.
func TestAcceptSurvivesTransientErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := os.NewSyscallError("accept4", syscall.EMFILE)
	fl := &flakyListener{Listener: ln, errs: []error{emfile, emfile, emfile, emfile,
		os.NewSyscallError("accept4", syscall.ENFILE), os.NewSyscallError("accept4", syscall.ECONNABORTED), emfile}}
	s, _ := startServer(t, ServerConfig{Listener: fl})
	c := dial(t, s)
	c.handshake()
	if m := c.call(3, query("echo")); m.Opcode() != frame.OpResult {
		t.Fatalf("after accept errors: %+v", m)
	}
	if got := s.Stats().AcceptErrors; got != int64(len(fl.errs)) {
		t.Errorf("AcceptErrors %d, want %d", got, len(fl.errs))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// dialFrom connects to s from the local address ip (any 127/8 address
// works on Linux's loopback).
func dialFrom(t *testing.T, s *Server, ip string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: frame.NewReader(nc, 0)}
}

// expectRefused checks that a connection over a limit is answered, on its
// first frame's stream, with an OVERLOADED error, then closed.
func (c *client) expectRefused(substr string) {
	c.t.Helper()
	c.send(7, &frame.Options{}, nil)
	h, f := c.recv()
	if h.Stream != 7 || h.Version != 0x84 {
		c.t.Errorf("refusal on %+v", h)
	}
	wantError(c.t, f.Message, frame.ErrOverloaded, substr)
	c.expectEOF()
}

func TestConnectionLimits(t *testing.T) {
	t.Run("total", func(t *testing.T) {
		s, _ := startServer(t, ServerConfig{MaxConnections: 3})
		var cs []*client
		for range 3 {
			c := dial(t, s)
			c.handshake()
			cs = append(cs, c)
		}
		dial(t, s).expectRefused("Exceeded maximum native connection limit of 3 by using 4 connections")
		st := s.Stats()
		if st.ConnectionsRefused != 1 || st.ConnectionsOpen != 3 {
			t.Errorf("stats %+v", st)
		}
		// The served connections still work; once one closes, a new one
		// is served.
		if m := cs[0].call(9, query("echo")); m.Opcode() != frame.OpResult {
			t.Fatalf("served connection: %+v", m)
		}
		cs[1].nc.Close()
		waitFor(t, "the closed connection is uncounted", func() bool { return s.Stats().ConnectionsOpen == 2 })
		dial(t, s).handshake()
	})
	t.Run("per ip", func(t *testing.T) {
		s, _ := startServer(t, ServerConfig{MaxConnectionsPerIP: 2})
		for range 2 {
			dialFrom(t, s, "127.0.0.1").handshake()
		}
		dialFrom(t, s, "127.0.0.1").expectRefused("Exceeded maximum native connection limit per ip of 2 by using 3 connections")
		// Another source address is served.
		dialFrom(t, s, "127.0.0.2").handshake()
		if st := s.Stats(); st.ConnectionsRefused != 1 || st.ConnectionsOpen != 3 {
			t.Errorf("stats %+v", st)
		}
	})
}

// header is a request header with the given opcode and body length; the
// body is not sent.
func header(stream int16, op frame.Opcode, length int) []byte {
	return frame.AppendHeader(nil, frame.Header{Version: 4, Stream: stream, Op: op, Length: int32(length)})
}

// TestFrameLimits: before the handshake is done a frame over
// MaxHandshakeFrame is refused, after it one over MaxFrame; both are
// answered from their header alone (the body is never sent, so the server
// cannot have waited for it) and the connection closed.
func TestFrameLimits(t *testing.T) {
	s, _ := startServer(t, ServerConfig{MaxFrame: 1 << 20, MaxHandshakeFrame: 4096, Auth: map[string]string{"u": "p"}})

	c := dial(t, s)
	c.write(header(3, frame.OpStartup, 4097))
	h, f := c.recv()
	if h.Stream != 3 {
		t.Errorf("answer on stream %d", h.Stream)
	}
	wantError(t, f.Message, frame.ErrProtocol, "Request is too big: length 4106 exceeds maximum allowed length 4105.")
	c.expectEOF()

	// Still before AUTH_SUCCESS: the handshake limit holds.
	c = dial(t, s)
	if _, ok := c.call(1, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}).(*frame.Authenticate); !ok {
		t.Fatal("no AUTHENTICATE")
	}
	c.write(header(4, frame.OpAuthResponse, 5000))
	_, f = c.recv()
	wantError(t, f.Message, frame.ErrProtocol, "Request is too big")
	c.expectEOF()

	// After it, frames up to MaxFrame are served, larger ones refused.
	c = dial(t, s)
	c.call(1, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	if m := c.call(2, &frame.AuthResponse{Token: []byte("\x00u\x00p")}); m.Opcode() != frame.OpAuthSuccess {
		t.Fatalf("AUTH_RESPONSE: %+v", m)
	}
	if m := c.call(3, query(strings.Repeat(" ", 512<<10))); m.Opcode() != frame.OpResult {
		t.Fatalf("512 KiB query: %+v", m)
	}
	c.write(header(5, frame.OpQuery, 1<<20+1))
	_, f = c.recv()
	wantError(t, f.Message, frame.ErrProtocol, "Request is too big")
	c.expectEOF()

	if got := s.Stats().FramesTooLarge; got != 3 {
		t.Errorf("FramesTooLarge %d, want 3", got)
	}
}

// pipeline sends requests for answers of 64 KiB on c, without ever
// reading, until a write fails (the test closed the connection).
func pipeline(c *client) {
	b, err := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: 1, Message: query("big 65536")})
	if err != nil {
		panic(err)
	}
	batch := make([]byte, 0, 64*len(b))
	for i := range 64 {
		binary.BigEndian.PutUint16(b[2:4], uint16(i+1))
		batch = append(batch, b...)
	}
	for {
		if _, err := c.nc.Write(batch); err != nil {
			return
		}
	}
}

// TestBackpressureNeverReadingClient: a client pipelines requests whose
// answers it never reads. Once the socket buffers are full the server
// stops reading it: its bytes in flight stay within the connection's limit,
// and another connection is served meanwhile.
func TestBackpressureNeverReadingClient(t *testing.T) {
	const perConn = 16 << 10
	s, _ := startServer(t, ServerConfig{MaxInFlightBytesPerConn: perConn, WriteTimeout: -1})
	bad := dial(t, s)
	bad.handshake()
	go pipeline(bad)
	waitFor(t, "the server stops reading the pipelining connection", func() bool { return s.Stats().ReadsPausedNow == 1 })
	st := s.Stats()
	if st.RequestBytesInFlight > perConn || st.PeakRequestBytesInFlight > perConn {
		t.Errorf("in flight %d (peak %d) over the connection's limit %d", st.RequestBytesInFlight, st.PeakRequestBytesInFlight, perConn)
	}
	// The queued answers are those of the requests in flight, no more.
	if st.QueuedResponseBytes > st.RequestsInFlight*(65536+100) {
		t.Errorf("%d answer bytes queued for %d requests in flight", st.QueuedResponseBytes, st.RequestsInFlight)
	}
	good := dial(t, s)
	good.handshake()
	for i := range 10 {
		if m := good.call(int16(10+i), query("echo")); m.Opcode() != frame.OpResult {
			t.Fatalf("other connection: %+v", m)
		}
	}
	// The pipelining connection is paused again (its answers may still
	// have been draining into the socket's buffers meanwhile, letting it
	// read a few more requests: a snapshot here was flaky).
	waitFor(t, "the pipelining connection paused", func() bool {
		st := s.Stats()
		return st.ReadsPausedNow == 1 && st.ReadPauses >= 1
	})
	// Closing the pipelining connection releases all it held.
	bad.nc.Close()
	waitFor(t, "the pipelining connection's requests are released", func() bool {
		st := s.Stats()
		return st.ConnectionsOpen == 1 && st.RequestBytesInFlight == 0 && st.QueuedResponseBytes == 0 && st.ReadsPausedNow == 0
	})
}

// TestBackpressurePerIPAndServer: two pipelining connections from one
// address stay within the per-address limit together; with a server limit,
// within that; the second connection's handshake is served although the
// first filled the shared limit.
func TestBackpressurePerIPAndServer(t *testing.T) {
	for _, cfg := range []ServerConfig{
		{MaxInFlightBytesPerConn: -1, MaxInFlightBytesPerIP: 24 << 10, WriteTimeout: -1},
		{MaxInFlightBytesPerConn: -1, MaxInFlightBytes: 24 << 10, WriteTimeout: -1},
	} {
		s, _ := startServer(t, cfg)
		for range 2 {
			c := dial(t, s)
			c.handshake()
			go pipeline(c)
		}
		waitFor(t, "the server stops reading both", func() bool { return s.Stats().ReadsPausedNow == 2 })
		// Handshake frames (OPTIONS and STARTUP, a few bytes) are held to
		// the connection's limits only, and may come on top.
		if st := s.Stats(); st.PeakRequestBytesInFlight > 24<<10+256 {
			t.Errorf("%+v: peak in flight %d over the limit", cfg, st.PeakRequestBytesInFlight)
		}
		s.Close()
	}
}

// TestWriteTimeout: a connection whose answers are never read is closed
// once its writer has been blocked for the write timeout, and all it held
// is released.
func TestWriteTimeout(t *testing.T) {
	s, _ := startServer(t, ServerConfig{WriteTimeout: 50 * time.Millisecond})
	bad := dial(t, s)
	bad.handshake()
	go pipeline(bad)
	waitFor(t, "the blocked connection is closed", func() bool {
		st := s.Stats()
		return st.WriteTimeouts == 1 && st.ConnectionsOpen == 0 && st.RequestBytesInFlight == 0 && st.QueuedResponseBytes == 0
	})
	dial(t, s).handshake()
}

func TestIdleTimeout(t *testing.T) {
	s, ex := startServer(t, ServerConfig{IdleTimeout: 50 * time.Millisecond})
	// A connection with a request in flight is not idle.
	busy := dial(t, s)
	busy.handshake()
	busy.send(5, query("wait 1"), nil)
	<-ex.started

	idle := dial(t, s)
	idle.handshake()
	idle.expectEOF()
	if got := s.Stats().IdleTimeouts; got != 1 {
		t.Errorf("IdleTimeouts %d", got)
	}
	ex.release(1)
	if h, _ := busy.recv(); h.Stream != 5 {
		t.Fatalf("answer on stream %d", h.Stream)
	}
	// Once idle, it goes too.
	busy.expectEOF()
}

func TestHalfFrameTimeout(t *testing.T) {
	s, _ := startServer(t, ServerConfig{HalfFrameTimeout: 50 * time.Millisecond})
	c := dial(t, s)
	c.write(header(1, frame.OpOptions, 0)[:4]) // half a header
	c.expectEOF()

	c = dial(t, s)
	c.handshake()
	b, _ := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: 3, Message: query("echo")})
	c.write(b[:len(b)-3]) // all but the body's last bytes
	c.expectEOF()
	if got := s.Stats().HalfFrameTimeouts; got != 2 {
		t.Errorf("HalfFrameTimeouts %d", got)
	}
	// Without an idle timeout, a connection between frames stays.
	c = dial(t, s)
	c.handshake()
	time.Sleep(150 * time.Millisecond)
	if m := c.call(4, query("echo")); m.Opcode() != frame.OpResult {
		t.Fatalf("%+v", m)
	}
}

// TestMaxRequestsPerConn: with at most 3 requests in flight per connection,
// 5 pipelined requests that block in the executor start 3 at a time; the
// server stops reading until one is answered.
func TestMaxRequestsPerConn(t *testing.T) {
	s, ex := startServer(t, ServerConfig{MaxRequestsPerConn: 3})
	c := dial(t, s)
	c.handshake()
	var buf []byte
	for i := range 5 {
		var err error
		buf, err = frame.AppendFrame(buf, &frame.Frame{Version: 4, Stream: int16(10 + i), Message: query(fmt.Sprintf("wait %d", i))})
		if err != nil {
			t.Fatal(err)
		}
	}
	c.write(buf)
	for range 3 {
		<-ex.started
	}
	waitFor(t, "the reader pauses", func() bool { return s.Stats().ReadsPausedNow == 1 })
	if st := s.Stats(); st.RequestsInFlight != 3 {
		t.Fatalf("%d requests in flight, want 3", st.RequestsInFlight)
	}
	select {
	case q := <-ex.started:
		t.Fatalf("%q started over the limit", q)
	default:
	}
	ex.release(0)
	if h, _ := c.recv(); h.Stream != 10 {
		t.Fatalf("answer on stream %d", h.Stream)
	}
	if q := <-ex.started; q != "wait 3" {
		t.Fatalf("started %q, want wait 3", q)
	}
	for i := 1; i < 5; i++ {
		ex.release(i)
	}
	for range 4 {
		c.recv()
	}
	waitFor(t, "nothing in flight", func() bool { st := s.Stats(); return st.RequestsInFlight == 0 && st.ReadsPausedNow == 0 })
}

// TestRefusedInTheClientsVersion: a v3 client over the limit is answered in
// v3; a client with a version above the server's gets the version error in
// v4 (so that a driver downgrades and tries again), as Cassandra answers.
func TestRefusedInTheClientsVersion(t *testing.T) {
	s, _ := startServer(t, ServerConfig{MaxConnections: 1})
	dial(t, s).handshake()
	c := dial(t, s)
	b, _ := frame.AppendFrame(nil, &frame.Frame{Version: 3, Stream: 5, Message: &frame.Options{}})
	c.write(b)
	h, f := c.recv()
	if h.Version != 0x83 || h.Stream != 5 {
		t.Errorf("v3 refusal on %+v", h)
	}
	wantError(t, f.Message, frame.ErrOverloaded, "Exceeded maximum native connection limit of 1")
	c.expectEOF()

	c = dial(t, s)
	c.write(mustHex(t, "05 00 0107 05 00000000"))
	c.nc.SetReadDeadline(time.Now().Add(safety))
	resp, err := io.ReadAll(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp) < 9 || resp[0] != 0x84 || !strings.Contains(string(resp), "Invalid or unsupported protocol version (5)") {
		t.Fatalf("v5 refusal %q", resp)
	}
}

// TestEventsToANeverReadingClient: a connection registered for events that
// never reads them is closed once more than its in-flight limit of events
// waits for its writer, even without a write timeout.
func TestEventsToANeverReadingClient(t *testing.T) {
	evs := &fakeEvents{}
	s, _ := startServer(t, ServerConfig{Events: evs, MaxInFlightBytesPerConn: 8 << 10, WriteTimeout: -1})
	c := dial(t, s)
	c.handshake()
	if m := c.call(3, &frame.Register{Events: []string{frame.EventSchemaChange}}); m.Opcode() != frame.OpReady {
		t.Fatalf("REGISTER: %+v", m)
	}
	ev := frame.Event{Type: frame.EventSchemaChange, Change: "CREATED",
		Schema: frame.SchemaChangeResult{Change: "CREATED", Target: frame.TargetKeyspace, Keyspace: strings.Repeat("k", 1000)}}
	waitFor(t, "the connection is closed", func() bool {
		for range 100 {
			evs.publish(ev)
		}
		st := s.Stats()
		return st.EventOverflows == 1 && st.ConnectionsOpen == 0 && st.QueuedResponseBytes == 0
	})
	if evs.count() != 0 {
		t.Errorf("%d subscriptions left", evs.count())
	}
}

// countingListener counts the bytes its connections read.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: nc, read: &l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingConn) CloseWrite() error {
	if tc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return tc.CloseWrite()
	}
	return nil
}

// TestOversizedFrameNotDrained: a client that announces a 256 MiB frame and
// streams its body is answered and closed without the server reading a
// lingering megabyte of that body; a frame header alone is answered as
// before (TestFrameLimits).
func TestOversizedFrameNotDrained(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	s, _ := startServer(t, ServerConfig{Listener: cl})
	c := dial(t, s)
	c.handshake()
	before := cl.read.Load()
	c.write(header(5, frame.OpQuery, 256<<20))
	sent := make(chan int64)
	go func() {
		zeros := make([]byte, 64<<10)
		var n int64
		c.nc.SetWriteDeadline(time.Now().Add(safety))
		for n < 8<<20 {
			m, err := c.nc.Write(zeros)
			n += int64(m)
			if err != nil {
				break
			}
		}
		sent <- n
	}()
	waitFor(t, "the connection is closed", func() bool { return s.Stats().ConnectionsOpen == 0 })
	c.nc.Close()
	n := <-sent
	if got := cl.read.Load() - before; got >= lingerBytes {
		t.Errorf("the server read %d bytes of the oversized frame (the client sent %d)", got, n)
	}
	if got := s.Stats().FramesTooLarge; got != 1 {
		t.Errorf("FramesTooLarge %d", got)
	}
}
