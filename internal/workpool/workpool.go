// Package workpool runs short tasks on goroutines it keeps between tasks.
//
// A request served on a fresh goroutine starts on a small stack and grows
// it, copying it each time, as the request descends through the CQL
// executor, the coordinator and the replica: in a CPU profile of counter
// updates through CQL, runtime.newstack and runtime.copystack took 13 % of
// the CPU, all of it in goroutines started per request (the CQL server's
// execute, the transport's serve, the coordinator's replicate). A Pool hands
// a task to a goroutine that is waiting for one, whose stack already grew on
// earlier tasks, and starts a new goroutine only when none waits. At most
// MaxIdle goroutines wait; the others end after their task, so a burst
// leaves no more than MaxIdle goroutines behind.
//
// The runtime may still shrink a waiting goroutine's stack at a garbage
// collection; the pool does not fight that.
package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// DefaultMaxIdle is the number of waiting goroutines a Pool keeps when
// MaxIdle is zero.
const DefaultMaxIdle = 256

// Pool runs tasks on reused goroutines. The zero value is not usable: use
// New. A Pool is safe for concurrent use and needs no closing: its waiting
// goroutines hold no resources but their stacks; Close ends them.
type Pool struct {
	work    chan func()
	closed  atomic.Bool
	closing sync.Once
	maxIdle int64
	idle    atomic.Int64 // goroutines waiting on work
	started atomic.Uint64
}

// New returns a pool keeping at most maxIdle waiting goroutines
// (DefaultMaxIdle when maxIdle ≤ 0).
func New(maxIdle int) *Pool {
	if maxIdle <= 0 {
		maxIdle = DefaultMaxIdle
	}
	return &Pool{work: make(chan func()), maxIdle: int64(maxIdle)}
}

// Go runs f on a waiting goroutine of the pool, or on a new one if none is
// waiting. It never blocks on f. As with the go statement, a panic in f
// ends the program unless f recovers it.
func (p *Pool) Go(f func()) {
	if f == nil {
		return // nil is the pool's own signal to end (Trim)
	}
	select {
	case p.work <- f:
	default:
		p.started.Add(1)
		go p.run(f)
	}
}

// run runs f, then the tasks it is handed, until it is one of more than
// maxIdle waiting, the pool is closed, or it is handed nil (Trim, Close).
// A waiting goroutine receives on one channel only: a select that also
// watched for Close locked both channels at every task (1.7 % of the CPU
// of counter updates through CQL).
func (p *Pool) run(f func()) {
	for {
		f()
		// Counted before closed is read: Close, which sets closed before
		// it reads the count, either is seen here or sees this goroutine
		// counted, and hands it nil.
		if p.idle.Add(1) > p.maxIdle || p.closed.Load() {
			p.idle.Add(-1)
			return
		}
		f = <-p.work
		p.idle.Add(-1)
		if f == nil { // Trim or Close
			return
		}
	}
}

// Trim ends the goroutines waiting for a task, and with them the stacks
// they grew (after a burst of requests, say); later tasks start new ones.
// A goroutine just finishing a task when Trim runs may stay.
func (p *Pool) Trim() {
	for n := p.idle.Load(); n > 0; n-- {
		select {
		case p.work <- nil:
		default:
			runtime.Gosched() // one counted waiting but not receiving yet
			select {
			case p.work <- nil:
			default:
				return
			}
		}
	}
}

// Close ends the waiting goroutines; tasks still running finish. A closed
// pool still runs tasks given to Go, each on a goroutine of its own.
func (p *Pool) Close() {
	p.closing.Do(func() {
		p.closed.Store(true)
		for p.idle.Load() > 0 {
			select {
			case p.work <- nil:
			default:
				runtime.Gosched() // one counted, not receiving yet (or leaving)
			}
		}
	})
}

// Started is the number of goroutines the pool has started.
func (p *Pool) Started() uint64 { return p.started.Load() }

// Idle is the number of goroutines waiting for a task.
func (p *Pool) Idle() int { return int(p.idle.Load()) }
