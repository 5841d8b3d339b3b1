package sstable

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/idemkv/idemkv/vfs"
)

// ManifestName is the name of a table directory's manifest: the list of its
// live generations (see the package comment, # Manifest).
const ManifestName = "MANIFEST"

const (
	// manifestMagic opens a manifest: "idemkvMF".
	manifestMagic uint64 = 0x69_64_65_6d_6b_76_4d_46
	// manifestVersion is the version of the manifest layout in doc.go.
	manifestVersion uint32 = 1
	// manifestFixed is the size of a manifest that lists no generation.
	manifestFixed = 8 + 4 + 4 + 4
)

// EncodeManifest returns the manifest bytes of a set of live generations,
// which it sorts and deduplicates (gens itself is not modified).
func EncodeManifest(gens []uint64) []byte {
	gens = slices.Clone(gens)
	slices.Sort(gens)
	gens = slices.Compact(gens)
	b := make([]byte, 0, manifestFixed+8*len(gens))
	b = appendU64(b, manifestMagic)
	b = appendU32(b, manifestVersion)
	b = appendU32(b, uint32(len(gens)))
	for _, g := range gens {
		b = appendU64(b, g)
	}
	return appendU32(b, crc(b))
}

// DecodeManifest returns the generations a manifest lists, in increasing
// order. Bytes that are not a manifest of a known version, whose checksum
// does not match, or whose generations are not strictly increasing yield an
// error wrapping ErrCorrupt.
func DecodeManifest(b []byte) ([]uint64, error) {
	if len(b) < manifestFixed {
		return nil, fmt.Errorf("%w: manifest of %d bytes is shorter than %d", ErrCorrupt, len(b), manifestFixed)
	}
	if m := binary.BigEndian.Uint64(b); m != manifestMagic {
		return nil, fmt.Errorf("%w: manifest: bad magic %016x", ErrCorrupt, m)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc(body); got != sum {
		return nil, fmt.Errorf("%w: manifest: checksum %08x, stored %08x", ErrCorrupt, got, sum)
	}
	if v := binary.BigEndian.Uint32(b[8:]); v != manifestVersion {
		return nil, fmt.Errorf("%w: manifest: unknown version %d", ErrCorrupt, v)
	}
	n := uint64(binary.BigEndian.Uint32(b[12:]))
	if uint64(len(b)-manifestFixed) != 8*n {
		return nil, fmt.Errorf("%w: manifest: %d generations in %d bytes", ErrCorrupt, n, len(b))
	}
	gens := make([]uint64, n)
	for i := range gens {
		gens[i] = binary.BigEndian.Uint64(b[16+8*i:])
		if i > 0 && gens[i] <= gens[i-1] {
			return nil, fmt.Errorf("%w: manifest: generation %d after %d", ErrCorrupt, gens[i], gens[i-1])
		}
	}
	return gens, nil
}

// ReadManifest reads and decodes the manifest of dir. A missing manifest is
// an error wrapping fs.ErrNotExist.
func ReadManifest(fsys vfs.FS, dir string) ([]uint64, error) {
	name := filepath.Join(dir, ManifestName)
	b, err := vfs.Or(fsys).ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("sstable: read manifest: %w", err)
	}
	gens, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("sstable: %s: %w", name, err)
	}
	return gens, nil
}

// WriteManifest replaces the manifest of dir atomically (vfs.WriteFileAtomic)
// with one listing gens: when it returns nil the new list is durable, and a
// crash before leaves the old one.
func WriteManifest(fsys vfs.FS, dir string, gens []uint64) error {
	if err := vfs.WriteFileAtomic(fsys, dir, ManifestName, EncodeManifest(gens)); err != nil {
		return fmt.Errorf("sstable: write manifest of %s: %w", dir, err)
	}
	return nil
}

// Files returns the SSTable files of dir grouped by generation: the names of
// every component file, temporary ones (.tmp) included, TOC or not. Other
// files (the manifest among them) are not listed.
func Files(fsys vfs.FS, dir string) (map[uint64][]string, error) {
	gens, err := scan(fsys, dir)
	if err != nil {
		return nil, err
	}
	for gen, comps := range gens {
		for i, c := range comps {
			comps[i] = fileName(gen, c)
		}
	}
	return gens, nil
}

// IsComplete reports whether the file names of one generation (as Files
// returns them) include its TOC.
func IsComplete(gen uint64, names []string) bool {
	return slices.Contains(names, fileName(gen, tocComponent))
}
