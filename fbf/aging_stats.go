package fbf

import (
	"math"
	"time"
)

// AgingStats is a snapshot of an aging filter's shape, load and memory.
type AgingStats struct {
	// Now is the filter's time: the start of its latest epoch.
	Now time.Time
	// Window is the guaranteed window W, MaxWindow W plus one epoch,
	// Epoch the epoch (W / AgingEpochs).
	Window, MaxWindow, Epoch time.Duration
	// FingerprintBits is f; SlotBits the bits a slot of the first tables
	// takes, f + AgingTagBits packed, one less semi-sorted (Layout).
	FingerprintBits, SlotBits uint
	Layout                    AgingLayout
	// Shards and Tables (the shards' first tables and the grown ones).
	Shards, Tables int
	// Slots of every table; Remembered the ids the filter holds (its
	// occupied slots, each shard swept to the current epoch first).
	Slots      uint64
	Remembered int64
	// Load is Remembered / Slots.
	Load float64
	// BitsInUse is the bits of the buckets (grown tables have
	// AgingGrowthBits more per slot); Bytes the memory of the tables
	// (with two padding words each); MaxBytes the bound of growth.
	BitsInUse       uint64
	Bytes, MaxBytes int64
	// BitsPerID is BitsInUse / Remembered; OptimalBitsPerID what a static
	// Bloom filter would need at the target, 1.44·log₂(1/TargetFPP).
	BitsPerID, OptimalBitsPerID float64
	// EstimatedFPP is the false-positive probability at the current load.
	EstimatedFPP float64
	AgingCounters
}

// AgingCounters counts the aging filter's structural events.
type AgingCounters struct {
	// Grown counts tables added to shards that were full; Released the
	// grown tables dropped once all their ids were forgotten.
	Grown, Released uint64
	// Expired counts ids forgotten at the end of their window.
	Expired uint64
	// EvictedEarly counts ids forgotten before their window because a
	// shard was full and could not grow (MaxBytes); each was older than
	// RetryHorizon.
	EvictedEarly uint64
	// Saturated counts fresh ids reported present because a shard was
	// full, could not grow and held no id older than RetryHorizon: the
	// filter dismissed them rather than forget an id of the horizon.
	Saturated uint64
}

// Counters returns the filter's event counters.
func (f *AgingFilter) Counters() AgingCounters {
	return AgingCounters{Grown: f.grown.Load(), Released: f.released.Load(), Expired: f.expired.Load(),
		EvictedEarly: f.evicted.Load(), Saturated: f.saturated.Load()}
}

// Stats returns the filter's statistics. It sweeps every shard to the
// current epoch, so that Remembered counts only ids still remembered.
func (f *AgingFilter) Stats() AgingStats {
	cur := f.current()
	st := AgingStats{Now: time.Unix(0, f.start+cur*f.epochNs), Window: f.cfg.Window, MaxWindow: f.size.MaxWindow, Epoch: f.size.Epoch,
		FingerprintBits: f.size.FingerprintBits, SlotBits: f.size.SlotBits, Layout: f.size.Layout, Shards: len(f.shards), MaxBytes: f.cfg.MaxBytes,
		OptimalBitsPerID: f.size.OptimalBitsPerID}
	var fpp float64
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		f.sweep(sh, cur)
		fpp += f.shardFPP(sh)
		for _, t := range sh.tables {
			st.Tables++
			st.Slots += t.nb * AgingBucketSlots
			st.BitsInUse += t.bits()
			st.Remembered += t.live
			st.Bytes += t.bytes()
		}
		sh.mu.Unlock()
	}
	st.EstimatedFPP = fpp / float64(len(f.shards))
	if st.Slots > 0 {
		st.Load = float64(st.Remembered) / float64(st.Slots)
	}
	if st.Remembered > 0 {
		st.BitsPerID = float64(st.BitsInUse) / float64(st.Remembered)
	}
	st.AgingCounters = f.Counters()
	return st
}

// shardFPP is the false-positive probability of a query in sh: it meets
// 2b slots of each table, each occupied with the table's load.
func (f *AgingFilter) shardFPP(sh *agingShard) float64 {
	var miss float64 // log of the probability that no table answers
	for _, t := range sh.tables {
		miss += math.Log1p(-agingFPP(2*float64(t.live)/float64(t.nb), uint(t.f)))
	}
	return -math.Expm1(miss)
}

// EstimatedFPP returns the false-positive probability of a query at the
// current load, averaged over the shards (ids not yet swept out of a shard
// count as remembered: the estimate errs high).
func (f *AgingFilter) EstimatedFPP() float64 {
	var fpp float64
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		fpp += f.shardFPP(sh)
		sh.mu.Unlock()
	}
	return math.Min(1, fpp/float64(len(f.shards)))
}
