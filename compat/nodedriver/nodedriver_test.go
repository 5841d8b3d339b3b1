package nodedriver

import (
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	t.Setenv(DirEnv, "")
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "idemkv", "node-cassandra-driver-"+Version); d != want {
		t.Errorf("Dir() = %q, want %q", d, want)
	}
	t.Setenv(DirEnv, "/somewhere/node")
	if d, _ := Dir(); d != "/somewhere/node" {
		t.Errorf("Dir() with %s = %q", DirEnv, d)
	}
}

// TestReadyIncomplete: a directory without the marker is not an install.
func TestReadyIncomplete(t *testing.T) {
	if ready(t.TempDir()) {
		t.Error("an empty directory is ready")
	}
}
