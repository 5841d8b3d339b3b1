// Package cqlshpy provisions the real cqlsh, the Python shell published on
// PyPI, for idemkv's compatibility tests: on first use it creates a Python
// virtual environment in the user's cache directory with `python3 -m venv`
// and installs the pinned cqlsh and DataStax driver into it with pip; later
// uses (and other processes, serialized by a lock file) reuse it.
package cqlshpy

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

// Version is the pinned cqlsh release (PyPI package cqlsh).
const Version = "6.2.2"

// DriverVersion is the pinned DataStax Python driver (PyPI package
// cassandra-driver) that cqlsh runs on.
const DriverVersion = "3.30.1"

// SkipEnv is the environment variable that, set to 1, makes tests skip
// rather than fail when cqlsh cannot be provisioned (no python3, no PyPI).
const SkipEnv = "IDEMKV_SKIP_CQLSH"

// PythonEnv names the Python interpreter that creates the venv
// (default python3); the venv is made only once, so set it before the
// first run or remove the venv.
const PythonEnv = "IDEMKV_CQLSH_PYTHON"

// VenvEnv, if set, is the venv's directory instead of the cache's.
const VenvEnv = "IDEMKV_CQLSH_VENV"

// ErrUnavailable wraps every provisioning failure.
var ErrUnavailable = errors.New("the real cqlsh is unavailable")

// doneMarker is written into the venv once pip has installed everything.
const doneMarker = ".idemkv-complete"

// Dir is the virtual environment's directory: $IDEMKV_CQLSH_VENV if
// set, else the user's cache directory ($XDG_CACHE_HOME or ~/.cache) in
// idemkv/cqlsh-venv-<cqlsh>-<driver>.
func Dir() (string, error) {
	if d := os.Getenv(VenvEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), "idemkv-cache")
	}
	return filepath.Join(base, "idemkv", "cqlsh-venv-"+Version+"-"+DriverVersion), nil
}

// Ensure returns the path of the cqlsh script in the provisioned virtual
// environment, creating and installing it first if needed. Concurrent
// callers, in this process or others, wait on a lock file next to the
// venv. The error, if any, wraps ErrUnavailable and carries pip's output.
func Ensure(ctx context.Context) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bin", "cqlsh")
	if ready(dir) {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("%w: cache directory: %w", ErrUnavailable, err)
	}
	unlock, err := flock.Lock(dir + ".lock")
	if err != nil {
		return "", fmt.Errorf("%w: lock %s.lock: %w", ErrUnavailable, dir, err)
	}
	defer unlock()
	if ready(dir) { // another process installed it while we waited
		return bin, nil
	}
	if err := os.RemoveAll(dir); err != nil { // a half-made venv
		return "", fmt.Errorf("%w: remove %s: %w", ErrUnavailable, dir, err)
	}
	name := os.Getenv(PythonEnv)
	if name == "" {
		name = "python3"
	}
	python, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found (install Python 3 with venv and pip, or set %s): %w", ErrUnavailable, name, PythonEnv, err)
	}
	if err := run(ctx, python, "-m", "venv", dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("%w: %s -m venv %s: %w", ErrUnavailable, name, dir, err)
	}
	pip := filepath.Join(dir, "bin", "pip")
	// Few retries and a short socket timeout: an unreachable PyPI should
	// fail the test in a minute or two, not hang it.
	if err := run(ctx, pip, "install", "--disable-pip-version-check", "--quiet", "--retries", "2", "--timeout", "30",
		"cqlsh=="+Version, "cassandra-driver=="+DriverVersion); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("%w: pip install cqlsh==%s cassandra-driver==%s (is PyPI reachable?): %w",
			ErrUnavailable, Version, DriverVersion, err)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%w: pip installed no cqlsh script: %w", ErrUnavailable, err)
	}
	if err := os.WriteFile(filepath.Join(dir, doneMarker), []byte("cqlsh=="+Version+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return bin, nil
}

// ready reports whether dir holds a complete venv whose interpreter
// still exists (a venv's python is a symlink to the one that made it).
func ready(dir string) bool {
	for _, f := range []string{doneMarker, "bin/python", "bin/cqlsh"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

// run runs a command, returning its combined output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)\n%s", ctx.Err(), err, strings.TrimSpace(string(out)))
	}
	if err != nil {
		return fmt.Errorf("%w\n%s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
