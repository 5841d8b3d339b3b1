package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// netEnv makes endpoints of one implementation for the conformance suite.
type netEnv interface {
	// listen opens an endpoint at addr, or at a fresh address if addr is "".
	listen(t *testing.T, addr Addr, h Handler) Transport
	// unknown returns an address nobody listens on.
	unknown(t *testing.T) Addr
}

type tcpEnv struct{ logs *logCapture }

func newTCPEnv(t *testing.T) netEnv { return &tcpEnv{logs: &logCapture{}} }

func (e *tcpEnv) opts() TCPOptions {
	return TCPOptions{
		Logger:     slog.New(e.logs),
		MinBackoff: time.Millisecond,
		MaxBackoff: 20 * time.Millisecond,
	}
}

func (e *tcpEnv) listen(t *testing.T, addr Addr, h Handler) Transport {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	tr, err := ListenTCP(addr, h, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func (e *tcpEnv) unknown(t *testing.T) Addr {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := Addr(ln.Addr().String())
	ln.Close()
	return a
}

type memEnv struct {
	n    *MemNetwork
	next atomic.Int64
}

func newMemEnv(t *testing.T) netEnv { return &memEnv{n: NewMemNetwork(testseed.Seed(t))} }

func (e *memEnv) listen(t *testing.T, addr Addr, h Handler) Transport {
	t.Helper()
	if addr == "" {
		addr = Addr(fmt.Sprintf("127.0.0.%d:7000", e.next.Add(1)))
	}
	tr, err := e.n.Listen(addr, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func (e *memEnv) unknown(*testing.T) Addr { return "127.0.9.9:7000" }

var impls = []struct {
	name string
	env  func(t *testing.T) netEnv
}{
	{"tcp", newTCPEnv},
	{"mem", newMemEnv},
}

// TestConformance runs the same behaviour tests against both transports.
func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		f    func(t *testing.T, env netEnv)
	}{
		{"RequestResponse", testRequestResponse},
		{"Pipelining", testPipelining},
		{"RemoteError", testRemoteError},
		{"UnknownPeer", testUnknownPeer},
		{"Timeout", testTimeout},
		{"CloseFailsInFlight", testCloseFailsInFlight},
		{"PeerCloseFailsInFlight", testPeerCloseFailsInFlight},
		{"RestartSameAddr", testRestartSameAddr},
		{"OneWaySend", testOneWaySend},
		{"ManyPeers", testManyPeers},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					env := impl.env(t)
					if te, ok := env.(*tcpEnv); ok {
						t.Cleanup(func() {
							if t.Failed() {
								te.logs.dump(t)
							}
						})
					}
					tc.f(t, env)
				})
			}
		})
	}
}

// echo answers a request with its type+1 and its body reversed, and checks
// the sender.
func echo(wantFrom *atomic.Value) Handler {
	return func(_ context.Context, from Addr, req Message) (Message, error) {
		if w, _ := wantFrom.Load().(Addr); w != "" && w != from {
			return Message{}, fmt.Errorf("from = %q, want %q", from, w)
		}
		out := make([]byte, len(req.Body))
		for i, c := range req.Body {
			out[len(out)-1-i] = c
		}
		return Message{Type: req.Type + 1, Body: out}, nil
	}
}

func testRequestResponse(t *testing.T, env netEnv) {
	rng := testseed.Rand(t)
	var from atomic.Value
	srv := env.listen(t, "", echo(&from))
	cli := env.listen(t, "", echo(&from))
	from.Store(cli.Addr())
	ctx := longCtx(t)
	for _, n := range []int{0, 1, 15, 1000, 70 << 10, 1 << 20} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		typ := Type(rng.IntN(1000))
		resp, err := cli.Request(ctx, srv.Addr(), Message{Type: typ, Body: body})
		if err != nil {
			t.Fatalf("body of %d bytes: %v", n, err)
		}
		if resp.Type != typ+1 || len(resp.Body) != n {
			t.Fatalf("body of %d bytes: response type %d, %d bytes", n, resp.Type, len(resp.Body))
		}
		for i := range body {
			if resp.Body[n-1-i] != body[i] {
				t.Fatalf("body of %d bytes: response differs at %d", n, i)
			}
		}
	}
	// A request to oneself works too.
	from.Store(srv.Addr())
	if _, err := srv.Request(ctx, srv.Addr(), Message{Type: 1, Body: []byte("me")}); err != nil {
		t.Fatalf("request to self: %v", err)
	}
}

