package cql

import (
	"net"
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// benchConn starts a server over the fake executor, connects to it and
// completes the handshake; it returns the connection, a reader of its
// answers and an encoded QUERY frame. Everything closes with b.
func benchConn(b *testing.B) (net.Conn, *frame.Reader, []byte) {
	b.Helper()
	s, err := Listen(ServerConfig{Addr: "127.0.0.1:0", Executor: newFakeExecutor()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	r := frame.NewReader(nc, 0)
	startup, _ := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: 1, Message: &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}})
	if _, err := nc.Write(startup); err != nil {
		b.Fatal(err)
	}
	if _, _, err := r.Read(); err != nil {
		b.Fatal(err)
	}
	req, _ := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: 7, Message: query("echo")})
	return nc, r, req
}

// BenchmarkServerPipelined measures the protocol layer end to end over
// loopback TCP: on one connection, a client writes QUERY requests in groups
// of 16 frames per write while another goroutine reads the answers (TCP
// flow control bounds what is in flight), against an executor that answers
// at once with a one-row result. One op is one request answered.
// Allocations count both sides.
func BenchmarkServerPipelined(b *testing.B) {
	nc, r, req := benchConn(b)
	b.ReportAllocs()
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		for range b.N {
			if _, _, err := r.Read(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var buf []byte
	sent := 0
	for sent < b.N {
		n := min(16, b.N-sent)
		buf = buf[:0]
		for range n {
			buf = append(buf, req...)
		}
		if _, err := nc.Write(buf); err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkServerRequestResponse measures one request at a time on one
// connection: the client writes a QUERY and waits for its answer, so the
// connection's writer has nothing queued between answers (and, since it
// runs only while answers are queued, is started for each one). One op is
// one round trip.
func BenchmarkServerRequestResponse(b *testing.B) {
	nc, r, req := benchConn(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := nc.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, _, err := r.Read(); err != nil {
			b.Fatal(err)
		}
	}
}
