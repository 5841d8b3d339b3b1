package gossip

import (
	"context"
	"slices"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

const maxConvergeRounds = 12

func TestConverge(t *testing.T) {
	r := testseed.Rand(t)
	c := newCluster(t, r, 5, 1, 0)
	n := c.until(maxConvergeRounds, "5 nodes with 1 seed converge", c.converged)
	t.Logf("converged after %d rounds", n)
	if n < 2 {
		t.Fatalf("converged after %d rounds: nodes cannot know each other that fast", n)
	}
	for _, a := range c.nodes {
		nodes := a.g.Nodes()
		if len(nodes) != 5 {
			t.Fatalf("node %d knows %d nodes", a.i, len(nodes))
		}
		if !slices.IsSortedFunc(nodes, func(x, y Node) int { return cmpID(x.HostID, y.HostID) }) {
			t.Errorf("node %d: Nodes() not sorted by host id", a.i)
		}
		for _, n := range nodes {
			b := c.byID(n.HostID)
			want := b.g.Self()
			if n.Generation != want.Generation || !slices.Equal(n.Tokens, want.Tokens) ||
				n.Addr != b.addr || n.DC != want.DC || n.Rack != want.Rack || n.CQLAddr != want.CQLAddr ||
				n.Status != StatusNormal || n.SchemaVersion != "s1" || n.ReleaseVersion != "3.11.4" {
				t.Errorf("node %d sees %+v, want %+v", a.i, n.NodeState, want)
			}
			if byAddr, ok := a.g.NodeByAddr(b.addr); !ok || byAddr.HostID != b.id {
				t.Errorf("node %d: NodeByAddr(%s) = %v, %v", a.i, b.addr, byAddr.HostID, ok)
			}
			if !a.g.IsUp(b.id) {
				t.Errorf("node %d: IsUp(%s) false", a.i, b.id[:6])
			}
			if b != a && len(a.eventsAbout(b.id)) != 1 {
				t.Errorf("node %d: events about node %d: %v, want one Joined", a.i, b.i, a.eventsAbout(b.id))
			}
		}
	}
	// Nothing more happens in a healthy cluster: no Down in 60 rounds.
	for range 60 {
		c.step()
	}
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if b != a && len(a.eventsAbout(b.id)) != 1 {
				t.Errorf("healthy cluster: node %d has events about node %d: %v", a.i, b.i, a.eventsAbout(b.id))
			}
		}
	}
}

