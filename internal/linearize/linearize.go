// Package linearize decides whether a concurrent history of one counter is
// linearizable. It is pure: no clock, no goroutines, no I/O.
//
// The object is the sequential counter of the lecture notes "Mutual
// Exclusion and Shared Counters" (Definition 11.5), generalised to any
// delta: its state is an integer, initially 0; add(d) changes it to
// state+d and returns nothing; read() returns the state. A history is the
// operations that processes invoked and that responded, each with its
// invocation time (Call) and response time (Return), read from one
// monotonic clock. Operation a precedes operation b in real time when
// a.Return < b.Call (equal times count as concurrent). The history is
// linearizable when the precedes order extends to a total order in which
// every read returns the sum of the adds before it (Definition 11.6 and the
// remarks after Theorem 11.9 in the notes): each operation takes effect at
// one point between its invocation and its response.
//
// # Algorithms
//
// Check is exact. It is Wing and Gong's search as improved by Lowe
// ("Testing for linearizability", 2017): walk the invocations and
// responses in time order, try to linearize each pending operation
// whose invocation has been reached, backtrack when a response is reached
// for an operation not yet linearized, and memoise every (set of
// linearized operations, counter state) configuration already explored so
// that each is explored once. Before searching, the history is cut at its
// quiescent points (instants with no operation pending): every operation
// before such a point precedes every operation after it, and the counter's
// state there is the sum of all the adds before it, so each window is
// checked alone from that state. The cost is then exponential only in the
// number of operations that overlap one another, which is bounded by the
// number of processes.
//
// Quick is a polynomial filter that finds the common violations without
// search: a read whose value is not the sum of every add that responded
// before the read was invoked plus a subset of the adds concurrent with it;
// and, when no delta is negative, a read that returns less than a read
// that preceded it. A violation it reports is a real one; passing Quick
// proves nothing (a history can pass it and still have no linearization),
// so Check is the verdict.
package linearize

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kind is an operation of the counter.
type Kind uint8

// The operations of the counter.
const (
	// Add adds Op.Delta to the counter and returns nothing.
	Add Kind = iota + 1
	// Read returns the counter's value, Op.Value.
	Read
)

