package coordinator

import (
	"bytes"
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

// toyCoordinated is a column type with its own coordinator-side logic: an
// exchange goes to the live replicas in reverse ring order with a prefix,
// a plain write of d > 0 sends a fresh id to the first natural replica and
// retires a participant, d == 0 times out, d < 0 is refused. It records
// the Coordination it was given.
type toyCoordinated struct{}

var (
	toyMu   sync.Mutex
	toyLast coltype.Coordination
)

func (toyCoordinated) Name() string                          { return "toy_coordinated" }
func (toyCoordinated) Merge(a, _ row.Cell) (row.Cell, error) { return a, nil }
func (toyCoordinated) Value(row.Cell) (int64, error)         { return 0, nil }
func (toyCoordinated) PayloadKey() string                    { return "toy" }
func (toyCoordinated) Exchange(coltype.Leader, uint64, []byte, string, []byte) ([]byte, error) {
	return nil, errors.New("unused")
}

func (toyCoordinated) CoordinateExchange(ctx context.Context, co coltype.Coordination, payload []byte) ([]byte, error) {
	toyMu.Lock()
	toyLast = co
	toyMu.Unlock()
	live := co.Live()
	slices.Reverse(live)
	reply, failed, err := co.Exchange(ctx, live, append([]byte("toy:"), payload...))
	if failed && err == nil {
		reply = append(reply, "+failed"...)
	}
	return reply, err
}

func (toyCoordinated) CoordinateWrite(ctx context.Context, co coltype.Coordination, delta int64) error {
	switch {
	case delta < 0:
		return co.Refused("toy: negative")
	case delta == 0:
		return co.TimedOut()
	}
	id, err := co.NewID()
	if err != nil {
		return err
	}
	if _, _, err := co.Exchange(ctx, co.Natural()[:1], id[:]); err != nil {
		return err
	}
	co.Retired()
	return nil
}

func init() {
	coltype.MustRegister(toyCoordinated{})
	coltype.MustRegister(toyExchanger{})
}

// toyExchanger is an Exchanger that is neither Coordinated nor a
// DirectExchanger: the coordinator's default serves it.
type toyExchanger struct{}

func (toyExchanger) Name() string                          { return "toy_exchanger" }
func (toyExchanger) Merge(a, _ row.Cell) (row.Cell, error) { return a, nil }
func (toyExchanger) Value(row.Cell) (int64, error)         { return 0, nil }
func (toyExchanger) PayloadKey() string                    { return "toyx" }
func (toyExchanger) Exchange(coltype.Leader, uint64, []byte, string, []byte) ([]byte, error) {
	return nil, errors.New("unused")
}

// hexID is a host id of 16 bytes b, as endpoints name them.
func hexID(b byte) string { return hex.EncodeToString(bytes.Repeat([]byte{b}, 16)) }

// coRing is exRing with host ids for names (a Coordination speaks host
// ids) and a Store that knows the columns' types.
type coRing struct {
	*exRing
	self string
}

func (r *coRing) Self() ring.Endpoint { return ring.Endpoint{ID: r.self} }

func (r *coRing) ColumnTypeName(_ uint64, column string) (string, bool) {
	switch column {
	case "t":
		return "toy_coordinated", true
	case "x":
		return "toy_exchanger", true
	case "c":
		return "counter", true
	}
	return "", false
}

// The Store of the coordinator: its exchanges answer its id.
func (r *coRing) Exchange(_ uint64, _ []byte, _ string, in []byte) ([]byte, error) {
	r.record(r.self, in)
	return []byte(r.self), nil
}

func newCoRing(t *testing.T) (*coRing, *Coordinator) {
	t.Helper()
	a, b, c := hexID(0xaa), hexID(0xbb), hexID(0xcc)
	md, err := ring.NewMetadata(map[ring.Endpoint][]int64{
		{ID: a}: {-6e18, 0}, {ID: b}: {-3e18, 3e18}, {ID: c}: {-1e18, 6e18},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &coRing{exRing: &exRing{md: md, up: map[string]bool{a: true, b: true, c: true}, fail: map[string]bool{}, got: map[string][][]byte{}}, self: a}
	net := transport.NewMemNetwork(1)
	serveExchanges(t, net, r.exRing, b, c)
	tr, err := net.Listen(transport.Addr(a+":7000"), nil)
	if err != nil {
		t.Fatal(err)
	}
	co, err := New(Config{Cluster: r, Tables: r, Store: r, Transport: tr,
		IDs:    bytes.NewReader(bytes.Repeat([]byte{0x42}, 64)),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r, co
}

// TestCoordinatedType: a coltype.Coordinated column's exchanges and plain
// writes run the type's logic, with a Coordination that names the cell,
// its natural and live replicas (host ids, ring order), exchanges with the
// replicas the type chose in its order, and carries the coordinator's
// errors, ids and statistics; an Exchanger without the capability gets the
// default (one replica, ring order).
func TestCoordinatedType(t *testing.T) {
	ctx := context.Background()
	r, c := newCoRing(t)
	// A key whose last replica in ring order is a peer (it can fail).
	var key []byte
	var order []ring.Endpoint
	for i := 0; ; i++ {
		key = []byte{byte(i)}
		order = ring.SimpleStrategy{RF: 3}.Replicas(r.md, ring.Token(key))
		if order[2].ID != r.self {
			break
		}
	}
	last := order[2].ID

	reply, err := c.Exchange(ctx, 7, key, "t", []byte("p"), One)
	if err != nil || string(reply) != last {
		t.Fatalf("exchange: %q, %v; want the answer of %s (the type reverses the order)", reply, err, last)
	}
	if got := r.received(); len(got) != 1 || got[last] != 1 || string(r.got[last][0]) != "toy:p" {
		t.Fatalf("exchange: received %v, want toy:p at %s only", r.got, last)
	}
	toyMu.Lock()
	co := toyLast
	toyMu.Unlock()
	if cell := co.Cell(); cell.Table != 7 || !bytes.Equal(cell.Key, key) || cell.Column != "t" {
		t.Fatalf("Cell() = %+v", cell)
	}
	if !slices.Equal(co.Natural(), replicaIDs(order)) || !slices.Equal(co.Live(), replicaIDs(order)) {
		t.Fatalf("Natural() %x, Live() %x; want %x", co.Natural(), co.Live(), replicaIDs(order))
	}
	if st := c.Stats(); st.Exchanges != 1 || st.ExchangeBytes != uint64(len("toy:p")+len(last)) {
		t.Fatalf("stats after one exchange: %d exchanges, %d bytes", st.Exchanges, st.ExchangeBytes)
	}

	// A replica down is not live; a failing one is passed over (failed).
	r.up[order[0].ID] = false
	r.fail[last] = true
	if got := co.Live(); !slices.Equal(got, replicaIDs(order[1:])) {
		t.Fatalf("Live() with %s down: %x, want %x", order[0].ID, got, replicaIDs(order[1:]))
	}
	reply, err = c.Exchange(ctx, 7, key, "t", []byte("q"), One)
	if want := order[1].ID + "+failed"; err != nil || string(reply) != want {
		t.Fatalf("exchange with %s down and %s failing: %q, %v; want %q", order[0].ID, last, reply, err, want)
	}

	// An id that is not a natural replica is refused.
	if _, _, err := co.Exchange(ctx, []counters.ID{{1, 2, 3}}, nil); !errors.Is(err, coltype.ErrRefused) {
		t.Fatalf("exchange with a stranger: %v, want a refusal", err)
	}
	// No replica: unavailable.
	if _, _, err := co.Exchange(ctx, nil, nil); !errors.Is(err, coltype.ErrUnavailable) {
		t.Fatalf("exchange with no replica: %v, want unavailable", err)
	}

	// Plain writes: the type's ids, errors and statistics.
	r, c = newCoRing(t)
	if err := c.CoordinatedWrite(ctx, 7, key, "t", 3); err != nil {
		t.Fatal(err)
	}
	if got := r.got[order[0].ID]; len(got) != 1 || !bytes.Equal(got[0], bytes.Repeat([]byte{0x42}, 16)) {
		t.Fatalf("write: %s received %x, want the id from Config.IDs", order[0].ID, got)
	}
	var inv *InvalidError
	if err := c.CoordinatedWrite(ctx, 7, key, "t", -1); !errors.As(err, &inv) || inv.Msg != "toy: negative" {
		t.Fatalf("negative write: %v, want Invalid", err)
	}
	var wt *WriteTimeoutError
	if err := c.CoordinatedWrite(ctx, 7, key, "t", 0); !errors.As(err, &wt) || wt.WriteType != WriteTypeCounter {
		t.Fatalf("zero write: %v, want a counter write timeout", err)
	}
	if st := c.Stats(); st.Retirements != 1 || st.WriteTimeouts != 1 {
		t.Fatalf("stats: %d retirements, %d write timeouts; want 1, 1", st.Retirements, st.WriteTimeouts)
	}
	if err := c.CoordinatedWrite(ctx, 7, key, "c", 1); !errors.As(err, &inv) {
		t.Fatalf("coordinated write of a counter column: %v, want Invalid", err)
	}

	// An Exchanger without the capability: one replica, the first live in
	// ring order, payload unchanged.
	r, c = newCoRing(t)
	reply, err = c.Exchange(ctx, 7, key, "x", []byte("raw"), Quorum)
	if err != nil || string(reply) != order[0].ID {
		t.Fatalf("default exchange: %q, %v; want the answer of %s", reply, err, order[0].ID)
	}
	if got := r.got[order[0].ID]; len(got) != 1 || string(got[0]) != "raw" {
		t.Fatalf("default exchange: received %q", got)
	}
}
