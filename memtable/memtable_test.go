package memtable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
)

// sumMerge adds two big-endian int64 values: a simple commutative merge for tests.
func sumMerge(a, b row.Cell) (row.Cell, error) {
	v := int64(binary.BigEndian.Uint64(a.Value)) + int64(binary.BigEndian.Uint64(b.Value))
	return row.Cell{Column: a.Column, Value: binary.BigEndian.AppendUint64(nil, uint64(v)), Timestamp: max(a.Timestamp, b.Timestamp)}, nil
}

func val(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func TestModel(t *testing.T) {
	r := testseed.Rand(t)
	m := New()
	type mk struct {
		tok  int64
		part string
		col  string
	}
	model := map[mk]int64{}
	for i := 0; i < 20000; i++ {
		k := row.Key{Token: r.Int64N(50) - 25, Partition: []byte(fmt.Sprintf("p%d", r.IntN(4)))}
		col := fmt.Sprintf("c%d", r.IntN(3))
		d := r.Int64N(10) - 3
		if err := m.Apply(k, row.Cell{Column: col, Value: val(d)}, sumMerge); err != nil {
			t.Fatal(err)
		}
		model[mk{k.Token, string(k.Partition), col}] += d
	}
	// Every modelled cell is readable, and iteration is in key order and complete.
	n := 0
	var prev *row.Key
	for rw := range m.All() {
		if prev != nil && row.Compare(*prev, rw.Key) >= 0 {
			t.Fatalf("rows out of order: %v then %v", *prev, rw.Key)
		}
		k := rw.Key
		prev = &k
		if !sort.SliceIsSorted(rw.Cells, func(i, j int) bool { return rw.Cells[i].Column < rw.Cells[j].Column }) {
			t.Fatalf("cells unsorted in %v", rw.Key)
		}
		for _, c := range rw.Cells {
			want, ok := model[mk{rw.Key.Token, string(rw.Key.Partition), c.Column}]
			if !ok || int64(binary.BigEndian.Uint64(c.Value)) != want {
				t.Fatalf("%v %s = %d, model %d (present %v)", rw.Key, c.Column, int64(binary.BigEndian.Uint64(c.Value)), want, ok)
			}
			n++
		}
	}
	if n != len(model) {
		t.Fatalf("iterated %d cells, model has %d", n, len(model))
	}
	if m.Size() <= 0 {
		t.Fatalf("size %d after writes", m.Size())
	}
}

func TestRangeStartsAtKeyAndSurvivesBatches(t *testing.T) {
	m := New()
	for i := 0; i < 1000; i++ {
		if err := m.Apply(row.Key{Token: int64(i)}, row.Cell{Column: "c", Value: val(1)}, sumMerge); err != nil {
			t.Fatal(err)
		}
	}
	want := int64(300)
	for r := range m.Range(row.Key{Token: 300}) {
		if r.Key.Token != want {
			t.Fatalf("got token %d, want %d", r.Key.Token, want)
		}
		want++
	}
	if want != 1000 {
		t.Fatalf("range ended at %d, want 1000", want)
	}
}

func TestRowsAreCopyOnWrite(t *testing.T) {
	m := New()
	k := row.Key{Token: 1, Partition: []byte("k")}
	_ = m.Apply(k, row.Cell{Column: "c", Value: val(1)}, sumMerge)
	before, _ := m.Get(k)
	_ = m.Apply(k, row.Cell{Column: "c", Value: val(5)}, sumMerge)
	_ = m.Apply(k, row.Cell{Column: "d", Value: val(5)}, sumMerge)
	if got := int64(binary.BigEndian.Uint64(before.Cells[0].Value)); got != 1 || len(before.Cells) != 1 {
		t.Fatalf("row read earlier changed under the reader: %v", before)
	}
	after, _ := m.Get(k)
	if got := int64(binary.BigEndian.Uint64(after.Cells[0].Value)); got != 6 || len(after.Cells) != 2 {
		t.Fatalf("row after updates: %v", after)
	}
	// The caller's buffers are not retained.
	buf := val(7)
	k2 := row.Key{Token: 2, Partition: []byte("x")}
	_ = m.Apply(k2, row.Cell{Column: "c", Value: buf}, sumMerge)
	buf[7] = 0
	k2.Partition[0] = 'y'
	r, ok := m.Get(row.Key{Token: 2, Partition: []byte("x")})
	if !ok || int64(binary.BigEndian.Uint64(r.Cells[0].Value)) != 7 {
		t.Fatalf("memtable kept the caller's buffer: %v %v", r, ok)
	}
}

func TestSealRefusesWrites(t *testing.T) {
	m := New()
	m.Seal()
	if err := m.Apply(row.Key{}, row.Cell{Column: "c", Value: val(1)}, sumMerge); err != ErrSealed {
		t.Fatalf("Apply on sealed = %v, want ErrSealed", err)
	}
}

// TestConcurrentApply is for the race detector and checks no update is lost.
func TestConcurrentApply(t *testing.T) {
	m := New()
	const workers, per = 8, 2000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				k := row.Key{Token: int64(i % 17), Partition: []byte("k")}
				if err := m.Apply(k, row.Cell{Column: "c", Value: val(1)}, sumMerge); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					for range m.All() {
					}
				}
			}
		}()
	}
	wg.Wait()
	var total int64
	for r := range m.All() {
		total += int64(binary.BigEndian.Uint64(r.Cells[0].Value))
	}
	if total != workers*per {
		t.Fatalf("total %d, want %d", total, workers*per)
	}
}

