package exec

import (
	"bytes"
	"math"
	"strings"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/row"
)

// Clustering columns. A partition of a table with clustering columns holds
// many CQL rows; the storage engine sees one partition whose cells carry
// composite names (package row: the row's clustering components, then the
// column). Each component is an order key: the value's bytes turned so
// that their bytewise order is the CQL order of the type (orderKey), which
// row.AppendComponent escapes, terminates and inverts for a DESC column.
// A partition read is expanded into its CQL rows (expandRows), in storage
// order, then filtered by the clustering restrictions and, for ORDER BY
// against the declared order, reversed.

// clusteringTypes are the CQL types idemkv serves as clustering columns:
// those whose CQL order has an invertible order key (varint, decimal and
// the collections have none here).
var clusteringTypes = map[string]frame.DataType{
	"text": frame.Text, "varchar": frame.Text, "ascii": {ID: frame.TypeASCII}, "blob": frame.Blob,
	"int": frame.Int, "bigint": frame.Bigint, "smallint": {ID: frame.TypeSmallint}, "tinyint": {ID: frame.TypeTinyint},
	"uuid": frame.UUID, "timeuuid": frame.TimeUUID, "boolean": {ID: frame.TypeBoolean},
	"timestamp": {ID: frame.TypeTimestamp}, "date": {ID: frame.TypeDate}, "time": {ID: frame.TypeTime},
	"double": {ID: frame.TypeDouble}, "float": {ID: frame.TypeFloat}, "inet": {ID: frame.TypeInet},
}

// orderKey turns a clustering value (its CQL bytes) into bytes whose
// bytewise order is the type's CQL order; it checks the value's length.
//
//	text, ascii, blob, inet, date (unsigned days), boolean: the bytes
//	int, bigint, smallint, tinyint, timestamp, time: big-endian, sign bit flipped
//	double, float: IEEE bits, sign bit flipped for a positive value, all bits for a negative one
//	uuid, timeuuid: version nibble, the 60-bit timestamp (hi, mid, low), then
//	  the clock sequence and node with each byte's top bit flipped (Cassandra
//	  compares them as signed bytes)
func orderKey(c *column, b []byte) ([]byte, error) {
	fixed := func(n int, what string) error {
		if len(b) != n {
			return invalid("Expected %d or 0 byte %s (%d)", n, what, len(b))
		}
		return nil
	}
	switch c.typ.ID {
	case frame.TypeVarchar, frame.TypeASCII, frame.TypeBlob:
		return b, validateKeyPart(c, b)
	case frame.TypeInet:
		if len(b) != 4 && len(b) != 16 {
			return nil, invalid("Invalid inet address length (%d)", len(b))
		}
		return b, nil
	case frame.TypeDate:
		return b, fixed(4, "date")
	case frame.TypeBoolean:
		return b, fixed(1, "boolean")
	case frame.TypeInt, frame.TypeBigint, frame.TypeSmallint, frame.TypeTinyint, frame.TypeTimestamp, frame.TypeTime:
		n := map[frame.TypeID]int{frame.TypeInt: 4, frame.TypeBigint: 8, frame.TypeSmallint: 2, frame.TypeTinyint: 1, frame.TypeTimestamp: 8, frame.TypeTime: 8}[c.typ.ID]
		if err := fixed(n, cqlTypeName(c.typ)); err != nil {
			return nil, err
		}
		k := bytes.Clone(b)
		k[0] ^= 0x80
		return k, nil
	case frame.TypeDouble, frame.TypeFloat:
		n := 8
		if c.typ.ID == frame.TypeFloat {
			n = 4
		}
		if err := fixed(n, cqlTypeName(c.typ)); err != nil {
			return nil, err
		}
		k := bytes.Clone(b)
		if k[0]&0x80 == 0 {
			k[0] ^= 0x80
		} else {
			for i := range k {
				k[i] = ^k[i]
			}
		}
		return k, nil
	case frame.TypeCustom:
		// A custom type (a class name) orders by its bytes, except
		// LexicalUUIDType: two signed longs, as java.util.UUID compares.
		if c.typ.Custom != lexicalUUIDType {
			return b, nil
		}
		if err := fixed(16, "LexicalUUIDType"); err != nil {
			return nil, err
		}
		k := bytes.Clone(b)
		k[0] ^= 0x80
		k[8] ^= 0x80
		return k, nil
	case frame.TypeUUID, frame.TypeTimeUUID:
		if err := validateKeyPart(c, b); err != nil {
			return nil, err
		}
		k := []byte{b[6] >> 4, b[6] & 0x0f, b[7], b[4], b[5], b[0], b[1], b[2], b[3]}
		for _, x := range b[8:] {
			k = append(k, x^0x80)
		}
		return k, nil
	}
	return nil, invalid("idemkv does not serve clustering columns of type %s", c.cqlType)
}

