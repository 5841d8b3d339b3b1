package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// long bounds waits that should end quickly; it only keeps a broken test
// from hanging.
const long = 10 * time.Second

func longCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), long)
	t.Cleanup(cancel)
	return ctx
}

// logCapture is a slog.Handler that keeps records for assertions.
type logCapture struct {
	mu      sync.Mutex
	records []string
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCapture) WithGroup(string) slog.Handler            { return l }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, b.String())
	l.mu.Unlock()
	return nil
}

// find returns the first record containing every part.
func (l *logCapture) find(parts ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, r := range l.records {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		return r, true
	}
	return "", false
}

func (l *logCapture) dump(t testing.TB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		t.Log("log: " + r)
	}
}

// waitFor polls cond until it holds or long passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(long)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitGoroutines waits until no more than n goroutines run.
func waitGoroutines(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(long)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustErr(t testing.TB, err error, want ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Fatalf("error %q does not wrap %v", err, w)
		}
	}
}

func mustNotErr(t testing.TB, err error, not ...error) {
	t.Helper()
	for _, w := range not {
		if errors.Is(err, w) {
			t.Fatalf("error %q wraps %v, it should not", err, w)
		}
	}
}
