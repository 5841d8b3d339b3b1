// Package vfs is the filesystem seam of idemkv's storage: the commit log,
// the SSTables and a node's metadata files (host id, schema, peers) reach
// the disk only through an FS, so that tests can run them on an in-memory
// filesystem that crashes the way a machine does (see NewMem) while a node
// runs on the operating system's (Default).
//
// The contract is POSIX's, with the durability rules of a journaling Linux
// filesystem made explicit, because the in-memory implementation enforces
// them and code that passes on it is correct on ext4 and xfs:
//
//   - Data written to a file is durable only after File.Sync on that file.
//   - A created, renamed or removed directory entry is durable only after
//     SyncDir on the directory that holds it (a new file that was synced but
//     whose directory was not may vanish at a crash; a rename may revert).
//   - Rename replaces its target atomically.
//
// NewMem returns a MemFS, an in-memory FS that enforces these rules: each
// file has current and durable bytes (File.Sync copies the first to the
// second), each directory current and durable entries (SyncDir copies them);
// directories themselves are durable as soon as MkdirAll creates them.
// MemFS.CrashClone returns the filesystem a crash would leave (unsynced bytes
// and entries lost, optionally a seeded random prefix of unsynced writes
// kept as a torn write, or seeded random pages of them kept, out of order); the old MemFS and its open files are unaffected and
// never reach the clone. Lose, Corrupt and Cut inject disk faults that
// survive crashes; FailSync and FailWrite inject I/O errors (or a Sync that
// lies) so that sticky-error paths can be tested.
//
// Map preallocates a file and maps it for writing (a Mapping): writes then
// cost a copy into memory rather than a system call, with the durability
// of a write — kept when the process dies, durable after File.Sync. Files of
// Default (on Linux) and of a MemFS can be mapped.
//
// Nothing here is safe for use by more than one goroutine on the same File
// unless the File's method says so; an FS is safe for concurrent use.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync makes the file's written data durable.
	Sync() error
	// Truncate changes the file's size (not its offset).
	Truncate(size int64) error
	// Stat describes the file; Size is what has been written so far.
	Stat() (fs.FileInfo, error)
	// Name is the path the file was opened with.
	Name() string
}

// FS is a filesystem. Paths are the host's (filepath), absolute or relative
// to the process's working directory for Default.
type FS interface {
	// OpenFile opens a file with os.OpenFile's flags: O_RDONLY, O_WRONLY,
	// O_RDWR, O_CREATE, O_EXCL, O_TRUNC and O_APPEND are honoured.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Open opens a file for reading.
	Open(name string) (File, error)
	// ReadFile returns a file's contents.
	ReadFile(name string) ([]byte, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and everything below it; a missing path is
	// not an error.
	RemoveAll(path string) error
	// Rename moves oldname to newname, replacing newname atomically.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(dir string) ([]fs.DirEntry, error)
	// Stat describes a path.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

// Or returns fsys, or Default when fsys is nil: the rule every Options.FS
// field follows.
func Or(fsys FS) FS {
	if fsys == nil {
		return Default
	}
	return fsys
}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) ReadFile(name string) ([]byte, error)        { return os.ReadFile(name) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(path string) error                 { return os.RemoveAll(path) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some filesystems (and some platforms) cannot sync a directory.
	if errors.Is(err, os.ErrInvalid) {
		return nil
	}
	return err
}

// WriteFileAtomic replaces dir/name with data so that a crash leaves either
// the old file or the new one, never a torn one: it writes and syncs
// name+".tmp", renames it over name and syncs the directory.
func WriteFileAtomic(fsys FS, dir, name string, data []byte) error {
	fsys = Or(fsys)
	tmp := filepath.Join(dir, name+".tmp")
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}
