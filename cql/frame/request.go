package frame

// Query parameter flags (QUERY, EXECUTE; BATCH uses serial, timestamp and
// names).
const (
	QueryValues            byte = 0x01
	QuerySkipMetadata      byte = 0x02
	QueryPageSize          byte = 0x04
	QueryPagingState       byte = 0x08
	QuerySerialConsistency byte = 0x10
	QueryDefaultTimestamp  byte = 0x20
	QueryNamesForValues    byte = 0x40
)

// minValueSize is the least a [value] takes on the wire: its [int] length.
const minValueSize = 4

// queryParams reads <query_parameters> (spec §4.1.4).
func (d *decoder) queryParams(v byte) QueryParams {
	var p QueryParams
	p.Consistency = Consistency(d.short("consistency"))
	flags := d.byte_("query flags")
	if flags&QueryValues != 0 {
		named := flags&QueryNamesForValues != 0
		min := minValueSize
		if named {
			min += 2
		}
		n := d.count(min, "values")
		if d.err != nil {
			return p
		}
		p.Values = make([]Value, n)
		if named {
			p.Names = make([]string, n)
		}
		for i := range n {
			if named {
				p.Names[i] = d.string_("value name")
			}
			p.Values[i] = d.value(v, "value")
		}
	}
	p.SkipMetadata = flags&QuerySkipMetadata != 0
	if flags&QueryPageSize != 0 {
		p.PageSize = d.int_("page size")
	}
	if flags&QueryPagingState != 0 {
		p.PagingState = d.bytes_("paging state")
	}
	if flags&QuerySerialConsistency != 0 {
		p.SerialConsistency = Consistency(d.short("serial consistency"))
		p.HasSerial = true
	}
	if flags&QueryDefaultTimestamp != 0 {
		p.Timestamp = d.long("timestamp")
		p.HasTimestamp = true
	}
	return p
}

// queryParams writes <query_parameters>; the flags follow from the fields:
// values when Values is non-nil, names when Names is non-nil, page size when
// PageSize > 0, paging state when PagingState is non-nil.
func (e *encoder) queryParams(v byte, p *QueryParams) {
	e.short(uint16(p.Consistency))
	var flags byte
	if p.Values != nil {
		flags |= QueryValues
		if p.Names != nil {
			flags |= QueryNamesForValues
		}
	}
	if p.SkipMetadata {
		flags |= QuerySkipMetadata
	}
	if p.PageSize > 0 {
		flags |= QueryPageSize
	}
	if p.PagingState != nil {
		flags |= QueryPagingState
	}
	if p.HasSerial {
		flags |= QuerySerialConsistency
	}
	if p.HasTimestamp {
		flags |= QueryDefaultTimestamp
	}
	e.byte_(flags)
	if flags&QueryValues != 0 {
		e.values(p.Values, p.Names)
	}
	if flags&QueryPageSize != 0 {
		e.int_(p.PageSize)
	}
	if flags&QueryPagingState != 0 {
		e.bytes_(p.PagingState)
	}
	if p.HasSerial {
		e.short(uint16(p.SerialConsistency))
	}
	if p.HasTimestamp {
		e.long(p.Timestamp)
	}
}

func (e *encoder) values(vals []Value, names []string) {
	e.shortLen(len(vals), "values")
	for i, x := range vals {
		if names != nil {
			name := ""
			if i < len(names) {
				name = names[i]
			}
			e.string_(name)
		}
		e.value(x)
	}
}

// decodeBatch reads a BATCH body (spec §4.1.7). Its flags come after the
// statements, yet say whether each value is preceded by a name, so the body
// is read both ways: a reading counts if its flags agree with it, and one
// that ends exactly at the end of the body is preferred. (With non-empty
// names and a body under 64 KiB, only the right reading can succeed: a
// name's [short] length read as part of an [int] value length makes that
// length at least 65536.)
func decodeBatch(d *decoder, v byte) *Batch {
	start := *d
	plain, flags := decodeBatchOnce(d, v, false)
	plainOK := d.err == nil && flags&QueryNamesForValues == 0
	plainEnd := *d
	if plainOK && len(d.b) == 0 {
		return plain
	}
	*d = start
	named, flags := decodeBatchOnce(d, v, true)
	if d.err == nil && flags&QueryNamesForValues != 0 {
		return named
	}
	*d = plainEnd
	if plainOK {
		return plain
	}
	if d.err == nil {
		d.fail("batch values are not named as the flags say")
	}
	return nil
}

func decodeBatchOnce(d *decoder, v byte, named bool) (*Batch, byte) {
	b := &Batch{Type: BatchType(d.byte_("batch type"))}
	if d.err == nil && b.Type > BatchCounter {
		d.fail("invalid batch type %d", b.Type)
	}
	// A statement takes at least a kind byte, a [short] id length and a
	// [short] value count.
	n := d.count(5, "batch statements")
	if d.err != nil {
		return nil, 0
	}
	b.Statements = make([]BatchStatement, n)
	for i := range b.Statements {
		s := &b.Statements[i]
		switch kind := d.byte_("batch statement kind"); {
		case d.err != nil:
			return nil, 0
		case kind == 0:
			s.Query = d.longString("batch query")
		case kind == 1:
			s.PreparedID = d.shortBytes("batch prepared id")
		default:
			d.fail("invalid query kind in BATCH messages: must be 0 or 1 but got %d", kind)
			return nil, 0
		}
		min := minValueSize
		if named {
			min += 2
		}
		nv := d.count(min, "batch values")
		if d.err != nil {
			return nil, 0
		}
		s.Values = make([]Value, nv)
		if named {
			s.Names = make([]string, nv)
		}
		for j := range nv {
			if named {
				s.Names[j] = d.string_("value name")
			}
			s.Values[j] = d.value(v, "batch value")
		}
	}
	b.Consistency = Consistency(d.short("consistency"))
	flags := d.byte_("batch flags")
	if flags&QuerySerialConsistency != 0 {
		b.SerialConsistency = Consistency(d.short("serial consistency"))
		b.HasSerial = true
	}
	if flags&QueryDefaultTimestamp != 0 {
		b.Timestamp = d.long("timestamp")
		b.HasTimestamp = true
	}
	if d.err != nil {
		return nil, 0
	}
	return b, flags
}

// batch writes a BATCH body. Values are named when any statement has
// Names.
func (e *encoder) batch(v byte, b *Batch) {
	named := false
	for i := range b.Statements {
		if b.Statements[i].Names != nil {
			named = true
		}
	}
	e.byte_(byte(b.Type))
	e.shortLen(len(b.Statements), "batch statements")
	for i := range b.Statements {
		s := &b.Statements[i]
		if s.PreparedID != nil {
			e.byte_(1)
			e.shortBytes(s.PreparedID)
		} else {
			e.byte_(0)
			e.longString(s.Query)
		}
		names := s.Names
		if named && names == nil {
			names = []string{}
		}
		e.values(s.Values, names)
	}
	e.short(uint16(b.Consistency))
	var flags byte
	if b.HasSerial {
		flags |= QuerySerialConsistency
	}
	if b.HasTimestamp {
		flags |= QueryDefaultTimestamp
	}
	if named {
		flags |= QueryNamesForValues
	}
	e.byte_(flags)
	if b.HasSerial {
		e.short(uint16(b.SerialConsistency))
	}
	if b.HasTimestamp {
		e.long(b.Timestamp)
	}
}
