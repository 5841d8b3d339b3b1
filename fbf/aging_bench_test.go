package fbf

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// atomicClock is a virtual clock read without a lock (ManualClock's mutex
// would be the benchmarks' bottleneck).
type atomicClock struct{ ns atomic.Int64 }

func (c *atomicClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// The long-window figures of docs/fbf.md: a 10-minute window at 20,000
// fresh ids per second, 12 M ids to remember.
const (
	longWindow = 10 * time.Minute
	longRate   = 20_000
)

// windowBench is a filter under test-and-add at longRate ids per second of
// virtual time: the clock follows the number of ids inserted.
type windowBench struct {
	clock *atomicClock
	start int64
	seq   atomic.Uint64
	test  func(h Hash) bool
}

func (w *windowBench) insert(client uint64) {
	i := w.seq.Add(1)
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], client)
	binary.BigEndian.PutUint64(buf[8:], i)
	if i%64 == 0 {
		w.clock.ns.Store(w.start + int64(i)*int64(time.Second)/longRate)
	}
	w.test(HashID(buf[:]))
}

var (
	agingBenchOnce sync.Once
	agingBench     *windowBench
)

// longAging returns the 10-minute aging filter at p = 0.001 in steady
// state (filled for a window and an epoch), shared by the benchmark runs.
func longAging(b *testing.B) *windowBench {
	agingBenchOnce.Do(func() {
		clock := &atomicClock{}
		clock.ns.Store(epoch.UnixNano())
		f, err := NewAging(AgingConfig{Window: longWindow, Rate: longRate, TargetFPP: 0.001, Clock: clock, RetryHorizon: 20 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		agingBench = &windowBench{clock: clock, start: epoch.UnixNano(), test: f.TestAndAddHash}
		for range int(longRate * f.MaxWindow().Seconds()) {
			agingBench.insert(1)
		}
	})
	return agingBench
}

// BenchmarkWindowTestAndAdd compares TestAndAdd of fresh ids (hashing
// included), with RunParallel, of a column's default FBF filter (m = 2^24,
// k = 7, N = 2, t = 20 s / 3: the default window, 20 s to 26.7 s, adaptive
// at 1e-4, following a virtual clock) and of the 10-minute aging filter at
// p = 0.001 (steady state: 12 M ids remembered), both at 20,000 ids per
// second of virtual time; and each on one goroutine, the aging filter
// also fresh.
func BenchmarkWindowTestAndAdd(b *testing.B) {
	b.Run("fbf-default/parallel", func(b *testing.B) {
		clock := &atomicClock{}
		clock.ns.Store(epoch.UnixNano())
		f := mustNew(b, Config{Bits: 1 << 24, Hashes: 7, Past: 2, Period: (20*time.Second + 2) / 3, Clock: clock,
			AutoAdvance: true, RetryHorizon: 20 * time.Second, TargetFPP: 1e-4})
		w := &windowBench{clock: clock, start: epoch.UnixNano(), test: f.TestAndAddHash}
		for range 40 * longRate { // two windows
			w.insert(1)
		}
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.insert(2)
			}
		})
	})
	b.Run("aging-10m/parallel", func(b *testing.B) {
		w := longAging(b)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.insert(2)
			}
		})
	})
	b.Run("aging-10m/single", func(b *testing.B) {
		w := longAging(b)
		b.ResetTimer()
		for b.Loop() {
			w.insert(2)
		}
	})
	b.Run("fbf-default/single", func(b *testing.B) {
		clock := &atomicClock{}
		clock.ns.Store(epoch.UnixNano())
		f := mustNew(b, Config{Bits: 1 << 24, Hashes: 7, Past: 2, Period: (20*time.Second + 2) / 3, Clock: clock,
			AutoAdvance: true, RetryHorizon: 20 * time.Second, TargetFPP: 1e-4})
		w := &windowBench{clock: clock, start: epoch.UnixNano(), test: f.TestAndAddHash}
		for range 40 * longRate {
			w.insert(1)
		}
		b.ResetTimer()
		for b.Loop() {
			w.insert(2)
		}
	})
	// The same filter fresh: at most b.N of its 12 M ids, so few kicks
	// (the ring benchmark's runs are this, not the steady state).
	b.Run("aging-10m-fresh/single", func(b *testing.B) {
		clock := &atomicClock{}
		clock.ns.Store(epoch.UnixNano())
		f, err := NewAging(AgingConfig{Window: longWindow, Rate: longRate, TargetFPP: 0.001, Clock: clock, RetryHorizon: 20 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		w := &windowBench{clock: clock, start: epoch.UnixNano(), test: f.TestAndAddHash}
		for b.Loop() {
			w.insert(2)
		}
	})
}

// BenchmarkAgingLayouts compares test-and-add of fresh ids (hashing
// included) in the 10-minute aging filter at steady state (12 M ids, as
// BenchmarkWindowTestAndAdd's aging-10m), packed and semi-sorted, at p =
// 0.01 (where AgingLayoutAuto semi-sorts) and 0.001 (where it packs), with
// RunParallel and on one goroutine, the four filters filled first:
//
//	go test ./fbf -run '^$' -bench AgingLayouts -benchtime 2000000x -count 5
func BenchmarkAgingLayouts(b *testing.B) {
	type filter struct {
		name string
		w    *windowBench
	}
	var filters []filter
	for _, p := range []float64{0.01, 0.001} {
		for _, layout := range []AgingLayout{AgingLayoutPacked, AgingLayoutSemiSorted} {
			clock := &atomicClock{}
			clock.ns.Store(epoch.UnixNano())
			f, err := NewAging(AgingConfig{Window: longWindow, Rate: longRate, TargetFPP: p, Clock: clock, RetryHorizon: 20 * time.Second, Layout: layout})
			if err != nil {
				b.Fatal(err)
			}
			w := &windowBench{clock: clock, start: epoch.UnixNano(), test: f.TestAndAddHash}
			for range int(longRate * f.MaxWindow().Seconds()) {
				w.insert(1)
			}
			filters = append(filters, filter{fmt.Sprintf("p=%g/%v", p, layout), w})
		}
	}
	b.ResetTimer()
	for _, f := range filters {
		b.Run(f.name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					f.w.insert(2)
				}
			})
		})
		b.Run(f.name+"/single", func(b *testing.B) {
			for b.Loop() {
				f.w.insert(2)
			}
		})
	}
}

