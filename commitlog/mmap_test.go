package commitlog

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/vfs"
)

// TestMappedSegments runs a mapped log on the real filesystem: the active
// segment is preallocated to SegmentSize, a sealed one is cut to the bytes
// it holds, and a copy of the directory taken while the log runs — what a
// process killed at that moment leaves, since the mapping's stores are in the
// page cache — replays every acknowledged record, cutting the preallocated
// tail with an info line only. Close cuts the active segment too.
func TestMappedSegments(t *testing.T) {
	dir := t.TempDir()
	const segSize = 2048
	l := mustOpen(t, Options{Dir: dir, Sync: SyncPeriodic, SyncPeriod: time.Hour, Access: AccessMmap, SegmentSize: segSize}, nil)
	if !l.mapped {
		t.Skip("the temporary directory's filesystem cannot map segments")
	}
	rng := testRand(t)
	var want []logged
	for len(l.Segments()) < 3 {
		r := randRecord(rng, 200)
		pos, err := l.Append(&r)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, logged{pos, r})
	}
	files := segFiles(t, dir)
	segs := l.Segments()
	if len(files) != len(segs) {
		t.Fatalf("%d segment files for %d segments", len(files), len(segs))
	}
	for i, s := range segs {
		size := fileSize(t, files[i])
		if i < len(segs)-1 && size != s.Size {
			t.Errorf("sealed segment %d is %d bytes on disk, want its %d written bytes", s.ID, size, s.Size)
		}
		if i == len(segs)-1 && size != segSize {
			t.Errorf("active segment %d is %d bytes on disk, want the %d preallocated", s.ID, size, segSize)
		}
	}

	var logs logBuffer
	killed := copyDir(t, dir) // no Close, no Sync: what a SIGKILL leaves
	checkSame(t, replayAll(t, Options{Dir: killed, SegmentSize: segSize, Logger: newLogger(&logs)}), want)
	if got := logs.String(); !strings.Contains(got, "level=INFO msg=\"commitlog: cutting the unwritten zero tail") || strings.Contains(got, "level=WARN") {
		t.Errorf("reopening a killed mapped log logged:\n%s\nwant one info line about the zero tail and no warning", got)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	last := l.Segments()[len(segs)-1]
	if size := fileSize(t, files[len(files)-1]); size != last.Size {
		t.Errorf("after Close the last segment is %d bytes on disk, want its %d written bytes", size, last.Size)
	}
	checkSame(t, replayAll(t, Options{Dir: dir, SegmentSize: segSize}), want)
}

// TestMappedTailOfAnotherSize checks that a zero tail counts as a mapped
// segment's unwritten preallocation only in a file of exactly SegmentSize
// bytes: any other zero tail is a torn write, cut with a warning.
func TestMappedTailOfAnotherSize(t *testing.T) {
	mem := vfs.NewMem()
	l := mustOpen(t, Options{Dir: crashDir, FS: mem, Access: AccessMmap, SegmentSize: 4096, SyncPeriod: time.Hour}, nil)
	r := Record{Kind: PayloadShard, Payload: []byte("x")}
	if _, err := l.Append(&r); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	l.Close()
	var logs logBuffer
	got := replayAll(t, Options{Dir: crashDir, FS: crashed, SegmentSize: 8192, Logger: newLogger(&logs)})
	if len(got) != 1 {
		t.Fatalf("replayed %d records, want 1", len(got))
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"commitlog: truncating torn tail") {
		t.Errorf("a zero tail in a segment of another size logged:\n%s\nwant the torn-tail warning", logs.String())
	}
}

// TestAccessModeParse covers ParseAccessMode and an invalid Options.Access.
func TestAccessModeParse(t *testing.T) {
	for s, want := range map[string]AccessMode{"auto": AccessAuto, "legacy": AccessAuto, "mmap": AccessMmap, "standard": AccessStandard} {
		if got, err := ParseAccessMode(s); err != nil || got != want {
			t.Errorf("ParseAccessMode(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseAccessMode("direct"); err == nil {
		t.Error("ParseAccessMode accepted direct")
	}
	if _, err := Open(Options{Dir: t.TempDir(), Access: AccessMode(9)}, nil); err == nil || errors.Is(err, ErrClosed) {
		t.Errorf("Open with an unknown access mode: %v", err)
	}
}
