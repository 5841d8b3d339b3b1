package exec

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math"
	"strings"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/cql/trace"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// selected is one item of a resolved selection.
type selected struct {
	col   *column // nil for COUNT(*) and token()
	count bool
	token bool   // token(partition key): the partition's token, a bigint
	fn    string // "writetime" or "ttl" of col
	// elem is the key term of m['key'] (a map of counters' element), and
	// elemKey its value once bound (bindElements).
	elem    *parse.Term
	elemKey string
}

// bindElements binds the map keys of the selected elements.
func bindElements(sel []selected, values []frame.Value) error {
	for i, s := range sel {
		if s.elem == nil {
			continue
		}
		v, err := bind(*s.elem, values, frame.Text, s.col.name)
		if err != nil {
			return err
		}
		if sel[i].elemKey, err = mapKey(s.col, v); err != nil {
			return err
		}
	}
	return nil
}

// selection resolves a SELECT's items and their result columns.
func selection(t *tableInfo, st *parse.Select) ([]selected, []frame.ColumnSpec, error) {
	if len(st.OrderBy) > 0 {
		c, err := t.column(st.OrderBy[0].Column)
		if err != nil {
			return nil, nil, err
		}
		// idemkv tables have no clustering columns, the only ones ORDER BY takes.
		return nil, nil, invalid("Order by is currently only supported on the clustered columns of the PRIMARY KEY, got %s", c.name)
	}
	if st.Distinct {
		if err := checkDistinct(t, st); err != nil {
			return nil, nil, err
		}
	}
	if st.Star {
		var out []selected
		var specs []frame.ColumnSpec
		for _, c := range t.all() {
			out = append(out, selected{col: c})
			specs = append(specs, t.spec(c))
		}
		return out, specs, nil
	}
	var out []selected
	var specs []frame.ColumnSpec
	counts := 0
	for _, s := range st.Selectors {
		if s.Count {
			counts++
			name := "count"
			if s.Alias != "" {
				name = s.Alias
			}
			out = append(out, selected{count: true})
			specs = append(specs, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: name, Type: frame.Bigint})
			continue
		}
		if len(s.Token) > 0 {
			if err := checkTokenColumns(t, s.Token); err != nil {
				return nil, nil, err
			}
			name := tokenColumnName(s.Token)
			if s.Alias != "" {
				name = s.Alias
			}
			out = append(out, selected{token: true})
			specs = append(specs, frame.ColumnSpec{Keyspace: t.keyspace, Table: t.name, Name: name, Type: frame.Bigint})
			continue
		}
		c, err := t.column(s.Column)
		if err != nil {
			return nil, nil, err
		}
		spec := t.spec(c)
		if s.Element != nil {
			if _, isMap := counterMapOf(c); !isMap {
				return nil, nil, invalid("Invalid element selection: %s is not a map", c.name)
			}
			spec.Name, spec.Type = elementName(c, *s.Element), frame.Bigint
		}
		if s.Func != "" {
			if spec, err = cellFunction(t, c, s.Func); err != nil {
				return nil, nil, err
			}
		}
		if s.Alias != "" {
			spec.Name = s.Alias
		}
		out = append(out, selected{col: c, fn: s.Func, elem: s.Element})
		specs = append(specs, spec)
	}
	if counts > 0 && len(out) > 1 {
		return nil, nil, invalid("idemkv supports COUNT(*) only alone in a selection")
	}
	return out, specs, nil
}

// limitOf binds a LIMIT; 0 means none.
func limitOf(st *parse.Select, values []frame.Value) (int, error) {
	if st.Limit == nil {
		return 0, nil
	}
	v, err := bind(*st.Limit, values, frame.Int, "[limit]")
	if err != nil {
		return 0, err
	}
	switch {
	case v.Unset:
		return 0, nil
	case v.Null || v.Bytes == nil:
		return 0, invalid("Invalid null value of limit")
	case len(v.Bytes) != 4:
		return 0, invalid("Expected 4 or 0 byte int (%d)", len(v.Bytes))
	}
	n := int32(binary.BigEndian.Uint32(v.Bytes))
	if n <= 0 {
		return 0, invalid("LIMIT must be strictly positive")
	}
	return int(n), nil
}

