package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

func echoHandler(_ context.Context, _ Addr, req Message) (Message, error) {
	return Message{Type: req.Type, Body: req.Body}, nil
}

func listenTCP(t *testing.T, h Handler, opts TCPOptions) (*TCP, *logCapture) {
	t.Helper()
	logs := &logCapture{}
	if opts.Logger == nil {
		opts.Logger = slog.New(logs)
	}
	tr, err := ListenTCP("127.0.0.1:0", h, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tr.Close()
		if t.Failed() {
			logs.dump(t)
		}
	})
	return tr, logs
}

// rawConn dials addr with a plain net.Conn and a deadline that keeps a
// broken test from hanging.
func rawConn(t *testing.T, addr Addr) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(long))
	t.Cleanup(func() { nc.Close() })
	return nc
}

// expectClosed reads until the server closes the connection. It fails if
// the deadline passes first (the server kept the connection open).
func expectClosed(t *testing.T, nc net.Conn) []byte {
	t.Helper()
	b, err := io.ReadAll(nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("server did not close the connection: %v", err)
	}
	return b // io.ReadAll returns nil at EOF; a reset is fine too
}

// checkServes checks that srv still answers a well-behaved client, over a
// connection established before the abuse when pre is given.
func checkServes(t *testing.T, srv *TCP, pre Transport) {
	t.Helper()
	clients := []Transport{pre}
	if pre == nil {
		clients = nil
	}
	fresh, _ := listenTCP(t, nil, TCPOptions{})
	for _, c := range append(clients, fresh) {
		resp, err := c.Request(longCtx(t), srv.Addr(), Message{Type: 2, Body: []byte("still here")})
		if err != nil || string(resp.Body) != "still here" {
			t.Fatalf("server stopped serving others: %q, %v", resp.Body, err)
		}
	}
}

// TestTCPRawProtocol speaks the documented byte format by hand.
func TestTCPRawProtocol(t *testing.T) {
	srv, _ := listenTCP(t, func(_ context.Context, from Addr, req Message) (Message, error) {
		if from != "raw-client:1" {
			return Message{}, errors.New("from " + string(from))
		}
		return Message{Type: req.Type + 100, Body: append([]byte("re:"), req.Body...)}, nil
	}, TCPOptions{})
	nc := rawConn(t, srv.Addr())
	var out []byte
	out = appendPreamble(out, ProtocolVersion, "raw-client:1")
	out = appendFrame(out, kindRequest, 7, 5, []byte("hello"))
	out = appendFrame(out, kindRequest, 8, 6, []byte("world"))
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	peerAddr, err := readPreamble(br)
	if err != nil || peerAddr != srv.Addr() {
		t.Fatalf("reply preamble: %q, %v", peerAddr, err)
	}
	var hdr frameBuf
	got := map[uint64]frame{}
	for range 2 {
		f, err := readFrame(br, 1<<20, &hdr)
		if err != nil {
			t.Fatal(err)
		}
		got[f.id] = f
	}
	if f := got[7]; f.kind != kindResponse || f.typ != 105 || string(f.body) != "re:hello" {
		t.Fatalf("response 7: %+v", f)
	}
	if f := got[8]; f.kind != kindResponse || f.typ != 106 || string(f.body) != "re:world" {
		t.Fatalf("response 8: %+v", f)
	}
}

// TestTCPBadPreamble: a connection that does not start with a valid
// preamble is closed with a logged error; the server keeps serving.
func TestTCPBadPreamble(t *testing.T) {
	good := appendPreamble(nil, ProtocolVersion, "x:1")
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 1
	v2 := appendPreamble(nil, 2, "x:1")
	longAddr := appendPreamble(nil, ProtocolVersion, Addr(strings.Repeat("a", maxAddrLen+1)))
	flags := append([]byte(nil), good...)
	flags[7] = 1
	cases := []struct {
		name, log string
		bytes     []byte
	}{
		{"magic", "bad magic", []byte("GET / HTTP/1.1\r\n\r\n")},
		{"version", "protocol version 2", v2},
		{"crc", "preamble checksum", badCRC},
		{"addr-length", "preamble address", longAddr},
		{"flags", "reserved preamble flags", flags},
		{"truncated", "reading preamble", good[:8]},
	}
	srv, logs := listenTCP(t, echoHandler, TCPOptions{})
	pre, _ := listenTCP(t, nil, TCPOptions{})
	checkServes(t, srv, pre)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := rawConn(t, srv.Addr())
			if _, err := nc.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if tc.name == "truncated" {
				nc.(*net.TCPConn).CloseWrite()
			}
			reply := expectClosed(t, nc)
			if tc.name == "version" {
				// The server says which version it speaks before closing.
				if _, err := readPreamble(strings.NewReader(string(reply))); err != nil {
					t.Fatalf("reply to a v2 preamble: %v (%q)", err, reply)
				}
			} else if len(reply) != 0 {
				t.Fatalf("server answered %q to a bad preamble", reply)
			}
			waitFor(t, "the logged error", func() bool {
				_, ok := logs.find("ERROR", "refusing inbound connection", tc.log)
				return ok
			})
			checkServes(t, srv, pre)
		})
	}
}

