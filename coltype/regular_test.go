package coltype

import (
	"bytes"
	"testing"

	"github.com/idemkv/idemkv/row"
)

// TestMergeLWW: the newer timestamp wins; on a tie a tombstone, then the
// greater value; the merge commutes.
func TestMergeLWW(t *testing.T) {
	cell := func(ts int64, v string, tomb bool) row.Cell {
		return row.Cell{Column: "c", Value: EncodeRegular([]byte(v), 0), Timestamp: ts, Tombstone: tomb}
	}
	for _, c := range []struct{ a, b, want row.Cell }{
		{cell(2, "a", false), cell(1, "z", false), cell(2, "a", false)},
		{cell(1, "a", false), cell(1, "", true), cell(1, "", true)},
		{cell(1, "a", false), cell(1, "b", false), cell(1, "b", false)},
		{cell(3, "a", false), cell(2, "", true), cell(3, "a", false)},
	} {
		for _, got := range []row.Cell{MergeLWW(c.a, c.b), MergeLWW(c.b, c.a)} {
			if got.Timestamp != c.want.Timestamp || got.Tombstone != c.want.Tombstone || !bytes.Equal(got.Value, c.want.Value) {
				t.Errorf("MergeLWW(%+v, %+v) = %+v, want %+v", c.a, c.b, got, c.want)
			}
		}
	}
}

// FuzzDecodeRegular: any bytes decode to a value and expiry or an error,
// and what encodes decodes back.
func FuzzDecodeRegular(f *testing.F) {
	f.Add([]byte{0, 'x'}, int64(0))
	f.Add([]byte{1, 0, 0, 0, 0, 0x65, 0x53, 0xf1, 0x00, 'y'}, int64(1700000000))
	f.Add([]byte{2}, int64(5))
	f.Fuzz(func(t *testing.T, b []byte, exp int64) {
		_, _, _, _ = DecodeRegular(b)
		if exp < 0 {
			exp = -exp
		}
		v, gotExp, has, err := DecodeRegular(EncodeRegular(b, exp))
		if err != nil || !bytes.Equal(v, b) || gotExp != exp || has != (exp != 0) {
			t.Fatalf("round trip of %x, %d: %x, %d, %v, %v", b, exp, v, gotExp, has, err)
		}
	})
}
