package fbf

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
)

// BenchmarkTestAndAdd measures TestAndAdd of fresh ids (hashing included)
// for N = 1, 4, 16, k = 5, m = 2^16 bits, on one goroutine and with
// RunParallel, in steady state: virtual time advances t/64 every 30 ids
// (≈1900 ids per period, each filter's FPP ≈ 1e-3).
func BenchmarkTestAndAdd(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("N=%d/single", n), func(b *testing.B) {
			f := mustNew(b, Config{Bits: 1 << 16, Hashes: 5, Past: n, Period: time.Second})
			var buf [16]byte
			i := uint64(0)
			for b.Loop() {
				binary.BigEndian.PutUint64(buf[8:], i)
				f.TestAndAdd(buf[:])
				i++
				if i%30 == 0 {
					f.Advance(at(time.Duration(i/30) * time.Second / 64))
				}
			}
		})
		b.Run(fmt.Sprintf("N=%d/parallel", n), func(b *testing.B) {
			f := mustNew(b, Config{Bits: 1 << 16, Hashes: 5, Past: n, Period: time.Second})
			var seq atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				var buf [16]byte
				for pb.Next() {
					i := seq.Add(1)
					binary.BigEndian.PutUint64(buf[8:], i)
					f.TestAndAdd(buf[:])
					if i%30 == 0 {
						f.Advance(at(time.Duration(i/30) * time.Second / 64))
					}
				}
			})
		})
	}
}

func BenchmarkContains(b *testing.B) {
	f := mustNew(b, Config{Bits: 1 << 16, Hashes: 5, Past: 1, Period: time.Second})
	fillEven(f, 3800, 1)
	var buf [16]byte
	i := uint64(0)
	for b.Loop() {
		binary.BigEndian.PutUint64(buf[8:], i)
		f.Contains(buf[:])
		i++
	}
}

// dedup is what the comparison benchmark needs of a duplicate detector.
type dedup interface {
	testAndAdd(x []byte) bool
	contains(x []byte) bool
	advance(now time.Duration)
}

type fbfDedup struct{ f *Filter }

func (d fbfDedup) testAndAdd(x []byte) bool  { return d.f.TestAndAdd(x) }
func (d fbfDedup) contains(x []byte) bool    { return d.f.Contains(x) }
func (d fbfDedup) advance(now time.Duration) { d.f.Advance(at(now)) }

// recycleBloom is the paper's "recycle" baseline: one Bloom filter, cleared
// when it holds the number of ids at which its FPP reaches the target.
type recycleBloom struct {
	mu       sync.Mutex
	bits     *bitset.BitSet
	m, k     uint64
	n, limit int
}

func (r *recycleBloom) testAndAdd(x []byte) bool {
	h := HashID(x)
	r.mu.Lock()
	defer r.mu.Unlock()
	present := true
	for i := uint64(0); i < r.k; i++ {
		p := h.position(i, r.m)
		if !r.bits.Test(uint(p)) {
			present = false
			r.bits.Set(uint(p))
		}
	}
	if !present {
		r.n++
		if r.n >= r.limit {
			r.bits.ClearAll()
			r.n = 0
		}
	}
	return present
}

func (r *recycleBloom) contains(x []byte) bool {
	h := HashID(x)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := uint64(0); i < r.k; i++ {
		if !r.bits.Test(uint(h.position(i, r.m))) {
			return false
		}
	}
	return true
}

func (r *recycleBloom) advance(time.Duration) {}

// exactWindow is an exact dedup window: a map of ids to their time bucket
// and a ring of per-bucket id lists, expired a bucket at a time.
type exactWindow struct {
	mu      sync.Mutex
	ids     map[[16]byte]int64
	buckets [][][16]byte // ring
	bucket  time.Duration
	cur     int64
}

func newExactWindow(window, bucket time.Duration) *exactWindow {
	return &exactWindow{ids: map[[16]byte]int64{}, buckets: make([][][16]byte, window/bucket+1), bucket: bucket}
}

func (e *exactWindow) testAndAdd(x []byte) bool {
	var k [16]byte
	copy(k[:], x)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.ids[k]; ok {
		return true
	}
	e.ids[k] = e.cur
	i := e.cur % int64(len(e.buckets))
	e.buckets[i] = append(e.buckets[i], k)
	return false
}

