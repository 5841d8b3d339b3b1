package exec

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// column is a column of a table as the executor sees it.
type column struct {
	name    string
	typ     frame.DataType
	cqlType string // the type as CQL writes it: "text", "counter", ...
	pkIndex int    // position in the partition key; -1 for other columns
	// ckPos is 1 + the position in the clustering key; 0 for other columns.
	ckPos int
	desc  bool // a clustering column in descending order
	// regular marks a regular (non-counter) column; multiCell a
	// non-frozen collection, stored element by element.
	regular   bool
	multiCell bool
	static    bool // a static column: one value per partition
	// droppedAt hides the cells of a regular column written before a
	// drop of its name (microseconds; 0: never dropped).
	droppedAt int64
}

// isKey reports whether the column is part of the primary key.
func (c *column) isKey() bool { return c.pkIndex >= 0 || c.ckPos > 0 }

// tableInfo is a resolved table: a user's counter table or a system table.
type tableInfo struct {
	keyspace, name string
	id             uint64
	def            coltype.TableDef
	pk             []*column
	ck             []*column // the clustering columns, in order
	regular        []*column // sorted by name, as Cassandra orders them
	cols           map[string]*column
	sys            *sysTable // non-nil for a system table
	// regularTable: a table of regular columns (or of its key alone),
	// not of counters.
	regularTable bool
}

// all returns the columns in SELECT * order.
func (t *tableInfo) all() []*column {
	return append(append(append([]*column(nil), t.pk...), t.ck...), t.regular...)
}

func (t *tableInfo) spec(c *column) frame.ColumnSpec {
	return frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: c.name, Type: c.typ}
}

func (t *tableInfo) column(name string) (*column, error) {
	c, ok := t.cols[name]
	if !ok {
		return nil, invalid("Undefined column name %s", name)
	}
	return c, nil
}

// keyTypes are the partition key types idemkv serves, by CQL name.
var keyTypes = map[string]frame.DataType{
	"text": frame.Text, "varchar": frame.Text, "ascii": {ID: frame.TypeASCII},
	"int": frame.Int, "bigint": frame.Bigint, "uuid": frame.UUID, "timeuuid": frame.TimeUUID, "blob": frame.Blob,
}

// columnDesign is the registered column type of a counter column (nil for
// a key column or an unknown type).
func columnDesign(c *column) coltype.ColumnType {
	t, _ := coltype.Lookup(c.cqlType)
	return t
}

// valueType is the CQL type drivers see for a column of a registered
// counter design (its coltype.CQL capability): counter unless it says
// bigint.
func valueType(design string) frame.DataType {
	if t, ok := coltype.Lookup(design); ok && coltype.CQLTypeOf(t) == "bigint" {
		return frame.Bigint
	}
	if t, ok := coltype.Lookup(design); ok {
		if _, isMap := t.(coltype.CounterMap); isMap {
			return mapValueType
		}
	}
	return frame.Counter
}

// isCounterType reports whether a CQL type name is a registered counter
// design (see package coltype): the column types a counter table holds.
func isCounterType(name string) bool {
	_, ok := coltype.Lookup(name)
	return ok
}

