// Package deadline makes the contexts of a fixed timeout that many requests
// take at once (a coordinator's counter writes, their replication, reads)
// without a timer and a context of their own each. A Timeouts rounds each
// deadline up to a grain (1/1024 of the timeout) and hands every request
// whose deadline falls on the same grain one shared context.WithDeadline,
// wrapped so that the request keeps its own context's values: one timer per
// grain instead of one per request, and one small allocation per request
// instead of four.
//
// A shared context lives until its deadline, its timer too: a Timeouts keeps
// at most 1024 of them alive per root (one per grain of the last timeout),
// and fewer when the requests are fewer than one per grain.
//
// A shared context cannot be cancelled by one of its users, so the contexts
// come without a CancelFunc; they end at their deadline, or when the parent
// they follow is cancelled. The parent's cancellation can be followed only
// when it comes from a context marked by Root (a connection's context, say:
// the shared contexts are then made per root), or when the parent cannot be
// cancelled at all; Context says when it cannot, and the caller makes a
// context.WithTimeout of its own instead.
package deadline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// grainShift sets the grain of a timeout d to d>>grainShift: a deadline is
// late by at most 1/1024 of its timeout (5 ms of 5 s).
const grainShift = 10

// Timeouts hands out the contexts of one timeout. It is safe for
// concurrent use.
type Timeouts struct {
	d     time.Duration
	grain int64 // nanoseconds, at least 1
	now   func() time.Time
	bg    atomic.Pointer[slot] // the shared context of the parents that cannot be cancelled
}

// slot is one shared context and the deadline it ends at.
type slot struct {
	at     int64 // unix nanoseconds, a multiple of the grain
	ctx    context.Context
	cancel context.CancelFunc // never called: the context ends at its deadline or with its root
}

// New returns the Timeouts of timeout d (at least 1 ns).
func New(d time.Duration) *Timeouts {
	d = max(d, 1)
	return &Timeouts{d: d, grain: max(int64(d>>grainShift), 1), now: time.Now}
}

// Context returns a context with parent's values that ends when parent is
// cancelled or at its own deadline, no sooner than t's timeout from now and
// later by at most 1/1024 of it, and reports true; or reports false when
// parent's cancellation cannot be followed (it does not come from a Root,
// or a context below the root added a cancellation or a deadline of its
// own), and the caller makes its own context.WithTimeout.
//
// The context has no CancelFunc: it must be used only where nothing waits
// for it to end once its caller is done with it.
func (t *Timeouts) Context(parent context.Context) (context.Context, bool) {
	done := parent.Done()
	if done == nil {
		return &valueCtx{Context: t.shared(&t.bg, context.Background()), values: parent}, true
	}
	r, ok := parent.Value(rootKey{}).(*root)
	if !ok || r.ctx.Done() != done {
		return nil, false
	}
	p, _ := r.slots.Load(t)
	if p == nil {
		p, _ = r.slots.LoadOrStore(t, new(atomic.Pointer[slot]))
	}
	return &valueCtx{Context: t.shared(p.(*atomic.Pointer[slot]), r.ctx), values: parent}, true
}

// Detached returns a context with parent's values, but neither its
// cancellation nor its deadline, that ends no sooner than t's timeout from
// now and later by at most 1/1024 of it: context.WithTimeout of
// context.WithoutCancel(parent), without a CancelFunc (see Context).
func (t *Timeouts) Detached(parent context.Context) context.Context {
	return &valueCtx{Context: t.shared(&t.bg, context.Background()), values: parent}
}

// shared returns the shared context, child of base, of the grain of a
// deadline t's timeout from now, the one in p if it is that grain's.
func (t *Timeouts) shared(p *atomic.Pointer[slot], base context.Context) context.Context {
	at := t.now().UnixNano() + int64(t.d)
	at = (at + t.grain - 1) / t.grain * t.grain
	if s := p.Load(); s != nil && s.at >= at && s.at-at <= t.grain {
		return s.ctx // a racing caller's later grain is late by two grains at most
	}
	ctx, cancel := context.WithDeadline(base, time.Unix(0, at))
	s := &slot{at: at, ctx: ctx, cancel: cancel}
	for {
		old := p.Load()
		if old != nil && old.at >= at {
			break // a later grain is in place already: keep it for the next callers
		}
		if p.CompareAndSwap(old, s) {
			break
		}
	}
	return ctx
}

// valueCtx is a shared deadline context with the values of the request's
// own context.
type valueCtx struct {
	context.Context // the shared context: Deadline, Done, Err
	values          context.Context
}

// Value looks in the shared context first: it holds no values but the
// context package's own (which lets a context.WithCancel of a valueCtx
// join the shared context's cancellation without a goroutine) and its
// root's marker; every other key is looked up in the request's context.
func (c *valueCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

// rootKey is the context key of a Root's marker.
type rootKey struct{}

// root is the marker Root adds: the context whose cancellation the shared
// contexts follow, and their slots by Timeouts.
type root struct {
	ctx   context.Context
	slots sync.Map // *Timeouts → *atomic.Pointer[slot]
}

// Root marks ctx as the source of the cancellation of the contexts made
// below it (a connection's context, cancelled when it closes), so that
// Timeouts.Context can share deadline contexts between them. ctx must hold
// no values (context.WithCancel(context.Background()), say): the shared
// contexts are made below it, and its values would shadow those of the
// requests' contexts.
func Root(ctx context.Context) context.Context {
	return context.WithValue(ctx, rootKey{}, &root{ctx: ctx})
}
