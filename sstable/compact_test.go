package sstable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/idemkv/idemkv/row"
)

// maxMerge is a test MergeFunc: a tombstone wins, else the larger big-endian
// int64 value; the timestamp is the larger one. It is commutative,
// associative and idempotent.
func maxMerge(a, b row.Cell) (row.Cell, error) {
	out := row.Cell{Column: a.Column, Timestamp: max(a.Timestamp, b.Timestamp)}
	if a.Tombstone || b.Tombstone {
		out.Tombstone = true
		return out, nil
	}
	if len(a.Value) != 8 || len(b.Value) != 8 {
		return row.Cell{}, fmt.Errorf("values of %d and %d bytes", len(a.Value), len(b.Value))
	}
	out.Value = binary.BigEndian.AppendUint64(nil, uint64(max(int64(binary.BigEndian.Uint64(a.Value)), int64(binary.BigEndian.Uint64(b.Value)))))
	return out, nil
}

// counterTables returns n sorted tables drawn from a shared pool of keys, so
// that they overlap, with 8-byte big-endian values.
func counterTables(rng *rand.Rand, n, poolSize, perTable int) [][]row.Row {
	pool := randRows(rng, poolSize, false)
	tables := make([][]row.Row, n)
	for i := range tables {
		for _, j := range rng.Perm(poolSize)[:perTable] {
			r := row.Row{Key: pool[j].Key}
			for _, col := range testColumns {
				if rng.IntN(2) == 0 {
					continue
				}
				c := row.Cell{Column: col, Timestamp: rng.Int64N(1000)}
				if rng.IntN(15) == 0 {
					c.Tombstone = true
				} else {
					c.Value = binary.BigEndian.AppendUint64(nil, uint64(rng.Int64()-rng.Int64()))
				}
				r.Cells = append(r.Cells, c)
			}
			tables[i] = append(tables[i], r)
		}
		slices.SortFunc(tables[i], func(a, b row.Row) int { return row.Compare(a.Key, b.Key) })
	}
	return tables
}

// modelMerge merges sorted tables with a map, independently of Compact.
func modelMerge(t *testing.T, tables [][]row.Row, merge row.MergeFunc) []row.Row {
	byKey := map[string]row.Row{}
	for _, tab := range tables {
		for _, r := range tab {
			id := keyID(r.Key)
			if prev, ok := byKey[id]; ok {
				m, err := row.MergeRows(prev, r, merge)
				if err != nil {
					t.Fatal(err)
				}
				byKey[id] = m
			} else {
				byKey[id] = r
			}
		}
	}
	var out []row.Row
	for _, r := range byKey {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b row.Row) int { return row.Compare(a.Key, b.Key) })
	return out
}