func newTableInfo(def coltype.TableDef) *tableInfo {
	t := &tableInfo{keyspace: def.Keyspace, name: def.Name, id: def.ID, def: def, cols: map[string]*column{}}
	for i, k := range def.PartitionKey {
		typ, ok := keyTypes[k.Type]
		if !ok {
			if typ, ok = nativeTypes[k.Type]; !ok {
				if typ, ok = customType(k.Type); !ok {
					typ = frame.Blob
				}
			}
		}
		c := &column{name: k.Name, typ: typ, cqlType: k.Type, pkIndex: i}
		t.pk = append(t.pk, c)
		t.cols[c.name] = c
	}
	if len(t.pk) == 0 { // a table created below the CQL layer: one blob key
		c := &column{name: "key", typ: frame.Blob, cqlType: "blob"}
		t.pk = append(t.pk, c)
		t.cols[c.name] = c
	}
	for i, k := range def.Clustering {
		typ, ok := clusteringTypes[k.Type]
		if !ok {
			if typ, ok = customType(k.Type); !ok {
				typ = frame.Blob
			}
		}
		c := &column{name: k.Name, typ: typ, cqlType: k.Type, pkIndex: -1, ckPos: i + 1, desc: k.Desc}
		t.ck = append(t.ck, c)
		t.cols[c.name] = c
	}
	t.regularTable = len(def.PartitionKey) > 0 && def.HasRegularColumns()
	for _, col := range def.Columns {
		if col.Type == coltype.RegularType {
			ti := storedType(col.CQL)
			c := &column{name: col.Name, typ: ti.dt, cqlType: col.CQL, pkIndex: -1, regular: true, multiCell: ti.multiCell, static: col.Static}
			for _, d := range def.Dropped {
				if d.Name == col.Name {
					c.droppedAt = d.DroppedAt
				}
			}
			t.regular = append(t.regular, c)
			t.cols[c.name] = c
			continue
		}
		c := &column{name: col.Name, typ: valueType(col.Type), cqlType: col.Type, pkIndex: -1, static: col.Static}
		t.regular = append(t.regular, c)
		t.cols[c.name] = c
	}
	// Static columns first, then the others, each by name: Cassandra's
	// SELECT * order.
	sort.Slice(t.regular, func(i, j int) bool {
		if t.regular[i].static != t.regular[j].static {
			return t.regular[i].static
		}
		return t.regular[i].name < t.regular[j].name
	})
	return t
}

