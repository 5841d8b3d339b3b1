package coordinator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/row"
)

// TestHintExpiry: a hint older than its table's gc_grace_seconds is dropped
// at delivery, counted, and never reaches the target; younger hints, and
// hints of a table the grace function does not know, are delivered; the
// queue empties either way.
func TestHintExpiry(t *testing.T) {
	b := newHintBed(t)
	h, tr := b.h, b.tr
	now := time.Unix(1_700_000_000, 0)
	grace := map[uint64]time.Duration{1: time.Hour, 2: 0}
	h.SetExpiry(func(table uint64) (time.Duration, bool) { g, ok := grace[table]; return g, ok }, func() time.Time { return now })
	hint := func(table uint64, age time.Duration) int64 {
		t.Helper()
		ts := now.Add(-age).UnixMicro()
		if err := h.Store("aa", coltype.Mutation{Table: table, Key: []byte("k"), Cell: row.Cell{Column: "c", Value: []byte{0, 0}, Timestamp: ts}}); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	young := hint(1, 59*time.Minute)
	hint(1, 61*time.Minute)
	hint(2, time.Second)
	unknown := hint(3, 1000*time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	left, err := h.DeliverTo(ctx, "aa", oneTarget{addr: "peer:7000"}, tr)
	if err != nil || left != 0 {
		t.Fatalf("DeliverTo: left %d, %v", left, err)
	}
	got := b.delivered()
	slices.Sort(got)
	want := []int64{unknown, young}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered timestamps %v, want %v (the two expired hints must not be sent)", got, want)
	}
	if h.Expired() != 2 {
		t.Fatalf("Expired() = %d, want 2", h.Expired())
	}
}
