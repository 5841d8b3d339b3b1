//go:build unix

// Package flock takes exclusive file locks across processes, for the
// provisioning of caches shared by concurrent test binaries.
package flock

import (
	"os"
	"syscall"
)

// Lock takes an exclusive flock on path, waiting for it; the lock goes
// with the process if it dies.
func Lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