// resolve finds a table, in the statement's keyspace or the session's.
func (e *Executor) resolve(sessionKS string, tn parse.TableName) (*tableInfo, error) {
	ks := tn.Keyspace
	if ks == "" {
		ks = sessionKS
	}
	if ks == "" {
		return nil, invalid("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
	}
	if isSystemKeyspace(ks) {
		st := e.systemTable(ks, tn.Name)
		if st == nil {
			return nil, invalid("unconfigured table %s", tn.Name)
		}
		return st.info(), nil
	}
	def, ok := e.b.Schema().Table(ks, tn.Name)
	if !ok {
		if _, ok := e.b.Schema().Visible().Keyspaces[ks]; !ok {
			return nil, invalid("Keyspace %s does not exist", ks)
		}
		return nil, invalid("unconfigured table %s", tn.Name)
	}
	return e.tableInfoOf(def), nil
}

// tableKey names one version of a table's definition.
type tableKey struct{ id, revision uint64 }

// tableInfoOf returns the resolved table of a definition, built once per
// version of it (tableInfos are never changed once built).
func (e *Executor) tableInfoOf(def coltype.TableDef) *tableInfo {
	k := tableKey{def.ID, def.Revision}
	e.tablesMu.RLock()
	t, ok := e.tables[k]
	e.tablesMu.RUnlock()
	if ok {
		return t
	}
	t = newTableInfo(def)
	e.tablesMu.Lock()
	if len(e.tables) >= 4096 {
		clear(e.tables) // dropped and altered tables' versions
	}
	e.tables[k] = t
	e.tablesMu.Unlock()
	return t
}

// run executes a parsed statement with its parameters.
func (e *Executor) run(ctx context.Context, s *cql.Session, ks string, st parse.Statement, p frame.QueryParams, payload, reply map[string][]byte) (frame.Result, error) {
	if n := parse.Markers(st); n != len(p.Values) {
		return nil, invalid("There were %d markers(?) in CQL but %d bound variables", n, len(p.Values))
	}
	switch st := st.(type) {
	case *parse.Use:
		return e.use(s, st)
	case *parse.CreateKeyspace:
		return e.createKeyspace(ctx, st)
	case *parse.DropKeyspace:
		return e.dropKeyspace(ctx, st)
	case *parse.CreateTable:
		return e.createTable(ctx, ks, st)
	case *parse.DropTable:
		return e.dropTable(ctx, ks, st)
	case *parse.AlterTable:
		return e.alterTable(ctx, ks, st)
	case *parse.Truncate:
		return e.truncate(ctx, ks, st)
	case *parse.Unsupported:
		return nil, invalid("idemkv does not support %s (%s)", st.Feature, st.Statement)
	case *parse.Select:
		r, err := e.selectRows(ctx, ks, st, p, payload, reply)
		if err != nil || !st.JSON {
			return r, err
		}
		return jsonRows(r)
	case *parse.Update, *parse.Delete, *parse.Insert:
		err := e.runBatch(ctx, -1, nil, []batchItem{{keyspace: ks, stmt: st, values: p.Values}}, p.Consistency, clientTimestamp(p), payload, reply)
		if err != nil {
			return nil, err
		}
		return frame.VoidResult{}, nil
	case *parse.Batch:
		// The markers of a batch are numbered across its statements;
		// every statement binds from the same values.
		items := make([]batchItem, len(st.Statements))
		for i, x := range st.Statements {
			items[i] = batchItem{keyspace: ks, stmt: x, values: p.Values}
		}
		if err := e.runBatch(ctx, st.Type, st.Using, items, p.Consistency, clientTimestamp(p), payload, reply); err != nil {
			return nil, err
		}
		return frame.VoidResult{}, nil
	}
	return nil, invalid("unsupported statement %T", st)
}

// clientTimestamp is a request's default timestamp (microseconds), 0 when
// it sets none.
func clientTimestamp(p frame.QueryParams) int64 {
	if p.HasTimestamp {
		return p.Timestamp
	}
	return 0
}

// describe returns a statement's bind variables, the positions of its
// partition key's markers and the columns of its result rows.
func (e *Executor) describe(ks string, st parse.Statement) (params []frame.ColumnSpec, pk []uint16, result []frame.ColumnSpec, err error) {
	params = make([]frame.ColumnSpec, parse.Markers(st))
	pk, err = e.describeInto(ks, st, params)
	if err != nil {
		return nil, nil, nil, err
	}
	if sel, ok := st.(*parse.Select); ok {
		t, err := e.resolve(ks, sel.Table)
		if err != nil {
			return nil, nil, nil, err
		}
		if _, result, err = selection(t, sel); err != nil {
			return nil, nil, nil, err
		}
		if sel.JSON {
			result = []frame.ColumnSpec{jsonColumn(result)}
		}
	}
	for i, p := range params {
		if p.Name == "" { // a marker in a place that names none
			params[i] = frame.ColumnSpec{Keyspace: ks, Name: "[" + strconv.Itoa(i) + "]", Type: frame.Blob}
		}
	}
	return params, pk, result, nil
}

func (e *Executor) describeInto(ks string, st parse.Statement, params []frame.ColumnSpec) ([]uint16, error) {
	var mark func(t parse.Term, spec frame.ColumnSpec)
	mark = func(t parse.Term, spec frame.ColumnSpec) {
		if t.Kind == parse.TermMarker && t.Marker < len(params) {
			if t.Name != "" {
				spec.Name = t.Name
			}
			params[t.Marker] = spec
		}
		// The markers inside a literal take its elements' types.
		elem := func(typ frame.DataType) frame.ColumnSpec {
			s := spec
			s.Type = typ
			return s
		}
		switch {
		case t.Kind == parse.TermTuple && spec.Type.ID == frame.TypeTuple:
			for i, e := range t.Elems {
				if i < len(spec.Type.Elems) {
					mark(e, elem(spec.Type.Elems[i]))
				}
			}
		case (t.Kind == parse.TermList || t.Kind == parse.TermSet) && len(spec.Type.Elems) > 0:
			for _, e := range t.Elems {
				mark(e, elem(spec.Type.Elems[0]))
			}
		case t.Kind == parse.TermMap && spec.Type.ID == frame.TypeMap && len(spec.Type.Elems) == 2:
			for _, e := range t.Map {
				mark(e.Key, elem(spec.Type.Elems[0]))
				mark(e.Value, elem(spec.Type.Elems[1]))
			}
		}
	}
	using := func(t *tableInfo, us []parse.UsingOption) {
		for _, u := range us {
			if u.TTL {
				mark(u.Value, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "[ttl]", Type: frame.Int})
			} else {
				mark(u.Value, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "[timestamp]", Type: frame.Bigint})
			}
		}
	}
	where := func(t *tableInfo, rs []parse.Relation) ([]uint16, error) {
		pk := make([]int, len(t.pk))
		for i := range pk {
			pk[i] = -1
		}
		for _, r := range rs {
			if len(r.Token) > 0 {
				if err := checkTokenColumns(t, r.Token); err != nil {
					return nil, err
				}
				mark(r.Value, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: tokenMarkerName, Type: frame.Bigint})
				continue
			}
			c, err := t.column(r.Column)
			if err != nil {
				return nil, err
			}
			spec := t.spec(c)
			switch {
			case r.Op == "IN" && r.InList:
				// Cassandra routes IN (?, ?) by its last marker.
				for _, v := range r.In {
					mark(v, spec)
					if c.pkIndex >= 0 && v.Kind == parse.TermMarker {
						pk[c.pkIndex] = v.Marker
					}
				}
			case r.Op == "IN":
				spec.Name = "in(" + c.name + ")"
				spec.Type = frame.ListOf(c.typ)
				mark(r.Value, spec)
			case (r.Op == "CONTAINS" || r.Op == "CONTAINS KEY") && isCollection(c.typ):
				spec.Type = c.typ.Elems[0]
				if r.Op == "CONTAINS" && c.typ.ID == frame.TypeMap {
					spec.Type = c.typ.Elems[1]
				}
				mark(r.Value, spec)
			default:
				mark(r.Value, spec)
				if r.Op == "=" && c.pkIndex >= 0 && r.Value.Kind == parse.TermMarker {
					pk[c.pkIndex] = r.Value.Marker
				}
			}
		}
		var out []uint16
		for _, m := range pk {
			if m < 0 {
				return nil, nil // routing needs every part bound by a marker
			}
			out = append(out, uint16(m))
		}
		return out, nil
	}
	switch st := st.(type) {
	case *parse.Select:
		t, err := e.resolve(ks, st.Table)
		if err != nil {
			return nil, err
		}
		for _, s := range st.Selectors {
			if s.Element != nil {
				if c, ok := t.cols[s.Column]; ok {
					spec := keySpec(t, c)
					if c.regular && c.typ.ID == frame.TypeMap {
						spec.Type = c.typ.Elems[0]
					}
					mark(*s.Element, spec)
				}
			}
		}
		pk, err := where(t, st.Where)
		if err != nil {
			return nil, err
		}
		if st.PerPartitionLimit != nil {
			mark(*st.PerPartitionLimit, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "[per_partition_limit]", Type: frame.Int})
		}
		if st.Limit != nil {
			mark(*st.Limit, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "[limit]", Type: frame.Int})
		}
		return pk, nil
	case *parse.Update:
		t, err := e.resolve(ks, st.Table)
		if err != nil {
			return nil, err
		}
		check := checkUpdate
		if t.regularTable {
			check = checkRegularUpdate
		}
		if err := check(t, st); err != nil {
			return nil, err
		}
		using(t, st.Using)
		for _, sc := range st.Set {
			c, err := t.column(sc.Column)
			if err != nil {
				return nil, err
			}
			if sc.Element != nil && isCollection(c.typ) {
				if c.typ.ID == frame.TypeMap {
					mark(*sc.Element, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "key(" + c.name + ")", Type: c.typ.Elems[0]})
					mark(sc.Value, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "value(" + c.name + ")", Type: c.typ.Elems[1]})
				} else {
					mark(*sc.Element, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "idx(" + c.name + ")", Type: frame.Int})
					mark(sc.Value, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "value(" + c.name + ")", Type: c.typ.Elems[0]})
				}
				continue
			}
			spec := t.spec(c)
			if sc.Op == '-' && c.typ.ID == frame.TypeMap {
				spec.Type = frame.SetOf(c.typ.Elems[0])
			}
			mark(sc.Value, spec)
			if _, isMap := counterMapOf(c); isMap {
				for _, en := range sc.Value.Map {
					mark(en.Key, keySpec(t, c))
					mark(en.Value, valueSpec(t, c))
				}
			}
		}
		pk, err := where(t, st.Where)
		if err != nil {
			return nil, err
		}
		if _, err := where(t, st.Conditions); err != nil {
			return nil, err
		}
		return pk, nil
	case *parse.Delete:
		t, err := e.resolve(ks, st.Table)
		if err != nil {
			return nil, err
		}
		check := checkDelete
		if t.regularTable {
			check = checkRegularDelete
		}
		if err := check(t, st); err != nil {
			return nil, err
		}
		for i, e := range st.Elements {
			if e == nil {
				continue
			}
			c := t.cols[st.Columns[i]]
			switch {
			case c.regular && c.typ.ID == frame.TypeMap:
				mark(*e, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "key(" + c.name + ")", Type: c.typ.Elems[0]})
			case c.regular:
				mark(*e, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "idx(" + c.name + ")", Type: frame.Int})
			default:
				mark(*e, keySpec(t, c))
			}
		}
		using(t, st.Using)
		return where(t, st.Where)
	case *parse.Insert:
		t, err := e.resolve(ks, st.Table)
		if err != nil {
			return nil, err
		}
		if !t.regularTable || t.sys != nil {
			return nil, checkInsert(t)
		}
		if st.JSON != nil {
			if st.IfNotExists {
				return nil, lwtRefusal()
			}
			mark(*st.JSON, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: "[json]", Type: frame.Text})
			using(t, st.Using)
			return nil, nil
		}
		if err := checkRegularInsert(t, st); err != nil {
			return nil, err
		}
		using(t, st.Using)
		pk := make([]int, len(t.pk))
		for i := range pk {
			pk[i] = -1
		}
		for i, n := range st.Columns {
			c := t.cols[n]
			mark(st.Values[i], t.spec(c))
			if c.pkIndex >= 0 && st.Values[i].Kind == parse.TermMarker {
				pk[c.pkIndex] = st.Values[i].Marker
			}
		}
		var out []uint16
		for _, m := range pk {
			if m < 0 {
				return nil, nil
			}
			out = append(out, uint16(m))
		}
		return out, nil
	case *parse.Batch:
		for _, x := range st.Statements {
			if _, err := e.describeInto(ks, x, params); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	return nil, nil
}

