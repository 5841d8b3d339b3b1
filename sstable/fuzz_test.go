package sstable

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/idemkv/idemkv/row"
)

// encodeBlock frames rows as one data block, as the Writer does.
func encodeBlock(rows []row.Row) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b[4:], uint32(len(rows)))
	for _, r := range rows {
		b = appendRow(b, r)
	}
	return frameBlock(b)
}

// checksumOK checks a block's framing independently of unframeBlock.
func checksumOK(b []byte) bool {
	return len(b) >= 8 && uint64(binary.BigEndian.Uint32(b)) == uint64(len(b)-8) &&
		crc(b[:len(b)-4]) == binary.BigEndian.Uint32(b[len(b)-4:])
}

func FuzzDecodeBlock(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 5, 20} {
		b := encodeBlock(randRows(rng, n, false))
		f.Add(b)
		bad := bytes.Clone(b)
		bad[len(bad)/2] ^= 0x10
		f.Add(bad)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(encodeBlock(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := decodeBlock(b)
		if !checksumOK(b) {
			if err == nil || len(rows) > 0 {
				t.Fatalf("block with a bad checksum decoded into %d rows (err %v)", len(rows), err)
			}
		}
		if err == nil {
			// A block that decodes is canonical: it re-encodes to itself.
			if again := encodeBlock(rows); !bytes.Equal(again, b) {
				t.Fatalf("decoded block re-encodes differently")
			}
			for _, r := range rows {
				got, ok, err := findInBlock(b, r.Key)
				if err != nil || !ok || !rowEqual(got, r) {
					t.Fatalf("findInBlock(%s) = %v, %v", r.Key, ok, err)
				}
			}
		} else if len(rows) > 0 {
			t.Fatalf("decodeBlock returned rows and an error")
		}
		// The other decoders must not panic on the same bytes either.
		if len(b) > 0 {
			if _, ok, err := findInBlock(b, row.Key{Token: int64(b[0])}); ok && !checksumOK(b) {
				t.Fatalf("findInBlock found a row in a block with a bad checksum (%v)", err)
			}
		}
		decodeIndexBlock(b)
		decodeEntries(b, "entry")
		decodeStats(b)
		decodeBloom(b)
	})
}

// fuzzTable is the valid table FuzzOpen damages one component of.
type fuzzTable struct {
	rows   []row.Row
	absent []row.Key
	files  map[string][]byte
}

func newFuzzTable(f *testing.F) *fuzzTable {
	rng := rand.New(rand.NewPCG(5, 6))
	ft := &fuzzTable{rows: randRows(rng, 40, false), files: map[string][]byte{}}
	ft.absent = absentKeys(rng, ft.rows, 20)
	dir := f.TempDir()
	writeTable(f, dir, 1, ft.rows, Options{BlockSize: 128, IndexInterval: 4}, []byte("user"))
	for _, c := range append(components, tocComponent) {
		b, err := os.ReadFile(path(dir, 1, c))
		if err != nil {
			f.Fatal(err)
		}
		ft.files[c] = b
	}
	return ft
}

// fuzzedComponents are those FuzzOpen may replace, by index.
var fuzzedComponents = []string{dataComponent, indexComponent, filterComponent, statisticsComponent, summaryComponent}

func FuzzOpen(f *testing.F) {
	ft := newFuzzTable(f)
	for i, c := range fuzzedComponents {
		orig := ft.files[c]
		f.Add(uint8(i), orig)
		mid := bytes.Clone(orig)
		mid[len(mid)/2] ^= 1
		f.Add(uint8(i), mid)
		f.Add(uint8(i), orig[:len(orig)-1])
		f.Add(uint8(i), []byte{})
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		comp := fuzzedComponents[int(which)%len(fuzzedComponents)]
		dir := t.TempDir()
		for c, b := range ft.files {
			if c == comp {
				b = data
			}
			if err := os.WriteFile(path(dir, 1, c), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Open(dir, 1)
		if err != nil {
			return
		}
		defer r.Close()
		for _, want := range ft.rows {
			got, ok, err := r.Get(want.Key)
			if err == nil && ok && !rowEqual(got, want) {
				t.Fatalf("%s replaced: Get(%s) returned a row that was not written", comp, want.Key)
			}
		}
		for _, k := range ft.absent {
			if _, ok, err := r.Get(k); err == nil && ok {
				t.Fatalf("%s replaced: Get(%s) found a key that was not written", comp, k)
			}
		}
		got, _ := collect(r.All())
		if len(got) > len(ft.rows) || sameRows(got, ft.rows[:len(got)]) != nil {
			t.Fatalf("%s replaced: All yielded rows that were not written", comp)
		}
		got, _ = collect(r.Range(ft.rows[10].Key))
		if len(got) > len(ft.rows)-10 || sameRows(got, ft.rows[10:10+len(got)]) != nil {
			t.Fatalf("%s replaced: Range yielded rows that were not written", comp)
		}
	})
}