// TestTCPBadFrames: after a valid preamble, a malformed, oversized or
// corrupt frame closes that connection only.
func TestTCPBadFrames(t *testing.T) {
	const max = 1024
	frameOK := appendFrame(nil, kindRequest, 1, 1, []byte("ok"))
	badCRC := append([]byte(nil), frameOK...)
	badCRC[len(badCRC)-3] ^= 0x10
	badBody := append([]byte(nil), frameOK...)
	badBody[headerLen] ^= 0x80
	reserved := appendFrame(nil, kindRequest|0x40, 1, 1, nil)
	oversized := appendFrame(nil, kindRequest, 1, 1, make([]byte, max+1))
	// An announced length far beyond the limit, with no body behind it.
	huge := binary.BigEndian.AppendUint32(nil, 0xFFFFFFF0)
	huge = append(huge, make([]byte, headerLen-4)...)
	cases := []struct {
		name, log string
		bytes     []byte
	}{
		{"crc", "checksum mismatch", badCRC},
		{"body-bit", "checksum mismatch", badBody},
		{"reserved-flags", "reserved flag bits", reserved},
		{"oversized", "exceeds the limit of 1024", oversized},
		{"huge-length", "exceeds the limit of 1024", huge},
		{"request-id-0", "request id 0", appendFrame(nil, kindRequest, 0, 1, nil)},
		{"one-way-with-id", "one-way frame with request id", appendFrame(nil, kindOneWay, 3, 1, nil)},
		{"truncated-body", "truncated frame body", frameOK[:headerLen+1]},
		{"truncated-header", "truncated frame header", frameOK[:5]},
	}
	var served atomic.Int64
	srv, logs := listenTCP(t, func(ctx context.Context, from Addr, req Message) (Message, error) {
		served.Add(1)
		return echoHandler(ctx, from, req)
	}, TCPOptions{MaxFrame: max})
	pre, _ := listenTCP(t, nil, TCPOptions{})
	checkServes(t, srv, pre)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := served.Load()
			nc := rawConn(t, srv.Addr())
			msg := appendPreamble(nil, ProtocolVersion, Addr("raw-"+tc.name+":1"))
			msg = append(msg, tc.bytes...)
			if _, err := nc.Write(msg); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tc.name, "truncated") {
				nc.(*net.TCPConn).CloseWrite()
			}
			br := bufio.NewReader(nc)
			if _, err := readPreamble(br); err != nil {
				t.Fatalf("reply preamble: %v", err)
			}
			if rest, _ := io.ReadAll(br); len(rest) != 0 {
				t.Fatalf("server answered %d bytes to a bad frame", len(rest))
			}
			expectClosed(t, nc)
			if served.Load() != before {
				t.Fatal("the handler ran for a bad frame")
			}
			waitFor(t, "the logged error", func() bool {
				_, ok := logs.find("ERROR", "protocol error", "raw-"+tc.name, tc.log)
				return ok
			})
			checkServes(t, srv, pre)
		})
	}
}

// TestTCPMaxFrame: a body at the limit goes through, one byte more is
// refused locally without harming the connection.
func TestTCPMaxFrame(t *testing.T) {
	const max = 4096
	srv, _ := listenTCP(t, echoHandler, TCPOptions{MaxFrame: max})
	cli, _ := listenTCP(t, nil, TCPOptions{MaxFrame: max})
	if _, err := cli.Request(longCtx(t), srv.Addr(), Message{Type: 1, Body: make([]byte, max)}); err != nil {
		t.Fatalf("body at the limit: %v", err)
	}
	_, err := cli.Request(longCtx(t), srv.Addr(), Message{Type: 1, Body: make([]byte, max+1)})
	if err == nil || !strings.Contains(err.Error(), "exceeds the frame limit") {
		t.Fatalf("body over the limit: %v", err)
	}
	if err := cli.Send(longCtx(t), srv.Addr(), Message{Type: 1, Body: make([]byte, max+1)}); err == nil {
		t.Fatal("one-way body over the limit accepted")
	}
	// A handler answering more than the limit yields a remote error.
	big, _ := listenTCP(t, func(context.Context, Addr, Message) (Message, error) {
		return Message{Type: 1, Body: make([]byte, max+1)}, nil
	}, TCPOptions{MaxFrame: max})
	_, err = cli.Request(longCtx(t), big.Addr(), Message{Type: 1})
	var re *RemoteError
	if !errors.As(err, &re) || !strings.Contains(re.Msg, "exceeds the frame limit") {
		t.Fatalf("oversized response: %v", err)
	}
	checkServes(t, srv, cli)
}