// cqlTypeName names a type in messages.
func cqlTypeName(t frame.DataType) string {
	switch t.ID {
	case frame.TypeVarchar:
		return "text"
	case frame.TypeASCII:
		return "ascii"
	case frame.TypeInt:
		return "int"
	case frame.TypeBigint:
		return "bigint"
	case frame.TypeCounter:
		return "counter"
	case frame.TypeUUID:
		return "uuid"
	case frame.TypeTimeUUID:
		return "timeuuid"
	case frame.TypeBlob:
		return "blob"
	case frame.TypeBoolean:
		return "boolean"
	case frame.TypeInet:
		return "inet"
	case frame.TypeDouble:
		return "double"
	case frame.TypeTimestamp:
		return "timestamp"
	case frame.TypeMap:
		if len(t.Elems) == 2 {
			return "map<" + cqlTypeName(t.Elems[0]) + ", " + cqlTypeName(t.Elems[1]) + ">"
		}
	case frame.TypeList, frame.TypeSet:
		if len(t.Elems) == 1 {
			return map[frame.TypeID]string{frame.TypeList: "list", frame.TypeSet: "set"}[t.ID] + "<" + cqlTypeName(t.Elems[0]) + ">"
		}
	case frame.TypeTuple:
		parts := make([]string, len(t.Elems))
		for i, e := range t.Elems {
			parts[i] = cqlTypeName(e)
		}
		return "tuple<" + strings.Join(parts, ", ") + ">"
	case frame.TypeSmallint:
		return "smallint"
	case frame.TypeTinyint:
		return "tinyint"
	case frame.TypeFloat:
		return "float"
	case frame.TypeDate:
		return "date"
	case frame.TypeTime:
		return "time"
	case frame.TypeVarint:
		return "varint"
	case frame.TypeDecimal:
		return "decimal"
	}
	return "type " + strconv.Itoa(int(t.ID))
}