// lexicalUUIDType is the class of Cassandra's LexicalUUIDType.
const lexicalUUIDType = "org.apache.cassandra.db.marshal.LexicalUUIDType"

// customType is the type of a column declared with a class name
// ('org.apache.cassandra.db.marshal.LexicalUUIDType'): drivers see the
// class; idemkv stores its bytes.
func customType(name string) (frame.DataType, bool) {
	if !strings.Contains(name, ".") {
		return frame.DataType{}, false
	}
	return frame.DataType{ID: frame.TypeCustom, Custom: name}, true
}

// fromOrderKey is orderKey's inverse: the value's CQL bytes.
func fromOrderKey(c *column, k []byte) []byte {
	switch c.typ.ID {
	case frame.TypeCustom:
		if c.typ.Custom == lexicalUUIDType && len(k) == 16 {
			b := bytes.Clone(k)
			b[0] ^= 0x80
			b[8] ^= 0x80
			return b
		}
		return k
	case frame.TypeInt, frame.TypeBigint, frame.TypeSmallint, frame.TypeTinyint, frame.TypeTimestamp, frame.TypeTime:
		b := bytes.Clone(k)
		if len(b) > 0 {
			b[0] ^= 0x80
		}
		return b
	case frame.TypeDouble, frame.TypeFloat:
		b := bytes.Clone(k)
		if len(b) > 0 && b[0]&0x80 != 0 {
			b[0] ^= 0x80
		} else {
			for i := range b {
				b[i] = ^b[i]
			}
		}
		return b
	case frame.TypeUUID, frame.TypeTimeUUID:
		if len(k) != 17 {
			return k
		}
		b := make([]byte, 16)
		b[6] = k[0]<<4 | k[1]
		b[7], b[4], b[5] = k[2], k[3], k[4]
		copy(b[0:4], k[5:9])
		for i, x := range k[9:] {
			b[8+i] = x ^ 0x80
		}
		return b
	}
	return k
}

// crow is one CQL row of a partition: its clustering values (CQL bytes
// and order keys; none without clustering columns), the composite prefix
// of its cells, and its cells named by their columns.
type crow struct {
	key    row.Key
	ck     [][]byte
	ckKeys [][]byte
	prefix string
	cells  []row.Cell
	// statics are the partition's static cells, named by their columns;
	// staticOnly marks the row a partition with static cells and no
	// clustering row reads as (its clustering values null).
	statics    []row.Cell
	staticOnly bool
}

// cell is the row's cell of a column, a static one included.
func (r *crow) cell(name string) (row.Cell, bool) {
	for _, c := range r.cells {
		if c.Column == name {
			return c, true
		}
	}
	for _, c := range r.statics {
		if c.Column == name {
			return c, true
		}
	}
	return row.Cell{}, false
}

