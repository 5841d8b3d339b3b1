package fbf

import (
	"time"
)

// Stats is a snapshot of the filter's shape, load and memory.
type Stats struct {
	// Now is the filter's time (the latest time it was advanced to).
	Now time.Time
	// Past is the nominal N; Filters the number of constituent filters,
	// placeholders included (N+2 in steady state); RealFilters those that
	// hold bits (index 0 the future filter, the last the oldest).
	Past, Filters, RealFilters int
	// Period is the refresh period t.
	Period time.Duration
	// Window is the guaranteed window (N+1)·t; MaxWindow is (N+2)·t.
	Window, MaxWindow time.Duration
	// IDs is the number of ids inserted into each real filter; SetBits its
	// number of set bits.
	IDs     []int64
	SetBits []uint
	// Remembered is the number of distinct ids the filter holds (each id is
	// counted once, in the filter that holds its newest copy).
	Remembered int64
	// BitsInUse is the memory of the bit arrays, m × RealFilters.
	BitsInUse uint64
	// EstimatedFPP is Equation (3) from the id counts; EstimatedFPPBits the
	// same from the set bits.
	EstimatedFPP, EstimatedFPPBits float64
	// BitsPerID is BitsInUse / Remembered; OptimalBitsPerID is what a static
	// Bloom filter would need for EstimatedFPP, 1.44·log₂(1/p).
	BitsPerID, OptimalBitsPerID float64
	// LastAdaptFPP is the estimate seen by the latest adaptation step.
	LastAdaptFPP float64
	Counters
}

// Stats returns the filter's current statistics.
func (f *Filter) Stats() Stats {
	f.mu.Lock()
	st := Stats{
		Now:          time.Unix(0, f.now),
		Past:         f.past,
		Period:       f.period,
		Window:       window(f.past, f.period),
		MaxWindow:    window(f.past+1, f.period),
		LastAdaptFPP: f.lastFPP,
		Counters:     f.counters,
	}
	g := f.gen.Load()
	f.mu.Unlock()

	st.Filters, st.RealFilters = g.filters(), len(g.slots)
	var fresh int64
	for _, s := range g.slots {
		n := s.ids.Load()
		st.IDs = append(st.IDs, n)
		st.SetBits = append(st.SetBits, f.popcount(s))
		// ids in filter j = its future copies + the present copies of the
		// ids whose future copy is in filter j−1.
		fresh = max(0, n-fresh)
		st.Remembered += fresh
	}
	st.BitsInUse = f.m * uint64(len(g.slots))
	st.EstimatedFPP = f.estimateFrom(g, false)
	st.EstimatedFPPBits = f.estimateFrom(g, true)
	if st.Remembered > 0 {
		st.BitsPerID = float64(st.BitsInUse) / float64(st.Remembered)
	}
	st.OptimalBitsPerID = OptimalBitsPerID(st.EstimatedFPP)
	return st
}

// Past returns the nominal number of past filters N.
func (f *Filter) Past() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.past
}

// Period returns the refresh period t.
func (f *Filter) Period() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.period
}

// Window returns the guaranteed window (N+1)·t: an id inserted now is
// remembered for longer than this (with no adaptation, for at most (N+2)·t).
func (f *Filter) Window() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return window(f.past, f.period)
}

// BitsInUse returns the memory of the filter's bit arrays, in bits.
func (f *Filter) BitsInUse() uint64 { return f.m * uint64(len(f.gen.Load().slots)) }

// IDCounts returns the number of ids inserted into each real filter, future
// first, oldest last.
func (f *Filter) IDCounts() []int64 {
	g := f.gen.Load()
	out := make([]int64, len(g.slots))
	for i, s := range g.slots {
		out[i] = s.ids.Load()
	}
	return out
}