var termKindNames = map[parse.TermKind]string{
	parse.TermString: "STRING", parse.TermInt: "INTEGER", parse.TermFloat: "FLOAT", parse.TermBool: "BOOLEAN",
	parse.TermUUID: "UUID", parse.TermBlob: "HEX", parse.TermMap: "MAP", parse.TermList: "LIST", parse.TermSet: "SET", parse.TermTuple: "TUPLE",
}

// bind returns the value of a term for a receiver of type typ: the bound
// value of a marker, or the encoding of a literal.
func bind(t parse.Term, values []frame.Value, typ frame.DataType, col string) (frame.Value, error) {
	switch t.Kind {
	case parse.TermMarker:
		if t.Marker >= len(values) {
			return frame.Value{}, invalid("There were more markers(?) in CQL than bound variables")
		}
		return values[t.Marker], nil
	case parse.TermNull:
		return frame.Null, nil
	}
	bad := func() (frame.Value, error) {
		return frame.Value{}, invalid("Invalid %s constant (%s) for \"%s\" of type %s", termKindNames[t.Kind], t.Text, col, cqlTypeName(typ))
	}
	switch typ.ID {
	case frame.TypeVarchar, frame.TypeASCII:
		if t.Kind != parse.TermString {
			return bad()
		}
		return frame.Bytes([]byte(t.Text)), nil
	case frame.TypeInt:
		if t.Kind != parse.TermInt {
			return bad()
		}
		v, err := strconv.ParseInt(t.Text, 10, 32)
		if err != nil {
			return frame.Value{}, invalid("Unable to make int from '%s'", t.Text)
		}
		return frame.Bytes(frame.EncodeInt(int32(v))), nil
	case frame.TypeBigint, frame.TypeCounter:
		if t.Kind != parse.TermInt {
			return bad()
		}
		v, err := strconv.ParseInt(t.Text, 10, 64)
		if err != nil {
			return frame.Value{}, invalid("Unable to make long from '%s'", t.Text)
		}
		return frame.Bytes(frame.EncodeBigint(v)), nil
	case frame.TypeUUID, frame.TypeTimeUUID:
		if t.Kind != parse.TermUUID {
			return bad()
		}
		b, err := hex.DecodeString(strings.ReplaceAll(t.Text, "-", ""))
		if err != nil || len(b) != 16 {
			return bad()
		}
		return frame.Bytes(b), nil
	case frame.TypeBlob:
		if t.Kind != parse.TermBlob {
			return bad()
		}
		h := t.Text[2:]
		if len(h)%2 == 1 {
			h = "0" + h
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			return bad()
		}
		return frame.Bytes(b), nil
	case frame.TypeBoolean:
		if t.Kind != parse.TermBool {
			return bad()
		}
		return frame.Bytes(frame.EncodeBoolean(t.Text == "true")), nil
	case frame.TypeInet:
		if t.Kind != parse.TermString {
			return bad()
		}
		ip := net.ParseIP(t.Text)
		if ip == nil {
			return frame.Value{}, invalid("Unable to make inet address from '%s'", t.Text)
		}
		return frame.Bytes(frame.EncodeInet(ip)), nil
	case frame.TypeDouble:
		if t.Kind != parse.TermInt && t.Kind != parse.TermFloat {
			return bad()
		}
		f, err := strconv.ParseFloat(t.Text, 64)
		if err != nil {
			return bad()
		}
		return frame.Bytes(frame.EncodeDouble(f)), nil
	}
	if b, ok, err := bindLiteral(t, values, typ, col); ok || err != nil {
		if err != nil {
			return frame.Value{}, err
		}
		return frame.Bytes(b), nil
	}
	return bad()
}

