package cellcache

import (
	"strconv"
	"testing"
)

// benchKeys are the keys of the benchmarks: 1<<16 of them, 8 bytes or so
// each, as a partition key.
var benchKeys = func() []string {
	ks := make([]string, 1<<16)
	for i := range ks {
		ks[i] = "key" + strconv.Itoa(i)
	}
	return ks
}()

// BenchmarkAcquireRelease pins and releases cached entries (hits), from
// every P, as the designs do for each operation on a cell.
func BenchmarkAcquireRelease(b *testing.B) {
	c := New(0)
	ns := NewNamespace()
	for _, k := range benchKeys {
		h, _ := c.Acquire(ns, k, func() any { return new(int) })
		h.Release()
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			h, _ := c.Acquire(ns, benchKeys[i&(len(benchKeys)-1)], func() any { return new(int) })
			h.Release()
			i += 7
		}
	})
}

// BenchmarkGet reads cached entries without pinning them (hits), as the
// vanilla counter reads its shards.
func BenchmarkGet(b *testing.B) {
	c := New(0)
	ns := NewNamespace()
	for _, k := range benchKeys {
		c.Put(ns, k, 1, 16)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Get(ns, benchKeys[i&(len(benchKeys)-1)])
			i += 7
		}
	})
}

// BenchmarkAcquireEvict acquires keys that are not cached in a cache of a
// quarter of them: every Acquire is a miss and evicts, in bytes.
func BenchmarkAcquireEvict(b *testing.B) {
	c := New(int64(len(benchKeys)/4) * (EntryOverhead + 8 + 16))
	ns := NewNamespace()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h, _ := c.Acquire(ns, benchKeys[i&(len(benchKeys)-1)], func() any { return nil })
		h.SetSize(16)
		h.Release()
	}
}
