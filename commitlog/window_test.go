package commitlog

import (
	"sync"
	"testing"
	"time"
)

func TestGroupWindowFollowsFsyncAverage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := groupWindow{cap: time.Millisecond}
	if got := w.window(); got != time.Millisecond {
		t.Fatalf("window before any fsync = %v, want the cap", got)
	}
	w.synced(200*time.Microsecond, t0)
	if got := w.window(); got != 200*time.Microsecond {
		t.Fatalf("window after one 200µs fsync = %v", got)
	}
	w.synced(1000*time.Microsecond, t0.Add(time.Millisecond))
	if got, want := w.window(), 300*time.Microsecond; got != want { // 200 + (1000-200)/8
		t.Fatalf("window after 200µs then 1ms = %v, want %v", got, want)
	}
	// A sync with nothing to fsync moves the last sync, not the average.
	w.synced(0, t0.Add(2*time.Millisecond))
	if got := w.window(); got != 300*time.Microsecond {
		t.Fatalf("window after an empty sync = %v, want 300µs", got)
	}
	if !w.lastSync.Equal(t0.Add(2 * time.Millisecond)) {
		t.Fatalf("last sync %v not moved by an empty sync", w.lastSync)
	}
	// Slow fsyncs: the window never exceeds the cap.
	for i := range 100 {
		w.synced(50*time.Millisecond, t0.Add(time.Duration(3+i)*time.Millisecond))
	}
	if got := w.window(); got != time.Millisecond {
		t.Fatalf("window after slow fsyncs = %v, want the 1ms cap", got)
	}
	// A sync reported out of order does not move the last sync back.
	last := w.lastSync
	w.synced(time.Microsecond, t0)
	if !w.lastSync.Equal(last) {
		t.Fatalf("last sync moved back to %v", w.lastSync)
	}
}

func TestGroupWindowWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	w := groupWindow{cap: 2 * time.Millisecond}
	if got := w.wait(t0, t0); got != 0 {
		t.Fatalf("first group ever waits %v, want 0 (the log was idle)", got)
	}
	w.synced(us(200), t0) // window 200µs, last sync ended at t0
	cases := []struct {
		name       string
		first, now time.Duration // after t0
		want       time.Duration
	}{
		{"idle: first append a window after the last sync", us(200), us(200), 0},
		{"idle: long after", time.Second, time.Second + us(10), 0},
		{"busy: just after the sync, window opens", us(50), us(50), us(200)},
		{"busy: part of the window gone", us(50), us(150), us(100)},
		{"busy: window over", us(50), us(250), 0},
		{"busy: arrived during the fsync", -us(100), 0, us(100)},
		{"busy: arrived early in the fsync, window over", -us(300), 0, 0},
	}
	for _, c := range cases {
		if got := w.wait(t0.Add(c.first), t0.Add(c.now)); got != c.want {
			t.Errorf("%s: wait = %v, want %v", c.name, got, c.want)
		}
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
