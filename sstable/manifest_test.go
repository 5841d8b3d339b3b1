package sstable

import (
	"bytes"
	"errors"
	"io/fs"
	"slices"
	"testing"
)

func TestManifestRoundTrip(t *testing.T) {
	for _, gens := range [][]uint64{nil, {1}, {1, 2, 7, 1 << 40}} {
		b := EncodeManifest(gens)
		got, err := DecodeManifest(b)
		if err != nil {
			t.Fatalf("DecodeManifest(EncodeManifest(%v)): %v", gens, err)
		}
		if !slices.Equal(got, gens) && !(len(got) == 0 && len(gens) == 0) {
			t.Fatalf("round trip of %v = %v", gens, got)
		}
	}
	// Unsorted input with duplicates is normalised.
	got, err := DecodeManifest(EncodeManifest([]uint64{9, 3, 9, 1}))
	if err != nil || !slices.Equal(got, []uint64{1, 3, 9}) {
		t.Fatalf("normalised manifest = %v, %v", got, err)
	}
}

func TestManifestGolden(t *testing.T) {
	want := []byte("idemkvMF" + "\x00\x00\x00\x01" + "\x00\x00\x00\x02" +
		"\x00\x00\x00\x00\x00\x00\x00\x03" + "\x00\x00\x00\x00\x00\x00\x00\x05")
	want = appendU32(want, crc(want))
	if got := EncodeManifest([]uint64{5, 3}); !bytes.Equal(got, want) {
		t.Fatalf("EncodeManifest = %x, want %x", got, want)
	}
}

func TestManifestRejectsDamage(t *testing.T) {
	good := EncodeManifest([]uint64{2, 4, 6})
	for i := range good {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(good)
			b[i] ^= bit
			if _, err := DecodeManifest(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flipping bit %02x of byte %d: err = %v, want ErrCorrupt", bit, i, err)
			}
		}
	}
	for n := range len(good) {
		if _, err := DecodeManifest(good[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrCorrupt", n, err)
		}
	}
	// A valid checksum over generations out of order, or another version.
	unsorted := appendU64(appendU32(appendU32(appendU64(nil, manifestMagic), 1), 2), 5)
	unsorted = appendU64(unsorted, 5)
	unsorted = appendU32(unsorted, crc(unsorted))
	if _, err := DecodeManifest(unsorted); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("repeated generation: err = %v, want ErrCorrupt", err)
	}
	v2 := appendU32(appendU32(appendU64(nil, manifestMagic), 2), 0)
	v2 = appendU32(v2, crc(v2))
	if _, err := DecodeManifest(v2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 2: err = %v, want ErrCorrupt", err)
	}
}

func TestManifestFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadManifest(nil, dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadManifest of an empty dir: err = %v, want fs.ErrNotExist", err)
	}
	if err := WriteManifest(nil, dir, []uint64{3, 1}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(nil, dir)
	if err != nil || !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("ReadManifest = %v, %v", got, err)
	}
	// The manifest is not an SSTable file.
	files, err := Files(nil, dir)
	if err != nil || len(files) != 0 {
		t.Fatalf("Files = %v, %v; want none", files, err)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	for _, gens := range [][]uint64{nil, {1}, {1, 2, 3}, {7, 1 << 63}} {
		b := EncodeManifest(gens)
		f.Add(b)
		f.Add(b[:len(b)-1])
		bad := bytes.Clone(b)
		bad[len(bad)/2] ^= 0x04
		f.Add(bad)
	}
	f.Add([]byte{})
	f.Add([]byte("idemkvMF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		gens, err := DecodeManifest(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		for i := 1; i < len(gens); i++ {
			if gens[i] <= gens[i-1] {
				t.Fatalf("decoded generations %v not strictly increasing", gens)
			}
		}
		if re := EncodeManifest(gens); !bytes.Equal(re, b) {
			t.Fatalf("accepted %x, which re-encodes as %x", b, re)
		}
	})
}
