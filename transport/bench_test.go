package transport

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks of round trips and one-way messages, over TCP loopback and the
// in-memory network. Each reports req/s (or msg/s); ns/op is the wall time
// per message with every caller running, so ns/op × callers is the latency
// one caller sees.
//
//	go test -run '^$' -bench . -benchmem ./transport/

var benchBody = make([]byte, 64)

type benchPair struct {
	cli Transport
	srv Addr
}

func tcpPair(b *testing.B, h Handler) benchPair {
	logger := slog.New(slog.DiscardHandler)
	srv, err := ListenTCP("127.0.0.1:0", h, TCPOptions{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	cli, err := ListenTCP("127.0.0.1:0", nil, TCPOptions{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close(); srv.Close() })
	return benchPair{cli, srv.Addr()}
}

func memPair(b *testing.B, h Handler) benchPair {
	n := NewMemNetwork(1)
	srv, err := n.Listen(tB, h)
	if err != nil {
		b.Fatal(err)
	}
	cli, err := n.Listen(tA, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close(); srv.Close() })
	return benchPair{cli, srv.Addr()}
}

func benchRoundTrip(b *testing.B, pair func(*testing.B, Handler) benchPair) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			p := pair(b, echoHandler)
			ctx := context.Background()
			// Warm up: dial the connection outside the timed part.
			if _, err := p.cli.Request(ctx, p.srv, Message{Type: 1, Body: benchBody}); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := p.cli.Request(ctx, p.srv, Message{Type: 1, Body: benchBody}); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		})
	}
}

func BenchmarkTCPRoundTrip(b *testing.B) { benchRoundTrip(b, tcpPair) }
func BenchmarkMemRoundTrip(b *testing.B) { benchRoundTrip(b, memPair) }

// benchSend measures one-way messages from one caller until the handler
// has seen all of them.
func benchSend(b *testing.B, pair func(*testing.B, Handler) benchPair) {
	var got atomic.Int64
	done := make(chan struct{})
	var want atomic.Int64
	want.Store(-1)
	p := pair(b, func(context.Context, Addr, Message) (Message, error) {
		if got.Add(1) == want.Load() {
			close(done)
		}
		return Message{}, nil
	})
	ctx := context.Background()
	if err := p.cli.Send(ctx, p.srv, Message{Type: 1, Body: benchBody}); err != nil {
		b.Fatal(err)
	}
	for got.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	got.Store(0)
	want.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := p.cli.Send(ctx, p.srv, Message{Type: 1, Body: benchBody}); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("%d of %d messages arrived", got.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
}

func BenchmarkTCPSend(b *testing.B) { benchSend(b, tcpPair) }
func BenchmarkMemSend(b *testing.B) { benchSend(b, memPair) }
