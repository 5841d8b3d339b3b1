package exec

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// The CQL types of regular (non-counter) columns: the native types, the
// collections (list, set, map: non-frozen ones are stored element by
// element, frozen ones as one value) and tuples (always frozen). User
// types, duration and vector are not served.

// nativeTypes are the native CQL types of regular columns, by name.
var nativeTypes = map[string]frame.DataType{
	"ascii": {ID: frame.TypeASCII}, "bigint": frame.Bigint, "blob": frame.Blob, "boolean": frame.Boolean,
	"date": {ID: frame.TypeDate}, "decimal": {ID: frame.TypeDecimal}, "double": frame.Double,
	"float": {ID: frame.TypeFloat}, "inet": frame.Inet, "int": frame.Int, "smallint": {ID: frame.TypeSmallint},
	"text": frame.Text, "varchar": frame.Text, "time": {ID: frame.TypeTime}, "timestamp": frame.Timestamp,
	"timeuuid": frame.TimeUUID, "tinyint": {ID: frame.TypeTinyint}, "uuid": frame.UUID, "varint": {ID: frame.TypeVarint},
}

// regularType resolves the CQL type of a regular column: its protocol
// type, its canonical text (as system_schema shows it) and whether it is
// stored element by element (a non-frozen collection).
func regularType(ks string, t parse.Type) (dt frame.DataType, text string, multiCell bool, err error) {
	dt, text, err = resolveType(ks, t, false, 0)
	if err != nil {
		return frame.DataType{}, "", false, err
	}
	multiCell = isCollection(dt) && !strings.HasPrefix(text, "frozen<")
	return dt, text, multiCell, nil
}

func isCollection(dt frame.DataType) bool {
	return dt.ID == frame.TypeList || dt.ID == frame.TypeSet || dt.ID == frame.TypeMap
}

func resolveType(ks string, t parse.Type, frozen bool, depth int) (frame.DataType, string, error) {
	if depth > 8 {
		return frame.DataType{}, "", invalid("type nested too deeply: %s", t.String())
	}
	if len(t.Params) == 0 {
		if dt, ok := nativeTypes[t.Name]; ok {
			name := t.Name
			if name == "varchar" {
				name = "text"
			}
			return dt, name, nil
		}
		if dt, ok := customType(t.Name); ok {
			return dt, "'" + t.Name + "'", nil
		}
		switch t.Name {
		case "counter":
			return frame.DataType{}, "", invalid("Counters are not allowed inside collections: %s", t.String())
		case "duration", "vector":
			return frame.DataType{}, "", invalid("idemkv does not support the %s type", t.Name)
		}
		return frame.DataType{}, "", invalid("Unknown type %s.%s (idemkv does not support user-defined types)", ks, t.Name)
	}
	inner := func(p parse.Type) (frame.DataType, string, error) {
		dt, text, err := resolveType(ks, p, frozen, depth+1)
		if err != nil {
			return dt, text, err
		}
		if isCollection(dt) && !strings.HasPrefix(text, "frozen<") {
			return frame.DataType{}, "", invalid("Non-frozen collections are not allowed inside collections: %s", t.String())
		}
		return dt, text, nil
	}
	switch t.Name {
	case "frozen":
		if len(t.Params) != 1 {
			return frame.DataType{}, "", invalid("frozen<> takes one type")
		}
		dt, text, err := resolveType(ks, t.Params[0], true, depth+1)
		if err != nil {
			return dt, text, err
		}
		if !isCollection(dt) && dt.ID != frame.TypeTuple {
			return frame.DataType{}, "", invalid("frozen<> is only allowed on collections, tuples, and user-defined types")
		}
		if strings.HasPrefix(text, "frozen<") {
			return dt, text, nil
		}
		return dt, "frozen<" + text + ">", nil
	case "list", "set":
		if len(t.Params) != 1 {
			return frame.DataType{}, "", invalid("%s takes one type", t.Name)
		}
		e, et, err := inner(t.Params[0])
		if err != nil {
			return e, et, err
		}
		dt := frame.ListOf(e)
		if t.Name == "set" {
			dt = frame.SetOf(e)
		}
		text := t.Name + "<" + et + ">"
		if frozen {
			text = "frozen<" + text + ">"
		}
		return dt, text, nil
	case "map":
		if len(t.Params) != 2 {
			return frame.DataType{}, "", invalid("map takes two types")
		}
		k, kt, err := inner(t.Params[0])
		if err != nil {
			return k, kt, err
		}
		v, vt, err := inner(t.Params[1])
		if err != nil {
			return v, vt, err
		}
		text := "map<" + kt + ", " + vt + ">"
		if frozen {
			text = "frozen<" + text + ">"
		}
		return frame.MapOf(k, v), text, nil
	case "tuple":
		dt := frame.DataType{ID: frame.TypeTuple}
		var parts []string
		for _, p := range t.Params {
			e, et, err := resolveType(ks, p, true, depth+1)
			if err != nil {
				return e, et, err
			}
			dt.Elems = append(dt.Elems, e)
			parts = append(parts, et)
		}
		return dt, "frozen<tuple<" + strings.Join(parts, ", ") + ">>", nil
	}
	return frame.DataType{}, "", invalid("Unknown type %s", t.String())
}