func TestCompact(t *testing.T) {
	rng := testRand(t)
	dir := t.TempDir()
	tables := counterTables(rng, 4, 600, 300)
	tables = append(tables, nil) // an empty input too
	var inputs []*Reader
	for i, tab := range tables {
		writeTable(t, dir, uint64(i+1), tab, Options{BlockSize: 256 << rng.IntN(5), IndexInterval: 1 + rng.IntN(20)}, nil)
		inputs = append(inputs, openTable(t, dir, uint64(i+1)))
	}
	want := modelMerge(t, tables, maxMerge)

	m, err := Compact(dir, inputs, 100, maxMerge, Options{BlockSize: 512, IndexInterval: 8}, []byte("pos"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != uint64(len(want)) || m.Generation != 100 || string(m.User) != "pos" {
		t.Fatalf("meta %+v, want %d rows", m, len(want))
	}
	if gens := listOf(t, dir); !slices.Equal(gens, []uint64{1, 2, 3, 4, 5, 100}) {
		t.Fatalf("List = %v", gens)
	}
	out := openTable(t, dir, 100)
	got, err := collect(out.All())
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRows(got, want); err != nil {
		t.Fatalf("compacted rows: %v", err)
	}
	for _, w := range want {
		r, ok, err := out.Get(w.Key)
		if err != nil || !ok || !rowEqual(r, w) {
			t.Fatalf("Get(%s) on compacted table: %v %v", w.Key, ok, err)
		}
	}

	// Compacting the output again with an input is idempotent for maxMerge.
	m2, err := Compact(dir, []*Reader{out, inputs[2]}, 101, maxMerge, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := collect(openTable(t, dir, 101).All())
	if err != nil || m2.Rows != uint64(len(want)) {
		t.Fatal(err, m2.Rows)
	}
	if err := sameRows(again, want); err != nil {
		t.Fatalf("recompaction: %v", err)
	}
}

func TestCompactFailures(t *testing.T) {
	rng := testRand(t)
	dir := t.TempDir()
	tables := counterTables(rng, 2, 100, 80)
	var inputs []*Reader
	for i, tab := range tables {
		writeTable(t, dir, uint64(i+1), tab, Options{BlockSize: 128}, nil)
		inputs = append(inputs, openTable(t, dir, uint64(i+1)))
	}
	boom := errors.New("boom")
	failing := func(a, b row.Cell) (row.Cell, error) { return row.Cell{}, boom }
	if _, err := Compact(dir, inputs, 50, failing, Options{}, nil, nil); !errors.Is(err, boom) {
		t.Fatalf("Compact with failing merge: %v", err)
	}
	// Corrupt the middle of input 2's data: Compact must fail, not skip it.
	f, err := openRW(path(dir, 2, dataComponent))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad}, inputs[1].Meta().DataSize/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Compact(dir, inputs, 51, maxMerge, Options{}, nil, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Compact of a corrupt input: %v", err)
	}
	// The generation that already exists cannot be the output.
	if _, err := Compact(dir, inputs[:1], 1, maxMerge, Options{}, nil, nil); err == nil {
		t.Fatal("Compact over an existing generation succeeded")
	}
	if gens := listOf(t, dir); !slices.Equal(gens, []uint64{1, 2}) {
		t.Fatalf("List after failed compactions = %v", gens)
	}
	ents, err := scan(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Fatalf("failed compactions left files: %v", ents)
	}
}

func TestPickSizeTiered(t *testing.T) {
	const mib = 1 << 20
	tabs := func(sizesMiB ...int64) []TableInfo {
		var out []TableInfo
		for i, s := range sizesMiB {
			out = append(out, TableInfo{Generation: uint64(i + 1), Size: s * mib})
		}
		return out
	}
	seq := func(from, to uint64) []uint64 {
		var out []uint64
		for g := from; g <= to; g++ {
			out = append(out, g)
		}
		return out
	}
	var forty []int64
	for i := int64(40); i >= 1; i-- {
		forty = append(forty, i) // generation 1 is the largest
	}
	// Sizes 1..40 MiB are generations 40..1: the 32 smallest are generations
	// 40 down to 9, in ascending size order.
	trimWant := seq(9, 40)
	slices.Reverse(trimWant)
	defaults := func(ts []TableInfo) []uint64 {
		return PickSizeTiered(ts, 4, 32, 0.5, 1.5, 50*mib)
	}
	for _, tc := range []struct {
		name string
		got  []uint64
		want []uint64
	}{
		{"none", defaults(nil), nil},
		{"below min threshold", defaults(tabs(100, 100, 100)), nil},
		{"equal sizes by generation", defaults([]TableInfo{{4, 100 * mib}, {3, 100 * mib}, {2, 100 * mib}, {1, 100 * mib}}), []uint64{1, 2, 3, 4}},
		{"small tables group", defaults(tabs(40, 1, 20, 10)), []uint64{2, 4, 3, 1}},
		{"no small grouping", PickSizeTiered(tabs(40, 1, 20, 10), 4, 32, 0.5, 1.5, 0), nil},
		{"smallest average wins", defaults(tabs(1000, 1100, 1200, 1300, 100, 110, 120, 130)), []uint64{5, 6, 7, 8}},
		{"only full bucket", defaults(tabs(1000, 1010, 1020, 1030, 1040, 100, 101, 102)), []uint64{1, 2, 3, 4, 5}},
		{"trim to max threshold", defaults(tabs(forty...)), trimWant},
		{"upper bound exclusive", defaults(tabs(100, 100, 100, 150)), nil},
		{"just inside upper bound", defaults(tabs(100, 100, 100, 149)), []uint64{1, 2, 3, 4}},
		{"average drifts", PickSizeTiered(tabs(260, 190, 140, 100), 2, 32, 0.5, 1.5, 50*mib), []uint64{4, 3}},
		{"average drifts, min 4", defaults(tabs(260, 190, 140, 100)), nil},
		{"zero parameters are defaults", PickSizeTiered(tabs(100, 100, 100, 100, 100), 0, 0, 0, 0, -1), []uint64{1, 2, 3, 4, 5}},
		{"small max threshold", PickSizeTiered(tabs(100, 101, 102, 103, 104), 2, 3, 0.5, 1.5, 50*mib), []uint64{1, 2, 3}},
		{"wide bucket options", PickSizeTiered(tabs(100, 190, 300, 500), 4, 32, 0.1, 3, 0), []uint64{1, 2, 3, 4}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func openRW(name string) (*os.File, error) { return os.OpenFile(name, os.O_RDWR, 0) }

// TestCompactPurge: the purger sees every merged cell once, the cells it
// drops are gone from the output and rows left empty are gone whole; the
// rest is the model merge. Purging everything still writes a readable, empty
// table that carries the user bytes.
func TestCompactPurge(t *testing.T) {
	rng := testRand(t)
	dir := t.TempDir()
	tables := counterTables(rng, 3, 400, 250)
	var inputs []*Reader
	for i, tab := range tables {
		writeTable(t, dir, uint64(i+1), tab, Options{BlockSize: 256}, nil)
		inputs = append(inputs, openTable(t, dir, uint64(i+1)))
	}
	merged := modelMerge(t, tables, maxMerge)
	// Drop tombstones with an even timestamp.
	drop := func(c row.Cell) bool { return c.Tombstone && c.Timestamp%2 == 0 }
	var want []row.Row
	wantSeen, dropped := 0, 0
	for _, r := range merged {
		kept := row.Row{Key: r.Key}
		for _, c := range r.Cells {
			wantSeen++
			if drop(c) {
				dropped++
				continue
			}
			kept.Cells = append(kept.Cells, c)
		}
		if len(kept.Cells) > 0 {
			want = append(want, kept)
		}
	}
	if dropped == 0 {
		t.Fatalf("seed drew no purgeable tombstone (%d cells); the test needs some", wantSeen)
	}
	seen := 0
	m, err := Compact(dir, inputs, 100, maxMerge, Options{}, []byte("pos"), func(_ row.Key, c row.Cell) bool {
		seen++
		return drop(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != wantSeen {
		t.Fatalf("purger saw %d cells, the merge has %d", seen, wantSeen)
	}
	if m.Rows != uint64(len(want)) {
		t.Fatalf("%d rows written, want %d", m.Rows, len(want))
	}
	got, err := collect(openTable(t, dir, 100).All())
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRows(got, want); err != nil {
		t.Fatalf("purged compaction: %v", err)
	}

	all, err := Compact(dir, inputs, 101, maxMerge, Options{}, []byte("pos"), func(row.Key, row.Cell) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	empty := openTable(t, dir, 101)
	if all.Rows != 0 || string(empty.Meta().User) != "pos" {
		t.Fatalf("everything purged: meta %+v", all)
	}
	if rows, err := collect(empty.All()); err != nil || len(rows) != 0 {
		t.Fatalf("empty output reads %d rows, %v", len(rows), err)
	}
	if _, ok, err := empty.Get(merged[0].Key); ok || err != nil {
		t.Fatalf("Get on the empty output: %v %v", ok, err)
	}
}
