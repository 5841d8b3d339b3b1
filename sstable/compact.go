package sstable

import (
	"cmp"
	"container/heap"
	"fmt"
	"iter"
	"slices"

	"github.com/idemkv/idemkv/row"
)

// cursor is one input of a k-way merge.
type cursor struct {
	next func() (row.Row, error, bool)
	stop func()
	cur  row.Row
	src  int // input position, to break ties deterministically
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if c := row.Compare(h[i].cur.Key, h[j].cur.Key); c != 0 {
		return c < 0
	}
	return h[i].src < h[j].src
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Purger decides, during a compaction, whether a merged cell of key may be
// dropped from the output (a tombstone older than gc_grace_seconds that no
// table outside the compaction can contradict). It sees each merged cell
// once; nil keeps every cell.
type Purger func(key row.Key, c row.Cell) bool

// Compact merges inputs into a new table, generation gen of dir. Rows with
// equal keys in several inputs are merged with row.MergeRows(…, merge), in
// input order. A merged cell for which purge reports true is left out, and a
// row left with no cell is left out whole; purge may be nil. Deciding which
// tombstones may go needs gc_grace_seconds and a view of every table and
// memtable, which are the engine's. The output is complete (TOC written,
// files and dir fsynced) before Compact returns, even when every row was
// purged (an empty table still carries user); on error it is removed. The
// caller then swaps readers and Removes the inputs.
func Compact(dir string, inputs []*Reader, gen uint64, merge row.MergeFunc, opts Options, user []byte, purge Purger) (Meta, error) {
	w, err := NewWriter(dir, gen, opts)
	if err != nil {
		return Meta{}, fmt.Errorf("sstable: compact into generation %d: %w", gen, err)
	}
	h := make(cursorHeap, 0, len(inputs))
	defer func() {
		for _, c := range h {
			c.stop()
		}
	}()
	advance := func(c *cursor) (bool, error) {
		r, err, ok := c.next()
		if !ok {
			c.stop()
			return false, nil
		}
		if err != nil {
			c.stop()
			in := inputs[c.src]
			return false, fmt.Errorf("sstable: compact into generation %d: input generation %d: %w", gen, in.gen, err)
		}
		c.cur = r
		return true, nil
	}
	fail := func(err error) (Meta, error) {
		w.Abort()
		return Meta{}, err
	}
	for i, in := range inputs {
		next, stop := iter.Pull2(in.All())
		c := &cursor{next: func() (row.Row, error, bool) { r, err, ok := next(); return r, err, ok }, stop: stop, src: i}
		ok, err := advance(c)
		if err != nil {
			return fail(err)
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		top := h[0]
		acc := top.cur
		for {
			ok, err := advance(top)
			if err != nil {
				return fail(err)
			}
			if ok {
				heap.Fix(&h, 0)
			} else {
				heap.Pop(&h)
			}
			if len(h) == 0 || row.Compare(h[0].cur.Key, acc.Key) != 0 {
				break
			}
			top = h[0]
			if acc, err = row.MergeRows(acc, top.cur, merge); err != nil {
				return fail(fmt.Errorf("sstable: compact into generation %d: %w", gen, err))
			}
		}
		if purge != nil {
			acc = purgeRow(acc, purge)
			if len(acc.Cells) == 0 {
				continue
			}
		}
		if err := w.Add(acc); err != nil {
			return fail(err)
		}
	}
	meta, err := w.Finish(user)
	if err != nil {
		return Meta{}, fmt.Errorf("sstable: compact into generation %d: %w", gen, err)
	}
	return meta, nil
}

// purgeRow returns r without the cells purge drops, reusing r's slice.
func purgeRow(r row.Row, purge Purger) row.Row {
	kept := r.Cells[:0]
	for _, c := range r.Cells {
		if !purge(r.Key, c) {
			kept = append(kept, c)
		}
	}
	r.Cells = kept
	return r
}

// Defaults of PickSizeTiered, those of Cassandra's SizeTieredCompactionStrategy.
const (
	DefaultMinThreshold   = 4
	DefaultMaxThreshold   = 32
	DefaultBucketLow      = 0.5
	DefaultBucketHigh     = 1.5
	DefaultMinSSTableSize = 50 << 20
)

// TableInfo describes a table for PickSizeTiered.
type TableInfo struct {
	Generation uint64
	Size       int64 // bytes on disk; Meta.DataSize will do
}

// PickSizeTiered chooses the tables to compact next as Cassandra's
// SizeTieredCompactionStrategy does, or returns nil.
//
// Tables are sorted by size (then generation) and put in turn into the first
// bucket whose average size avg satisfies avg·bucketLow < size <
// avg·bucketHigh, or where both size and avg are below minSSTableSize; the
// bucket's average is then updated with integer division, as Cassandra's
// long arithmetic does. Otherwise a table starts a bucket of its own.
// Cassandra iterates a HashMap keyed by average here; idemkv scans buckets in
// creation order, so that the result is deterministic.
//
// Buckets with fewer than minThreshold tables are dropped, the others are
// trimmed to maxThreshold tables, hottest first. The most interesting bucket
// is the hottest, ties broken by the smallest average size. Hotness is reads
// per key, from read meters idemkv does not keep, so every table's hotness is
// zero, as Cassandra counts a table without a read meter: the bucket of
// smallest average size wins (the first created, among equals), and trimming
// keeps its smallest tables. Generations are returned in ascending size order.
//
// Zero or negative minThreshold, maxThreshold, bucketLow and bucketHigh take
// the defaults (4, 32, 0.5, 1.5); a negative minSSTableSize takes the
// default 50 MiB, while zero disables grouping of small tables. minThreshold
// is at least 2, and maxThreshold at least minThreshold.
func PickSizeTiered(tables []TableInfo, minThreshold, maxThreshold int, bucketLow, bucketHigh float64, minSSTableSize int64) []uint64 {
	if minThreshold <= 0 {
		minThreshold = DefaultMinThreshold
	}
	minThreshold = max(minThreshold, 2)
	if maxThreshold <= 0 {
		maxThreshold = DefaultMaxThreshold
	}
	maxThreshold = max(maxThreshold, minThreshold)
	if bucketLow <= 0 {
		bucketLow = DefaultBucketLow
	}
	if bucketHigh <= 0 {
		bucketHigh = DefaultBucketHigh
	}
	if minSSTableSize < 0 {
		minSSTableSize = DefaultMinSSTableSize
	}

	sorted := slices.Clone(tables)
	slices.SortStableFunc(sorted, func(a, b TableInfo) int {
		return cmp.Or(cmp.Compare(a.Size, b.Size), cmp.Compare(a.Generation, b.Generation))
	})
	type bucket struct {
		avg    int64
		tables []TableInfo
	}
	var buckets []*bucket
outer:
	for _, t := range sorted {
		for _, b := range buckets {
			if (float64(t.Size) > float64(b.avg)*bucketLow && float64(t.Size) < float64(b.avg)*bucketHigh) ||
				(t.Size < minSSTableSize && b.avg < minSSTableSize) {
				total := int64(len(b.tables)) * b.avg
				b.tables = append(b.tables, t)
				b.avg = (total + t.Size) / int64(len(b.tables))
				continue outer
			}
		}
		buckets = append(buckets, &bucket{avg: t.Size, tables: []TableInfo{t}})
	}

	var best []TableInfo
	var bestAvg int64
	for _, b := range buckets {
		if len(b.tables) < minThreshold {
			continue
		}
		pruned := b.tables[:min(len(b.tables), maxThreshold)]
		var sum int64
		for _, t := range pruned {
			sum += t.Size
		}
		avg := sum / int64(len(pruned))
		if best == nil || avg < bestAvg {
			best, bestAvg = pruned, avg
		}
	}
	if best == nil {
		return nil
	}
	out := make([]uint64, len(best))
	for i, t := range best {
		out[i] = t.Generation
	}
	return out
}
