package cql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/idemkv/idemkv/cql/frame"
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
	// MaxFrame is the largest frame body accepted; ≤ 0 means
	// frame.DefaultMaxBody (256 MiB).
	MaxFrame int
	// Auth maps users to passwords. When non-nil, STARTUP is answered with
	// AUTHENTICATE (PasswordAuthenticator) and a connection serves no
	// statement until an AUTH_RESPONSE with a valid user and password.
	Auth map[string]string
	// Logger receives connection errors and recovered panics; nil: none.
	Logger *slog.Logger
}

// Authenticator is the class name the server announces in AUTHENTICATE, one
// that drivers' password authenticators accept.
const Authenticator = "org.apache.cassandra.auth.PasswordAuthenticator"

// The SUPPORTED answer to OPTIONS: no compression, so drivers never compress.
var supported = map[string][]string{
	"CQL_VERSION":       {"3.4.4"},
	"PROTOCOL_VERSIONS": {"3/v3", "4/v4"},
	"COMPRESSION":       {},
}

// Server is a CQL native protocol server: it accepts connections and serves
// each on its own goroutines until Close.
//
// Per connection, one goroutine reads frames. The handshake (OPTIONS,
// STARTUP, AUTH_RESPONSE, REGISTER) is answered by that goroutine, in
// order; each statement request (QUERY, PREPARE, EXECUTE, BATCH) runs on a
// goroutine of its own and is answered on its stream id whenever it is done,
// so requests are pipelined and answered in any order. Responses and events
// go through one writer goroutine per connection, which drains its queue
// into a buffered writer and flushes when the queue is empty, so frames
// queued together leave in one write.
//
// A frame the server cannot read in step (unsupported version, oversized,
// undecodable, unknown opcode) is answered with a protocol error on its
// stream and the connection is closed after that answer; other connections
// are not affected.
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
}

// Listen starts a server on cfg.Addr.
func Listen(cfg ServerConfig) (*Server, error) {
	if cfg.Executor == nil {
		return nil, errors.New("cql: ServerConfig.Executor is nil")
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = frame.DefaultMaxBody
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("cql: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: log.With("cql", ln.Addr().String()), ln: ln, ctx: ctx, cancel: cancel,
		conns: map[*conn]struct{}{}}
	s.wg.Add(1)
	go s.acceptLoop()
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
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Error("accept", "err", err)
			return
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(2)
		s.mu.Unlock()
		go c.readLoop()
		go c.writeLoop()
	}
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}
