package gossip

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/transport"
)

var gossipTypes = []transport.Type{TypeSyn, TypeAck, TypeAck2, TypeShutdown}

// TestMemNetwork runs the cluster on the transport package's in-memory
// network with seeded faults on every gossip message: loss, duplication,
// reordering. Rounds stay in virtual time; each lost message costs one
// (short) Interval of real time.
func TestMemNetwork(t *testing.T) {
	seed := testseed.Seed(t)
	r := newTestRand(seed)
	mem := transport.NewMemNetwork(seed)
	mem.SetFault("", "", gossipTypes, transport.Fault{Drop: 0.05, Duplicate: 0.1, Reorder: 0.1})
	const interval = 20 * time.Millisecond
	c := newClusterOn(t, r, 5, 1, 0, interval, func(a transport.Addr, h transport.Handler) transport.Transport {
		tr, err := mem.Listen(a, h)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	})
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.tr.Close()
		}
	})
	n := c.until(30, "converge on a faulty MemNetwork", c.converged)
	t.Logf("converged after %d rounds", n)
	for range 10 {
		c.step()
	}
	x := c.nodes[1+r.IntN(4)]
	mem.Isolate(x.addr)
	down := c.until(80, "everyone convicts the isolated node", func() bool {
		return c.everyone(x, func(n Node, ok bool) bool { return ok && !n.Up })
	})
	mem.Heal()
	up := c.until(20, "the healed node is up everywhere", c.converged)
	t.Logf("isolated node down after %d rounds, up again %d rounds after healing", down, up)
	if st := mem.Stats()[TypeSyn]; st.Sent == 0 {
		t.Errorf("no SYN counted by the network: %+v", st)
	}
}

// TestTCP runs three gossipers over real TCP on the real clock, and waits
// for events, not for time.
func TestTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	r := testseed.Rand(t)
	const n = 3
	type node struct {
		g      *Gossiper
		tr     *transport.TCP
		events chan Event
	}
	var nodes []*node
	var seeds []transport.Addr
	for i := range n {
		nd := &node{events: make(chan Event, 64)}
		tr, err := transport.ListenTCP("127.0.0.1:0", func(ctx context.Context, from transport.Addr, m transport.Message) (transport.Message, error) {
			return nd.g.Handle(ctx, from, m)
		}, transport.TCPOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Skipf("cannot listen on loopback: %v", err)
		}
		t.Cleanup(func() { tr.Close() })
		if i == 0 {
			seeds = []transport.Addr{tr.Addr()}
		}
		g, err := New(Config{
			Self:                NodeState{HostID: randHostID(r), Tokens: tokensFor(r)},
			Seeds:               seeds,
			Transport:           tr,
			Interval:            10 * time.Millisecond,
			PhiConvictThreshold: 1e9, // the test is about the protocol, not the scheduler
			Rand:                newTestRand(r.Uint64()),
		})
		if err != nil {
			t.Fatal(err)
		}
		nd.g, nd.tr = g, tr
		g.Subscribe(func(e Event) { nd.events <- e })
		nodes = append(nodes, nd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, nd := range nodes {
		nd.g.Start()
	}
	wait := func(nd *node, kind EventKind, count int) {
		t.Helper()
		for count > 0 {
			select {
			case e := <-nd.events:
				if e.Kind == kind {
					count--
				}
			case <-ctx.Done():
				t.Fatalf("%s: missing %d %v events", nd.g.Self().HostID[:6], count, kind)
			}
		}
	}
	for _, nd := range nodes {
		wait(nd, EventJoined, n-1)
	}
	last := nodes[n-1]
	last.g.Stop(ctx)
	for _, nd := range nodes[:n-1] {
		wait(nd, EventDown, 1)
		if nd.g.IsUp(last.g.Self().HostID) {
			t.Errorf("stopped node still up")
		}
	}
	for _, nd := range nodes[:n-1] {
		nd.g.Stop(ctx)
	}
}
