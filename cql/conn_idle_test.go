package cql

import (
	"runtime"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// connGoroutines counts the goroutines running a connection's read loop
// and write loop, from a dump of every goroutine's stack.
func connGoroutines() (readers, writers int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "cql.(*conn).readLoop(") {
			readers++
		}
		if strings.Contains(g, "cql.(*conn).writeLoop(") {
			writers++
		}
	}
	return readers, writers
}

// TestIdleConnectionHoldsOneGoroutine: connections that finished their
// handshake, and one that was answered since, hold their reader only; the
// writer runs while answers are queued and is started again for the next.
func TestIdleConnectionHoldsOneGoroutine(t *testing.T) {
	s, _ := startServer(t, ServerConfig{})
	const n = 20
	cs := make([]*client, n)
	for i := range cs {
		cs[i] = dial(t, s)
		cs[i].handshake()
	}
	if m := cs[0].call(3, query("echo")); m.Opcode() != frame.OpResult {
		t.Fatalf("query answered %+v", m)
	}
	waitFor(t, "every idle connection holds its reader and no writer", func() bool {
		r, w := connGoroutines()
		return r == n && w == 0
	})
	// An idle connection is answered again: its writer starts again.
	for i, c := range cs {
		if m := c.call(int16(10+i), query("echo")); m.Opcode() != frame.OpResult {
			t.Fatalf("connection %d after idling: %+v", i, m)
		}
	}
	waitFor(t, "the writers stop again", func() bool {
		r, w := connGoroutines()
		return r == n && w == 0
	})
	s.mu.Lock()
	for c := range s.conns {
		c.mu.Lock()
		if c.writing || len(c.wq) > 0 {
			t.Errorf("an idle connection is writing (%v) or has %d frames queued", c.writing, len(c.wq))
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
}
