package exec

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"strings"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// token() in SELECT: `SELECT token(k) ...` is the partition's Murmur3 token
// as a bigint column, named as Cassandra names it ("system.token(k)"), and
// `WHERE token(k) > ? AND token(k) <= ?` (any of =, <, <=, >, >=, literal
// or bound) scans a token range: the way cqlsh's COPY TO, Spark and DSBulk
// split a table's full scan. A prepared token marker is typed as Cassandra
// types it, "partition key token" bigint.

// tokenMarkerName is the name Cassandra gives a bind marker of a token()
// restriction.
const tokenMarkerName = "partition key token"

// checkTokenColumns checks that token()'s arguments are the table's
// partition key columns, in order.
func checkTokenColumns(t *tableInfo, cols []string) error {
	if t.sys != nil {
		return invalid("idemkv does not serve token() on system tables")
	}
	for _, name := range cols {
		if _, err := t.column(name); err != nil {
			return err
		}
	}
	want := make([]string, len(t.pk))
	for i, c := range t.pk {
		want[i] = c.name
	}
	if len(cols) != len(want) {
		return invalid("The token() function must be applied to all partition key components or none of them")
	}
	for i := range cols {
		if cols[i] != want[i] {
			return invalid("The token function arguments must be in the partition key order: %s", strings.Join(want, ", "))
		}
	}
	return nil
}

// tokenColumnName is the result column name of token(cols).
func tokenColumnName(cols []string) string {
	return "system.token(" + strings.Join(cols, ", ") + ")"
}

// tokenRange binds a SELECT's token() restrictions to the range of tokens
// they select, (lo, hi]: lo exclusive, hi inclusive. empty reports a range
// that holds no token (a start above its end: Cassandra answers no rows
// rather than wrapping around the ring).
func tokenRange(t *tableInfo, rels []parse.Relation, values []frame.Value) (lo, hi int64, empty bool, err error) {
	lo, hi = math.MinInt64, math.MaxInt64
	for _, r := range rels {
		if err := checkTokenColumns(t, r.Token); err != nil {
			return 0, 0, false, err
		}
		v, err := bind(r.Value, values, frame.Bigint, tokenMarkerName)
		if err != nil {
			return 0, 0, false, err
		}
		switch {
		case v.Unset:
			return 0, 0, false, invalid("Invalid unset value for %s", tokenMarkerName)
		case v.Null || v.Bytes == nil:
			return 0, 0, false, invalid("Invalid null value for %s", tokenMarkerName)
		case len(v.Bytes) != 8:
			return 0, 0, false, invalid("Expected 8 or 0 byte long (%d)", len(v.Bytes))
		}
		x := int64(binary.BigEndian.Uint64(v.Bytes))
		switch r.Op {
		case ">":
			lo = max(lo, x)
		case ">=":
			if x == math.MinInt64 {
				break // no key has the minimum token
			}
			lo = max(lo, x-1)
		case "<=":
			hi = min(hi, x)
		case "<":
			if x == math.MinInt64 {
				return 0, 0, true, nil
			}
			hi = min(hi, x-1)
		case "=":
			if x == math.MinInt64 {
				return 0, 0, true, nil
			}
			lo, hi = max(lo, x-1), min(hi, x)
		default:
			return 0, 0, false, invalid("Unsupported operator %s on token()", r.Op)
		}
	}
	return lo, hi, lo >= hi, nil
}

// splitTokenRelations separates a WHERE clause's token() restrictions from
// its other relations.
func splitTokenRelations(rs []parse.Relation) (tok, other []parse.Relation) {
	for _, r := range rs {
		if len(r.Token) > 0 {
			tok = append(tok, r)
		} else {
			other = append(other, r)
		}
	}
	return tok, other
}

