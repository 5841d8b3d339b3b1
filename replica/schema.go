package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/vfs"
)

// schemaFile is the data directory's record of its tables, rewritten
// atomically (temp file, fsync, rename, fsync dir) on every change. It must be
// read before the commit log is replayed, since records name tables by id.
//
// Version 1 held the tables only. Version 2 adds the ids of dropped tables,
// so that replay tells a record of a dropped table (skipped) from one of a
// table the schema lost (an error), and states that every table directory
// has an SSTable manifest (sstable.ManifestName). A version 1 file is read,
// and rewritten as version 2 once the replica has opened.
const schemaFile = "schema.json"

// schemaVersion is the version saveSchema writes.
const schemaVersion = 2

type schemaDoc struct {
	Version int                `json:"version"`
	Tables  []coltype.TableDef `json:"tables"`
	// Dropped lists the ids of dropped tables, increasing (version 2).
	Dropped []uint64 `json:"dropped,omitempty"`
}

// loadSchema reads the schema file; found is false when it does not exist.
func loadSchema(fsys vfs.FS, dir string) (doc schemaDoc, found bool, err error) {
	name := filepath.Join(dir, schemaFile)
	b, err := fsys.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return schemaDoc{}, false, nil
	}
	if err != nil {
		return schemaDoc{}, false, fmt.Errorf("replica: read schema: %w", err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return schemaDoc{}, false, fmt.Errorf("replica: schema %s is corrupt: %w", name, err)
	}
	if doc.Version != 1 && doc.Version != schemaVersion {
		return schemaDoc{}, false, fmt.Errorf("replica: schema %s has version %d, want 1 or %d", name, doc.Version, schemaVersion)
	}
	if doc.Version == 1 && len(doc.Dropped) > 0 {
		return schemaDoc{}, false, fmt.Errorf("replica: schema %s: version 1 lists dropped tables", name)
	}
	for _, d := range doc.Tables {
		if err := d.Validate(); err != nil {
			return schemaDoc{}, false, fmt.Errorf("replica: schema %s: %w", name, err)
		}
	}
	return doc, true, nil
}

func saveSchema(fsys vfs.FS, dir string, defs []coltype.TableDef, dropped map[uint64]bool) error {
	defs = append([]coltype.TableDef(nil), defs...)
	sort.Slice(defs, func(i, j int) bool { return defs[i].ID < defs[j].ID })
	doc := schemaDoc{Version: schemaVersion, Tables: defs}
	for id := range dropped {
		doc.Dropped = append(doc.Dropped, id)
	}
	slices.Sort(doc.Dropped)
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("replica: encode schema: %w", err)
	}
	return writeFileAtomic(fsys, dir, schemaFile, b)
}

// writeFileAtomic replaces dir/name with data so that a crash leaves either
// the old or the new file, never a torn one.
func writeFileAtomic(fsys vfs.FS, dir, name string, data []byte) error {
	if err := vfs.WriteFileAtomic(fsys, dir, name, data); err != nil {
		return fmt.Errorf("replica: write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}
