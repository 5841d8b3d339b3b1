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
// hintBed is a node's Hints (over a temporary directory) and transport,
// and a peer, "peer:7000", that records the cell timestamp of every
// mutation it receives.
type hintBed struct {
	h   *Hints
	tr  transport.Transport
	mu  sync.Mutex
	got []int64
}

func newHintBed(t *testing.T) *hintBed {
	t.Helper()
	b := &hintBed{}
	net := transport.NewMemNetwork(1)
	_, err := net.Listen("peer:7000", func(_ context.Context, _ transport.Addr, m transport.Message) (transport.Message, error) {
		mut, err := DecodeMutation(m.Body)
		if err != nil {
			return transport.Message{}, err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.got = append(b.got, mut.Cell.Timestamp)
		return transport.Message{Type: TypeMutation}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.tr, err = net.Listen("self:7000", nil); err != nil {
		t.Fatal(err)
	}
	if b.h, err = OpenHints(nil, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.h.Close() })
	return b
}

// delivered returns the timestamps the peer received so far.
func (b *hintBed) delivered() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int64(nil), b.got...)
}

func TestHintsPauseHoldsOnlyWhatWasQueued(t *testing.T) {
	b := newHintBed(t)
	h, tr := b.h, b.tr
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
	if got := b.delivered(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("delivered while paused: %v, want only the hint stored after Pause", got)
	}
	if err := h.Deliver(ctx, cl, tr); err != nil || len(b.delivered()) != 1 {
		t.Fatalf("Deliver while paused sent %v (%v)", b.delivered(), err)
	}
	h.Resume()
	if err := h.Deliver(ctx, cl, tr); err != nil {
		t.Fatal(err)
	}
	// Hints go several at a time, in any order: after the one stored
	// since Pause, the two held.
	if got := b.delivered(); len(got) != 3 || min(got[1], got[2]) != 1 || max(got[1], got[2]) != 2 {
		t.Fatalf("after Resume: %v, want 3 then 1 and 2", b.delivered())
	}
	if p := h.Pending(); len(p) != 0 {
		t.Fatalf("pending after delivery: %v", p)
	}
}
