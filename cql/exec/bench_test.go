package exec

import (
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// BenchmarkExecCounterUpdate: the executor's share of a prepared counter
// UPDATE (binding, checks, the write handed to a one-replica backend).
func BenchmarkExecCounterUpdate(b *testing.B) {
	h := newHarness(b)
	h.setup()
	out, err := h.e.Prepare(ctx, h.sess, `UPDATE ks.t SET c = c + ? WHERE k = ?`, nil)
	if err != nil {
		b.Fatal(err)
	}
	id := out.Result.(frame.PreparedResult).ID
	p := params(big(1), text_("k"))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := h.e.Execute(ctx, h.sess, id, p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecCounterSelect: the executor's share of a prepared SELECT of
// one counter partition.
func BenchmarkExecCounterSelect(b *testing.B) {
	h := newHarness(b)
	h.setup()
	h.query(`UPDATE ks.t SET c = c + 1, d = d + 2 WHERE k = 'k'`)
	out, err := h.e.Prepare(ctx, h.sess, `SELECT c, d FROM ks.t WHERE k = ?`, nil)
	if err != nil {
		b.Fatal(err)
	}
	id := out.Result.(frame.PreparedResult).ID
	p := params(text_("k"))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := h.e.Execute(ctx, h.sess, id, p, nil); err != nil {
			b.Fatal(err)
		}
	}
}
