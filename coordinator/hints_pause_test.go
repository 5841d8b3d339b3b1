package coordinator

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/transport"
)

// oneTarget is a Cluster of one peer, always up.
type oneTarget struct{ addr transport.Addr }

func (oneTarget) Self() ring.Endpoint                  { return ring.Endpoint{ID: "self"} }
func (oneTarget) Metadata() *ring.Metadata             { return nil }
func (o oneTarget) Addr(string) (transport.Addr, bool) { return o.addr, true }
func (oneTarget) IsUp(string) bool                     { return true }

// TestHintsPauseHoldsOnlyWhatWasQueued: Pause holds the hints queued at
// that moment (a restarted node's hints of updates in doubt); hints stored
// later are delivered at once, and Resume lets the held ones go.
func TestHintsPauseHoldsOnlyWhatWasQueued(t *testing.T) {
	net := transport.NewMemNetwork(1)
	var mu sync.Mutex
	var got []int64
	_, err := net.Listen("peer:7000", func(_ context.Context, _ transport.Addr, m transport.Message) (transport.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		mu2, err := DecodeMutation(m.Body)
		if err != nil {
			return transport.Message{}, err
		}
		got = append(got, mu2.Cell.Timestamp)
		return transport.Message{Type: TypeMutation}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := net.Listen("self:7000", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := OpenHints(nil, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	hint := func(ts int64) {
		t.Helper()
		if err := h.Store("aa", coltype.Mutation{Table: 1, Key: []byte("k"), Cell: row.Cell{Column: "c", Value: []byte{0, 0}, Timestamp: ts}}); err != nil {
			t.Fatal(err)
		}
	}
	hint(1)
	hint(2)
	h.Pause()
	hint(3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := oneTarget{addr: "peer:7000"}
	left, err := h.DeliverTo(ctx, "aa", cl, tr)
	if err != nil || left != 0 {
		t.Fatalf("DeliverTo while paused: left %d, %v", left, err)
	}
	if len(got) != 1 || got[0] != 3 {
		t.Fatalf("delivered while paused: %v, want only the hint stored after Pause", got)
	}
	if err := h.Deliver(ctx, cl, tr); err != nil || len(got) != 1 {
		t.Fatalf("Deliver while paused sent %v (%v)", got, err)
	}
	h.Resume()
	if err := h.Deliver(ctx, cl, tr); err != nil {
		t.Fatal(err)
	}
	// Hints go several at a time, in any order: after the one stored
	// since Pause, the two held.
	if len(got) != 3 || min(got[1], got[2]) != 1 || max(got[1], got[2]) != 2 {
		t.Fatalf("after Resume: %v, want 3 then 1 and 2", got)
	}
	if p := h.Pending(); len(p) != 0 {
		t.Fatalf("pending after delivery: %v", p)
	}
}
