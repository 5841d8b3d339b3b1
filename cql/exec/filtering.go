package exec

import (
	"bytes"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// Filtering (ALLOW FILTERING) on regular and counter columns: a row is
// returned when every restriction on such columns holds for its value. A
// null (absent) value matches no restriction. Values compare in their
// type's CQL order (the order keys of clustering columns; a counter is a
// bigint); a type without one (varint, decimal, collections) takes only
// = and IN.

// valueRestriction is one relation on a non-key column.
type valueRestriction struct {
	col  *column
	op   string
	keys [][]byte // order keys (or bytes) of the value, or of IN's values
	// value reads the column of a row (counters through the backend).
	value func(*crow) (frame.Value, error)
}

// valueFilter binds the relations on non-key columns of a SELECT.
func (e *Executor) valueFilter(t *tableInfo, rels []parse.Relation, values []frame.Value) ([]valueRestriction, error) {
	var out []valueRestriction
	for _, r := range rels {
		c := t.cols[r.Column]
		typ := c.typ
		if !c.regular {
			typ = frame.Bigint // a counter reads as a bigint
			if _, isMap := counterMapOf(c); isMap {
				return nil, invalid("idemkv does not filter on maps of counters (%s)", c.name)
			}
		}
		if r.Op == "CONTAINS" || r.Op == "CONTAINS KEY" {
			vr, err := e.containsFilter(t, c, r, values)
			if err != nil {
				return nil, err
			}
			out = append(out, vr)
			continue
		}
		if isCollection(typ) || typ.ID == frame.TypeTuple {
			return nil, invalid("idemkv filters collections by CONTAINS and CONTAINS KEY only (%s)", c.name)
		}
		switch r.Op {
		case "=", "IN":
		case "<", "<=", ">", ">=", "!=":
			if !orderable(typ) {
				return nil, invalid("idemkv filters %s values by = and IN only (%s)", cqlTypeName(typ), c.name)
			}
		default:
			return nil, invalid("Unsupported \"%s\" relation on %s", r.Op, c.name)
		}
		terms := []parse.Term{r.Value}
		if r.Op == "IN" {
			if !r.InList {
				return nil, invalid("IN ? on a non-key column is not supported by idemkv; bind each value: IN (?, ?)")
			}
			terms = r.In
		}
		vr := valueRestriction{col: c, op: r.Op}
		for _, term := range terms {
			v, err := bind(term, values, typ, c.name)
			if err != nil {
				return nil, err
			}
			if v.Unset || v.Null || v.Bytes == nil {
				return nil, invalid("Unsupported null value for column %s", c.name)
			}
			vr.keys = append(vr.keys, filterKey(typ, v.Bytes))
		}
		if c.regular {
			vr.value = func(r *crow) (frame.Value, error) { return regularValue(r, c, e.opts.Now()) }
		} else {
			id := t.id
			vr.value = func(r *crow) (frame.Value, error) {
				cell, ok := r.cell(c.name)
				if !ok || cell.Tombstone {
					return frame.Null, nil
				}
				n, err := e.b.CellValue(id, cell)
				if err != nil {
					return frame.Value{}, err
				}
				return frame.Bytes(frame.EncodeBigint(n)), nil
			}
		}
		out = append(out, vr)
	}
	return out, nil
}

// containsFilter binds `c CONTAINS v` (an element of a list or set, a
// value of a map) or `c CONTAINS KEY k` (a key of a map).
func (e *Executor) containsFilter(t *tableInfo, c *column, r parse.Relation, values []frame.Value) (valueRestriction, error) {
	if !c.regular || !isCollection(c.typ) {
		return valueRestriction{}, invalid("Cannot use %s on non-collection column %s", r.Op, c.name)
	}
	et := c.typ.Elems[0]
	switch {
	case r.Op == "CONTAINS KEY" && c.typ.ID != frame.TypeMap:
		return valueRestriction{}, invalid("Cannot use CONTAINS KEY on non-map column %s", c.name)
	case r.Op == "CONTAINS" && c.typ.ID == frame.TypeMap:
		et = c.typ.Elems[1]
	}
	v, err := bind(r.Value, values, et, c.name)
	if err != nil {
		return valueRestriction{}, err
	}
	if v.Unset || v.Null || v.Bytes == nil {
		return valueRestriction{}, invalid("Unsupported null value for column %s", c.name)
	}
	return valueRestriction{col: c, op: r.Op, keys: [][]byte{normalizeValue(et, v.Bytes)},
		value: func(r *crow) (frame.Value, error) { return regularValue(r, c, e.opts.Now()) }}, nil
}

// contains reports whether a collection value holds x: as an element
// (keys false: a list's or set's element, a map's value) or a map key.
func contains(dt frame.DataType, b, x []byte, keys bool) bool {
	var elems [][]byte
	switch dt.ID {
	case frame.TypeMap:
		ks, vs, err := frame.DecodeMap(b)
		if err != nil {
			return false
		}
		elems = vs
		if keys {
			elems = ks
		}
	default:
		es, err := frame.DecodeList(b)
		if err != nil {
			return false
		}
		elems = es
	}
	for _, e := range elems {
		if bytes.Equal(e, x) {
			return true
		}
	}
	return false
}

// filterKey is the comparable form of a value.
func filterKey(typ frame.DataType, b []byte) []byte {
	if orderable(typ) {
		if k, err := orderKeyOf(typ, b); err == nil {
			return k
		}
	}
	return b
}

// matchValues reports whether a row satisfies the query's restrictions on
// non-key columns.
func (q *rowQuery) matchValues(r *crow) (bool, error) {
	for _, vr := range q.values {
		v, err := vr.value(r)
		if err != nil {
			return false, err
		}
		if v.Null || v.Bytes == nil {
			return false, nil
		}
		if vr.op == "CONTAINS" || vr.op == "CONTAINS KEY" {
			if !contains(vr.col.typ, v.Bytes, vr.keys[0], vr.op == "CONTAINS KEY") {
				return false, nil
			}
			continue
		}
		typ := vr.col.typ
		if !vr.col.regular {
			typ = frame.Bigint
		}
		k := filterKey(typ, v.Bytes)
		ok := false
		switch vr.op {
		case "=", "IN":
			for _, x := range vr.keys {
				ok = ok || bytes.Equal(k, x)
			}
		default:
			c := bytes.Compare(k, vr.keys[0])
			ok = map[string]bool{"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0, "!=": c != 0}[vr.op]
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
