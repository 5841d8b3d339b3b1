package gossip

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/transport"
)

func TestNewValidates(t *testing.T) {
	net := newFakeNet()
	ep := net.endpoint("127.0.0.1:7000")
	good := NodeState{HostID: "0123456789abcdef0123456789abcdef"}
	for name, cfg := range map[string]Config{
		"no transport":   {Self: good},
		"bad host id":    {Self: NodeState{HostID: "0123456789ABCDEF0123456789ABCDEF"}, Transport: ep},
		"short host id":  {Self: NodeState{HostID: "abc"}, Transport: ep},
		"unknown status": {Self: NodeState{HostID: good.HostID, Status: "x"}, Transport: ep},
		"negative phi":   {Self: good, Transport: ep, PhiConvictThreshold: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	g, err := New(Config{Self: good, Transport: ep, Seeds: []transport.Addr{"127.0.0.1:7000"}})
	if err != nil {
		t.Fatal(err)
	}
	s := g.Self()
	if s.Addr != ep.Addr() || s.Status != StatusNormal || s.Generation <= 0 {
		t.Errorf("defaults not applied: %+v", s)
	}
	if len(g.seeds) != 0 {
		t.Errorf("own address kept among seeds: %v", g.seeds)
	}
	if n := g.Nodes(); len(n) != 1 || !n[0].Up || n[0].HostID != good.HostID {
		t.Errorf("a new gossiper's Nodes() = %+v, want itself up", n)
	}
	// A lone seed with no other seed gossips with nobody and convicts nobody.
	g.Round(context.Background())
}

func TestHandleRejectsBadMessages(t *testing.T) {
	c := newCluster(t, testseed.Rand(t), 2, 1, 0)
	g := c.nodes[0].g
	ctx := context.Background()
	for _, m := range []transport.Message{
		{Type: TypeSyn, Body: []byte{1, 3}},
		{Type: TypeAck2, Body: nil},
		{Type: TypeShutdown, Body: encodeStates(nil)},                              // no state
		{Type: TypeShutdown, Body: encodeStates([]NodeState{c.nodes[1].g.Self()})}, // not shutdown
		{Type: 9, Body: encodeStates(nil)},
	} {
		if _, err := g.Handle(ctx, "127.0.0.9:7000", m); err == nil {
			t.Errorf("Handle accepted type %d body %x", m.Type, m.Body)
		}
	}
	if len(g.Nodes()) != 1 {
		t.Errorf("bad messages taught the gossiper nodes: %v", g.Nodes())
	}
	for typ := range transport.Type(20) {
		if want := typ >= 1 && typ <= 15; IsGossipType(typ) != want {
			t.Errorf("IsGossipType(%d) = %v", typ, !want)
		}
	}
}

// TestIgnoresOwnAndStaleStates: a gossiper never adopts a state of its own
// host id, ignores older states of a peer, and ignores a generation
// implausibly far ahead.
func TestIgnoresOwnAndStaleStates(t *testing.T) {
	c := newCluster(t, testseed.Rand(t), 2, 1, 0)
	c.until(maxConvergeRounds, "converge", c.converged)
	a, b := c.nodes[0], c.nodes[1]
	ctx := context.Background()
	send := func(s NodeState) {
		t.Helper()
		if _, err := a.g.Handle(ctx, b.addr, transport.Message{Type: TypeAck2, Body: encodeStates([]NodeState{s})}); err != nil {
			t.Fatal(err)
		}
	}
	self := a.g.Self()
	forged := self
	forged.Version += 100
	forged.Tokens = []int64{1}
	send(forged)
	if got := a.g.Self(); got.Version != self.Version || len(got.Tokens) == 1 {
		t.Errorf("adopted a forged state of itself: %+v", got)
	}
	if n := a.g.Nodes(); len(n) != 2 {
		t.Errorf("a forged state of itself made it know %d nodes", len(n))
	}
	known, _ := a.g.Node(b.id)
	stale := known.NodeState
	stale.Version--
	stale.Tokens = []int64{2}
	send(stale)
	far := known.NodeState
	far.Generation += maxGenerationJump + 1
	far.Tokens = []int64{3}
	send(far)
	if n, _ := a.g.Node(b.id); n.Version != known.Version || n.Generation != known.Generation || len(n.Tokens) == 1 {
		t.Errorf("adopted a stale or implausible state: %+v", n.NodeState)
	}
}

// TestLossyLinks: with a random third of the directed links dropping
// everything (requests and responses, so some ACKs and ACK2s are lost),
// the cluster still converges, through the links that work.
func TestLossyLinks(t *testing.T) {
	r := testseed.Rand(t)
	c := newCluster(t, r, 6, 2, 0)
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			// Keep every link to and from the first seed, so the graph
			// stays connected.
			if a != b && a.i != 0 && b.i != 0 && r.IntN(3) == 0 {
				c.net.setDrop(a.addr, b.addr, true)
			}
		}
	}
	n := c.until(30, "converge over lossy links", func() bool {
		for _, a := range c.nodes {
			if len(a.g.Nodes()) != 6 {
				return false
			}
		}
		return true
	})
	t.Logf("all nodes known everywhere after %d rounds", n)
	// Gossip carries heartbeats around the broken links: nobody is
	// convicted.
	for range 60 {
		c.step()
	}
	if !c.converged() {
		t.Fatalf("a node is down with lossy but connected links\n%s", c.dump())
	}
}

