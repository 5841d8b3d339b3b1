package commitlog

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// testRand returns a seeded source. IDEMKV_SEED replays a failing run; the
// seed is printed when the test fails.
func testRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("IDEMKV_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("bad IDEMKV_SEED %q: %v", s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (replay with IDEMKV_SEED=%d)", seed, seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func randBytes(r *rand.Rand, n int) []byte {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randRecord(r *rand.Rand, maxPayload int) Record {
	rec := Record{
		Table:     r.Uint64(),
		Key:       randBytes(r, r.IntN(24)),
		Column:    string(randBytes(r, r.IntN(12))),
		Kind:      PayloadKind(1 + r.IntN(3)),
		Payload:   randBytes(r, r.IntN(maxPayload+1)),
		Timestamp: r.Int64() - r.Int64(),
	}
	if r.IntN(2) == 0 {
		rec.HasOp = true
		copy(rec.OpID[:], randBytes(r, 16))
		rec.OpTime = r.Int64()
		if r.IntN(2) == 0 {
			rec.Led, rec.Delta, rec.Compensation = true, r.Int64()-r.Int64(), r.IntN(2) == 0
			for range r.IntN(4) - 1 {
				c := CarriedOp{OpTime: r.Int64(), Delta: r.Int64() - r.Int64(), Clock: r.Int64(), Compensation: r.IntN(4) == 0}
				copy(c.OpID[:], randBytes(r, 16))
				rec.Carried = append(rec.Carried, c)
			}
		}
	}
	return rec
}

func recordsEqual(a, b Record) bool {
	return a.Table == b.Table && bytes.Equal(a.Key, b.Key) && a.Column == b.Column &&
		a.Kind == b.Kind && bytes.Equal(a.Payload, b.Payload) && a.Timestamp == b.Timestamp &&
		a.HasOp == b.HasOp && a.OpID == b.OpID && a.OpTime == b.OpTime &&
		a.Led == b.Led && a.Delta == b.Delta && a.Compensation == b.Compensation && slices.Equal(a.Carried, b.Carried)
}

type logged struct {
	pos Position
	rec Record
}

// collector is a replay function that records what it is given.
type collector struct {
	mu  sync.Mutex
	got []logged
}

func (c *collector) replay(p Position, r Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, logged{p, r})
	return nil
}

// logBuffer is a slog handler target safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// mustOpen opens a log and fails the test on error.
func mustOpen(t testing.TB, opts Options, replay func(Position, Record) error) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	l, err := Open(opts, replay)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// replayAll opens dir, returns what was replayed, and closes the log.
func replayAll(t testing.TB, opts Options) []logged {
	t.Helper()
	var c collector
	l := mustOpen(t, opts, c.replay)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return c.got
}

// checkSame fails unless got equals want, compared in position order.
func checkSame(t testing.TB, got, want []logged) {
	t.Helper()
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b logged) int { return a.pos.Compare(b.pos) })
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].pos != want[i].pos {
			t.Fatalf("record %d at %v, want %v", i, got[i].pos, want[i].pos)
		}
		if !recordsEqual(got[i].rec, want[i].rec) {
			t.Fatalf("record %d at %v differs:\n got %+v\nwant %+v", i, got[i].pos, got[i].rec, want[i].rec)
		}
	}
}

// segFiles returns the segment file paths in dir, by id.
func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type f struct {
		id   uint64
		path string
	}
	var fs []f
	for _, e := range entries {
		if _, id, ok := parseSegmentName(e.Name()); ok {
			fs = append(fs, f{id, filepath.Join(dir, e.Name())})
		}
	}
	slices.SortFunc(fs, func(a, b f) int { return int(a.id) - int(b.id) })
	var out []string
	for _, x := range fs {
		out = append(out, x.path)
	}
	return out
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func frameSize(r *Record) int64 { return int64(r.EncodedSize() + FrameOverhead) }

var _ = fmt.Sprintf
