package commitlog

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var allModes = []SyncMode{SyncPeriodic, SyncBatch, SyncGroup}

// writeRecords appends recs from `writers` goroutines, half with Append and
// half with AppendAsync, and returns them with their positions.
func writeRecords(t *testing.T, l *Log, recs []Record, writers int) []logged {
	t.Helper()
	out := make([]logged, len(recs))
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(recs); i += writers {
				var pos Position
				if i%2 == 0 {
					p, err := l.Append(&recs[i])
					if err != nil {
						errs <- err
						return
					}
					pos = p
				} else {
					p := l.AppendAsync(&recs[i])
					if err := p.Wait(); err != nil && l.opts.Sync != SyncPeriodic {
						errs <- err
						return
					}
					pos = p.Position
				}
				out[i] = logged{pos, recs[i]}
			}
		}(w)
	}
	// Periodic AppendAsync waits for a sync: provide some.
	stop := make(chan struct{})
	if l.opts.Sync == SyncPeriodic {
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					l.Sync()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	return out
}

func TestRoundTripConcurrent(t *testing.T) {
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			rng := testRand(t)
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentSize: 2048, Sync: mode, GroupWindow: time.Millisecond}
			recs := make([]Record, 600)
			for i := range recs {
				recs[i] = randRecord(rng, 100)
			}
			l := mustOpen(t, opts, nil)
			want := writeRecords(t, l, recs, 8)
			infos := l.Segments()
			if len(infos) < 5 {
				t.Fatalf("only %d segments; expected several rolls", len(infos))
			}
			n := 0
			for _, in := range infos {
				n += in.Records
				if in.Size > opts.SegmentSize {
					t.Errorf("segment %d is %d bytes, over SegmentSize %d", in.ID, in.Size, opts.SegmentSize)
				}
			}
			if n != len(recs) {
				t.Fatalf("Segments counts %d records, want %d", n, len(recs))
			}
			end := l.Position()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkSame(t, replayAll(t, opts), want)

			// Ids continue after the highest, and later appends come after.
			var c collector
			l = mustOpen(t, opts, c.replay)
			checkSame(t, c.got, want)
			act := l.Segments()[len(l.Segments())-1]
			if act.ID <= end.Segment {
				t.Fatalf("new active segment id %d, want > %d", act.ID, end.Segment)
			}
			more := writeRecords(t, l, recs[:50], 4)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkSame(t, replayAll(t, opts), append(want, more...))
		})
	}
}

func TestDurability(t *testing.T) {
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			rng := testRand(t)
			l := mustOpen(t, Options{Dir: t.TempDir(), Sync: mode}, nil)
			defer l.Close()
			for i := 0; i < 20; i++ {
				rec := randRecord(rng, 100)
				if mode != SyncPeriodic {
					pos, err := l.Append(&rec)
					if err != nil {
						t.Fatal(err)
					}
					if d := l.Durable(); !pos.Less(d) {
						t.Fatalf("Append returned %v but Durable is %v", pos, d)
					}
				}
				p := l.AppendAsync(&rec)
				if mode == SyncPeriodic {
					select {
					case <-p.Done():
						if p.Position.Less(l.Durable()) {
							break // a concurrent periodic sync covered it
						}
						t.Fatal("periodic AppendAsync done before any sync")
					default:
					}
					if err := l.Sync(); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.Wait(); err != nil {
					t.Fatal(err)
				}
				if d := l.Durable(); !p.Position.Less(d) {
					t.Fatalf("AppendAsync done at %v but Durable is %v", p.Position, d)
				}
				if got := l.Position(); !p.Position.Less(got) {
					t.Fatalf("Position %v not past the last record %v", got, p.Position)
				}
			}
		})
	}
}

