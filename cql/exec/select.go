package exec

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"time"

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
		if s.col.regular {
			k, err := bindElem(s.col.typ.Elems[0], *s.elem, values, s.col.name)
			if err != nil {
				return err
			}
			sel[i].elemKey = string(normalizeValue(s.col.typ.Elems[0], k))
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
	if _, err := orderOf(t, st); err != nil {
		return nil, nil, err
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
			switch _, isMap := counterMapOf(c); {
			case isMap:
				spec.Name, spec.Type = elementName(c, *s.Element), frame.Bigint
			case c.regular && c.typ.ID == frame.TypeMap:
				spec.Name, spec.Type = elementName(c, *s.Element), c.typ.Elems[1]
			default:
				return nil, nil, invalid("Invalid element selection: %s is not a map", c.name)
			}
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
	return bindLimit(st.Limit, values, "[limit]", "LIMIT")
}

// perPartitionLimitOf binds a PER PARTITION LIMIT; 0 means none.
func perPartitionLimitOf(st *parse.Select, values []frame.Value) (int, error) {
	return bindLimit(st.PerPartitionLimit, values, "[per_partition_limit]", "PER PARTITION LIMIT")
}

func bindLimit(term *parse.Term, values []frame.Value, name, what string) (int, error) {
	if term == nil {
		return 0, nil
	}
	v, err := bind(*term, values, frame.Int, name)
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
		return 0, invalid("%s must be strictly positive", what)
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
	q := &rowQuery{t: t, distinct: st.Distinct, now: e.opts.Now()}
	if q.reverse, err = orderOf(t, st); err != nil {
		return nil, err
	}
	if q.perPartition, err = perPartitionLimitOf(st, p.Values); err != nil {
		return nil, err
	}
	var count int64
	var read []row.Row // the rows a reset context is asked of
	wantContext := len(askedContexts(payload)) > 0
	emit := func(r *crow) error {
		vals, err := e.rowValues(t, sel, r)
		if err != nil {
			return err
		}
		if counting {
			count++
		} else {
			res.Rows = append(res.Rows, vals)
		}
		if wantContext && len(read) < 2 {
			read = append(read, row.Row{Key: r.key, Cells: r.cells})
		}
		return nil
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
	var pkRels, ckRels []parse.Relation
	var nonKey []string
	for _, r := range where {
		c, err := t.column(r.Column)
		if err != nil {
			return nil, err
		}
		switch {
		case !c.isKey():
			nonKey = append(nonKey, c.name)
		case c.ckPos > 0:
			ckRels = append(ckRels, r)
		default:
			pkRels = append(pkRels, r)
		}
	}
	if len(nonKey) > 0 {
		if !st.AllowFiltering {
			return nil, invalid("Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING")
		}
		var rels []parse.Relation
		for _, r := range where {
			if c := t.cols[r.Column]; !c.isKey() {
				rels = append(rels, r)
			}
		}
		if q.values, err = e.valueFilter(t, rels, p.Values); err != nil {
			return nil, err
		}
	}
	if len(pkRels) == 0 && len(ckRels) > 0 && !st.AllowFiltering {
		return nil, invalid("Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING")
	}
	if q.filter, err = clusteringFilter(t, ckRels, p.Values, st.AllowFiltering || len(pkRels) == 0); err != nil {
		return nil, err
	}
	if len(st.OrderBy) > 0 && len(pkRels) == 0 {
		return nil, invalid("ORDER BY is only supported when the partition key is restricted by an EQ or an IN.")
	}
	if len(pkRels) > 0 {
		var restricted []string
		for _, r := range pkRels {
			restricted = append(restricted, r.Column)
		}
		if len(restricted) < len(t.pk) {
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
		terms, _, err := keyRestrictions(t, pkRels, true)
		if err != nil {
			return nil, err
		}
		ks, err := keys(t, terms, p.Values)
		if err != nil {
			return nil, err
		}
		if len(st.OrderBy) > 0 && len(ks) > 1 {
			return e.selectOrderedKeys(ctx, q, ks, limit, p, cl, &res, emit, counting, &count)
		}
		if _, err := e.selectKeys(ctx, q, sel, ks, limit, p, cl, &res, emit); err != nil {
			return nil, err
		}
		if err := selectContext(t, sel, read, payload, reply); err != nil {
			return nil, err
		}
		if counting {
			res.Rows = [][]frame.Value{{frame.Bytes(frame.EncodeBigint(count))}}
		}
		return res, nil
	}

	// A scan: paged by the request's page size, from the paging state.
	var after *row.Key
	if lo > math.MinInt64 {
		after = &row.Key{Token: lo} // before every key of token lo: no key is empty
	}
	returned := 0
	pg := &pager{want: math.MaxInt, emit: emit, q: q}
	if p.PageSize > 0 && !counting {
		pg.want = int(p.PageSize)
	}
	var resume string
	if len(p.PagingState) > 0 && !counting {
		n, k, prefix, err := decodePagingState(p.PagingState, t.id)
		if err != nil {
			return nil, err
		}
		returned, after, resume = n, &k, prefix
	}
	if limit > 0 {
		if limit-returned <= 0 {
			return res, nil
		}
		pg.want = min(pg.want, limit-returned)
	}
	if resume != "" {
		// The page before ended inside this partition.
		r, found, err := e.b.Read(ctx, t.id, after.Partition, cl)
		if err != nil {
			return nil, err
		}
		if found {
			if err := pg.partition(r, resume); err != nil {
				return nil, err
			}
		}
		pg.last = *after
	}
	const chunk = 1000
	exhausted := false
	for pg.got < pg.want && !pg.mid {
		ask := min(pg.want-pg.got, chunk)
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
			if pg.got >= pg.want {
				// A full page: this partition is the next page's.
				pg.mid, pg.lastPrefix = true, ""
				after = &pg.last
				break
			}
			r.Key = k
			if err := pg.partition(r, ""); err != nil {
				return nil, err
			}
			if pg.mid {
				break
			}
		}
		if pg.mid || exhausted || len(rows) < ask {
			exhausted = !pg.mid
			break
		}
	}
	if counting {
		res.Rows = [][]frame.Value{{frame.Bytes(frame.EncodeBigint(count))}}
		return res, nil
	}
	if !exhausted && (limit == 0 || returned+pg.got < limit) {
		switch {
		case pg.mid && pg.lastPrefix != "":
			res.PagingState = encodePagingState(t.id, returned+pg.got, pg.last, pg.lastPrefix)
		case pg.mid:
			res.PagingState = encodePagingState(t.id, returned+pg.got, pg.last, "")
		case after != nil:
			res.PagingState = encodePagingState(t.id, returned+pg.got, *after, "")
		}
	}
	return res, nil
}

// rowQuery is how a SELECT turns a partition into its result rows.
type rowQuery struct {
	t        *tableInfo
	filter   ckFilter
	reverse  bool // ORDER BY against the declared clustering order
	distinct bool // SELECT DISTINCT: one row per partition
	now      time.Time
	// perPartition is PER PARTITION LIMIT (0: none); values filter rows
	// on regular columns (ALLOW FILTERING).
	perPartition int
	values       []valueRestriction
	one          [1]crow // the row of a partition without clustering columns
}

// rows are the live CQL rows of a partition that pass the clustering
// restrictions, in the query's order.
func (q *rowQuery) rows(r row.Row) ([]crow, error) {
	var all []crow
	if len(q.t.ck) == 0 {
		// One row, the partition: no allocation per partition.
		q.one[0] = crow{key: r.Key, cells: r.Cells}
		all = q.one[:]
	} else {
		var err error
		if all, err = expandRows(q.t, r); err != nil {
			return nil, err
		}
	}
	out := all[:0]
	for i := range all {
		if !q.filter.match(&all[i]) || !liveRow(q.t, &all[i], q.now) {
			continue
		}
		ok, err := q.matchValues(&all[i])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, all[i])
		}
	}
	if len(out) == 0 && len(all) > 0 && len(all[0].statics) > 0 && !all[0].staticOnly {
		// Every clustering row is gone: the partition reads as its
		// statics alone, as one with no row ever did.
		so := crow{key: r.Key, ck: make([][]byte, len(q.t.ck)), statics: all[0].statics, staticOnly: true}
		if q.filter.match(&so) && liveRow(q.t, &so, q.now) {
			if ok, err := q.matchValues(&so); err != nil {
				return nil, err
			} else if ok {
				out = append(out, so)
			}
		}
	}
	if q.reverse {
		slices.Reverse(out)
	}
	if q.perPartition > 0 && len(out) > q.perPartition {
		out = out[:q.perPartition]
	}
	if q.distinct && len(out) > 1 {
		out = out[:1]
	}
	return out, nil
}

