package exec

import (
	"bytes"
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/row"
)

// Regular tables: INSERT, UPDATE and DELETE of last-write-wins cells
// (coltype.Regular), written as they are to every replica at the
// statement's consistency level (Backend.WriteCells), and their reads.
//
// An INSERT writes the row's marker (a cell named by the clustering prefix
// and an empty column: the row exists while it lives, even with every
// column null) and its columns; an UPDATE writes only its columns. A null
// is a tombstone. A non-frozen collection is one cell per element, and
// setting it whole first deletes it (a tombstone under its deletion name,
// one microsecond older than the write). TTLs come from USING TTL or the
// table's default_time_to_live; timestamps from USING TIMESTAMP, the
// request's default timestamp, or the coordinator's clock.
//
// Deletions of whole partitions and ranges of rows, and the list
// operations Cassandra also reads before it writes (l[i] = v, DELETE l[i],
// l = l - [v]), read the partition at QUORUM (at least) and delete what
// they find: there is no partition or range tombstone, so a row written
// with an older timestamp after the read survives such a deletion.

// maxTTL is Cassandra's upper bound of a TTL: 20 years.
const maxTTL = 20 * 365 * 24 * 60 * 60

// cellWrite is what one statement writes to one partition of a regular
// table.
type cellWrite struct {
	t     *tableInfo
	key   []byte
	cells []row.Cell
	// rangeDel, when set, deletes the rows a read finds (see above): the
	// columns named (all when none) of the rows matching the filter.
	rangeDel   ckFilter
	delColumns []string
	ts         int64
	// listOps need the list's current elements.
	listOps []listOp
}

// listOp is a list operation that reads before it writes.
type listOp struct {
	prefix string
	col    *column
	kind   byte // 's': set element index, 'd': delete element index, 'r': remove values
	index  int
	value  []byte
	values [][]byte
	exp    int64
}

// writeAttrs are a statement's timestamp and expiry.
type writeAttrs struct {
	ts  int64 // microseconds
	exp int64 // unix seconds; 0: none
}

// bindUsing binds the value of a USING TTL (an int) or TIMESTAMP (a
// bigint): nil for an unset value.
func bindUsing(term parse.Term, values []frame.Value, typ frame.DataType, name, what string) ([]byte, error) {
	v, err := bind(term, values, typ, name)
	if err != nil || v.Unset {
		return nil, err
	}
	n := map[frame.TypeID]int{frame.TypeInt: 4, frame.TypeBigint: 8}[typ.ID]
	switch {
	case v.Null || v.Bytes == nil:
		return nil, invalid("Invalid null value of %s", what)
	case len(v.Bytes) != n:
		return nil, invalid("Expected %d or 0 byte %s (%d)", n, map[int]string{4: "int", 8: "long"}[n], len(v.Bytes))
	}
	return v.Bytes, nil
}

// deletionReadLevel is the level of the read a deletion of what exists
// (a range, a partition, a list element) makes first: the deletion's, but
// at least QUORUM, so that a row on a majority of replicas is seen.
func deletionReadLevel(cl coordinator.ConsistencyLevel) coordinator.ConsistencyLevel {
	switch cl {
	case coordinator.One, coordinator.Two, coordinator.LocalOne, coordinator.Any:
		return coordinator.Quorum
	}
	return cl
}

