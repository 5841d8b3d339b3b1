package coordinator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/ring"
)

// rfTables resolves every table to SimpleStrategy at one factor.
type rfTables int

func (t rfTables) Strategy(uint64) (ring.Strategy, error) {
	return ring.SimpleStrategy{RF: int(t)}, nil
}

// TestReplicasBefore: after a node joins, the replicas to ask about an op
// on a key are its natural replicas plus the one that lost it, and the key
// counts as moved exactly when its replicas changed, a gain alone (a ring
// smaller than the replication factor) included.
func TestReplicasBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	tokens := map[ring.Endpoint][]int64{}
	var eps []ring.Endpoint
	for i := range 4 {
		e := ring.Endpoint{ID: fmt.Sprintf("%032x", i+1)}
		eps = append(eps, e)
		tokens[e] = ring.RandomTokens(rng, 8)
	}
	build := func(n int) *ring.Metadata {
		m := map[ring.Endpoint][]int64{}
		for _, e := range eps[:n] {
			m[e] = tokens[e]
		}
		md, err := ring.NewMetadata(m)
		if err != nil {
			t.Fatal(err)
		}
		return md
	}
	ids := func(es []ring.Endpoint) []string {
		out := []string{}
		for _, e := range es {
			out = append(out, e.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct{ rf, before, after int }{{2, 3, 4}, {3, 2, 3}} {
		c := &Coordinator{cfg: Config{Tables: rfTables(tc.rf)}}
		s := ring.SimpleStrategy{RF: tc.rf}
		before, after := build(tc.before), build(tc.after)
		moved := 0
		for k := range 400 {
			u := coltype.Update{Table: 1, Key: fmt.Appendf(nil, "k%d", k)}
			token := ring.Token(u.Key)
			natural, was := s.Replicas(after, token), s.Replicas(before, token)
			ask, gotMoved := c.replicasBefore(u, natural, []*ring.Metadata{before})
			wantMoved := !slices.Equal(ids(natural), ids(was))
			if gotMoved != wantMoved {
				t.Fatalf("rf %d, %d→%d nodes, key %s: moved %v, want %v (replicas %v, before %v)", tc.rf, tc.before, tc.after, u.Key, gotMoved, wantMoved, ids(natural), ids(was))
			}
			union := ids(natural)
			for _, e := range was {
				if !slices.Contains(union, e.ID) {
					union = append(union, e.ID)
				}
			}
			slices.Sort(union)
			if got := ids(ask); !slices.Equal(got, union) {
				t.Fatalf("rf %d, key %s: asks %v, want %v", tc.rf, u.Key, got, union)
			}
			if !slices.Equal(ask[:len(natural)], natural) {
				t.Fatalf("rf %d, key %s: the natural replicas are not asked first in their order", tc.rf, u.Key)
			}
			if gotMoved {
				moved++
			}
		}
		if moved == 0 {
			t.Fatalf("rf %d, %d→%d nodes: no key moved", tc.rf, tc.before, tc.after)
		}
	}
}
