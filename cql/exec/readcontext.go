package exec

import (
	"context"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/row"
)

// Reset contexts (coltype.ReadContext: the observed-reset counter). A
// SELECT of one partition and one column of such a type, whose request
// carries the type's context payload key, gets the context of the cell it
// read in the response's custom payload; a DELETE of one such column
// carrying the key cancels exactly what that context observed.

// contextKeyOf returns the ReadContext capability of a column's design and
// whether the request asks for it.
func contextKeyOf(c *column, payload map[string][]byte) (coltype.ReadContext, bool) {
	rc, ok := columnDesign(c).(coltype.ReadContext)
	if !ok {
		return nil, false
	}
	_, asked := payload[rc.ContextKey()]
	return rc, asked
}

// askedContexts returns the context payload keys of registered types that
// a request carries.
func askedContexts(payload map[string][]byte) []string {
	var out []string
	for _, name := range coltype.Names() {
		t, _ := coltype.Lookup(name)
		if rc, ok := t.(coltype.ReadContext); ok {
			if _, asked := payload[rc.ContextKey()]; asked {
				out = append(out, rc.ContextKey())
			}
		}
	}
	return out
}

// selectContext answers a request for a reset context on a SELECT: the
// SELECT must read one partition (rows) and select one column of the type.
func selectContext(t *tableInfo, sel []selected, rows []row.Row, payload, reply map[string][]byte) error {
	keys := askedContexts(payload)
	if len(keys) == 0 {
		return nil
	}
	var col *column
	var rc coltype.ReadContext
	for _, s := range sel {
		if s.col == nil {
			continue
		}
		if r, asked := contextKeyOf(s.col, payload); asked {
			if col != nil {
				return invalid("custom payload %s needs a SELECT of exactly one %s column", r.ContextKey(), s.col.cqlType)
			}
			col, rc = s.col, r
		}
	}
	if col == nil {
		return invalid("custom payload %s needs a SELECT of one column of its type", keys[0])
	}
	if len(rows) > 1 {
		return invalid("custom payload %s needs a SELECT of one partition", rc.ContextKey())
	}
	reply[rc.ContextKey()] = []byte{}
	if len(rows) == 0 {
		return nil
	}
	for _, c := range rows[0].Cells {
		if c.Column == col.name && !c.Tombstone {
			v, err := rc.ContextOf(c)
			if err != nil {
				return err
			}
			reply[rc.ContextKey()] = v
		}
	}
	return nil
}

// deleteContext leads a DELETE carrying a reset context: one column of a
// ReadContext type, deleted through the counter write path with the
// context. handled is false when the request carries no context.
func (e *Executor) deleteContext(ctx context.Context, t *tableInfo, w write, cl coordinator.ConsistencyLevel, payload map[string][]byte) (handled bool, err error) {
	keys := askedContexts(payload)
	if len(keys) == 0 {
		return false, nil
	}
	if len(w.columns) != 1 {
		return true, invalid("custom payload %s needs a DELETE of exactly one column", keys[0])
	}
	c, err := t.column(w.columns[0])
	if err != nil {
		return true, err
	}
	rc, asked := contextKeyOf(c, payload)
	if !asked {
		return true, invalid("custom payload %s needs a DELETE of a column of its type", keys[0])
	}
	u := coltype.Update{Table: w.table, Key: w.key, Column: c.name, Delete: true, Context: payload[rc.ContextKey()], Element: w.element, Timestamp: e.opts.Now().UnixMicro()}
	return true, e.b.CounterWrite(ctx, u, cl)
}
