//go:build !unix

package nodedriver

import "errors"

// lock is unsupported off Unix: the tests and the helper run on Linux.
func lock(path string) (func(), error) {
	return nil, errors.New("nodedriver: lock files need a Unix system")
}
