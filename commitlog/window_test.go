package commitlog

import (
	"sync"
	"testing"
	"time"
)

func TestGroupWindowFollowsFsyncAverage(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	w := groupWindow{cap: 2 * time.Millisecond}
	if got := w.window(); got != w.cap {
		t.Fatalf("window before any fsync = %v, want the cap", got)
	}
	w.synced(us(100))
	if got, want := w.window(), windowFsyncs*us(100); got != want {
		t.Fatalf("window after one 100µs fsync = %v, want %v", got, want)
	}
	w.synced(us(900))
	if got, want := w.window(), windowFsyncs*us(200); got != want { // 100 + (900-100)/8
		t.Fatalf("window after 100µs then 900µs = %v, want %v", got, want)
	}
	// A sync with nothing to fsync leaves the average alone.
	w.synced(0)
	if got, want := w.window(), windowFsyncs*us(200); got != want {
		t.Fatalf("window after an empty sync = %v, want %v", got, want)
	}
	// Slow fsyncs: the window never exceeds the cap.
	for range 100 {
		w.synced(50 * time.Millisecond)
	}
	if got := w.window(); got != w.cap {
		t.Fatalf("window after slow fsyncs = %v, want the cap", got)
	}
}

func TestGroupWindowIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	w := groupWindow{cap: 2 * time.Millisecond}
	if got := w.wait(t0, t0); got != 0 {
		t.Fatalf("nothing known yet: wait %v, want 0", got)
	}
	w.synced(us(200))
	// A lone writer: an append every 1.5 ms, one 200µs fsync each.
	at := t0
	for range 20 {
		at = at.Add(us(1500))
		w.appended(at)
		if got := w.wait(at, at); got != 0 {
			t.Fatalf("appends 1.5ms apart with 200µs fsyncs: wait %v, want 0 (idle)", got)
		}
	}
	// Busy: appends 50µs apart; once the average gap is below the fsync
	// time, a group gathers for the window.
	busy := false
	for range 40 {
		at = at.Add(us(50))
		w.appended(at)
		if w.wait(at, at) > 0 {
			busy = true
			break
		}
	}
	if !busy {
		t.Fatalf("appends 50µs apart with 200µs fsyncs never made a group wait (gap average %v)", w.gap)
	}
	win := w.window()
	cases := []struct {
		name       string
		first, now time.Duration // after at
		want       time.Duration
	}{
		{"window opens", 0, 0, win},
		{"part of the window gone", 0, us(100), win - us(100)},
		{"window over", 0, win + us(1), 0},
		{"first append before a sync ended", -us(100), 0, win - us(100)},
	}
	for _, c := range cases {
		if got := w.wait(at.Add(c.first), at.Add(c.now)); got != c.want {
			t.Errorf("%s: wait = %v, want %v", c.name, got, c.want)
		}
	}
	// A pause longer than the cap counts as the cap: the average gap
	// climbs back above the fsync time after a few appends, not never.
	at = at.Add(time.Hour)
	w.appended(at)
	if w.gap > w.cap {
		t.Fatalf("gap average %v above the cap after a pause", w.gap)
	}
	idle := false
	for range 40 {
		at = at.Add(time.Second)
		w.appended(at)
		if w.wait(at, at) == 0 {
			idle = true
			break
		}
	}
	if !idle {
		t.Fatalf("appends a second apart never made the log idle (gap average %v)", w.gap)
	}
	// Appends spaced out, but the last group held several (many writers on
	// a slow machine): a group still gathers. One append in the last group
	// makes the log idle again.
	w.grouped(3)
	if got := w.wait(at, at); got != w.window() {
		t.Fatalf("last group of 3, gap average %v above the fsync %v: wait %v, want the window %v", w.gap, w.fsync, got, w.window())
	}
	w.grouped(1)
	if got := w.wait(at, at); got != 0 {
		t.Fatalf("last group of 1, gap average %v above the fsync %v: wait %v, want 0", w.gap, w.fsync, got)
	}
	// An append stamped before the last one does not move it back.
	last := w.lastAppend
	w.appended(t0)
	if !w.lastAppend.Equal(last) {
		t.Fatalf("last append moved back to %v", w.lastAppend)
	}
}

// TestGroupLoneWriterDoesNotWaitWindow: in group mode a lone writer's
// appends are synced without waiting for the window, however long it may
// be, and each is durable when Append returns.
func TestGroupLoneWriterDoesNotWaitWindow(t *testing.T) {
	for _, writers := range []int{1, 8} {
		l, err := Open(Options{Dir: t.TempDir(), Sync: SyncGroup, GroupWindow: time.Hour, Logger: quietLogger()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					rec := Record{Table: uint64(w), Key: []byte{byte(i)}, Column: "c", Kind: PayloadShard, Payload: []byte{1}}
					pos, err := l.Append(&rec)
					if err != nil {
						t.Error(err)
						return
					}
					if d := l.Durable(); !pos.Less(d) {
						t.Errorf("Append returned at %v before the durable position %v passed it", pos, d)
						return
					}
				}
			}()
		}
		go func() { wg.Wait(); close(done) }()
		// Not a timing assertion: with a one-hour window the appends
		// would wait an hour each.
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("%d writers: appends still waiting after a minute (the hour-long window is waited)", writers)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
