package coordinator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/internal/deadline"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/transport"
)

// silentLeaders is a ring seen from a, which is down, whose replicas b and c
// never answer a counter write: every write waits for its context to end.
// Each write received is signalled on got.
func silentLeaders(t *testing.T, timeout time.Duration) (*Coordinator, chan struct{}) {
	t.Helper()
	md, err := ring.NewMetadata(map[ring.Endpoint][]int64{
		{ID: "a"}: {-6e18, 0}, {ID: "b"}: {-3e18, 3e18}, {ID: "c"}: {-1e18, 6e18},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &exRing{md: md, up: map[string]bool{"a": false, "b": true, "c": true}, fail: map[string]bool{}, got: map[string][][]byte{}}
	net := transport.NewMemNetwork(1)
	got := make(chan struct{}, 16)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for _, id := range []string{"b", "c"} {
		if _, err := net.Listen(transport.Addr(id+":7000"), func(context.Context, transport.Addr, transport.Message) (transport.Message, error) {
			got <- struct{}{}
			<-release
			return transport.Message{}, errors.New("released")
		}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := net.Listen("a:7000", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Cluster: r, Tables: r, Store: r, Transport: tr, CounterWriteTimeout: timeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if c.writeDeadlines == nil {
		t.Fatal("a coordinator without an injected WithTimeout shares no write deadlines")
	}
	return c, got
}

// TestWriteTimeoutShared checks that a counter write whose context cannot
// be cancelled (it takes a shared deadline context) still times out.
func TestWriteTimeoutShared(t *testing.T) {
	c, _ := silentLeaders(t, 20*time.Millisecond)
	err := c.CounterWrite(context.Background(), coltype.Update{Table: 1, Key: []byte("k"), Column: "c", Delta: 1}, One)
	var wt *WriteTimeoutError
	if !errors.As(err, &wt) || wt.WriteType != WriteTypeCounter {
		t.Fatalf("got %v, want a counter WriteTimeoutError", err)
	}
	if s := c.Stats(); s.WriteTimeouts != 1 {
		t.Fatalf("%d write timeouts counted, want 1", s.WriteTimeouts)
	}
}

// TestWriteTimeoutFollowsRoot checks that a counter write below a
// deadline.Root (a CQL connection's context) ends when the root is
// cancelled, long before its hour-long timeout: the shared deadline
// context follows the root's cancellation.
func TestWriteTimeoutFollowsRoot(t *testing.T) {
	c, got := silentLeaders(t, time.Hour)
	conn, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := context.WithValue(deadline.Root(conn), dismissalKey{}, nil)
	if sctx, ok := c.writeDeadlines.Context(ctx); !ok || sctx.Done() == nil {
		t.Fatal("a request below a root gets no shared context")
	}
	errc := make(chan error, 1)
	go func() {
		errc <- c.CounterWrite(ctx, coltype.Update{Table: 1, Key: []byte("k"), Column: "c", Delta: 1}, One)
	}()
	<-got
	cancel()
	err := <-errc
	var wt *WriteTimeoutError
	if !errors.As(err, &wt) {
		t.Fatalf("got %v, want a WriteTimeoutError once the connection is closed", err)
	}
}