// validateKeyPart checks a partition key component's bytes against its type.
func validateKeyPart(c *column, b []byte) error {
	switch c.typ.ID {
	case frame.TypeInt:
		if len(b) != 4 {
			return invalid("Expected 4 or 0 byte int (%d)", len(b))
		}
	case frame.TypeBigint:
		if len(b) != 8 {
			return invalid("Expected 8 or 0 byte long (%d)", len(b))
		}
	case frame.TypeUUID, frame.TypeTimeUUID:
		if len(b) != 16 {
			return invalid("UUID should be 16 or 0 bytes (%d)", len(b))
		}
		if c.typ.ID == frame.TypeTimeUUID && b[6]>>4 != 1 {
			return invalid("Unsupported UUID version (%d)", b[6]>>4)
		}
	case frame.TypeVarchar:
		if !utf8.Valid(b) {
			return invalid("String didn't validate.")
		}
	case frame.TypeASCII:
		for _, x := range b {
			if x > 127 {
				return invalid("Invalid byte for ascii: %d", x)
			}
		}
	}
	return nil
}

// SerializeKey serializes a partition key as Cassandra does (and gocql's
// token-aware routing computes it): a single column is its value's bytes; a
// composite key is, per component, a uint16 big-endian length, the bytes
// and a 0x00 end-of-component byte.
func SerializeKey(parts [][]byte) ([]byte, error) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	n := 0
	for _, p := range parts {
		if len(p) > math.MaxUint16 {
			return nil, invalid("Key length of %d is longer than maximum of %d", len(p), math.MaxUint16)
		}
		n += 3 + len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = binary.BigEndian.AppendUint16(out, uint16(len(p)))
		out = append(out, p...)
		out = append(out, 0)
	}
	return out, nil
}

