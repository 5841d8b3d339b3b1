package cql

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
)

// Defaults of the limits in ServerConfig, after Cassandra's where it has
// one (cassandra.yaml key in parentheses).
const (
	// DefaultMaxFrame is the default limit on a frame body once a
	// connection's handshake is done (native_transport_max_frame_size,
	// 16 MiB since Cassandra 4.0).
	DefaultMaxFrame = 16 << 20
	// DefaultMaxHandshakeFrame is the default limit on a frame body before
	// the handshake is done, that is before READY or AUTH_SUCCESS
	// (native_transport_max_auth_message_size, 128 KiB since Cassandra
	// 5.0.3): an unauthenticated client cannot make the node allocate more.
	DefaultMaxHandshakeFrame = 128 << 10
	// DefaultMaxInFlightBytesPerConn is the default limit on one
	// connection's request bytes in flight
	// (native_transport_receive_queue_capacity, 1 MiB).
	DefaultMaxInFlightBytesPerConn = 1 << 20
	// DefaultMaxInFlightBytesPerIP is the default limit on the request bytes
	// in flight from one source address
	// (native_transport_max_request_data_in_flight_per_ip; Cassandra's
	// default is a 40th of its heap).
	DefaultMaxInFlightBytesPerIP = 64 << 20
	// DefaultMaxInFlightBytes is the default limit on the node's request
	// bytes in flight (native_transport_max_request_data_in_flight;
	// Cassandra's default is a 10th of its heap).
	DefaultMaxInFlightBytes = 256 << 20
	// DefaultMaxRequestsPerConn is the default limit on one connection's
	// requests in flight (idemkv's own; the DataStax Java driver 4 sends
	// at most 1024 per connection by default). A client beyond is slowed,
	// not refused. It bounds what one pipelining connection runs at once.
	DefaultMaxRequestsPerConn = 1024
	// DefaultHalfFrameTimeout is the default time a frame that started
	// arriving may stall before the connection is closed (idemkv's own).
	DefaultHalfFrameTimeout = 10 * time.Second
	// DefaultWriteTimeout is the default time a write to a client may stay
	// blocked (the client reads nothing) before the connection is closed
	// (idemkv's own).
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMemoryReleasePeak is the default number of open connections
	// from which a fall to under a quarter of them gives memory back to
	// the operating system (idemkv's own).
	DefaultMemoryReleasePeak = 256
	// DefaultMemoryReleaseInterval is the default least time between two
	// such releases (idemkv's own).
	DefaultMemoryReleaseInterval = 30 * time.Second
)

// memoryCheck is how often the server looks whether a storm of connections
// is over (ServerConfig.MemoryReleasePeak); a variable for tests, which
// call releaseMemory themselves with a clock of their own.
var memoryCheck = 2 * time.Second

// Accept backoff, as net/http's Server.Serve: from 5 ms, doubling, at most
// 1 s between attempts while Accept keeps failing.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// Refusing a connection over a limit: the server reads the first frame
// header for at most refuseWait, to answer in the client's version and on
// its stream, and at most maxRefusing connections are being refused at once
// (beyond, the socket is closed at once).
const (
	refuseWait  = 2 * time.Second
	maxRefusing = 64
)

// Stats are a server's counters, for operators: a snapshot from
// Server.Stats.
type Stats struct {
	ConnectionsOpen     int64 // connections being served now
	ConnectionsAccepted int64 // connections accepted and served, ever
	ConnectionsRefused  int64 // connections refused over a connection limit
	AcceptErrors        int64 // failed Accept calls (each retried after a backoff)

	RequestsInFlight         int64 // requests read and not yet answered on the socket
	RequestBytesInFlight     int64 // their frame bytes (header and body)
	PeakRequestBytesInFlight int64 // the highest RequestBytesInFlight seen
	QueuedResponseBytes      int64 // encoded answers waiting for their connection's writer

	ReadsPausedNow int64 // connections not reading their socket now, over an in-flight limit
	ReadPauses     int64 // times a connection stopped reading over an in-flight limit

	FramesTooLarge    int64 // frames refused over the frame size limit
	IdleTimeouts      int64 // connections closed by the idle timeout
	HalfFrameTimeouts int64 // connections closed with a frame stalled half-read
	WriteTimeouts     int64 // connections closed with a write blocked too long
	EventOverflows    int64 // connections closed with more events queued than MaxInFlightBytesPerConn

	MemoryReleases int64 // memory given back to the operating system after a storm of connections
}

