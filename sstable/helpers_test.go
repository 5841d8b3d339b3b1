package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/idemkv/idemkv/row"
)

// seedEnv fixes the seed of every seeded test of this package.
const seedEnv = "IDEMKV_SEED"

// testRand returns a generator seeded from IDEMKV_SEED, or from the clock;
// the seed is logged, and on failure so is the command that replays it.
func testRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: %s=%d go test ./sstable/ -run '^%s$'", seedEnv, seed, t.Name())
		}
	})
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

var testColumns = []string{"", "a", "b", "count", "handoff", "z"}

// randRow returns a row with random cells for key k: sometimes none,
// sometimes tombstones, and with large true sometimes values much larger
// than a block.
func randRow(rng *rand.Rand, k row.Key, large bool) row.Row {
	r := row.Row{Key: k}
	if rng.IntN(6) == 0 {
		return r // no cells
	}
	for _, col := range testColumns {
		if rng.IntN(3) != 0 {
			continue
		}
		c := row.Cell{Column: col, Timestamp: rng.Int64() - rng.Int64()}
		switch {
		case rng.IntN(10) == 0:
			c.Tombstone = true
		case large && rng.IntN(40) == 0:
			c.Value = randBytes(rng, 4096+rng.IntN(40000))
		default:
			c.Value = randBytes(rng, rng.IntN(40))
		}
		r.Cells = append(r.Cells, c)
	}
	return r
}

// randKey returns a key whose token is sometimes drawn from a small range, so
// that tokens repeat with different partitions, and whose partition may be
// empty.
func randKey(rng *rand.Rand) row.Key {
	var tok int64
	if rng.IntN(3) == 0 {
		tok = rng.Int64N(64) - 32
	} else {
		tok = int64(rng.Uint64())
	}
	return row.Key{Token: tok, Partition: randBytes(rng, rng.IntN(12))}
}

// randRows returns n rows with distinct keys, sorted.
func randRows(rng *rand.Rand, n int, large bool) []row.Row {
	seen := make(map[string]bool, n)
	rows := make([]row.Row, 0, n)
	for len(rows) < n {
		k := randKey(rng)
		if seen[keyID(k)] {
			continue
		}
		seen[keyID(k)] = true
		rows = append(rows, randRow(rng, k, large))
	}
	slices.SortFunc(rows, func(a, b row.Row) int { return row.Compare(a.Key, b.Key) })
	return rows
}

func keyID(k row.Key) string { return fmt.Sprintf("%d/%x", k.Token, k.Partition) }

// absentKeys returns keys that are not among rows, many of them neighbours
// of present keys.
func absentKeys(rng *rand.Rand, rows []row.Row, n int) []row.Key {
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		seen[keyID(r.Key)] = true
	}
	var out []row.Key
	for len(out) < n {
		var k row.Key
		if len(rows) > 0 && rng.IntN(2) == 0 {
			k = rows[rng.IntN(len(rows))].Key.Clone()
			switch rng.IntN(3) {
			case 0:
				k.Partition = append(k.Partition, byte(rng.Uint32()))
			case 1:
				k.Token++
			default:
				if len(k.Partition) > 0 {
					k.Partition = k.Partition[:len(k.Partition)-1]
				} else {
					k.Token--
				}
			}
		} else {
			k = randKey(rng)
		}
		if !seen[keyID(k)] {
			out = append(out, k)
		}
	}
	return out
}

func cellEqual(a, b row.Cell) bool {
	return a.Column == b.Column && bytes.Equal(a.Value, b.Value) && a.Timestamp == b.Timestamp && a.Tombstone == b.Tombstone
}

func rowEqual(a, b row.Row) bool {
	if row.Compare(a.Key, b.Key) != 0 || len(a.Cells) != len(b.Cells) {
		return false
	}
	for i := range a.Cells {
		if !cellEqual(a.Cells[i], b.Cells[i]) {
			return false
		}
	}
	return true
}

func writeTable(t testing.TB, dir string, gen uint64, rows []row.Row, opts Options, user []byte) Meta {
	t.Helper()
	w, err := NewWriter(dir, gen, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	m, err := w.Finish(user)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func openTable(t testing.TB, dir string, gen uint64) *Reader {
	t.Helper()
	r, err := Open(dir, gen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// collect drains a sequence, stopping at the first error.
func collect(seq func(func(row.Row, error) bool)) ([]row.Row, error) {
	var out []row.Row
	for r, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// sameRows reports the first difference between got and want.
func sameRows(got, want []row.Row) error {
	for i := range min(len(got), len(want)) {
		if !rowEqual(got[i], want[i]) {
			return fmt.Errorf("row %d: got key %s with %d cells, want key %s with %d cells", i, got[i].Key, len(got[i].Cells), want[i].Key, len(want[i].Cells))
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("got %d rows, want %d", len(got), len(want))
	}
	return nil
}
