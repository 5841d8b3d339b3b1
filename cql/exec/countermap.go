package exec

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/row"
)

// Maps of counters (coltype.CounterMap: the observed-reset counter's map
// form, `m map<text, reset_counter>`). Drivers see map<text, bigint>:
//
//	UPDATE t SET m = m + {'a': 1, 'b': ?} WHERE k = ?   -- or m = m + ? (a bound map)
//	DELETE m['a'] FROM t WHERE k = ?                     -- reset of key a
//	DELETE m FROM t WHERE k = ?                          -- reset of every key
//	SELECT m, m['a'] FROM t WHERE k = ?
//
// Each key of an UPDATE is one led increment (coltype.Update.Element), so
// a map of n keys is n counter writes, not one atomic write.

// mapValueType is the type drivers see for a map of counters.
var mapValueType = frame.MapOf(frame.Text, frame.Bigint)

// counterMapOf returns the CounterMap capability of a column's design.
func counterMapOf(c *column) (coltype.CounterMap, bool) {
	m, ok := columnDesign(c).(coltype.CounterMap)
	return m, ok
}

// counterTypeName is the registered column type a CQL column type names:
// a counter design (reset_counter), or a map of text to one whose map form
// is registered (map<text, reset_counter>; varchar is text); "" for any
// other type. bad is the error for a map of counters idemkv does not
// serve (other key types, designs without a map form).
func counterTypeName(t parse.Type) (name string, bad error) {
	if len(t.Params) == 0 {
		if isCounterType(t.Name) {
			return t.Name, nil
		}
		return "", nil
	}
	if t.Name != "map" || len(t.Params) != 2 || len(t.Params[1].Params) > 0 || !isCounterType(t.Params[1].Name) {
		return "", nil
	}
	key := t.Params[0]
	if len(key.Params) == 0 && (key.Name == "text" || key.Name == "varchar") {
		name = "map<text, " + t.Params[1].Name + ">"
		if ct, ok := coltype.Lookup(name); ok {
			if _, isMap := ct.(coltype.CounterMap); isMap {
				return name, nil
			}
		}
	}
	return "", invalid("Counters are not allowed inside collections: %s (idemkv serves maps of counters as map<text, reset_counter>)", t.String())
}

// mapKey checks a bound map key: text, not empty (the empty key names the
// whole map in coltype.Update.Element).
func mapKey(c *column, v frame.Value) (string, error) {
	switch {
	case v.Unset:
		return "", invalid("Invalid unset map key for %s", c.name)
	case v.Null || v.Bytes == nil:
		return "", invalid("Invalid null map key for %s", c.name)
	case !utf8.Valid(v.Bytes):
		return "", invalid("Invalid map key for %s: String didn't validate.", c.name)
	case len(v.Bytes) == 0:
		return "", invalid("Invalid empty map key for %s: idemkv map keys are not empty", c.name)
	}
	return string(v.Bytes), nil
}

