package fbf

import "math"

// FilterFPP is Equation (1) in its intended form: the false-positive
// probability of one Bloom filter of m bits and k hash functions holding l
// ids, (1 − e^(−k·l/m))^k.
func FilterFPP(m, k uint, l float64) float64 {
	if m == 0 || l <= 0 {
		return 0
	}
	return math.Pow(-math.Expm1(-float64(k)*l/float64(m)), float64(k))
}

// FilterFPPFromBits is the false-positive probability of one Bloom filter of
// m bits and k hash functions with set bits set: (set/m)^k.
func FilterFPPFromBits(m, k uint, set uint) float64 {
	if m == 0 {
		return 0
	}
	return math.Pow(float64(set)/float64(m), float64(k))
}

// EstimateIDs estimates the number of ids in a Bloom filter of m bits and k
// hash functions from its number of set bits: −(m/k)·ln(1 − set/m).
func EstimateIDs(m, k uint, set uint) float64 {
	if set >= m {
		return math.Inf(1)
	}
	return -float64(m) / float64(k) * math.Log1p(-float64(set)/float64(m))
}

// FBFFPP is Equation (3): the false-positive probability of the optimized
// membership check of an FBF whose constituent filters (index 0 the future,
// 1 the present, last the oldest) have false-positive probabilities ps,
// assuming independence: 1 − (1−p₀)·Π_{i=1}^{n−2}(1 − pᵢ·pᵢ₊₁)·(1 − p_{n−1}).
func FBFFPP(ps []float64) float64 {
	n := len(ps)
	switch n {
	case 0:
		return 0
	case 1:
		return ps[0]
	}
	q := 1 - ps[0]
	for i := 1; i+1 < n; i++ {
		q *= 1 - ps[i]*ps[i+1]
	}
	q *= 1 - ps[n-1]
	return 1 - q
}

// SimpleFPP is the false-positive probability of the simple membership check
// (the id is in any filter), assuming independence: 1 − Π(1 − pᵢ).
func SimpleFPP(ps []float64) float64 {
	q := 1.0
	for _, p := range ps {
		q *= 1 - p
	}
	return 1 - q
}

// OptimalBitsPerID is the number of bits per id that a static Bloom filter
// with the optimal k needs for false-positive probability p:
// log₂(1/p)/ln 2 ≈ 1.44·log₂(1/p).
func OptimalBitsPerID(p float64) float64 {
	if p <= 0 || p >= 1 {
		return math.NaN()
	}
	return math.Log2(1/p) / math.Ln2
}

// FBFFPPCorrelated is a refinement of Equation (3) that models what Eq. 3's
// independence assumption misses: consecutive filters hold the same ids (the
// present copies in filter j+1 are the future copies in filter j), so a
// false positive in one makes one in the other likely. fresh[j] is the number
// of ids whose newest copy is in filter j (filter j holds fresh[j] and
// fresh[j−1] ids). A bit probed in both filters j and j+1 is set with
// probability q(fresh[j]) + (1−q(fresh[j]))·q(fresh[j−1])·q(fresh[j+1]),
// q(x) = 1 − e^(−k·x/m); the pair (last−1, last) is implied by "oldest alone"
// and is not counted twice. The events are then combined as in Eq. 3.
func FBFFPPCorrelated(m, k uint, fresh []float64) float64 {
	n := len(fresh)
	if n == 0 || m == 0 {
		return 0
	}
	q := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		return -math.Expm1(-float64(k) * x / float64(m))
	}
	pk := func(x float64) float64 { return math.Pow(x, float64(k)) }
	at := func(j int) float64 {
		if j < 0 || j >= n {
			return 0
		}
		return fresh[j]
	}
	noFP := 1 - pk(q(at(0)))
	last := n - 1
	for j := 1; j+1 < last; j++ {
		qb := q(at(j))
		noFP *= 1 - pk(qb+(1-qb)*q(at(j-1))*q(at(j+1)))
	}
	if last >= 1 {
		noFP *= 1 - pk(q(at(last)+at(last-1)))
	}
	return 1 - noFP
}
