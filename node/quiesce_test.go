package node

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// blocked are the goroutine states that wait for another goroutine (or a
// timer, in a select): anything else (running, runnable, a system call,
// a sleep, a GC assist, a preemption) is about to make progress.
var blocked = map[string]bool{
	"select": true, "select (no cases)": true,
	"chan receive": true, "chan send": true, "chan receive (nil chan)": true, "chan send (nil chan)": true,
	"sync.Mutex.Lock": true, "sync.RWMutex.Lock": true, "sync.RWMutex.RLock": true,
	"sync.Cond.Wait": true, "sync.WaitGroup.Wait": true, "semacquire": true,
	"finalizer wait": true,
}

// busyGoroutine returns the stack of a goroutine (other than the caller)
// that is not blocked (see blocked), or "" if there is none. runtime.Stack
// stops the world, so the answer is one consistent snapshot.
func busyGoroutine() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := bytes.Split(buf, []byte("\n\n"))
	for _, g := range gs[1:] { // the first is the caller
		i, j := bytes.IndexByte(g, '['), bytes.IndexByte(g, ']')
		if i < 0 || j < i {
			continue
		}
		state, _, _ := bytes.Cut(g[i+1:j], []byte(","))
		if !blocked[string(state)] {
			return string(g)
		}
	}
	return ""
}

// waitQuiescent waits until no goroutine of the process can make progress
// without the test's next step: three snapshots in a row, a little apart,
// find none busy. The stepped scenario tests use it between steps: with no
// background loops and the network stepped, a quiescent process does
// nothing until the test acts (real-time timers excepted, which the
// scenarios set to hours). The 30 s bound is a safety net, never an
// assertion: it reports a goroutine that never settles.
func waitQuiescent(t testing.TB) { settle(t, 3, 100*time.Microsecond) }

// settle waits for n quiet snapshots in a row, pause apart.
func settle(t testing.TB, n int, pause time.Duration) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	quiet := 0
	for quiet < n {
		if g := busyGoroutine(); g != "" {
			quiet = 0
			if time.Now().After(deadline) {
				t.Fatalf("the process never became quiescent; a busy goroutine:\n%s", g)
			}
			time.Sleep(50 * time.Microsecond)
			continue
		}
		quiet++
		runtime.Gosched()
		time.Sleep(pause)
	}
}

func TestWaitQuiescentWaitsForWork(t *testing.T) {
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		<-release
		x := 0
		for i := range 20_000_000 {
			x += i
		}
		_ = x
		close(done)
	}()
	waitQuiescent(t) // the goroutine is blocked on release
	select {
	case <-done:
		t.Fatal("the goroutine ran before its release")
	default:
	}
	close(release)
	waitQuiescent(t)
	select {
	case <-done:
	default:
		t.Fatal("waitQuiescent returned while a goroutine was still computing")
	}
}
