package coordinator

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/ring"
)

// TestOpLeader: the draw keyed by op id is the same whatever the order of
// the candidates (every coordinator computes it alike), spreads ops evenly
// over the replicas, and when a candidate leaves only the ops it led move.
func TestOpLeader(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	var cands []ring.Endpoint
	for i := 0; i < 3; i++ {
		cands = append(cands, ring.Endpoint{ID: fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())})
	}
	const n = 30000
	counts := map[string]int{}
	moved := 0
	for i := 0; i < n; i++ {
		var op [16]byte
		binary.BigEndian.PutUint64(op[:], rng.Uint64())
		binary.BigEndian.PutUint64(op[8:], uint64(i))
		l := opLeader(op, cands)
		if r := opLeader(op, []ring.Endpoint{cands[2], cands[0], cands[1]}); r.ID != l.ID {
			t.Fatalf("op %x: leader %s, %s with the candidates reordered", op, l.ID, r.ID)
		}
		counts[l.ID]++
		without := opLeader(op, cands[1:])
		if l.ID != cands[0].ID && without.ID != l.ID {
			moved++
		}
	}
	if moved != 0 {
		t.Fatalf("%d ops not led by the candidate that left moved", moved)
	}
	// Each share within 5 standard deviations of n/3 (σ ≈ 82).
	for _, e := range cands {
		if c := counts[e.ID]; c < n/3-410 || c > n/3+410 {
			t.Fatalf("candidate %s leads %d of %d ops, want about %d: %v", e.ID, c, n, n/3, counts)
		}
	}
}
