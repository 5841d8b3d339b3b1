package exec

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/cql/trace"
)

// batchItem is one modification of a request, with its values.
type batchItem struct {
	keyspace string
	stmt     parse.Statement
	values   []frame.Value
}

// write is one change to apply: a counter update or a deletion.
type write struct {
	update *coltype.Update
	// exchanger is the column's type when it is updated by a client
	// exchange in a custom payload (coltype.Exchanger: handoff counters,
	// Borrow-Counters).
	exchanger coltype.Exchanger
	// coordinated: the column's type serves a plain update itself, on the
	// coordinator (coltype.Coordinated: handoff counters).
	coordinated bool
	table       uint64
	tableInfo   *tableInfo // the table of a deletion
	key         []byte
	delete      bool
	columns     []string
	// element is the map key of a DELETE m['key'] (one column); "" for
	// a deletion of whole columns.
	element string
	// rangeDel, for a table with clustering columns, is the rows of a
	// DELETE that does not name every clustering column by equality: the
	// cells of the rows a read finds are deleted.
	rangeDel ckFilter
	index    int
}

func notModifiable(t *tableInfo) error {
	if t.sys != nil {
		return frame.Errorf(frame.ErrUnauthorized, "%s keyspace is not user-modifiable.", t.keyspace)
	}
	return nil
}

// counterAttrs applies Cassandra's rules on USING for counter tables.
func counterAttrs(us []parse.UsingOption) error {
	for _, u := range us {
		if !u.TTL {
			return invalid("Cannot provide custom timestamp for counter updates")
		}
	}
	for _, u := range us {
		if u.TTL {
			return invalid("Cannot provide custom TTL for counter updates")
		}
	}
	return nil
}