func TestPeriodicBlocksWhenSyncLags(t *testing.T) {
	l := mustOpen(t, Options{Dir: t.TempDir(), SyncPeriod: time.Hour}, nil)
	defer l.Close()
	rec := Record{Kind: PayloadShard, Payload: []byte("x")}
	if _, err := l.Append(&rec); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.lastSync = time.Now().Add(-2 * time.Hour)
	l.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := l.Append(&rec); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("Append returned (%v) while the last sync was 2 periods old", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOversizedAndClosed(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, SegmentSize: 4096, Sync: SyncBatch}, nil)
	big := Record{Kind: PayloadShard, Payload: make([]byte, 2048)}
	if _, err := l.Append(&big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append of %d-byte frame: err %v, want ErrTooLarge", frameSize(&big), err)
	}
	if p := l.AppendAsync(&big); !errors.Is(p.Wait(), ErrTooLarge) {
		t.Fatalf("AppendAsync oversized: %v", p.Err())
	}
	fits := Record{Kind: PayloadShard, Payload: make([]byte, 2048-FrameOverhead-recordFixedSize)}
	if frameSize(&fits) != 2048 {
		t.Fatalf("test setup: frame %d", frameSize(&fits))
	}
	if _, err := l.Append(&fits); err != nil {
		t.Fatalf("frame of exactly half a segment refused: %v", err)
	}
	if _, err := l.Append(&Record{Kind: 0}); err == nil {
		t.Fatal("record of unknown kind accepted")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append(&fits); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if p := l.AppendAsync(&fits); !errors.Is(p.Wait(), ErrClosed) {
		t.Fatalf("AppendAsync after Close: %v", p.Err())
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if got := replayAll(t, Options{Dir: dir}); len(got) != 1 {
		t.Fatalf("replayed %d records, want 1", len(got))
	}
}

func TestStickyWriteError(t *testing.T) {
	for _, mode := range allModes {
		for _, access := range []AccessMode{AccessStandard, AccessMmap} {
			t.Run(mode.String()+"/"+access.String(), func(t *testing.T) {
				l := mustOpen(t, Options{Dir: t.TempDir(), Sync: mode, Access: access}, nil)
				rec := Record{Kind: PayloadShard, Payload: []byte("x")}
				if _, err := l.Append(&rec); err != nil {
					t.Fatal(err)
				}
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				durable := l.Durable()
				// Break the file under the log: the next write fails (a
				// mapping outlives its file descriptor, so with mmap the
				// next fsync does).
				l.ioMu.Lock()
				l.lastSeg.f.Close()
				l.ioMu.Unlock()
				_, err1 := l.Append(&rec)
				if mode == SyncPeriodic && access == AccessStandard && err1 == nil {
					t.Fatal("periodic Append succeeded on a closed file")
				}
				err2 := l.Sync()
				_, err3 := l.Append(&rec)
				p := l.AppendAsync(&rec)
				errs := []error{err2, err3, p.Wait()}
				if mode != SyncPeriodic || access != AccessMmap { // a store into the mapping succeeds
					errs = append(errs, err1)
				}
				for i, err := range errs {
					if err == nil || errors.Is(err, ErrClosed) {
						t.Errorf("error %d after failed write = %v, want the write error", i, err)
					}
				}
				if got := l.Durable(); got != durable {
					t.Errorf("Durable moved from %v to %v after a failed write", durable, got)
				}
				if err := l.Close(); err == nil {
					t.Error("Close reported success after a failed write")
				}
			})
		}
	}
}

func TestRelease(t *testing.T) {
	dir := t.TempDir()
	retainID := uint64(2)
	var mu sync.Mutex
	keep := true
	var offered []uint64
	opts := Options{Dir: dir, SegmentSize: 512, Sync: SyncBatch, Retain: func(s SegmentInfo) bool {
		mu.Lock()
		defer mu.Unlock()
		offered = append(offered, s.ID)
		return keep && s.ID == retainID
	}}
	l := mustOpen(t, opts, nil)
	defer l.Close()
	rec := Record{Kind: PayloadShard, Payload: make([]byte, 100), HasOp: true, OpTime: 5}
	var pos []Position
	for i := 0; i < 30; i++ {
		p, err := l.Append(&rec)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	ids := func() []uint64 {
		var out []uint64
		var size int64
		for _, s := range l.Segments() {
			if _, err := os.Stat(s.Path); err != nil {
				t.Fatalf("segment %d listed but its file: %v", s.ID, err)
			}
			out = append(out, s.ID)
			size += s.Size
		}
		if n := len(segFiles(t, dir)); n != len(out) {
			t.Fatalf("%d segment files, %d listed", n, len(out))
		}
		if got := l.Size(); got != size {
			t.Fatalf("Size %d, the segments listed hold %d bytes", got, size)
		}
		return out
	}
	before := ids()
	if len(before) < 5 {
		t.Fatalf("only %d segments", len(before))
	}
	first := before[0]
	for _, s := range l.Segments()[:len(before)-1] {
		if s.OpRecords != s.Records || s.MinOpTime != 5 || s.MaxOpTime != 5 {
			t.Fatalf("segment info %+v", s)
		}
	}
	// Release up to the first record of segment first+3: segments first..first+2 go, but
	// first+1 (id 2) is retained.
	var upTo Position
	for _, p := range pos {
		if p.Segment == first+3 {
			upTo = p
			break
		}
	}
	// A position inside segment first+2 does not release it.
	if err := l.Release(Position{first + 2, HeaderSize + 1}); err != nil {
		t.Fatal(err)
	}
	if got := ids(); got[0] != first+1 || got[1] != first+2 {
		t.Fatalf("after partial release: segments %v", got)
	}
	if err := l.Release(upTo); err != nil {
		t.Fatal(err)
	}
	got := ids()
	if got[0] != retainID || got[1] != first+3 || len(got) != len(before)-2 {
		t.Fatalf("after Release(%v): segments %v (before %v)", upTo, got, before)
	}
	mu.Lock()
	keep = false
	offered = nil
	mu.Unlock()
	if err := l.Release(upTo); err != nil {
		t.Fatal(err)
	}
	if got := ids(); got[0] != first+3 {
		t.Fatalf("after retain lifted: segments %v", got)
	}
	if len(offered) != 1 || offered[0] != retainID {
		t.Fatalf("Retain offered %v, want only the retained segment", offered)
	}
	// Releasing everything keeps the active segment.
	if err := l.Release(Position{math.MaxUint64, math.MaxInt64}); err != nil {
		t.Fatal(err)
	}
	got = ids()
	if len(got) != 1 || got[0] != before[len(before)-1] {
		t.Fatalf("after releasing all: segments %v", got)
	}
	if _, err := l.Append(&rec); err != nil {
		t.Fatal(err)
	}
}

// lastFrame writes n records in one segment, closes the log and returns the
// segment path, the records and the last record's frame offset and size.
func writeOneSegment(t *testing.T, n int) (dir, path string, want []logged) {
	t.Helper()
	rng := testRand(t)
	dir = t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Sync: SyncBatch}, nil)
	for i := 0; i < n; i++ {
		rec := randRecord(rng, 100)
		p, err := l.Append(&rec)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, logged{p, rec})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := segFiles(t, dir)
	return dir, files[len(files)-1], want
}

func TestTornTail(t *testing.T) {
	const n = 8
	dir, path, want := writeOneSegment(t, n)
	last := want[n-1]
	lastOff := last.pos.Offset
	frame := frameSize(&last.rec)
	if fileSize(t, path) != lastOff+frame {
		t.Fatalf("setup: file %d bytes, want %d", fileSize(t, path), lastOff+frame)
	}
	check := func(t *testing.T, mutate func(b []byte) []byte, wantDrop bool) {
		t.Helper()
		d := copyDir(t, dir)
		p := filepath.Join(d, filepath.Base(path))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = mutate(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var logs logBuffer
		opts := Options{Dir: d, Sync: SyncBatch, Logger: newLogger(&logs)}
		var c collector
		l, err := Open(opts, c.replay)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		checkSame(t, c.got, want[:n-1])
		if got := fileSize(t, p); got != lastOff {
			t.Fatalf("file is %d bytes after Open, want truncation to %d", got, lastOff)
		}
		if dropped := int64(len(b)) - lastOff; wantDrop && dropped > 0 {
			if s := logs.String(); !strings.Contains(s, p) || !strings.Contains(s, "dropped_bytes="+strconv.FormatInt(dropped, 10)) {
				t.Fatalf("log does not name the file and %d dropped bytes:\n%s", dropped, s)
			}
		}
		extra := Record{Kind: PayloadTombstone, Key: []byte("after")}
		pos, err := l.Append(&extra)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		checkSame(t, replayAll(t, opts), append(want[:n-1:n-1], logged{pos, extra}))
	}
	for cut := lastOff; cut < lastOff+frame; cut++ {
		check(t, func(b []byte) []byte { return b[:cut] }, true)
	}
	// A torn tail followed by zeros (e.g. a file extended but not written).
	for _, cut := range []int64{lastOff + 3, lastOff + 8, lastOff + frame - 1} {
		check(t, func(b []byte) []byte { return append(b[:cut], make([]byte, 4096)...) }, true)
	}
	// Every single-byte flip inside the last frame is a torn tail too.
	for off := lastOff; off < lastOff+frame; off++ {
		check(t, func(b []byte) []byte { b[off] ^= 0x40; return b }, true)
	}
}

func TestTornHeader(t *testing.T) {
	dir, _, want := writeOneSegment(t, 3)
	// A newest segment torn at creation is deleted.
	torn := filepath.Join(dir, SegmentName(100))
	if err := os.WriteFile(torn, appendHeader(nil, 100)[:HeaderSize-1], 0o644); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	opts := Options{Dir: dir, Logger: newLogger(&logs)}
	checkSame(t, replayAll(t, opts), want)
	if _, err := os.Stat(torn); !os.IsNotExist(err) {
		t.Fatalf("torn newest segment still there: %v", err)
	}
	if !strings.Contains(logs.String(), torn) {
		t.Fatalf("no log line names %s:\n%s", torn, logs.String())
	}
	// A short older segment is corruption.
	if err := os.WriteFile(filepath.Join(dir, SegmentName(200)), appendHeader(nil, 200), 0o644); err != nil {
		t.Fatal(err)
	}
	short := segFiles(t, dir)[0]
	if err := os.Truncate(short, 10); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir, Logger: quietLogger()}, nil)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != short || ce.Offset != 0 {
		t.Fatalf("Open with a short older segment: %v", err)
	}
}