// bindAttrs binds USING TIMESTAMP / TTL (a statement's, else its batch's)
// with the request's default timestamp and the table's default TTL.
func (e *Executor) bindAttrs(t *tableInfo, us, batch []parse.UsingOption, values []frame.Value, clientTS int64, deletion bool) (writeAttrs, error) {
	now := e.opts.Now()
	a := writeAttrs{ts: now.UnixMicro()}
	if clientTS != 0 {
		a.ts = clientTS
	}
	ttl := int64(-1)
	for _, u := range append(append([]parse.UsingOption(nil), batch...), us...) {
		if u.TTL {
			if deletion {
				return a, invalid("TTL attribute is not allowed for deletions")
			}
			b, err := bindUsing(u.Value, values, frame.Int, "[ttl]", "TTL")
			if err != nil || b == nil {
				if err != nil {
					return a, err
				}
				continue
			}
			n := int64(int32(binary.BigEndian.Uint32(b)))
			if n < 0 {
				return a, invalid("A TTL must be greater or equal to 0, but was %d", n)
			}
			if n > maxTTL {
				return a, invalid("ttl is too large. requested (%d) maximum (%d)", n, maxTTL)
			}
			ttl = n
			continue
		}
		b, err := bindUsing(u.Value, values, frame.Bigint, "[timestamp]", "timestamp")
		if err != nil {
			return a, err
		}
		if b == nil {
			continue
		}
		a.ts = int64(binary.BigEndian.Uint64(b))
	}
	if ttl < 0 {
		ttl = 0
		if d, err := strconv.ParseInt(t.def.Options["default_time_to_live"], 10, 64); err == nil && d > 0 {
			ttl = d
		}
	}
	if ttl > 0 {
		a.exp = now.Unix() + ttl
	}
	return a, nil
}

func lwtRefusal() error {
	return invalid("idemkv does not support lightweight transactions (IF NOT EXISTS, IF EXISTS, IF conditions)")
}

