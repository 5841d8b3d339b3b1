package fbf

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConfigErrors(t *testing.T) {
	ok := Config{Bits: 1000, Hashes: 5, Past: 2, Period: time.Second, Start: epoch}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no bits", func(c *Config) { c.Bits = 0 }},
		{"no hashes", func(c *Config) { c.Hashes = 0 }},
		{"too many hashes", func(c *Config) { c.Hashes = 65 }},
		{"no past", func(c *Config) { c.Past = 0 }},
		{"no period", func(c *Config) { c.Period = 0 }},
		{"window below horizon", func(c *Config) { c.RetryHorizon = 3*time.Second + 1 }},
		{"target ≥ 1", func(c *Config) { c.TargetFPP = 1 }},
		{"fractions", func(c *Config) { c.TargetFPP = 0.01; c.LowerFraction = 0.95 }},
		{"past above max", func(c *Config) { c.MaxPast = 1 }},
		{"period below min", func(c *Config) { c.MinPeriod = 2 * time.Second }},
	} {
		c := ok
		tc.mod(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", tc.name, err)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	c := ok
	c.RetryHorizon = 3 * time.Second // exactly (N+1)·t is allowed
	if _, err := New(c); err != nil {
		t.Fatalf("window == horizon: %v", err)
	}
}

func TestTestAndAddBasics(t *testing.T) {
	f := mustNew(t, Config{Bits: 1 << 16, Hashes: 5, Past: 1, Period: time.Second})
	a := id(1, 1)
	if f.Contains(a) || f.ContainsSimple(a) {
		t.Fatal("empty filter contains an id")
	}
	if f.TestAndAdd(a) {
		t.Fatal("first TestAndAdd reported present")
	}
	if !f.TestAndAdd(a) || !f.Contains(a) || !f.ContainsSimple(a) {
		t.Fatal("inserted id not present")
	}
	if got := f.IDCounts(); got[0] != 1 || got[1] != 1 {
		t.Fatalf("counts %v, want [1 1]", got)
	}
	h := HashID(a)
	if !f.TestAndAddHash(h) || !f.ContainsHash(h) {
		t.Fatal("hash API disagrees")
	}
}

// TestWindow proves the window with virtual time: an id inserted at time s is
// present at every time up to s+(N+1)·t and absent from s+(N+2)·t on, for
// several N and insertion phases. The else-if chain of the paper's Algorithm 2
// must fail the same test for N ≥ 2 (it checks that the test can fail).
func TestWindow(t *testing.T) {
	const period = time.Second
	step := period / 20
	for n := 1; n <= 8; n++ {
		elseIfForgot := false
		for _, phase := range []time.Duration{0, period / 3, period - time.Nanosecond, period / 2} {
			f := mustNew(t, Config{Bits: 1 << 12, Hashes: 4, Past: n, Period: period})
			s := at(3*period + phase) // a few idle periods first
			f.Advance(s)
			x := id(7, uint64(n))
			h := HashID(x)
			f.TestAndAdd(x)
			lo, hi := time.Duration(n+1)*period, time.Duration(n+2)*period
			for age := time.Duration(0); age <= hi+2*period; age += step {
				f.Advance(s.Add(age))
				got := f.Contains(x)
				if age <= lo && !got {
					t.Fatalf("N=%d phase=%v: forgotten at age %v ≤ (N+1)·t = %v", n, phase, age, lo)
				}
				if age >= hi && got {
					t.Fatalf("N=%d phase=%v: still present at age %v ≥ (N+2)·t = %v", n, phase, age, hi)
				}
				if age <= lo && !f.containsElseIf(h) {
					elseIfForgot = true
				}
			}
			// exactly at the boundaries too
			f2 := mustNew(t, Config{Bits: 1 << 12, Hashes: 4, Past: n, Period: period})
			f2.Advance(s)
			f2.TestAndAdd(x)
			f2.Advance(s.Add(lo))
			if !f2.Contains(x) {
				t.Fatalf("N=%d phase=%v: forgotten at exactly (N+1)·t", n, phase)
			}
			f2.Advance(s.Add(hi))
			if f2.Contains(x) {
				t.Fatalf("N=%d phase=%v: present at exactly (N+2)·t", n, phase)
			}
		}
		if n >= 2 && !elseIfForgot {
			t.Errorf("N=%d: the else-if Algorithm 2 never forgot early; the window test would not catch it", n)
		}
		if n == 1 && elseIfForgot {
			t.Errorf("N=1: the else-if Algorithm 2 is correct for N=1 but forgot early")
		}
	}
}

// TestNoFalseNegativesConcurrent inserts random ids from several goroutines
// while another goroutine advances virtual time, for N = 1..8, and checks
// that every id is present for (N+1)·t after the time read before its
// insertion.
func TestNoFalseNegativesConcurrent(t *testing.T) {
	seed := testSeed(t, 0)
	const (
		period  = 100 * time.Millisecond
		writers = 4
		perW    = 1500
	)
	for n := 1; n <= 8; n++ {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			f := mustNew(t, Config{Bits: 1 << 18, Hashes: 5, Past: n, Period: period})
			// The clock goroutine advances virtual time by t/7..2t/7 after
			// every 20 inserts, concurrently with the writers. vlow is stored
			// after each Advance and vhigh before it, so that vlow ≤ filter
			// time ≤ vhigh at any instant.
			var vlow, vhigh, inserts atomic.Int64
			type rec struct {
				id  []byte
				ins int64
			}
			recs := make([][]rec, writers)
			var wg sync.WaitGroup
			done := make(chan struct{})
			clockDone := make(chan struct{})
			go func() {
				defer close(clockDone)
				r := newRand(seed + uint64(n))
				d, seen := int64(0), int64(0)
				for {
					select {
					case <-done:
						return
					default:
					}
					if c := inserts.Load(); c-seen < 20 {
						runtime.Gosched()
						continue
					} else {
						seen = c
					}
					d += int64(period)/7 + r.Int64N(int64(period)/7)
					vhigh.Store(d)
					f.Advance(at(time.Duration(d)))
					vlow.Store(d)
				}
			}()
			window := int64(n+1) * int64(period)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := newRand(seed ^ uint64(w*1000+n))
					for i := 0; i < perW; i++ {
						x := id(r.Uint64(), r.Uint64())
						ins := vlow.Load()
						present := f.TestAndAdd(x)
						inserts.Add(1)
						if present {
							continue // a false positive: the id was not inserted
						}
						if !f.Contains(x) && vhigh.Load()-ins <= window {
							t.Errorf("id absent right after TestAndAdd")
							return
						}
						recs[w] = append(recs[w], rec{x, ins})
					}
				}()
			}
			wg.Wait()
			close(done)
			<-clockDone
			end := vhigh.Load()
			// Now walk time forward and check every id while it is young enough.
			for d := end; d <= end+window; d += int64(period) / 3 {
				f.Advance(at(time.Duration(d)))
				for _, rs := range recs {
					for _, r := range rs {
						if d-r.ins <= window && !f.Contains(r.id) {
							t.Fatalf("false negative: id inserted at %v absent at %v (window %v)", time.Duration(r.ins), time.Duration(d), time.Duration(window))
						}
					}
				}
			}
		})
	}
}

