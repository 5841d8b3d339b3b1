package cqlsh

import (
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

func native(t gocql.Type) gocql.TypeInfo { return gocql.NewNativeType(4, t, "") }

func collection(t gocql.Type, key, elem gocql.TypeInfo) gocql.TypeInfo {
	return gocql.CollectionType{NativeType: gocql.NewNativeType(4, t, ""), Key: key, Elem: elem}
}

// cqlBytes serializes elements as a collection does (protocol v3+).
func cqlBytes(count int, elems ...[]byte) []byte {
	b := []byte{byte(count >> 24), byte(count >> 16), byte(count >> 8), byte(count)}
	for _, e := range elems {
		n := len(e)
		b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		b = append(b, e...)
	}
	return b
}

func TestFormatValue(t *testing.T) {
	text, integer, bigint := native(gocql.TypeVarchar), native(gocql.TypeInt), native(gocql.TypeBigInt)
	ts := time.Date(2026, 11, 23, 18, 30, 0, 0, time.UTC)
	uuid, _ := gocql.ParseUUID("7d3b2c1e-8f9a-4b5c-9d0e-1f2a3b4c5d6e")
	cases := []struct {
		name string
		info gocql.TypeInfo
		val  any // marshalled with gocql, unless raw is set
		raw  []byte
		want string
	}{
		{"null text", text, nil, nil, "null"},
		{"text unquoted", text, "it's", nil, "it's"},
		{"text with control characters", text, "a\\b\nc\x01", nil, `a\\b\nc\x01`},
		{"text in a set, escaped and quoted", collection(gocql.TypeSet, nil, text), []string{"a\tb'"}, nil, `{'a\tb'''}`},
		{"int", integer, 42, nil, "42"},
		{"negative bigint", bigint, int64(-7), nil, "-7"},
		{"counter", native(gocql.TypeCounter), int64(1234567890123), nil, "1234567890123"},
		{"boolean true", native(gocql.TypeBoolean), true, nil, "True"},
		{"boolean false", native(gocql.TypeBoolean), false, nil, "False"},
		{"blob", native(gocql.TypeBlob), []byte{0xca, 0xfe}, nil, "0xcafe"},
		{"empty blob", native(gocql.TypeBlob), []byte{}, nil, "0x"},
		{"uuid", native(gocql.TypeUUID), uuid, nil, "7d3b2c1e-8f9a-4b5c-9d0e-1f2a3b4c5d6e"},
		{"timestamp", native(gocql.TypeTimestamp), ts, nil, "2026-11-23 18:30:00.000000+0000"},
		{"timestamp millis", native(gocql.TypeTimestamp), ts.Add(123 * time.Millisecond), nil, "2026-11-23 18:30:00.123000+0000"},
		{"double", native(gocql.TypeDouble), 0.01, nil, "0.01"},
		{"double whole", native(gocql.TypeDouble), 1.0, nil, "1"},
		{"double NaN", native(gocql.TypeDouble), math.NaN(), nil, "NaN"},
		{"double -inf", native(gocql.TypeDouble), math.Inf(-1), nil, "-Infinity"},
		{"float", native(gocql.TypeFloat), float32(1.5), nil, "1.5"},
		{"inet", native(gocql.TypeInet), net.ParseIP("127.0.0.2"), nil, "127.0.0.2"},
		{"list of int", collection(gocql.TypeList, nil, integer), []int{1, 2}, nil, "[1, 2]"},
		{"set of int", collection(gocql.TypeSet, nil, integer), []int{1, 2}, nil, "{1, 2}"},
		{"set of text", collection(gocql.TypeSet, nil, text), []string{"a", "b'c"}, nil, "{'a', 'b''c'}"},
		{"empty set", collection(gocql.TypeSet, nil, text), nil, cqlBytes(0), "{}"},
		{"map text to int", collection(gocql.TypeMap, text, integer), map[string]int{"a": 1}, nil, "{'a': 1}"},
		{"map keeps the server's order", collection(gocql.TypeMap, text, integer), nil,
			cqlBytes(2, []byte("b"), []byte{0, 0, 0, 2}, []byte("a"), []byte{0, 0, 0, 1}), "{'b': 2, 'a': 1}"},
		{"map text to blob", collection(gocql.TypeMap, text, native(gocql.TypeBlob)), nil,
			cqlBytes(1, []byte("idemkv.idempotence"), []byte(`{}`)), "{'idemkv.idempotence': 0x7b7d}"},
		{"map of timestamps", collection(gocql.TypeMap, text, native(gocql.TypeTimestamp)), map[string]time.Time{"t": ts},
			nil, "{'t': '2026-11-23 18:30:00.000000+0000'}"},
		{"list with a null", collection(gocql.TypeList, nil, integer), nil,
			append(cqlBytes(2, []byte{0, 0, 0, 1}), 0xff, 0xff, 0xff, 0xff), "[1, null]"},
		{"truncated collection", collection(gocql.TypeList, nil, integer), nil, []byte{0, 0, 0, 5, 0}, "0x0000000500"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := c.raw
			if c.val != nil {
				var err error
				if data, err = gocql.Marshal(c.info, c.val); err != nil {
					t.Fatalf("marshal %v: %v", c.val, err)
				}
			}
			if got := FormatValue(c.info, data); got != c.want {
				t.Errorf("FormatValue = %q, want %q", got, c.want)
			}
		})
	}
}

func TestFormatTupleAndDuration(t *testing.T) {
	tuple := gocql.TupleTypeInfo{NativeType: gocql.NewNativeType(4, gocql.TypeTuple, ""),
		Elems: []gocql.TypeInfo{native(gocql.TypeInt), native(gocql.TypeVarchar)}}
	if got := FormatValue(tuple, cqlBytes(0, []byte{0, 0, 0, 1}, []byte("x"))[4:]); got != "(1, 'x')" {
		t.Errorf("tuple: %q", got)
	}
	for _, c := range []struct {
		d    gocql.Duration
		want string
	}{
		{gocql.Duration{}, "0s"},
		{gocql.Duration{Months: 14, Days: 3, Nanoseconds: int64(90*time.Minute + 5*time.Millisecond)}, "1y2mo3d1h30m5ms"},
		{gocql.Duration{Nanoseconds: -int64(time.Second)}, "-1s"},
	} {
		if got := formatDuration(c.d); got != c.want {
			t.Errorf("formatDuration(%+v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestPrintRowsAligns(t *testing.T) {
	var s Shell
	var b strings.Builder
	s.printRows(&b, []string{"k", "count"}, [][]string{{"日本", "1"}, {"a", "12345678"}}, 0)
	want := "\n k    | count\n------+----------\n 日本 |        1\n    a | 12345678\n"
	if b.String() != want {
		t.Errorf("table\n%q\nwant\n%q", b.String(), want)
	}
	s.expand = true
	b.Reset()
	s.printRows(&b, []string{"k", "count"}, [][]string{{"a", "1"}}, 4)
	want = "\n@ Row 5\n-------+---\n k     | a\n count | 1\n"
	if b.String() != want {
		t.Errorf("expanded\n%q\nwant\n%q", b.String(), want)
	}
}