func BenchmarkApply(b *testing.B) {
	for _, keys := range []int{1, 100000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			m := New()
			parts := make([][]byte, keys)
			for i := range parts {
				parts[i] = []byte(fmt.Sprintf("key-%08d", i))
			}
			v := val(1)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := parts[i%keys]
				i++
				_ = m.Apply(row.Key{Token: int64(i % keys * 7919), Partition: p}, row.Cell{Column: "c", Value: v}, sumMerge)
			}
		})
	}
}

// BenchmarkApplyWidePartition: writes into one partition of 10,000 cells
// (a table with clustering columns), each to a cell of its own.
func BenchmarkApplyWidePartition(b *testing.B) {
	m := New()
	k := row.Key{Token: 1, Partition: []byte("p")}
	cols := make([]string, 10000)
	for i := range cols {
		cols[i] = fmt.Sprintf("c%05d", (i*7919)%len(cols))
		_ = m.Apply(k, row.Cell{Column: cols[i], Value: val(1)}, sumMerge)
	}
	v := val(1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = m.Apply(k, row.Cell{Column: cols[i%len(cols)], Value: v}, sumMerge)
		i++
	}
}

// TestReadersSeeSnapshots: a row returned by Get is not changed by later
// writes into its partition (run with -race).
func TestReadersSeeSnapshots(t *testing.T) {
	m := New()
	k := row.Key{Token: 1, Partition: []byte("p")}
	_ = m.Apply(k, row.Cell{Column: "b", Value: val(1)}, sumMerge)
	got, _ := m.Get(k)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			_ = m.Apply(k, row.Cell{Column: fmt.Sprintf("a%04d", i), Value: val(1)}, sumMerge)
			_ = m.Apply(k, row.Cell{Column: "b", Value: val(1)}, sumMerge)
		}
	}()
	for range 1000 {
		if len(got.Cells) != 1 || got.Cells[0].Column != "b" || string(got.Cells[0].Value) != string(val(1)) {
			t.Fatalf("a row read before the writes changed: %+v", got.Cells)
		}
	}
	<-done
	now, _ := m.Get(k)
	if len(now.Cells) != 1001 || string(now.Cells[1000].Value) != string(val(1001)) {
		t.Fatalf("after the writes: %d cells, b = %x", len(now.Cells), now.Cells[len(now.Cells)-1].Value)
	}
}

// TestApplyOver: a cell computed from the value the memtable holds
// replaces it (the later timestamp kept) without a merge; one computed from
// another value, or over a tombstone, is merged; a nil base is Apply.
func TestApplyOver(t *testing.T) {
	k := row.Key{Token: 1, Partition: []byte("p")}
	get := func(m *Memtable) row.Cell {
		t.Helper()
		r, ok := m.Get(k)
		if !ok || len(r.Cells) != 1 {
			t.Fatalf("row %v, %v", r, ok)
		}
		return r.Cells[0]
	}
	m := New()
	_ = m.Apply(k, row.Cell{Column: "c", Value: val(5), Timestamp: 9}, sumMerge)
	if err := m.ApplyOver(k, row.Cell{Column: "c", Value: val(7), Timestamp: 3}, val(5), sumMerge); err != nil {
		t.Fatal(err)
	}
	if c := get(m); !bytes.Equal(c.Value, val(7)) || c.Timestamp != 9 {
		t.Fatalf("over the value it was computed from: %x at %d, want 7 (replaced) at 9", c.Value, c.Timestamp)
	}
	_ = m.ApplyOver(k, row.Cell{Column: "c", Value: val(1), Timestamp: 10}, val(5), sumMerge)
	if c := get(m); !bytes.Equal(c.Value, val(8)) {
		t.Fatalf("over another value: %x, want 8 (merged)", c.Value)
	}
	_ = m.ApplyOver(k, row.Cell{Column: "c", Value: val(2), Timestamp: 11}, nil, sumMerge)
	if c := get(m); !bytes.Equal(c.Value, val(10)) {
		t.Fatalf("nil base: %x, want 10 (merged)", c.Value)
	}
	var merged bool
	tomb := New()
	_ = tomb.Apply(k, row.Cell{Column: "c", Tombstone: true, Timestamp: 5}, sumMerge)
	_ = tomb.ApplyOver(k, row.Cell{Column: "c", Value: val(3), Timestamp: 6}, []byte{}, func(a, b row.Cell) (row.Cell, error) {
		merged = true
		return b, nil
	})
	if !merged {
		t.Fatal("over a tombstone: not merged")
	}
}