// expandRows splits a partition into its CQL rows, in storage order. A
// table without clustering columns has one row, the partition itself.
func expandRows(t *tableInfo, r row.Row) ([]crow, error) {
	if len(t.ck) == 0 {
		return []crow{{key: r.Key, cells: r.Cells}}, nil
	}
	desc := t.def.ClusteringDesc()
	static := row.StaticPrefix(desc)
	var out []crow
	var statics []row.Cell
	for _, c := range r.Cells {
		prefix, col, err := row.ClusteringPrefix(c.Column, desc)
		if err != nil {
			return nil, frame.Errorf(frame.ErrServer, "cell %x of %s.%s: %v", c.Column, t.keyspace, t.name, err)
		}
		if prefix == static {
			c.Column = col
			statics = append(statics, c)
			continue
		}
		if len(out) == 0 || out[len(out)-1].prefix != prefix {
			keys, err := row.Components(prefix, desc)
			if err != nil {
				return nil, frame.Errorf(frame.ErrServer, "cell %x of %s.%s: %v", c.Column, t.keyspace, t.name, err)
			}
			vals := make([][]byte, len(keys))
			for i, k := range keys {
				vals[i] = fromOrderKey(t.ck[i], k)
			}
			out = append(out, crow{key: r.Key, ck: vals, ckKeys: keys, prefix: prefix})
		}
		c.Column = col
		last := &out[len(out)-1]
		last.cells = append(last.cells, c)
	}
	if len(statics) > 0 {
		if len(out) == 0 {
			out = append(out, crow{key: r.Key, ck: make([][]byte, len(t.ck)), staticOnly: true})
		}
		for i := range out {
			out[i].statics = statics
		}
	}
	return out, nil
}

// ckBound is one end of a slice of a clustering column.
type ckBound struct {
	key       []byte
	inclusive bool
}

// ckRestriction restricts one clustering column: to a set of values (EQ,
// IN), or to a slice.
type ckRestriction struct {
	eq     [][]byte // order keys; nil when a slice
	lo, hi *ckBound
}

func (r *ckRestriction) match(k []byte) bool {
	if r.eq != nil {
		for _, e := range r.eq {
			if bytes.Equal(e, k) {
				return true
			}
		}
		return false
	}
	if r.lo != nil {
		if c := bytes.Compare(k, r.lo.key); c < 0 || (c == 0 && !r.lo.inclusive) {
			return false
		}
	}
	if r.hi != nil {
		if c := bytes.Compare(k, r.hi.key); c > 0 || (c == 0 && !r.hi.inclusive) {
			return false
		}
	}
	return true
}

// ckFilter is the clustering restrictions of a statement, by column
// position (nil: unrestricted).
type ckFilter []*ckRestriction

func (f ckFilter) match(r *crow) bool {
	if r.staticOnly {
		// No clustering row: it matches when nothing restricts one.
		for _, x := range f {
			if x != nil {
				return false
			}
		}
		return true
	}
	for i, x := range f {
		if x != nil && i < len(r.ckKeys) && !x.match(r.ckKeys[i]) {
			return false
		}
	}
	return true
}

// clusteringFilter checks the relations on clustering columns as
// Cassandra does (a column is restricted only if the ones before it are,
// by equality; a slice only on the last restricted column) and binds them.
// allowFiltering lifts the first rule, as Cassandra's ALLOW FILTERING does.
func clusteringFilter(t *tableInfo, rels []parse.Relation, values []frame.Value, allowFiltering bool) (ckFilter, error) {
	f := make(ckFilter, len(t.ck))
	for _, r := range rels {
		c := t.cols[r.Column]
		i := c.ckPos - 1
		if f[i] == nil {
			f[i] = &ckRestriction{}
		}
		x := f[i]
		bindKey := func(term parse.Term) ([]byte, error) {
			v, err := bind(term, values, c.typ, c.name)
			if err != nil {
				return nil, err
			}
			if err := requireKeyValue(c, v); err != nil {
				return nil, err
			}
			return orderKey(c, v.Bytes)
		}
		switch r.Op {
		case "=", "IN":
			if x.eq != nil || x.lo != nil || x.hi != nil {
				return nil, invalid("%s cannot be restricted by more than one relation if it includes an Equal", c.name)
			}
			terms := []parse.Term{r.Value}
			if r.Op == "IN" {
				if !r.InList {
					return nil, invalid("IN ? on a clustering column is not supported by idemkv; bind each value: IN (?, ?)")
				}
				terms = r.In
			}
			x.eq = [][]byte{}
			for _, term := range terms {
				k, err := bindKey(term)
				if err != nil {
					return nil, err
				}
				x.eq = append(x.eq, k)
			}
		case ">", ">=", "<", "<=":
			if x.eq != nil {
				return nil, invalid("%s cannot be restricted by both an equality and an inequality relation", c.name)
			}
			k, err := bindKey(r.Value)
			if err != nil {
				return nil, err
			}
			b := &ckBound{key: k, inclusive: strings.HasSuffix(r.Op, "=")}
			if r.Op[0] == '>' {
				if x.lo != nil {
					return nil, invalid("More than one restriction was found for the start bound on %s", c.name)
				}
				x.lo = b
			} else {
				if x.hi != nil {
					return nil, invalid("More than one restriction was found for the end bound on %s", c.name)
				}
				x.hi = b
			}
		default:
			return nil, invalid("Unsupported \"%s\" relation on clustering column %s", r.Op, c.name)
		}
	}
	if !allowFiltering {
		for i := 1; i < len(f); i++ {
			if f[i] == nil {
				continue
			}
			if f[i-1] == nil {
				return nil, invalid("PRIMARY KEY column \"%s\" cannot be restricted as preceding column \"%s\" is not restricted", t.ck[i].name, t.ck[i-1].name)
			}
			if f[i-1].eq == nil {
				return nil, invalid("Clustering column \"%s\" cannot be restricted (preceding column \"%s\" is restricted by a non-EQ relation)", t.ck[i].name, t.ck[i-1].name)
			}
		}
	}
	return f, nil
}

