package commitlog

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemkv/idemkv/vfs"
)

const memDir = "/db/commitlog"

// memLog writes n records in batch mode to a log on a new MemFS with small
// segments, closes it and returns the FS, the records and the segment ids
// that hold records, oldest first.
func memLog(t *testing.T, n int) (*vfs.MemFS, []logged, []uint64) {
	t.Helper()
	rng := testRand(t)
	mem := vfs.NewMem()
	l := mustOpen(t, Options{Dir: memDir, FS: mem, SegmentSize: 512, Sync: SyncBatch}, nil)
	var want []logged
	for i := 0; i < n; i++ {
		rec := randRecord(rng, 60)
		p, err := l.Append(&rec)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, logged{p, rec})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, w := range want {
		if len(ids) == 0 || ids[len(ids)-1] != w.pos.Segment {
			ids = append(ids, w.pos.Segment)
		}
	}
	if len(ids) < 4 {
		t.Fatalf("setup: records in only %d segments", len(ids))
	}
	return mem, want, ids
}

func memPath(id uint64) string { return filepath.Join(memDir, SegmentName(id)) }

// without returns want minus the records of the given segments.
func without(want []logged, ids ...uint64) []logged {
	return slices.DeleteFunc(slices.Clone(want), func(w logged) bool { return slices.Contains(ids, w.pos.Segment) })
}

// expectMissing checks that Open fails naming every path, and that with
// SkipCorrupt it logs each at ERROR, continues and replays wantSkip.
func expectMissing(t *testing.T, mem *vfs.MemFS, paths []string, wantSkip []logged) {
	t.Helper()
	_, err := Open(Options{Dir: memDir, FS: mem, Logger: quietLogger()}, nil)
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrMissingSegment) || ce.Path != paths[0] {
		t.Fatalf("Open with %v missing: %v, want a CorruptionError wrapping ErrMissingSegment", paths, err)
	}
	for _, p := range paths {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not name %s", err, p)
		}
	}
	var logs logBuffer
	got := replayAll(t, Options{Dir: memDir, FS: mem, SkipCorrupt: true, Logger: newLogger(&logs)})
	checkSame(t, got, wantSkip)
	for _, p := range paths {
		if !logLineHas(logs.String(), "level=ERROR", p) {
			t.Fatalf("no ERROR line names %s:\n%s", p, logs.String())
		}
	}
	// The operator's choice sticks: the next Open does not complain again.
	if got := replayAll(t, Options{Dir: memDir, FS: mem}); len(got) != len(wantSkip) {
		t.Fatalf("second Open after SkipCorrupt replayed %d records, want %d", len(got), len(wantSkip))
	}
}

func logLineHas(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func TestMissingSegment(t *testing.T) {
	for _, which := range []string{"oldest", "middle", "newest", "two"} {
		t.Run(which, func(t *testing.T) {
			mem, want, ids := memLog(t, 30)
			var lost []uint64
			switch which {
			case "oldest":
				lost = ids[:1]
			case "middle":
				lost = ids[2:3]
			case "newest":
				lost = ids[len(ids)-1:]
			case "two":
				lost = []uint64{ids[1], ids[3]}
			}
			var paths []string
			for _, id := range lost {
				if err := mem.Lose(memPath(id)); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, memPath(id))
			}
			expectMissing(t, mem, paths, without(want, lost...))
		})
	}
}

// TestMissingAfterReopen loses the newest segment when it holds no record
// (the active segment of an Open that wrote nothing): the manifest lists it,
// so it is still reported missing.
func TestMissingAfterReopen(t *testing.T) {
	mem, want, _ := memLog(t, 30)
	checkSame(t, replayAll(t, Options{Dir: memDir, FS: mem}), want)
	segs := replayedSegments(t, mem)
	newest := segs[len(segs)-1].Path
	if err := mem.Lose(newest); err != nil {
		t.Fatal(err)
	}
	expectMissing(t, mem, []string{newest}, want)
}

// replayedSegments opens the log on mem, closes it and returns its segments.
func replayedSegments(t *testing.T, mem *vfs.MemFS) []SegmentInfo {
	t.Helper()
	l := mustOpen(t, Options{Dir: memDir, FS: mem}, nil)
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return segs
}

