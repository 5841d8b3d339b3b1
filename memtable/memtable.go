// Package memtable is the sorted in-memory table a node writes into before
// flushing to an SSTable: rows ordered by token then partition key (the order
// of Cassandra's memtables and Data.db), with byte-size accounting so the
// owner can flush when a threshold is reached.
//
// A Memtable is safe for concurrent use. Rows are copy-on-write: a row
// returned by Get or an iterator is never modified afterwards, so callers may
// keep it without copying while writers go on. The owner (the replica) keeps
// one active memtable for writes and seals it for flushing; a sealed memtable
// refuses writes, and the owner switches to a fresh one so that writes
// continue while the old one is written out.
package memtable

import (
	"errors"
	"iter"
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
	tree   *btree.BTreeG[row.Row]
	sealed bool
	size   atomic.Int64
}

// New returns an empty memtable.
func New() *Memtable {
	return &Memtable{tree: btree.NewG(32, func(a, b row.Row) bool { return row.Compare(a.Key, b.Key) < 0 })}
}

// Apply merges cell into the row at key: a new cell is added, an existing one
// reconciled with merge(old, new). The key and cell are copied.
func (m *Memtable) Apply(key row.Key, cell row.Cell, merge row.MergeFunc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sealed {
		return ErrSealed
	}
	old, found := m.tree.Get(row.Row{Key: key})
	if !found {
		m.tree.ReplaceOrInsert(row.Row{Key: key.Clone(), Cells: []row.Cell{cell.Clone()}})
		m.size.Add(int64(rowOverhead + len(key.Partition) + cellSize(cell)))
		return nil
	}
	// The update is cloned once; the merge result shares memory only with
	// the memtable's own old cell or that clone, never with the caller.
	upd := row.Row{Key: key, Cells: []row.Cell{cell.Clone()}}
	merged, err := row.MergeRows(old, upd, merge)
	if err != nil {
		return err
	}
	merged.Key = old.Key
	m.tree.ReplaceOrInsert(merged)
	m.size.Add(int64(rowSize(merged) - rowSize(old)))
	return nil
}

// Get returns the row at key. The row must not be modified.
func (m *Memtable) Get(key row.Key) (row.Row, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.tree.Get(row.Row{Key: key})
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
	m.sealed = true
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
			m.tree.AscendGreaterOrEqual(row.Row{Key: next}, func(r row.Row) bool {
				if !inclusive && row.Compare(r.Key, next) == 0 {
					return true
				}
				buf = append(buf, r)
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

func rowSize(r row.Row) int {
	n := rowOverhead + len(r.Key.Partition)
	for _, c := range r.Cells {
		n += cellSize(c)
	}
	return n
}
