package replica

import (
	"testing"

	_ "github.com/idemkv/idemkv/coltype/builtin" // the counter designs the tests use

	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/row"
)

func cellOf(col string, v []byte) row.Cell { return row.Cell{Column: col, Value: v, Timestamp: 1} }

func encodeShard(t testing.TB, id counters.ID, clock, count int64) []byte {
	t.Helper()
	b, err := counters.NewGlobal(id, clock, count).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
