package cqlsh

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gocql/gocql"
	"gopkg.in/inf.v0"
)

// cell is one value of a result as the server sent it: its type and bytes
// (nil for null). The shell decodes it itself, so that nulls, the order of
// sets and maps and the type of each element are those of the server.
type cell struct {
	info gocql.TypeInfo
	data []byte
}

// tupleBytes encodes a tuple's elements, scanned one by one, as the tuple's
// value: each element's length (-1 for a null) and bytes. Every element
// null reads as a null tuple: gocql's element-wise scan cannot tell them
// apart, and a null tuple is the likelier.
func tupleBytes(elems []cell) []byte {
	null := true
	for _, e := range elems {
		null = null && e.data == nil
	}
	if null {
		return nil
	}
	var out []byte
	for _, e := range elems {
		if e.data == nil {
			out = binary.BigEndian.AppendUint32(out, 0xffffffff)
			continue
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(e.data)))
		out = append(out, e.data...)
	}
	return out
}

// UnmarshalCQL keeps the value's bytes (gocql.Unmarshaler).
func (c *cell) UnmarshalCQL(info gocql.TypeInfo, data []byte) error {
	c.info = info
	if data != nil {
		c.data = append([]byte{}, data...)
	}
	return nil
}

// TimestampLayout is how the shell prints timestamps, as cqlsh does (UTC,
// microseconds).
const TimestampLayout = "2006-01-02 15:04:05.000000-0700"

// FormatValue prints a value of type info, given as its serialized bytes
// (nil for null), the way cqlsh prints it: null as null, text unquoted at
// the top level and quoted inside collections, blobs as 0x..., booleans as
// True/False, timestamps in UTC with microseconds, lists [..], sets {..},
// maps {k: v}, tuples (..) and user types {field: v}.
func FormatValue(info gocql.TypeInfo, data []byte) string {
	return format(info, data, false)
}

func format(info gocql.TypeInfo, data []byte, nested bool) string {
	if data == nil {
		return "null"
	}
	quote := func(s string) string {
		if nested {
			return "'" + strings.ReplaceAll(s, "'", "''") + "'"
		}
		return s
	}
	switch info.Type() {
	case gocql.TypeAscii, gocql.TypeVarchar, gocql.TypeText:
		return quote(escapeText(string(data)))
	case gocql.TypeBlob, gocql.TypeCustom:
		return fmt.Sprintf("0x%x", data)
	case gocql.TypeBoolean:
		if len(data) == 1 && data[0] != 0 {
			return "True"
		}
		return "False"
	case gocql.TypeFloat:
		if len(data) == 4 {
			return formatFloat(float64(math.Float32frombits(binary.BigEndian.Uint32(data))), 5)
		}
	case gocql.TypeDouble:
		if len(data) == 8 {
			return formatFloat(math.Float64frombits(binary.BigEndian.Uint64(data)), 12)
		}
	case gocql.TypeTimestamp:
		if len(data) == 8 {
			ms := int64(binary.BigEndian.Uint64(data))
			return quote(time.UnixMilli(ms).UTC().Format(TimestampLayout))
		}
	case gocql.TypeList, gocql.TypeSet, gocql.TypeMap:
		if s, ok := formatCollection(info, data); ok {
			return s
		}
	case gocql.TypeTuple:
		if t, ok := info.(gocql.TupleTypeInfo); ok {
			if s, ok := formatTuple(t, data); ok {
				return s
			}
		}
	case gocql.TypeUDT:
		if t, ok := info.(gocql.UDTTypeInfo); ok {
			if s, ok := formatUDT(t, data); ok {
				return s
			}
		}
	}
	var v any
	switch info.Type() {
	case gocql.TypeInt, gocql.TypeBigInt, gocql.TypeCounter, gocql.TypeSmallInt, gocql.TypeTinyInt:
		var n int64
		v = &n
	case gocql.TypeVarint:
		v = new(big.Int)
	case gocql.TypeDecimal:
		v = new(inf.Dec)
	case gocql.TypeUUID, gocql.TypeTimeUUID:
		var u gocql.UUID
		v = &u
	case gocql.TypeInet:
		var s string
		if err := gocql.Unmarshal(info, data, &s); err == nil {
			return quote(s)
		}
	case gocql.TypeDate:
		var t time.Time
		if err := gocql.Unmarshal(info, data, &t); err == nil {
			return quote(t.UTC().Format("2006-01-02"))
		}
	case gocql.TypeTime:
		var d time.Duration
		if err := gocql.Unmarshal(info, data, &d); err == nil {
			return quote(formatTime(d))
		}
	case gocql.TypeDuration:
		var d gocql.Duration
		if err := gocql.Unmarshal(info, data, &d); err == nil {
			return formatDuration(d)
		}
	}
	if v != nil {
		if err := gocql.Unmarshal(info, data, v); err == nil {
			switch x := v.(type) {
			case *int64:
				return strconv.FormatInt(*x, 10)
			case *gocql.UUID:
				return x.String()
			}
			return fmt.Sprint(v)
		}
	}
	// A value the shell cannot decode prints as its bytes.
	return fmt.Sprintf("0x%x", data)
}

