package gossip

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/transport"
)

// vclock is the tests' virtual time.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *vclock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// tnode is one node of a test cluster.
type tnode struct {
	i       int
	id      string
	addr    transport.Addr
	tr      transport.Transport
	g       *Gossiper
	running bool // takes part in rounds

	mu     sync.Mutex
	events []Event
}

func (n *tnode) eventsAbout(id string) []Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []Event
	for _, e := range n.events {
		if e.Node.HostID == id {
			out = append(out, e)
		}
	}
	return out
}

// cluster is a set of gossipers on a network in virtual time. A step is one
// interval (default a second), then one round of every running node, in a random order, all at
// that instant.
type cluster struct {
	t        testing.TB
	r        *rand.Rand
	clock    *vclock
	net      *fakeNet
	interval time.Duration // of a step, and the gossipers' Interval
	// listen attaches a node's endpoint to the network (default: net).
	listen func(addr transport.Addr, h transport.Handler) transport.Transport
	seeds  []transport.Addr
	phi    float64
	nodes  []*tnode
	steps  int
}

func newCluster(t testing.TB, r *rand.Rand, n, nSeeds int, phi float64) *cluster {
	c := newClusterOn(t, r, n, nSeeds, phi, time.Second, nil)
	return c
}

// newClusterOn builds a cluster whose nodes listen through listen (nil: an
// in-package fakeNet) and take a step every interval.
func newClusterOn(t testing.TB, r *rand.Rand, n, nSeeds int, phi float64, interval time.Duration,
	listen func(transport.Addr, transport.Handler) transport.Transport) *cluster {
	c := &cluster{t: t, r: r, clock: &vclock{t: epoch}, net: newFakeNet(), phi: phi, interval: interval, listen: listen}
	if c.listen == nil {
		c.listen = func(a transport.Addr, h transport.Handler) transport.Transport {
			ep := c.net.endpoint(a)
			ep.handler = h
			return ep
		}
	}
	for i := range n {
		nd := &tnode{i: i, id: randHostID(r), addr: transport.Addr(fmt.Sprintf("127.0.0.%d:7000", i+1))}
		c.nodes = append(c.nodes, nd)
		if i < nSeeds {
			c.seeds = append(c.seeds, nd.addr)
		}
	}
	for _, nd := range c.nodes {
		c.start(nd, tokensFor(r))
	}
	t.Cleanup(c.checkEvents)
	return c
}

func tokensFor(r *rand.Rand) []int64 {
	ts := make([]int64, 4)
	for i := range ts {
		ts[i] = int64(r.Uint64())
	}
	return ts
}

