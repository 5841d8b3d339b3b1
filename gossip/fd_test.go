package gossip

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func TestArrivalWindowPhi(t *testing.T) {
	w := newArrivalWindow(2*time.Second, 2*time.Second)
	if phi := w.phi(epoch.Add(time.Hour)); phi != 0 {
		t.Fatalf("phi before any heartbeat = %v, want 0", phi)
	}
	now := epoch
	w.report(now) // records the initial 2s
	if m := time.Duration(w.mean()); m != 2*time.Second {
		t.Fatalf("mean after first heartbeat = %v, want the initial 2s", m)
	}
	for range 3 {
		now = now.Add(time.Second)
		w.report(now)
	}
	// intervals 2s, 1s, 1s, 1s: mean 1.25s
	if m := time.Duration(w.mean()); m != 1250*time.Millisecond {
		t.Fatalf("mean = %v, want 1.25s", m)
	}
	now = now.Add(10 * time.Second) // an outage: not recorded
	w.report(now)
	if m := time.Duration(w.mean()); m != 1250*time.Millisecond {
		t.Fatalf("mean after a 10s gap = %v, want still 1.25s", m)
	}
	for _, tc := range []struct {
		after time.Duration
		phi   float64
	}{
		{0, 0},
		{1250 * time.Millisecond, 1 / math.Ln10},
		{10 * time.Second, 8 / math.Ln10},
	} {
		if got := w.phi(now.Add(tc.after)); math.Abs(got-tc.phi) > 1e-12 {
			t.Errorf("phi after %v = %v, want %v", tc.after, got, tc.phi)
		}
	}
	// phi is -log10 of the exponential survival probability.
	tt := 7 * time.Second
	want := -math.Log10(math.Exp(-float64(tt) / w.mean()))
	if got := w.phi(now.Add(tt)); math.Abs(got-want) > 1e-9 {
		t.Errorf("phi(%v) = %v, want -log10(exp(-t/mean)) = %v", tt, got, want)
	}
}

func TestArrivalWindowBounded(t *testing.T) {
	r := testseed.Rand(t)
	w := newArrivalWindow(2*time.Second, 2*time.Second)
	now := epoch
	var last []time.Duration // model: the last windowSize recorded intervals
	w.report(now)
	last = append(last, 2*time.Second)
	for range 3 * windowSize {
		d := time.Duration(r.Int64N(int64(3 * time.Second)))
		now = now.Add(d)
		w.report(now)
		if d <= 2*time.Second {
			last = append(last, d)
		}
	}
	if len(last) > windowSize {
		last = last[len(last)-windowSize:]
	}
	var sum time.Duration
	for _, d := range last {
		sum += d
	}
	if len(w.intervals) != windowSize || w.sum != sum {
		t.Fatalf("window holds %d intervals summing %v; want %d summing %v", len(w.intervals), w.sum, len(last), sum)
	}
}

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
