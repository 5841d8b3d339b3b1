package clusterexp

import (
	"fmt"
	"math"
)

// z95 is the standard normal quantile of a two-sided 95 % interval.
const z95 = 1.959963984540054

// Wilson returns the Wilson score interval of k successes in n trials at
// the normal quantile z (z95 for 95 %). n ≤ 0 gives [0, 1]; k is clamped
// to [0, n].
func Wilson(k, n int64, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	k = min(max(k, 0), n)
	nf := float64(n)
	p := float64(k) / nf
	z2 := z * z
	den := 1 + z2/nf
	mid := (p + z2/(2*nf)) / den
	half := z / den * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return max(0, mid-half), min(1, mid+half)
}

// Rate is one counter's over-count as a share of its acknowledged
// updates: Over of N, with its Wilson 95 % interval.
type Rate struct {
	Name    string
	Over, N int64
	P       float64 // Over / N
	Lo, Hi  float64
}

// NewRate is the rate of over over n updates.
func NewRate(name string, over, n int64) Rate {
	r := Rate{Name: name, Over: over, N: n}
	if n > 0 {
		r.P = float64(min(max(over, 0), n)) / float64(n)
	}
	r.Lo, r.Hi = Wilson(over, n, z95)
	return r
}

func (r Rate) String() string {
	return fmt.Sprintf("%s %.2f %% [%.2f, %.2f] (%d of %d)", r.Name, 100*r.P, 100*r.Lo, 100*r.Hi, r.Over, r.N)
}

// Agreement compares two over-count rates: Z is the two-proportion z
// statistic (pooled), Agree whether |Z| < 1.96, i.e. the difference is
// within the spread two binomial samples of these sizes show 95 % of the
// time.
type Agreement struct {
	A, B  Rate
	Z     float64
	Agree bool
}

// Compare tests whether rates a and b differ by more than chance.
func Compare(a, b Rate) Agreement {
	ag := Agreement{A: a, B: b}
	if a.N > 0 && b.N > 0 {
		pool := float64(min(a.Over, a.N)+min(b.Over, b.N)) / float64(a.N+b.N)
		se := math.Sqrt(pool * (1 - pool) * (1/float64(a.N) + 1/float64(b.N)))
		if se > 0 {
			ag.Z = (a.P - b.P) / se
		}
	}
	ag.Agree = math.Abs(ag.Z) < z95
	return ag
}

func (ag Agreement) String() string {
	verdict := "agree within their 95 % spread"
	if !ag.Agree {
		verdict = "differ by more than their 95 % spread"
	}
	return fmt.Sprintf("over-count per update: %s vs %s; z = %.2f: %s", ag.A, ag.B, ag.Z, verdict)
}

// PredictedOvercount is the over-count per op that lost acknowledgements
// alone cause: every attempt's answer is lost with probability p and the
// client retries an op at most attempts times in all, and every retry of
// an applied update counts it again: p + p² + … + p^(attempts−1).
func PredictedOvercount(p float64, attempts int) float64 {
	var sum, term float64 = 0, 1
	for i := 1; i < attempts; i++ {
		term *= p
		sum += term
	}
	return sum
}
