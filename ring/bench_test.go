package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchRing is a 10-node ring with DefaultNumTokens vnodes each: two data
// centers of 5 nodes over 3 racks each, from a fixed seed.
func benchRing(b *testing.B) (*Metadata, []int64) {
	rng := rand.New(rand.NewPCG(42, 42))
	m := randomRing(b, rng, 2, 3, 5, DefaultNumTokens)
	keys := make([]int64, 4096)
	for i := range keys {
		keys[i] = Token(fmt.Appendf(nil, "key-%d", i))
	}
	return m, keys
}

func benchReplicas(b *testing.B, s Strategy) {
	m, keys := benchRing(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if r := s.Replicas(m, keys[i&(len(keys)-1)]); len(r) == 0 {
			b.Fatal("no replicas")
		}
		i++
	}
}

// BenchmarkReplicasSimpleRF3: SimpleStrategy RF 3 on 10 nodes × 16 vnodes.
func BenchmarkReplicasSimpleRF3(b *testing.B) { benchReplicas(b, SimpleStrategy{RF: 3}) }

// BenchmarkReplicasNTS: NetworkTopologyStrategy {dc1: 3, dc2: 3} on 10 nodes
// (5 per data center, 3 racks each) × 16 vnodes.
func BenchmarkReplicasNTS(b *testing.B) {
	benchReplicas(b, NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3, "dc2": 3}})
}

// BenchmarkReplicasNTSOneDC: NetworkTopologyStrategy {dc1: 3} on the same ring.
func BenchmarkReplicasNTSOneDC(b *testing.B) {
	benchReplicas(b, NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3}})
}

// BenchmarkPrimary: the binary search alone.
func BenchmarkPrimary(b *testing.B) {
	m, keys := benchRing(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = m.Primary(keys[i&(len(keys)-1)])
		i++
	}
}
