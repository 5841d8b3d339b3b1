package exec

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// INSERT ... JSON: the document's members name columns (case-insensitive
// unless the name is quoted, as in CQL: "\"Name\""), their values are
// turned into CQL terms of the columns' types (fromJSON) and the statement
// runs as the INSERT ... VALUES it stands for. A column the document
// omits is set to null, or left as it is with DEFAULT UNSET.

// jsonInsert rewrites an INSERT ... JSON into an INSERT ... VALUES of the
// same table, with its values.
func jsonInsert(t *tableInfo, st *parse.Insert, values []frame.Value) (*parse.Insert, []frame.Value, error) {
	v, err := bind(*st.JSON, values, frame.Text, "[json]")
	if err != nil {
		return nil, nil, err
	}
	if v.Null || v.Unset || v.Bytes == nil {
		return nil, nil, invalid("Got null for INSERT JSON values")
	}
	var doc map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(v.Bytes))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return nil, nil, invalid("Could not decode JSON string as a map: %v. (String was: %s)", err, string(v.Bytes))
	}
	out := &parse.Insert{Table: st.Table, IfNotExists: st.IfNotExists, Using: st.Using}
	var vals []frame.Value
	seen := map[string]bool{}
	for name, raw := range doc {
		col := strings.ToLower(name)
		if len(name) > 1 && name[0] == '"' && name[len(name)-1] == '"' {
			col = name[1 : len(name)-1]
		}
		c, ok := t.cols[col]
		if !ok {
			return nil, nil, invalid("JSON values map contains unrecognized column: %s", name)
		}
		if seen[c.name] {
			return nil, nil, invalid("Multiple definitions found for column %s", c.name)
		}
		seen[c.name] = true
		b, null, err := fromJSON(c.typ, raw, c.name)
		if err != nil {
			return nil, nil, err
		}
		out.Columns = append(out.Columns, c.name)
		out.Values = append(out.Values, parse.Term{Kind: parse.TermMarker, Marker: len(vals)})
		if null {
			vals = append(vals, frame.Null)
		} else {
			vals = append(vals, frame.Bytes(b))
		}
	}
	if !st.DefaultUnset {
		for _, c := range t.regular {
			if !seen[c.name] {
				out.Columns = append(out.Columns, c.name)
				out.Values = append(out.Values, parse.Term{Kind: parse.TermMarker, Marker: len(vals)})
				vals = append(vals, frame.Null)
			}
		}
	}
	// USING terms keep their markers' values: they come after the JSON's.
	if len(st.Using) > 0 {
		base := len(vals)
		vals = append(vals, values...)
		out.Using = make([]parse.UsingOption, len(st.Using))
		for i, u := range st.Using {
			u.Value.Marker += base
			out.Using[i] = u
		}
	}
	return out, vals, nil
}

// fromJSON encodes a JSON value as a value of a CQL type, as Cassandra's
// fromJson: strings for text, UUIDs, blobs ("0x..."), inets, dates and
// times; numbers (or numeric strings) for the numeric types; arrays for
// lists, sets and tuples; objects for maps (keys as strings).
func fromJSON(dt frame.DataType, raw json.RawMessage, col string) ([]byte, bool, error) {
	term, null, err := jsonTerm(dt, raw, col)
	if err != nil || null {
		return nil, null, err
	}
	v, err := bind(term, nil, dt, col)
	if err != nil {
		return nil, false, err
	}
	if v.Null || v.Bytes == nil {
		return nil, true, nil
	}
	return v.Bytes, false, validateValue(dt, v.Bytes, col)
}

// jsonTerm turns a JSON value into the CQL literal of a type.
func jsonTerm(dt frame.DataType, raw json.RawMessage, col string) (parse.Term, bool, error) {
	bad := func() (parse.Term, bool, error) {
		return parse.Term{}, false, invalid("Error decoding JSON value for %s: %s is not a valid %s", col, string(raw), cqlTypeName(dt))
	}
	var x any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return bad()
	}
	if x == nil {
		return parse.Term{}, true, nil
	}
	switch dt.ID {
	case frame.TypeList, frame.TypeSet, frame.TypeTuple:
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return bad()
		}
		kind := map[frame.TypeID]parse.TermKind{frame.TypeList: parse.TermList, frame.TypeSet: parse.TermSet, frame.TypeTuple: parse.TermTuple}[dt.ID]
		out := parse.Term{Kind: kind}
		for i, e := range elems {
			et := frame.DataType{}
			switch {
			case dt.ID == frame.TypeTuple && i < len(dt.Elems):
				et = dt.Elems[i]
			case dt.ID != frame.TypeTuple:
				et = dt.Elems[0]
			default:
				return bad()
			}
			term, null, err := jsonTerm(et, e, col)
			if err != nil {
				return term, false, err
			}
			if null {
				term = parse.Term{Kind: parse.TermNull}
			}
			out.Elems = append(out.Elems, term)
		}
		return out, false, nil
	case frame.TypeMap:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return bad()
		}
		out := parse.Term{Kind: parse.TermMap}
		for k, v := range m {
			keyRaw := json.RawMessage(k)
			if dt.Elems[0].ID == frame.TypeVarchar || dt.Elems[0].ID == frame.TypeASCII || dt.Elems[0].ID == frame.TypeInet || dt.Elems[0].ID == frame.TypeUUID || dt.Elems[0].ID == frame.TypeTimeUUID {
				keyRaw, _ = json.Marshal(k)
			}
			kt, _, err := jsonTerm(dt.Elems[0], keyRaw, col)
			if err != nil {
				return kt, false, err
			}
			vt, _, err := jsonTerm(dt.Elems[1], v, col)
			if err != nil {
				return vt, false, err
			}
			out.Map = append(out.Map, parse.MapEntry{Key: kt, Value: vt})
		}
		return out, false, nil
	}
	switch v := x.(type) {
	case json.Number:
		switch dt.ID {
		case frame.TypeVarchar, frame.TypeASCII:
			return bad()
		}
		kind := parse.TermInt
		if strings.ContainsAny(v.String(), ".eE") {
			kind = parse.TermFloat
		}
		return parse.Term{Kind: kind, Text: v.String()}, false, nil
	case bool:
		if dt.ID != frame.TypeBoolean {
			return bad()
		}
		return parse.Term{Kind: parse.TermBool, Text: map[bool]string{true: "true", false: "false"}[v]}, false, nil
	case string:
		switch dt.ID {
		case frame.TypeUUID, frame.TypeTimeUUID:
			return parse.Term{Kind: parse.TermUUID, Text: strings.ToLower(v)}, false, nil
		case frame.TypeBlob:
			if !strings.HasPrefix(v, "0x") {
				return bad()
			}
			return parse.Term{Kind: parse.TermBlob, Text: strings.ToLower(v)}, false, nil
		case frame.TypeBoolean:
			if v != "true" && v != "false" {
				return bad()
			}
			return parse.Term{Kind: parse.TermBool, Text: v}, false, nil
		case frame.TypeInt, frame.TypeBigint, frame.TypeSmallint, frame.TypeTinyint, frame.TypeVarint, frame.TypeCounter:
			return parse.Term{Kind: parse.TermInt, Text: v}, false, nil
		case frame.TypeDouble, frame.TypeFloat, frame.TypeDecimal:
			return parse.Term{Kind: parse.TermFloat, Text: v}, false, nil
		}
		return parse.Term{Kind: parse.TermString, Text: v}, false, nil
	}
	return bad()
}