// SplitKey is SerializeKey's inverse for a key of n columns.
func SplitKey(key []byte, n int) ([][]byte, bool) {
	if n == 1 {
		return [][]byte{key}, true
	}
	out := make([][]byte, 0, n)
	for len(key) > 0 {
		if len(key) < 2 {
			return nil, false
		}
		l := int(binary.BigEndian.Uint16(key))
		if len(key) < 3+l || key[2+l] != 0 {
			return nil, false
		}
		out = append(out, key[2:2+l])
		key = key[3+l:]
	}
	return out, len(out) == n
}

// oneKeyColumn holds the terms of a one-column partition key (most
// tables') and its equality's term, in one allocation.
type oneKeyColumn struct {
	terms [1][]parse.Term
	eq    [1]parse.Term
}

// keyTermsFor returns the terms of n partition key columns, all nil, and n
// terms for their equalities.
func keyTermsFor(n int) (terms [][]parse.Term, eq []parse.Term) {
	if n != 1 {
		return make([][]parse.Term, n), make([]parse.Term, n)
	}
	k := new(oneKeyColumn)
	return k.terms[:], k.eq[:]
}

// keyRestrictions checks a WHERE clause that must name the whole partition
// key by equality (or, when in is true, IN) and otherwise only clustering
// columns, and returns each key column's terms and the relations on
// clustering columns.
func keyRestrictions(t *tableInfo, rs []parse.Relation, in bool) ([][]parse.Term, []parse.Relation, error) {
	terms, eq := keyTermsFor(len(t.pk))
	var nonKey []string
	var ck []parse.Relation
	for _, r := range rs {
		if len(r.Token) > 0 {
			return nil, nil, invalid("idemkv supports token() restrictions in SELECT only")
		}
		c, err := t.column(r.Column)
		if err != nil {
			return nil, nil, err
		}
		if c.ckPos > 0 {
			ck = append(ck, r)
			continue
		}
		if c.pkIndex < 0 {
			nonKey = append(nonKey, c.name)
			continue
		}
		if terms[c.pkIndex] != nil {
			return nil, nil, invalid("%s cannot be restricted by more than one relation if it includes an Equal", c.name)
		}
		switch {
		case r.Op == "=":
			i := c.pkIndex
			eq[i] = r.Value
			terms[i] = eq[i : i+1 : i+1]
		case r.Op == "IN" && in && r.InList:
			if len(r.In) == 0 {
				terms[c.pkIndex] = []parse.Term{}
			} else {
				terms[c.pkIndex] = r.In
			}
		case r.Op == "IN" && in:
			return nil, nil, invalid("IN ? on the partition key is not supported by idemkv; bind each value: IN (?, ?)")
		case r.Op == "IN":
			return nil, nil, invalid("IN restrictions on the partition key are not supported for updates by idemkv")
		default:
			return nil, nil, invalid("Only EQ and IN relation are supported on the partition key (unless you use the token() function)")
		}
	}
	if len(nonKey) > 0 {
		return nil, nil, invalid("Non PRIMARY KEY columns found in where clause: %s", strings.Join(nonKey, ", "))
	}
	var missing []string
	for i, ts := range terms {
		if ts == nil {
			missing = append(missing, t.pk[i].name)
		}
	}
	if len(missing) > 0 {
		return nil, nil, invalid("Some partition key parts are missing: %s", strings.Join(missing, ", "))
	}
	return terms, ck, nil
}