// past reports whether a row comes after the row of prefix in the
// query's order.
func (q *rowQuery) past(prefix, after string) bool {
	if q.reverse {
		return prefix < after
	}
	return prefix > after
}

// liveRow reports whether a CQL row has a live cell of a regular column:
// a row without one is not shown.
func liveRow(t *tableInfo, r *crow, now time.Time) bool {
	if t.regularTable {
		return liveRegularRow(t, r, now)
	}
	for _, c := range t.regular {
		if c.static != r.staticOnly {
			continue // a clustering row lives by its own cells
		}
		if cell, ok := r.cell(c.name); ok && !cell.Tombstone {
			return true
		}
	}
	return false
}

// pager emits the rows of consecutive partitions into one page.
type pager struct {
	q    *rowQuery
	want int // rows the page holds at most
	got  int
	emit func(*crow) error
	// last is the partition read last; mid is set when the page filled
	// before its rows ended, lastPrefix then the last row emitted of it
	// ("" when none was).
	last       row.Key
	lastPrefix string
	mid        bool
}

// partition emits the rows of r after the row of prefix after ("" for
// all), until the page is full.
func (p *pager) partition(r row.Row, after string) error {
	rows, err := p.q.rows(r)
	if err != nil {
		return err
	}
	p.last, p.lastPrefix, p.mid = r.Key, "", false
	for i := range rows {
		if after != "" && !p.q.past(rows[i].prefix, after) {
			continue
		}
		if p.got >= p.want {
			p.mid = true
			if p.lastPrefix == "" {
				p.lastPrefix = after
			}
			return nil
		}
		if err := p.emit(&rows[i]); err != nil {
			return err
		}
		p.got++
		p.lastPrefix = rows[i].prefix
	}
	p.lastPrefix = ""
	return nil
}