// corruptDir copies dir and applies mutate to the file at path.
func corruptDir(t *testing.T, dir, path string, mutate func(b []byte)) (string, string) {
	t.Helper()
	d := copyDir(t, dir)
	p := filepath.Join(d, filepath.Base(path))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	mutate(b)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return d, p
}

func TestCorruption(t *testing.T) {
	rng := testRand(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, SegmentSize: 1024, Sync: SyncGroup}, nil)
	recs := make([]Record, 60)
	for i := range recs {
		recs[i] = randRecord(rng, 60)
	}
	want := writeRecords(t, l, recs, 4)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	byPos := map[Position]Record{}
	for _, w := range want {
		byPos[w.pos] = w.rec
	}
	// checkSubset fails if anything replayed is not exactly what was written.
	checkSubset := func(got []logged) {
		t.Helper()
		for _, g := range got {
			r, ok := byPos[g.pos]
			if !ok || !recordsEqual(r, g.rec) {
				t.Fatalf("replayed a record that was not written at %v: %+v", g.pos, g.rec)
			}
		}
	}
	var victims []logged // records not last in their segment
	for _, w := range want {
		if _, ok := byPos[Position{w.pos.Segment, w.pos.Offset + frameSize(&w.rec)}]; ok {
			victims = append(victims, w)
		}
	}
	// Include the last record of an older segment: not a torn tail.
	segs := segFiles(t, dir)
	var lastOfOlder logged
	for _, w := range want {
		if filepath.Base(segs[0]) == SegmentName(w.pos.Segment) && lastOfOlder.pos.Less(w.pos) {
			lastOfOlder = w
		}
	}
	victims = append(victims, lastOfOlder)

	for trial := 0; trial < 12; trial++ {
		v := victims[rng.IntN(len(victims))]
		if trial == 0 {
			v = lastOfOlder
		}
		path := filepath.Join(dir, SegmentName(v.pos.Segment))
		frame := frameSize(&v.rec)
		for _, field := range []string{"payload", "length", "payload-crc", "undecodable"} {
			d, p := corruptDir(t, dir, path, func(b []byte) {
				o := v.pos.Offset
				switch field {
				case "payload":
					b[o+8+rng.Int64N(frame-12)] ^= 1 << rng.IntN(8)
				case "length":
					b[o+rng.Int64N(8)] ^= 1 << rng.IntN(8)
				case "payload-crc":
					b[o+frame-1-rng.Int64N(4)] ^= 1 << rng.IntN(8)
				case "undecodable": // valid checksums, unknown kind
					b[o+9] = 77
					binary.BigEndian.PutUint32(b[o+frame-4:], crc(b[o+8:o+frame-4]))
				}
			})
			_, err := Open(Options{Dir: d, Logger: quietLogger()}, nil)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Path != p || ce.Offset != v.pos.Offset {
				t.Fatalf("%s corruption at %v: Open error %v, want CorruptionError at %s offset %d",
					field, v.pos, err, p, v.pos.Offset)
			}
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q does not name the file", err)
			}
			var logs logBuffer
			got := replayAll(t, Options{Dir: d, SkipCorrupt: true, Logger: newLogger(&logs)})
			checkSubset(got)
			if !strings.Contains(logs.String(), p) || !strings.Contains(logs.String(), "offset="+strconv.FormatInt(v.pos.Offset, 10)) {
				t.Fatalf("skip not logged with file and offset:\n%s", logs.String())
			}
			// Exactly which records are skipped: the bad one, and for a bad
			// length word the rest of its segment.
			var expect []logged
			for _, w := range want {
				skip := w.pos == v.pos
				if field == "length" && w.pos.Segment == v.pos.Segment && v.pos.Less(w.pos) {
					skip = true
				}
				if !skip {
					expect = append(expect, w)
				}
			}
			checkSame(t, got, expect)
		}
	}

	// A bad segment header is corruption; SkipCorrupt skips the segment.
	path := filepath.Join(dir, SegmentName(want[0].pos.Segment))
	d, p := corruptDir(t, dir, path, func(b []byte) { b[5] ^= 1 })
	_, err := Open(Options{Dir: d, Logger: quietLogger()}, nil)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != p || ce.Offset != 0 {
		t.Fatalf("bad header: Open error %v", err)
	}
	got := replayAll(t, Options{Dir: d, SkipCorrupt: true, Logger: quietLogger()})
	checkSubset(got)
	for _, g := range got {
		if g.pos.Segment == want[0].pos.Segment {
			t.Fatalf("replayed %v from a segment with a bad header", g.pos)
		}
	}
}

func TestReplayErrorStopsOpen(t *testing.T) {
	dir, _, _ := writeOneSegment(t, 3)
	boom := errors.New("boom")
	_, err := Open(Options{Dir: dir, Logger: quietLogger()}, func(Position, Record) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Open error %v, want it to wrap the replay error", err)
	}
}