func TestMissingSegmentWithoutManifest(t *testing.T) {
	mem, want, ids := memLog(t, 30)
	if err := mem.Lose(filepath.Join(memDir, ManifestName)); err != nil {
		t.Fatal(err)
	}
	// Without a manifest only gaps can be seen.
	if err := mem.Lose(memPath(ids[2])); err != nil {
		t.Fatal(err)
	}
	expectMissing(t, mem, []string{memPath(ids[2])}, without(want, ids[2]))
}

func TestEmptiedNewestSegment(t *testing.T) {
	for _, how := range []string{"empty", "short", "zeros"} {
		t.Run(how, func(t *testing.T) {
			mem, want, ids := memLog(t, 30)
			newest := ids[len(ids)-1]
			p := memPath(newest)
			switch how {
			case "empty":
				mem.Cut(p, 0)
			case "short":
				mem.Cut(p, HeaderSize-1)
			case "zeros":
				f, err := mem.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				st, _ := f.Stat()
				f.Write(make([]byte, st.Size()))
				f.Close()
			}
			_, err := Open(Options{Dir: memDir, FS: mem, Logger: quietLogger()}, nil)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Path != p || !strings.Contains(err.Error(), p) {
				t.Fatalf("Open with the newest segment emptied: %v, want a CorruptionError naming %s", err, p)
			}
			if _, err := mem.Stat(p); err != nil {
				t.Fatalf("emptied segment was deleted: %v", err)
			}
			var logs logBuffer
			got := replayAll(t, Options{Dir: memDir, FS: mem, SkipCorrupt: true, Logger: newLogger(&logs)})
			checkSame(t, got, without(want, newest))
			if !logLineHas(logs.String(), "level=ERROR", p) {
				t.Fatalf("no ERROR line names %s:\n%s", p, logs.String())
			}
		})
	}
}

func TestTornAtCreationRecovers(t *testing.T) {
	for _, size := range []int{0, 7, HeaderSize - 1, HeaderSize} {
		mem, want, ids := memLog(t, 30)
		// A file the manifest never listed: created (its entry reached the
		// disk early) but the crash came before its header was durable.
		next := ids[len(ids)-1] + 1
		torn := memPath(next)
		f, err := mem.OpenFile(torn, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if size == HeaderSize {
			f.Write(make([]byte, size))
		} else {
			f.Write(appendHeader(nil, next)[:size])
		}
		f.Close()
		var logs logBuffer
		opts := Options{Dir: memDir, FS: mem, Logger: newLogger(&logs)}
		checkSame(t, replayAll(t, opts), want)
		if _, err := mem.Stat(torn); err == nil {
			t.Fatalf("%d-byte torn segment not deleted", size)
		}
		if !logLineHas(logs.String(), "level=WARN", torn) {
			t.Fatalf("deletion of %s not logged at WARN:\n%s", torn, logs.String())
		}
		checkSame(t, replayAll(t, opts), want)
	}
}

// TestReleaseHoles releases around a retained segment: the hole is not a
// missing segment, on reopen or after a crash.
func TestReleaseHoles(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	retain := map[uint64]bool{}
	var logs logBuffer
	opts := Options{Dir: memDir, FS: mem, SegmentSize: 512, Sync: SyncBatch, Logger: newLogger(&logs),
		Retain: func(s SegmentInfo) bool { mu.Lock(); defer mu.Unlock(); return retain[s.ID] }}
	l := mustOpen(t, opts, nil)
	rng := testRand(t)
	var want []logged
	for i := 0; i < 40; i++ {
		rec := randRecord(rng, 60)
		p, err := l.Append(&rec)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, logged{p, rec})
	}
	segs := l.Segments()
	keep := segs[2].ID
	mu.Lock()
	retain[keep] = true
	mu.Unlock()
	upTo := Position{segs[4].ID, HeaderSize}
	if err := l.Release(upTo); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs[:4] {
		if s.ID != keep && !logLineHas(logs.String(), "deleting released segment", s.Path) {
			t.Fatalf("release of %s not logged:\n%s", s.Path, logs.String())
		}
	}
	l.Close()
	var expect []logged
	for _, w := range want {
		if w.pos.Segment == keep || !w.pos.Less(upTo) {
			expect = append(expect, w)
		}
	}
	checkSame(t, replayAll(t, Options{Dir: memDir, FS: mem}), expect)
	checkSame(t, replayAll(t, Options{Dir: memDir, FS: mem.CrashClone(vfs.CrashOptions{})}), expect)
}

