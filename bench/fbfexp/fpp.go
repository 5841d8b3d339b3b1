package fbfexp

import (
	"fmt"
	"time"

	"github.com/idemkv/idemkv/fbf"
)

// Schedule says how the ids of an FPP run are spread over time.
type Schedule struct {
	// Kind is "even" or "paper".
	//
	// even: the ids go in N+2 equal batches, one per period, with a refresh
	// between batches, so that every id is still remembered, the future
	// filter holds one batch and every other filter two (the steady state
	// of a constant rate).
	//
	// paper: the pacing of the paper's prototype (FBFPrototype Driver.cpp):
	// wait Gap, insert Batch ids at once, repeat; the filter refreshes every
	// Period from time zero (a refresh due at the same instant as a batch
	// happens first). The probes run right after the last batch.
	Kind  string
	Batch int
	Gap   time.Duration
}

// FPPParams describe one FPP measurement.
type FPPParams struct {
	Bits, Hashes uint
	Past         int
	Period       time.Duration
	Elements     int
	Probes       int
	Seed         uint64
	Schedule     Schedule
}

// FPPResult is one measurement: the empirical FPP of both checks over the
// probes, and the analytic ones.
type FPPResult struct {
	FPPParams
	Optimized, Simple float64 // empirical
	Analytic          float64 // Eq. 3 from the id counts
	AnalyticSimple    float64 // 1 − Π(1 − pᵢ)
	Correlated        float64 // fbf.FBFFPPCorrelated
}

// RunFPP inserts the ids into a fresh filter on the schedule and probes
// never-inserted ids.
func RunFPP(p FPPParams) (FPPResult, error) {
	f, err := newFilter(fbf.Config{Bits: p.Bits, Hashes: p.Hashes, Past: p.Past, Period: p.Period})
	if err != nil {
		return FPPResult{}, err
	}
	if p.Elements < 0 || p.Probes <= 0 {
		return FPPResult{}, fmt.Errorf("elements %d, probes %d: want ≥ 0 and > 0", p.Elements, p.Probes)
	}
	var buf [16]byte
	ins := insertClient(p.Seed)
	switch p.Schedule.Kind {
	case "even", "":
		n := p.Past + 2
		now := epoch
		for b := 0; b < n; b++ {
			for i := b * p.Elements / n; i < (b+1)*p.Elements/n; i++ {
				f.TestAndAdd(id(&buf, ins, uint64(i)))
			}
			if b < n-1 {
				now = now.Add(p.Period)
				f.Advance(now)
			}
		}
	case "paper":
		if p.Schedule.Batch <= 0 || p.Schedule.Gap <= 0 {
			return FPPResult{}, fmt.Errorf("paper schedule needs batch > 0 and gap > 0")
		}
		now := epoch
		for i := 0; i < p.Elements; {
			now = now.Add(p.Schedule.Gap)
			f.Advance(now)
			for j := 0; j < p.Schedule.Batch && i < p.Elements; j++ {
				f.TestAndAdd(id(&buf, ins, uint64(i)))
				i++
			}
		}
	default:
		return FPPResult{}, fmt.Errorf("unknown schedule %q (even, paper)", p.Schedule.Kind)
	}
	r := FPPResult{FPPParams: p,
		Analytic:       f.EstimatedFPP(),
		AnalyticSimple: f.EstimatedFPPSimple(),
		Correlated:     f.EstimatedFPPCorrelated(),
	}
	opt, simple := 0, 0
	pc := probeClient(p.Seed)
	for i := 0; i < p.Probes; i++ {
		h := fbf.HashID(id(&buf, pc, uint64(i)))
		if f.ContainsHash(h) {
			opt++
		}
		if f.ContainsSimpleHash(h) {
			simple++
		}
	}
	r.Optimized = float64(opt) / float64(p.Probes)
	r.Simple = float64(simple) / float64(p.Probes)
	return r, nil
}

// runTrials averages RunFPP over trials seeds (seed, seed+1, ...).
func runTrials(p FPPParams, trials int, prog *progress) (FPPResult, error) {
	var sum FPPResult
	for t := 0; t < trials; t++ {
		q := p
		q.Seed = p.Seed + uint64(t)
		r, err := RunFPP(q)
		if err != nil {
			return sum, err
		}
		sum.Optimized += r.Optimized / float64(trials)
		sum.Simple += r.Simple / float64(trials)
		sum.Analytic += r.Analytic / float64(trials)
		sum.AnalyticSimple += r.AnalyticSimple / float64(trials)
		sum.Correlated += r.Correlated / float64(trials)
		prog.Add(1)
	}
	sum.FPPParams = p
	return sum, nil
}
