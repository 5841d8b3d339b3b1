//go:build !unix

// Package flock takes exclusive file locks across processes, for the
// provisioning of caches shared by concurrent test binaries.
package flock

import "errors"

// Lock is unsupported off Unix: idemkv's tests run on Linux.
func Lock(path string) (func(), error) {
	return nil, errors.New("flock: lock files need a Unix system")
}