// selectKeys reads the partitions of keys (sorted, without duplicates) in
// order, paged by the request's page size: the paging state holds the last
// key read (and the last row of it, when the page ended inside it), and
// the next page starts after it.
func (e *Executor) selectKeys(ctx context.Context, q *rowQuery, sel []selected, keys [][]byte, limit int, p frame.QueryParams, cl coordinator.ConsistencyLevel, res *frame.RowsResult, emit func(*crow) error) (frame.Result, error) {
	t := q.t
	counting := len(sel) == 1 && sel[0].count
	returned, start := 0, 0
	resume := ""
	if len(p.PagingState) > 0 && !counting {
		n, last, prefix, err := decodePagingState(p.PagingState, t.id)
		if err != nil {
			return nil, err
		}
		returned, resume = n, prefix
		start = len(keys)
		for i, k := range keys {
			if bytes.Equal(k, last.Partition) {
				start = i + 1
				if prefix != "" {
					start = i
				}
				break
			}
		}
	}
	pg := &pager{q: q, want: math.MaxInt, emit: emit}
	if p.PageSize > 0 && !counting {
		pg.want = int(p.PageSize)
	}
	if limit > 0 && !counting {
		if limit-returned <= 0 {
			return *res, nil
		}
		pg.want = min(pg.want, limit-returned)
	}
	i := start
	for ; i < len(keys) && pg.got < pg.want; i++ {
		r, found, err := e.b.Read(ctx, t.id, keys[i], cl)
		if err != nil {
			return nil, err
		}
		after := ""
		if i == start {
			after = resume
		}
		if !found {
			continue
		}
		if err := pg.partition(r, after); err != nil {
			return nil, err
		}
		if pg.mid {
			break
		}
	}
	if counting || (limit > 0 && returned+pg.got >= limit) {
		return *res, nil
	}
	switch {
	case pg.mid:
		res.PagingState = encodePagingState(t.id, returned+pg.got, row.Key{Token: ring.Token(keys[i]), Partition: keys[i]}, pg.lastPrefix)
	case pg.got >= pg.want && i < len(keys):
		res.PagingState = encodePagingState(t.id, returned+pg.got, row.Key{Token: ring.Token(keys[i-1]), Partition: keys[i-1]}, "")
	}
	return *res, nil
}

