package commitlog

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
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
	if l.Access() != AccessMmap {
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

// TestAccessModeParse covers ParseAccessMode, an invalid Options.Access
// and the mode Access reports.
func TestAccessModeParse(t *testing.T) {
	for _, c := range []struct{ asked, got AccessMode }{{AccessAuto, AccessMmap}, {AccessMmap, AccessMmap}, {AccessStandard, AccessStandard}} {
		l := mustOpen(t, Options{Dir: crashDir, FS: vfs.NewMem(), Access: c.asked}, nil)
		if got := l.Access(); got != c.got {
			t.Errorf("a log on a MemFS opened with %v uses %v, want %v", c.asked, got, c.got)
		}
		l.Close()
	}
	for s, want := range map[string]AccessMode{"auto": AccessAuto, "legacy": AccessAuto, "mmap": AccessMmap, "standard": AccessStandard} {
		if got, err := ParseAccessMode(s); err != nil || got != want {
			t.Errorf("ParseAccessMode(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, c := range []struct {
		asked AccessMode
		level string
	}{{AccessAuto, "INFO"}, {AccessMmap, "WARN"}} {
		var logs logBuffer
		l := mustOpen(t, Options{Dir: crashDir, FS: noMapFS{vfs.NewMem()}, Access: c.asked, Logger: newLogger(&logs)}, nil)
		if got := l.Access(); got != AccessStandard {
			t.Errorf("a log whose files cannot be mapped, opened with %v, uses %v", c.asked, got)
		}
		if want := "level=" + c.level + " msg=\"commitlog: segments cannot be mapped here"; !strings.Contains(logs.String(), want) {
			t.Errorf("falling back from %v logged:\n%s\nwant %s", c.asked, logs.String(), want)
		}
		r := Record{Kind: PayloadShard, Payload: []byte("x")}
		if _, err := l.Append(&r); err != nil {
			t.Errorf("append after falling back from %v: %v", c.asked, err)
		}
		l.Close()
	}
	if _, err := ParseAccessMode("direct"); err == nil {
		t.Error("ParseAccessMode accepted direct")
	}
	if _, err := Open(Options{Dir: t.TempDir(), Access: AccessMode(9)}, nil); err == nil || errors.Is(err, ErrClosed) {
		t.Errorf("Open with an unknown access mode: %v", err)
	}
}

// childDirEnv makes the test binary an appender for
// TestLogSurvivesSIGKILL: it appends to the log in that directory and prints
// each acknowledged record's sequence number.
const childDirEnv = "IDEMKV_COMMITLOG_CHILD_DIR"

// TestLogSurvivesSIGKILL kills a real process that appends to a periodic
// log (fsync every hour: none happens) with SIGKILL after a seeded number of
// acknowledged appends, and checks that the log, reopened, replays every
// record the process had acknowledged, in order, with mmap access (stores in
// the page cache) as with write(2).
func TestLogSurvivesSIGKILL(t *testing.T) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		appendForever(dir, os.Getenv(childDirEnv+"_ACCESS"))
		return
	}
	if testing.Short() {
		t.Skip("runs a child process")
	}
	rng := testRand(t)
	for _, access := range []AccessMode{AccessMmap, AccessStandard} {
		t.Run(access.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestLogSurvivesSIGKILL$")
			cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childDirEnv+"_ACCESS="+access.String())
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			want := 1000 + rng.IntN(20000)
			sc := bufio.NewScanner(out)
			acked := -1
			for acked < want && sc.Scan() {
				if n, err := strconv.Atoi(sc.Text()); err == nil {
					acked = n
				}
			}
			cmd.Process.Kill() // SIGKILL
			cmd.Wait()
			if acked < want {
				t.Fatalf("the child stopped after acknowledging %d appends: %v", acked, sc.Err())
			}
			next := 0
			mustOpen(t, Options{Dir: dir}, func(_ Position, r Record) error {
				if n, _ := strconv.Atoi(string(r.Key)); n == next {
					next++
				}
				return nil
			}).Close()
			if next <= acked {
				t.Errorf("replayed records 0..%d in order; the killed process had acknowledged 0..%d", next-1, acked)
			}
			t.Logf("killed after %d acknowledged appends; %d replayed", acked+1, next)
		})
	}
}

// appendForever is the child of TestLogSurvivesSIGKILL.
func appendForever(dir, access string) {
	mode, err := ParseAccessMode(access)
	if err != nil {
		panic(err)
	}
	l, err := Open(Options{Dir: dir, Sync: SyncPeriodic, SyncPeriod: time.Hour, Access: mode,
		SegmentSize: 256 << 10, Logger: quietLogger()}, nil)
	if err != nil {
		panic(err)
	}
	for seq := 0; ; seq++ {
		r := Record{Kind: PayloadShard, Key: []byte(strconv.Itoa(seq)), Payload: make([]byte, 64)}
		if _, err := l.Append(&r); err != nil {
			panic(err)
		}
		fmt.Fprintln(os.Stdout, seq)
	}
}

// noMapFS is a MemFS whose files hide what they are, so that vfs.Map
// cannot map them (as on a filesystem without fallocate).
type noMapFS struct{ vfs.FS }

type hiddenFile struct{ vfs.File }

func (f noMapFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return hiddenFile{file}, nil
}
