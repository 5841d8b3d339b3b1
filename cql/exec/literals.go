package exec

import (
	"encoding/binary"
	"math"
	mbig "math/big"
	"strconv"
	"strings"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// bindLiteral encodes the literals of the types bind does not handle
// itself: smallint, tinyint, float, varint, decimal, timestamp, date,
// time, and collection and tuple literals (whose elements may be bind
// markers). ok is false when the literal does not fit the type.
func bindLiteral(t parse.Term, values []frame.Value, typ frame.DataType, col string) (b []byte, ok bool, err error) {
	bad := func() ([]byte, bool, error) {
		return nil, false, invalid("Invalid %s constant (%s) for \"%s\" of type %s", termKindNames[t.Kind], t.String(), col, cqlTypeName(typ))
	}
	intIn := func(bits int) ([]byte, bool, error) {
		if t.Kind != parse.TermInt {
			return bad()
		}
		v, err := strconv.ParseInt(t.Text, 10, bits)
		if err != nil {
			return nil, false, invalid("Unable to make %s from '%s'", cqlTypeName(typ), t.Text)
		}
		switch bits {
		case 16:
			return binary.BigEndian.AppendUint16(nil, uint16(v)), true, nil
		case 8:
			return []byte{byte(v)}, true, nil
		}
		return nil, false, nil
	}
	switch typ.ID {
	case frame.TypeSmallint:
		return intIn(16)
	case frame.TypeTinyint:
		return intIn(8)
	case frame.TypeFloat:
		if t.Kind != parse.TermInt && t.Kind != parse.TermFloat {
			return bad()
		}
		f, err := strconv.ParseFloat(t.Text, 32)
		if err != nil {
			return bad()
		}
		return binary.BigEndian.AppendUint32(nil, math.Float32bits(float32(f))), true, nil
	case frame.TypeVarint:
		n, ok := new(mbig.Int).SetString(t.Text, 10)
		if t.Kind != parse.TermInt || !ok {
			return bad()
		}
		return varintBytes(n), true, nil
	case frame.TypeDecimal:
		if t.Kind != parse.TermInt && t.Kind != parse.TermFloat {
			return bad()
		}
		r, ok := new(mbig.Rat).SetString(t.Text)
		if !ok {
			return bad()
		}
		scale := int32(0)
		if i := strings.IndexByte(t.Text, '.'); i >= 0 && !strings.ContainsAny(t.Text, "eE") {
			scale = int32(len(t.Text) - i - 1)
		}
		unscaled := new(mbig.Rat).Mul(r, new(mbig.Rat).SetInt(new(mbig.Int).Exp(mbig.NewInt(10), mbig.NewInt(int64(scale)), nil)))
		if !unscaled.IsInt() {
			return bad()
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(scale)), varintBytes(unscaled.Num())...), true, nil
	case frame.TypeTimestamp:
		switch t.Kind {
		case parse.TermInt:
			v, err := strconv.ParseInt(t.Text, 10, 64)
			if err != nil {
				return bad()
			}
			return frame.EncodeBigint(v), true, nil
		case parse.TermString:
			ts, err := parseTimestamp(t.Text)
			if err != nil {
				return nil, false, invalid("Unable to coerce '%s' to a formatted date (long)", t.Text)
			}
			return frame.EncodeBigint(ts.UnixMilli()), true, nil
		}
		return bad()
	case frame.TypeDate:
		switch t.Kind {
		case parse.TermInt:
			v, err := strconv.ParseUint(t.Text, 10, 32)
			if err != nil {
				return bad()
			}
			return binary.BigEndian.AppendUint32(nil, uint32(v)), true, nil
		case parse.TermString:
			d, err := time.Parse("2006-01-02", t.Text)
			if err != nil {
				return nil, false, invalid("Unable to coerce '%s' to a formatted date (long)", t.Text)
			}
			days := d.Unix() / 86400
			return binary.BigEndian.AppendUint32(nil, uint32(days+1<<31)), true, nil
		}
		return bad()
	case frame.TypeTime:
		switch t.Kind {
		case parse.TermInt:
			v, err := strconv.ParseInt(t.Text, 10, 64)
			if err != nil {
				return bad()
			}
			return frame.EncodeBigint(v), true, nil
		case parse.TermString:
			d, err := time.Parse("15:04:05.999999999", t.Text)
			if err != nil {
				return nil, false, invalid("Unable to coerce '%s' to a formatted time (long)", t.Text)
			}
			ns := int64(d.Hour())*3600e9 + int64(d.Minute())*60e9 + int64(d.Second())*1e9 + int64(d.Nanosecond())
			return frame.EncodeBigint(ns), true, nil
		}
		return bad()
	case frame.TypeList, frame.TypeSet:
		if t.Kind != parse.TermList && t.Kind != parse.TermSet && !(t.Kind == parse.TermMap && len(t.Map) == 0) {
			return bad()
		}
		var elems [][]byte
		for _, e := range t.Elems {
			v, err := bind(e, values, typ.Elems[0], col)
			if err != nil {
				return nil, false, err
			}
			if v.Null || v.Bytes == nil || v.Unset {
				return nil, false, invalid("null is not supported inside collections")
			}
			elems = append(elems, v.Bytes)
		}
		return frame.EncodeList(elems), true, nil
	case frame.TypeMap:
		if t.Kind != parse.TermMap {
			return bad()
		}
		var ks, vs [][]byte
		for _, e := range t.Map {
			k, err := bind(e.Key, values, typ.Elems[0], col)
			if err != nil {
				return nil, false, err
			}
			v, err := bind(e.Value, values, typ.Elems[1], col)
			if err != nil {
				return nil, false, err
			}
			if k.Null || k.Bytes == nil || v.Null || v.Bytes == nil {
				return nil, false, invalid("null is not supported inside collections")
			}
			ks, vs = append(ks, k.Bytes), append(vs, v.Bytes)
		}
		return frame.EncodeMap(ks, vs), true, nil
	case frame.TypeTuple:
		if t.Kind != parse.TermTuple || len(t.Elems) > len(typ.Elems) {
			return bad()
		}
		var out []byte
		for i, e := range t.Elems {
			v, err := bind(e, values, typ.Elems[i], col)
			if err != nil {
				return nil, false, err
			}
			if v.Null || v.Bytes == nil {
				out = binary.BigEndian.AppendUint32(out, math.MaxUint32)
				continue
			}
			out = binary.BigEndian.AppendUint32(out, uint32(len(v.Bytes)))
			out = append(out, v.Bytes...)
		}
		return out, true, nil
	}
	return nil, false, nil
}