// noClustering is the prefixes of a table without clustering columns,
// shared: its users only read it, and an append copies it (capacity 1).
var noClustering = []string{""}

// clusteringPrefixes binds the clustering restrictions of an UPDATE or of
// a row DELETE: every clustering column by equality (or IN), as Cassandra
// requires; it returns the composite prefixes of the rows, in order. A
// table without clustering columns has the one prefix "".
func clusteringPrefixes(t *tableInfo, f ckFilter) ([]string, error) {
	if len(t.ck) == 0 {
		return noClustering[:1:1], nil
	}
	var missing []string
	for i, x := range f {
		if x == nil || x.eq == nil {
			missing = append(missing, t.ck[i].name)
		}
	}
	if len(missing) > 0 {
		return nil, invalid("Some clustering keys are missing: %s", strings.Join(missing, ", "))
	}
	prefixes := [][]byte{nil}
	for i, x := range f {
		var next [][]byte
		for _, p := range prefixes {
			for _, k := range x.eq {
				next = append(next, row.AppendComponent(bytes.Clone(p), k, t.ck[i].desc))
			}
		}
		if len(next) > math.MaxUint16 {
			return nil, invalid("IN restrictions give more than %d clustering keys", math.MaxUint16)
		}
		prefixes = next
	}
	out := make([]string, 0, len(prefixes))
	seen := map[string]bool{}
	for _, p := range prefixes {
		if !seen[string(p)] {
			seen[string(p)] = true
			out = append(out, string(p))
		}
	}
	return out, nil
}

// restricted reports whether any clustering column is restricted.
func (f ckFilter) restricted() bool {
	for _, x := range f {
		if x != nil {
			return true
		}
	}
	return false
}

// staticPrefix is the prefix of a table's static cells ("" without
// clustering columns).
func staticPrefix(t *tableInfo) string { return row.StaticPrefix(t.def.ClusteringDesc()) }

// onlyStatic reports whether every column a statement sets is static (it
// then names no clustering row).
func onlyStatic(t *tableInfo, names []string) bool {
	if len(t.ck) == 0 || len(names) == 0 {
		return false
	}
	for _, n := range names {
		if c := t.cols[n]; c == nil || !c.static {
			return false
		}
	}
	return true
}

// checkStaticOnly refuses clustering restrictions on a statement that
// modifies only static columns, with Cassandra's message.
func checkStaticOnly(ck []parse.Relation, stmt string) error {
	if len(ck) > 0 {
		return invalid("Invalid restrictions on clustering columns since the %s statement modifies only static columns", stmt)
	}
	return nil
}

// fullPrefix reports whether a filter names whole rows: every clustering
// column by equality.
func (f ckFilter) fullPrefix() bool {
	for _, x := range f {
		if x == nil || x.eq == nil {
			return false
		}
	}
	return true
}