// escapeText shows text as cqlsh does: backslashes doubled and control
// characters escaped (\n, \t, \x01), so that every value stays on its line.
func escapeText(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x100 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// formatFloat prints a float as cqlsh does: %g with the given significant
// digits, and NaN and Infinity spelt as CQL spells them.
func formatFloat(f float64, digits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', digits, 64)
}

func formatTime(d time.Duration) string {
	h := d / time.Hour
	m := d % time.Hour / time.Minute
	s := d % time.Minute / time.Second
	ns := d % time.Second
	return fmt.Sprintf("%02d:%02d:%02d.%09d", h, m, s, ns)
}

// formatDuration prints a duration in CQL's own notation (1mo2d3h4m5s).
func formatDuration(d gocql.Duration) string {
	if d.Months == 0 && d.Days == 0 && d.Nanoseconds == 0 {
		return "0s"
	}
	var b strings.Builder
	months, days, ns := int64(d.Months), int64(d.Days), d.Nanoseconds
	if months < 0 || days < 0 || ns < 0 {
		b.WriteByte('-')
		months, days, ns = -months, -days, -ns
	}
	part := func(n int64, unit string) {
		if n != 0 {
			fmt.Fprintf(&b, "%d%s", n, unit)
		}
	}
	part(months/12, "y")
	part(months%12, "mo")
	part(days, "d")
	for _, u := range []struct {
		n    int64
		name string
	}{{int64(time.Hour), "h"}, {int64(time.Minute), "m"}, {int64(time.Second), "s"},
		{int64(time.Millisecond), "ms"}, {int64(time.Microsecond), "us"}, {1, "ns"}} {
		part(ns/u.n, u.name)
		ns %= u.n
	}
	return b.String()
}

// elements splits a serialized collection, tuple or user type into its
// elements; n < 0 reads the count first. Protocol versions 1 and 2 use
// 16-bit counts and lengths, later ones 32-bit.
func elements(data []byte, n int, short bool) ([][]byte, bool) {
	fixed := n >= 0
	readInt := func() (int, bool) {
		if short {
			if len(data) < 2 {
				return 0, false
			}
			v := int(int16(binary.BigEndian.Uint16(data)))
			data = data[2:]
			return v, true
		}
		if len(data) < 4 {
			return 0, false
		}
		v := int(int32(binary.BigEndian.Uint32(data)))
		data = data[4:]
		return v, true
	}
	if n < 0 {
		var ok bool
		if n, ok = readInt(); !ok || n < 0 {
			return nil, false
		}
	}
	var out [][]byte
	for i := 0; i < n; i++ {
		if len(data) == 0 && fixed {
			break // a user type may end before its last fields
		}
		l, ok := readInt()
		if !ok {
			return nil, false
		}
		if l < 0 {
			out = append(out, nil)
			continue
		}
		if l > len(data) {
			return nil, false
		}
		out = append(out, data[:l])
		data = data[l:]
	}
	return out, true
}

func formatCollection(info gocql.TypeInfo, data []byte) (string, bool) {
	c, ok := info.(gocql.CollectionType)
	if !ok {
		return "", false
	}
	short := c.Version() < 3
	var parts []string
	if info.Type() == gocql.TypeMap {
		pairs, ok := mapEntries(data, short)
		if !ok {
			return "", false
		}
		for _, p := range pairs {
			parts = append(parts, format(c.Key, p[0], true)+": "+format(c.Elem, p[1], true))
		}
		return "{" + strings.Join(parts, ", ") + "}", true
	}
	elems, ok := elements(data, -1, short)
	if !ok {
		return "", false
	}
	for _, e := range elems {
		parts = append(parts, format(c.Elem, e, true))
	}
	if info.Type() == gocql.TypeList {
		return "[" + strings.Join(parts, ", ") + "]", true
	}
	return "{" + strings.Join(parts, ", ") + "}", true
}

// mapEntries reads a serialized map's key-value pairs.
func mapEntries(data []byte, short bool) ([][2][]byte, bool) {
	width := 4
	if short {
		width = 2
	}
	if len(data) < width {
		return nil, false
	}
	var n int
	if short {
		n = int(int16(binary.BigEndian.Uint16(data)))
	} else {
		n = int(int32(binary.BigEndian.Uint32(data)))
	}
	if n < 0 {
		return nil, false
	}
	flat, ok := elements(data[width:], 2*n, short)
	if !ok || len(flat) != 2*n {
		return nil, false
	}
	out := make([][2][]byte, n)
	for i := range out {
		out[i] = [2][]byte{flat[2*i], flat[2*i+1]}
	}
	return out, true
}

func formatTuple(t gocql.TupleTypeInfo, data []byte) (string, bool) {
	elems, ok := elements(data, len(t.Elems), false)
	if !ok {
		return "", false
	}
	parts := make([]string, len(t.Elems))
	for i, et := range t.Elems {
		var e []byte
		if i < len(elems) {
			e = elems[i]
		}
		parts[i] = format(et, e, true)
	}
	return "(" + strings.Join(parts, ", ") + ")", true
}

func formatUDT(t gocql.UDTTypeInfo, data []byte) (string, bool) {
	elems, ok := elements(data, len(t.Elements), false)
	if !ok {
		return "", false
	}
	parts := make([]string, len(t.Elements))
	for i, f := range t.Elements {
		var e []byte
		if i < len(elems) {
			e = elems[i]
		}
		parts[i] = f.Name + ": " + format(f.Type, e, true)
	}
	return "{" + strings.Join(parts, ", ") + "}", true
}
