// Package row defines the keys, cells and rows shared by the storage formats
// (memtable, sstable) and the replica that composes them.
//
// A row is one partition of a table: its cells, at most one per cell name,
// sorted by name. A table without clustering columns names a cell by its
// column; a table with clustering columns holds many CQL rows per
// partition and names their cells by the row's clustering components and
// the column (composite names, see AppendComponent). Rows are ordered by
// token, then by the partition key bytes, the order Cassandra keeps in its
// memtables and Data.db files.
//
// The package is pure: it holds types and comparisons, no I/O.
package row

import (
	"bytes"
	"cmp"
	"fmt"
)

// Key locates a partition: the partitioner's token of the partition key and
// the key's serialized bytes.
type Key struct {
	Token     int64
	Partition []byte
}

// Compare orders keys by token, then by partition bytes (unsigned).
func Compare(a, b Key) int {
	if c := cmp.Compare(a.Token, b.Token); c != 0 {
		return c
	}
	return bytes.Compare(a.Partition, b.Partition)
}

// String renders a key for logs and errors.
func (k Key) String() string { return fmt.Sprintf("%d:%x", k.Token, k.Partition) }

// Clone returns a key that shares no memory with k.
func (k Key) Clone() Key {
	return Key{Token: k.Token, Partition: bytes.Clone(k.Partition)}
}

// Cell is the value of one column of one row. Its Value is opaque here: the
// column type (a counter context, a handoff counter state) encodes it and
// knows how to merge two versions of it.
type Cell struct {
	Column    string
	Value     []byte
	Timestamp int64 // microseconds since the epoch; the newest write's
	Tombstone bool  // a deleted cell; it wins over any live value
}

// Clone returns a cell that shares no memory with c.
func (c Cell) Clone() Cell {
	c.Value = bytes.Clone(c.Value)
	return c
}

// Row is a partition with its cells sorted by column name, one per column.
type Row struct {
	Key   Key
	Cells []Cell
}

// Cell returns the row's cell for column, if it has one.
func (r Row) Cell(column string) (Cell, bool) {
	lo, hi := 0, len(r.Cells)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := cmp.Compare(r.Cells[m].Column, column); {
		case c == 0:
			return r.Cells[m], true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return Cell{}, false
}

// Clone returns a row that shares no memory with r.
func (r Row) Clone() Row {
	out := Row{Key: r.Key.Clone(), Cells: make([]Cell, len(r.Cells))}
	for i, c := range r.Cells {
		out.Cells[i] = c.Clone()
	}
	return out
}

// MergeFunc reconciles two versions of the same cell (same table, partition
// and column) into one. It must be commutative, associative and idempotent,
// so that memtable updates, compaction and replay may apply it in any order
// and any number of times.
type MergeFunc func(a, b Cell) (Cell, error)

// MergeRows merges two versions of one partition column by column with merge.
// Both rows' cells must be sorted by column; so are the result's.
func MergeRows(a, b Row, merge MergeFunc) (Row, error) {
	out := Row{Key: a.Key, Cells: make([]Cell, 0, max(len(a.Cells), len(b.Cells)))}
	i, j := 0, 0
	for i < len(a.Cells) || j < len(b.Cells) {
		switch {
		case j == len(b.Cells) || (i < len(a.Cells) && a.Cells[i].Column < b.Cells[j].Column):
			out.Cells = append(out.Cells, a.Cells[i])
			i++
		case i == len(a.Cells) || b.Cells[j].Column < a.Cells[i].Column:
			out.Cells = append(out.Cells, b.Cells[j])
			j++
		default:
			c, err := merge(a.Cells[i], b.Cells[j])
			if err != nil {
				return Row{}, fmt.Errorf("row: merge %s column %q: %w", a.Key, a.Cells[i].Column, err)
			}
			out.Cells = append(out.Cells, c)
			i++
			j++
		}
	}
	return out, nil
}
