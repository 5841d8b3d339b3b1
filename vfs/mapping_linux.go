package vfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// osMapping is a shared, writable mmap(2) of a file of Default.
type osMapping struct {
	name string
	b    []byte
}

func mapOS(f *os.File, size int64) (Mapping, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("vfs: map %s: %w", f.Name(), err)
	}
	var b []byte
	var opErr error
	err = rc.Control(func(fd uintptr) {
		var st syscall.Stat_t
		if opErr = syscall.Fstat(int(fd), &st); opErr != nil {
			opErr = fmt.Errorf("fstat: %w", opErr)
			return
		}
		for {
			opErr = syscall.Fallocate(int(fd), 0, 0, size)
			if opErr != syscall.EINTR {
				break
			}
		}
		if opErr != nil {
			if errors.Is(opErr, syscall.EOPNOTSUPP) || errors.Is(opErr, syscall.ENOSYS) {
				opErr = fmt.Errorf("fallocate: %w (%w)", opErr, ErrMapUnsupported)
			} else {
				opErr = fmt.Errorf("fallocate %d bytes: %w", size, opErr)
			}
			return
		}
		b, opErr = syscall.Mmap(int(fd), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if opErr != nil {
			// Leave the file as it was, so that a caller falling back to
			// writes does not write ahead of a preallocated tail.
			if terr := syscall.Ftruncate(int(fd), st.Size); terr != nil {
				opErr = fmt.Errorf("mmap: %w (and cutting the preallocation back: %v)", opErr, terr)
				return
			}
			if errors.Is(opErr, syscall.ENODEV) {
				opErr = fmt.Errorf("mmap: %w (%w)", opErr, ErrMapUnsupported)
			} else {
				opErr = fmt.Errorf("mmap: %w", opErr)
			}
		}
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return nil, fmt.Errorf("vfs: map %s: %w", f.Name(), err)
	}
	return &osMapping{name: f.Name(), b: b}, nil
}

func (m *osMapping) WriteAt(p []byte, off int64) (int, error) {
	if m.b == nil {
		return 0, fmt.Errorf("vfs: write to %s: %w", m.name, errMapClosed)
	}
	if err := mapBounds(m.name, off, len(p), int64(len(m.b))); err != nil {
		return 0, err
	}
	return copy(m.b[off:], p), nil
}

func (m *osMapping) Close() error {
	if m.b == nil {
		return fmt.Errorf("vfs: unmap %s: %w", m.name, errMapClosed)
	}
	err := syscall.Munmap(m.b)
	m.b = nil
	if err != nil {
		return fmt.Errorf("vfs: unmap %s: %w", m.name, err)
	}
	return nil
}
