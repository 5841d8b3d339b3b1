package row

import (
	"bytes"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

func compose(keys [][]byte, desc []bool, column string) string {
	var b []byte
	for i, k := range keys {
		b = AppendComponent(b, k, desc[i])
	}
	return string(b) + column
}

// TestCompositeNamesOrderAndSplit: composite names sort as their
// components compare (reversed for a descending column, a prefix first),
// and split back into the components and the column.
func TestCompositeNamesOrderAndSplit(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	randKey := func() []byte {
		b := make([]byte, rng.IntN(4))
		for i := range b {
			b[i] = []byte{0x00, 0x01, 0x7f, 0xfe, 0xff}[rng.IntN(5)]
		}
		return b
	}
	for _, desc := range [][]bool{{false}, {true}, {false, true}, {true, false, true}} {
		type rowT struct {
			keys [][]byte
			name string
		}
		var rows []rowT
		for range 300 {
			keys := make([][]byte, len(desc))
			for i := range keys {
				keys[i] = randKey()
			}
			rows = append(rows, rowT{keys, compose(keys, desc, "c")})
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
		for i := 1; i < len(rows); i++ {
			a, b := rows[i-1].keys, rows[i].keys
			c := 0
			for k := range desc {
				if c = bytes.Compare(a[k], b[k]); c != 0 {
					if desc[k] {
						c = -c
					}
					break
				}
			}
			if c > 0 {
				t.Fatalf("seed %d desc %v: %x sorts before %x", seed, desc, a, b)
			}
		}
		for _, r := range rows {
			prefix, col, err := ClusteringPrefix(r.name, desc)
			if err != nil || col != "c" {
				t.Fatalf("seed %d: split %x: %q %v", seed, r.name, col, err)
			}
			got, err := Components(prefix, desc)
			if err != nil {
				t.Fatalf("seed %d: components %x: %v", seed, prefix, err)
			}
			for k := range got {
				if !bytes.Equal(got[k], r.keys[k]) {
					t.Fatalf("seed %d: component %d of %x = %x, want %x", seed, k, prefix, got[k], r.keys[k])
				}
			}
		}
	}
}

func TestColumnOfRefusesBadNames(t *testing.T) {
	for _, n := range []string{"", "abc", "a\x00", "a\x00\x02x"} {
		if _, err := ColumnOf(n, []bool{false}); err == nil {
			t.Errorf("ColumnOf(%q) split", n)
		}
	}
	if c, err := ColumnOf("plain", nil); err != nil || c != "plain" {
		t.Errorf("ColumnOf without clustering = %q, %v", c, err)
	}
}

func FuzzClusteringPrefix(f *testing.F) {
	f.Add("a\x00\x01c", uint8(1))
	f.Add("\xff\xfe\x00\x01", uint8(2))
	f.Add("\x00\xff\x00\x01x", uint8(1))
	f.Add("\x00\x00s", uint8(1))
	f.Add("\xff\xffs", uint8(5))
	f.Fuzz(func(t *testing.T, name string, n uint8) {
		desc := make([]bool, n%4)
		for i := range desc {
			desc[i] = (n>>(i+2))&1 == 1
		}
		prefix, col, err := ClusteringPrefix(name, desc)
		if err != nil {
			return
		}
		if prefix != "" && prefix == StaticPrefix(desc) {
			if prefix+col != name {
				t.Fatalf("static name %x split into %x and %q", name, prefix, col)
			}
			return // a static cell: no components
		}
		keys, err := Components(prefix, desc)
		if err != nil {
			t.Fatalf("prefix %x split but its components do not: %v", prefix, err)
		}
		if got := compose(keys, desc, col); got != name {
			t.Fatalf("round trip %x → %x", name, got)
		}
	})
}

// TestStaticNames: a static cell splits into the static prefix and its
// column, never into a row's components, and sorts before (ascending
// first column) or after (descending) every row.
func TestStaticNames(t *testing.T) {
	for _, desc := range [][]bool{{false}, {true}, {false, true}} {
		sp := StaticPrefix(desc)
		prefix, col, err := ClusteringPrefix(sp+"s", desc)
		if err != nil || prefix != sp || col != "s" {
			t.Fatalf("desc %v: static name splits into %q %q %v", desc, prefix, col, err)
		}
		for _, keys := range [][][]byte{{{}, {}}, {{0}, {0xff}}, {{0xff, 0xff}, {0}}, {{0, 0}, {1}}} {
			row := compose(keys[:len(desc)], desc, "c")
			if p, _, _ := ClusteringPrefix(row, desc); p == sp {
				t.Fatalf("desc %v: row %x reads as static", desc, row)
			}
			if (sp+"s" < row) == desc[0] {
				t.Fatalf("desc %v: static %x and row %x in the wrong order", desc, sp+"s", row)
			}
		}
	}
}