// varintBytes is a big integer as CQL's varint: two's complement,
// big-endian, in as few bytes as hold its sign.
func varintBytes(n *mbig.Int) []byte {
	switch n.Sign() {
	case 0:
		return []byte{0}
	case 1:
		b := n.Bytes()
		if b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// Negative: two's complement of |n| in enough bytes.
	l := len(n.Bytes()) + 1
	m := new(mbig.Int).Add(new(mbig.Int).Lsh(mbig.NewInt(1), uint(l*8)), n)
	b := m.Bytes()
	for len(b) < l {
		b = append([]byte{0xff}, b...)
	}
	for len(b) > 1 && b[0] == 0xff && b[1]&0x80 != 0 {
		b = b[1:]
	}
	return b
}

// parseTimestamp reads the timestamp literals Cassandra takes (a date, a
// date and time, with an optional zone; UTC without one).
func parseTimestamp(s string) (time.Time, error) {
	var err error
	for _, layout := range []string{
		"2006-01-02 15:04:05.999Z0700", "2006-01-02 15:04:05.999Z07:00", "2006-01-02 15:04:05.999",
		"2006-01-02T15:04:05.999Z0700", "2006-01-02T15:04:05.999Z07:00", "2006-01-02T15:04:05.999",
		"2006-01-02 15:04Z0700", "2006-01-02 15:04", "2006-01-02Z0700", "2006-01-02",
	} {
		var ts time.Time
		if ts, err = time.Parse(layout, s); err == nil {
			return ts, nil
		}
	}
	return time.Time{}, err
}