// testPipelining sends n requests at once to a handler that answers only
// when all n have arrived, in reverse order of arrival: it can only pass if
// the requests are in flight together and answers are matched by id.
func testPipelining(t *testing.T, env netEnv) {
	const n = 64
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
		done    [n + 1]chan struct{}
	)
	for i := range done {
		done[i] = make(chan struct{})
	}
	close(done[n])
	h := func(ctx context.Context, _ Addr, req Message) (Message, error) {
		mu.Lock()
		k := arrived
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
		// Arrival k answers after arrival k+1 has answered.
		select {
		case <-done[k+1]:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
		defer close(done[k])
		return Message{Type: req.Type, Body: req.Body}, nil
	}
	srv := env.listen(t, "", h)
	cli := env.listen(t, "", h)
	ctx := longCtx(t)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			body := binary.BigEndian.AppendUint32(nil, uint32(i))
			resp, err := cli.Request(ctx, srv.Addr(), Message{Type: Type(i), Body: body})
			switch {
			case err != nil:
				err = fmt.Errorf("request %d: %w", i, err)
			case resp.Type != Type(i) || !bytes.Equal(resp.Body, body):
				err = fmt.Errorf("request %d got the answer of type %d, body %x", i, resp.Type, resp.Body)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func testRemoteError(t *testing.T, env netEnv) {
	srv := env.listen(t, "", func(context.Context, Addr, Message) (Message, error) {
		return Message{}, errors.New("no such table ks.t")
	})
	cli := env.listen(t, "", nil)
	_, err := cli.Request(longCtx(t), srv.Addr(), Message{Type: 3})
	var re *RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T), want a *RemoteError", err, err)
	}
	if re.Peer != srv.Addr() || re.Msg != "no such table ks.t" {
		t.Fatalf("RemoteError %+v", re)
	}
	mustNotErr(t, err, ErrUnreachable, ErrTimeout, ErrClosed)

	// An endpoint without a handler answers with an error too.
	_, err = srv.Request(longCtx(t), cli.Addr(), Message{Type: 3})
	if !errors.As(err, &re) || re.Peer != cli.Addr() {
		t.Fatalf("request to an endpoint without handler: %v", err)
	}
}

func testUnknownPeer(t *testing.T, env netEnv) {
	cli := env.listen(t, "", nil)
	to := env.unknown(t)
	for range 3 {
		_, err := cli.Request(longCtx(t), to, Message{Type: 1})
		mustErr(t, err, ErrUnreachable)
		mustErr(t, err, ErrNotSent) // nobody could have handled it
		mustNotErr(t, err, ErrTimeout)
		err = cli.Send(longCtx(t), to, Message{Type: 1})
		mustErr(t, err, ErrUnreachable)
	}
}

func testTimeout(t *testing.T, env netEnv) {
	release := make(chan struct{})
	var calls atomic.Int64
	srv := env.listen(t, "", func(ctx context.Context, _ Addr, req Message) (Message, error) {
		if string(req.Body) == "slow" {
			calls.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return Message{Type: req.Type, Body: []byte("late")}, nil
		}
		return Message{Type: req.Type, Body: []byte("fresh")}, nil
	})
	cli := env.listen(t, "", nil)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := cli.Request(ctx, srv.Addr(), Message{Type: 1, Body: []byte("slow")})
	mustErr(t, err, ErrTimeout, context.DeadlineExceeded)
	mustNotErr(t, err, ErrUnreachable)

	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		waitFor(t, "second slow call", func() bool { return calls.Load() == 2 })
		cancel2()
	}()
	_, err = cli.Request(ctx2, srv.Addr(), Message{Type: 1, Body: []byte("slow")})
	mustErr(t, err, ErrTimeout, context.Canceled)

	// The late responses are dropped; the next request gets its own.
	close(release)
	for range 5 {
		resp, err := cli.Request(longCtx(t), srv.Addr(), Message{Type: 1, Body: []byte("quick")})
		if err != nil || string(resp.Body) != "fresh" {
			t.Fatalf("after timeouts: %q, %v", resp.Body, err)
		}
	}
	// An ended ctx fails at once.
	_, err = cli.Request(ctx, srv.Addr(), Message{Type: 1})
	mustErr(t, err, ErrTimeout)
}