func (e *exactWindow) contains(x []byte) bool {
	var k [16]byte
	copy(k[:], x)
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.ids[k]
	return ok
}

func (e *exactWindow) advance(now time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for b := int64(now / e.bucket); e.cur < b; {
		e.cur++
		i := e.cur % int64(len(e.buckets))
		for _, k := range e.buckets[i] {
			delete(e.ids, k)
		}
		e.buckets[i] = e.buckets[i][:0]
	}
}

// bitsFor returns m such that a filter of k hashes holding l ids has FPP p.
func bitsFor(l float64, k uint, p float64) uint {
	return uint(math.Ceil(-float64(k) * l / math.Log1p(-math.Pow(p, 1/float64(k)))))
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkDedupCompare runs, side by side at the same window (W = 10 s,
// 10k fresh ids/s, so 100k ids to remember) and target FPP (1e-3): the FBF
// (N=4, t=2 s, k=7, m sized so that a full filter has FPP 0.45e-3, the
// capacity guard's level), the paper's recycled plain Bloom filter (one
// filter sized for 100k ids at 1e-3, k=10, cleared when full) and an exact
// window (map of ids + 1 s time buckets). It reports ns/op of TestAndAdd of
// fresh ids, bytes per remembered id, the measured FPP (100k probes) and
// "forgot" — the fraction of inserted ids younger than W − 1 s that are no
// longer detected (a broken window).
func BenchmarkDedupCompare(b *testing.B) {
	const (
		rate   = 10_000
		window = 10 * time.Second
		target = 1e-3
		n      = 4
	)
	period := window / (n + 1)
	remembered := float64(rate) * window.Seconds()
	mFBF := bitsFor(2*rate*period.Seconds(), 7, 0.45*target)
	mRBF := bitsFor(remembered, 10, target)
	for _, tc := range []struct {
		name string
		mk   func() dedup
	}{
		{"fbf", func() dedup {
			return fbfDedup{mustNew(b, Config{Bits: mFBF, Hashes: 7, Past: n, Period: period})}
		}},
		{"recycle", func() dedup {
			return &recycleBloom{bits: bitset.New(mRBF), m: uint64(mRBF), k: 10, limit: int(remembered)}
		}},
		{"exactmap", func() dedup { return newExactWindow(window, time.Second) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			base := heapInUse()
			d := tc.mk()
			var buf [16]byte
			seq := uint64(0)
			step := time.Second / rate
			fresh := bitset.New(1 << 20) // ids the detector took as new (inserted)
			insert := func() {
				binary.BigEndian.PutUint64(buf[:8], 1)
				binary.BigEndian.PutUint64(buf[8:], seq)
				if !d.testAndAdd(buf[:]) {
					fresh.Set(uint(seq % (1 << 20)))
				} else {
					fresh.Clear(uint(seq % (1 << 20)))
				}
				seq++
				if seq%10 == 0 {
					d.advance(time.Duration(seq) * step)
				}
			}
			for range int(2 * remembered) { // warm up: two windows
				insert()
			}
			for b.Loop() {
				insert()
			}
			mem := heapInUse() - base
			fp := 0
			const probes = 100_000
			for i := range uint64(probes) {
				binary.BigEndian.PutUint64(buf[:8], 2)
				binary.BigEndian.PutUint64(buf[8:], i)
				if d.contains(buf[:]) {
					fp++
				}
			}
			forgot, young := 0, 0
			for s := seq - uint64(remembered) + uint64(rate); s < seq; s += 7 {
				if !fresh.Test(uint(s % (1 << 20))) {
					continue // rejected as a duplicate (a false positive): never inserted
				}
				binary.BigEndian.PutUint64(buf[:8], 1)
				binary.BigEndian.PutUint64(buf[8:], s)
				young++
				if !d.contains(buf[:]) {
					forgot++
				}
			}
			b.ReportMetric(float64(mem)/remembered, "B/id")
			b.ReportMetric(float64(fp)/probes, "fpp")
			b.ReportMetric(float64(forgot)/float64(young), "forgot")
		})
	}
}