// mapDeltas binds the value of `m = m + value` for a map of counters: a
// map literal (keys and values may be markers) or a marker bound to a
// map<text, bigint>. Zero increments are left out; a negative one or a
// repeated key is an error. skip is true for an unset marker.
func mapDeltas(c *column, t parse.Term, values []frame.Value) (keys []string, deltas []int64, skip bool, err error) {
	seen := map[string]bool{}
	add := func(kv frame.Value, dv frame.Value) error {
		k, err := mapKey(c, kv)
		if err != nil {
			return err
		}
		if seen[k] {
			return invalid("Invalid map value for %s: key '%s' given twice", c.name, k)
		}
		seen[k] = true
		d, unset, err := delta(dv)
		if err != nil {
			return err
		}
		if unset {
			return invalid("Invalid unset value for key '%s' of %s", k, c.name)
		}
		if q, ok := columnDesign(c).(coltype.CQL); ok {
			if err := q.CheckDelta(d); err != nil {
				return invalid("column %s, key '%s': %v", c.name, k, err)
			}
		}
		if d != 0 {
			keys, deltas = append(keys, k), append(deltas, d)
		}
		return nil
	}
	switch t.Kind {
	case parse.TermMap:
		for _, en := range t.Map {
			kv, err := bind(en.Key, values, frame.Text, c.name)
			if err != nil {
				return nil, nil, false, err
			}
			dv, err := bind(en.Value, values, frame.Bigint, c.name)
			if err != nil {
				return nil, nil, false, err
			}
			if err := add(kv, dv); err != nil {
				return nil, nil, false, err
			}
		}
	case parse.TermMarker:
		v, err := bind(t, values, mapValueType, c.name)
		if err != nil {
			return nil, nil, false, err
		}
		switch {
		case v.Unset:
			return nil, nil, true, nil
		case v.Null || v.Bytes == nil:
			return nil, nil, false, invalid("Invalid null value for counter increment")
		}
		ks, vs, err := frame.DecodeMap(v.Bytes)
		if err != nil {
			return nil, nil, false, invalid("Invalid map value for %s: %v", c.name, err)
		}
		for i := range ks {
			if err := add(frame.Bytes(ks[i]), frame.Bytes(vs[i])); err != nil {
				return nil, nil, false, err
			}
		}
	default:
		return nil, nil, false, invalid("Invalid %s constant (%s) for \"%s\" of type map<text, bigint>: add a map, %s = %s + {'key': 1}",
			termKindNames[t.Kind], t.String(), c.name, parse.Ident(c.name), parse.Ident(c.name))
	}
	return keys, deltas, false, nil
}

// elementOpID gives each key of a map update its own op id, derived from
// the statement's (a retry derives the same ones): the client half is
// xored with a hash of the key.
func elementOpID(id [16]byte, key string) [16]byte {
	h := fnv.New64a()
	h.Write([]byte(key))
	binary.BigEndian.PutUint64(id[:8], binary.BigEndian.Uint64(id[:8])^h.Sum64())
	return id
}

// mapCellValue encodes a map cell's counters as a map<text, bigint>, keys
// in ascending byte order (text's order); null when no counter is
// non-zero, as CQL shows an empty collection.
func mapCellValue(m coltype.CounterMap, cell row.Cell) (frame.Value, error) {
	vals, err := m.MapValue(cell)
	if err != nil {
		return frame.Value{}, err
	}
	if len(vals) == 0 {
		return frame.Null, nil
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ks := make([][]byte, len(keys))
	vs := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i], vs[i] = []byte(k), frame.EncodeBigint(vals[k])
	}
	return frame.Bytes(frame.EncodeMap(ks, vs)), nil
}

// mapElementValue is one key's counter of a map cell (SELECT m['a']): a
// bigint, null when the key reads 0 (absent).
func mapElementValue(m coltype.CounterMap, cell row.Cell, key string) (frame.Value, error) {
	vals, err := m.MapValue(cell)
	if err != nil {
		return frame.Value{}, err
	}
	v, ok := vals[key]
	if !ok {
		return frame.Null, nil
	}
	return frame.Bytes(frame.EncodeBigint(v)), nil
}

// elementName is a selected element's result column name, as Cassandra
// names it: m['a'].
func elementName(c *column, t parse.Term) string {
	return parse.Ident(c.name) + "[" + t.String() + "]"
}

// keySpec is the bind variable spec of a map key marker of column c.
func keySpec(t *tableInfo, c *column) frame.ColumnSpec {
	return frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "key(" + c.name + ")", Type: frame.Text}
}

// valueSpec is the bind variable spec of a map value marker of column c.
func valueSpec(t *tableInfo, c *column) frame.ColumnSpec {
	return frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "value(" + c.name + ")", Type: frame.Bigint}
}

// jsonMap renders a map<text, bigint> value as JSON.
func jsonMap(v []byte) (string, error) {
	ks, vs, err := frame.DecodeMap(v)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := range ks {
		if i > 0 {
			b.WriteString(", ")
		}
		n, err := frame.DecodeBigint(vs[i])
		if err != nil {
			return "", err
		}
		b.WriteString(jsonString(string(ks[i])))
		b.WriteString(": ")
		b.WriteString(strconv.FormatInt(n, 10))
	}
	b.WriteByte('}')
	return b.String(), nil
}