// start (re)starts node nd as a new process: a fresh endpoint and a fresh
// gossiper whose generation is the virtual time.
func (c *cluster) start(nd *tnode, tokens []int64) {
	c.t.Helper()
	var gp atomic.Pointer[Gossiper]
	nd.tr = c.listen(nd.addr, func(ctx context.Context, from transport.Addr, m transport.Message) (transport.Message, error) {
		g := gp.Load()
		if g == nil {
			return transport.Message{}, errors.New("starting")
		}
		return g.Handle(ctx, from, m)
	})
	g, err := New(Config{
		Self: NodeState{
			HostID: nd.id, CQLAddr: fmt.Sprintf("127.0.0.%d:9042", nd.i+1),
			DC: "dc1", Rack: fmt.Sprintf("rack%d", nd.i%3), Tokens: tokens,
			SchemaVersion: "s1", ReleaseVersion: "3.11.4",
		},
		Seeds:               c.seeds,
		Transport:           nd.tr,
		Interval:            c.interval,
		PhiConvictThreshold: c.phi,
		Now:                 c.clock.Now,
		Rand:                rand.New(rand.NewPCG(c.r.Uint64(), c.r.Uint64())),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	gp.Store(g)
	nd.g = g
	nd.running = true
	nd.mu.Lock()
	nd.events = nil
	nd.mu.Unlock()
	g.Subscribe(func(e Event) {
		nd.mu.Lock()
		defer nd.mu.Unlock()
		nd.events = append(nd.events, e)
	})
}

// crash stops node nd without announcing anything.
func (c *cluster) crash(nd *tnode) {
	nd.running = false
	nd.tr.Close()
}

func (c *cluster) step() {
	c.clock.Advance(c.interval)
	order := slices.Clone(c.nodes)
	c.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, nd := range order {
		if nd.running {
			nd.g.Round(context.Background())
		}
	}
	c.steps++
}

// until steps until cond holds, at most max steps, and returns the number
// of steps taken.
func (c *cluster) until(max int, what string, cond func() bool) int {
	c.t.Helper()
	for n := 0; ; n++ {
		if cond() {
			return n
		}
		if n == max {
			c.t.Fatalf("%s: not after %d rounds\n%s", what, max, c.dump())
		}
		c.step()
	}
}

func (c *cluster) running() []*tnode {
	var out []*tnode
	for _, nd := range c.nodes {
		if nd.running {
			out = append(out, nd)
		}
	}
	return out
}

// converged: every running node knows every running node, up, at the
// state that node has now.
func (c *cluster) converged() bool {
	for _, a := range c.running() {
		for _, b := range c.running() {
			n, ok := a.g.Node(b.id)
			if !ok || !n.Up || n.Generation != b.g.Self().Generation {
				return false
			}
		}
	}
	return true
}

// everyone reports whether every running node but skip satisfies f about
// node id.
func (c *cluster) everyone(skip *tnode, f func(n Node, ok bool) bool) bool {
	for _, a := range c.running() {
		if a == skip {
			continue
		}
		if n, ok := a.g.Node(skip.id); !f(n, ok) {
			return false
		}
	}
	return true
}

func (c *cluster) dump() string {
	s := fmt.Sprintf("after %d rounds:\n", c.steps)
	for _, a := range c.nodes {
		s += fmt.Sprintf("  node %d %s running=%v:", a.i, a.id[:6], a.running)
		for _, n := range a.g.Nodes() {
			s += fmt.Sprintf(" %s[g%d v%d up=%v %s φ=%.1f]", n.HostID[:6], n.Generation%1000, n.Version, n.Up, n.Status, n.Phi)
		}
		s += "\n"
	}
	return s
}

// checkEvents checks every node's events against its final view: per peer,
// Joined comes first and once per generation run, Up and Down alternate, and
// the liveness the events imply is the one Node reports.
func (c *cluster) checkEvents() {
	for _, a := range c.nodes {
		for _, n := range a.g.Nodes() {
			if n.HostID == a.id {
				continue
			}
			evs := a.eventsAbout(n.HostID)
			if len(evs) == 0 {
				c.t.Errorf("node %d: no event about %s, which it knows", a.i, n.HostID[:6])
				continue
			}
			if evs[0].Kind != EventJoined {
				c.t.Errorf("node %d: first event about %s is %v", a.i, n.HostID[:6], evs[0])
			}
			up := evs[0].Node.Up
			for _, e := range evs[1:] {
				switch e.Kind {
				case EventJoined:
					c.t.Errorf("node %d: second Joined for %s", a.i, n.HostID[:6])
				case EventUp:
					if up {
						c.t.Errorf("node %d: Up for %s, already up", a.i, n.HostID[:6])
					}
					up = true
				case EventDown, EventLeft:
					if !up {
						c.t.Errorf("node %d: %v for %s, already down", a.i, e.Kind, n.HostID[:6])
					}
					up = false
				case EventRestarted:
					continue // carries the new liveness; an Up or Down follows if it changed
				}
				if e.Node.Up != up {
					c.t.Errorf("node %d: event %v carries Up=%v", a.i, e, e.Node.Up)
				}
			}
			if up != n.Up {
				c.t.Errorf("node %d: events about %s leave it up=%v, Node says %v", a.i, n.HostID[:6], up, n.Up)
			}
		}
	}
}
