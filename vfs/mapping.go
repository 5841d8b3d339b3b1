package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Mapping is a file's bytes mapped into memory for writing: WriteAt copies
// into the file's current bytes without a system call. What is written
// through a mapping is in the file as soon as WriteAt returns, as it would be
// after write(2): a process that dies keeps it, and reads see it. A machine
// crash keeps it only once File.Sync on the mapped file has returned, the
// same rule as for written bytes.
//
// A Mapping is not safe for concurrent use; the file it maps must not be
// truncated below the mapped size while the Mapping is open (a write past the
// end of the operating system's file would kill the process with SIGBUS).
type Mapping interface {
	// WriteAt copies p to the file at offset off; off+len(p) must not pass
	// the mapped size.
	WriteAt(p []byte, off int64) (int, error)
	// Close unmaps the file; the File stays open.
	Close() error
}

// ErrMapUnsupported is returned (wrapped) by Map for a file that cannot be
// mapped: the platform, the filesystem or the File's implementation does not
// offer it. Callers fall back to File.Write.
var ErrMapUnsupported = errors.New("vfs: file cannot be mapped for writing")

// Map preallocates f, which must be open for reading and writing, to at
// least size bytes and maps its first size bytes for writing. Preallocation
// reserves the disk blocks (fallocate(2) on Linux), so that a write through
// the mapping never needs space the disk may not have; the bytes it adds are
// zeros and make the file's size size. Like a write, the new size is durable
// only after File.Sync.
//
// Files of Default on Linux and files of a MemFS can be mapped, and so can
// a File that wraps one of them (one that adds to a method, such as timing
// its Sync) if it says so with an Unwrap method (see Unwrapper): the
// mapping's writes go to the wrapped file directly. Any other File, or a
// filesystem without fallocate or mmap, gets ErrMapUnsupported, and the
// file is left at its size.
func Map(f File, size int64) (Mapping, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("vfs: map %s: invalid size %d", f.Name(), size)
	}
	inner := f
	for {
		switch g := inner.(type) {
		case *os.File:
			return mapOS(g, size)
		case *memFile:
			return g.mapFile(size)
		case Unwrapper:
			inner = g.Unwrap()
			continue
		}
		return nil, fmt.Errorf("vfs: map %s: %w", f.Name(), ErrMapUnsupported)
	}
}

// Unwrapper is a File that wraps another and lets Map reach it.
type Unwrapper interface {
	// Unwrap returns the wrapped File.
	Unwrap() File
}

// errMapClosed is returned by a write to a closed Mapping.
var errMapClosed = fmt.Errorf("mapping is closed: %w", fs.ErrClosed)

// mapBounds checks a write of n bytes at off against a mapping of size bytes.
func mapBounds(name string, off int64, n int, size int64) error {
	if off < 0 || off+int64(n) > size {
		return fmt.Errorf("vfs: write of %d bytes at offset %d of %s runs past the %d mapped bytes", n, off, name, size)
	}
	return nil
}

// memMapping maps a MemFS file: its writes go to the file's current bytes
// under the filesystem's lock, so that Sync and CrashClone see exactly what
// was written, as the kernel's page cache would. Like a real mapping, it
// outlives the File it was made from.
type memMapping struct {
	fs     *MemFS
	node   *memNode
	name   string
	size   int64
	closed bool
}

// mapFile is Map for a MemFS file: the file grows to size with zeros (a
// FailWrite match fails it, as a failing fallocate would).
func (f *memFile) mapFile(size int64) (Mapping, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("map", true, true); err != nil {
		return nil, fmt.Errorf("vfs: %w", err)
	}
	if f.fs.writeMatch != nil && f.fs.writeMatch(f.name) {
		return nil, fmt.Errorf("vfs: %w", pathErr("fallocate", f.name, f.fs.writeErr))
	}
	if size > int64(len(f.node.data)) {
		f.node.grow(size)
	}
	return &memMapping{fs: f.fs, node: f.node, name: f.name, size: size}, nil
}

// WriteAt copies p into the file's current bytes. A write error cannot be
// injected here (a store to memory reports none; the disk's error would
// surface at Sync, which FailSync models).
func (m *memMapping) WriteAt(p []byte, off int64) (int, error) {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if m.closed {
		return 0, fmt.Errorf("vfs: write to %s: %w", m.name, errMapClosed)
	}
	if err := mapBounds(m.name, off, len(p), m.size); err != nil {
		return 0, err
	}
	if off+int64(len(p)) > int64(len(m.node.data)) {
		// The operating system would kill the process with SIGBUS.
		return 0, fmt.Errorf("vfs: write to %s at offset %d: the file was truncated to %d bytes under its mapping",
			m.name, off, len(m.node.data))
	}
	m.node.touch(off, off+int64(len(p)))
	return copy(m.node.data[off:], p), nil
}

func (m *memMapping) Close() error {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if m.closed {
		return fmt.Errorf("vfs: unmap %s: %w", m.name, errMapClosed)
	}
	m.closed = true
	return nil
}
