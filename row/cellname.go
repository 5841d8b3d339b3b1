package row

import (
	"errors"
	"strings"
)

// Cell names of tables with clustering columns.
//
// A table with clustering columns holds many CQL rows per partition. Each
// CQL row's cells are stored in the partition under a composite name: the
// row's clustering components, then the column's name, as Cassandra's
// storage engine named cells before 3.0. The partition stays the unit of
// placement, replication, merge and read; the composite name orders the
// CQL rows of a partition by their clustering values, since cells are
// sorted by name (bytewise).
//
// Each component is the clustering value's order key (an encoding chosen
// by the CQL layer, whose bytewise order is the CQL order of the type),
// escaped and terminated so that the name splits without knowing the
// types:
//
//	component := escape(orderkey) 0x00 0x01     -- escape: 0x00 → 0x00 0xFF
//	name      := component... column [element]  -- column: the CQL column name, no 0x00
//	element   := 0x00                            -- a non-frozen collection's deletion
//	           | 0x00 0x01 key                   -- one element of it (key: its order key)
//
// A component of a descending clustering column (CLUSTERING ORDER BY ...
// DESC) has every byte, terminator included, inverted (x → 0xFF-x): 0xFF
// 0x00 is an escaped byte 0xFF, 0xFF 0xFE ends it. An escaped component
// sorts before every longer component it prefixes, so a row sorts before
// the rows whose clustering extends it, and the cells of one CQL row are
// adjacent. The CQL row marker of a regular table is the cell named by the
// components and an empty column name.
//
// A partition's static cells (the columns declared STATIC, one value per
// partition) are named by StaticPrefix and the column.
//
// A table without clustering columns names its cells by the column name
// alone (and the element, for a non-frozen collection), as before.

// ErrBadCellName is returned for a composite cell name that does not split
// into the table's clustering components and a column name.
var ErrBadCellName = errors.New("row: cell name does not split into clustering components and a column")

// AppendComponent appends one clustering component (an order key) to a
// composite name prefix; desc inverts it for a descending column.
func AppendComponent(dst []byte, orderKey []byte, desc bool) []byte {
	start := len(dst)
	for _, b := range orderKey {
		if b == 0 {
			dst = append(dst, 0x00, 0xFF)
			continue
		}
		dst = append(dst, b)
	}
	dst = append(dst, 0x00, 0x01)
	if desc {
		for i := start; i < len(dst); i++ {
			dst[i] = ^dst[i]
		}
	}
	return dst
}

// ClusteringPrefix returns the clustering part of a composite name of a
// table whose clustering columns have the orders desc (true: descending):
// the name up to the column, and the column name after it.
func ClusteringPrefix(name string, desc []bool) (prefix, column string, err error) {
	if sp := StaticPrefix(desc); sp != "" && strings.HasPrefix(name, sp) {
		return sp, name[len(sp):], nil
	}
	i := 0
	for _, d := range desc {
		n, ok := componentEnd(name[i:], d)
		if !ok {
			return "", "", ErrBadCellName
		}
		i += n
	}
	return name[:i], name[i:], nil
}

// StaticPrefix is the prefix of the cells of a partition's static
// columns in a table with clustering columns (desc: their orders; "" for a
// table without): 0x00 0x00 when the first clustering column ascends,
// 0xFF 0xFF when it descends. No component starts with it (an ascending
// one starts with a byte other than 0x00, or with 0x00 0xFF or 0x00 0x01;
// a descending one likewise with 0xFF), so a static cell never reads as a
// row's; it sorts before every row, or after every row.
func StaticPrefix(desc []bool) string {
	switch {
	case len(desc) == 0:
		return ""
	case desc[0]:
		return "\xff\xff"
	}
	return "\x00\x00"
}

// ColumnOf is the CQL column name of a cell name: the name up to its
// element, after its clustering components (desc: their orders; empty for
// a table without clustering columns).
func ColumnOf(name string, desc []bool) (string, error) {
	col := name
	if len(desc) > 0 {
		var err error
		if _, col, err = ClusteringPrefix(name, desc); err != nil {
			return "", err
		}
	}
	col, _, _ = SplitElement(col)
	return col, nil
}

// ElementName names the cell of one element of a non-frozen collection
// column; CollectionDeletion the cell of the deletion of the whole
// collection, which shadows the elements written before it.
func ElementName(column string, key []byte) string {
	return column + "\x00\x01" + string(key)
}

// CollectionDeletion is the name of the cell that deletes a whole
// non-frozen collection (see ElementName).
func CollectionDeletion(column string) string { return column + "\x00" }

// SplitElement splits the column part of a cell name into the column and
// its element: isElem is false for a plain cell; key is "" with isElem
// true for the collection's deletion.
func SplitElement(colPart string) (column, key string, isElem bool) {
	i := strings.IndexByte(colPart, 0)
	if i < 0 {
		return colPart, "", false
	}
	rest := colPart[i+1:]
	if len(rest) > 0 {
		rest = rest[1:]
	}
	return colPart[:i], rest, true
}

// Components splits a clustering prefix into its components' order keys
// (unescaped, and turned back for descending columns).
func Components(prefix string, desc []bool) ([][]byte, error) {
	out := make([][]byte, 0, len(desc))
	i := 0
	for _, d := range desc {
		n, ok := componentEnd(prefix[i:], d)
		if !ok {
			return nil, ErrBadCellName
		}
		esc, zero := byte(0x00), byte(0xFF)
		if d {
			esc, zero = 0xFF, 0x00
		}
		key := make([]byte, 0, n-2)
		for j := i; j < i+n-2; j++ {
			b := prefix[j]
			if b == esc && prefix[j+1] == zero {
				j++
			}
			if d {
				b = ^b
			}
			key = append(key, b)
		}
		out = append(out, key)
		i += n
	}
	if i != len(prefix) {
		return nil, ErrBadCellName
	}
	return out, nil
}

// componentEnd is the length of the component at the start of s,
// terminator included.
func componentEnd(s string, desc bool) (int, bool) {
	esc, zero, end := byte(0x00), byte(0xFF), byte(0x01)
	if desc {
		esc, zero, end = 0xFF, 0x00, 0xFE
	}
	for i := 0; i < len(s); i++ {
		if s[i] != esc {
			continue
		}
		if i+1 >= len(s) {
			return 0, false
		}
		switch s[i+1] {
		case zero:
			i++
		case end:
			return i + 2, true
		default:
			return 0, false
		}
	}
	return 0, false
}
