package frame

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
)

// Value codecs: the cell encodings of the CQL types the executor uses, and
// their decoders. Decoders check the length and never panic.

// EncodeInt encodes an int (4 bytes, big-endian).
func EncodeInt(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// EncodeBigint encodes a bigint or a counter (8 bytes, big-endian).
func EncodeBigint(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// EncodeText encodes text, varchar or ascii: the bytes of the string.
func EncodeText(s string) []byte { return []byte(s) }

// EncodeUUID encodes a uuid or timeuuid (16 bytes).
func EncodeUUID(u [16]byte) []byte { return append([]byte(nil), u[:]...) }

// EncodeBoolean encodes a boolean (1 byte).
func EncodeBoolean(b bool) []byte { return []byte{boolByte(b)} }

// EncodeDouble encodes a double (IEEE 754, 8 bytes, big-endian).
func EncodeDouble(f float64) []byte { return EncodeBigint(int64(math.Float64bits(f))) }

// EncodeInet encodes an inet: 4 bytes for an IPv4 address (also when held
// in 16-byte form), else 16.
func EncodeInet(ip net.IP) []byte {
	if v4 := ip.To4(); v4 != nil {
		return append([]byte(nil), v4...)
	}
	return append([]byte(nil), ip.To16()...)
}

// EncodeList encodes a list of encoded elements (v3/v4: an [int] count, then
// each element as [int] length and bytes).
func EncodeList(elems [][]byte) []byte { return encodeElems(elems) }

// EncodeSet encodes a set of encoded elements; the caller orders them as
// Cassandra would (by the element type's order).
func EncodeSet(elems [][]byte) []byte { return encodeElems(elems) }

func encodeElems(elems [][]byte) []byte {
	n := 4
	for _, e := range elems {
		n += 4 + len(e)
	}
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(len(elems)))
	for _, e := range elems {
		b = binary.BigEndian.AppendUint32(b, uint32(len(e)))
		b = append(b, e...)
	}
	return b
}

// EncodeMap encodes a map from its encoded keys and values, pairwise
// (keys[i] maps to vals[i]; the shorter slice decides the count).
func EncodeMap(keys, vals [][]byte) []byte {
	n := min(len(keys), len(vals))
	size := 4
	for i := range n {
		size += 8 + len(keys[i]) + len(vals[i])
	}
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for i := range n {
		b = binary.BigEndian.AppendUint32(b, uint32(len(keys[i])))
		b = append(b, keys[i]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(vals[i])))
		b = append(b, vals[i]...)
	}
	return b
}

func sizeErr(what string, want string, got int) error {
	return fmt.Errorf("frame: %s value of %d bytes, want %s", what, got, want)
}

// DecodeInt decodes an int.
func DecodeInt(b []byte) (int32, error) {
	if len(b) != 4 {
		return 0, sizeErr("int", "4", len(b))
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// DecodeBigint decodes a bigint or a counter.
func DecodeBigint(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, sizeErr("bigint", "8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// DecodeText decodes text; it does not check UTF-8.
func DecodeText(b []byte) string { return string(b) }

// DecodeUUID decodes a uuid or timeuuid.
func DecodeUUID(b []byte) ([16]byte, error) {
	var u [16]byte
	if len(b) != 16 {
		return u, sizeErr("uuid", "16", len(b))
	}
	copy(u[:], b)
	return u, nil
}

// DecodeBoolean decodes a boolean: any non-zero byte is true.
func DecodeBoolean(b []byte) (bool, error) {
	if len(b) != 1 {
		return false, sizeErr("boolean", "1", len(b))
	}
	return b[0] != 0, nil
}

// DecodeDouble decodes a double.
func DecodeDouble(b []byte) (float64, error) {
	v, err := DecodeBigint(b)
	if err != nil {
		return 0, sizeErr("double", "8", len(b))
	}
	return math.Float64frombits(uint64(v)), nil
}

// DecodeInet decodes an inet (4 or 16 bytes).
func DecodeInet(b []byte) (net.IP, error) {
	if len(b) != 4 && len(b) != 16 {
		return nil, sizeErr("inet", "4 or 16", len(b))
	}
	return net.IP(append([]byte(nil), b...)), nil
}

// DecodeList decodes a list (or a set) into its encoded elements, which
// alias b. A null element (negative length) is an error, as in Cassandra.
func DecodeList(b []byte) ([][]byte, error) {
	d := decoder{b: b}
	n := d.intCount(4, "collection elements")
	elems := make([][]byte, 0, n)
	for range n {
		elems = append(elems, d.element())
	}
	return elems, d.finish("collection")
}

// DecodeSet decodes a set; see DecodeList.
func DecodeSet(b []byte) ([][]byte, error) { return DecodeList(b) }

// DecodeMap decodes a map into its encoded keys and values, pairwise.
func DecodeMap(b []byte) (keys, vals [][]byte, err error) {
	d := decoder{b: b}
	n := d.intCount(8, "map entries")
	keys = make([][]byte, 0, n)
	vals = make([][]byte, 0, n)
	for range n {
		keys = append(keys, d.element())
		vals = append(vals, d.element())
	}
	return keys, vals, d.finish("map")
}

func (d *decoder) element() []byte {
	n := d.int_("element length")
	if d.err == nil && n < 0 {
		d.fail("null element in a collection")
	}
	return d.take(int(n), "element")
}

// finish reports the decoder's error, or bytes left over.
func (d *decoder) finish(what string) error {
	if d.err != nil {
		return fmt.Errorf("frame: %s: %w", what, d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("frame: %s: %w: %d bytes after the last element", what, ErrMalformed, len(d.b))
	}
	return nil
}

// Bytes is a non-null Value; Null is the null Value; Unset the unset one.
func Bytes(b []byte) Value { return Value{Bytes: b} }

// Null and Unset values.
var (
	Null  = Value{Null: true}
	Unset = Value{Unset: true}
)