// BenchmarkAgingWindowFigures computes the figures of the long window for
// p = 0.01, 0.001 and 0.0001: at the default load packed and semi-sorted,
// at 0.94 as AgingLayoutAuto chooses. An aging filter sized for 20,000
// ids per second over 10 minutes is filled at that rate (virtual time)
// for a window and an epoch, then run for one more epoch, during which its
// bits per remembered id are sampled 16 times (mean, least just before an
// epoch's ids expire, most just after) and its false-positive rate is
// measured with 250,000 fresh ids at each sample (4 M in all). It reports
// them as metrics and prints them; run it once:
//
//	go test ./fbf -run '^$' -bench AgingWindowFigures -benchtime 1x
func BenchmarkAgingWindowFigures(b *testing.B) {
	for _, p := range []float64{0.01, 0.001, 0.0001} {
		for _, layout := range []AgingLayout{AgingLayoutPacked, AgingLayoutSemiSorted} {
			agingFigures(b, p, DefaultAgingLoad, layout)
		}
	}
	for _, p := range []float64{0.01, 0.001, 0.0001} {
		agingFigures(b, p, 0.94, AgingLayoutAuto)
	}
}

// agingFigures is one run of BenchmarkAgingWindowFigures.
func agingFigures(b *testing.B, p, load float64, layout AgingLayout) {
	b.Run(fmt.Sprintf("load=%g/p=%g/%v", load, p, layout), func(b *testing.B) {
		for b.Loop() {
			clock := &atomicClock{}
			clock.ns.Store(epoch.UnixNano())
			f, err := NewAging(AgingConfig{Window: longWindow, Rate: longRate, TargetFPP: p, Load: load, Clock: clock, RetryHorizon: 20 * time.Second, Layout: layout})
			if err != nil {
				b.Fatal(err)
			}
			w := &windowBench{clock: clock, start: epoch.UnixNano(), test: f.TestAndAddHash}
			for range int(longRate * f.MaxWindow().Seconds()) {
				w.insert(1)
			}
			const samples, probes = 16, 250_000
			perSample := int(longRate*f.Sizing().Epoch.Seconds()) / samples
			var sumBits, sumIDs float64
			minBits, maxBits := math.Inf(1), 0.0
			fp, q := 0, uint64(0)
			var st AgingStats
			for range samples {
				for range perSample {
					w.insert(1)
				}
				st = f.Stats()
				sumBits += st.BitsPerID
				sumIDs += float64(st.Remembered)
				minBits, maxBits = math.Min(minBits, st.BitsPerID), math.Max(maxBits, st.BitsPerID)
				for range probes {
					q++
					var buf [16]byte
					binary.BigEndian.PutUint64(buf[:8], 3)
					binary.BigEndian.PutUint64(buf[8:], q)
					if f.Contains(buf[:]) {
						fp++
					}
				}
			}
			fpr := float64(fp) / float64(q)
			mean := sumBits / samples
			opt := OptimalBitsPerID(p)
			b.ReportMetric(mean, "bits/id")
			b.ReportMetric(mean/opt, "×optimum")
			b.ReportMetric(fpr, "FPR")
			b.ReportMetric(fpr*1e6, "dropped/M")
			fmt.Printf("aging load=%g p=%g %v (%v): f=%d, %d shards, %.2f M ids remembered (mean), %.2f bits/id mean (%.2f×optimum %.2f; %.2f to %.2f over the epoch), "+
				"measured FPR %.3g (%d of %d: %.0f legitimate increments dropped per million; estimated %.3g), %.1f MiB, grown %d, evicted %d, saturated %d\n",
				load, p, layout, f.Sizing().Layout, st.FingerprintBits, st.Shards, sumIDs/samples/1e6, mean, mean/opt, opt, minBits, maxBits, fpr, fp, q, fpr*1e6, st.EstimatedFPP,
				float64(st.Bytes)/(1<<20), st.Grown, st.EvictedEarly, st.Saturated)
		}
	})
}