// counters are the Stats kept with atomics; the in-flight ones are kept
// under flow.mu.
type counters struct {
	accepted, refused, acceptErrors     atomic.Int64
	queued                              atomic.Int64
	tooLarge, idle, halfFrame, writeOut atomic.Int64
	pauses, eventOverflows              atomic.Int64
	releases                            atomic.Int64
}

// flow accounts the connections and the requests in flight, per
// connection, per source address and for the server, and makes a reader
// over a limit wait for the answers in flight to be written.
type flow struct {
	mu       sync.Mutex
	cond     *sync.Cond
	waiters  int
	open     int64
	peakOpen int64 // the most connections open since the last memory release
	bytes    int64
	reqs     int64
	peak     int64
	paused   int64
	perIP    map[string]*ipUsage
}

type ipUsage struct {
	conns int64
	bytes int64
}

// errConnClosed ends a reader waiting for room when its connection closes.
var errConnClosed = errors.New("connection closed")

// frameCost is what a request frame counts for in the in-flight limits: its
// size on the wire.
func frameCost(h frame.Header) int64 { return int64(h.Size()) + int64(h.Length) }

// fits reports whether used+cost stays within limit (< 0: no limit).
func fits(used, cost, limit int64) bool { return limit < 0 || used == 0 || limit-used >= cost }

// admit counts a new connection from ip, or refuses it with the reason, in
// Cassandra's words, when it would be over a connection limit.
func (s *Server) admit(ip string) (string, bool) {
	f := &s.flow
	f.mu.Lock()
	defer f.mu.Unlock()
	if lim := int64(s.cfg.MaxConnections); lim > 0 && f.open+1 > lim {
		return fmt.Sprintf("Exceeded maximum native connection limit of %d by using %d connections", lim, f.open+1), false
	}
	u := f.perIP[ip]
	if lim := int64(s.cfg.MaxConnectionsPerIP); lim > 0 && u != nil && u.conns+1 > lim {
		return fmt.Sprintf("Exceeded maximum native connection limit per ip of %d by using %d connections", lim, u.conns+1), false
	}
	if u == nil {
		u = &ipUsage{}
		f.perIP[ip] = u
	}
	u.conns++
	f.open++
	f.peakOpen = max(f.peakOpen, f.open)
	return "", true
}

// leave uncounts a connection admitted from ip.
func (s *Server) leave(ip string) {
	f := &s.flow
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open--
	if u := f.perIP[ip]; u != nil {
		u.conns--
		if u.conns <= 0 && u.bytes <= 0 {
			delete(f.perIP, ip)
		}
	}
}

