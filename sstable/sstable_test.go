package sstable

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"unsafe"

	"github.com/idemkv/idemkv/row"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		opts  Options
		large bool
	}{
		{"defaults", 3000, Options{}, true},
		{"small-blocks", 2000, Options{BlockSize: 200, IndexInterval: 3, BloomFPChance: 0.2}, true},
		{"one-row-blocks", 300, Options{BlockSize: 1, IndexInterval: 1}, false},
		{"single-row", 1, Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := testRand(t)
			dir := t.TempDir()
			rows := randRows(rng, tc.n, tc.large)
			user := randBytes(rng, rng.IntN(30))
			m := writeTable(t, dir, 42, rows, tc.opts, user)
			r := openTable(t, dir, 42)

			got := r.Meta()
			wantTS := int64(math.MinInt64)
			for _, x := range rows {
				for _, c := range x.Cells {
					wantTS = max(wantTS, c.Timestamp)
				}
			}
			fi, err := os.Stat(filepath.Join(dir, "ik-42-big-Data.db"))
			if err != nil {
				t.Fatal(err)
			}
			if got.Generation != 42 || got.Rows != uint64(len(rows)) || row.Compare(got.MinKey, rows[0].Key) != 0 ||
				row.Compare(got.MaxKey, rows[len(rows)-1].Key) != 0 || got.MaxTimestamp != wantTS ||
				got.DataSize != fi.Size() || string(got.User) != string(user) {
				t.Fatalf("meta %+v, want rows %d min %s max %s maxts %d size %d", got, len(rows), rows[0].Key, rows[len(rows)-1].Key, wantTS, fi.Size())
			}
			if m.DataSize != got.DataSize || m.Rows != got.Rows {
				t.Fatalf("Finish meta %+v != Open meta %+v", m, got)
			}

			for i, want := range rows {
				x, ok, err := r.Get(want.Key)
				if err != nil || !ok || !rowEqual(x, want) {
					t.Fatalf("Get row %d %s: ok=%v err=%v equal=%v", i, want.Key, ok, err, rowEqual(x, want))
				}
			}
			for _, k := range absentKeys(rng, rows, 5000) {
				if _, ok, err := r.Get(k); ok || err != nil {
					t.Fatalf("Get absent %s: ok=%v err=%v", k, ok, err)
				}
			}

			all, err := collect(r.All())
			if err != nil {
				t.Fatal(err)
			}
			if err := sameRows(all, rows); err != nil {
				t.Fatalf("All: %v", err)
			}

			var froms []row.Key
			for range 40 {
				froms = append(froms, rows[rng.IntN(len(rows))].Key)
			}
			froms = append(froms, absentKeys(rng, rows, 40)...)
			froms = append(froms, row.Key{Token: math.MinInt64}, row.Key{Token: math.MaxInt64, Partition: []byte{0xff, 0xff}})
			for _, from := range froms {
				i := sort.Search(len(rows), func(i int) bool { return row.Compare(rows[i].Key, from) >= 0 })
				got, err := collect(r.Range(from))
				if err != nil {
					t.Fatal(err)
				}
				if err := sameRows(got, rows[i:]); err != nil {
					t.Fatalf("Range(%s): %v", from, err)
				}
			}
			// Early stop.
			n := 0
			for _, err := range r.Range(rows[len(rows)/2].Key) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if n == 3 {
					break
				}
			}
		})
	}
}

func TestEmptyTable(t *testing.T) {
	dir := t.TempDir()
	m := writeTable(t, dir, 1, nil, Options{}, nil)
	if m.Rows != 0 || m.DataSize != 0 || m.MaxTimestamp != math.MinInt64 {
		t.Fatalf("meta %+v", m)
	}
	r := openTable(t, dir, 1)
	if _, ok, err := r.Get(row.Key{Token: 5, Partition: []byte("x")}); ok || err != nil {
		t.Fatalf("Get on empty table: %v %v", ok, err)
	}
	if rows, err := collect(r.All()); len(rows) != 0 || err != nil {
		t.Fatalf("All on empty table: %d rows, %v", len(rows), err)
	}
	if rows, err := collect(r.Range(row.Key{Token: 9})); len(rows) != 0 || err != nil {
		t.Fatalf("Range on empty table: %d rows, %v", len(rows), err)
	}
}