// TestReleaseUndoneByCrash: Release's deletions are not durable when the
// crash comes before the directory sync; the reappearing segments were
// released, so Open deletes them (logged) and does not replay them.
func TestReleaseUndoneByCrash(t *testing.T) {
	mem, want, ids := memLog(t, 30)
	l := mustOpen(t, Options{Dir: memDir, FS: mem, SegmentSize: 512}, nil)
	// Only the manifest's own directory sync (inside WriteFileAtomic) may
	// succeed: let the next SyncDir call lie.
	var mu sync.Mutex
	calls := 0
	mem.FailSync(func(name string) bool {
		if name != memDir {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		return calls > 1
	}, nil)
	upTo := Position{ids[2], HeaderSize}
	if err := l.Release(upTo); err != nil {
		t.Fatal(err)
	}
	mem.FailSync(nil, nil)
	crashed := mem.CrashClone(vfs.CrashOptions{})
	l.Close()
	for _, id := range ids[:2] {
		if _, err := crashed.Stat(memPath(id)); err != nil {
			t.Fatalf("setup: released segment %d did not reappear: %v", id, err)
		}
	}
	var logs logBuffer
	got := replayAll(t, Options{Dir: memDir, FS: crashed, Logger: newLogger(&logs)})
	checkSame(t, got, without(want, ids[:2]...))
	for _, id := range ids[:2] {
		if _, err := crashed.Stat(memPath(id)); err == nil {
			t.Fatalf("released segment %d not deleted", id)
		}
		if !logLineHas(logs.String(), "level=WARN", memPath(id)) {
			t.Fatalf("deletion of %s not logged at WARN:\n%s", memPath(id), logs.String())
		}
	}
}

func TestCorruptManifest(t *testing.T) {
	mem, want, _ := memLog(t, 30)
	man := filepath.Join(memDir, ManifestName)
	if err := mem.Corrupt(man, 13, 0x10); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: memDir, FS: mem, Logger: quietLogger()}, nil)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != man {
		t.Fatalf("Open with a corrupt manifest: %v", err)
	}
	var logs logBuffer
	checkSame(t, replayAll(t, Options{Dir: memDir, FS: mem, SkipCorrupt: true, Logger: newLogger(&logs)}), want)
	if !logLineHas(logs.String(), "level=ERROR", man) {
		t.Fatalf("corrupt manifest not logged:\n%s", logs.String())
	}
	// SkipCorrupt's Open rewrote it.
	checkSame(t, replayAll(t, Options{Dir: memDir, FS: mem}), want)
}

func TestManifestEncoding(t *testing.T) {
	for _, ids := range [][]uint64{nil, {1}, {2, 5, 6, math.MaxUint64}} {
		b := encodeManifest(ids)
		got, err := decodeManifest(b)
		if err != nil || !slices.Equal(got, ids) {
			t.Fatalf("round trip of %v: %v, %v", ids, got, err)
		}
	}
	good := encodeManifest([]uint64{3, 4})
	if !bytes.Equal(good[:4], []byte(ManifestMagic)) || len(good) != 16+16 {
		t.Fatalf("layout: %x", good)
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 1
		if _, err := decodeManifest(b); err == nil {
			t.Fatalf("flip at byte %d accepted", i)
		}
	}
	if _, err := decodeManifest(encodeManifest([]uint64{4, 3})); err == nil {
		t.Fatal("descending ids accepted")
	}
	if _, err := decodeManifest(good[:len(good)-1]); err == nil {
		t.Fatal("short manifest accepted")
	}
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeManifest(nil))
	f.Add(encodeManifest([]uint64{1}))
	f.Add(encodeManifest([]uint64{1, 2, 3, 1 << 40}))
	f.Add(encodeManifest([]uint64{3, 3}))
	f.Add([]byte("IDCM\x00\x00\x00\x01\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := decodeManifest(b)
		if err != nil {
			return
		}
		if again := encodeManifest(ids); !bytes.Equal(again, b) {
			t.Fatalf("decode/encode not canonical:\n in %x\nout %x", b, again)
		}
	})
}