// bindKeyPart binds one term of a partition key column.
func bindKeyPart(c *column, term parse.Term, values []frame.Value) ([]byte, error) {
	v, err := bind(term, values, c.typ, c.name)
	if err != nil {
		return nil, err
	}
	if err := requireKeyValue(c, v); err != nil {
		return nil, err
	}
	if err := validateKeyPart(c, v.Bytes); err != nil {
		return nil, err
	}
	return v.Bytes, nil
}

// requireKeyValue refuses an unset or null value for a primary key column,
// with Cassandra's messages.
func requireKeyValue(c *column, v frame.Value) error {
	switch {
	case v.Unset:
		return invalid("Invalid unset value for column %s", c.name)
	case v.Null || v.Bytes == nil:
		return invalid("Invalid null value in condition for column %s", c.name)
	}
	return nil
}

// checkedKey serializes a partition key's components and checks the key
// as Cassandra does: its length, and that it is not empty.
func checkedKey(comp [][]byte) ([]byte, error) {
	k, err := SerializeKey(comp)
	if err != nil {
		return nil, err
	}
	if err := checkKeyLength(k); err != nil {
		return nil, err
	}
	if len(k) == 0 {
		return nil, invalid("Key may not be empty")
	}
	return k, nil
}

// oneKey is keys for restrictions that name one partition (one term per
// key column, every single-partition statement), without the cartesian
// product's bookkeeping: it reports false when they name several or none.
func oneKey(t *tableInfo, terms [][]parse.Term, values []frame.Value) ([]byte, bool, error) {
	var buf [4][]byte
	comp := buf[:0]
	for _, ts := range terms {
		if len(ts) != 1 {
			return nil, false, nil
		}
	}
	for i, ts := range terms {
		b, err := bindKeyPart(t.pk[i], ts[0], values)
		if err != nil {
			return nil, true, err
		}
		comp = append(comp, b)
	}
	k, err := checkedKey(comp)
	return k, true, err
}

// keys binds key restrictions to serialized partition keys: the cartesian
// product of IN lists without duplicates, sorted by the key types' order
// as Cassandra returns the partitions of IN (compareKeys).
func keys(t *tableInfo, terms [][]parse.Term, values []frame.Value) ([][]byte, error) {
	if k, ok, err := oneKey(t, terms, values); err != nil {
		return nil, err
	} else if ok {
		return [][]byte{k}, nil
	}
	parts := make([][][]byte, len(t.pk))
	total := 1
	for i, ts := range terms {
		c := t.pk[i]
		for _, term := range ts {
			b, err := bindKeyPart(c, term, values)
			if err != nil {
				return nil, err
			}
			parts[i] = append(parts[i], b)
		}
		total *= len(parts[i])
		if total > 1000 {
			return nil, invalid("IN restrictions give more than 1000 partition keys")
		}
	}
	type key struct {
		comp [][]byte
		ser  []byte
	}
	found := make([]key, 0, min(total, 16))
	seen := map[string]bool{}
	idx := make([]int, len(parts))
	for total > 0 {
		comp := make([][]byte, len(parts))
		for i := range parts {
			comp[i] = parts[i][idx[i]]
		}
		k, err := checkedKey(comp)
		if err != nil {
			return nil, err
		}
		if !seen[string(k)] {
			seen[string(k)] = true
			found = append(found, key{comp, k})
		}
		i := len(idx) - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < len(parts[i]) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			break
		}
	}
	if len(found) > 1 { // one key (every single-partition statement): nothing to order
		sort.SliceStable(found, func(i, j int) bool { return compareKeys(t, found[i].comp, found[j].comp) < 0 })
	}
	out := make([][]byte, len(found))
	for i, k := range found {
		out[i] = k.ser
	}
	return out, nil
}