func TestAddErrors(t *testing.T) {
	k := func(tok int64, p string) row.Key { return row.Key{Token: tok, Partition: []byte(p)} }
	for _, tc := range []struct {
		name string
		rows []row.Row
	}{
		{"equal key", []row.Row{{Key: k(1, "a")}, {Key: k(1, "a")}}},
		{"smaller token", []row.Row{{Key: k(1, "a")}, {Key: k(-1, "b")}}},
		{"smaller partition", []row.Row{{Key: k(1, "b")}, {Key: k(1, "a")}}},
		{"unsorted cells", []row.Row{{Key: k(1, "a"), Cells: []row.Cell{{Column: "b"}, {Column: "a"}}}}},
		{"duplicate column", []row.Row{{Key: k(1, "a"), Cells: []row.Cell{{Column: "a"}, {Column: "a"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := NewWriter(dir, 1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			var addErr error
			for _, r := range tc.rows {
				if addErr = w.Add(r); addErr != nil {
					break
				}
			}
			if addErr == nil {
				t.Fatal("Add accepted invalid input")
			}
			// The rejected row is not part of the table.
			if _, err := w.Finish(nil); err != nil {
				t.Fatal(err)
			}
			r := openTable(t, dir, 1)
			if r.Meta().Rows != uint64(len(tc.rows)-1) {
				t.Fatalf("rows %d, want %d", r.Meta().Rows, len(tc.rows)-1)
			}
		})
	}
}

func listOf(t *testing.T, dir string) []uint64 {
	t.Helper()
	gens, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return gens
}

func TestIncompleteAndRemove(t *testing.T) {
	rng := testRand(t)
	dir := t.TempDir()
	rows := randRows(rng, 100, false)
	writeTable(t, dir, 3, rows, Options{}, nil)
	writeTable(t, dir, 10, rows, Options{}, nil)

	// A writer in progress (data written, no TOC) is not listed.
	w, err := NewWriter(dir, 7, Options{BlockSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := listOf(t, dir); !slices.Equal(got, []uint64{3, 10}) {
		t.Fatalf("List = %v with a writer in progress", got)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(rows[0]); err == nil {
		t.Fatal("Add after Abort succeeded")
	}

	// A complete table whose TOC is lost (crash between the renames and the
	// TOC) is incomplete: not listed, removed by RemoveIncomplete.
	writeTable(t, dir, 5, rows, Options{}, nil)
	if err := os.Remove(filepath.Join(dir, "ik-5-big-TOC.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ik-11-big-Data.db.tmp"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "unrelated.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := listOf(t, dir); !slices.Equal(got, []uint64{3, 10}) {
		t.Fatalf("List = %v with incomplete generation 5", got)
	}
	if _, err := Open(dir, 5); err == nil {
		t.Fatal("Open of a generation without TOC succeeded")
	}
	if err := RemoveIncomplete(dir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	for _, n := range names {
		if gen, _, ok := parseName(n); ok && gen != 3 && gen != 10 {
			t.Fatalf("RemoveIncomplete left %s (%v)", n, names)
		}
	}
	if !slices.Contains(names, "unrelated.txt") || len(names) != 13 {
		t.Fatalf("after RemoveIncomplete: %v", names)
	}

	// A complete generation cannot be overwritten.
	if _, err := NewWriter(dir, 3, Options{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("NewWriter over complete generation: %v", err)
	}

	if err := Remove(dir, 3); err != nil {
		t.Fatal(err)
	}
	if got := listOf(t, dir); !slices.Equal(got, []uint64{10}) {
		t.Fatalf("List after Remove = %v", got)
	}
	for _, c := range append(slices.Clone(components), tocComponent) {
		if _, err := os.Stat(path(dir, 3, c)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Remove left %s: %v", c, err)
		}
	}
	r := openTable(t, dir, 10)
	if got, err := collect(r.All()); err != nil || sameRows(got, rows) != nil {
		t.Fatalf("generation 10 damaged: %v", err)
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  uint64
		comp string
		ok   bool
	}{
		{"ik-1-big-Data.db", 1, "Data.db", true},
		{"ik-18446744073709551615-big-TOC.txt", math.MaxUint64, "TOC.txt", true},
		{"ik-7-big-Index.db.tmp", 7, "Index.db.tmp", true},
		{"ik-07-big-Data.db", 0, "", false},
		{"ik--big-Data.db", 0, "", false},
		{"ik-1-big-", 0, "", false},
		{"ma-1-big-Data.db", 0, "", false},
		{"ik-x-big-Data.db", 0, "", false},
	} {
		gen, comp, ok := parseName(tc.name)
		if gen != tc.gen || comp != tc.comp || ok != tc.ok {
			t.Errorf("parseName(%q) = %d %q %v, want %d %q %v", tc.name, gen, comp, ok, tc.gen, tc.comp, tc.ok)
		}
	}
}

// TestConcurrentReads runs Get and scans from several goroutines; run it
// with -race.
func TestConcurrentReads(t *testing.T) {
	rng := testRand(t)
	dir := t.TempDir()
	rows := randRows(rng, 2000, false)
	writeTable(t, dir, 1, rows, Options{BlockSize: 512, IndexInterval: 16}, nil)
	r := openTable(t, dir, 1)
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := g; i < len(rows); i += 4 {
				got, ok, err := r.Get(rows[i].Key)
				if err != nil || !ok || !rowEqual(got, rows[i]) {
					errs <- fmt.Errorf("Get(%s): %v %v", rows[i].Key, ok, err)
					return
				}
			}
			all, err := collect(r.Range(rows[g*100].Key))
			if err == nil {
				err = sameRows(all, rows[g*100:])
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestGetDetachesRow: a row read with Get holds its key and values in one
// buffer of their own, laid end to end, not in the block it was read from
// (where column names and timestamps lie between them): a cache that keeps
// a value must not keep its whole block.
func TestGetDetachesRow(t *testing.T) {
	dir := t.TempDir()
	var rows []row.Row
	for i := range 50 {
		rows = append(rows, row.Row{Key: row.Key{Token: int64(i), Partition: []byte(fmt.Sprintf("key%03d", i))},
			Cells: []row.Cell{{Column: "a", Value: []byte("va"), Timestamp: 1}, {Column: "b", Value: []byte("vbb"), Timestamp: 2}}})
	}
	writeTable(t, dir, 1, rows, Options{BlockSize: 4096}, nil)
	r := openTable(t, dir, 1)
	got, ok, err := r.Get(rows[20].Key)
	if err != nil || !ok || !rowEqual(got, rows[20]) {
		t.Fatalf("Get: %+v %v %v", got, ok, err)
	}
	end := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(len(b)) }
	start := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	k, a, b := got.Key.Partition, got.Cells[0].Value, got.Cells[1].Value
	if end(k) != start(a) || end(a) != start(b) || cap(b) != len(b) {
		t.Fatalf("the row's key and values are not one buffer of their own: key %#x+%d, a %#x+%d, b %#x+%d (cap %d)",
			start(k), len(k), start(a), len(a), start(b), len(b), cap(b))
	}
}