// selectRows runs a SELECT; a request for a reset context (payload, see
// selectContext) is answered in reply.
func (e *Executor) selectRows(ctx context.Context, ks string, st *parse.Select, p frame.QueryParams, payload, reply map[string][]byte) (frame.Result, error) {
	t, err := e.resolve(ks, st.Table)
	if err != nil {
		return nil, err
	}
	sel, specs, err := selection(t, st)
	if err != nil {
		return nil, err
	}
	limit, err := limitOf(st, p.Values)
	if err != nil {
		return nil, err
	}
	if err := bindElements(sel, p.Values); err != nil {
		return nil, err
	}
	if st.JSON && t.sys != nil {
		return nil, invalid("idemkv does not serve SELECT JSON on system tables")
	}
	res := frame.RowsResult{Columns: specs, NoMetadata: p.SkipMetadata}
	// Every SELECT checks its level, system tables' too, as Cassandra's
	// SelectStatement.execute does.
	if err := validateRead(p.Consistency); err != nil {
		return nil, err
	}
	tokRels, where := splitTokenRelations(st.Where)
	if len(tokRels) > 0 && t.sys != nil {
		return nil, invalid("idemkv does not serve token() on system tables")
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Executing SELECT on %s.%s", t.keyspace, t.name)
	}
	if t.sys != nil {
		rows, err := e.selectSystem(t, st, sel, p.Values, limit)
		if err != nil {
			return nil, err
		}
		res.Rows = rows
		return res, nil
	}
	cl := coordinator.ConsistencyLevel(p.Consistency)
	counting := len(sel) == 1 && sel[0].count
	var count int64
	emit := func(r row.Row) (bool, error) {
		vals, live, err := e.rowValues(t, sel, r)
		if err != nil || !live {
			return false, err
		}
		if counting {
			count++
		} else {
			res.Rows = append(res.Rows, vals)
		}
		return true, nil
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if len(tokRels) > 0 {
		if len(where) > 0 {
			return nil, invalid("idemkv does not combine token() restrictions with other restrictions")
		}
		var empty bool
		if lo, hi, empty, err = tokenRange(t, tokRels, p.Values); err != nil {
			return nil, err
		}
		if empty {
			if counting {
				res.Rows = [][]frame.Value{{frame.Bytes(frame.EncodeBigint(0))}}
			}
			return res, nil
		}
	}
	if len(where) > 0 {
		var nonKey, restricted []string
		for _, r := range where {
			c, err := t.column(r.Column)
			if err != nil {
				return nil, err
			}
			if c.pkIndex < 0 {
				nonKey = append(nonKey, c.name)
			} else {
				restricted = append(restricted, c.name)
			}
		}
		if len(nonKey) > 0 {
			if !st.AllowFiltering {
				return nil, invalid("Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING")
			}
			return nil, invalid("idemkv does not filter on counter columns (%s)", strings.Join(nonKey, ", "))
		}
		if len(restricted) > 0 && len(restricted) < len(t.pk) {
			var missing []string
			for _, c := range t.pk {
				found := false
				for _, r := range restricted {
					found = found || r == c.name
				}
				if !found {
					missing = append(missing, c.name)
				}
			}
			return nil, invalid("Partition key parts: %s must be restricted as other parts are", strings.Join(missing, ", "))
		}
		terms, err := keyRestrictions(t, where, true)
		if err != nil {
			return nil, err
		}
		ks, err := keys(t, terms, p.Values)
		if err != nil {
			return nil, err
		}
		return e.selectKeys(ctx, t, sel, ks, limit, p, cl, &res, emit, payload, reply)
	}

	// A scan: paged by the request's page size, from the paging state.
	var after *row.Key
	if lo > math.MinInt64 {
		after = &row.Key{Token: lo} // before every key of token lo: no key is empty
	}
	returned := 0
	if len(p.PagingState) > 0 && !counting {
		n, k, err := decodePagingState(p.PagingState, t.id)
		if err != nil {
			return nil, err
		}
		returned, after = n, &k
	}
	want := math.MaxInt
	if p.PageSize > 0 && !counting {
		want = int(p.PageSize)
	}
	if limit > 0 {
		if limit-returned <= 0 {
			return res, nil
		}
		want = min(want, limit-returned)
	}
	const chunk = 1000
	got, exhausted := 0, false
	for got < want {
		ask := min(want-got, chunk)
		var rows []row.Row
		if rs, ok := e.b.(RangeScanner); ok && hi < math.MaxInt64 {
			rows, err = rs.ScanRange(ctx, t.id, after, hi, ask, cl)
		} else {
			rows, err = e.b.Scan(ctx, t.id, after, ask, cl)
		}
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.Key.Token > hi {
				exhausted = true
				break
			}
			k := r.Key.Clone()
			after = &k
			if r.Key.Token <= lo {
				continue // the token lo itself: the range excludes it
			}
			ok, err := emit(r)
			if err != nil {
				return nil, err
			}
			if ok {
				got++
			}
		}
		if exhausted || len(rows) < ask {
			exhausted = true
			break
		}
	}
	if counting {
		res.Rows = [][]frame.Value{{frame.Bytes(frame.EncodeBigint(count))}}
		return res, nil
	}
	if !exhausted && after != nil && (limit == 0 || returned+got < limit) {
		res.PagingState = encodePagingState(t.id, returned+got, *after)
	}
	return res, nil
}