// TestTestAndAddAtomic has many goroutines insert the same ids at once: for
// each id exactly one TestAndAdd must report it absent. (With m = 2^20 bits
// and 2000 ids, an id that is a false positive before its first insertion has
// probability below 1e-15.)
func TestTestAndAddAtomic(t *testing.T) {
	seed := testSeed(t, 0)
	f := mustNew(t, Config{Bits: 1 << 20, Hashes: 5, Past: 2, Period: time.Hour})
	const ids, workers = 2000, 8
	r := newRand(seed)
	xs := make([][]byte, ids)
	for i := range xs {
		xs[i] = id(r.Uint64(), r.Uint64())
	}
	var fresh [ids]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range xs {
				j := (i + w*37) % ids
				if !f.TestAndAdd(xs[j]) {
					fresh[j].Add(1)
				}
			}
		}()
	}
	// Refresh concurrently too: rotation must not break atomicity.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= 20; i++ {
			f.Advance(at(time.Duration(i) * time.Minute))
		}
	}()
	wg.Wait()
	for i := range fresh {
		if got := fresh[i].Load(); got != 1 {
			t.Fatalf("id %d reported absent %d times, want exactly 1", i, got)
		}
	}
}

func TestAutoAdvanceAndTick(t *testing.T) {
	clk := NewManualClock(epoch)
	f := mustNew(t, Config{Bits: 1 << 12, Hashes: 4, Past: 1, Period: time.Second, Clock: clk, AutoAdvance: true})
	x := id(1, 2)
	f.TestAndAdd(x)
	clk.Add(2 * time.Second)
	if !f.Contains(x) {
		t.Fatal("forgotten at age 2s = (N+1)·t")
	}
	clk.Add(time.Second)
	if f.Contains(x) {
		t.Fatal("present at age 3s = (N+2)·t")
	}
	if got := f.Stats().Refreshes; got != 3 {
		t.Fatalf("refreshes = %d, want 3", got)
	}
	g := mustNew(t, Config{Bits: 1 << 12, Hashes: 4, Past: 1, Period: time.Second, Clock: clk, Start: clk.Now()})
	clk.Add(5 * time.Second)
	g.Tick()
	if got := g.Stats().Refreshes; got != 5 {
		t.Fatalf("Tick: refreshes = %d, want 5", got)
	}
}

