package cqlshpy

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/idemkv/idemkv/internal/flock"
)

func TestDir(t *testing.T) {
	t.Setenv(VenvEnv, "")
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "idemkv", "cqlsh-venv-"+Version+"-"+DriverVersion); d != want {
		t.Errorf("Dir() = %q, want %q", d, want)
	}
	t.Setenv(VenvEnv, "/somewhere/venv")
	if d, _ := Dir(); d != "/somewhere/venv" {
		t.Errorf("Dir() with %s = %q", VenvEnv, d)
	}
}

// TestLockExcludes: holders of the lock file never overlap, whether they
// are goroutines or processes (flock locks open files, not processes).
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	var mu sync.Mutex
	held, overlaps := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := flock.Lock(path)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			held++
			if held > 1 {
				overlaps++
			}
			mu.Unlock()
			for j := 0; j < 100; j++ {
				runtime.Gosched() // let the others try the lock
			}
			mu.Lock()
			held--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if overlaps != 0 {
		t.Errorf("%d overlapping holders", overlaps)
	}
}

// TestEnsureNoPython: a missing interpreter is ErrUnavailable, named.
func TestEnsureNoPython(t *testing.T) {
	t.Setenv(VenvEnv, filepath.Join(t.TempDir(), "venv"))
	t.Setenv(PythonEnv, "idemkv-no-such-python")
	_, err := Ensure(t.Context())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "idemkv-no-such-python not found") {
		t.Fatalf("Ensure without python: %v", err)
	}
}
