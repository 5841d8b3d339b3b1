package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// waitIdle waits until n goroutines of p wait for work.
func waitIdle(t *testing.T, p *Pool, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); p.Idle() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines waiting, want %d", p.Idle(), n)
		}
	}
}

func TestRunsEveryTaskAndReusesGoroutines(t *testing.T) {
	p := New(4)
	defer p.Close()
	var ran atomic.Int64
	for i := range 1000 {
		done := make(chan struct{})
		p.Go(func() { ran.Add(int64(i)); close(done) })
		<-done
	}
	if want := int64(999 * 1000 / 2); ran.Load() != want {
		t.Errorf("tasks added %d, want %d", ran.Load(), want)
	}
	// One after another, a task nearly always finds the goroutine of the
	// last one waiting (unless it comes between that goroutine's end of
	// task and its wait for the next): without reuse, 1000 would start.
	if p.Started() > 50 {
		t.Errorf("started %d goroutines for 1000 sequential tasks, want few", p.Started())
	}
}

func TestBurstKeepsAtMostMaxIdle(t *testing.T) {
	p := New(4)
	defer p.Close()
	runAtOnce(p, 32)
	if p.Started() != 32 {
		t.Errorf("started %d goroutines for 32 concurrent tasks, want 32", p.Started())
	}
	waitIdle(t, p, 4) // not 32: the others ended after their task
}

// runAtOnce runs n tasks on p that all wait until every one has started
// (n goroutines at once), and returns when they have finished.
func runAtOnce(p *Pool, n int) {
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for range n {
		p.Go(func() { defer done.Done(); started.Done(); started.Wait() })
	}
	done.Wait()
}

func TestCloseEndsWaitingGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	p := New(8)
	runAtOnce(p, 8)
	waitIdle(t, p, 8)
	p.Close()
	waitIdle(t, p, 0)
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, want at most %d", runtime.NumGoroutine(), before)
		}
	}
	done := make(chan struct{})
	p.Go(func() { close(done) }) // a closed pool still runs tasks
	<-done
}

func BenchmarkGo(b *testing.B) {
	deep := func(n int) int {
		var buf [256]byte // a frame that makes a fresh goroutine's stack grow
		var f func(int) int
		f = func(n int) int {
			if n == 0 {
				return int(buf[0])
			}
			var local [256]byte
			local[n%256] = byte(n)
			return f(n-1) + int(local[0])
		}
		return f(n)
	}
	b.Run("go", func(b *testing.B) {
		var wg sync.WaitGroup
		for range b.N {
			wg.Add(1)
			go func() { defer wg.Done(); deep(40) }()
			wg.Wait()
		}
	})
	b.Run("pool", func(b *testing.B) {
		p := New(0)
		defer p.Close()
		var wg sync.WaitGroup
		for range b.N {
			wg.Add(1)
			p.Go(func() { defer wg.Done(); deep(40) })
			wg.Wait()
		}
	})
}

func TestTrimEndsWaitingGoroutines(t *testing.T) {
	p := New(8)
	defer p.Close()
	runAtOnce(p, 8)
	waitIdle(t, p, 8)
	for deadline := time.Now().Add(10 * time.Second); p.Idle() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still waiting after Trim", p.Idle())
		}
		p.Trim()
	}
	p.Go(nil) // ignored: not a task, and no goroutine ends
	done := make(chan struct{})
	p.Go(func() { close(done) }) // the pool still runs tasks
	<-done
	waitIdle(t, p, 1)
	if p.Started() != 9 {
		t.Errorf("started %d goroutines, want 9 (8, then 1 after Trim)", p.Started())
	}
}

// TestCloseRacingTasks closes pools while their tasks are finishing
// (seeded sizes and counts): every goroutine that finishes a task around
// Close, and would wait for another, ends.
func TestCloseRacingTasks(t *testing.T) {
	rng := testseed.Rand(t)
	before := runtime.NumGoroutine()
	for range 500 {
		p := New(1 + rng.IntN(8))
		n := 1 + rng.IntN(16)
		var wg sync.WaitGroup
		wg.Add(n)
		for range n {
			p.Go(wg.Done)
		}
		p.Close()
		wg.Wait()
	}
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after closing every pool, want at most %d", runtime.NumGoroutine(), before)
		}
	}
}
