// Package memtable is the sorted in-memory table a node writes into before
// flushing to an SSTable: rows ordered by token then partition key (the order
// of Cassandra's memtables and Data.db), with byte-size accounting so the
// owner can flush when a threshold is reached.
//
// A Memtable is safe for concurrent use. A partition's cells are kept in
// one sorted slice that writers change in place under the memtable's lock,
// so that a write into a partition of n cells costs a binary search and at
// most a move of the cells after it, not a copy of the partition (a table
// with clustering columns holds many rows per partition). Readers get
// copies: Get and the iterators of an active memtable copy a partition's
// cells under the read lock; a sealed memtable, which no write changes
// again, yields its rows without copying. The owner (the replica) keeps one
// active memtable for writes and seals it for flushing; a sealed memtable
// refuses writes, and the owner switches to a fresh one so that writes
// continue while the old one is written out.
package memtable

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/idemkv/idemkv/row"
)

// ErrSealed is returned by Apply on a memtable that is being flushed.
var ErrSealed = errors.New("memtable: sealed for flush")

// Per-row and per-cell bookkeeping bytes added to the payload sizes, a rough
// account of the tree node, slice headers and strings.
const (
	rowOverhead  = 64
	cellOverhead = 48
)

// Memtable is a concurrent sorted table of rows.
type Memtable struct {
	mu     sync.RWMutex
	tree   *btree.BTreeG[*partition]
	sealed atomic.Bool
	size   atomic.Int64
	// probe is the search key of Apply, which holds the write lock: one
	// allocation less per write than a probe of its own.
	probe partition
}

// partition is a row as the memtable holds it: its cells sorted by name,
// changed in place under the memtable's write lock.
type partition struct {
	key   row.Key
	cells []row.Cell
}

// New returns an empty memtable.
func New() *Memtable {
	return &Memtable{tree: btree.NewG(32, func(a, b *partition) bool { return row.Compare(a.key, b.key) < 0 })}
}

// Apply merges cell into the row at key: a new cell is added, an existing one
// reconciled with merge(old, new). The key and cell are copied.
func (m *Memtable) Apply(key row.Key, cell row.Cell, merge row.MergeFunc) error {
	return m.ApplyOver(key, cell, nil, merge)
}

// ApplyOver is Apply for a cell the caller computed from base, a value it
// read, such that merge(base, cell) is cell: an existing cell that holds
// exactly base (not a tombstone) is replaced by cell, with the later of
// their timestamps, without calling merge; any other is merged. A nil base
// is Apply.
func (m *Memtable) ApplyOver(key row.Key, cell row.Cell, base []byte, merge row.MergeFunc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sealed.Load() {
		return ErrSealed
	}
	m.probe.key = key
	p, found := m.tree.Get(&m.probe)
	m.probe.key = row.Key{} // hold no reference to the caller's key
	if !found {
		m.tree.ReplaceOrInsert(&partition{key: key.Clone(), cells: []row.Cell{cell.Clone()}})
		m.size.Add(int64(rowOverhead + len(key.Partition) + cellSize(cell)))
		return nil
	}
	i, exists := slices.BinarySearchFunc(p.cells, cell.Column, func(c row.Cell, name string) int { return cmp.Compare(c.Column, name) })
	if !exists {
		p.cells = slices.Insert(p.cells, i, cell.Clone())
		m.size.Add(int64(cellSize(cell)))
		return nil
	}
	old := p.cells[i]
	var merged row.Cell
	if base != nil && !old.Tombstone && bytes.Equal(old.Value, base) {
		merged = cell.Clone()
		merged.Timestamp = max(old.Timestamp, cell.Timestamp)
	} else {
		var err error
		if merged, err = merge(old, cell.Clone()); err != nil {
			return fmt.Errorf("row: merge %s column %q: %w", p.key, old.Column, err)
		}
	}
	p.cells[i] = merged
	m.size.Add(int64(cellSize(merged) - cellSize(old)))
	return nil
}

// view returns a partition as a row: its cells copied, unless the memtable
// is sealed (then nothing changes them again).
func (m *Memtable) view(p *partition) row.Row {
	if m.sealed.Load() {
		return row.Row{Key: p.key, Cells: p.cells}
	}
	return row.Row{Key: p.key, Cells: slices.Clone(p.cells)}
}

// Get returns the row at key. The row must not be modified.
func (m *Memtable) Get(key row.Key) (row.Row, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.tree.Get(&partition{key: key})
	if !ok {
		return row.Row{}, false
	}
	return m.view(p), true
}

// Size returns the accounted bytes of the rows held.
func (m *Memtable) Size() int64 { return m.size.Load() }

// Len returns the number of rows.
func (m *Memtable) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.tree.Len()
}

// Seal makes the memtable read-only: later Applies fail with ErrSealed. It
// is called before the memtable is flushed.
func (m *Memtable) Seal() {
	m.mu.Lock()
	m.sealed.Store(true)
	m.mu.Unlock()
}

// All yields every row in key order. On a sealed memtable it reads a stable
// snapshot; on an active one it yields rows in batches under the read lock,
// so concurrent writes may or may not be seen.
func (m *Memtable) All() iter.Seq[row.Row] {
	return m.Range(row.Key{Token: -1 << 63})
}

// Range yields the rows whose key is at or above from, in key order.
func (m *Memtable) Range(from row.Key) iter.Seq[row.Row] {
	return func(yield func(row.Row) bool) {
		const batch = 256
		buf := make([]row.Row, 0, batch)
		next, inclusive := from, true
		for {
			buf = buf[:0]
			m.mu.RLock()
			m.tree.AscendGreaterOrEqual(&partition{key: next}, func(p *partition) bool {
				if !inclusive && row.Compare(p.key, next) == 0 {
					return true
				}
				buf = append(buf, m.view(p))
				return len(buf) < batch
			})
			m.mu.RUnlock()
			for _, r := range buf {
				if !yield(r) {
					return
				}
			}
			if len(buf) < batch {
				return
			}
			next, inclusive = buf[len(buf)-1].Key, false
		}
	}
}

func cellSize(c row.Cell) int { return cellOverhead + len(c.Column) + len(c.Value) }
