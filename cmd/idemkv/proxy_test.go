package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeServer answers every QUERY with a Void result and OPTIONS with
// SUPPORTED.
func fakeServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := frame.NewReader(c, 0)
				for {
					h, _, err := r.Read()
					if err != nil {
						return
					}
					var m frame.Message = &frame.VoidResult{}
					if h.Op == frame.OpOptions {
						m = &frame.Supported{Options: map[string][]string{"CQL_VERSION": {"3.4.4"}}}
					}
					b, err := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: h.Stream, Message: m})
					if err != nil {
						return
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

// TestProxyCommand: idemkv proxy --lost-ack 1 forwards an UPDATE and drops
// its answer, answers OPTIONS, prints the fault and the counts.
func TestProxyCommand(t *testing.T) {
	server := fakeServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- serveProxy(ctx, []string{"--listen", "127.0.0.1:0", "--to", server, "--lost-ack", "1", "--seed", "7"}, &out, &errb)
	}()
	re := regexp.MustCompile(`proxy 1: (\S+) -> `)
	var addr string
	for range 500 {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if addr == "" {
		cancel()
		t.Fatalf("no proxy address in %q (stderr %q, err %v)", out.String(), errb.String(), <-done)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req []byte
	for _, f := range []*frame.Frame{
		{Version: 4, Stream: 5, Message: &frame.Query{Query: "UPDATE ks.t SET c = c + 1 WHERE k = 1", Params: frame.QueryParams{Consistency: 1}}},
		{Version: 4, Stream: 6, Message: &frame.Options{}},
	} {
		if req, err = frame.AppendFrame(req, f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	h, _, err := frame.NewReader(c, 0).Read()
	if err != nil {
		t.Fatal(err)
	}
	if h.Stream != 6 || h.Op != frame.OpSupported {
		t.Fatalf("first answer: stream %d %s; want OPTIONS' (the UPDATE's is lost)", h.Stream, h.Op)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"node 1 stream 5 proxy_lost_ack op - attempt 1", "faults: proxy_lost_ack 1", "1 counter writes, 1 faults"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}