func testCloseFailsInFlight(t *testing.T, env netEnv) {
	const n = 8
	var started atomic.Int64
	srv := env.listen(t, "", func(ctx context.Context, _ Addr, req Message) (Message, error) {
		started.Add(1)
		<-ctx.Done()
		return Message{}, ctx.Err()
	})
	cli := env.listen(t, "", nil)
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := cli.Request(longCtx(t), srv.Addr(), Message{Type: 1})
			errs <- err
		}()
	}
	waitFor(t, "requests to reach the handler", func() bool { return started.Load() == n })
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	for range n {
		mustErr(t, <-errs, ErrClosed)
	}
	_, err := cli.Request(longCtx(t), srv.Addr(), Message{Type: 1})
	mustErr(t, err, ErrClosed)
	mustErr(t, cli.Send(longCtx(t), srv.Addr(), Message{Type: 1}), ErrClosed)
	if err := cli.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func testPeerCloseFailsInFlight(t *testing.T, env netEnv) {
	const n = 8
	var started atomic.Int64
	srv := env.listen(t, "", func(ctx context.Context, _ Addr, req Message) (Message, error) {
		started.Add(1)
		<-ctx.Done() // Close ends it
		return Message{}, ctx.Err()
	})
	cli := env.listen(t, "", nil)
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := cli.Request(longCtx(t), srv.Addr(), Message{Type: 1})
			errs <- err
		}()
	}
	waitFor(t, "requests to reach the handler", func() bool { return started.Load() == n })
	srv.Close()
	for range n {
		err := <-errs
		mustErr(t, err, ErrUnreachable)
		// The handler had the requests: they were sent.
		mustNotErr(t, err, ErrClosed, ErrTimeout, ErrNotSent)
	}
}

func testRestartSameAddr(t *testing.T, env netEnv) {
	gen := func(g string) Handler {
		return func(_ context.Context, _ Addr, req Message) (Message, error) {
			return Message{Type: req.Type, Body: []byte(g)}, nil
		}
	}
	srv := env.listen(t, "", gen("first"))
	addr := srv.Addr()
	cli := env.listen(t, "", nil)
	resp, err := cli.Request(longCtx(t), addr, Message{Type: 1})
	if err != nil || string(resp.Body) != "first" {
		t.Fatalf("before restart: %q, %v", resp.Body, err)
	}
	srv.Close()
	_, err = cli.Request(longCtx(t), addr, Message{Type: 1})
	mustErr(t, err, ErrUnreachable)

	env.listen(t, addr, gen("second"))
	// A TCP client may first meet its broken connection or its dial
	// backoff; it must come back on its own.
	deadline := time.Now().Add(long)
	for {
		resp, err = cli.Request(longCtx(t), addr, Message{Type: 1})
		if err == nil {
			break
		}
		mustErr(t, err, ErrUnreachable)
		if time.Now().After(deadline) {
			t.Fatalf("no answer after restart: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if string(resp.Body) != "second" {
		t.Fatalf("after restart: %q", resp.Body)
	}
}

func testOneWaySend(t *testing.T, env netEnv) {
	const n = 200
	var (
		mu   sync.Mutex
		got  = make(map[string]Addr)
		errs []string
	)
	srv := env.listen(t, "", func(_ context.Context, from Addr, m Message) (Message, error) {
		mu.Lock()
		defer mu.Unlock()
		if m.Type != 9 {
			errs = append(errs, fmt.Sprintf("type %d", m.Type))
		}
		got[string(m.Body)] = from
		return Message{}, errors.New("ignored: one-way messages get no answer")
	})
	cli := env.listen(t, "", nil)
	for i := range n {
		body := []byte(fmt.Sprintf("m%d", i))
		if err := cli.Send(longCtx(t), srv.Addr(), Message{Type: 9, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every one-way message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for i := range n {
		if from, ok := got[fmt.Sprintf("m%d", i)]; !ok || from != cli.Addr() {
			t.Fatalf("message %d: from %q, received %v", i, from, ok)
		}
	}
}

// testManyPeers has every node of four request every other at once.
func testManyPeers(t *testing.T, env netEnv) {
	const nodes, per = 4, 20
	var from atomic.Value
	eps := make([]Transport, nodes)
	for i := range eps {
		eps[i] = env.listen(t, "", echo(&from))
	}
	var wg sync.WaitGroup
	errs := make(chan error, nodes*nodes*per)
	for _, a := range eps {
		for _, b := range eps {
			for k := range per {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body := []byte(fmt.Sprintf("%s>%s#%d", a.Addr(), b.Addr(), k))
					resp, err := a.Request(longCtx(t), b.Addr(), Message{Type: 5, Body: body})
					if err == nil && (len(resp.Body) != len(body) || resp.Body[0] != body[len(body)-1]) {
						err = fmt.Errorf("wrong answer %q to %q", resp.Body, body)
					}
					errs <- err
				}()
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