// String returns "add" or "read".
func (k Kind) String() string {
	switch k {
	case Add:
		return "add"
	case Read:
		return "read"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Op is one completed operation of a history.
type Op struct {
	Kind  Kind
	Delta int64 // Add: the amount added
	Value int64 // Read: the value returned
	// Call and Return are the invocation and response times, in any unit
	// of one monotonic clock (e.g. nanoseconds since the test started).
	Call, Return int64
	// Process optionally names who invoked the operation (in messages).
	Process int
}

// String describes the operation, its process and its interval.
func (o Op) String() string {
	if o.Kind == Read {
		return fmt.Sprintf("p%d read()=%d [%d,%d]", o.Process, o.Value, o.Call, o.Return)
	}
	return fmt.Sprintf("p%d add(%d) [%d,%d]", o.Process, o.Delta, o.Call, o.Return)
}

// DefaultMaxConfigs bounds the configurations Check explores in one window.
const DefaultMaxConfigs = 1 << 22

// ErrBudget is returned (wrapped) when a window needs more configurations
// than the bound: the history is too concurrent to decide.
var ErrBudget = errors.New("linearize: search budget exhausted")

// Result is Check's verdict.
type Result struct {
	// Linearizable reports whether a linearization exists.
	Linearizable bool
	// Order is a witness when Linearizable: the indices of the history's
	// operations in a linearization order.
	Order []int
	// Window, when not Linearizable, holds the indices (in time order of
	// invocation) of the operations of the first window between quiescent
	// points that has no linearization, and Initial the counter's state at
	// its start: the smallest piece of the history that shows the
	// violation.
	Window  []int
	Initial int64
}

// Explain describes a violation with the operations of its window (or says
// that the history is linearizable).
func (r Result) Explain(h []Op) string {
	if r.Linearizable {
		return "linearizable"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "not linearizable: no order of these %d operations, from counter value %d, explains the reads:", len(r.Window), r.Initial)
	for _, i := range r.Window {
		fmt.Fprintf(&b, "\n\t#%d %v", i, h[i])
	}
	return b.String()
}

// validate checks a history's operations.
func validate(h []Op) error {
	for i, o := range h {
		if o.Kind != Add && o.Kind != Read {
			return fmt.Errorf("linearize: op #%d: unknown kind %v", i, o.Kind)
		}
		if o.Return < o.Call {
			return fmt.Errorf("linearize: op #%d (%v) responds before it is invoked", i, o)
		}
	}
	return nil
}

// Check decides whether history h of a counter that starts at 0 is
// linearizable, with at most DefaultMaxConfigs configurations per window.
func Check(h []Op) (Result, error) { return CheckBudget(h, DefaultMaxConfigs) }

// CheckBudget is Check with a bound on the configurations explored per
// window; it returns an error wrapping ErrBudget when a window exceeds it.
func CheckBudget(h []Op, maxConfigs int) (Result, error) {
	if err := validate(h); err != nil {
		return Result{}, err
	}
	res := Result{Linearizable: true, Order: make([]int, 0, len(h))}
	var state int64
	for _, w := range windows(h) {
		order, ok, err := search(h, w, state, maxConfigs)
		if err != nil {
			return Result{}, fmt.Errorf("window of %d ops from op #%d: %w", len(w), w[0], err)
		}
		if !ok {
			return Result{Window: w, Initial: state}, nil
		}
		res.Order = append(res.Order, order...)
		for _, i := range w {
			if h[i].Kind == Add {
				state += h[i].Delta
			}
		}
	}
	return res, nil
}

// windows returns the indices of h sorted by invocation, cut at every
// quiescent point: a window ends where every operation invoked so far has
// responded before the next invocation.
func windows(h []Op) [][]int {
	idx := make([]int, len(h))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp64(h[a].Call, h[b].Call); c != 0 {
			return c
		}
		return cmp64(h[a].Return, h[b].Return)
	})
	var out [][]int
	start := 0
	var maxRet int64
	for k, i := range idx {
		if k > start && h[i].Call > maxRet {
			out = append(out, idx[start:k])
			start = k
		}
		if k == start || h[i].Return > maxRet {
			maxRet = h[i].Return
		}
	}
	if start < len(idx) {
		out = append(out, idx[start:])
	}
	return out
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// event is a node of the doubly linked list of invocations and responses.
type event struct {
	op         int // index in the window
	isCall     bool
	match      *event // a call's response
	prev, next *event
}

func lift(e *event) {
	e.prev.next = e.next
	if e.next != nil {
		e.next.prev = e.prev
	}
	r := e.match
	r.prev.next = r.next
	if r.next != nil {
		r.next.prev = r.prev
	}
}

func unlift(e *event) {
	r := e.match
	r.prev.next = r
	if r.next != nil {
		r.next.prev = r
	}
	e.prev.next = e
	if e.next != nil {
		e.next.prev = e
	}
}

// search runs Lowe's algorithm on one window from counter state init. It
// returns a linearization (indices into h) when one exists.
func search(h []Op, w []int, init int64, maxConfigs int) ([]int, bool, error) {
	n := len(w)
	type ev struct {
		t      int64
		isCall bool
		op     int
	}
	evs := make([]ev, 0, 2*n)
	for k, i := range w {
		evs = append(evs, ev{h[i].Call, true, k}, ev{h[i].Return, false, k})
	}
	// By time; at equal times calls first, so that operations whose times
	// touch count as concurrent.
	slices.SortStableFunc(evs, func(a, b ev) int {
		if c := cmp64(a.t, b.t); c != 0 {
			return c
		}
		switch {
		case a.isCall && !b.isCall:
			return -1
		case !a.isCall && b.isCall:
			return 1
		}
		return 0
	})
	head := &event{op: -1}
	calls := make([]*event, n)
	rets := make([]*event, n)
	prev := head
	for _, e := range evs {
		x := &event{op: e.op, isCall: e.isCall, prev: prev}
		prev.next = x
		prev = x
		if e.isCall {
			calls[e.op] = x
		} else {
			rets[e.op] = x
		}
	}
	for k := range n {
		calls[k].match = rets[k]
	}

	type frame struct {
		e     *event
		state int64
	}
	words := (n + 63) / 64
	linearized := make([]uint64, words)
	seen := map[string]struct{}{}
	key := func(state int64) string {
		b := make([]byte, 0, 8*words+8)
		for _, x := range linearized {
			b = appendU64(b, x)
		}
		return string(appendU64(b, uint64(state)))
	}
	var stack []frame
	state := init
	e := head.next
	for head.next != nil {
		if e.isCall {
			o := h[w[e.op]]
			next, ok := state, true
			switch o.Kind {
			case Add:
				next = state + o.Delta
			case Read:
				ok = o.Value == state
			}
			if ok {
				linearized[e.op/64] |= 1 << (e.op % 64)
				k := key(next)
				if _, dup := seen[k]; !dup {
					if len(seen) >= maxConfigs {
						return nil, false, fmt.Errorf("%w (%d configurations)", ErrBudget, len(seen))
					}
					seen[k] = struct{}{}
					stack = append(stack, frame{e, state})
					state = next
					lift(e)
					e = head.next
					continue
				}
				linearized[e.op/64] &^= 1 << (e.op % 64)
			}
			e = e.next
			continue
		}
		// A response of an operation not linearized: undo the last choice.
		if len(stack) == 0 {
			return nil, false, nil
		}
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		state = f.state
		linearized[f.e.op/64] &^= 1 << (f.e.op % 64)
		unlift(f.e)
		e = f.e.next
	}
	order := make([]int, len(stack))
	for k, f := range stack {
		order[k] = w[f.e.op]
	}
	return order, true, nil
}

func appendU64(b []byte, x uint64) []byte {
	return append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24), byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56))
}

