package sstable

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/idemkv/idemkv/vfs"
)

// File names follow Cassandra 3.0+: <version>-<generation>-big-<Component>.
const (
	filePrefix = "ik-"
	fileInfix  = "-big-"
	tmpSuffix  = ".tmp"

	dataComponent       = "Data.db"
	indexComponent      = "Index.db"
	summaryComponent    = "Summary.db"
	filterComponent     = "Filter.db"
	statisticsComponent = "Statistics.db"
	tocComponent        = "TOC.txt"
)

// components lists, in the order the TOC names them, every component but the
// TOC itself.
var components = []string{dataComponent, indexComponent, summaryComponent, filterComponent, statisticsComponent}

// tocContents is the exact text of a TOC: one component name a line.
var tocContents = strings.Join(append(slices.Clone(components), tocComponent), "\n") + "\n"

// fileName returns the name of one component of generation gen.
func fileName(gen uint64, component string) string {
	return filePrefix + strconv.FormatUint(gen, 10) + fileInfix + component
}

func path(dir string, gen uint64, component string) string {
	return filepath.Join(dir, fileName(gen, component))
}

// parseName returns the generation and component (with any .tmp suffix) of a
// table file name.
func parseName(name string) (gen uint64, component string, ok bool) {
	rest, ok := strings.CutPrefix(name, filePrefix)
	if !ok {
		return 0, "", false
	}
	num, component, ok := strings.Cut(rest, fileInfix)
	if !ok || num == "" || component == "" {
		return 0, "", false
	}
	gen, err := strconv.ParseUint(num, 10, 64)
	if err != nil || strconv.FormatUint(gen, 10) != num {
		return 0, "", false
	}
	return gen, component, true
}

// scan groups the table files of dir by generation.
func scan(fsys vfs.FS, dir string) (map[uint64][]string, error) {
	ents, err := vfs.Or(fsys).ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sstable: list %s: %w", dir, err)
	}
	gens := make(map[uint64][]string)
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if gen, comp, ok := parseName(e.Name()); ok {
			gens[gen] = append(gens[gen], comp)
		}
	}
	return gens, nil
}

// List returns the complete generations in dir, sorted: those whose TOC
// exists. Files of incomplete generations (an interrupted write or removal)
// are ignored; RemoveIncomplete deletes them.
func List(dir string) ([]uint64, error) { return ListFS(nil, dir) }

// ListFS is List on fsys (nil: vfs.Default).
func ListFS(fsys vfs.FS, dir string) ([]uint64, error) {
	gens, err := scan(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for gen, comps := range gens {
		if slices.Contains(comps, tocComponent) {
			out = append(out, gen)
		}
	}
	slices.Sort(out)
	return out, nil
}

// RemoveIncomplete deletes the files of every generation in dir that has no
// TOC, and every temporary file. Call it at startup, before any Writer of dir
// exists: it would delete a Writer's files in progress.
func RemoveIncomplete(dir string) error { return RemoveIncompleteFS(nil, dir) }

// RemoveIncompleteFS is RemoveIncomplete on fsys (nil: vfs.Default).
func RemoveIncompleteFS(fsys vfs.FS, dir string) error {
	fsys = vfs.Or(fsys)
	gens, err := scan(fsys, dir)
	if err != nil {
		return err
	}
	removed := false
	var errs []error
	for gen, comps := range gens {
		complete := slices.Contains(comps, tocComponent)
		for _, c := range comps {
			if complete && !strings.HasSuffix(c, tmpSuffix) {
				continue
			}
			if err := fsys.Remove(path(dir, gen, c)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("sstable: remove incomplete generation %d: %w", gen, err))
			}
			removed = true
		}
	}
	if removed {
		if err := syncDir(fsys, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Remove deletes every component of generation gen, the TOC first so that an
// interrupted removal leaves an incomplete generation, never a table with
// missing components. Close its Reader first.
func Remove(dir string, gen uint64) error { return RemoveFS(nil, dir, gen) }

// RemoveFS is Remove on fsys (nil: vfs.Default).
func RemoveFS(fsys vfs.FS, dir string, gen uint64) error {
	fsys = vfs.Or(fsys)
	toc := path(dir, gen, tocComponent)
	if err := fsys.Remove(toc); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sstable: remove generation %d: %w", gen, err)
	}
	if err := syncDir(fsys, dir); err != nil {
		return err
	}
	var errs []error
	for _, c := range components {
		for _, name := range []string{c, c + tmpSuffix} {
			if err := fsys.Remove(path(dir, gen, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("sstable: remove generation %d: %w", gen, err))
			}
		}
	}
	if err := syncDir(fsys, dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// syncDir fsyncs a directory so that renames and removals in it are durable.
func syncDir(fsys vfs.FS, dir string) error {
	if err := vfs.Or(fsys).SyncDir(dir); err != nil {
		return fmt.Errorf("sstable: sync dir %s: %w", dir, err)
	}
	return nil
}
