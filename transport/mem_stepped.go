package transport

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// A stepped MemNetwork (NewSteppedNetwork) delivers nothing by itself:
// every message handed to it waits in one queue until the test delivers,
// drops or duplicates it, and requests time out on a virtual clock that
// only the test advances. Handlers still run on their own goroutines (a
// handler may itself make requests), so between steps the test waits for
// the process to become quiescent; given that, a scenario's whole history
// follows from its steps and the seed.
//
// Faults set by SetFault and partitions still apply, when a message is sent
// (drops and duplicates; Delay, Jitter and Reorder are ignored: the test
// chooses the order). Requests to an address nobody listens on still fail
// at once with ErrUnreachable, and Close still fails the requests waiting on
// the closed endpoint at once.

// Kind is what a queued message is.
type Kind byte

// The kinds of queued messages.
const (
	KindRequest  Kind = Kind(kindRequest)
	KindResponse Kind = Kind(kindResponse)
	KindError    Kind = Kind(kindError)
	KindOneWay   Kind = Kind(kindOneWay)
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "req"
	case KindResponse:
		return "resp"
	case KindError:
		return "err"
	case KindOneWay:
		return "oneway"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Queued is a message waiting in a stepped network's queue.
type Queued struct {
	// Seq numbers the messages in the order they were sent (a duplicate
	// gets a new one); it names the message in Deliver, Drop, Duplicate.
	Seq      uint64
	From, To Addr
	Kind     Kind
	// Type is the message's type; for a response or error, the type of the
	// request it answers (as faults select them).
	Type Type
	Body []byte
}

// Pending is a request waiting for its response in a stepped network, or
// a virtual timer (see Timeouts).
type Pending struct {
	Seq      uint64 // the request message's Seq, or the timer's number
	From, To Addr   // a timer's From is its owner; To is empty
	Type     Type
	Deadline time.Time // on the virtual clock
	// Timer is the timeout of a context made by Timeouts (0: a request).
	Timer time.Duration
}

// steppedState is the part of a MemNetwork used in stepped mode; n.mu
// guards it.
type steppedState struct {
	now     time.Time
	timeout time.Duration
	nextSeq uint64
	queue   []*envelope
	timers  map[uint64]*vtimer
}

// vtimer is a context that ends on the virtual clock.
type vtimer struct {
	info   Pending
	cancel context.CancelCauseFunc
}

// NewSteppedNetwork returns a network in stepped mode (see Queued): its
// virtual clock starts at start, and a request fails with ErrTimeout
// (wrapping context.DeadlineExceeded) once the clock passes its send time
// plus timeout (0: requests never time out on the virtual clock). A
// request's ctx still ends it too: tests give contexts real deadlines far
// beyond the scenario's length.
func NewSteppedNetwork(seed uint64, start time.Time, timeout time.Duration) *MemNetwork {
	n := NewMemNetwork(seed)
	n.step = &steppedState{now: start, timeout: timeout, timers: make(map[uint64]*vtimer)}
	return n
}

// Now is the stepped network's virtual clock (time.Now when not stepped).
// It is safe for concurrent use: nodes use it as their clock.
func (n *MemNetwork) Now() time.Time {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.step == nil {
		return time.Now()
	}
	return n.step.now
}

// Timeouts returns owner's context.WithTimeout on the network's clock: on a
// stepped network the context ends (with cause context.DeadlineExceeded;
// Err is context.Canceled) when ExpireNext fires it, once the virtual clock
// has passed its deadline; otherwise it is context.WithTimeout. The
// contexts' Deadline is the parent's: code that reads it sees no virtual
// deadline.
func (n *MemNetwork) Timeouts(owner Addr) func(context.Context, time.Duration) (context.Context, context.CancelFunc) {
	if n.step == nil {
		return context.WithTimeout
	}
	return func(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancelCause(parent)
		n.mu.Lock()
		n.step.nextSeq++
		seq := n.step.nextSeq
		n.step.timers[seq] = &vtimer{
			info:   Pending{Seq: seq, From: owner, Deadline: n.step.now.Add(d), Timer: d},
			cancel: cancel,
		}
		n.mu.Unlock()
		return ctx, func() {
			n.mu.Lock()
			delete(n.step.timers, seq)
			n.mu.Unlock()
			cancel(context.Canceled)
		}
	}
}

// Advance moves the virtual clock forward by d. It expires nothing: see
// ExpireNext.
func (n *MemNetwork) Advance(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mustStep()
	if d > 0 {
		n.step.now = n.step.now.Add(d)
	}
}

func (n *MemNetwork) mustStep() {
	if n.step == nil {
		panic("transport: not a stepped network")
	}
}

// enqueueStepped puts a message sent on a stepped network in the queue.
func (n *MemNetwork) enqueueStepped(e *envelope) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.seq == 0 {
		n.step.nextSeq++
		e.seq = n.step.nextSeq
	}
	n.step.queue = append(n.step.queue, e)
}

