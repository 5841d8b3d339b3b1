package resetcol

import (
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
)

// BenchmarkEncodeHotCell encodes a leader's blob of a hot cell as the
// latency benchmark leaves it between answers: three replicas, 50 ops in
// each outbox not yet acknowledged. Every write of the cell encodes it.
func BenchmarkEncodeHotCell(b *testing.B) {
	m := newMemColumn(b, 1)
	peers := []counters.ID{{1}, {2}, {3}}
	for range 50 {
		if _, err := m.col.Lead(m, coltype.Update{Table: 1, Key: []byte("k"), Column: "r", Delta: 1, Replicas: peers}); err != nil {
			b.Fatal(err)
		}
	}
	blob := m.blob(b, "k")
	if blob.Pending() != 100 {
		b.Fatalf("%d ops pending, want 100", blob.Pending())
	}
	enc, err := EncodeCell(blob)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("nil", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeCell(blob); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sized", func(b *testing.B) { // as a write does: its last size known
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AppendCell(make([]byte, 0, len(enc)+64), blob); err != nil {
				b.Fatal(err)
			}
		}
	})
}