// selectKeys reads the partitions of keys (sorted, without duplicates) in
// order, paged by the request's page size: the paging state holds the last
// key read, and the next page starts after it.
func (e *Executor) selectKeys(ctx context.Context, t *tableInfo, sel []selected, keys [][]byte, limit int, p frame.QueryParams, cl coordinator.ConsistencyLevel, res *frame.RowsResult, emit func(row.Row) (bool, error), payload, reply map[string][]byte) (frame.Result, error) {
	counting := len(sel) == 1 && sel[0].count
	returned, start := 0, 0
	if len(p.PagingState) > 0 && !counting {
		n, last, err := decodePagingState(p.PagingState, t.id)
		if err != nil {
			return nil, err
		}
		returned = n
		start = len(keys)
		for i, k := range keys {
			if bytes.Equal(k, last.Partition) {
				start = i + 1
				break
			}
		}
	}
	want := math.MaxInt
	if p.PageSize > 0 && !counting {
		want = int(p.PageSize)
	}
	if limit > 0 && !counting {
		want = min(want, limit-returned)
	}
	var read []row.Row
	got, i := 0, start
	for ; i < len(keys) && got < want; i++ {
		r, found, err := e.b.Read(ctx, t.id, keys[i], cl)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		read = append(read, r)
		ok, err := emit(r)
		if err != nil {
			return nil, err
		}
		if ok {
			got++
		}
	}
	if err := selectContext(t, sel, read, payload, reply); err != nil {
		return nil, err
	}
	if counting {
		res.Rows = [][]frame.Value{{frame.Bytes(frame.EncodeBigint(int64(got)))}}
		return *res, nil
	}
	if got >= want && i < len(keys) && (limit == 0 || returned+got < limit) {
		res.PagingState = encodePagingState(t.id, returned+got, row.Key{Token: ring.Token(keys[i-1]), Partition: keys[i-1]})
	}
	return *res, nil
}

