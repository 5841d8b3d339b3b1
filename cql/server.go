package cql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/idemkv/idemkv/internal/workpool"
)

// ServerConfig configures a CQL server.
type ServerConfig struct {
	// Addr is the TCP address to listen on, e.g. "127.0.0.2:9042"; port 0
	// picks a free port (see Server.Addr).
	Addr string
	// Executor runs QUERY, PREPARE, EXECUTE and BATCH. Required.
	Executor Executor
	// Events feeds EVENT frames to connections that sent REGISTER; nil: no
	// events are ever pushed (REGISTER is still answered READY).
	Events Events
	// Listener, when non-nil, is served instead of listening on Addr (a
	// test's wrapper, or a socket handed over); Close closes it.
	Listener net.Listener
	// MaxFrame is the largest frame body accepted once a connection's
	// handshake is done (native_transport_max_frame_size); 0 means
	// DefaultMaxFrame (16 MiB). A larger frame is answered with a protocol
	// error and the connection closed, its body neither read nor allocated.
	// A compressed body is held to it once decompressed, from the length it
	// claims: over it, a protocol error on its stream, nothing allocated.
	MaxFrame int
	// MaxHandshakeFrame is the largest frame body accepted before the
	// handshake is done (STARTUP, AUTH_RESPONSE), at most MaxFrame
	// (native_transport_max_auth_message_size); 0 means
	// DefaultMaxHandshakeFrame (128 KiB).
	MaxHandshakeFrame int
	// MaxConnections is the most connections served at once
	// (native_transport_max_concurrent_connections) and MaxConnectionsPerIP
	// the most from one source address
	// (native_transport_max_concurrent_connections_per_ip); ≤ 0: no limit,
	// Cassandra's default. A connection over a limit is answered with an
	// OVERLOADED error on its first frame and closed.
	MaxConnections      int
	MaxConnectionsPerIP int
	// MaxInFlightBytes, MaxInFlightBytesPerIP and MaxInFlightBytesPerConn
	// limit the request bytes in flight (read, and not yet answered on the
	// socket) for the server, per source address and per connection
	// (native_transport_max_request_data_in_flight, its _per_ip form and
	// native_transport_receive_queue_capacity); MaxRequestsPerConn limits
	// the requests in flight per connection. A connection over a limit
	// stops reading its socket until answers are written, as Cassandra's.
	// 0 means the Default; < 0 no limit.
	MaxInFlightBytes        int64
	MaxInFlightBytesPerIP   int64
	MaxInFlightBytesPerConn int64
	MaxRequestsPerConn      int
	// IdleTimeout closes a connection that has neither read nor written
	// anything, with no request in flight, for that long
	// (native_transport_idle_timeout); 0: never, Cassandra's default.
	IdleTimeout time.Duration
	// HalfFrameTimeout closes a connection on which a frame started
	// arriving and then nothing more came for that long; 0 means
	// DefaultHalfFrameTimeout, < 0 never.
	HalfFrameTimeout time.Duration
	// WriteTimeout closes a connection whose writes stay blocked that long
	// (the client does not read its answers); 0 means DefaultWriteTimeout,
	// < 0 never.
	WriteTimeout time.Duration
	// Auth maps users to passwords. When non-nil, STARTUP is answered with
	// AUTHENTICATE (PasswordAuthenticator) and a connection serves no
	// statement until an AUTH_RESPONSE with a valid user and password.
	Auth map[string]string
	// MemoryReleasePeak turns on giving memory back to the operating
	// system after a storm of connections: once the connections open have
	// reached MemoryReleasePeak and then fallen below a quarter of their
	// peak, the server collects garbage and returns the idle memory
	// (debug.FreeOSMemory), and once more an interval later if no other
	// storm came meanwhile; at most once every MemoryReleaseInterval. Each
	// release is logged and counted in Stats.MemoryReleases. 0 means
	// DefaultMemoryReleasePeak; < 0 never.
	MemoryReleasePeak int
	// MemoryReleaseInterval is the least time between two releases; 0
	// means DefaultMemoryReleaseInterval.
	MemoryReleaseInterval time.Duration
	// Logger receives connection errors and recovered panics; nil: none.
	Logger *slog.Logger
}

// Authenticator is the class name the server announces in AUTHENTICATE, one
// that drivers' password authenticators accept.
const Authenticator = "org.apache.cassandra.auth.PasswordAuthenticator"

// The SUPPORTED answer to OPTIONS; COMPRESSION in Cassandra's order
// (OptionsMessage: snappy when its library loads, then lz4).
var supported = map[string][]string{
	"CQL_VERSION":       {"3.4.4"},
	"PROTOCOL_VERSIONS": {"3/v3", "4/v4"},
	"COMPRESSION":       {"snappy", "lz4"},
}

