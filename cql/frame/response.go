package frame

import "fmt"

// Result metadata flags (spec §4.2.5.2).
const (
	MetaGlobalTablesSpec int32 = 0x0001
	MetaHasMorePages     int32 = 0x0002
	MetaNoMetadata       int32 = 0x0004
)

// Result kinds.
const (
	KindVoid         int32 = 1
	KindRows         int32 = 2
	KindSetKeyspace  int32 = 3
	KindPrepared     int32 = 4
	KindSchemaChange int32 = 5
)

// Kind is a Result's kind number on the wire.
func Kind(r Result) int32 { return r.resultKind() }

// Event types and schema change targets.
const (
	EventTopologyChange = "TOPOLOGY_CHANGE"
	EventStatusChange   = "STATUS_CHANGE"
	EventSchemaChange   = "SCHEMA_CHANGE"

	TargetKeyspace  = "KEYSPACE"
	TargetTable     = "TABLE"
	TargetType      = "TYPE"
	TargetFunction  = "FUNCTION"
	TargetAggregate = "AGGREGATE"
)

// error_ writes an ERROR body: code, message and the code's extra body as
// spec §9 has it for version v.
func (e *encoder) error_(v byte, x *Error) {
	e.int_(int32(x.Code))
	e.string_(x.Message)
	switch x.Code {
	case ErrUnavailable:
		e.short(uint16(x.Consistency))
		e.int_(x.Required)
		e.int_(x.Alive)
	case ErrWriteTimeout:
		e.short(uint16(x.Consistency))
		e.int_(x.Received)
		e.int_(x.BlockFor)
		e.string_(x.WriteType)
	case ErrReadTimeout:
		e.short(uint16(x.Consistency))
		e.int_(x.Received)
		e.int_(x.BlockFor)
		e.byte_(boolByte(x.DataPresent))
	case ErrReadFailure:
		e.short(uint16(x.Consistency))
		e.int_(x.Received)
		e.int_(x.BlockFor)
		if v >= Version4 {
			e.int_(x.NumFailures)
		}
		e.byte_(boolByte(x.DataPresent))
	case ErrWriteFailure:
		e.short(uint16(x.Consistency))
		e.int_(x.Received)
		e.int_(x.BlockFor)
		if v >= Version4 {
			e.int_(x.NumFailures)
		}
		e.string_(x.WriteType)
	case ErrFunctionFailure:
		e.string_(x.Keyspace)
		e.string_(x.Function)
		e.stringList(x.ArgTypes)
	case ErrAlreadyExists:
		e.string_(x.Keyspace)
		e.string_(x.Table)
	case ErrUnprepared:
		e.shortBytes(x.UnknownID)
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func decodeError(d *decoder, v byte) *Error {
	x := &Error{Code: ErrorCode(d.int_("error code"))}
	x.Message = d.string_("error message")
	switch x.Code {
	case ErrUnavailable:
		x.Consistency = Consistency(d.short("consistency"))
		x.Required = d.int_("required")
		x.Alive = d.int_("alive")
	case ErrWriteTimeout:
		x.Consistency = Consistency(d.short("consistency"))
		x.Received = d.int_("received")
		x.BlockFor = d.int_("blockfor")
		x.WriteType = d.string_("write type")
	case ErrReadTimeout:
		x.Consistency = Consistency(d.short("consistency"))
		x.Received = d.int_("received")
		x.BlockFor = d.int_("blockfor")
		x.DataPresent = d.byte_("data present") != 0
	case ErrReadFailure, ErrWriteFailure:
		x.Consistency = Consistency(d.short("consistency"))
		x.Received = d.int_("received")
		x.BlockFor = d.int_("blockfor")
		if v >= Version4 {
			x.NumFailures = d.int_("failures")
		}
		if x.Code == ErrReadFailure {
			x.DataPresent = d.byte_("data present") != 0
		} else {
			x.WriteType = d.string_("write type")
		}
	case ErrFunctionFailure:
		x.Keyspace = d.string_("keyspace")
		x.Function = d.string_("function")
		x.ArgTypes = d.stringList("argument types")
	case ErrAlreadyExists:
		x.Keyspace = d.string_("keyspace")
		x.Table = d.string_("table")
	case ErrUnprepared:
		x.UnknownID = d.shortBytes("unprepared id")
	}
	return x
}

// result writes a RESULT body.
func (e *encoder) result(v byte, r Result) error {
	e.int_(r.resultKind())
	switch r := r.(type) {
	case VoidResult, *VoidResult:
	case RowsResult:
		return e.rows(&r)
	case *RowsResult:
		return e.rows(r)
	case SetKeyspaceResult:
		e.string_(r.Keyspace)
	case *SetKeyspaceResult:
		e.string_(r.Keyspace)
	case PreparedResult:
		e.prepared(v, &r)
	case *PreparedResult:
		e.prepared(v, r)
	case SchemaChangeResult:
		e.schemaChange(&r)
	case *SchemaChangeResult:
		e.schemaChange(r)
	default:
		return fmt.Errorf("frame: cannot encode result %T", r)
	}
	return nil
}

// globalSpec reports whether every column shares one keyspace and table,
// so that the metadata can name them once.
func globalSpec(cols []ColumnSpec) bool {
	if len(cols) == 0 {
		return false
	}
	for i := 1; i < len(cols); i++ {
		if cols[i].Keyspace != cols[0].Keyspace || cols[i].Table != cols[0].Table {
			return false
		}
	}
	return true
}

// columnSpecs writes the column part of metadata, after the flags and
// counts.
func (e *encoder) columnSpecs(cols []ColumnSpec, global bool) {
	if global {
		e.string_(cols[0].Keyspace)
		e.string_(cols[0].Table)
	}
	for i := range cols {
		c := &cols[i]
		if !global {
			e.string_(c.Keyspace)
			e.string_(c.Table)
		}
		e.string_(c.Name)
		e.option(c.Type)
	}
}

// rowsMetadata writes <metadata> of a Rows result (and of a Prepared
// result's result metadata).
func (e *encoder) rowsMetadata(cols []ColumnSpec, ncols int, paging []byte, noMeta bool) {
	var flags int32
	global := !noMeta && globalSpec(cols)
	if global {
		flags |= MetaGlobalTablesSpec
	}
	if paging != nil {
		flags |= MetaHasMorePages
	}
	if noMeta {
		flags |= MetaNoMetadata
	}
	e.int_(flags)
	e.int_(int32(ncols))
	if paging != nil {
		e.bytes_(paging)
	}
	if !noMeta {
		e.columnSpecs(cols, global)
	}
}

func (e *encoder) rows(r *RowsResult) error {
	ncols := len(r.Columns)
	if r.Columns == nil && len(r.Rows) > 0 {
		ncols = len(r.Rows[0])
	}
	e.rowsMetadata(r.Columns, ncols, r.PagingState, r.NoMetadata)
	e.intLen(len(r.Rows), "rows")
	for i, row := range r.Rows {
		if len(row) != ncols {
			return fmt.Errorf("frame: row %d has %d values, the metadata %d columns", i, len(row), ncols)
		}
		for _, c := range row {
			if c.Null || c.Unset {
				e.int_(-1)
				continue
			}
			e.intLen(len(c.Bytes), "cell")
			e.raw(c.Bytes)
		}
	}
	return nil
}

func (e *encoder) prepared(v byte, r *PreparedResult) {
	e.shortBytes(r.ID)
	global := globalSpec(r.Params)
	var flags int32
	if global {
		flags |= MetaGlobalTablesSpec
	}
	e.int_(flags)
	e.int_(int32(len(r.Params)))
	if v >= Version4 {
		e.int_(int32(len(r.PKIndexes)))
		for _, i := range r.PKIndexes {
			e.short(i)
		}
	}
	e.columnSpecs(r.Params, global)
	// A statement without rows has empty result metadata, sent (as
	// Cassandra does) with the No_metadata flag.
	e.rowsMetadata(r.ResultColumns, len(r.ResultColumns), nil, r.ResultColumns == nil)
}

func (e *encoder) schemaChange(s *SchemaChangeResult) {
	e.string_(s.Change)
	e.string_(s.Target)
	e.string_(s.Keyspace)
	switch s.Target {
	case TargetKeyspace:
	case TargetFunction, TargetAggregate:
		e.string_(s.Name)
		e.stringList(nil)
	default:
		e.string_(s.Name)
	}
}

func (e *encoder) event(ev *Event) {
	e.string_(ev.Type)
	switch ev.Type {
	case EventSchemaChange:
		s := ev.Schema
		if s.Change == "" {
			s.Change = ev.Change
		}
		e.schemaChange(&s)
	default:
		e.string_(ev.Change)
		e.inet(ev.IP, ev.Port)
	}
}

// metadata reads result metadata; cols is nil under No_metadata.
func (d *decoder) metadata() (cols []ColumnSpec, ncols int, paging []byte, noMeta bool) {
	flags := d.int_("metadata flags")
	n := d.int_("columns count")
	if d.err == nil && n < 0 {
		d.fail("negative columns count %d", n)
	}
	if flags&MetaHasMorePages != 0 {
		paging = d.bytes_("paging state")
		if paging == nil && d.err == nil {
			paging = []byte{}
		}
	}
	if d.err != nil {
		return nil, 0, nil, false
	}
	if flags&MetaNoMetadata != 0 {
		return nil, int(n), paging, true
	}
	return d.columnSpecs(flags&MetaGlobalTablesSpec != 0, int(n)), int(n), paging, false
}

func (d *decoder) columnSpecs(global bool, n int) []ColumnSpec {
	var ks, table string
	if global {
		ks = d.string_("keyspace")
		table = d.string_("table")
	}
	// A column takes at least a [string] name and a [short] type id.
	if d.err == nil && n*4 > len(d.b) {
		d.fail("%d columns cannot fit in %d bytes", n, len(d.b))
	}
	if d.err != nil || n == 0 {
		return nil
	}
	cols := make([]ColumnSpec, n)
	for i := range cols {
		c := &cols[i]
		if global {
			c.Keyspace, c.Table = ks, table
		} else {
			c.Keyspace = d.string_("keyspace")
			c.Table = d.string_("table")
		}
		c.Name = d.string_("column name")
		c.Type = d.option(0)
		if d.err != nil {
			return nil
		}
	}
	return cols
}

func decodeResult(d *decoder, v byte) Message {
	switch kind := d.int_("result kind"); kind {
	case KindVoid:
		return &VoidResult{}
	case KindRows:
		return decodeRows(d)
	case KindSetKeyspace:
		return &SetKeyspaceResult{Keyspace: d.string_("keyspace")}
	case KindPrepared:
		return decodePrepared(d, v)
	case KindSchemaChange:
		return decodeSchemaChange(d)
	default:
		if d.err == nil {
			d.fail("unknown result kind %d", kind)
		}
		return nil
	}
}

func decodeRows(d *decoder) *RowsResult {
	r := &RowsResult{}
	var ncols int
	r.Columns, ncols, r.PagingState, r.NoMetadata = d.metadata()
	nrows := d.int_("rows count")
	if d.err != nil {
		return nil
	}
	// Every cell takes at least its 4-byte length; divide rather than
	// multiply, so that a forged count cannot overflow the check.
	if nrows < 0 || ncols < 0 || (ncols > 0 && int64(nrows) > int64(len(d.b))/(4*int64(ncols))) || ncols == 0 && nrows > 1<<16 {
		d.fail("%d rows of %d columns cannot fit in %d bytes", nrows, ncols, len(d.b))
		return nil
	}
	if nrows == 0 {
		return r
	}
	r.Rows = make([][]Value, nrows)
	cells := make([]Value, int(nrows)*ncols)
	for i := range r.Rows {
		row := cells[i*ncols : (i+1)*ncols : (i+1)*ncols]
		for j := range row {
			p := d.bytes_("cell")
			if p == nil {
				row[j] = Value{Null: true}
			} else {
				row[j] = Value{Bytes: p}
			}
		}
		r.Rows[i] = row
	}
	if d.err != nil {
		return nil
	}
	return r
}

func decodePrepared(d *decoder, v byte) *PreparedResult {
	r := &PreparedResult{ID: d.shortBytes("prepared id")}
	flags := d.int_("prepared flags")
	n := d.int_("bind count")
	if d.err == nil && n < 0 {
		d.fail("negative bind count %d", n)
	}
	if v >= Version4 {
		npk := d.intCount(2, "pk indexes")
		if d.err != nil {
			return nil
		}
		if npk > 0 {
			r.PKIndexes = make([]uint16, npk)
		}
		for i := range r.PKIndexes {
			r.PKIndexes[i] = d.short("pk index")
		}
	}
	if d.err != nil {
		return nil
	}
	r.Params = d.columnSpecs(flags&MetaGlobalTablesSpec != 0, int(n))
	cols, _, _, noMeta := d.metadata()
	if !noMeta {
		r.ResultColumns = cols
	}
	if d.err != nil {
		return nil
	}
	return r
}

func decodeSchemaChange(d *decoder) *SchemaChangeResult {
	s := &SchemaChangeResult{Change: d.string_("change"), Target: d.string_("target")}
	s.Keyspace = d.string_("keyspace")
	switch s.Target {
	case TargetKeyspace:
	case TargetFunction, TargetAggregate:
		s.Name = d.string_("name")
		d.stringList("argument types")
	default:
		s.Name = d.string_("name")
	}
	return s
}

func decodeEvent(d *decoder) *Event {
	ev := &Event{Type: d.string_("event type")}
	switch ev.Type {
	case EventSchemaChange:
		s := decodeSchemaChange(d)
		ev.Change = s.Change
		ev.Schema = *s
	case EventTopologyChange, EventStatusChange:
		ev.Change = d.string_("change")
		ev.IP, ev.Port = d.inet("address")
	default:
		if d.err == nil {
			d.fail("unknown event type %q", ev.Type)
		}
	}
	return ev
}
