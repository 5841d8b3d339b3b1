package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrMalformed is wrapped by every error a decoder returns for a body that
// does not follow the spec: too short, a negative or oversized length, an
// unknown kind. The server answers such a frame with a protocol error.
var ErrMalformed = errors.New("malformed frame body")

// decoder reads the body notation of the spec (§3) from a byte slice. The
// first error sticks: every later read returns a zero value, so a message
// decoder reads all its fields and checks d.err once. Every length is checked
// against what remains before anything is allocated, so a decoder never
// panics and never allocates more than a small multiple of its input.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

// need reports whether n more bytes are available, failing the decoder if
// they are not.
func (d *decoder) need(n int, what string) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || n > len(d.b) {
		d.fail("not enough bytes to read %s: need %d, have %d", what, n, len(d.b))
		return false
	}
	return true
}

func (d *decoder) take(n int, what string) []byte {
	if !d.need(n, what) {
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) byte_(what string) byte {
	p := d.take(1, what)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *decoder) short(what string) uint16 {
	p := d.take(2, what)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

func (d *decoder) int_(what string) int32 {
	p := d.take(4, what)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (d *decoder) long(what string) int64 {
	p := d.take(8, what)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

// string_ reads a [string]: a [short] length and that many bytes.
func (d *decoder) string_(what string) string {
	n := d.short(what)
	return string(d.take(int(n), what))
}

// longString reads a [long string]: an [int] length and that many bytes.
func (d *decoder) longString(what string) string {
	n := d.int_(what)
	if n < 0 {
		d.fail("negative length %d for %s", n, what)
		return ""
	}
	return string(d.take(int(n), what))
}

// bytes_ reads [bytes]: an [int] length (negative: null, returned as nil)
// and that many bytes, aliasing the body.
func (d *decoder) bytes_(what string) []byte {
	n := d.int_(what)
	if d.err != nil || n < 0 {
		return nil
	}
	p := d.take(int(n), what)
	if p == nil {
		return []byte{}
	}
	return p
}

// value reads a [value]: [bytes] where -1 is null and (v4) -2 is unset.
func (d *decoder) value(version byte, what string) Value {
	n := d.int_(what)
	switch {
	case d.err != nil:
		return Value{}
	case n == -1:
		return Value{Null: true}
	case n == -2 && version >= 4:
		return Value{Unset: true}
	case n < 0:
		d.fail("invalid length %d for %s", n, what)
		return Value{}
	}
	p := d.take(int(n), what)
	if p == nil {
		p = []byte{}
	}
	return Value{Bytes: p}
}

// shortBytes reads [short bytes]: a [short] length and that many bytes.
func (d *decoder) shortBytes(what string) []byte {
	n := d.short(what)
	p := d.take(int(n), what)
	if p == nil && d.err == nil {
		return []byte{}
	}
	return p
}

// count reads a [short] count of items that take at least min bytes each
// and checks that they can fit in what remains.
func (d *decoder) count(min int, what string) int {
	n := int(d.short(what))
	if d.err == nil && n*min > len(d.b) {
		d.fail("%d %s cannot fit in %d bytes", n, what, len(d.b))
		return 0
	}
	return n
}

// intCount is count for an [int] count; negative counts are malformed.
func (d *decoder) intCount(min int, what string) int {
	n := d.int_(what)
	if d.err != nil {
		return 0
	}
	if n < 0 || int64(n)*int64(min) > int64(len(d.b)) {
		d.fail("%d %s cannot fit in %d bytes", n, what, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) stringList(what string) []string {
	n := d.count(2, what)
	if d.err != nil {
		return nil
	}
	l := make([]string, 0, n)
	for range n {
		l = append(l, d.string_(what))
	}
	return l
}

func (d *decoder) stringMap(what string) map[string]string {
	n := d.count(4, what)
	if d.err != nil {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := d.string_(what)
		m[k] = d.string_(what)
	}
	return m
}

func (d *decoder) stringMultimap(what string) map[string][]string {
	n := d.count(4, what)
	if d.err != nil {
		return nil
	}
	m := make(map[string][]string, n)
	for range n {
		k := d.string_(what)
		m[k] = d.stringList(what)
	}
	return m
}

// bytesMap reads a [bytes map]; a null value is kept as a nil slice.
func (d *decoder) bytesMap(what string) map[string][]byte {
	n := d.count(6, what)
	if d.err != nil {
		return nil
	}
	m := make(map[string][]byte, n)
	for range n {
		k := d.string_(what)
		m[k] = d.bytes_(what)
	}
	return m
}

// inet reads an [inet]: a byte size (4 or 16), the address and an [int]
// port.
func (d *decoder) inet(what string) ([]byte, int32) {
	n := d.byte_(what)
	if d.err == nil && n != 4 && n != 16 {
		d.fail("invalid address size %d for %s", n, what)
		return nil, 0
	}
	ip := d.take(int(n), what)
	port := d.int_(what)
	return ip, port
}

func (d *decoder) uuid(what string) []byte { return d.take(16, what) }

// maxTypeDepth bounds the nesting of collection types in an [option].
const maxTypeDepth = 16

// option reads a data type [option].
func (d *decoder) option(depth int) DataType {
	if depth > maxTypeDepth {
		d.fail("type nested deeper than %d", maxTypeDepth)
		return DataType{}
	}
	id := TypeID(d.short("type id"))
	t := DataType{ID: id}
	switch id {
	case TypeCustom:
		t.Custom = d.string_("custom type class")
	case TypeList, TypeSet:
		t.Elems = []DataType{d.option(depth + 1)}
	case TypeMap:
		k := d.option(depth + 1)
		t.Elems = []DataType{k, d.option(depth + 1)}
	case TypeTuple:
		n := d.count(2, "tuple types")
		for range n {
			t.Elems = append(t.Elems, d.option(depth+1))
		}
	case TypeUDT:
		d.fail("user-defined types are not supported")
	}
	return t
}

// encoder appends the body notation to a byte slice. A length that does
// not fit its field (a [string] over 65535 bytes, a list of more than 65535
// items) sets err, which sticks; the encoded bytes are then not to be sent.
type encoder struct {
	b   []byte
	err error
}

func (e *encoder) failLen(n int, max int, what string) {
	if e.err == nil {
		e.err = fmt.Errorf("frame: %s too long: %d > %d", what, n, max)
	}
}

func (e *encoder) shortLen(n int, what string) {
	if n > math.MaxUint16 {
		e.failLen(n, math.MaxUint16, what)
	}
	e.b = binary.BigEndian.AppendUint16(e.b, uint16(n))
}

func (e *encoder) intLen(n int, what string) {
	if n > math.MaxInt32 {
		e.failLen(n, math.MaxInt32, what)
	}
	e.b = binary.BigEndian.AppendUint32(e.b, uint32(n))
}

func (e *encoder) byte_(v byte)     { e.b = append(e.b, v) }
func (e *encoder) short(v uint16)   { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *encoder) int_(v int32)     { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) long(v int64)     { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) raw(p []byte)     { e.b = append(e.b, p...) }
func (e *encoder) string_(s string) { e.shortLen(len(s), "string"); e.b = append(e.b, s...) }

func (e *encoder) longString(s string) { e.intLen(len(s), "long string"); e.b = append(e.b, s...) }

// bytes_ writes [bytes]; nil is null (-1).
func (e *encoder) bytes_(p []byte) {
	if p == nil {
		e.int_(-1)
		return
	}
	e.intLen(len(p), "bytes")
	e.b = append(e.b, p...)
}

// value writes a [value]: null -1, unset -2, else [bytes]. A Value with nil
// Bytes that is neither null nor unset is an empty value.
func (e *encoder) value(v Value) {
	switch {
	case v.Unset:
		e.int_(-2)
	case v.Null:
		e.int_(-1)
	default:
		e.intLen(len(v.Bytes), "value")
		e.b = append(e.b, v.Bytes...)
	}
}

func (e *encoder) shortBytes(p []byte) { e.shortLen(len(p), "short bytes"); e.b = append(e.b, p...) }

func (e *encoder) stringList(l []string) {
	e.shortLen(len(l), "string list")
	for _, s := range l {
		e.string_(s)
	}
}

func (e *encoder) stringMap(m map[string]string) {
	e.shortLen(len(m), "string map")
	for _, k := range sortedKeys(m) {
		e.string_(k)
		e.string_(m[k])
	}
}

func (e *encoder) stringMultimap(m map[string][]string) {
	e.shortLen(len(m), "string multimap")
	for _, k := range sortedKeys(m) {
		e.string_(k)
		e.stringList(m[k])
	}
}

func (e *encoder) bytesMap(m map[string][]byte) {
	e.shortLen(len(m), "bytes map")
	for _, k := range sortedKeys(m) {
		e.string_(k)
		e.bytes_(m[k])
	}
}

func (e *encoder) inet(ip []byte, port int32) {
	if len(ip) != 4 && len(ip) != 16 && e.err == nil {
		e.err = fmt.Errorf("frame: inet address of %d bytes", len(ip))
	}
	e.byte_(byte(len(ip)))
	e.raw(ip)
	e.int_(port)
}

func (e *encoder) uuid(p []byte) {
	if len(p) != 16 && e.err == nil {
		e.err = fmt.Errorf("frame: uuid of %d bytes", len(p))
	}
	e.raw(p)
}

func (e *encoder) option(t DataType) {
	e.short(uint16(t.ID))
	switch t.ID {
	case TypeCustom:
		e.string_(t.Custom)
	case TypeList, TypeSet, TypeMap:
		want := 1
		if t.ID == TypeMap {
			want = 2
		}
		if len(t.Elems) != want && e.err == nil {
			e.err = fmt.Errorf("frame: collection type 0x%04x with %d element types", uint16(t.ID), len(t.Elems))
		}
		for _, el := range t.Elems {
			e.option(el)
		}
	case TypeTuple:
		e.shortLen(len(t.Elems), "tuple")
		for _, el := range t.Elems {
			e.option(el)
		}
	}
}

// sortedKeys returns a map's keys in order, so that encodings are
// deterministic.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
