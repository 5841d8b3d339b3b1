package bench

import (
	"sort"
	"sync"
)

// Outcome is what the client knows, at the end of all its attempts, about
// one operation.
type Outcome int

const (
	// Acked: an attempt was acknowledged; the op must count exactly once.
	Acked Outcome = iota
	// Unknown: no attempt was acknowledged and at least one may have been
	// applied (a timeout, a lost answer, a closed connection); a correct
	// counter counts it at most once.
	Unknown
	// Failed: every attempt was refused before it could apply (unavailable,
	// overloaded, no connection); a correct counter does not count it.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Unknown:
		return "unknown"
	case Failed:
		return "failed"
	}
	return "outcome?"
}

// Ledger is the ground truth of one counter mode: for every key, the sum of
// the deltas whose op was acknowledged and the sum of those whose outcome is
// unknown. It is safe for concurrent use.
type Ledger struct {
	mu   sync.Mutex
	keys map[int]*KeyTally
	ops  [3]int64
}

// KeyTally is one key's ground truth.
type KeyTally struct {
	Expected  int64 // Σ deltas of acknowledged updates: what the counter must hold
	Uncertain int64 // Σ deltas of updates of unknown outcome: it may also hold these, once
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{keys: map[int]*KeyTally{}} }

// Record enters an op's updates with its outcome.
func (l *Ledger) Record(ups []Update, o Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops[o]++
	for _, u := range ups {
		t := l.keys[u.Key]
		if t == nil {
			t = &KeyTally{}
			l.keys[u.Key] = t
		}
		switch o {
		case Acked:
			t.Expected += u.Delta
		case Unknown:
			t.Uncertain += u.Delta
		}
	}
}

// RecordHeld enters an op whose deltas are held by the client until they
// are handed off (handoff counters): they must be counted exactly once
// whatever the op's outcome o, which is only counted.
func (l *Ledger) RecordHeld(ups []Update, o Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops[o]++
	for _, u := range ups {
		t := l.keys[u.Key]
		if t == nil {
			t = &KeyTally{}
			l.keys[u.Key] = t
		}
		t.Expected += u.Delta
	}
}

// Ops returns how many ops were recorded with each outcome.
func (l *Ledger) Ops() (acked, unknown, failed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops[Acked], l.ops[Unknown], l.ops[Failed]
}

// Keys returns the keys the ledger holds, in order.
func (l *Ledger) Keys() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, 0, len(l.keys))
	for k := range l.keys {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// Expected returns Σ Expected over every key (the acknowledged total so far).
func (l *Ledger) Expected() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, t := range l.keys {
		n += t.Expected
	}
	return n
}

// Tally is a mode's accuracy: the ground truth against the values read.
type Tally struct {
	Expected  int64 // Σ acknowledged deltas
	Uncertain int64 // Σ deltas of unknown outcome
	Final     int64 // Σ values read after the run
	// Over is Σ over keys of what a key holds above Expected + Uncertain:
	// increments counted more than once (nothing but a duplicate explains it).
	Over int64
	// Under is Σ over keys of what a key holds below Expected: acknowledged
	// increments missing (on an FBF counter, fresh ops dismissed as retries).
	Under int64
	// ErrorPct is 100 · (Over + Under) / Expected.
	ErrorPct float64
}

// Tally compares the ledger with the values read after the run (final[key];
// a key absent from final reads 0). Over- and under-count are per key, so
// one key's excess never hides another's loss.
func (l *Ledger) Tally(final map[int]int64) Tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	var t Tally
	for k, kt := range l.keys {
		v := final[k]
		t.Expected += kt.Expected
		t.Uncertain += kt.Uncertain
		t.Final += v
		if hi := kt.Expected + kt.Uncertain; v > hi {
			t.Over += v - hi
		}
		if v < kt.Expected {
			t.Under += kt.Expected - v
		}
	}
	for k, v := range final {
		if _, ok := l.keys[k]; !ok {
			t.Final += v
			t.Over += max(0, v) // a key nothing was sent to
		}
	}
	if t.Expected > 0 {
		t.ErrorPct = 100 * float64(t.Over+t.Under) / float64(t.Expected)
	}
	return t
}
