package fbf

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// fillEven inserts l ids into f in N+2 equal batches, one per period, with a
// refresh between batches: every id stays remembered, the future filter holds
// one batch and every other filter two.
func fillEven(f *Filter, l int, client uint64) {
	n := f.Past() + 2
	t := f.Period()
	now := f.Stats().Now
	for b := 0; b < n; b++ {
		for i := b * l / n; i < (b+1)*l/n; i++ {
			f.TestAndAdd(id(client, uint64(i)))
		}
		if b < n-1 {
			now = now.Add(t)
			f.Advance(now)
		}
	}
}

// probe counts the never-inserted ids (client probeClient) that the optimized
// and the simple checks report present.
func probe(f *Filter, probes int, probeClient uint64) (opt, simple int) {
	for i := 0; i < probes; i++ {
		h := HashID(id(probeClient, uint64(i)))
		if f.ContainsHash(h) {
			opt++
		}
		if f.ContainsSimpleHash(h) {
			simple++
		}
	}
	return opt, simple
}

// within reports whether count is within the tolerance of the expectation
// lambda = probes × analytic FPP: 5 Poisson standard deviations plus a
// fraction model of lambda for the model's own error.
func within(count int, lambda, model float64) bool {
	return math.Abs(float64(count)-lambda) <= 5*math.Sqrt(lambda)+model*lambda
}

// TestFPPMatchesAnalysis compares the empirical FPP of both checks with the
// analysis for several (m, k, l, N), with 300k probes each; the expected
// counts are in the hundreds or more, so the tolerance is meaningful.
// Tolerances: the correlated refinement of Eq. 3 within 5σ + 10 %; Eq. 3
// itself within 5σ + 30 % (it assumes independent filters, and consecutive
// filters share ids: at N=6 with loaded filters it is ~25 % low); the simple
// check's analysis within 5σ + 20 %. The optimized check must beat the
// simple one.
func TestFPPMatchesAnalysis(t *testing.T) {
	seed := testSeed(t, 1)
	const probes = 300_000
	for _, tc := range []struct {
		m, k uint
		l, n int
	}{
		{6250, 5, 600, 1},
		{4096, 3, 300, 2},
		{10000, 4, 1500, 3},
		{20000, 7, 8000, 6},
	} {
		t.Run(fmt.Sprintf("m=%d,k=%d,l=%d,N=%d", tc.m, tc.k, tc.l, tc.n), func(t *testing.T) {
			f := mustNew(t, Config{Bits: tc.m, Hashes: tc.k, Past: tc.n, Period: time.Second})
			fillEven(f, tc.l, seed)
			opt, simple := probe(f, probes, seed+1)
			wantOpt := f.EstimatedFPP() * probes
			wantSimple := f.EstimatedFPPSimple() * probes
			wantCorr := f.EstimatedFPPCorrelated() * probes
			t.Logf("optimized %d (Eq.3 %.0f, from bits %.0f, correlated %.0f), simple %d (analysis %.0f)", opt, wantOpt, f.EstimatedFPPFromBits()*probes, wantCorr, simple, wantSimple)
			if wantOpt < 100 {
				t.Fatalf("test case too weak: %.0f expected hits", wantOpt)
			}
			if !within(opt, wantCorr, 0.10) {
				t.Errorf("optimized: %d false positives in %d probes, correlated analysis expects %.0f", opt, probes, wantCorr)
			}
			if !within(opt, wantOpt, 0.30) {
				t.Errorf("optimized: %d false positives in %d probes, analysis expects %.0f", opt, probes, wantOpt)
			}
			if !within(simple, wantSimple, 0.20) {
				t.Errorf("simple: %d false positives in %d probes, analysis expects %.0f", simple, probes, wantSimple)
			}
			if opt >= simple {
				t.Errorf("optimized check (%d) not better than simple (%d)", opt, simple)
			}
		})
	}
}

func TestAnalysisFormulas(t *testing.T) {
	// Eq. 1 at the paper's Fig. 10 point: m=6250, k=5, 300 ids → 4.4e-4.
	if p := FilterFPP(6250, 5, 300); math.Abs(p-4.4e-4) > 0.05e-4 {
		t.Errorf("FilterFPP(6250,5,300) = %g, want 4.4e-4", p)
	}
	// Eq. 3 for a basic FBF: 1 − (1−a)(1−b·c)(1−c).
	a, b, c := 0.1, 0.2, 0.3
	if got, want := FBFFPP([]float64{a, b, c}), 1-(1-a)*(1-b*c)*(1-c); math.Abs(got-want) > 1e-15 {
		t.Errorf("FBFFPP = %g, want %g", got, want)
	}
	if got, want := SimpleFPP([]float64{a, b, c}), 1-(1-a)*(1-b)*(1-c); math.Abs(got-want) > 1e-15 {
		t.Errorf("SimpleFPP = %g, want %g", got, want)
	}
	if got := OptimalBitsPerID(0.001); math.Abs(got-14.38) > 0.01 {
		t.Errorf("OptimalBitsPerID(0.001) = %g, want 14.38", got)
	}
	if got := EstimateIDs(1000, 3, 0); got != 0 {
		t.Errorf("EstimateIDs of an empty filter = %g", got)
	}
}

// TestForgetting inserts 2000 ids, then keeps the filter busy with other ids
// for (N+2)·t: the old ids must then be reported present no more often than
// never-inserted probes are (5 Poisson deviations + 1 of slack).
func TestForgetting(t *testing.T) {
	seed := testSeed(t, 2)
	const n, batch = 2, 2000
	period := time.Second
	f := mustNew(t, Config{Bits: 1 << 16, Hashes: 5, Past: n, Period: period})
	for i := 0; i < batch; i++ {
		f.TestAndAdd(id(seed, uint64(i)))
	}
	checkAll := func(want bool) int {
		c := 0
		for i := 0; i < batch; i++ {
			if f.Contains(id(seed, uint64(i))) {
				c++
			}
		}
		return c
	}
	// background load: 2000 ids per period, in 10 steps
	seq := uint64(0)
	for d := period / 10; d <= time.Duration(n+2)*period; d += period / 10 {
		f.Advance(at(d))
		for range batch / 10 {
			f.TestAndAdd(id(seed+1, seq))
			seq++
		}
		if d <= time.Duration(n+1)*period {
			if c := checkAll(true); c != batch {
				t.Fatalf("at %v (within the window) only %d of %d old ids present", d, c, batch)
			}
		}
	}
	old := checkAll(false)
	opt, _ := probe(f, 200_000, seed+2)
	lambda := float64(opt) / 200_000 * batch
	t.Logf("old ids present: %d of %d; probe FPP %.2e → %.1f expected", old, batch, float64(opt)/200_000, lambda)
	if float64(old) > lambda+5*math.Sqrt(lambda)+1 {
		t.Fatalf("%d of %d old ids still present after (N+2)·t; false positives explain %.1f", old, batch, lambda)
	}
}