func cmpID(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (c *cluster) byID(id string) *tnode {
	for _, nd := range c.nodes {
		if nd.id == id {
			return nd
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

func TestJoinLater(t *testing.T) {
	r := testseed.Rand(t)
	c := newCluster(t, r, 5, 2, 0)
	late := c.nodes[4]
	c.crash(late) // not started yet, as far as the others know
	c.until(maxConvergeRounds, "4 nodes converge", c.converged)
	for range 5 {
		c.step()
	}
	c.start(late, tokensFor(r))
	c.until(maxConvergeRounds, "a late node joins", c.converged)
	for _, a := range c.nodes[:4] {
		evs := a.eventsAbout(late.id)
		if len(evs) != 1 || evs[0].Kind != EventJoined || !evs[0].Node.Up ||
			!slices.Equal(evs[0].Node.Tokens, late.g.Self().Tokens) {
			t.Errorf("node %d: events about the late node: %v, want one Joined with its tokens", a.i, evs)
		}
	}
	if got := len(late.events); got != 4 {
		t.Errorf("late node had %d events, want 4 Joined", got)
	}
}

func TestUpdateSelfPropagates(t *testing.T) {
	r := testseed.Rand(t)
	c := newCluster(t, r, 5, 1, 0)
	c.until(maxConvergeRounds, "converge", c.converged)
	x := c.nodes[r.IntN(5)]
	before := x.g.Self()
	x.g.UpdateSelf(func(s *NodeState) {
		s.SchemaVersion = "s2"
		s.Load = 12345
		s.Status = StatusLeaving
		s.Generation = 1 // ignored
	})
	after := x.g.Self()
	if after.Version != before.Version+1 || after.Generation != before.Generation || after.SchemaVersion != "s2" {
		t.Fatalf("UpdateSelf: %+v -> %+v", before, after)
	}
	n := c.until(maxConvergeRounds, "the change reaches everyone", func() bool {
		return c.everyone(x, func(n Node, ok bool) bool {
			return ok && n.SchemaVersion == "s2" && n.Load == 12345 && n.Status == StatusLeaving && n.Up
		})
	})
	t.Logf("change propagated in %d rounds", n)
	for _, a := range c.nodes {
		if a == x {
			continue
		}
		changed := 0
		for _, e := range a.eventsAbout(x.id) {
			if e.Kind == EventChanged {
				changed++
				if e.Node.SchemaVersion != "s2" {
					t.Errorf("node %d: Changed event with schema %q", a.i, e.Node.SchemaVersion)
				}
			}
		}
		if changed != 1 {
			t.Errorf("node %d: %d Changed events about node %d, want 1", a.i, changed, x.i)
		}
	}
}

func TestUpdateSelfPanicsOnBadState(t *testing.T) {
	c := newCluster(t, testseed.Rand(t), 1, 1, 0)
	defer func() {
		if recover() == nil {
			t.Fatal("UpdateSelf with an unknown status did not panic")
		}
	}()
	c.nodes[0].g.UpdateSelf(func(s *NodeState) { s.Status = "dancing" })
}

// TestCutAndHeal isolates one node: every other node convicts it, and
// marks it up again once its links return.
func TestCutAndHeal(t *testing.T) {
	r := testseed.Rand(t)
	c := newCluster(t, r, 5, 1, 0)
	c.until(maxConvergeRounds, "converge", c.converged)
	for range 20 {
		c.step()
	}
	x := c.nodes[r.IntN(5)]
	c.net.isolate(x.addr, true)
	down := c.until(60, "everyone convicts the isolated node", func() bool {
		return c.everyone(x, func(n Node, ok bool) bool { return ok && !n.Up })
	})
	t.Logf("isolated node %d convicted by all after %d rounds", x.i, down)
	// phi 8 with ~1s heartbeats takes about 8·ln10 ≈ 18 s of silence.
	if down < 10 {
		t.Errorf("convicted after %d rounds: faster than the threshold allows", down)
	}
	c.until(60, "the isolated node convicts everyone", func() bool {
		for _, n := range x.g.Nodes() {
			if n.HostID != x.id && n.Up {
				return false
			}
		}
		return true
	})
	c.net.isolate(x.addr, false)
	up := c.until(10, "everyone sees the healed node up", c.converged)
	t.Logf("healed node up everywhere after %d rounds", up)
	for _, a := range c.nodes {
		if a == x {
			continue
		}
		kinds := eventKinds(a.eventsAbout(x.id))
		if i := slices.Index(kinds, EventDown); i < 0 || !slices.Contains(kinds[i:], EventUp) {
			t.Errorf("node %d: events about the isolated node %v, want Down then Up", a.i, kinds)
		}
	}
}

func eventKinds(evs []Event) []EventKind {
	var out []EventKind
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

// TestConvictThreshold runs the same cluster, same seed, with thresholds 5
// and 12: the higher one takes longer to convict, and each observer
// convicts exactly when its phi first exceeds the threshold.
func TestConvictThreshold(t *testing.T) {
	seed := testseed.Seed(t)
	rounds := map[float64]int{}
	for _, phi := range []float64{5, 12} {
		r := newTestRand(seed)
		c := newCluster(t, r, 5, 1, phi)
		c.until(maxConvergeRounds, "converge", c.converged)
		for range 20 {
			c.step()
		}
		x := c.nodes[1]
		c.net.isolate(x.addr, true)
		n := 0
		for ; n < 100; n++ {
			allDown := true
			for _, a := range c.running() {
				if a == x {
					continue
				}
				nd, _ := a.g.Node(x.id)
				// Read right after the step, at the virtual time of
				// the failure detector's pass.
				if nd.Up && nd.Phi > phi {
					t.Fatalf("phi %v: node %d still sees node %d up with phi %.2f", phi, a.i, x.i, nd.Phi)
				}
				allDown = allDown && !nd.Up
			}
			if allDown {
				break
			}
			c.step()
		}
		for _, a := range c.running() {
			if a == x {
				continue
			}
			evs := a.eventsAbout(x.id)
			last := evs[len(evs)-1]
			if last.Kind != EventDown || !(last.Node.Phi > phi) {
				t.Errorf("phi %v: node %d: last event %v with phi %.2f, want Down above the threshold", phi, a.i, last, last.Node.Phi)
			}
		}
		rounds[phi] = n
		t.Logf("threshold %v: all convicted after %d rounds", phi, n)
	}
	if !(rounds[5] < rounds[12]) {
		t.Fatalf("threshold 5 took %d rounds, threshold 12 took %d: want fewer for 5", rounds[5], rounds[12])
	}
}

func TestStopAnnouncesShutdown(t *testing.T) {
	r := testseed.Rand(t)
	c := newCluster(t, r, 5, 1, 0)
	c.until(maxConvergeRounds, "converge", c.converged)
	x := c.nodes[r.IntN(5)]
	x.g.Stop(context.Background())
	x.running = false
	// At once, with no round in between.
	for _, a := range c.running() {
		n, ok := a.g.Node(x.id)
		if !ok || n.Up || n.Status != StatusShutdown || a.g.IsUp(x.id) {
			t.Errorf("node %d sees the stopped node as %+v up=%v", a.i, n.NodeState, n.Up)
		}
		if kinds := eventKinds(a.eventsAbout(x.id)); !slices.Equal(kinds, []EventKind{EventJoined, EventChanged, EventDown}) {
			t.Errorf("node %d: events %v, want joined, changed (status), down", a.i, kinds)
		}
	}
	v := x.g.Self().Version
	x.g.Round(context.Background())
	if x.g.Self().Version != v {
		t.Error("Round after Stop bumped the heartbeat")
	}
	x.running = true // its rounds are no-ops, but its Handle still answers
	for range 30 {
		c.step()
	}
	for _, a := range c.nodes {
		if a != x && a.g.IsUp(x.id) {
			t.Errorf("node %d sees the stopped node up again", a.i)
		}
	}
	x.g.Stop(context.Background()) // a second Stop does nothing
}

// TestRestart restarts a node with a higher generation and new tokens,
// once before and once after the others convicted it.
func TestRestart(t *testing.T) {
	for _, afterConviction := range []bool{false, true} {
		name := "quick"
		if afterConviction {
			name = "after-conviction"
		}
		t.Run(name, func(t *testing.T) {
			r := testseed.Rand(t)
			c := newCluster(t, r, 5, 1, 0)
			c.until(maxConvergeRounds, "converge", c.converged)
			for range 5 {
				c.step()
			}
			x := c.nodes[1+r.IntN(4)] // not the seed: it must learn the cluster anew from it
			old := x.g.Self()
			c.crash(x)
			if afterConviction {
				c.until(60, "the crashed node is convicted", func() bool {
					return c.everyone(x, func(n Node, ok bool) bool { return !n.Up })
				})
			} else {
				c.step()
			}
			tokens := tokensFor(r)
			c.start(x, tokens)
			if x.g.Self().Generation <= old.Generation {
				t.Fatalf("generation %d after restart, was %d", x.g.Self().Generation, old.Generation)
			}
			c.until(maxConvergeRounds, "the restarted node is seen everywhere", c.converged)
			for _, a := range c.running() {
				if a == x {
					continue
				}
				n, _ := a.g.Node(x.id)
				if !slices.Equal(n.Tokens, tokens) || n.Generation != x.g.Self().Generation {
					t.Errorf("node %d sees tokens %v gen %d, want %v gen %d", a.i, n.Tokens, n.Generation, tokens, x.g.Self().Generation)
				}
				kinds := eventKinds(a.eventsAbout(x.id))
				want := []EventKind{EventJoined, EventRestarted}
				if afterConviction {
					want = []EventKind{EventJoined, EventDown, EventRestarted, EventUp}
				}
				if !slices.Equal(kinds, want) {
					t.Errorf("node %d: events about the restarted node %v, want %v", a.i, kinds, want)
				}
				evs := a.eventsAbout(x.id)
				if re := evs[slices.Index(kinds, EventRestarted)]; !slices.Equal(re.Node.Tokens, tokens) || !re.Node.Up {
					t.Errorf("node %d: Restarted event carries %+v", a.i, re.Node)
				}
			}
			if got := len(x.events); got != 4 {
				t.Errorf("restarted node had %d events, want 4 Joined: %v", got, x.events)
			}
		})
	}
}

func TestAddrMatchesNode(t *testing.T) {
	r := testseed.Rand(t)
	c := newCluster(t, r, 4, 1, 0)
	c.until(maxConvergeRounds, "converge", c.converged)
	for _, a := range c.running() {
		for _, x := range c.nodes {
			n, ok := a.g.Node(x.id)
			addr, aok := a.g.Addr(x.id)
			if !ok || !aok || addr != n.Addr || addr == "" {
				t.Errorf("node %d: Addr(%s) = %q, %v; Node gives %q, %v", a.i, x.id, addr, aok, n.Addr, ok)
			}
		}
		if addr, ok := a.g.Addr("no-such-host"); ok || addr != "" {
			t.Errorf("node %d: Addr of an unknown host = %q, %v", a.i, addr, ok)
		}
	}
}
