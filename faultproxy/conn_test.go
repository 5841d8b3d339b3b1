package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/cql/frame"
)

// lockedBuffer collects log lines from the proxy's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// echoServer answers every request with a Void result, or with reply when
// set.
func echoServer(t *testing.T, reply func(h frame.Header) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := frame.NewReader(c, 0)
				for {
					h, _, err := r.Read()
					if err != nil {
						return
					}
					var b []byte
					if reply != nil {
						b = reply(h)
					} else {
						b, _ = frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: h.Stream, Message: &frame.VoidResult{}})
					}
					if _, err := c.Write(b); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func startGroup(t *testing.T, server string) (*Group, *Proxy, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	g, err := NewGroup(Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	p, err := g.Listen("127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	return g, p, logs
}

// readUntilEOF reads frames until the connection ends.
func readUntilEOF(t *testing.T, c net.Conn) []frame.Header {
	t.Helper()
	r := frame.NewReader(c, 0)
	var hs []frame.Header
	for {
		h, _, err := r.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("read: %v", err)
			}
			return hs
		}
		hs = append(hs, h)
	}
}

// TestUnsupportedVersionAnswered: a v5 OPTIONS gets Cassandra's protocol
// error (drivers then downgrade) and the connection closes.
func TestUnsupportedVersionAnswered(t *testing.T) {
	_, p, _ := startGroup(t, echoServer(t, nil))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0x05, 0, 0, 0, byte(frame.OpOptions), 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	h, err := frame.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 0x84 || h.Op != frame.OpError || int(h.Length) != len(b)-h.Size() {
		t.Fatalf("answer header %+v, %d bytes", h, len(b))
	}
	m, err := frame.DecodeMessage(4, h.Op, b[h.Size():])
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := m.(*frame.Error); !ok || e.Code != frame.ErrProtocol || !strings.Contains(e.Message, "greatest is 4") {
		t.Fatalf("answer %+v", m)
	}
}

// TestMalformedFramesCloseTheConnection: a request that does not decode
// closes the connection with a log line, and so does a response from the
// server that does not; the proxy keeps serving other connections.
func TestMalformedFramesCloseTheConnection(t *testing.T) {
	badResult := func(h frame.Header) []byte {
		// A ROWS result whose metadata promises more than the body holds.
		body := []byte{0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 50}
		return append(frame.AppendHeader(nil, frame.Header{Version: 0x84, Stream: h.Stream, Op: frame.OpResult, Length: int32(len(body))}), body...)
	}
	for name, tc := range map[string]struct {
		server func(frame.Header) []byte
		req    []byte
		log    string
	}{
		"request": {req: append(frame.AppendHeader(nil, frame.Header{Version: 4, Stream: 1, Op: frame.OpQuery, Length: 3}), 1, 2, 3),
			log: "side=client"},
		"response": {server: badResult, log: "side=server",
			req: mustFrame(t, &frame.Frame{Version: 4, Stream: 2, Message: &frame.Query{Query: "SELECT * FROM system.peers"}})},
	} {
		t.Run(name, func(t *testing.T) {
			_, p, logs := startGroup(t, echoServer(t, tc.server))
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.req); err != nil {
				t.Fatal(err)
			}
			if hs := readUntilEOF(t, c); len(hs) != 0 {
				t.Fatalf("got %d frames before the close", len(hs))
			}
			if !strings.Contains(logs.String(), "closing connection") || !strings.Contains(logs.String(), tc.log) {
				t.Fatalf("log: %q", logs.String())
			}
			// Another connection still works.
			c2, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			if _, err := c2.Write(mustFrame(t, &frame.Frame{Version: 4, Stream: 3, Message: &frame.Options{}})); err != nil {
				t.Fatal(err)
			}
			if _, _, err := frame.NewReader(c2, 0).Read(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestScheduleFaults: with every fault at probability 1 in turn, an UPDATE's
// answer is dropped, delayed, or its connection reset; an OPTIONS and a
// PREPARE never are.
func TestScheduleFaults(t *testing.T) {
	g, p, _ := startGroup(t, echoServer(t, nil))
	update := func(stream int16) *frame.Frame {
		return &frame.Frame{Version: 4, Stream: stream, Message: &frame.Query{Query: "UPDATE t SET c = c + 1 WHERE k = 1"}}
	}
	for _, tc := range []struct {
		s     Schedule
		kind  string
		first int16 // the stream of the first answer
	}{
		{Schedule{LostAck: 1}, KindLostAck, 2},
		{Schedule{Delay: 1, DelayBy: 1}, KindDelay, -2}, // any order
		{Schedule{Reset: 1}, KindReset, -1},             // none
	} {
		if err := g.SetSchedule(tc.s); err != nil {
			t.Fatal(err)
		}
		before := g.Counts()[tc.kind]
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		for _, f := range []*frame.Frame{{Version: 4, Stream: 0, Message: &frame.Prepare{Query: "UPDATE t SET c = c + ? WHERE k = ?"}},
			{Version: 4, Stream: 3, Message: &frame.Options{}}, update(1), {Version: 4, Stream: 2, Message: &frame.Options{}}} {
			b = append(b, mustFrame(t, f)...)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		r := frame.NewReader(c, 0)
		var got []int16
		for range 4 {
			if tc.kind == KindLostAck && len(got) == 3 {
				break
			}
			h, _, err := r.Read()
			if err != nil {
				break
			}
			got = append(got, h.Stream)
		}
		c.Close()
		switch tc.kind {
		case KindLostAck:
			if len(got) != 3 || got[2] != 2 {
				t.Errorf("lost ack: answers %v, want 0, 3, 2", got)
			}
		case KindDelay:
			if len(got) != 4 {
				t.Errorf("delay: answers %v, want all four", got)
			}
		case KindReset:
			if len(got) > 2 {
				t.Errorf("reset: answers %v, want at most those before the UPDATE", got)
			}
		}
		if n := g.Counts()[tc.kind] - before; n != 1 {
			t.Errorf("%s: %d events", tc.kind, n)
		}
	}
}

// TestForgetAfter: with ForgetAfter, op ids unseen for two periods are
// forgotten and the memory stays bounded; an op seen within a period keeps
// its attempt count. The clock is faked: each arrival is a period later.
func TestForgetAfter(t *testing.T) {
	g, err := NewGroup(Config{ForgetAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	g.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	for i := range 1000 {
		g.arrive(client.OpID{Client: 1, Sequence: uint64(i)}, true, 1)
	}
	g.mu.Lock()
	n := len(g.ops) + len(g.oldOps)
	g.mu.Unlock()
	if n > 2 {
		t.Fatalf("%d op ids remembered", n)
	}
	g2, _ := NewGroup(Config{ForgetAfter: time.Hour})
	g2.now = func() time.Time { return clock }
	op := client.OpID{Client: 2, Sequence: 9}
	for want := 1; want <= 3; want++ {
		if _, _, a := g2.arrive(op, true, 1); a != want {
			t.Fatalf("attempt %d, want %d", a, want)
		}
	}
}

func mustFrame(t *testing.T, f *frame.Frame) []byte {
	t.Helper()
	b, err := frame.AppendFrame(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