// Server is a CQL native protocol server: it accepts connections and serves
// each on its own goroutines until Close.
//
// Per connection, one goroutine reads frames. The handshake (OPTIONS,
// STARTUP, AUTH_RESPONSE, REGISTER) is answered by that goroutine, in
// order; each statement request (QUERY, PREPARE, EXECUTE, BATCH) runs on a
// goroutine of its own and is answered on its stream id whenever it is done,
// so requests are pipelined and answered in any order. Responses and events
// go through a connection's queue and its writer goroutine, which drains
// the queue into a buffered writer and flushes when the queue is empty, so
// frames queued together leave in one write; the writer runs only while
// answers are queued, so an idle connection costs one goroutine (its
// reader) and no buffer.
//
// A frame the server cannot read in step (unsupported version, oversized,
// undecodable, unknown opcode) is answered with a protocol error on its
// stream and the connection is closed after that answer; other connections
// are not affected.
//
// Frame compression (lz4, snappy; formats in package frame) is offered in
// SUPPORTED and chosen by STARTUP's COMPRESSION option. As in Cassandra,
// every frame from the answer to STARTUP (READY or AUTHENTICATE) on is
// compressed; requests with the compression flag are decompressed, and
// requests without it are served as they are. A compressed body that does
// not decompress, or whose decompressed length is over the frame limit, is
// answered with a protocol error on its stream and the connection goes on,
// its frames still in step.
//
// The server is bounded under hostile clients (docs/limits.md): connections
// over MaxConnections or MaxConnectionsPerIP are refused with an OVERLOADED
// error; a frame body is limited to MaxHandshakeFrame until the handshake
// is done and to MaxFrame after, and refused from its header alone; a
// request's bytes count as in flight from its header until its answer is
// written, and a connection over an in-flight limit (its own, its source
// address's or the server's) stops reading its socket until answers are
// written; a write blocked for WriteTimeout, a frame stalled for
// HalfFrameTimeout and a connection idle for IdleTimeout close the
// connection. Stats counts all of it.
type Server struct {
	cfg    ServerConfig
	log    *slog.Logger
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup

	flow     flow
	stats    counters
	refusing chan struct{} // a slot per connection being refused
	// executing runs requests on goroutines kept between requests, whose
	// stacks have grown already (internal/workpool).
	executing *workpool.Pool

	// Accept loop only: refusals are logged at most once a second.
	refusedLogged   time.Time
	refusedUnlogged int

	// Memory release loop only (and tests): when it last released, whether
	// a follow-up release is due, and what releases memory.
	released     time.Time
	followUp     bool
	freeOSMemory func()
}

// Listen starts a server on cfg.Addr (or cfg.Listener).
func Listen(cfg ServerConfig) (*Server, error) {
	if cfg.Executor == nil {
		return nil, errors.New("cql: ServerConfig.Executor is nil")
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.MaxHandshakeFrame <= 0 {
		cfg.MaxHandshakeFrame = DefaultMaxHandshakeFrame
	}
	cfg.MaxHandshakeFrame = min(cfg.MaxHandshakeFrame, cfg.MaxFrame)
	defInt64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	defInt64(&cfg.MaxInFlightBytes, DefaultMaxInFlightBytes)
	defInt64(&cfg.MaxInFlightBytesPerIP, DefaultMaxInFlightBytesPerIP)
	defInt64(&cfg.MaxInFlightBytesPerConn, DefaultMaxInFlightBytesPerConn)
	if cfg.MaxRequestsPerConn == 0 {
		cfg.MaxRequestsPerConn = DefaultMaxRequestsPerConn
	}
	if cfg.HalfFrameTimeout == 0 {
		cfg.HalfFrameTimeout = DefaultHalfFrameTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MemoryReleasePeak == 0 {
		cfg.MemoryReleasePeak = DefaultMemoryReleasePeak
	}
	if cfg.MemoryReleaseInterval <= 0 {
		cfg.MemoryReleaseInterval = DefaultMemoryReleaseInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("cql: listen: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: log.With("cql", ln.Addr().String()), ln: ln, ctx: ctx, cancel: cancel,
		conns: map[*conn]struct{}{}, refusing: make(chan struct{}, maxRefusing), executing: workpool.New(0), freeOSMemory: freeOSMemory}
	s.flow.cond = sync.NewCond(&s.flow.mu)
	s.flow.perIP = map[string]*ipUsage{}
	s.wg.Add(1)
	go s.acceptLoop()
	if cfg.MemoryReleasePeak > 0 {
		s.wg.Add(1)
		go s.memoryLoop()
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, closes every connection (cancelling the contexts
// of the requests in flight) and waits for all the server's goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.cancel()
	for _, c := range conns {
		c.close(errors.New("server closed"))
	}
	s.wg.Wait()
	s.executing.Close()
	return err
}

// acceptLoop accepts connections until Close. A failed Accept (out of
// descriptors, a connection aborted before it was accepted, ...) is retried
// after a backoff that doubles from 5 ms up to 1 s while the failures last,
// logged once per burst, as net/http's server does: only Close ends the
// loop.
func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	failures := 0
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.isClosed() {
				return
			}
			s.stats.acceptErrors.Add(1)
			failures++
			if delay == 0 {
				delay = acceptBackoffMin
				s.log.Error("accept failed; retrying with a backoff", "err", err)
			} else {
				delay = min(2*delay, acceptBackoffMax)
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		if failures > 0 {
			s.log.Warn("accepting again", "failed_accepts", failures)
			failures, delay = 0, 0
		}
		s.serve(nc)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// serve starts serving an accepted connection, or refuses it over a
// connection limit.
func (s *Server) serve(nc net.Conn) {
	ip := sourceIP(nc.RemoteAddr())
	if msg, ok := s.admit(ip); !ok {
		s.stats.refused.Add(1)
		s.refusedUnlogged++
		if now := time.Now(); now.Sub(s.refusedLogged) >= time.Second {
			s.log.Warn("connections refused", "count", s.refusedUnlogged, "last", nc.RemoteAddr().String(), "reason", msg)
			s.refusedLogged, s.refusedUnlogged = now, 0
		}
		select {
		case s.refusing <- struct{}{}:
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				<-s.refusing
				nc.Close()
				return
			}
			s.wg.Add(1)
			s.mu.Unlock()
			go s.refuse(nc, msg)
		default:
			nc.Close()
		}
		return
	}
	c := newConn(s, nc, ip)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.leave(ip)
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.stats.accepted.Add(1)
	go c.readLoop()
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.leave(c.ip)
}