// pendingInfo numbers a request about to be sent on a stepped network and
// gives its virtual deadline.
func (n *MemNetwork) pendingInfo(from, to Addr, t Type) Pending {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.step.nextSeq++
	p := Pending{Seq: n.step.nextSeq, From: from, To: to, Type: t}
	if n.step.timeout > 0 {
		p.Deadline = n.step.now.Add(n.step.timeout)
	}
	return p
}

// Queue returns the messages waiting, in the order they were sent.
func (n *MemNetwork) Queue() []Queued {
	n.mu.RLock()
	defer n.mu.RUnlock()
	n.mustStep()
	out := make([]Queued, 0, len(n.step.queue))
	for _, e := range n.step.queue {
		out = append(out, Queued{Seq: e.seq, From: e.from, To: e.to, Kind: Kind(e.kind), Type: e.class, Body: bytes.Clone(e.msg.Body)})
	}
	return out
}

// take removes message seq from the queue.
func (n *MemNetwork) take(seq uint64) *envelope {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mustStep()
	i := slices.IndexFunc(n.step.queue, func(e *envelope) bool { return e.seq == seq })
	if i < 0 {
		return nil
	}
	e := n.step.queue[i]
	n.step.queue = slices.Delete(n.step.queue, i, i+1)
	return e
}

// Deliver hands queued message seq to its endpoint, as the network would
// (a request starts its handler on a goroutine; a response wakes its
// requester). It reports whether the message was in the queue; one that
// meets a closed endpoint or a partition is lost (counted Dropped).
func (n *MemNetwork) Deliver(seq uint64) bool {
	e := n.take(seq)
	if e == nil {
		return false
	}
	n.deliver(e)
	return true
}

// Drop removes queued message seq (counted Dropped).
func (n *MemNetwork) Drop(seq uint64) bool {
	e := n.take(seq)
	if e == nil {
		return false
	}
	n.count(e.class, func(c *Counts) { c.Dropped++ })
	return true
}

// Duplicate appends a copy of queued message seq to the queue and returns
// the copy's Seq (0 if seq is not queued).
func (n *MemNetwork) Duplicate(seq uint64) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mustStep()
	i := slices.IndexFunc(n.step.queue, func(e *envelope) bool { return e.seq == seq })
	if i < 0 {
		return 0
	}
	dup := *n.step.queue[i]
	dup.msg.Body = bytes.Clone(dup.msg.Body)
	n.step.nextSeq++
	dup.seq = n.step.nextSeq
	n.step.queue = append(n.step.queue, &dup)
	n.count(dup.class, func(c *Counts) { c.Duplicated++ })
	return dup.seq
}

// PendingRequests returns the requests waiting for a response and the
// running virtual timers, by virtual deadline then Seq (requests without a
// virtual deadline last).
func (n *MemNetwork) PendingRequests() []Pending {
	n.mu.RLock()
	n.mustStep()
	eps := make([]*memEndpoint, 0, len(n.eps))
	for _, e := range n.eps {
		eps = append(eps, e)
	}
	var out []Pending
	for _, t := range n.step.timers {
		out = append(out, t.info)
	}
	n.mu.RUnlock()
	for _, e := range eps {
		e.mu.Lock()
		for _, cl := range e.pending {
			out = append(out, cl.info)
		}
		e.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Pending) int {
		if a.Deadline.IsZero() != b.Deadline.IsZero() {
			if a.Deadline.IsZero() {
				return 1
			}
			return -1
		}
		if c := a.Deadline.Compare(b.Deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return out
}

// ExpireNext fires the virtual timer or fails the pending request (with
// ErrTimeout) whose virtual deadline is the earliest not after Now (ties:
// the earliest made), and returns it; false if none is due. Expiring one at
// a time lets the test wait for the system to settle between expiries.
func (n *MemNetwork) ExpireNext() (Pending, bool) {
	now := n.Now()
	for _, p := range n.PendingRequests() {
		if p.Deadline.IsZero() || p.Deadline.After(now) {
			continue
		}
		if p.Timer > 0 {
			n.mu.Lock()
			t := n.step.timers[p.Seq]
			delete(n.step.timers, p.Seq)
			n.mu.Unlock()
			if t == nil {
				continue // cancelled meanwhile
			}
			t.cancel(context.DeadlineExceeded)
			return p, true
		}
		n.mu.RLock()
		e := n.eps[p.From]
		n.mu.RUnlock()
		if e == nil {
			continue
		}
		e.mu.Lock()
		var cl *memCall
		for id, c := range e.pending {
			if c.info.Seq == p.Seq {
				cl = c
				delete(e.pending, id)
				break
			}
		}
		e.mu.Unlock()
		if cl == nil {
			continue // answered meanwhile
		}
		cl.ch <- result{err: fmt.Errorf("%w: %s type %d: %w (virtual deadline %s)", ErrTimeout, p.To, p.Type, context.DeadlineExceeded, p.Deadline.Format(time.TimeOnly))}
		return p, true
	}
	return Pending{}, false
}
