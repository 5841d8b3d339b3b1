package sstable

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemkv/idemkv/row"
)

// benchRows returns n sorted rows shaped like counter partitions: an 8-byte
// partition key and two cells of 40-byte values.
func benchRows(rng *rand.Rand, n int) []row.Row {
	rows := make([]row.Row, n)
	for i := range rows {
		p := binary.BigEndian.AppendUint64(nil, rng.Uint64())
		rows[i] = row.Row{
			Key: row.Key{Token: int64(rng.Uint64()), Partition: p},
			Cells: []row.Cell{
				{Column: "c", Value: randBytes(rng, 40), Timestamp: rng.Int64()},
				{Column: "d", Value: randBytes(rng, 40), Timestamp: rng.Int64()},
			},
		}
	}
	slices.SortFunc(rows, func(a, b row.Row) int { return row.Compare(a.Key, b.Key) })
	return slices.CompactFunc(rows, func(a, b row.Row) bool { return row.Compare(a.Key, b.Key) == 0 })
}

func BenchmarkGet(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	dir := b.TempDir()
	rows := benchRows(rng, 100000)
	writeTable(b, dir, 1, rows, Options{}, nil)
	r := openTable(b, dir, 1)
	b.Run("hit", func(b *testing.B) {
		i := 0
		for b.Loop() {
			_, ok, err := r.Get(rows[(i*7919)%len(rows)].Key)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.Run("miss", func(b *testing.B) {
		absent := make([]row.Key, 4096)
		for i := range absent {
			absent[i] = row.Key{Token: int64(rng.Uint64()), Partition: []byte("absent")}
		}
		i := 0
		for b.Loop() {
			if _, ok, err := r.Get(absent[i%len(absent)]); ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
}

// BenchmarkWrite measures flush throughput: 20000 rows (about 2 MB of data
// blocks) per table, Finish and its fsyncs included. MB/s counts Data bytes.
func BenchmarkWrite(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	dir := b.TempDir()
	rows := benchRows(rng, 20000)
	m := writeTable(b, dir, 1, rows, Options{}, nil)
	b.SetBytes(m.DataSize)
	gen := uint64(2)
	for b.Loop() {
		writeTable(b, dir, gen, rows, Options{}, nil)
		if err := Remove(dir, gen); err != nil {
			b.Fatal(err)
		}
		gen++
	}
}

// BenchmarkCompact4 merges four overlapping tables of 25000 rows each. MB/s
// counts the Data bytes of the inputs.
func BenchmarkCompact4(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	dir := b.TempDir()
	pool := benchRows(rng, 60000)
	var inputs []*Reader
	var size int64
	for i := range 4 {
		var tab []row.Row
		for _, j := range rng.Perm(len(pool))[:25000] {
			tab = append(tab, pool[j])
		}
		slices.SortFunc(tab, func(a, b row.Row) int { return row.Compare(a.Key, b.Key) })
		size += writeTable(b, dir, uint64(i+1), tab, Options{}, nil).DataSize
		inputs = append(inputs, openTable(b, dir, uint64(i+1)))
	}
	keepLeft := func(a, _ row.Cell) (row.Cell, error) { return a, nil }
	b.SetBytes(size)
	gen := uint64(100)
	for b.Loop() {
		if _, err := Compact(dir, inputs, gen, keepLeft, Options{}, nil, nil); err != nil {
			b.Fatal(err)
		}
		if err := Remove(dir, gen); err != nil {
			b.Fatal(err)
		}
		gen++
	}
}
