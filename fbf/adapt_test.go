package fbf

import (
	"testing"
	"time"
)

// fig13Rate is the Fig. 13-style workload used by the adaptation test (and
// by bench/fbfexp): ops/s rising 10→60 over 20 s, a quiet 5/s until 35 s,
// then rising 20→150 until 90 s.
func fig13Rate(s float64) float64 {
	switch {
	case s < 20:
		return 10 + 50*s/20
	case s < 35:
		return 5
	default:
		return 20 + 130*(s-35)/55
	}
}

// TestAdaptationFig13 drives an adaptive filter (m=6250, k=5, N=1, t=11 s,
// target 1e-3, H=20 s) with batches every 2–3 s of the rising workload, and
// checks after every batch and every virtual second that the estimate stays
// under the target, that (N+1)·t ≥ H, and that every id is present while it
// is younger than H.
func TestAdaptationFig13(t *testing.T) {
	seed := testSeed(t, 0)
	r := newRand(seed)
	const target, horizon = 1e-3, 20 * time.Second
	f := mustNew(t, Config{Bits: 6250, Hashes: 5, Past: 1, Period: 11 * time.Second,
		TargetFPP: target, RetryHorizon: horizon, MaxPast: 62})
	type rec struct {
		x   []byte
		ins time.Duration
	}
	var recs []rec
	check := func(now time.Duration) {
		t.Helper()
		if est := f.EstimatedFPP(); est >= target {
			st := f.Stats()
			t.Fatalf("at %v: estimated FPP %.3g ≥ target %g (N=%d t=%v ids %v)", now, est, target, st.Past, st.Period, st.IDs)
		}
		if w := f.Window(); w < horizon {
			t.Fatalf("at %v: window (N+1)·t = %v < H = %v", now, w, horizon)
		}
		for _, rc := range recs {
			if now-rc.ins <= horizon && !f.Contains(rc.x) {
				t.Fatalf("at %v: id inserted at %v forgotten within H", now, rc.ins)
			}
		}
	}
	seq := uint64(0)
	now := time.Duration(0)
	next := 2*time.Second + time.Duration(r.Int64N(int64(time.Second)))
	scaleUps := uint64(0)
	for now < 90*time.Second {
		now += time.Second
		for next <= now { // a batch
			f.Advance(at(next))
			gap := 2*time.Second + time.Duration(r.Int64N(int64(time.Second)))
			size := int(fig13Rate(next.Seconds()) * gap.Seconds())
			for i := 0; i < size; i++ {
				x := id(seed, seq)
				seq++
				if !f.TestAndAdd(x) && i%10 == 0 {
					recs = append(recs, rec{x, next})
				}
			}
			check(next)
			next += gap
		}
		f.Advance(at(now))
		check(now)
		scaleUps = f.Stats().ScaleUps + f.Stats().EarlyRefreshes
	}
	st := f.Stats()
	t.Logf("end: N=%d t=%v refreshes=%d early=%d ups=%d downs=%d saturated=%d delayed=%d", st.Past, st.Period, st.Refreshes, st.EarlyRefreshes, st.ScaleUps, st.ScaleDowns, st.Saturated, st.DelayedDrops)
	if scaleUps == 0 {
		t.Fatal("the workload never made the filter adapt; the test would prove nothing")
	}
	if st.ScaleDowns == 0 {
		t.Error("the quiet phase never scaled the filter down")
	}
}

// TestAdaptationNeverShrinksWindow runs random loads against random
// adaptive configurations and checks the window bound at every step.
func TestAdaptationNeverShrinksWindow(t *testing.T) {
	seed := testSeed(t, 0)
	r := newRand(seed)
	for trial := 0; trial < 20; trial++ {
		n := 1 + r.IntN(4)
		period := time.Duration(1+r.IntN(10)) * time.Second
		h := time.Duration(r.Int64N(int64(window(n, period)) + 1))
		f := mustNew(t, Config{Bits: 2048, Hashes: 4, Past: n, Period: period, TargetFPP: 1e-3, RetryHorizon: h, MaxPast: 40})
		var recs []struct {
			x   []byte
			ins time.Duration
		}
		now := time.Duration(0)
		for step := 0; step < 300; step++ {
			now += time.Duration(r.Int64N(int64(time.Second)))
			f.Advance(at(now))
			burst := r.IntN(3) == 0
			for i := 0; i < r.IntN(40)+boolInt(burst)*300; i++ {
				x := id(uint64(trial), r.Uint64())
				if !f.TestAndAdd(x) && i%7 == 0 {
					recs = append(recs, struct {
						x   []byte
						ins time.Duration
					}{x, now})
				}
			}
			if w := f.Window(); w < h {
				t.Fatalf("trial %d step %d: window %v < H %v", trial, step, w, h)
			}
			for _, rc := range recs {
				if now-rc.ins <= h && !f.Contains(rc.x) {
					t.Fatalf("trial %d: id forgotten at age %v ≤ H %v (N=%d t=%v)", trial, now-rc.ins, h, f.Past(), f.Period())
				}
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
