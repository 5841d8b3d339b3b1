// Package nodedriver provisions the DataStax Node.js driver (npm package
// cassandra-driver) for idemkv's compatibility tests, as package cqlshpy
// provisions cqlsh: on first use `npm install` puts the pinned version
// into a directory of the user's cache; later uses (and other processes,
// serialized by a lock file) reuse it.
package nodedriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/idemkv/idemkv/internal/flock"
)

// Version is the pinned driver release (npm package cassandra-driver).
const Version = "4.8.0"

// RequireEnv is the environment variable that, set to 1, makes tests fail
// rather than skip when the driver cannot be provisioned (no node or npm,
// no npm registry).
const RequireEnv = "IDEMKV_REQUIRE_NODE_DRIVER"

// DirEnv, if set, is the install directory instead of the cache's.
const DirEnv = "IDEMKV_NODE_DRIVER_DIR"

// ErrUnavailable wraps every provisioning failure.
var ErrUnavailable = errors.New("the Node.js cassandra-driver is unavailable")

// doneMarker is written into the directory once npm has installed the driver.
const doneMarker = ".idemkv-complete"

// Dir is the install directory: $IDEMKV_NODE_DRIVER_DIR if set, else the
// user's cache directory ($XDG_CACHE_HOME or ~/.cache) in
// idemkv/node-cassandra-driver-<version>.
func Dir() (string, error) {
	if d := os.Getenv(DirEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), "idemkv-cache")
	}
	return filepath.Join(base, "idemkv", "node-cassandra-driver-"+Version), nil
}

// Ensure returns the path of the node interpreter and the install
// directory, whose node_modules holds the driver (run scripts with
// NODE_PATH set to it), installing it first if needed. The error, if any,
// wraps ErrUnavailable and carries npm's output.
func Ensure(ctx context.Context) (node, dir string, err error) {
	if dir, err = Dir(); err != nil {
		return "", "", err
	}
	if node, err = exec.LookPath("node"); err != nil {
		return "", "", fmt.Errorf("%w: node not found: %w", ErrUnavailable, err)
	}
	if ready(dir) {
		return node, dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "", fmt.Errorf("%w: npm not found: %w", ErrUnavailable, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", fmt.Errorf("%w: cache directory: %w", ErrUnavailable, err)
	}
	unlock, err := flock.Lock(dir + ".lock")
	if err != nil {
		return "", "", fmt.Errorf("%w: lock %s.lock: %w", ErrUnavailable, dir, err)
	}
	defer unlock()
	if ready(dir) { // another process installed it while we waited
		return node, dir, nil
	}
	if err := os.RemoveAll(dir); err != nil { // a half-made install
		return "", "", fmt.Errorf("%w: remove %s: %w", ErrUnavailable, dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// A package.json of its own, so npm installs here and not into a
	// parent's project; few retries, so an unreachable registry fails the
	// provisioning in a minute or two, not hangs it.
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name": "idemkv-node-driver", "private": true}`+"\n"), 0o644); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-save", "--fetch-retries=2",
		"--fetch-timeout=30000", "cassandra-driver@"+Version)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("%w: npm install cassandra-driver@%s (is the npm registry reachable?): %w\n%s",
			ErrUnavailable, Version, err, strings.TrimSpace(string(out)))
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "cassandra-driver", "package.json")); err != nil {
		return "", "", fmt.Errorf("%w: npm installed no cassandra-driver: %w", ErrUnavailable, err)
	}
	if err := os.WriteFile(filepath.Join(dir, doneMarker), []byte("cassandra-driver@"+Version+"\n"), 0o644); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return node, dir, nil
}

// ready reports whether dir holds a complete install.
func ready(dir string) bool {
	for _, f := range []string{doneMarker, "node_modules/cassandra-driver/package.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}