// selectOrderedKeys serves ORDER BY over the partitions of an IN: the rows
// of every partition sorted together, as Cassandra does, which it refuses
// to page.
func (e *Executor) selectOrderedKeys(ctx context.Context, q *rowQuery, keys [][]byte, limit int, p frame.QueryParams, cl coordinator.ConsistencyLevel, res *frame.RowsResult, emit func(*crow) error, counting bool, count *int64) (frame.Result, error) {
	if p.PageSize > 0 && (limit == 0 || limit > int(p.PageSize)) && !counting {
		return nil, invalid("Cannot page queries with both ORDER BY and a IN restriction on the partition key; you must either remove the ORDER BY or the IN and sort client side, or disable paging for this query")
	}
	var all []crow
	for _, k := range keys {
		r, found, err := e.b.Read(ctx, q.t.id, k, cl)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		rows, err := q.rows(r)
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	slices.SortStableFunc(all, func(a, b crow) int {
		if q.reverse {
			return strings.Compare(b.prefix, a.prefix)
		}
		return strings.Compare(a.prefix, b.prefix)
	})
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	for i := range all {
		if err := emit(&all[i]); err != nil {
			return nil, err
		}
	}
	if counting {
		res.Rows = [][]frame.Value{{frame.Bytes(frame.EncodeBigint(*count))}}
	}
	return *res, nil
}

// orderOf checks a SELECT's ORDER BY as Cassandra does and reports
// whether it reverses the declared clustering order.
func orderOf(t *tableInfo, st *parse.Select) (reverse bool, err error) {
	for i, o := range st.OrderBy {
		c, err := t.column(o.Column)
		if err != nil {
			return false, err
		}
		if c.ckPos == 0 {
			return false, invalid("Order by is currently only supported on the clustered columns of the PRIMARY KEY, got %s", c.name)
		}
		if c.ckPos != i+1 {
			return false, invalid("Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY")
		}
		rev := o.Desc != c.desc
		if i > 0 && rev != reverse {
			return false, invalid("Unsupported order by relation")
		}
		reverse = rev
	}
	return reverse, nil
}

// rowValues builds a result row.
func (e *Executor) rowValues(t *tableInfo, sel []selected, r *crow) ([]frame.Value, error) {
	now := e.opts.Now()
	parts, ok := SplitKey(r.key.Partition, len(t.pk))
	if !ok {
		return nil, frame.Errorf(frame.ErrServer, "partition key %x of %s.%s does not split into %d components", r.key.Partition, t.keyspace, t.name, len(t.pk))
	}
	out := make([]frame.Value, 0, len(sel))
	for _, s := range sel {
		switch {
		case s.count:
			out = append(out, frame.Null)
		case s.token:
			out = append(out, frame.Bytes(frame.EncodeBigint(r.key.Token)))
		case s.fn == "ttl" && s.col.regular:
			out = append(out, regularTTL(r, s.col, now))
		case s.fn == "ttl":
			out = append(out, frame.Null) // counters never expire
		case s.fn == "writetime":
			cell, ok := r.cell(s.col.name)
			if !ok || cell.Tombstone {
				out = append(out, frame.Null)
				continue
			}
			out = append(out, frame.Bytes(frame.EncodeBigint(cell.Timestamp)))
		case s.col.pkIndex >= 0:
			out = append(out, frame.Bytes(parts[s.col.pkIndex]))
		case s.col.ckPos > 0 && r.staticOnly:
			out = append(out, frame.Null)
		case s.col.ckPos > 0:
			out = append(out, frame.Bytes(r.ck[s.col.ckPos-1]))
		case s.col.regular && s.elem != nil:
			v, err := regularElement(r, s.col, []byte(s.elemKey), now)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		case s.col.regular:
			v, err := regularValue(r, s.col, now)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		default:
			cell, ok := r.cell(s.col.name)
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
					return nil, err
				}
				out = append(out, v)
				continue
			}
			v, err := e.b.CellValue(t.id, cell)
			if err != nil {
				return nil, err
			}
			out = append(out, frame.Bytes(frame.EncodeBigint(v)))
		}
	}
	return out, nil
}