// TestStartStopRealClock runs two gossipers on the real clock and waits for
// events, not for time.
func TestStartStopRealClock(t *testing.T) {
	r := testseed.Rand(t)
	net := newFakeNet()
	var gs [2]*Gossiper
	events := [2]chan Event{make(chan Event, 16), make(chan Event, 16)}
	for i := range gs {
		addr := transport.Addr([]string{"127.0.0.1:7000", "127.0.0.2:7000"}[i])
		ep := net.endpoint(addr)
		g, err := New(Config{
			Self:      NodeState{HostID: randHostID(r)},
			Seeds:     []transport.Addr{"127.0.0.1:7000"},
			Transport: ep,
			Interval:  5 * time.Millisecond,
			// Never convict on a busy machine: the test is about the loop.
			PhiConvictThreshold: 1e9,
			Rand:                newTestRand(r.Uint64()),
		})
		if err != nil {
			t.Fatal(err)
		}
		ep.handler = g.Handle
		ch := events[i]
		g.Subscribe(func(e Event) { ch <- e })
		gs[i] = g
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wait := func(i int, kind EventKind) {
		t.Helper()
		for {
			select {
			case e := <-events[i]:
				if e.Kind == kind {
					return
				}
			case <-ctx.Done():
				t.Fatalf("node %d: no %v event", i, kind)
			}
		}
	}
	gs[0].Start()
	gs[1].Start()
	gs[1].Start() // a second Start does nothing
	wait(0, EventJoined)
	wait(1, EventJoined)
	gs[1].Stop(ctx)
	wait(0, EventDown)
	if n, _ := gs[0].Node(gs[1].Self().HostID); n.Up || n.Status != StatusShutdown {
		t.Errorf("after Stop the peer sees %+v up=%v", n.NodeState, n.Up)
	}
	gs[0].Stop(ctx)
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("Stop did not return in time")
	}
}

// TestLocalPause: after the whole process stood still (virtual time jumps
// 30 s between two rounds), nobody is convicted: the silence was local.
func TestLocalPause(t *testing.T) {
	c := newCluster(t, testseed.Rand(t), 5, 1, 0)
	c.until(maxConvergeRounds, "converge", c.converged)
	for range 10 {
		c.step()
	}
	c.clock.Advance(30 * time.Second)
	for range 20 {
		c.step()
	}
	for _, a := range c.nodes {
		for _, e := range a.events {
			if e.Kind == EventDown {
				t.Errorf("node %d convicted %s after a local pause", a.i, e.Node.HostID[:6])
			}
		}
	}
}
