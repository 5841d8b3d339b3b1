//go:build !linux

package replica

// volumeBytes is the size of the filesystem holding path: unknown here.
func volumeBytes(string) (int64, bool) { return 0, false }
