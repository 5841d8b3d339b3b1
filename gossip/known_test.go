package gossip

import (
	"context"
	"testing"
	"time"

	"github.com/idemkv/idemkv/transport"
)

// TestKnownPeersAreContacted: a gossiper with no seed but a remembered peer
// starts knowing it Down with its remembered tokens, contacts it in its
// first round, and takes the peer's fresh state (a generation more than a
// year later) with the peer Up. Invalid and own remembered states are
// ignored.
func TestKnownPeersAreContacted(t *testing.T) {
	r := newTestRand(7)
	net := newFakeNet()
	clock := &vclock{t: epoch}
	mk := func(id string, addr transport.Addr, known []NodeState) *Gossiper {
		ep := net.endpoint(addr)
		g, err := New(Config{
			Self:      NodeState{HostID: id, Tokens: tokensFor(r), DC: "dc1", Rack: "r1"},
			Known:     known,
			Transport: ep, Interval: time.Second, Now: clock.Now, Rand: newTestRand(r.Uint64()),
		})
		if err != nil {
			t.Fatal(err)
		}
		ep.handler = g.Handle
		return g
	}
	aID, bID := randHostID(r), randHostID(r)
	b := mk(bID, "127.0.0.2:7000", nil)
	old := epoch.Add(-2 * 365 * 24 * time.Hour).UnixNano()
	known := []NodeState{
		{HostID: bID, Addr: "127.0.0.2:7000", Tokens: []int64{1, 2}, Status: StatusShutdown, Generation: old, DC: "dc1", Rack: "r1"},
		{HostID: aID, Addr: "127.0.0.9:7000", Status: StatusShutdown, Generation: old},           // self: ignored
		{HostID: "not-hex", Addr: "127.0.0.3:7000", Status: StatusShutdown, Generation: old},     // invalid: ignored
		{HostID: bID, Addr: "127.0.0.4:7000", Status: StatusShutdown, Generation: old},           // duplicate: ignored
		{HostID: randHostID(r), Addr: "127.0.0.5:7000", Status: StatusShutdown, Generation: old}, // valid, never answers
	}
	a := mk(aID, "127.0.0.1:7000", known)
	nodes := a.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("a knows %d nodes, want itself and the two valid remembered peers: %+v", len(nodes), nodes)
	}
	if n, ok := a.Node(bID); !ok || n.Up || len(n.Tokens) != 2 || n.Addr != "127.0.0.2:7000" {
		t.Fatalf("remembered b before any round: %+v, %v; want down, with its remembered tokens", n, ok)
	}
	for i := 0; i < 10 && !a.IsUp(bID); i++ {
		clock.Advance(time.Second)
		a.Round(context.Background())
	}
	n, _ := a.Node(bID)
	if !n.Up || n.Generation == old || len(n.Tokens) != 4 {
		t.Fatalf("b after a's rounds: %+v; want up, with its fresh generation and tokens", n)
	}
	if !b.IsUp(aID) {
		t.Fatal("b did not learn a from a's exchange")
	}
}
