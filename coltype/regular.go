package coltype

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/idemkv/idemkv/row"
)

// Regular (non-counter) columns.
//
// A table holds either counters or regular columns, as in Cassandra. A
// regular column's cells are last-write-wins registers: written as they
// are to every replica (no leader), reconciled by timestamp. They are not a
// counter design and are not in the registry (Lookup does not know them);
// a TableDef names them with the type RegularType and keeps their CQL type
// in ColumnDef.CQL. TypeOf resolves both kinds.
//
// A regular cell's value is the CQL value with a header:
//
//	value := flags:u8 [expires:i64 (unix seconds), if flags&1] cql-bytes
//
// flags&1 marks a cell written with a TTL: it reads as absent from
// expires on, and compaction drops it gc_grace_seconds later (Expiring).
// A null is a tombstone. The cells of a non-frozen collection are its
// elements (row.ElementName), and a deletion of the whole collection is a
// tombstone under the element name "" that shadows the elements written
// before it.

// RegularType is the type name of a regular column in a TableDef.
const RegularType = "regular"

// Regular is the column type of regular columns.
type Regular struct{}

// Name is RegularType.
func (Regular) Name() string { return RegularType }

// Merge keeps the newer cell, as Cassandra reconciles: the higher
// timestamp; on a tie a tombstone, then the greater value.
func (Regular) Merge(a, b row.Cell) (row.Cell, error) { return MergeLWW(a, b), nil }

// Value refuses: a regular column holds no counter.
func (Regular) Value(row.Cell) (int64, error) {
	return 0, errors.New("coltype: a regular column holds no counter")
}

// Expires reports when a cell written with a TTL expires.
func (Regular) Expires(c row.Cell) (time.Time, bool) {
	_, exp, ok, err := DecodeRegular(c.Value)
	if err != nil || !ok || c.Tombstone {
		return time.Time{}, false
	}
	return time.Unix(exp, 0), true
}

// Expiring is the capability of types whose cells expire (regular columns
// written with a TTL): compaction drops an expired cell once it has been
// expired for gc_grace_seconds, as it drops a tombstone.
type Expiring interface {
	Expires(c row.Cell) (time.Time, bool)
}

// MergeLWW reconciles two versions of a last-write-wins cell.
func MergeLWW(a, b row.Cell) row.Cell {
	switch {
	case a.Timestamp != b.Timestamp:
		if a.Timestamp > b.Timestamp {
			return a
		}
		return b
	case a.Tombstone != b.Tombstone:
		if a.Tombstone {
			return a
		}
		return b
	case bytes.Compare(a.Value, b.Value) >= 0:
		return a
	}
	return b
}

// EncodeRegular builds a regular cell's value; expires is 0 for none.
func EncodeRegular(v []byte, expires int64) []byte {
	if expires == 0 {
		return append([]byte{0}, v...)
	}
	out := make([]byte, 9, 9+len(v))
	out[0] = 1
	binary.BigEndian.PutUint64(out[1:], uint64(expires))
	return append(out, v...)
}

// DecodeRegular splits a regular cell's value into the CQL value and its
// expiry (unix seconds; hasExpiry false without a TTL).
func DecodeRegular(b []byte) (v []byte, expires int64, hasExpiry bool, err error) {
	if len(b) == 0 {
		return nil, 0, false, errors.New("coltype: empty regular cell value")
	}
	switch b[0] {
	case 0:
		return b[1:], 0, false, nil
	case 1:
		if len(b) < 9 {
			return nil, 0, false, fmt.Errorf("coltype: regular cell value of %d bytes is too short for its expiry", len(b))
		}
		return b[9:], int64(binary.BigEndian.Uint64(b[1:9])), true, nil
	}
	return nil, 0, false, fmt.Errorf("coltype: regular cell value has unknown flags %#x", b[0])
}

// TypeOf is the column type of a column definition: Regular for a regular
// column, else the registered design.
func TypeOf(c ColumnDef) (ColumnType, bool) {
	if c.Type == RegularType {
		return Regular{}, true
	}
	return Lookup(c.Type)
}
