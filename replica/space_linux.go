package replica

import "syscall"

// volumeBytes is the size of the filesystem holding path.
func volumeBytes(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, false
	}
	return int64(st.Blocks) * st.Bsize, true
}
