package handoff

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

func TestMapOfCounters(t *testing.T) {
	s0, s1 := NewMap(tid(1), 0), NewMap(tid(2), 0)
	a, b := NewMap(tid(10), 1), NewMap(tid(11), 1)
	a.Incr("likes")
	a.Incr("likes")
	a.Incr("views")
	b.Add("views", 10)
	b.Add("none", 0)
	if a.Fetch("likes") != 2 || a.Fetch("views") != 1 || b.Fetch("none") != 0 {
		t.Fatalf("local fetches: %v %v", a.FetchAll(), b.FetchAll())
	}
	for range 3 { // a hands off to s0, b to s1, the servers gossip
		s0.Merge(a.View(s0.ID(), 0))
		a.Merge(s0.View(a.ID(), 1))
		s1.Merge(b.View(s1.ID(), 0))
		b.Merge(s1.View(b.ID(), 1))
		s0.Merge(s1)
		s1.Merge(s0)
	}
	want := Counts{"likes": 2, "views": 11}
	for _, m := range []*Map{s0, s1, a, b} {
		if !maps.Equal(m.FetchAll(), want) {
			t.Errorf("node %v fetches %v, want %v", m.ID(), m.FetchAll(), want)
		}
	}
	if !a.Handed() || !b.Handed() || s0.Slots()+s1.Slots() != 0 {
		t.Errorf("handoff incomplete: a %v b %v slots %d", a.Handed(), b.Handed(), s0.Slots()+s1.Slots())
	}
}

func TestPNCounter(t *testing.T) {
	s, c := NewPNCounter(tid(1), 0), NewPNCounter(tid(10), 1)
	c.Incr()
	c.Decr()
	c.Decr()
	c.Add(-5)
	c.Add(2)
	if c.Fetch() != -4 {
		t.Fatalf("local fetch %d, want -4", c.Fetch())
	}
	for range 2 {
		s.Merge(c)
		c.Merge(s)
	}
	if s.Fetch() != -4 || !c.Handed() || s.Slots() != 0 || s.Pending() != (PN{3, 7}) {
		t.Fatalf("server fetch %d pending %+v, client handed %v", s.Fetch(), s.Pending(), c.Handed())
	}
	var min PNCounter
	min.State = *Init[PN](tid(2), 1)
	min.Add(-1 << 63)
	if min.Fetch() != -1<<63 {
		t.Fatalf("Add(MinInt64): %d", min.Fetch())
	}
}

// TestRandomGeneral runs a smaller randomized check of the map of counters
// and the PN-counter: 3 tier-0 nodes and 4 tier-1 clients each linked to
// two of them, random inflations, merges of current and old states, then
// gossip until quiescent. Every fetch must stay within what was issued
// (pointwise) and end equal to it, with no slot or token left.
func TestRandomGeneral(t *testing.T) {
	seed := testseed.Seed(t)
	keys := []string{"a", "b", "c"}
	t.Run("map", func(t *testing.T) {
		randomGeneral(t, rand.New(rand.NewPCG(seed, 2)),
			func(r *rand.Rand) Counts { return Counts{keys[r.IntN(len(keys))]: 1 + uint64(r.IntN(3))} },
			func(a, b Counts) bool {
				for k, v := range a {
					if v > b[k] {
						return false
					}
				}
				return true
			})
	})
	t.Run("pn", func(t *testing.T) {
		randomGeneral(t, rand.New(rand.NewPCG(seed, 3)),
			func(r *rand.Rand) PN {
				if r.IntN(2) == 0 {
					return PN{P: 1}
				}
				return PN{N: 1}
			},
			func(a, b PN) bool { return a.P <= b.P && a.N <= b.N })
	})
}

func randomGeneral[V Value[V]](t *testing.T, r *rand.Rand, delta func(*rand.Rand) V, leq func(a, b V) bool) {
	type node struct {
		s    *State[V]
		old  []*State[V]
		nbrs []int
	}
	var nodes []*node
	for k := range 7 {
		tier := 0
		if k >= 3 {
			tier = 1
		}
		nodes = append(nodes, &node{s: Init[V](tid(byte(k)), tier)})
	}
	link := func(a, b int) {
		nodes[a].nbrs = append(nodes[a].nbrs, b)
		nodes[b].nbrs = append(nodes[b].nbrs, a)
	}
	link(0, 1)
	link(1, 2)
	link(0, 2)
	for k := 3; k < 7; k++ {
		a := r.IntN(3)
		link(k, a)
		link(k, (a+1)%3)
	}
	var issued V
	eq := func(a, b V) bool { return leq(a, b) && leq(b, a) }
	send := func(from, to int, st *State[V]) {
		if r.IntN(2) == 0 {
			st = st.View(nodes[to].s.id, nodes[to].s.tier)
		}
		nodes[to].s.Merge(st)
	}
	for step := range 20_000 {
		k := r.IntN(len(nodes))
		n := nodes[k]
		switch w := r.IntN(10); {
		case w < 3:
			d := delta(r)
			n.s.Inflate(d)
			issued = issued.add(d)
		case w < 9:
			send(k, n.nbrs[r.IntN(len(n.nbrs))], n.s)
			n.old = append(n.old, n.s.Clone())
			if len(n.old) > 4 {
				n.old = n.old[1:]
			}
		default:
			if len(n.old) > 0 {
				send(k, n.nbrs[r.IntN(len(n.nbrs))], n.old[r.IntN(len(n.old))])
			}
		}
		for i, n := range nodes {
			if !leq(n.s.Fetch(), issued) {
				t.Fatalf("step %d: node %d fetches %v, more than issued %v", step, i, n.s.Fetch(), issued)
			}
		}
	}
	for round := range 30 {
		done := true
		for _, n := range nodes {
			if !eq(n.s.Fetch(), issued) || n.s.Slots() != 0 || n.s.Tokens() != 0 || n.s.tier > 0 && !n.s.Pending().isZero() {
				done = false
			}
		}
		if done {
			t.Logf("issued %v; quiescent after %d rounds", issued, round)
			return
		}
		for k, n := range nodes {
			for _, to := range n.nbrs {
				send(k, to, n.s)
			}
		}
	}
	for i, n := range nodes {
		t.Logf("node %d: fetch %v slots %d tokens %d", i, n.s.Fetch(), n.s.Slots(), n.s.Tokens())
	}
	t.Fatalf("not quiescent; issued %v", issued)
}
