package transport

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

const (
	tA, tB, tC Addr = "127.0.0.1:7000", "127.0.0.2:7000", "127.0.0.3:7000"
	typX       Type = 16
	typY       Type = 17
)

// memNode is an endpoint with a handler that counts its calls per type.
type memNode struct {
	Transport
	mu    sync.Mutex
	calls map[Type]int
}

func (m *memNode) count(t Type) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[t]
}

func memNodes(t *testing.T, n *MemNetwork, addrs ...Addr) []*memNode {
	t.Helper()
	var out []*memNode
	for _, a := range addrs {
		m := &memNode{calls: make(map[Type]int)}
		tr, err := n.Listen(a, func(_ context.Context, _ Addr, req Message) (Message, error) {
			m.mu.Lock()
			m.calls[req.Type]++
			m.mu.Unlock()
			return Message{Type: req.Type, Body: req.Body}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		m.Transport = tr
		out = append(out, m)
	}
	return out
}

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// mustTimeOut checks that a request is lost, not refused.
func mustTimeOut(t *testing.T, from Transport, to Addr, typ Type) {
	t.Helper()
	_, err := from.Request(shortCtx(t), to, Message{Type: typ})
	mustErr(t, err, ErrTimeout, context.DeadlineExceeded)
	mustNotErr(t, err, ErrUnreachable)
}

func mustAnswer(t *testing.T, from Transport, to Addr, typ Type) {
	t.Helper()
	if _, err := from.Request(longCtx(t), to, Message{Type: typ, Body: []byte("x")}); err != nil {
		t.Fatalf("%s -> %s type %d: %v", from.Addr(), to, typ, err)
	}
}

func TestMemListen(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	a, err := n.Listen(tA, echoHandler)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen(tA, echoHandler); err == nil {
		t.Fatal("second Listen on a taken address succeeded")
	}
	a.Close()
	b, err := n.Listen(tA, echoHandler)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	b.Close()
}

func TestMemDrop(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	nodes := memNodes(t, n, tA, tB)
	a, b := nodes[0], nodes[1]
	n.SetFault(tA, tB, nil, Fault{Drop: 1})
	mustTimeOut(t, a, tB, typX)
	if b.count(typX) != 0 {
		t.Fatal("a dropped request reached the handler")
	}
	if s := n.Stats()[typX]; s.Dropped != 1 || s.Sent != 1 || s.Delivered != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The other direction is untouched (a response to b's request would
	// cross a->b, so b sends one-way).
	if err := b.Send(longCtx(t), tA, Message{Type: typY}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's message to a", func() bool { return a.count(typY) == 1 })
	n.ClearFaults()
	mustAnswer(t, a, tB, typX)
}

// TestMemLostAck drops responses only: the handler runs, the requester
// times out — the lost acknowledgement of a counter write.
func TestMemLostAck(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	nodes := memNodes(t, n, tA, tB)
	a, b := nodes[0], nodes[1]
	n.SetFault(tB, tA, []Type{typX}, Fault{Drop: 1})
	mustTimeOut(t, a, tB, typX)
	if b.count(typX) != 1 {
		t.Fatalf("handler ran %d times, want 1", b.count(typX))
	}
	mustAnswer(t, a, tB, typY) // other types pass
	s := n.Stats()
	if s[typX].Dropped != 1 || s[typX].Delivered != 1 || s[typX].Sent != 2 {
		t.Fatalf("stats of X %+v", s[typX])
	}
	if s[typY].Dropped != 0 {
		t.Fatalf("stats of Y %+v", s[typY])
	}
}

func TestMemDuplicate(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	nodes := memNodes(t, n, tA, tB)
	a, b := nodes[0], nodes[1]
	n.SetFault(tA, tB, nil, Fault{Duplicate: 1})
	mustAnswer(t, a, tB, typX)
	waitFor(t, "the duplicate to run", func() bool { return b.count(typX) == 2 })
	waitFor(t, "the second answer to arrive late", func() bool { return n.Stats()[typX].Late == 1 })
	s := n.Stats()[typX]
	// Request, its copy, two responses.
	if s.Sent != 3 || s.Duplicated != 1 || s.Delivered != 4 {
		t.Fatalf("stats %+v", s)
	}
	if err := a.Send(longCtx(t), tB, Message{Type: typY}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a duplicated one-way message", func() bool { return b.count(typY) == 2 })
}

func TestMemDelay(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	nodes := memNodes(t, n, tA, tB)
	a := nodes[0]
	n.SetFault(tA, tB, nil, Fault{Delay: 300 * time.Millisecond, Jitter: 50 * time.Millisecond})
	// Nothing can arrive before 300ms: a 30ms request must time out.
	mustTimeOut(t, a, tB, typX)
	mustAnswer(t, a, tB, typX)
	if s := n.Stats()[typX]; s.Delayed != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// deliveredOrder sends count one-way messages from a to b and returns the
// sequence numbers in the order the network delivered them.
func deliveredOrder(t *testing.T, n *MemNetwork, a Transport, to Addr, count int) []int {
	t.Helper()
	var (
		mu    sync.Mutex
		order []int
	)
	n.OnDeliver(func(from, dst Addr, m Message, _ bool) bool {
		if from == a.Addr() && dst == to && m.Type == typY {
			mu.Lock()
			order = append(order, int(binary.BigEndian.Uint32(m.Body)))
			mu.Unlock()
		}
		return false
	})
	defer n.OnDeliver(nil)
	for i := range count {
		if err := a.Send(longCtx(t), to, Message{Type: typY, Body: binary.BigEndian.AppendUint32(nil, uint32(i))}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= count
	})
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(order)
}

func TestMemReorder(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	nodes := memNodes(t, n, tA, tB)
	const count = 200
	if order := deliveredOrder(t, n, nodes[0], tB, count); !slices.IsSorted(order) {
		t.Fatalf("without faults a link is FIFO: %v", order)
	}
	n.SetFault(tA, tB, []Type{typY}, Fault{Reorder: 0.3})
	order := deliveredOrder(t, n, nodes[0], tB, count)
	if slices.IsSorted(order) {
		t.Fatal("Reorder 0.3 left 200 messages in order")
	}
	sorted := slices.Sorted(slices.Values(order))
	for i, v := range sorted {
		if v != i {
			t.Fatalf("reordering lost or duplicated messages: %v", sorted)
		}
	}
	if s := n.Stats()[typY]; s.Reordered == 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestMemPartition(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	nodes := memNodes(t, n, tA, tB, tC)
	a, b, c := nodes[0], nodes[1], nodes[2]
	n.Partition([]Addr{tA}, []Addr{tB})
	mustTimeOut(t, a, tB, typX)
	mustTimeOut(t, b, tA, typX)
	if err := a.Send(longCtx(t), tB, Message{Type: typY}); err != nil {
		t.Fatalf("Send across a partition must not fail: %v", err)
	}
	mustAnswer(t, a, tC, typX)
	mustAnswer(t, c, tB, typX)
	mustAnswer(t, a, tA, typX) // a node always reaches itself
	n.Heal()
	mustAnswer(t, a, tB, typX)
	mustAnswer(t, b, tA, typX)

	n.Isolate(tC)
	mustTimeOut(t, a, tC, typX)
	mustTimeOut(t, c, tB, typX)
	mustAnswer(t, a, tB, typX)
	// Isolation holds for an address that was not listening yet, and
	// hides that nothing listens there.
	const tD Addr = "127.0.0.4:7000"
	n.Isolate(tD)
	mustTimeOut(t, a, tD, typX)
	d := memNodes(t, n, tD)[0]
	mustTimeOut(t, a, tD, typX)
	n.Heal()
	mustAnswer(t, c, tA, typX)
	mustAnswer(t, a, tD, typX)
	if b.count(typY) != 0 || d.count(typX) != 1 {
		t.Fatal("a message crossed the partition")
	}
	if s := n.TotalStats(); s.Dropped != 7 {
		t.Fatalf("stats %+v, want 7 drops", s)
	}
}

// TestMemPartitionInFlight: a response on its way when the partition
// starts is lost, and a partitioned peer closing does not tell the
// requester.
func TestMemPartitionInFlight(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	release := make(chan struct{})
	b, err := n.Listen(tB, func(ctx context.Context, _ Addr, req Message) (Message, error) {
		<-release
		return req, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a := memNodes(t, n, tA)[0]
	errc := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	go func() {
		_, err := a.Request(ctx, tB, Message{Type: typX})
		errc <- err
	}()
	waitFor(t, "the request to arrive", func() bool { return n.Stats()[typX].Delivered == 1 })
	n.Partition([]Addr{tA}, []Addr{tB})
	close(release)
	mustErr(t, <-errc, ErrTimeout)
}

func TestMemWildcardFault(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	nodes := memNodes(t, n, tA, tB, tC)
	n.SetFault("", tB, nil, Fault{Drop: 1})
	mustTimeOut(t, nodes[0], tB, typX)
	mustTimeOut(t, nodes[2], tB, typX)
	mustAnswer(t, nodes[0], tC, typX)
	// The exact link wins over the wildcard.
	n.SetFault(tA, tB, nil, Fault{})
	mustAnswer(t, nodes[0], tB, typX)
	mustTimeOut(t, nodes[2], tB, typX)
}

// TestMemOnDeliver drops exactly the first response of type X.
func TestMemOnDeliver(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	nodes := memNodes(t, n, tA, tB)
	a, b := nodes[0], nodes[1]
	var dropped atomic.Bool
	n.OnDeliver(func(from, to Addr, m Message, isResponse bool) bool {
		return isResponse && m.Type == typX && dropped.CompareAndSwap(false, true)
	})
	mustAnswer(t, a, tB, typY)
	mustTimeOut(t, a, tB, typX)
	mustAnswer(t, a, tB, typX)
	if b.count(typX) != 2 {
		t.Fatalf("handler ran %d times, want 2", b.count(typX))
	}
	if s := n.Stats()[typX]; s.Dropped != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// linkTraffic sends count one-way messages from a to b, one after another.
func linkTraffic(t *testing.T, from Transport, to Addr, count int) {
	for i := range count {
		if err := from.Send(longCtx(t), to, Message{Type: typY, Body: []byte{byte(i)}}); err != nil {
			t.Error(err)
			return
		}
	}
}

// TestMemReproducible: a link's decisions depend on the seed and the link
// only, not on traffic elsewhere nor on the faults of other links.
func TestMemReproducible(t *testing.T) {
	seed := testseed.Seed(t)
	const count = 300
	f := Fault{Drop: 0.3, Duplicate: 0.2, Reorder: 0.2, Jitter: time.Millisecond}
	run := func(seed uint64, noise bool) ([]decision, []int) {
		n := NewMemNetwork(seed)
		n.traceDecisions()
		nodes := memNodes(t, n, tA, tB, tC)
		n.SetFault(tA, tB, nil, Fault{Drop: 0.3, Duplicate: 0.2})
		var wg sync.WaitGroup
		if noise {
			n.SetFault(tC, tB, nil, f)
			n.SetFault(tA, tC, nil, f)
			wg.Add(2)
			go func() { defer wg.Done(); linkTraffic(t, nodes[2], tB, count) }()
			go func() { defer wg.Done(); linkTraffic(t, nodes[0], tC, count) }()
		}
		var (
			mu        sync.Mutex
			delivered []int
		)
		n.OnDeliver(func(from, to Addr, m Message, _ bool) bool {
			if from == tA && to == tB {
				mu.Lock()
				delivered = append(delivered, int(m.Body[0]))
				mu.Unlock()
			}
			return false
		})
		linkTraffic(t, nodes[0], tB, count)
		wg.Wait()
		trace := n.linkTrace(tA, tB)
		want := 0
		for _, d := range trace {
			if !d.Drop {
				want++
				if d.Dup {
					want++
				}
			}
		}
		waitFor(t, "deliveries", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(delivered) == want
		})
		mu.Lock()
		defer mu.Unlock()
		return trace, slices.Clone(delivered)
	}
	t1, d1 := run(seed, false)
	t2, d2 := run(seed, true)
	if len(t1) != count || !slices.Equal(t1, t2) {
		i := firstDiff(t1, t2)
		t.Fatalf("same seed, different decisions on a->b (%d and %d of them), first at message %d", len(t1), len(t2), i)
	}
	if !slices.Equal(d1, d2) {
		t.Fatalf("same seed, different deliveries on a->b, first at delivery %d", firstDiff(d1, d2))
	}
	var drops, dups int
	for _, d := range t1 {
		if d.Drop {
			drops++
		} else if d.Dup {
			dups++
		}
	}
	if drops == 0 || dups == 0 || drops == count {
		t.Fatalf("%d drops and %d duplicates out of %d: faults not applied", drops, dups, count)
	}
	t3, _ := run(seed+1, false)
	if slices.Equal(t1, t3) {
		t.Fatal("seeds s and s+1 made the same decisions")
	}
	// Setting faults later does not shift the sequence: the decisions of a
	// link with no fault are drawn as well.
	n := NewMemNetwork(seed)
	n.traceDecisions()
	nodes := memNodes(t, n, tA, tB)
	linkTraffic(t, nodes[0], tB, count/2)
	n.SetFault(tA, tB, nil, Fault{Drop: 0.3, Duplicate: 0.2})
	linkTraffic(t, nodes[0], tB, count/2)
	t4 := n.linkTrace(tA, tB)
	if !slices.Equal(t4[count/2:], t1[count/2:]) {
		t.Fatalf("decisions shifted by the faults in force earlier, first at message %d", count/2+firstDiff(t4[count/2:], t1[count/2:]))
	}
}

func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestMemRestartInFlight: closing an endpoint fails requests waiting on it
// at other endpoints, but not requests to its successor.
func TestMemRestartInFlight(t *testing.T) {
	n := NewMemNetwork(testseed.Seed(t))
	started := make(chan struct{}, 1)
	b, err := n.Listen(tB, func(ctx context.Context, _ Addr, req Message) (Message, error) {
		started <- struct{}{}
		<-ctx.Done()
		return Message{}, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	a := memNodes(t, n, tA)[0]
	errc := make(chan error, 1)
	go func() {
		_, err := a.Request(longCtx(t), tB, Message{Type: typX})
		errc <- err
	}()
	<-started
	b.Close()
	b2 := memNodes(t, n, tB)[0]
	mustErr(t, <-errc, ErrUnreachable)
	mustAnswer(t, a, tB, typX)
	if b2.count(typX) != 1 {
		t.Fatal("the restarted endpoint did not serve")
	}
}

func ExampleMemNetwork() {
	n := NewMemNetwork(42)
	ack := func(_ context.Context, _ Addr, req Message) (Message, error) { return Message{Type: req.Type}, nil }
	a, _ := n.Listen("127.0.0.1:7000", ack)
	b, _ := n.Listen("127.0.0.2:7000", ack)
	defer a.Close()
	defer b.Close()
	// Lose every acknowledgement of type 16 from b to a.
	n.SetFault(b.Addr(), a.Addr(), []Type{16}, Fault{Drop: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := a.Request(ctx, b.Addr(), Message{Type: 16})
	fmt.Println(err != nil, n.Stats()[16].Dropped)
	// Output: true 1
}