// typeCache holds the protocol types of stored type texts.
var typeCache sync.Map // string → typeInfo

type typeInfo struct {
	dt        frame.DataType
	multiCell bool
}

// storedType parses the canonical text of a regular column's type (as
// ColumnDef.CQL keeps it); a text that does not parse reads as blob.
func storedType(text string) typeInfo {
	if v, ok := typeCache.Load(text); ok {
		return v.(typeInfo)
	}
	ti := typeInfo{dt: frame.Blob}
	if st, err := parse.Parse("CREATE TABLE t (c " + text + " PRIMARY KEY)"); err == nil {
		if ct, ok := st.(*parse.CreateTable); ok && len(ct.Columns) == 1 {
			if dt, _, multi, err := regularType("", ct.Columns[0].Type); err == nil {
				ti = typeInfo{dt: dt, multiCell: multi}
			}
		}
	}
	typeCache.Store(text, ti)
	return ti
}

// validateValue checks a value's bytes against its type, as Cassandra's
// type validators do: fixed lengths, UTF-8, ASCII, the structure of
// collections and tuples. An empty value of a native type is valid (CQL's
// "empty" value).
func validateValue(dt frame.DataType, b []byte, col string) error {
	bad := func(format string, args ...any) error {
		return invalid("Invalid value for column %s: "+format, append([]any{col}, args...)...)
	}
	fixed := map[frame.TypeID]int{frame.TypeInt: 4, frame.TypeBigint: 8, frame.TypeTimestamp: 8, frame.TypeTime: 8,
		frame.TypeDouble: 8, frame.TypeFloat: 4, frame.TypeSmallint: 2, frame.TypeTinyint: 1, frame.TypeBoolean: 1,
		frame.TypeUUID: 16, frame.TypeTimeUUID: 16, frame.TypeDate: 4, frame.TypeCounter: 8}
	if n, ok := fixed[dt.ID]; ok {
		if len(b) != n && len(b) != 0 {
			return bad("expected %d or 0 byte %s (%d)", n, cqlTypeName(dt), len(b))
		}
		if dt.ID == frame.TypeTimeUUID && len(b) == 16 && b[6]>>4 != 1 {
			return bad("unsupported UUID version (%d) for a timeuuid", b[6]>>4)
		}
		if dt.ID == frame.TypeTime && len(b) == 8 {
			if v := int64(binary.BigEndian.Uint64(b)); v < 0 || v >= 86400*1e9 {
				return bad("time %d is out of range", v)
			}
		}
		return nil
	}
	switch dt.ID {
	case frame.TypeVarchar:
		if !utf8.Valid(b) {
			return invalid("String didn't validate.")
		}
	case frame.TypeASCII:
		for _, x := range b {
			if x > 127 {
				return invalid("Invalid byte for ascii: %d", x)
			}
		}
	case frame.TypeInet:
		if len(b) != 4 && len(b) != 16 && len(b) != 0 {
			return bad("invalid inet address length (%d)", len(b))
		}
	case frame.TypeDecimal:
		if len(b) != 0 && len(b) < 5 {
			return bad("decimal of %d bytes", len(b))
		}
	case frame.TypeList, frame.TypeSet:
		elems, err := frame.DecodeList(b)
		if err != nil {
			return bad("%v", err)
		}
		for _, e := range elems {
			if err := validateValue(dt.Elems[0], e, col); err != nil {
				return err
			}
		}
	case frame.TypeMap:
		ks, vs, err := frame.DecodeMap(b)
		if err != nil {
			return bad("%v", err)
		}
		for i := range ks {
			if err := validateValue(dt.Elems[0], ks[i], col); err != nil {
				return err
			}
			if err := validateValue(dt.Elems[1], vs[i], col); err != nil {
				return err
			}
		}
	case frame.TypeTuple:
		rest := b
		for i := 0; len(rest) > 0; i++ {
			if i >= len(dt.Elems) || len(rest) < 4 {
				return bad("tuple has more values than its type (%d)", len(dt.Elems))
			}
			n := int32(binary.BigEndian.Uint32(rest))
			rest = rest[4:]
			if n < 0 {
				continue
			}
			if int(n) > len(rest) {
				return bad("tuple element %d is truncated", i)
			}
			if err := validateValue(dt.Elems[i], rest[:n], col); err != nil {
				return err
			}
			rest = rest[n:]
		}
	}
	return nil
}