// compareKeys orders two partition keys (their components) as Cassandra's
// key types order them: component by component, signed for int and
// bigint, by timestamp for time UUIDs, bytes for text, ascii and blob.
// IN on the partition key returns its rows in this order.
func compareKeys(t *tableInfo, a, b [][]byte) int {
	for i := range a {
		if c := compareKeyPart(t.pk[i], a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

func compareKeyPart(c *column, a, b []byte) int {
	switch c.typ.ID {
	case frame.TypeInt:
		if len(a) == 4 && len(b) == 4 {
			return cmp.Compare(int32(binary.BigEndian.Uint32(a)), int32(binary.BigEndian.Uint32(b)))
		}
	case frame.TypeBigint:
		if len(a) == 8 && len(b) == 8 {
			return cmp.Compare(int64(binary.BigEndian.Uint64(a)), int64(binary.BigEndian.Uint64(b)))
		}
	case frame.TypeTimeUUID, frame.TypeUUID:
		if len(a) == 16 && len(b) == 16 {
			// UUIDType orders by version first; time-based UUIDs (and
			// every timeuuid) by timestamp, then by their bytes.
			if c := cmp.Compare(a[6]>>4, b[6]>>4); c != 0 {
				return c
			}
			if a[6]>>4 == 1 {
				if c := cmp.Compare(uuidTime(a), uuidTime(b)); c != 0 {
					return c
				}
			}
		}
	}
	return bytes.Compare(a, b)
}

// uuidTime is a version 1 UUID's 60-bit timestamp.
func uuidTime(u []byte) uint64 {
	hi := uint64(binary.BigEndian.Uint16(u[6:8]) & 0x0fff)
	mid := uint64(binary.BigEndian.Uint16(u[4:6]))
	low := uint64(binary.BigEndian.Uint32(u[0:4]))
	return hi<<48 | mid<<32 | low
}

// checkDistinct applies Cassandra's rules of SELECT DISTINCT: only the
// partition key's columns (all of them) or token(), since idemkv tables
// have no static columns. Each partition being one row, the query is then
// the plain SELECT of those columns.
func checkDistinct(t *tableInfo, st *parse.Select) error {
	if t.sys != nil {
		return invalid("idemkv does not serve SELECT DISTINCT on system tables")
	}
	if st.Star {
		for _, c := range t.all() {
			if c.pkIndex < 0 && !c.static {
				return invalid("SELECT DISTINCT queries must only request partition key columns and/or static columns (not %s)", c.name)
			}
		}
		return nil
	}
	have := map[string]bool{}
	for _, s := range st.Selectors {
		switch {
		case s.Count, len(s.Token) > 0:
		default:
			c, err := t.column(s.Column)
			if err != nil {
				return err
			}
			if c.pkIndex < 0 && !c.static {
				return invalid("SELECT DISTINCT queries must only request partition key columns and/or static columns (not %s)", c.name)
			}
			have[c.name] = true
		}
	}
	if len(have) == 0 {
		return nil // count(*) or token() only
	}
	for _, c := range t.pk {
		if !have[c.name] {
			return invalid("SELECT DISTINCT queries must request all the partition key columns (missing %s)", c.name)
		}
	}
	return nil
}

// cellFunction is the result column of writetime(c) or ttl(c): a bigint
// write time in microseconds, an int TTL in seconds (null for counters,
// which do not expire), as Cassandra 5.0 answers them for counters. Key
// columns have neither.
func cellFunction(t *tableInfo, c *column, fn string) (frame.ColumnSpec, error) {
	if t.sys != nil {
		return frame.ColumnSpec{}, invalid("idemkv does not serve %s() on system tables", fn)
	}
	name := map[string]string{"writetime": "writeTime", "ttl": "ttl"}[fn]
	if c.isKey() {
		return frame.ColumnSpec{}, invalid("Cannot use selection function %s on PRIMARY KEY part %s", name, c.name)
	}
	if c.multiCell {
		return frame.ColumnSpec{}, invalid("Cannot use selection function %s on non-frozen collection %s", name, c.name)
	}
	spec := frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: fn + "(" + c.name + ")", Type: frame.Bigint}
	if fn == "ttl" {
		spec.Type = frame.Int
	}
	return spec, nil
}
