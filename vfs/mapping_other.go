//go:build !linux

package vfs

import (
	"fmt"
	"os"
)

func mapOS(f *os.File, size int64) (Mapping, error) {
	return nil, fmt.Errorf("vfs: map %s: %w", f.Name(), ErrMapUnsupported)
}