// elementKey is the order key of a collection element (a map key, a set
// element): orderKey for the types that have one, the bytes otherwise
// (ordered bytewise, not as Cassandra orders that type).
func elementKey(dt frame.DataType, b []byte) []byte {
	if orderable(dt) {
		if k, err := orderKeyOf(dt, b); err == nil {
			return k
		}
	}
	return b
}

// elementValue is elementKey's inverse.
func elementValue(dt frame.DataType, k []byte) []byte {
	if orderable(dt) {
		return fromOrderKey(&column{typ: dt}, k)
	}
	return k
}

// orderable reports whether a type has an order key (orderKey).
func orderable(dt frame.DataType) bool {
	for _, t := range clusteringTypes {
		if t.ID == dt.ID && len(dt.Elems) == 0 {
			return true
		}
	}
	return false
}

// orderKeyOf is orderKey for a bare type.
func orderKeyOf(dt frame.DataType, b []byte) ([]byte, error) {
	return orderKey(&column{typ: dt, cqlType: cqlTypeName(dt)}, b)
}

// listSeq makes list element keys unique within a process.
var listSeq atomic.Uint64

// listKey is the element key of the i-th of n values a list append (or,
// prepend true, prepend) writes at timestamp ts: ordered by time, the
// prepended ones before every appended one, as Cassandra's list cells
// (time-based UUIDs); a process-wide sequence and the node's random base
// keep two writes of one microsecond apart.
func listKey(ts int64, i, n int, prepend bool) []byte {
	v := uint64(ts)*1024 + uint64(i)
	if prepend {
		v = math.MaxUint64/2 - (uint64(ts)*1024 + uint64(n-i))
	} else {
		v += math.MaxUint64 / 2
	}
	k := binary.BigEndian.AppendUint64(nil, v)
	return binary.BigEndian.AppendUint64(k, listBase+listSeq.Add(1))
}

// listBase is this process's random start of the list key sequence.
var listBase = rand.Uint64() >> 1

// encodeElems builds a collection's value from its elements (list and set:
// vals; map: keys and vals).
func encodeCollection(dt frame.DataType, keys, vals [][]byte) []byte {
	switch dt.ID {
	case frame.TypeMap:
		return frame.EncodeMap(keys, vals)
	case frame.TypeSet:
		return frame.EncodeSet(vals)
	}
	return frame.EncodeList(vals)
}

// normalizeValue puts a frozen value in the form Cassandra stores it: a
// set's elements in their type's order without repeats, a map's entries in
// key order with a repeated key once (its last value), recursively in the
// elements of collections and tuples. Other values are returned as they
// are. b must have passed validateValue.
func normalizeValue(dt frame.DataType, b []byte) []byte {
	switch dt.ID {
	case frame.TypeSet:
		es, err := frame.DecodeSet(b)
		if err != nil {
			return b
		}
		type el struct{ key, val []byte }
		out := make([]el, 0, len(es))
		for _, e := range es {
			e = normalizeValue(dt.Elems[0], e)
			out = append(out, el{elementKey(dt.Elems[0], e), e})
		}
		slices.SortStableFunc(out, func(a, b el) int { return bytes.Compare(a.key, b.key) })
		out = slices.CompactFunc(out, func(a, b el) bool { return bytes.Equal(a.key, b.key) })
		vals := make([][]byte, len(out))
		for i, e := range out {
			vals[i] = e.val
		}
		return frame.EncodeSet(vals)
	case frame.TypeMap:
		ks, vs, err := frame.DecodeMap(b)
		if err != nil {
			return b
		}
		type entry struct{ key, k, v []byte }
		out := make([]entry, 0, len(ks))
		for i := range ks {
			k := normalizeValue(dt.Elems[0], ks[i])
			out = append(out, entry{elementKey(dt.Elems[0], k), k, normalizeValue(dt.Elems[1], vs[i])})
		}
		// Stable, then the last of equal keys kept: the last value wins.
		slices.SortStableFunc(out, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
		kept := out[:0]
		for i, e := range out {
			if i+1 < len(out) && bytes.Equal(out[i+1].key, e.key) {
				continue
			}
			kept = append(kept, e)
		}
		keys, vals := make([][]byte, len(kept)), make([][]byte, len(kept))
		for i, e := range kept {
			keys[i], vals[i] = e.k, e.v
		}
		return frame.EncodeMap(keys, vals)
	case frame.TypeList:
		es, err := frame.DecodeList(b)
		if err != nil || !isCollection(dt.Elems[0]) {
			return b
		}
		for i, e := range es {
			es[i] = normalizeValue(dt.Elems[0], e)
		}
		return frame.EncodeList(es)
	}
	return b
}
