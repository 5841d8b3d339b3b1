package handoff

import (
	"bytes"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// reachable returns states reached in checker runs (the pool for view,
// encoding and fuzz tests), with each state's node set for views.
func reachable(t testing.TB, seed uint64, runs, steps, every int) []*State[Count] {
	t.Helper()
	var pool []*State[Count]
	for k := range runs {
		s := newSim(seed+uint64(k), checkerConfig{steps: steps})
		for s.step = 0; s.step < steps; s.step++ {
			if err := s.randomStep(); err != nil {
				t.Fatal(err)
			}
			if s.step%every == 0 {
				for _, n := range s.nodes {
					pool = append(pool, n.mem.Clone())
				}
			}
		}
	}
	return pool
}

// TestViewMergesLikeFullState: for reachable states C_i and C_j of different
// nodes, merge(C_j, view(C_i, j)) equals merge(C_j, C_i), but for one case
// the paper's view accepts: C_j caches a token from a third node for C_i,
// and the view omits C_i's slot for that third node; C_j may then drop its
// cached copy early (the source, or its retirement notice, still holds the
// token, so nothing is lost).
// The run also checks that a view is smaller than the state when it can be.
func TestViewMergesLikeFullState(t *testing.T) {
	seed := testseed.Seed(t)
	var pairs, equal, cachedCopy, smaller int
	// States are paired within one run only: node ids repeat across runs
	// with other tiers and histories, and a pair from two runs is no state
	// the algorithm can reach.
	for run := uint64(0); run < 4; run++ {
		pool := reachable(t, seed+run, 1, 3000, 250)
		for _, ci := range pool {
			for _, cj := range pool {
				if ci.id == cj.id {
					continue
				}
				pairs++
				full, viewed := cj.Clone(), cj.Clone()
				full.Merge(ci)
				v := ci.View(cj.id, cj.tier)
				if len(enc(t, v)) < len(enc(t, ci)) {
					smaller++
				}
				viewed.Merge(v)
				a, b := enc(t, full), enc(t, viewed)
				if bytes.Equal(a, b) {
					equal++
					continue
				}
				// The allowed difference: only tokens, only cached ones
				// (src ≠ j) addressed to i, and only missing from the view's result.
				for k := range full.tokens {
					if _, ok := viewed.tokens[k]; !ok {
						if k.Dst != ci.id || k.Src == cj.id {
							t.Fatalf("view merge dropped token %v: i %+v j %+v", k, ci, cj)
						}
						delete(full.tokens, k)
					}
				}
				if !bytes.Equal(enc(t, full), b) {
					t.Fatalf("merge of a view differs from merge of the state:\ni %+v\nj %+v\nfull %+v\nview %+v", ci, cj, full, viewed)
				}
				cachedCopy++
			}
		}
	}
	t.Logf("%d pairs: %d identical merges, %d that dropped a cached token copy early; %d views smaller than the state", pairs, equal, cachedCopy, smaller)
	if equal == 0 || smaller == 0 {
		t.Fatal("the pool exercised nothing")
	}
}

// TestViewOfBusyServer: a tier-0 node holding a slot per client sends each
// client only that client's slot, and every slot to a tier-0 peer.
func TestViewOfBusyServer(t *testing.T) {
	srv := NewCounter(tid(0), 0)
	for k := range 100 {
		c := NewCounter(tid(byte(10+k)), 1)
		c.Incr()
		srv.Merge(c)
	}
	if srv.Slots() != 100 {
		t.Fatalf("%d slots", srv.Slots())
	}
	v := srv.View(tid(10), 1)
	if v.Slots() != 1 || v.slots[tid(10)] != srv.slots[tid(10)] {
		t.Fatalf("view for a client: %v", v.slots)
	}
	if v := srv.View(tid(200), 1); v.Slots() != 0 {
		t.Fatalf("view for a client without a slot: %v", v.slots)
	}
	if v := srv.View(tid(1), 0); v.Slots() != 100 {
		t.Fatalf("view for a tier-0 peer: %d slots", v.Slots())
	}
	full, _ := srv.MarshalBinary()
	small, _ := srv.View(tid(10), 1).MarshalBinary()
	t.Logf("full state %d bytes, view for one client %d bytes", len(full), len(small))
	if len(small) > 64 {
		t.Fatalf("view for one client is %d bytes", len(small))
	}
	// A client sends a server no slots and only its tokens.
	c := NewCounter(tid(10), 1)
	c.Add(3)
	c.Merge(srv.View(c.ID(), 1))
	if c.Tokens() != 1 {
		t.Fatalf("client did not create a token: %v", c.tokens)
	}
	if v := c.View(srv.ID(), 0); v.Tokens() != 1 || v.Slots() != 0 {
		t.Fatalf("client's view for its server: %+v", v)
	}
	srv.Merge(c.View(srv.ID(), 0))
	if srv.Fetch() != 3 || srv.Slots() != 99 {
		t.Fatalf("server after the handoff: fetch %d, %d slots", srv.Fetch(), srv.Slots())
	}
}

func TestTokenDestinations(t *testing.T) {
	var a, b, c ID
	a[0], b[0], c[0] = 1, 2, 3
	cl := NewCounter(c, 1)
	sa, sb := NewCounter(a, 0), NewCounter(b, 0)
	if len(cl.TokenDestinations()) != 0 {
		t.Fatal("a fresh state has token destinations")
	}
	cl.Add(2)
	sb.Merge(cl.View(b, 0))
	cl.Merge(sb.View(c, 1)) // token for b
	cl.Add(1)
	sa.Merge(cl.View(a, 0))
	cl.Merge(sa.View(c, 1)) // token for a
	if got := cl.TokenDestinations(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("destinations %v, want [a b]", got)
	}
	sa.Merge(cl.View(a, 0)) // a acquires
	sb.Merge(cl.View(b, 0)) // b acquires, and caches the client's token for a
	cl.Merge(sa.View(c, 1)) // the client hears from a only
	if got := cl.TokenDestinations(); len(got) != 1 || got[0] != b {
		t.Fatalf("after hearing from a: %v, want [b]", got)
	}
	if got := sb.TokenDestinations(); len(got) != 0 {
		t.Fatalf("a server's cached tokens are not its own: %v", got)
	}
}