// checkRegularInsert checks an INSERT on a regular table.
func checkRegularInsert(t *tableInfo, st *parse.Insert) error {
	if st.IfNotExists {
		return lwtRefusal()
	}
	if len(st.Columns) != len(st.Values) {
		return invalid("Unmatched column names/values")
	}
	seen := map[string]bool{}
	for _, n := range st.Columns {
		c, err := t.column(n)
		if err != nil {
			return err
		}
		if seen[c.name] {
			return invalid("Multiple definitions found for column %s", c.name)
		}
		seen[c.name] = true
	}
	var missing []string
	for _, c := range t.pk {
		if !seen[c.name] {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return invalid("Some partition key parts are missing: %s", strings.Join(missing, ", "))
	}
	for _, c := range t.ck {
		if !seen[c.name] {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == len(t.ck) && len(t.ck) > 0 {
		// No clustering value: only the static columns are written.
		var others []string
		for _, n := range st.Columns {
			if c := t.cols[n]; !c.isKey() {
				others = append(others, n)
			}
		}
		if onlyStatic(t, others) {
			return nil
		}
	}
	if len(missing) > 0 {
		return invalid("Some clustering keys are missing: %s", strings.Join(missing, ", "))
	}
	return nil
}

// checkRegularUpdate checks an UPDATE on a regular table.
func checkRegularUpdate(t *tableInfo, st *parse.Update) error {
	if st.IfExists || len(st.Conditions) > 0 {
		return lwtRefusal()
	}
	for _, sc := range st.Set {
		c, err := t.column(sc.Column)
		if err != nil {
			return err
		}
		if c.isKey() {
			return invalid("PRIMARY KEY part %s found in SET part", c.name)
		}
		if sc.Op == '=' {
			continue
		}
		if sc.Other != sc.Column {
			return invalid("Only expressions of the form X = X %c <value> are supported.", sc.Op)
		}
		if !isCollection(c.typ) {
			return invalid("Invalid operation (%s = %s %c ?) for non counter column %s", c.name, c.name, sc.Op, c.name)
		}
		if !c.multiCell {
			return invalid("Invalid operation (%s = %s %c ?) for frozen collection column %s", c.name, c.name, sc.Op, c.name)
		}
	}
	_, ck, err := keyRestrictions(t, st.Where, false)
	if err != nil {
		return err
	}
	if onlyStatic(t, setNames(st.Set)) {
		return checkStaticOnly(ck, "UPDATE")
	}
	return checkRowClustering(t, ck, "UPDATE")
}

// checkRegularDelete checks a DELETE on a regular table.
func checkRegularDelete(t *tableInfo, st *parse.Delete) error {
	if st.IfExists || len(st.Conditions) > 0 {
		return lwtRefusal()
	}
	for i, n := range st.Columns {
		c, err := t.column(n)
		if err != nil {
			return err
		}
		if c.isKey() {
			return invalid("Invalid identifier %s for deletion (should not be a PRIMARY KEY part)", c.name)
		}
		if i < len(st.Elements) && st.Elements[i] != nil && (c.typ.ID != frame.TypeMap && c.typ.ID != frame.TypeList || !c.multiCell) {
			return invalid("Invalid element access syntax for non-collection column %s", c.name)
		}
	}
	_, ck, err := keyRestrictions(t, st.Where, false)
	if err != nil {
		return err
	}
	for _, r := range ck {
		if r.Op == "IN" && !r.InList {
			return invalid("IN ? on a clustering column is not supported by idemkv; bind each value: IN (?, ?)")
		}
	}
	if onlyStatic(t, st.Columns) {
		return checkStaticOnly(ck, "DELETE")
	}
	if len(st.Columns) > 0 && len(t.ck) > 0 && checkRowClustering(t, ck, "DELETE") != nil {
		return invalid("Range deletions are not supported for specific columns")
	}
	return nil
}

// bindValue binds a term for a regular column and checks it.
func bindValue(c *column, term parse.Term, values []frame.Value) (frame.Value, error) {
	v, err := bind(term, values, c.typ, c.name)
	if err != nil {
		return v, err
	}
	if v.Unset || v.Null || v.Bytes == nil {
		return v, nil
	}
	return v, validateValue(c.typ, v.Bytes, c.name)
}

// setCells appends the cells that set column c of the row of prefix to v.
func setCells(out []row.Cell, prefix string, c *column, v frame.Value, a writeAttrs) ([]row.Cell, error) {
	if v.Unset {
		return out, nil
	}
	if !c.multiCell {
		if v.Null || v.Bytes == nil {
			return append(out, row.Cell{Column: prefix + c.name, Timestamp: a.ts, Tombstone: true}), nil
		}
		return append(out, row.Cell{Column: prefix + c.name, Value: coltype.EncodeRegular(normalizeValue(c.typ, v.Bytes), a.exp), Timestamp: a.ts}), nil
	}
	out = append(out, row.Cell{Column: prefix + row.CollectionDeletion(c.name), Timestamp: a.ts - 1, Tombstone: true})
	if v.Null || v.Bytes == nil {
		return out, nil
	}
	return addElements(out, prefix, c, v.Bytes, a, false)
}

// addElements appends the cells that add a collection value's elements.
func addElements(out []row.Cell, prefix string, c *column, b []byte, a writeAttrs, prepend bool) ([]row.Cell, error) {
	switch c.typ.ID {
	case frame.TypeMap:
		ks, vs, err := frame.DecodeMap(b)
		if err != nil {
			return nil, invalid("Invalid value for column %s: %v", c.name, err)
		}
		for i := range ks {
			k := normalizeValue(c.typ.Elems[0], ks[i])
			out = append(out, row.Cell{Column: prefix + row.ElementName(c.name, elementKey(c.typ.Elems[0], k)), Value: coltype.EncodeRegular(normalizeValue(c.typ.Elems[1], vs[i]), a.exp), Timestamp: a.ts})
		}
	case frame.TypeSet:
		es, err := frame.DecodeSet(b)
		if err != nil {
			return nil, invalid("Invalid value for column %s: %v", c.name, err)
		}
		for _, e := range es {
			e = normalizeValue(c.typ.Elems[0], e)
			out = append(out, row.Cell{Column: prefix + row.ElementName(c.name, elementKey(c.typ.Elems[0], e)), Value: coltype.EncodeRegular(nil, a.exp), Timestamp: a.ts})
		}
	case frame.TypeList:
		es, err := frame.DecodeList(b)
		if err != nil {
			return nil, invalid("Invalid value for column %s: %v", c.name, err)
		}
		for i, e := range es {
			out = append(out, row.Cell{Column: prefix + row.ElementName(c.name, listKey(a.ts, i, len(es), prepend)), Value: coltype.EncodeRegular(normalizeValue(c.typ.Elems[0], e), a.exp), Timestamp: a.ts})
		}
	}
	return out, nil
}

// removeElements appends the tombstones of a set's elements or a map's
// keys (b: a set of them).
func removeElements(out []row.Cell, prefix string, c *column, b []byte, a writeAttrs) ([]row.Cell, error) {
	es, err := frame.DecodeSet(b)
	if err != nil {
		return nil, invalid("Invalid value for column %s: %v", c.name, err)
	}
	for _, e := range es {
		out = append(out, row.Cell{Column: prefix + row.ElementName(c.name, elementKey(c.typ.Elems[0], e)), Timestamp: a.ts, Tombstone: true})
	}
	return out, nil
}

// bindRegularInsert binds an INSERT into a regular table.
func (e *Executor) bindRegularInsert(t *tableInfo, st *parse.Insert, values []frame.Value, batch []parse.UsingOption, clientTS int64) (cellWrite, error) {
	a, err := e.bindAttrs(t, st.Using, batch, values, clientTS, false)
	if err != nil {
		return cellWrite{}, err
	}
	pkParts := make([][]byte, len(t.pk))
	ckVals := make([]frame.Value, len(t.ck))
	var sets []struct {
		c *column
		v frame.Value
	}
	for i, n := range st.Columns {
		c := t.cols[n]
		v, err := bindValue(c, st.Values[i], values)
		if err != nil {
			return cellWrite{}, err
		}
		switch {
		case c.pkIndex >= 0 || c.ckPos > 0:
			if err := requireKeyValue(c, v); err != nil {
				return cellWrite{}, err
			}
			if c.pkIndex >= 0 {
				if err := validateKeyPart(c, v.Bytes); err != nil {
					return cellWrite{}, err
				}
				pkParts[c.pkIndex] = v.Bytes
			} else {
				ckVals[c.ckPos-1] = v
			}
		default:
			sets = append(sets, struct {
				c *column
				v frame.Value
			}{c, v})
		}
	}
	key, err := checkedKey(pkParts)
	if err != nil {
		return cellWrite{}, err
	}
	var prefix []byte
	staticOnly := len(t.ck) > 0 && ckVals[0].Bytes == nil && !ckVals[0].Null
	for i, v := range ckVals {
		if staticOnly {
			break
		}
		k, err := orderKey(t.ck[i], v.Bytes)
		if err != nil {
			return cellWrite{}, err
		}
		prefix = row.AppendComponent(prefix, k, t.ck[i].desc)
	}
	w := cellWrite{t: t, key: key, ts: a.ts}
	if !staticOnly {
		w.cells = append(w.cells, row.Cell{Column: string(prefix), Value: coltype.EncodeRegular(nil, a.exp), Timestamp: a.ts})
	}
	for _, s := range sets {
		p := string(prefix)
		if s.c.static {
			p = staticPrefix(t)
		}
		if w.cells, err = setCells(w.cells, p, s.c, s.v, a); err != nil {
			return cellWrite{}, err
		}
	}
	return w, nil
}

// bindTarget binds the WHERE clause of a modification: its partition key
// (one: IN is refused) and its clustering restrictions.
func bindTarget(t *tableInfo, where []parse.Relation, values []frame.Value) ([]byte, ckFilter, error) {
	terms, ck, err := keyRestrictions(t, where, false)
	if err != nil {
		return nil, nil, err
	}
	ks, err := keys(t, terms, values)
	if err != nil {
		return nil, nil, err
	}
	f, err := clusteringFilter(t, ck, values, false)
	if err != nil {
		return nil, nil, err
	}
	return ks[0], f, nil
}

// bindRegularUpdate binds an UPDATE of a regular table.
func (e *Executor) bindRegularUpdate(t *tableInfo, st *parse.Update, values []frame.Value, batch []parse.UsingOption, clientTS int64) (cellWrite, error) {
	a, err := e.bindAttrs(t, st.Using, batch, values, clientTS, false)
	if err != nil {
		return cellWrite{}, err
	}
	key, f, err := bindTarget(t, st.Where, values)
	if err != nil {
		return cellWrite{}, err
	}
	prefixes := []string{""}
	if !onlyStatic(t, setNames(st.Set)) {
		if prefixes, err = clusteringPrefixes(t, f); err != nil {
			return cellWrite{}, err
		}
	}
	w := cellWrite{t: t, key: key, ts: a.ts}
	for n, rowPrefix := range prefixes {
		for _, sc := range st.Set {
			c := t.cols[sc.Column]
			p := rowPrefix
			if c.static {
				if n > 0 {
					continue // once per statement
				}
				p = staticPrefix(t)
			}
			if sc.Element != nil {
				if err := e.bindElementSet(&w, p, c, sc, values, a); err != nil {
					return cellWrite{}, err
				}
				continue
			}
			vc := c
			if sc.Op == '-' && c.typ.ID == frame.TypeMap {
				// m = m - {k, ...}: a set of the map's keys.
				vc = &column{name: c.name, typ: frame.SetOf(c.typ.Elems[0])}
			}
			v, err := bindValue(vc, sc.Value, values)
			if err != nil {
				return cellWrite{}, err
			}
			switch {
			case sc.Op == '=':
				w.cells, err = setCells(w.cells, p, c, v, a)
			case v.Unset:
			case v.Null || v.Bytes == nil:
				return cellWrite{}, invalid("Invalid null value for collection operation on %s", c.name)
			case sc.Op == '+':
				w.cells, err = addElements(w.cells, p, c, v.Bytes, a, sc.Prepend)
			case c.typ.ID == frame.TypeList:
				es, derr := frame.DecodeList(v.Bytes)
				if derr != nil {
					return cellWrite{}, invalid("Invalid value for column %s: %v", c.name, derr)
				}
				w.listOps = append(w.listOps, listOp{prefix: p, col: c, kind: 'r', values: es})
			default:
				w.cells, err = removeElements(w.cells, p, c, v.Bytes, a)
			}
			if err != nil {
				return cellWrite{}, err
			}
		}
	}
	return w, nil
}

// bindElementSet binds `m[k] = v` (a map entry) or `l[i] = v` (a list
// element, read first).
func (e *Executor) bindElementSet(w *cellWrite, prefix string, c *column, sc parse.SetClause, values []frame.Value, a writeAttrs) error {
	if !c.multiCell || (c.typ.ID != frame.TypeMap && c.typ.ID != frame.TypeList) {
		return invalid("Invalid operation (%s[?] = ?) for non-collection column %s", c.name, c.name)
	}
	if c.typ.ID == frame.TypeMap {
		k, err := bindElem(c.typ.Elems[0], *sc.Element, values, c.name)
		if err != nil {
			return err
		}
		v, err := bind(sc.Value, values, c.typ.Elems[1], c.name)
		if err != nil {
			return err
		}
		if v.Unset {
			return nil
		}
		name := prefix + row.ElementName(c.name, elementKey(c.typ.Elems[0], k))
		if v.Null || v.Bytes == nil {
			w.cells = append(w.cells, row.Cell{Column: name, Timestamp: a.ts, Tombstone: true})
			return nil
		}
		if err := validateValue(c.typ.Elems[1], v.Bytes, c.name); err != nil {
			return err
		}
		w.cells = append(w.cells, row.Cell{Column: name, Value: coltype.EncodeRegular(v.Bytes, a.exp), Timestamp: a.ts})
		return nil
	}
	i, err := bindElem(frame.Int, *sc.Element, values, c.name)
	if err != nil {
		return err
	}
	v, err := bind(sc.Value, values, c.typ.Elems[0], c.name)
	if err != nil {
		return err
	}
	if v.Unset {
		return nil
	}
	op := listOp{prefix: prefix, col: c, kind: 's', index: int(int32(binary.BigEndian.Uint32(i))), exp: a.exp}
	if v.Null || v.Bytes == nil {
		op.kind = 'd'
	} else {
		if err := validateValue(c.typ.Elems[0], v.Bytes, c.name); err != nil {
			return err
		}
		op.value = v.Bytes
	}
	w.listOps = append(w.listOps, op)
	return nil
}

// bindElem binds an element's key (a map key, a list index).
func bindElem(dt frame.DataType, term parse.Term, values []frame.Value, col string) ([]byte, error) {
	v, err := bind(term, values, dt, col)
	if err != nil {
		return nil, err
	}
	if v.Unset || v.Null || v.Bytes == nil {
		return nil, invalid("Invalid null value for %s element key", col)
	}
	if dt.ID == frame.TypeInt && len(v.Bytes) != 4 {
		return nil, invalid("Invalid list index for %s", col)
	}
	return v.Bytes, validateValue(dt, v.Bytes, col)
}

// bindRegularDelete binds a DELETE of a regular table.
func (e *Executor) bindRegularDelete(t *tableInfo, st *parse.Delete, values []frame.Value, batch []parse.UsingOption, clientTS int64) (cellWrite, error) {
	a, err := e.bindAttrs(t, st.Using, batch, values, clientTS, true)
	if err != nil {
		return cellWrite{}, err
	}
	key, f, err := bindTarget(t, st.Where, values)
	if err != nil {
		return cellWrite{}, err
	}
	w := cellWrite{t: t, key: key, ts: a.ts}
	if onlyStatic(t, st.Columns) && st.Elements == nil {
		if f.restricted() {
			return cellWrite{}, invalid("Invalid restrictions on clustering columns since the DELETE statement modifies only static columns")
		}
		for _, n := range st.Columns {
			name := staticPrefix(t) + n
			if t.cols[n].multiCell {
				name = staticPrefix(t) + row.CollectionDeletion(n)
			}
			w.cells = append(w.cells, row.Cell{Column: name, Timestamp: a.ts, Tombstone: true})
		}
		return w, nil
	}
	if len(t.ck) > 0 && !f.fullPrefix() {
		// A range of rows, a partition: delete what a read finds.
		w.rangeDel, w.delColumns = f, st.Columns
		return w, nil
	}
	prefixes, err := clusteringPrefixes(t, f)
	if err != nil {
		return cellWrite{}, err
	}
	tomb := func(name string) {
		w.cells = append(w.cells, row.Cell{Column: name, Timestamp: a.ts, Tombstone: true})
	}
	for n, p := range prefixes {
		if len(st.Columns) == 0 {
			tomb(p)
			for _, c := range t.regular {
				if c.static {
					continue // a row's deletion leaves the partition's statics
				}
				if c.multiCell {
					tomb(p + row.CollectionDeletion(c.name))
				} else {
					tomb(p + c.name)
				}
			}
			continue
		}
		for i, name := range st.Columns {
			c := t.cols[name]
			p := p
			if c.static {
				if n > 0 {
					continue // once per statement
				}
				p = staticPrefix(t)
			}
			switch {
			case i < len(st.Elements) && st.Elements[i] != nil && c.typ.ID == frame.TypeMap:
				k, err := bindElem(c.typ.Elems[0], *st.Elements[i], values, c.name)
				if err != nil {
					return cellWrite{}, err
				}
				tomb(p + row.ElementName(c.name, elementKey(c.typ.Elems[0], k)))
			case i < len(st.Elements) && st.Elements[i] != nil:
				idx, err := bindElem(frame.Int, *st.Elements[i], values, c.name)
				if err != nil {
					return cellWrite{}, err
				}
				w.listOps = append(w.listOps, listOp{prefix: p, col: c, kind: 'd', index: int(int32(binary.BigEndian.Uint32(idx)))})
			case c.multiCell:
				tomb(p + row.CollectionDeletion(c.name))
			default:
				tomb(p + c.name)
			}
		}
	}
	return w, nil
}

// applyCellWrites runs the writes of regular tables: reads where they
// need one, then one WriteCells per partition.
func (e *Executor) applyCellWrites(ctx context.Context, ws []cellWrite, cl coordinator.ConsistencyLevel) error {
	for _, w := range ws {
		cells := w.cells
		if w.rangeDel != nil || len(w.listOps) > 0 {
			r, found, err := e.b.Read(ctx, w.t.id, w.key, deletionReadLevel(cl))
			if err != nil {
				return err
			}
			if found {
				more, err := readWrites(w, r, e.opts.Now())
				if err != nil {
					return err
				}
				cells = append(cells, more...)
			} else if len(w.listOps) > 0 {
				for _, op := range w.listOps {
					if op.kind != 'r' {
						return invalid("Attempted to set an element on a list which is null")
					}
				}
			}
		}
		if len(cells) == 0 {
			continue
		}
		if err := e.b.WriteCells(ctx, w.t.id, w.key, cells, cl); err != nil {
			return err
		}
	}
	return nil
}

// readWrites turns a write's deletions of what exists, and its list
// operations, into cells, from the partition as read.
func readWrites(w cellWrite, r row.Row, now time.Time) ([]row.Cell, error) {
	rows, err := expandRows(w.t, r)
	if err != nil {
		return nil, err
	}
	var out []row.Cell
	if w.rangeDel != nil {
		if !w.rangeDel.restricted() && len(rows) > 0 {
			// A whole partition: its static cells too.
			for _, c := range rows[0].statics {
				col, _, _ := row.SplitElement(c.Column)
				if !c.Tombstone && (len(w.delColumns) == 0 || containsString(w.delColumns, col)) {
					out = append(out, row.Cell{Column: staticPrefix(w.t) + c.Column, Timestamp: w.ts, Tombstone: true})
				}
			}
		}
		for i := range rows {
			cr := &rows[i]
			if !w.rangeDel.match(cr) {
				continue
			}
			for _, c := range cr.cells {
				if c.Tombstone {
					continue
				}
				col, _, _ := row.SplitElement(c.Column)
				if len(w.delColumns) == 0 || containsString(w.delColumns, col) {
					out = append(out, row.Cell{Column: cr.prefix + c.Column, Timestamp: w.ts, Tombstone: true})
				}
			}
		}
	}
	for _, op := range w.listOps {
		var elems []row.Cell // the list's live elements, in order
		for i := range rows {
			if rows[i].prefix != op.prefix {
				continue
			}
			elems = liveElements(&rows[i], op.col, now)
		}
		switch op.kind {
		case 's', 'd':
			if op.index < 0 || op.index >= len(elems) {
				return nil, invalid("List index %d out of bound, list has size %d", op.index, len(elems))
			}
			c := elems[op.index]
			if op.kind == 'd' {
				out = append(out, row.Cell{Column: op.prefix + c.Column, Timestamp: w.ts, Tombstone: true})
			} else {
				out = append(out, row.Cell{Column: op.prefix + c.Column, Value: coltype.EncodeRegular(op.value, op.exp), Timestamp: w.ts})
			}
		case 'r':
			for _, c := range elems {
				v, _, _, err := coltype.DecodeRegular(c.Value)
				if err != nil {
					return nil, err
				}
				for _, x := range op.values {
					if bytes.Equal(v, x) {
						out = append(out, row.Cell{Column: op.prefix + c.Column, Timestamp: w.ts, Tombstone: true})
						break
					}
				}
			}
		}
	}
	return out, nil
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// liveCell reports whether a regular cell holds a value now.
func liveCell(c row.Cell, now time.Time) bool {
	if c.Tombstone {
		return false
	}
	_, exp, has, err := coltype.DecodeRegular(c.Value)
	return err == nil && (!has || exp > now.Unix())
}

// liveElements are the live element cells of a non-frozen collection in a
// CQL row (named by column and element), in order.
func liveElements(r *crow, c *column, now time.Time) []row.Cell {
	del := int64(-1 << 63)
	var out []row.Cell
	start := c.name + "\x00"
	cells := r.cells
	if c.static {
		cells = r.statics
	}
	for _, cell := range cells {
		if !strings.HasPrefix(cell.Column, start) {
			continue
		}
		if cell.Column == start {
			if cell.Tombstone {
				del = cell.Timestamp
			}
			continue
		}
		out = append(out, cell)
	}
	kept := out[:0]
	for _, cell := range out {
		if cell.Timestamp > del && cell.Timestamp > c.droppedAt && liveCell(cell, now) {
			kept = append(kept, cell)
		}
	}
	return kept
}

// regularValue reads a regular column of a CQL row; null when it holds
// none.
func regularValue(r *crow, c *column, now time.Time) (frame.Value, error) {
	if !c.multiCell {
		cell, ok := r.cell(c.name)
		if !ok || !liveCell(cell, now) || cell.Timestamp <= c.droppedAt {
			return frame.Null, nil
		}
		v, _, _, err := coltype.DecodeRegular(cell.Value)
		if err != nil {
			return frame.Value{}, frame.Errorf(frame.ErrServer, "column %s: %v", c.name, err)
		}
		return frame.Bytes(v), nil
	}
	elems := liveElements(r, c, now)
	if len(elems) == 0 {
		return frame.Null, nil
	}
	var keys, vals [][]byte
	for _, cell := range elems {
		_, k, _ := row.SplitElement(cell.Column)
		v, _, _, err := coltype.DecodeRegular(cell.Value)
		if err != nil {
			return frame.Value{}, frame.Errorf(frame.ErrServer, "column %s: %v", c.name, err)
		}
		switch c.typ.ID {
		case frame.TypeMap:
			keys = append(keys, elementValue(c.typ.Elems[0], []byte(k)))
			vals = append(vals, v)
		case frame.TypeSet:
			vals = append(vals, elementValue(c.typ.Elems[0], []byte(k)))
		default:
			vals = append(vals, v)
		}
	}
	return frame.Bytes(encodeCollection(c.typ, keys, vals)), nil
}

// regularElement reads m['k'] of a map column: the value of key k (its
// CQL bytes), null when the map lacks it.
func regularElement(r *crow, c *column, k []byte, now time.Time) (frame.Value, error) {
	if c.multiCell {
		name := row.ElementName(c.name, elementKey(c.typ.Elems[0], k))
		for _, cell := range liveElements(r, c, now) {
			if cell.Column == name {
				v, _, _, err := coltype.DecodeRegular(cell.Value)
				if err != nil {
					return frame.Value{}, frame.Errorf(frame.ErrServer, "column %s: %v", c.name, err)
				}
				return frame.Bytes(v), nil
			}
		}
		return frame.Null, nil
	}
	m, err := regularValue(r, c, now)
	if err != nil || m.Null || m.Bytes == nil {
		return frame.Null, err
	}
	ks, vs, err := frame.DecodeMap(m.Bytes)
	if err != nil {
		return frame.Value{}, frame.Errorf(frame.ErrServer, "column %s: %v", c.name, err)
	}
	for i := range ks {
		if bytes.Equal(ks[i], k) {
			return frame.Bytes(vs[i]), nil
		}
	}
	return frame.Null, nil
}

// regularTTL is ttl(c): the seconds left of a cell written with a TTL.
func regularTTL(r *crow, c *column, now time.Time) frame.Value {
	cell, ok := r.cell(c.name)
	if !ok || !liveCell(cell, now) {
		return frame.Null
	}
	_, exp, has, err := coltype.DecodeRegular(cell.Value)
	if err != nil || !has {
		return frame.Null
	}
	return frame.Bytes(frame.EncodeInt(int32(exp - now.Unix())))
}

// liveRegularRow reports whether a row of a regular table exists: its
// marker or a column lives.
func liveRegularRow(t *tableInfo, r *crow, now time.Time) bool {
	if c, ok := r.cell(""); ok && liveCell(c, now) && !r.staticOnly {
		return true
	}
	for _, c := range t.regular {
		if c.static != r.staticOnly {
			continue // a clustering row lives by its own cells
		}
		if c.multiCell {
			if len(liveElements(r, c, now)) > 0 {
				return true
			}
			continue
		}
		if cell, ok := r.cell(c.name); ok && liveCell(cell, now) && cell.Timestamp > c.droppedAt {
			return true
		}
	}
	return false
}