// reserve counts a request of cost bytes in flight on c, first waiting,
// without reading the socket, while c, its source address or the server is
// over an in-flight limit. A connection with nothing in flight may always
// send one request (so that a frame larger than a limit is not stuck), as
// may a source address or a server with nothing in flight. Before its
// handshake is done (shared is false), a connection is held to its own
// limits only, as Cassandra's initial handler is to none: the frames are
// small and answered one at a time, and clients over the shared limits do
// not keep a new client from connecting. It returns errConnClosed if c
// closes while waiting.
func (s *Server) reserve(c *conn, cost int64, shared bool) error {
	f := &s.flow
	f.mu.Lock()
	defer f.mu.Unlock()
	waited := false
	for {
		if c.dead.Load() {
			if waited {
				f.paused--
			}
			return errConnClosed
		}
		u := f.perIP[c.ip]
		if (c.reqs == 0 || c.reqs < int64(s.cfg.MaxRequestsPerConn) || s.cfg.MaxRequestsPerConn < 0) &&
			fits(c.bytes, cost, s.cfg.MaxInFlightBytesPerConn) &&
			(!shared || fits(u.bytes, cost, s.cfg.MaxInFlightBytesPerIP) &&
				fits(f.bytes, cost, s.cfg.MaxInFlightBytes)) {
			break
		}
		if !waited {
			waited = true
			f.paused++
			s.stats.pauses.Add(1)
		}
		f.waiters++
		f.cond.Wait()
		f.waiters--
	}
	if waited {
		f.paused--
	}
	c.bytes += cost
	c.reqs++
	f.perIP[c.ip].bytes += cost
	f.bytes += cost
	f.reqs++
	f.peak = max(f.peak, f.bytes)
	return nil
}

// release uncounts a request of cost bytes reserved on c (cost 0: nothing,
// an event) and wakes the readers waiting for room.
func (s *Server) release(c *conn, cost int64) {
	if cost <= 0 {
		return
	}
	f := &s.flow
	f.mu.Lock()
	c.bytes -= cost
	c.reqs--
	if u := f.perIP[c.ip]; u != nil {
		u.bytes -= cost
		if u.conns <= 0 && u.bytes <= 0 {
			delete(f.perIP, c.ip)
		}
	}
	f.bytes -= cost
	f.reqs--
	if f.waiters > 0 {
		f.cond.Broadcast()
	}
	f.mu.Unlock()
}

// wake makes the readers waiting for room look again (a connection closed).
func (s *Server) wake() {
	f := &s.flow
	f.mu.Lock()
	if f.waiters > 0 {
		f.cond.Broadcast()
	}
	f.mu.Unlock()
}

// inFlight is the number of requests in flight on c.
func (s *Server) inFlight(c *conn) int64 {
	s.flow.mu.Lock()
	defer s.flow.mu.Unlock()
	return c.reqs
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{
		ConnectionsAccepted: s.stats.accepted.Load(),
		ConnectionsRefused:  s.stats.refused.Load(),
		AcceptErrors:        s.stats.acceptErrors.Load(),
		QueuedResponseBytes: s.stats.queued.Load(),
		ReadPauses:          s.stats.pauses.Load(),
		FramesTooLarge:      s.stats.tooLarge.Load(),
		IdleTimeouts:        s.stats.idle.Load(),
		HalfFrameTimeouts:   s.stats.halfFrame.Load(),
		WriteTimeouts:       s.stats.writeOut.Load(),
		EventOverflows:      s.stats.eventOverflows.Load(),
		MemoryReleases:      s.stats.releases.Load(),
	}
	f := &s.flow
	f.mu.Lock()
	st.ConnectionsOpen = f.open
	st.RequestsInFlight = f.reqs
	st.RequestBytesInFlight = f.bytes
	st.PeakRequestBytesInFlight = f.peak
	st.ReadsPausedNow = f.paused
	f.mu.Unlock()
	return st
}