// TestIdleSkip advances an empty filter by years of tiny periods: the idle
// skip must make it O(1) and keep the refresh count and the window right.
func TestIdleSkip(t *testing.T) {
	const span = 3 * 365 * 24 * time.Hour
	for _, target := range []float64{0, 0.01} {
		f := mustNew(t, Config{Bits: 1 << 10, Hashes: 3, Past: 2, Period: time.Millisecond, TargetFPP: target})
		f.TestAndAdd(id(3, 2))
		f.Advance(at(10 * time.Millisecond)) // not idle yet: the id must age out first
		f.Advance(at(span))                  // ~1e11 periods: only feasible with the skip
		st := f.Stats()
		if target == 0 && st.Refreshes != uint64(span/time.Millisecond) {
			t.Fatalf("refreshes = %d after %v of 1ms periods, want %d", st.Refreshes, span, span/time.Millisecond)
		}
		if !st.Now.Equal(at(span)) {
			t.Fatalf("now = %v", st.Now)
		}
		x := id(3, 3)
		f.TestAndAdd(x)
		f.Advance(st.Now.Add(st.Window))
		if !f.Contains(x) {
			t.Fatalf("target %v: id forgotten within the window after an idle skip", target)
		}
	}
}

func TestRefreshAndStats(t *testing.T) {
	f := mustNew(t, Config{Bits: 1 << 14, Hashes: 5, Past: 2, Period: time.Second})
	for i := range 100 {
		f.TestAndAdd(id(9, uint64(i)))
	}
	f.Refresh()
	for i := range 50 {
		f.TestAndAdd(id(10, uint64(i)))
	}
	st := f.Stats()
	if st.Remembered != 150 {
		t.Fatalf("remembered = %d, want 150 (ids %v)", st.Remembered, st.IDs)
	}
	if st.IDs[0] != 50 || st.IDs[1] != 150 || st.IDs[2] != 100 {
		t.Fatalf("ids per filter %v, want [50 150 100]", st.IDs)
	}
	if st.BitsInUse != 3<<14 || st.Filters != 4 || st.RealFilters != 3 {
		t.Fatalf("bits %d filters %d real %d", st.BitsInUse, st.Filters, st.RealFilters)
	}
	if st.Window != 3*time.Second || st.MaxWindow != 4*time.Second {
		t.Fatalf("window %v..%v", st.Window, st.MaxWindow)
	}
	if !(st.BitsPerID > st.OptimalBitsPerID) {
		t.Fatalf("bits per id %.1f not above the optimum %.1f", st.BitsPerID, st.OptimalBitsPerID)
	}
}

// TestBackgroundRefresher runs the real-clock refresher with a 5 ms period
// and waits (up to 30 s, not a timing assertion) for it to refresh.
func TestBackgroundRefresher(t *testing.T) {
	f, err := New(Config{Bits: 1 << 10, Hashes: 3, Past: 1, Period: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Start = %v, want ErrRunning", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // concurrent users while the refresher rotates
		defer wg.Done()
		for i := 0; i < 20000; i++ {
			f.TestAndAdd(id(5, uint64(i)))
			f.Contains(id(5, uint64(i)))
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for f.Stats().Refreshes < 3 {
		if time.Now().After(deadline) {
			t.Fatal("background refresher did not refresh")
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	f.Stop()
	f.Stop() // idempotent
	n := f.Stats().Refreshes
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	f.Stop()
	if f.Stats().Refreshes < n {
		t.Fatal("refresh count went backwards")
	}
}
