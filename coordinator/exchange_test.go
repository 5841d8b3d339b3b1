package coordinator

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/transport"
)

// exRing is a three-replica cluster (a, b, c) seen from a: the Cluster,
// Tables and Store of a coordinator, with b and c answering exchanges
// over a MemNetwork. Every exchange received is recorded by replica.
type exRing struct {
	md   *ring.Metadata
	up   map[string]bool
	fail map[string]bool // replicas whose exchange fails (not Invalid)

	mu  sync.Mutex
	got map[string][][]byte
}

func (r *exRing) Self() ring.Endpoint      { return ring.Endpoint{ID: "a"} }
func (r *exRing) Metadata() *ring.Metadata { return r.md }
func (r *exRing) Addr(id string) (transport.Addr, bool) {
	return transport.Addr(id + ":7000"), true
}
func (r *exRing) IsUp(id string) bool { return r.up[id] }
func (r *exRing) Strategy(uint64) (ring.Strategy, error) {
	return ring.SimpleStrategy{RF: 3}, nil
}

func (r *exRing) record(id string, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[id] = append(r.got[id], payload)
}

func (r *exRing) received() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for id, ps := range r.got {
		out[id] = len(ps)
	}
	return out
}

// The Store of a: its exchanges answer "a".
func (r *exRing) Exchange(_ uint64, _ []byte, _ string, in []byte) ([]byte, error) {
	r.record("a", in)
	return []byte("a"), nil
}
func (r *exRing) SyncView(uint64, []byte, string, counters.ID) ([]byte, error) { return nil, nil }
func (r *exRing) TakeDirty() []coltype.CellRef                                 { return nil }
func (r *exRing) MarkDirty(coltype.CellRef)                                    {}
func (r *exRing) Sweep() (int, error)                                          { return 0, nil }
func (r *exRing) Apply(coltype.Update) (coltype.Mutation, error) {
	return coltype.Mutation{}, errors.New("unused")
}
func (r *exRing) ApplyMutation(coltype.Mutation) error { return errors.New("unused") }
func (r *exRing) ReadRow(uint64, []byte) (row.Row, bool, error) {
	return row.Row{}, false, nil
}
func (r *exRing) MergeCells(_ uint64, a, _ row.Cell) (row.Cell, error) { return a, nil }

// serveExchanges makes replicas ids of r listen on net: each records the
// payload of an exchange and answers its own id, or fails when r.fail says.
func serveExchanges(t *testing.T, net *transport.MemNetwork, r *exRing, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := net.Listen(transport.Addr(id+":7000"), func(_ context.Context, _ transport.Addr, m transport.Message) (transport.Message, error) {
			_, _, _, payload, err := decodeExchange(m.Body)
			if err != nil {
				return transport.Message{}, err
			}
			if r.fail[id] {
				return transport.Message{}, errors.New("replica failure")
			}
			r.record(id, payload)
			return transport.Message{Type: TypeExchange, Body: encodeExchangeReply([]byte(id), nil)}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func newExRing(t *testing.T) (*exRing, *Coordinator) {
	t.Helper()
	md, err := ring.NewMetadata(map[ring.Endpoint][]int64{
		{ID: "a"}: {-6e18, 0}, {ID: "b"}: {-3e18, 3e18}, {ID: "c"}: {-1e18, 6e18},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &exRing{md: md, up: map[string]bool{"a": true, "b": true, "c": true}, fail: map[string]bool{}, got: map[string][][]byte{}}
	net := transport.NewMemNetwork(1)
	serveExchanges(t, net, r, "b", "c")
	tr, err := net.Listen("a:7000", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Cluster: r, Tables: r, Store: r, Transport: tr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// TestDirectExchange: one replica (the first live in ring order, the next
// when it fails) without everywhere; every live replica with it, answered
// at the level, Unavailable when too few are live.
func TestDirectExchange(t *testing.T) {
	ctx := context.Background()
	key := []byte("k")
	r, c := newExRing(t)
	order := ring.SimpleStrategy{RF: 3}.Replicas(r.md, ring.Token(key))
	first := order[0].ID

	reply, err := c.DirectExchange(ctx, 1, key, "c", []byte("borrow"), Quorum, false)
	if err != nil || string(reply) != first {
		t.Fatalf("one replica: %q, %v; want the answer of %s", reply, err, first)
	}
	if got := r.received(); len(got) != 1 || got[first] != 1 {
		t.Fatalf("one replica: received %v, want only %s", got, first)
	}

	// The first in ring order fails (a peer) or is down: the next answers.
	r, c = newExRing(t)
	second := order[1].ID
	if first == "a" {
		r.up["a"] = false
	} else {
		r.fail[first] = true
	}
	reply, err = c.DirectExchange(ctx, 1, key, "c", []byte("borrow"), One, false)
	if err != nil || string(reply) != second {
		t.Fatalf("first replica failing: %q, %v; want the answer of %s", reply, err, second)
	}

	// Everywhere: every live replica receives it.
	r, c = newExRing(t)
	if _, err := c.DirectExchange(ctx, 1, key, "c", []byte("write"), All, true); err != nil {
		t.Fatal(err)
	}
	// ALL answers once every replica has answered.
	if got := r.received(); got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
		t.Fatalf("everywhere at ALL: received %v, want one each", got)
	}

	// One replica down: QUORUM is met by the two live ones, ALL is
	// unavailable and nothing is sent.
	r, c = newExRing(t)
	r.up["c"] = false
	if _, err := c.DirectExchange(ctx, 1, key, "c", []byte("write"), Quorum, true); err != nil {
		t.Fatalf("QUORUM with one replica down: %v", err)
	}
	_, err = c.DirectExchange(ctx, 1, key, "c", []byte("write"), All, true)
	var un *UnavailableError
	if !errors.As(err, &un) {
		t.Fatalf("ALL with one replica down: %v, want Unavailable", err)
	}
	got := r.received()
	if got["c"] != 0 || slices.Max([]int{got["a"], got["b"]}) > 1 {
		t.Fatalf("received %v: c is down, and ALL sent nothing", got)
	}
	if _, err := c.DirectExchange(ctx, 1, key, "c", []byte("write"), Any, true); err == nil {
		t.Fatal("ANY was accepted")
	}
}

func TestParseHostID(t *testing.T) {
	const good = "00112233445566778899aabbccddeeff"
	id, err := parseHostID(good)
	if err != nil || hex.EncodeToString(id[:]) != good {
		t.Errorf("parseHostID(%q) = %x, %v", good, id, err)
	}
	for _, bad := range []string{"", "0011", good + "00", "zz112233445566778899aabbccddeeff", good[:31] + "g"} {
		if id, err := parseHostID(bad); err == nil || id != (counters.ID{}) {
			t.Errorf("parseHostID(%q) = %x, %v; want an error and no id", bad, id, err)
		}
	}
}