// checkUpdate applies the rules of a counter UPDATE that need no values.
func checkUpdate(t *tableInfo, st *parse.Update) error {
	if err := notModifiable(t); err != nil {
		return err
	}
	if err := counterAttrs(st.Using); err != nil {
		return err
	}
	if st.IfExists || len(st.Conditions) > 0 {
		return invalid("Conditional updates are not supported on counter tables")
	}
	for _, sc := range st.Set {
		c, err := t.column(sc.Column)
		if err != nil {
			return err
		}
		if c.isKey() {
			return invalid("PRIMARY KEY part %s found in SET part", c.name)
		}
		switch {
		case sc.Op == '=':
			return invalid("Cannot set the value of counter column %s (counters can only be incremented/decremented, not set)", c.name)
		case sc.Other != sc.Column:
			return invalid("Only expressions of the form X = X %c <value> are supported.", sc.Op)
		}
		if _, isMap := counterMapOf(c); isMap && sc.Op == '-' {
			return invalid("Cannot remove from the map of counters %s: its counters only count up (DELETE %s['key'] resets a key)", c.name, parse.Ident(c.name))
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

// setNames are the columns an UPDATE sets.
func setNames(sets []parse.SetClause) []string {
	out := make([]string, len(sets))
	for i, sc := range sets {
		out[i] = sc.Column
	}
	return out
}

// checkRowClustering checks that the clustering relations of a statement
// on whole rows (UPDATE, INSERT) name every clustering column by equality
// or IN, as Cassandra requires.
func checkRowClustering(t *tableInfo, ck []parse.Relation, stmt string) error {
	eq := make([]bool, len(t.ck))
	for _, r := range ck {
		c := t.cols[r.Column]
		if r.Op != "=" && r.Op != "IN" {
			return invalid("Slice restrictions are not supported on the clustering columns in %s statements", stmt)
		}
		eq[c.ckPos-1] = true
	}
	var missing []string
	for i, ok := range eq {
		if !ok {
			missing = append(missing, t.ck[i].name)
		}
	}
	if len(missing) > 0 {
		return invalid("Some clustering keys are missing: %s", strings.Join(missing, ", "))
	}
	return nil
}

// checkDelete applies the rules of a counter DELETE that need no values.
func checkDelete(t *tableInfo, st *parse.Delete) error {
	if err := notModifiable(t); err != nil {
		return err
	}
	for _, u := range st.Using {
		if u.TTL {
			return invalid("TTL attribute is not allowed for deletions")
		}
	}
	if err := counterAttrs(st.Using); err != nil {
		return err
	}
	if st.IfExists || len(st.Conditions) > 0 {
		return invalid("Conditional updates are not supported on counter tables")
	}
	for _, n := range st.Columns {
		c, err := t.column(n)
		if err != nil {
			return err
		}
		if c.isKey() {
			return invalid("Invalid identifier %s for deletion (should not be a PRIMARY KEY part)", c.name)
		}
	}
	for i, el := range st.Elements {
		if el == nil {
			continue
		}
		c := t.cols[st.Columns[i]]
		if _, isMap := counterMapOf(c); !isMap {
			return invalid("Invalid element access syntax for non-collection column %s", c.name)
		}
	}
	for _, c := range t.regular {
		d, ok := columnDesign(c).(coltype.Deleter)
		if !ok {
			continue
		}
		err := d.CheckDelete(c.name)
		if err == nil {
			continue
		}
		if len(st.Columns) == 0 {
			return invalid("%v: table %s has %s (delete the other columns by name)", err, t.name, c.name)
		}
		for _, n := range st.Columns {
			if n == c.name {
				return invalid("%v", err)
			}
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
	if len(st.Elements) > 0 && len(t.ck) > 0 && checkRowClustering(t, ck, "DELETE") != nil {
		return invalid("Element deletions of %s need every clustering column restricted by equality", t.name)
	}
	return nil
}

func checkInsert(t *tableInfo) error {
	if err := notModifiable(t); err != nil {
		return err
	}
	return invalid("INSERT statements are not allowed on counter tables, use UPDATE instead")
}

// delta reads a counter increment: a bigint, 8 bytes, as Cassandra's
// counter type (LongSerializer) validates it: an int (4 bytes) is refused.
func delta(v frame.Value) (d int64, skip bool, err error) {
	switch {
	case v.Unset:
		return 0, true, nil
	case v.Null || v.Bytes == nil:
		return 0, false, invalid("Invalid null value for counter increment")
	case len(v.Bytes) == 8:
		return int64(binary.BigEndian.Uint64(v.Bytes)), false, nil
	}
	return 0, false, invalid("Expected 8 or 0 byte long (%d)", len(v.Bytes))
}

// runBatch runs modifications: a single statement (typ < 0) or the
// statements of a batch. Everything is checked and bound before the first
// write; writes then go out in statement order, statement i with op id
// sequence + i.
// An exchange (the custom payload a coltype.Exchanger names) puts the
// answer in reply under the same key.
func (e *Executor) runBatch(ctx context.Context, typ parse.BatchType, using []parse.UsingOption, items []batchItem, cl frame.Consistency, clientTS int64, payload, reply map[string][]byte) error {
	hasOp, client, seq, err := opID(payload)
	if err != nil {
		return err
	}
	var writes []write
	var cellWrites []cellWrite
	counterStmts := 0
	var tables map[uint64]string // for the batch size messages (typ >= 0)
	for i, it := range items {
		var t *tableInfo
		switch st := it.stmt.(type) {
		case *parse.Update:
			t, err = e.resolve(it.keyspace, st.Table)
		case *parse.Delete:
			t, err = e.resolve(it.keyspace, st.Table)
		case *parse.Insert:
			t, err = e.resolve(it.keyspace, st.Table)
		default:
			return invalid("Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed.")
		}
		if err != nil {
			return err
		}
		if t.regularTable && t.sys == nil {
			if typ == parse.CounterBatch {
				return invalid("Cannot include non-counter statement in a counter batch")
			}
			cw, err := e.bindRegular(t, it, using, clientTS)
			if err != nil {
				return err
			}
			cellWrites = append(cellWrites, cw)
			continue
		}
		if counterStmts++; counterStmts == 1 {
			if err := counterAttrs(using); err != nil {
				return err
			}
		}
		switch st := it.stmt.(type) {
		case *parse.Update:
			if err := checkUpdate(t, st); err != nil {
				return err
			}
		case *parse.Delete:
			if err := checkDelete(t, st); err != nil {
				return err
			}
		case *parse.Insert:
			return checkInsert(t)
		}
		if typ == parse.Logged {
			return invalid("Cannot include a counter statement in a logged batch")
		}
		ws, err := bindWrite(t, it, i)
		if err != nil {
			return err
		}
		if writes == nil {
			writes = ws // one statement: no copy
		} else {
			writes = append(writes, ws...)
		}
		if typ >= 0 {
			if tables == nil {
				tables = map[uint64]string{}
			}
			tables[t.id] = t.keyspace + "." + t.name
		}
	}
	if counterStmts > 0 && len(cellWrites) > 0 {
		return invalid("Counter and non-counter mutations cannot exist in the same batch")
	}
	if len(cellWrites) > 0 {
		if key, _, ok := exchangePayload(payload); ok {
			return invalid("custom payload %s is for counter updates", key)
		}
		wcl := coordinator.ConsistencyLevel(cl)
		switch wcl {
		case coordinator.Serial, coordinator.LocalSerial:
			return invalid("You must use conditional updates for serializable writes")
		case coordinator.Any:
			wcl = coordinator.One // a replica's acknowledgement, not only a hint's
		}
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadRequest, "Executing %d regular writes at %v", len(cellWrites), coordinator.ConsistencyLevel(cl))
		}
		return e.applyCellWrites(ctx, cellWrites, wcl)
	}
	payloadKey, state, exchange := exchangePayload(payload)
	if exchange {
		if len(writes) != 1 || writes[0].exchanger == nil || writes[0].exchanger.PayloadKey() != payloadKey {
			return invalid("custom payload %s needs a request of exactly one %s update", payloadKey, exchangeTypes(payloadKey))
		}
	}
	if len(writes) == 0 {
		return nil
	}
	if err := validateCounterWrite(cl); err != nil {
		return err
	}
	if typ >= 0 { // a BATCH, as Cassandra's BatchStatement checks
		if err := e.checkBatchSize(ctx, writes, tables); err != nil {
			return err
		}
	}
	if exchange {
		u := writes[0].update
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadRequest, "Exchanging %s (%d bytes) for column %s", payloadKey, len(state), u.Column)
		}
		out, err := e.b.Exchange(ctx, u.Table, u.Key, u.Column, state, coordinator.ConsistencyLevel(cl))
		if err != nil {
			return err
		}
		reply[payloadKey] = out
		return nil
	}
	now := e.opts.Now().UnixNano()
	dismissed := func() int { return 0 }
	if hasOp {
		ctx, dismissed = coordinator.WithDismissals(ctx)
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Executing %d counter writes at %v (op id: %t)", len(writes), coordinator.ConsistencyLevel(cl), hasOp)
	}
	for _, w := range writes {
		if w.rangeDel != nil {
			names, err := e.rangeDeleteCells(ctx, w, coordinator.ConsistencyLevel(cl))
			if err != nil {
				return err
			}
			if len(names) == 0 {
				continue
			}
			w.columns, w.rangeDel = names, nil
		}
		if w.delete {
			if handled, err := e.deleteContext(ctx, w.tableInfo, w, coordinator.ConsistencyLevel(cl), payload); handled || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			if w.element != "" {
				// DELETE m['key']: a reset of one key, led like a
				// deletion carrying a context.
				u := coltype.Update{Table: w.table, Key: w.key, Column: w.columns[0], Delete: true, Element: w.element, Timestamp: e.opts.Now().UnixMicro()}
				if err := e.b.CounterWrite(ctx, u, coordinator.ConsistencyLevel(cl)); err != nil {
					return err
				}
				continue
			}
			if err := e.b.Delete(ctx, w.table, w.key, w.columns, coordinator.ConsistencyLevel(cl)); err != nil {
				return err
			}
			continue
		}
		if w.coordinated {
			u := w.update
			if err := e.b.CoordinatedWrite(ctx, u.Table, u.Key, u.Column, u.Delta); err != nil {
				return err
			}
			continue
		}
		u := *w.update
		if hasOp {
			u.HasOp = true
			binary.BigEndian.PutUint64(u.OpID[:8], client)
			binary.BigEndian.PutUint64(u.OpID[8:], seq+uint64(w.index))
			u.OpTime = now
			if u.Element != "" {
				u.OpID = elementOpID(u.OpID, u.Element)
			}
		}
		if err := e.b.CounterWrite(ctx, u, coordinator.ConsistencyLevel(cl)); err != nil {
			return err
		}
	}
	if n := dismissed(); n > 0 {
		reply[DismissedPayloadKey] = binary.BigEndian.AppendUint32(nil, uint32(n))
	}
	return nil
}

// rangeDeleteCells lists the cells a DELETE of rows w.rangeDel names: the
// cells of the rows a read of the partition finds, at the deletion's level
// but at least QUORUM so that a row on a majority of replicas is seen (a
// range tombstone, which would cover rows not yet seen, is not kept).
func (e *Executor) rangeDeleteCells(ctx context.Context, w write, cl coordinator.ConsistencyLevel) ([]string, error) {
	r, found, err := e.b.Read(ctx, w.table, w.key, deletionReadLevel(cl))
	if err != nil || !found {
		return nil, err
	}
	t := w.tableInfo
	rows, err := expandRows(t, r)
	if err != nil {
		return nil, err
	}
	var names []string
	if !w.rangeDel.restricted() && len(rows) > 0 {
		// A whole partition: its static cells too.
		for _, c := range rows[0].statics {
			if !c.Tombstone && (len(w.columns) == 0 || slices.Contains(w.columns, c.Column)) {
				names = append(names, staticPrefix(t)+c.Column)
			}
		}
	}
	for i := range rows {
		if !w.rangeDel.match(&rows[i]) {
			continue
		}
		for _, c := range rows[i].cells {
			if c.Tombstone {
				continue
			}
			if len(w.columns) == 0 || slices.Contains(w.columns, c.Column) {
				names = append(names, rows[i].prefix+c.Column)
			}
		}
	}
	return names, nil
}

// bindRegular checks and binds one statement on a regular table.
func (e *Executor) bindRegular(t *tableInfo, it batchItem, using []parse.UsingOption, clientTS int64) (cellWrite, error) {
	if err := notModifiable(t); err != nil {
		return cellWrite{}, err
	}
	switch st := it.stmt.(type) {
	case *parse.Insert:
		values := it.values
		if st.JSON != nil {
			var err error
			if st, values, err = jsonInsert(t, st, values); err != nil {
				return cellWrite{}, err
			}
		}
		if err := checkRegularInsert(t, st); err != nil {
			return cellWrite{}, err
		}
		return e.bindRegularInsert(t, st, values, using, clientTS)
	case *parse.Update:
		if err := checkRegularUpdate(t, st); err != nil {
			return cellWrite{}, err
		}
		return e.bindRegularUpdate(t, st, it.values, using, clientTS)
	case *parse.Delete:
		if err := checkRegularDelete(t, st); err != nil {
			return cellWrite{}, err
		}
		return e.bindRegularDelete(t, st, it.values, using, clientTS)
	}
	return cellWrite{}, invalid("Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed.")
}

// bindWrite binds one checked statement to its writes.
func bindWrite(t *tableInfo, it batchItem, i int) ([]write, error) {
	switch st := it.stmt.(type) {
	case *parse.Update:
		key, f, err := bindTarget(t, st.Where, it.values)
		if err != nil {
			return nil, err
		}
		if onlyStatic(t, setNames(st.Set)) {
			return bindSets(t, st, it, i, key, "", true)
		}
		prefixes, err := clusteringPrefixes(t, f)
		if err != nil {
			return nil, err
		}
		var out []write
		for n, prefix := range prefixes {
			ws, err := bindSets(t, st, it, i, key, prefix, n == 0)
			if err != nil {
				return nil, err
			}
			if out == nil {
				out = ws // one row, most statements: no copy
				continue
			}
			out = append(out, ws...)
		}
		return out, nil
	case *parse.Delete:
		return bindDelete(t, st, it, i)
	}
	return nil, nil
}

// bindSets binds the SET clause of a counter UPDATE of one row (rowPrefix:
// its composite cell-name prefix, "" without clustering columns); statics
// says whether it binds the static columns too (the first row does).
func bindSets(t *tableInfo, st *parse.Update, it batchItem, i int, key []byte, rowPrefix string, statics bool) ([]write, error) {
	var out []write
	{
		for _, sc := range st.Set {
			c := t.cols[sc.Column]
			prefix := rowPrefix
			if c.static {
				// Once per statement, whatever rows it names.
				if !statics {
					continue
				}
				prefix = staticPrefix(t)
			}
			if _, isMap := counterMapOf(c); isMap {
				mk, md, skip, err := mapDeltas(c, sc.Value, it.values)
				if err != nil {
					return nil, err
				}
				if skip {
					continue
				}
				for j := range mk {
					out = append(out, write{update: &coltype.Update{Table: t.id, Key: key, Column: prefix + c.name, Delta: md[j], Element: mk[j]}, index: i})
				}
				continue
			}
			v, err := bind(sc.Value, it.values, frame.Counter, c.name)
			if err != nil {
				return nil, err
			}
			d, skip, err := delta(v)
			if err != nil {
				return nil, err
			}
			if skip {
				continue
			}
			if sc.Op == '-' {
				if err := checkDeltaNegation(d); err != nil {
					return nil, err
				}
				d = -d
			}
			design := columnDesign(c)
			if q, ok := design.(coltype.CQL); ok {
				if err := q.CheckDelta(d); err != nil {
					return nil, invalid("column %s: %v", c.name, err)
				}
			}
			x, _ := design.(coltype.Exchanger)
			_, coordinated := design.(coltype.Coordinated)
			out = append(out, write{update: &coltype.Update{Table: t.id, Key: key, Column: prefix + c.name, Delta: d}, exchanger: x, coordinated: coordinated, index: i})
		}
	}
	return out, nil
}

// bindDelete binds a DELETE. Without clustering columns, or with every
// clustering column bound by equality, it names its cells; otherwise it
// is a deletion of the rows a read finds (rangeDel).
func bindDelete(t *tableInfo, st *parse.Delete, it batchItem, i int) ([]write, error) {
	key, f, err := bindTarget(t, st.Where, it.values)
	if err != nil {
		return nil, err
	}
	if onlyStatic(t, st.Columns) && st.Elements == nil {
		if f.restricted() {
			return nil, invalid("Invalid restrictions on clustering columns since the DELETE statement modifies only static columns")
		}
		var names []string
		for _, n := range st.Columns {
			names = append(names, staticPrefix(t)+n)
		}
		return []write{{delete: true, table: t.id, tableInfo: t, key: key, columns: names, index: i}}, nil
	}
	if len(t.ck) > 0 && !f.fullPrefix() {
		return []write{{delete: true, table: t.id, tableInfo: t, key: key, columns: st.Columns, rangeDel: f, index: i}}, nil
	}
	prefixes, err := clusteringPrefixes(t, f)
	if err != nil {
		return nil, err
	}
	named := st.Columns
	if len(named) == 0 && len(t.ck) > 0 {
		for _, c := range t.regular {
			if !c.static { // a row's deletion leaves the partition's statics
				named = append(named, c.name)
			}
		}
	}
	compose := func(names []string) []string {
		if len(t.ck) == 0 {
			return names
		}
		var out []string
		for _, n := range names {
			if t.cols[n].static {
				out = append(out, staticPrefix(t)+n)
			}
		}
		for _, p := range prefixes {
			for _, n := range names {
				if !t.cols[n].static {
					out = append(out, p+n)
				}
			}
		}
		return out
	}
	if st.Elements == nil {
		return []write{{delete: true, table: t.id, tableInfo: t, key: key, columns: compose(named), index: i}}, nil
	}
	var whole []string
	var elems []write
	for j, name := range st.Columns {
		if j >= len(st.Elements) || st.Elements[j] == nil {
			whole = append(whole, name)
			continue
		}
		c := t.cols[name]
		v, err := bind(*st.Elements[j], it.values, frame.Text, c.name)
		if err != nil {
			return nil, err
		}
		k, err := mapKey(c, v)
		if err != nil {
			return nil, err
		}
		for _, col := range compose([]string{name}) {
			elems = append(elems, write{delete: true, table: t.id, tableInfo: t, key: key, columns: []string{col}, element: k, index: i})
		}
	}
	if len(whole) > 0 {
		elems = append([]write{{delete: true, table: t.id, tableInfo: t, key: key, columns: compose(whole), index: i}}, elems...)
	}
	return elems, nil
}

// exchangePayload finds, in a request's custom payload, the key of a
// registered Exchanger type (coltype.Exchanger.PayloadKey) and its value.
func exchangePayload(payload map[string][]byte) (key string, value []byte, ok bool) {
	first := ""
	for k, v := range payload {
		// The payload key of the exchanged type first by name, as if the
		// registered types were tried in order.
		if name, isX := coltype.ExchangeKeyType(k); isX && (!ok || name < first) {
			first, key, value, ok = name, k, v, true
		}
	}
	return key, value, ok
}

// exchangeTypes names the registered types exchanged under a payload key.
func exchangeTypes(key string) string {
	var names []string
	for _, name := range coltype.Names() {
		t, _ := coltype.Lookup(name)
		if x, isX := t.(coltype.Exchanger); isX && x.PayloadKey() == key {
			names = append(names, name)
		}
	}
	return strings.Join(names, " or ")
}
