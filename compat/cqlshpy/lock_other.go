//go:build !unix

package cqlshpy

import "errors"

// lock is unsupported off Unix: the tests and the helper run on Linux.
func lock(path string) (func(), error) {
	return nil, errors.New("cqlshpy: lock files need a Unix system")
}