// The paging state is idemkv's own: a magic and version, the table id,
// the rows returned so far (for LIMIT), the last partition key read, and a
// CRC-32 of all that, so that a state from another table or a damaged one
// is refused. Version 2 ("IP\x02") adds, after the key, the composite
// prefix of the last row returned of a partition the page ended inside
// (uvarint length, bytes); version 1 is a partition read to its end.
const (
	pagingMagic   = "IP\x01"
	pagingMagicV2 = "IP\x02"
)

func encodePagingState(table uint64, returned int, k row.Key, prefix string) []byte {
	b := []byte(pagingMagic)
	if prefix != "" {
		b = []byte(pagingMagicV2)
	}
	b = binary.BigEndian.AppendUint64(b, table)
	b = binary.AppendUvarint(b, uint64(returned))
	b = binary.BigEndian.AppendUint64(b, uint64(k.Token))
	b = binary.AppendUvarint(b, uint64(len(k.Partition)))
	b = append(b, k.Partition...)
	if prefix != "" {
		b = binary.AppendUvarint(b, uint64(len(prefix)))
		b = append(b, prefix...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func decodePagingState(b []byte, table uint64) (int, row.Key, string, error) {
	bad := frame.Errorf(frame.ErrProtocol, "Invalid value for the paging state")
	if len(b) < len(pagingMagic)+8+1+8+1+4 {
		return 0, row.Key{}, "", bad
	}
	v2 := string(b[:len(pagingMagicV2)]) == pagingMagicV2
	if !v2 && string(b[:len(pagingMagic)]) != pagingMagic {
		return 0, row.Key{}, "", bad
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return 0, row.Key{}, "", bad
	}
	d := body[len(pagingMagic):]
	if binary.BigEndian.Uint64(d) != table {
		return 0, row.Key{}, "", bad
	}
	d = d[8:]
	returned, n := binary.Uvarint(d)
	if n <= 0 || returned > math.MaxInt32 {
		return 0, row.Key{}, "", bad
	}
	d = d[n:]
	if len(d) < 8 {
		return 0, row.Key{}, "", bad
	}
	tok := int64(binary.BigEndian.Uint64(d))
	d = d[8:]
	kl, n := binary.Uvarint(d)
	if n <= 0 || uint64(len(d)-n) < kl {
		return 0, row.Key{}, "", bad
	}
	key := row.Key{Token: tok, Partition: append([]byte(nil), d[n:n+int(kl)]...)}
	d = d[n+int(kl):]
	if !v2 {
		if len(d) != 0 {
			return 0, row.Key{}, "", bad
		}
		return int(returned), key, "", nil
	}
	pl, n := binary.Uvarint(d)
	if n <= 0 || pl == 0 || uint64(len(d)-n) != pl {
		return 0, row.Key{}, "", bad
	}
	return int(returned), key, string(d[n:]), nil
}
