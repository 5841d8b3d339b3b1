package localring

import (
	"testing"

	"github.com/idemkv/idemkv/counters"
)

func counterValue(t *testing.T, b []byte) int64 {
	t.Helper()
	c, err := counters.Decode(b)
	if err != nil {
		t.Fatalf("counter cell: %v", err)
	}
	return c.Value()
}