// TestTCPPeerVersionRefused: a peer answering with another protocol version
// makes requests fail with ErrUnreachable and a clear cause.
func TestTCPPeerVersionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.SetDeadline(time.Now().Add(long))
			readPreamble(nc)
			nc.Write(appendPreamble(nil, 2, "future:1"))
			nc.Close()
		}
	}()
	cli, _ := listenTCP(t, nil, TCPOptions{})
	_, err = cli.Request(longCtx(t), Addr(ln.Addr().String()), Message{Type: 1})
	mustErr(t, err, ErrUnreachable, ErrProtocol)
	if !strings.Contains(err.Error(), "peer speaks protocol version 2, this node speaks version 1") {
		t.Fatalf("unclear error: %v", err)
	}
}

// TestTCPFailFast: while a peer's dial backoff runs, requests fail at once
// with the last dial error, without dialling.
func TestTCPFailFast(t *testing.T) {
	dead := (&tcpEnv{}).unknown(t)
	cli, _ := listenTCP(t, nil, TCPOptions{MinBackoff: time.Hour, MaxBackoff: time.Hour})
	_, err := cli.Request(longCtx(t), dead, Message{Type: 1})
	mustErr(t, err, ErrUnreachable)
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("first error: %v", err)
	}
	// Nothing listens now, so a new dial would be refused as well; the
	// backoff must answer first, with the cause and the wait.
	for range 3 {
		_, err = cli.Request(longCtx(t), dead, Message{Type: 1})
		mustErr(t, err, ErrUnreachable)
		if !strings.Contains(err.Error(), "next dial in") || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("during backoff: %v", err)
		}
	}
}

// TestTCPReconnect: a client follows its peer through several restarts on
// the same address, and concurrent callers during the outage all fail with
// ErrUnreachable rather than hanging.
func TestTCPReconnect(t *testing.T) {
	rng := testseed.Rand(t)
	srv, _ := listenTCP(t, echoHandler, TCPOptions{})
	addr := srv.Addr()
	cli, _ := listenTCP(t, nil, TCPOptions{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	for round := range 3 {
		body := []byte{byte(rng.Uint32())}
		resp, err := cli.Request(longCtx(t), addr, Message{Type: 1, Body: body})
		if err != nil || resp.Body[0] != body[0] {
			t.Fatalf("round %d: %v", round, err)
		}
		srv.Close()
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				_, err := cli.Request(longCtx(t), addr, Message{Type: 1})
				errs <- err
			}()
		}
		for range 8 {
			mustErr(t, <-errs, ErrUnreachable)
		}
		var err2 error
		srv, err2 = ListenTCP(addr, echoHandler, TCPOptions{Logger: slog.New(&logCapture{})})
		if err2 != nil {
			t.Fatalf("restart: %v", err2)
		}
		waitFor(t, "reconnection", func() bool {
			_, err := cli.Request(longCtx(t), addr, Message{Type: 1})
			return err == nil
		})
	}
	srv.Close()
}

// TestTCPNoGoroutineLeak: after every endpoint is closed, including with
// requests in flight, dials failing and handlers blocked, no goroutine of
// the package remains.
func TestTCPNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	block := func(ctx context.Context, _ Addr, req Message) (Message, error) {
		if req.Type == 99 {
			<-ctx.Done()
		}
		return req, nil
	}
	logs := slog.New(&logCapture{})
	var eps []*TCP
	for range 3 {
		tr, err := ListenTCP("127.0.0.1:0", block, TCPOptions{Logger: logs})
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, tr)
	}
	dead := (&tcpEnv{}).unknown(t)
	done := make(chan struct{})
	for _, a := range eps {
		for _, b := range eps {
			go func() {
				a.Request(longCtx(t), b.Addr(), Message{Type: 1})
				a.Request(longCtx(t), b.Addr(), Message{Type: 99}) // blocks until Close
				done <- struct{}{}
			}()
		}
		a.Request(longCtx(t), dead, Message{Type: 1})
		a.Send(longCtx(t), eps[0].Addr(), Message{Type: 1})
	}
	for _, tr := range eps {
		tr.Close()
	}
	for range len(eps) * len(eps) {
		<-done
	}
	waitGoroutines(t, base)
}