// sourceIP is the address part of a connection's remote address.
func sourceIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// refuse answers a connection over a connection limit with an OVERLOADED
// error, in the client's protocol version (frame.Header.AnswerVersion) and
// on the stream of its first
// frame (read for at most refuseWait), then closes it. Cassandra closes
// such a connection without a word; an error frame tells the driver why.
func (s *Server) refuse(nc net.Conn, msg string) {
	defer s.wg.Done()
	defer func() { <-s.refusing }()
	defer nc.Close()
	stop := context.AfterFunc(s.ctx, func() { nc.Close() }) // Close does not wait for refusals
	defer stop()
	nc.SetDeadline(time.Now().Add(refuseWait))
	rd := frame.NewReader(bufio.NewReaderSize(nc, 64), 1) // a small buffer: refusals come in storms
	h, err := rd.ReadHeader()
	var ve *frame.VersionError
	var tl *frame.TooLargeError
	var m *frame.Error
	switch {
	case err == nil, errors.As(err, &tl):
		m = frame.Errorf(frame.ErrOverloaded, "%s", msg)
	case errors.As(err, &ve):
		m = &frame.Error{Code: frame.ErrProtocol, Message: ve.Error()}
	default:
		return
	}
	b, err := frame.AppendFrame(nil, &frame.Frame{Version: h.AnswerVersion(), Stream: h.Stream, Message: m})
	if err != nil {
		return
	}
	if _, err := nc.Write(b); err != nil {
		return
	}
	if tc, ok := nc.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	io.CopyN(io.Discard, nc, 64<<10) // until the client closes, or the deadline
}

// deadlineReader is a connection's socket as its frame reader sees it: each
// read is given the deadline of the connection's state, the idle timeout
// between frames and the half-frame timeout inside one, so that a frame
// that stalls is noticed while one that keeps arriving, however slowly, is
// not.
type deadlineReader struct {
	nc        net.Conn
	idle      time.Duration // 0: none
	halfFrame time.Duration // 0: none
	mid       bool          // inside a frame
	armed     bool          // a deadline is set
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	t := d.idle
	if d.mid {
		t = d.halfFrame
	}
	if t > 0 {
		d.nc.SetReadDeadline(time.Now().Add(t))
		d.armed = true
	} else if d.armed {
		d.nc.SetReadDeadline(time.Time{})
		d.armed = false
	}
	return d.nc.Read(p)
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// memoryLoop looks every memoryCheck whether a storm of connections is
// over, and gives memory back then (releaseMemory), until Close.
func (s *Server) memoryLoop() {
	defer s.wg.Done()
	t := time.NewTicker(memoryCheck)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.releaseMemory(now)
		}
	}
}

// releaseMemory gives the memory a storm of connections left behind back
// to the operating system, once the storm is over: when the connections
// open reached MemoryReleasePeak since the last release and are now fewer
// than a quarter of that peak, and the last release is at least
// MemoryReleaseInterval old; and once more (a follow-up) an interval after
// that release if no other storm came meanwhile, for what the first could
// not return (garbage of the storm's last moments, and what the heap grew
// to on its way back). The Go runtime keeps the heap a storm grew, and
// returns idle memory in the background only above its heap goal;
// freeOSMemory collects and returns every idle page at once. The peak then
// starts again from the connections open. It reports whether it released.
func (s *Server) releaseMemory(now time.Time) bool {
	lim := int64(s.cfg.MemoryReleasePeak)
	if lim <= 0 {
		return false
	}
	f := &s.flow
	f.mu.Lock()
	peak, open := f.peakOpen, f.open
	due := s.released.IsZero() || now.Sub(s.released) >= s.cfg.MemoryReleaseInterval
	storm := peak >= lim && open*4 < peak
	followUp := !storm && s.followUp && peak < lim
	if due && (storm || followUp) {
		f.peakOpen = open
	}
	f.mu.Unlock()
	if !due || !storm && !followUp {
		return false
	}
	s.released, s.followUp = now, storm
	start := time.Now()
	// The goroutines a burst of requests left waiting in the pool (up to
	// 256, their stacks grown) end first, so their stacks are freed too.
	s.executing.Trim()
	s.freeOSMemory()
	s.stats.releases.Add(1)
	s.log.Info("released memory to the OS after a storm of connections", "follow_up", followUp,
		"peak_connections", peak, "open_connections", open, "took", time.Since(start).Round(time.Microsecond))
	return true
}

// freeOSMemory collects once, so that the buffers in the sync.Pools (the
// connections' read and write buffers among them), which survive a
// collection in the pools' victim caches, are garbage at the next one, then
// returns every idle page to the operating system (debug.FreeOSMemory,
// which collects again first).
func freeOSMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
