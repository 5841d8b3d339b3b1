package gossip

import (
	"math"
	"time"
)

// windowSize is how many inter-arrival times the failure detector keeps per
// peer (Cassandra's ArrivalWindow sample size).
const windowSize = 1000

// phiFactor turns t/mean into -log10(e^(-t/mean)): phi under the exponential
// approximation of the inter-arrival distribution (Cassandra's PHI_FACTOR).
const phiFactor = 1 / math.Ln10

// arrivalWindow is the phi-accrual failure detector's state for one peer: the
// last inter-arrival times of its heartbeats, as Cassandra's ArrivalWindow.
// A heartbeat is any fresh state of the peer (a higher version), whether it
// came from the peer or through another node.
type arrivalWindow struct {
	intervals []time.Duration // ring buffer, at most windowSize
	next      int             // where the next interval goes once full
	sum       time.Duration
	last      time.Time // arrival of the last heartbeat; zero before the first

	initial     time.Duration // recorded at the first heartbeat
	maxInterval time.Duration // longer gaps are not recorded
}

func newArrivalWindow(initial, maxInterval time.Duration) arrivalWindow {
	return arrivalWindow{initial: initial, maxInterval: maxInterval}
}

// report records a heartbeat arriving at now. The first one records the
// initial interval (deliberately large, so that a new peer is not convicted
// early); later ones record the time since the previous heartbeat unless it
// exceeds maxInterval (a gap that long is an outage, not a sample).
func (w *arrivalWindow) report(now time.Time) {
	if w.last.IsZero() {
		w.add(w.initial)
	} else if iat := now.Sub(w.last); iat >= 0 && iat <= w.maxInterval {
		w.add(iat)
	}
	if now.After(w.last) {
		w.last = now
	}
}

func (w *arrivalWindow) add(d time.Duration) {
	if len(w.intervals) < windowSize {
		w.intervals = append(w.intervals, d)
	} else {
		w.sum -= w.intervals[w.next]
		w.intervals[w.next] = d
		w.next = (w.next + 1) % windowSize
	}
	w.sum += d
}

// mean is the mean inter-arrival time in nanoseconds.
func (w *arrivalWindow) mean() float64 {
	if len(w.intervals) == 0 {
		return 0
	}
	return float64(w.sum) / float64(len(w.intervals))
}

// phi is -log10 of the probability that no heartbeat arrives for as long as
// it has been since the last one, with exponentially distributed
// inter-arrival times of the window's mean: phi = (t/mean)·log10(e).
// It is 0 before the first heartbeat.
func (w *arrivalWindow) phi(now time.Time) float64 {
	if w.last.IsZero() || len(w.intervals) == 0 {
		return 0
	}
	t := now.Sub(w.last)
	if t <= 0 {
		return 0
	}
	m := w.mean()
	if m < 1 {
		m = 1 // only zero-length intervals: any silence is suspicious
	}
	return phiFactor * float64(t) / m
}
