package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/idemkv/idemkv/vfs"
)

// ManifestName is the file, in the log's directory, that lists the segments
// that should exist (see the package documentation).
const ManifestName = "CommitLog-manifest"

// ManifestMagic starts the manifest file.
const ManifestMagic = "IDCM"

// manifestVersion is the manifest's format version.
const manifestVersion = 1

// ErrMissingSegment is wrapped by the *CorruptionError Open returns when a
// segment that should exist is missing.
var ErrMissingSegment = errors.New("commitlog: segment file missing")

// encodeManifest returns the manifest bytes listing ids (sorted ascending,
// no duplicates).
func encodeManifest(ids []uint64) []byte {
	b := make([]byte, 0, 12+8*len(ids)+4)
	b = append(b, ManifestMagic...)
	b = binary.BigEndian.AppendUint32(b, manifestVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	return binary.BigEndian.AppendUint32(b, crc(b))
}

// decodeManifest parses a manifest. The encoding is canonical: a manifest
// that decodes re-encodes to the same bytes.
func decodeManifest(b []byte) ([]uint64, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("manifest is %d bytes, shorter than the minimum 16", len(b))
	}
	if got, want := binary.BigEndian.Uint32(b[len(b)-4:]), crc(b[:len(b)-4]); got != want {
		return nil, fmt.Errorf("manifest checksum %#08x, want %#08x", got, want)
	}
	if string(b[:4]) != ManifestMagic {
		return nil, fmt.Errorf("bad manifest magic %q", b[:4])
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != manifestVersion {
		return nil, fmt.Errorf("unsupported manifest version %d", v)
	}
	n := uint64(binary.BigEndian.Uint32(b[8:]))
	if uint64(len(b)) != 16+8*n {
		return nil, fmt.Errorf("manifest lists %d ids but is %d bytes", n, len(b))
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = binary.BigEndian.Uint64(b[12+8*i:])
		if i > 0 && ids[i] <= ids[i-1] {
			return nil, fmt.Errorf("manifest ids not strictly ascending at index %d (%d after %d)", i, ids[i], ids[i-1])
		}
	}
	return ids, nil
}

// readManifest returns the manifest's ids, or ok false if there is none.
func readManifest(fsys vfs.FS, dir string) (ids []uint64, ok bool, err error) {
	path := filepath.Join(dir, ManifestName)
	b, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("commitlog: read manifest: %w", err)
	}
	ids, err = decodeManifest(b)
	if err != nil {
		return nil, false, &CorruptionError{Path: path, Reason: "bad manifest: " + err.Error(), Err: err}
	}
	return ids, true, nil
}

// writeManifest durably replaces the manifest with ids; l.manMu is held.
func (l *Log) writeManifest(ids []uint64) error {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if err := vfs.WriteFileAtomic(l.opts.FS, l.opts.Dir, ManifestName, encodeManifest(ids)); err != nil {
		return fmt.Errorf("commitlog: write manifest %s: %w", filepath.Join(l.opts.Dir, ManifestName), err)
	}
	return nil
}