// TestTCPSharedConnection: of two endpoints, the one whose address orders
// second sends its requests on the connection the first dialled, while it
// is open, and dials its own before the first dialled and once that
// connection broke. Handlers see the sender's address either way.
func TestTCPSharedConnection(t *testing.T) {
	froms := make(chan Addr, 16)
	recordFrom := func(_ context.Context, from Addr, req Message) (Message, error) {
		froms <- from
		return Message{Type: req.Type, Body: req.Body}, nil
	}
	ask := func(from, to *TCP) error {
		t.Helper()
		resp, err := from.Request(longCtx(t), to.Addr(), Message{Type: 1, Body: []byte("hi")})
		if err == nil && string(resp.Body) != "hi" {
			t.Fatalf("answer %q", resp.Body)
		}
		if err == nil {
			if got := <-froms; got != from.Addr() {
				t.Fatalf("handler saw %s, want %s", got, from.Addr())
			}
		}
		return err
	}
	conns := func(tr *TCP) int {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.raw)
	}
	dialled := func(tr *TCP, to Addr) bool {
		tr.mu.Lock()
		p := tr.peers[to]
		tr.mu.Unlock()
		if p == nil {
			return false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.c != nil
	}
	pair := func() (lo, hi *TCP) {
		a, _ := listenTCP(t, recordFrom, TCPOptions{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		b, _ := listenTCP(t, recordFrom, TCPOptions{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		if b.Addr() < a.Addr() {
			a, b = b, a
		}
		return a, b
	}

	lo, hi := pair()
	if err := ask(lo, hi); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the inbound connection registered", func() bool {
		hi.mu.Lock()
		defer hi.mu.Unlock()
		return hi.inbound[lo.Addr()] != nil
	})
	for range 3 {
		if err := ask(hi, lo); err != nil {
			t.Fatal(err)
		}
	}
	if dialled(hi, lo.Addr()) || conns(lo) != 1 || conns(hi) != 1 {
		t.Fatalf("the second endpoint dialled (%t); connections %d and %d, want one each", dialled(hi, lo.Addr()), conns(lo), conns(hi))
	}

	// The shared connection breaks: the second dials its own.
	lo.mu.Lock()
	shared := lo.peers[hi.Addr()].c
	lo.mu.Unlock()
	shared.close(errors.New("test: broken"))
	waitFor(t, "a request once the shared connection broke", func() bool { return ask(hi, lo) == nil })
	if !dialled(hi, lo.Addr()) {
		t.Fatal("the second endpoint answered without a connection of its own")
	}

	// Before the first dialled, the second dials its own.
	lo, hi = pair()
	if err := ask(hi, lo); err != nil {
		t.Fatal(err)
	}
	if !dialled(hi, lo.Addr()) {
		t.Fatal("the second endpoint found a connection nobody dialled")
	}
	if err := ask(lo, hi); err != nil {
		t.Fatal(err)
	}
	if !dialled(lo, hi.Addr()) {
		t.Fatal("the first endpoint used the second's connection")
	}
}

// TestTCPBackoffEndsWhenPeerDialsIn: a peer whose dial failed is not dialled
// again before its backoff ends, unless it connects to this endpoint in the
// meantime (it restarted and is up): then the next request dials it at
// once. Before, a node restarted after its peers' dials had failed was
// unreachable from them for up to the backoff while gossip already held it
// up, and a QUORUM write through it timed out (node's
// TestBootstrapRetriesDismissedAfterRestart, about 1 run in 7 under load).
func TestTCPBackoffEndsWhenPeerDialsIn(t *testing.T) {
	echo := func(_ context.Context, _ Addr, req Message) (Message, error) { return req, nil }
	a, _ := listenTCP(t, echo, TCPOptions{MinBackoff: time.Hour, MaxBackoff: time.Hour})
	// An address nothing listens on yet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bAddr := Addr(ln.Addr().String())
	ln.Close()
	if _, err := a.Request(longCtx(t), bAddr, Message{Type: 1}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("request to a peer that is down: %v, want ErrUnreachable", err)
	}
	if _, err := a.Request(longCtx(t), bAddr, Message{Type: 1}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("request within the backoff: %v, want ErrUnreachable", err)
	}
	b, err := ListenTCP(bAddr, echo, TCPOptions{})
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", bAddr, err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.Request(longCtx(t), a.Addr(), Message{Type: 1, Body: []byte("up")}); err != nil {
		t.Fatalf("the restarted peer's request: %v", err)
	}
	resp, err := a.Request(longCtx(t), bAddr, Message{Type: 1, Body: []byte("hi")})
	if err != nil || string(resp.Body) != "hi" {
		t.Fatalf("request once the peer dialled in: %q %v, want an answer (the backoff was an hour)", resp.Body, err)
	}
}
