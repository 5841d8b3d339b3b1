package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the file in a data directory that the node owning the
// directory holds an exclusive lock on (and writes its pid to).
const LockFile = "LOCK"

// ErrDataDirLocked is wrapped by the error of Start when another node holds
// the data directory.
var ErrDataDirLocked = errors.New("data directory in use")

// lockDataDir takes the lock of a data directory on the operating system's
// filesystem: an flock on dir/LOCK, held until the returned file closes (a
// killed process releases it too). A directory another node holds is an
// error naming the directory and the holder's pid.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("node: data directory %s: %w", dir, err)
	}
	name := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node: lock data directory %s: %w", dir, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("node: lock %s: %w", name, err)
	}
	if held {
		b, _ := os.ReadFile(name)
		f.Close()
		holder := "another process"
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			holder = fmt.Sprintf("pid %d", pid)
			if pid == os.Getpid() {
				holder = fmt.Sprintf("another node of this process (pid %d)", pid)
			}
		}
		return nil, fmt.Errorf("node: data directory %s is locked by %s (%s): %w", dir, holder, name, ErrDataDirLocked)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