// rowValues builds a result row; live is false for a partition without a
// live cell, which CQL does not show.
func (e *Executor) rowValues(t *tableInfo, sel []selected, r row.Row) ([]frame.Value, bool, error) {
	live := false
	for _, c := range t.regular {
		if cell, ok := r.Cell(c.name); ok && !cell.Tombstone {
			live = true
			break
		}
	}
	if !live {
		return nil, false, nil
	}
	parts, ok := SplitKey(r.Key.Partition, len(t.pk))
	if !ok {
		return nil, false, frame.Errorf(frame.ErrServer, "partition key %x of %s.%s does not split into %d components", r.Key.Partition, t.keyspace, t.name, len(t.pk))
	}
	out := make([]frame.Value, 0, len(sel))
	for _, s := range sel {
		switch {
		case s.count:
			out = append(out, frame.Null)
		case s.token:
			out = append(out, frame.Bytes(frame.EncodeBigint(r.Key.Token)))
		case s.fn == "ttl":
			out = append(out, frame.Null) // counters never expire
		case s.fn == "writetime":
			cell, ok := r.Cell(s.col.name)
			if !ok || cell.Tombstone {
				out = append(out, frame.Null)
				continue
			}
			out = append(out, frame.Bytes(frame.EncodeBigint(cell.Timestamp)))
		case s.col.pkIndex >= 0:
			out = append(out, frame.Bytes(parts[s.col.pkIndex]))
		default:
			cell, ok := r.Cell(s.col.name)
			if !ok || cell.Tombstone {
				out = append(out, frame.Null)
				continue
			}
			if m, isMap := counterMapOf(s.col); isMap {
				var v frame.Value
				var err error
				if s.elem != nil {
					v, err = mapElementValue(m, cell, s.elemKey)
				} else {
					v, err = mapCellValue(m, cell)
				}
				if err != nil {
					return nil, false, err
				}
				out = append(out, v)
				continue
			}
			v, err := e.b.CellValue(t.id, cell)
			if err != nil {
				return nil, false, err
			}
			out = append(out, frame.Bytes(frame.EncodeBigint(v)))
		}
	}
	return out, true, nil
}

// The paging state is idemkv's own: a magic and version, the table id,
// the rows returned so far (for LIMIT), the last partition key read, and a
// CRC-32 of all that, so that a state from another table or a damaged one
// is refused.
const pagingMagic = "IP\x01"

func encodePagingState(table uint64, returned int, k row.Key) []byte {
	b := []byte(pagingMagic)
	b = binary.BigEndian.AppendUint64(b, table)
	b = binary.AppendUvarint(b, uint64(returned))
	b = binary.BigEndian.AppendUint64(b, uint64(k.Token))
	b = binary.AppendUvarint(b, uint64(len(k.Partition)))
	b = append(b, k.Partition...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func decodePagingState(b []byte, table uint64) (int, row.Key, error) {
	bad := frame.Errorf(frame.ErrProtocol, "Invalid value for the paging state")
	if len(b) < len(pagingMagic)+8+1+8+1+4 || string(b[:len(pagingMagic)]) != pagingMagic {
		return 0, row.Key{}, bad
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return 0, row.Key{}, bad
	}
	d := body[len(pagingMagic):]
	if binary.BigEndian.Uint64(d) != table {
		return 0, row.Key{}, bad
	}
	d = d[8:]
	returned, n := binary.Uvarint(d)
	if n <= 0 || returned > math.MaxInt32 {
		return 0, row.Key{}, bad
	}
	d = d[n:]
	if len(d) < 8 {
		return 0, row.Key{}, bad
	}
	tok := int64(binary.BigEndian.Uint64(d))
	d = d[8:]
	kl, n := binary.Uvarint(d)
	if n <= 0 || uint64(len(d)-n) != kl {
		return 0, row.Key{}, bad
	}
	return int(returned), row.Key{Token: tok, Partition: append([]byte(nil), d[n:]...)}, nil
}