// Violation is a problem Quick found.
type Violation struct {
	// Read is the index of the offending read.
	Read int
	// Earlier, when not -1, is the index of a read that preceded Read in
	// real time and returned more (the counter went backwards).
	Earlier int
	// Reason says what is wrong.
	Reason string
}

// String describes the violation.
func (v Violation) String() string { return fmt.Sprintf("op #%d: %s", v.Read, v.Reason) }

// maxSubsetSums bounds the distinct subset sums Quick tracks for one read;
// beyond it the read's value is taken as achievable (Quick stays sound).
const maxSubsetSums = 1 << 16

// Quick looks for violations of a counter history (starting at 0) in
// polynomial time and returns the first one it finds, or false. A
// violation it returns is real (Check would say not linearizable); no
// violation proves nothing. It returns an error for a malformed history.
func Quick(h []Op) (Violation, bool, error) {
	if err := validate(h); err != nil {
		return Violation{}, false, err
	}
	nonNeg := true
	for _, o := range h {
		if o.Kind == Add && o.Delta < 0 {
			nonNeg = false
		}
	}
	for r, o := range h {
		if o.Kind != Read {
			continue
		}
		// Adds that responded before the read's invocation are in every
		// linearization before it; adds invoked after its response are
		// after it; the others may be either.
		var must int64
		sums := map[int64]struct{}{0: {}}
		capped := false
		for _, a := range h {
			if a.Kind != Add {
				continue
			}
			switch {
			case a.Return < o.Call:
				must += a.Delta
			case a.Call > o.Return:
			case !capped:
				next := make(map[int64]struct{}, 2*len(sums))
				for s := range sums {
					next[s] = struct{}{}
					next[s+a.Delta] = struct{}{}
				}
				sums = next
				capped = len(sums) > maxSubsetSums
			}
		}
		if _, ok := sums[o.Value-must]; !ok && !capped {
			return Violation{Read: r, Earlier: -1, Reason: fmt.Sprintf(
				"read %d, but the adds completed before it sum to %d and no subset of the concurrent adds makes up the difference", o.Value, must)}, true, nil
		}
	}
	if nonNeg {
		// With no negative delta the counter never decreases: a read
		// preceded by a read of a larger value is a violation.
		reads := []int{}
		for i, o := range h {
			if o.Kind == Read {
				reads = append(reads, i)
			}
		}
		slices.SortFunc(reads, func(a, b int) int { return cmp64(h[a].Call, h[b].Call) })
		byRet := slices.Clone(reads)
		slices.SortFunc(byRet, func(a, b int) int { return cmp64(h[a].Return, h[b].Return) })
		// Sweep reads by invocation, keeping the largest value among the
		// reads that responded before.
		best, k := -1, 0
		for _, r := range reads {
			for k < len(byRet) && h[byRet[k]].Return < h[r].Call {
				if best == -1 || h[byRet[k]].Value > h[best].Value {
					best = byRet[k]
				}
				k++
			}
			if best != -1 && h[best].Value > h[r].Value {
				return Violation{Read: r, Earlier: best, Reason: fmt.Sprintf(
					"read %d after op #%d read %d, and no add is negative", h[r].Value, best, h[best].Value)}, true, nil
			}
		}
	}
	return Violation{}, false, nil
}
