package node

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// TestStreamMessagesRoundTripAndRefuseGarbage: stream batches and pulls
// decode to what was encoded, and every truncation or random corruption of
// them is an error or a valid message, never a panic.
func TestStreamMessagesRoundTripAndRefuseGarbage(t *testing.T) {
	rows := []row.Row{
		{Key: row.Key{Token: ring.Token([]byte("a")), Partition: []byte("a")}, Cells: []row.Cell{{Column: "c", Timestamp: 7, Value: []byte{1, 2, 3}}}},
		{Key: row.Key{Token: ring.Token([]byte("b")), Partition: []byte("b")}, Cells: []row.Cell{{Column: "c", Tombstone: true, Timestamp: 9}, {Column: "d", Value: []byte{4}}}},
	}
	b, cells := encodeBatch(flagFlush, rows, 42)
	bt, err := decodeBatch(b)
	if err != nil || cells != 3 || bt.rows != 2 || bt.flags != flagFlush || !bytes.Equal(bt.last, []byte("b")) || len(bt.muts) != 3 {
		t.Fatalf("batch round trip: %+v, %v", bt, err)
	}
	if m := bt.muts[1]; m.Table != 42 || string(m.Key) != "b" || !m.Cell.Tombstone || m.Cell.Timestamp != 9 {
		t.Fatalf("second mutation = %+v", m)
	}
	after := row.Key{Token: ring.Token([]byte("k")), Partition: []byte("k")}
	p := encodePull(pullRequest{table: 42, start: -5, end: 9, limit: 512, after: &after})
	pr, err := decodePull(p)
	if err != nil || pr.table != 42 || pr.start != -5 || pr.end != 9 || pr.limit != 512 || pr.after == nil || string(pr.after.Partition) != "k" || pr.after.Token != after.Token {
		t.Fatalf("pull round trip: %+v, %v", pr, err)
	}
	for i := range len(b) {
		if _, err := decodeBatch(b[:i]); err == nil {
			t.Fatalf("batch truncated to %d bytes decoded", i)
		}
	}
	for i := range len(p) {
		if _, err := decodePull(p[:i]); err == nil {
			t.Fatalf("pull truncated to %d bytes decoded", i)
		}
	}
	if _, err := decodeBatch(append(bytes.Clone(b), 0)); err == nil {
		t.Fatal("batch with a trailing byte decoded")
	}
	if _, err := decodePull(encodePull(pullRequest{table: 1, limit: maxStreamPage + 1})); err == nil {
		t.Fatal("pull over the page bound decoded")
	}
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	for range 2000 {
		for _, msg := range [][]byte{b, p} {
			c := bytes.Clone(msg)
			for range 1 + rng.IntN(4) {
				c[rng.IntN(len(c))] = byte(rng.IntN(256))
			}
			_, _ = decodeBatch(c)
			_, _ = decodePull(c)
		}
	}
}
