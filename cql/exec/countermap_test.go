package exec

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// setupMap creates ks.r (k text PRIMARY KEY, c reset_counter, m map<text, reset_counter>).
func (h *harness) setupMap() {
	h.t.Helper()
	h.query(`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`)
	h.query(`CREATE TABLE ks.r (k text PRIMARY KEY, c reset_counter, m map<text, reset_counter>)`)
}

// mapOf reads ks.r's m of key k as a Go map (nil when null or no row).
func (h *harness) mapOf(k string) map[string]int64 {
	h.t.Helper()
	r := h.rows(`SELECT m FROM ks.r WHERE k = ?`, text_(k))
	if !reflect.DeepEqual(specTypes(r.Columns)["m"], mapValueType) {
		h.t.Fatalf("m is typed %+v, want map<text, bigint>", r.Columns)
	}
	if len(r.Rows) == 0 || r.Rows[0][0].Null {
		return nil
	}
	return decodeMap(h.t, r.Rows[0][0].Bytes)
}

func decodeMap(t testing.TB, b []byte) map[string]int64 {
	t.Helper()
	ks, vs, err := frame.DecodeMap(b)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for i := range ks {
		if i > 0 && string(ks[i-1]) >= string(ks[i]) {
			t.Fatalf("map keys not ascending: %q", ks)
		}
		v, err := frame.DecodeBigint(vs[i])
		if err != nil {
			t.Fatal(err)
		}
		out[string(ks[i])] = v
	}
	return out
}

func encodeMap(m map[string]int64) frame.Value {
	var ks, vs [][]byte
	for _, k := range slices.Sorted(maps.Keys(m)) { // in key order: the test checks the order of the updates
		ks, vs = append(ks, []byte(k)), append(vs, frame.EncodeBigint(m[k]))
	}
	return frame.Bytes(frame.EncodeMap(ks, vs))
}

func wantMap(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%s: m = %v, want %v", what, got, want)
	}
}

func TestMapOfCountersDDL(t *testing.T) {
	h := newHarness(t)
	h.setupMap()
	def, ok := h.f.sch.Table("ks", "r")
	if !ok {
		t.Fatal("no table")
	}
	if c, _ := def.Column("m"); c.Type != "map<text, reset_counter>" {
		t.Errorf("m's registered type %q", c.Type)
	}
	// varchar keys are text; a map alone in a table is a counter table.
	h.query(`CREATE TABLE ks.only (k int PRIMARY KEY, m map<varchar, reset_counter>)`)
	if def, _ := h.f.sch.Table("ks", "only"); def.Columns[0].Type != "map<text, reset_counter>" {
		t.Errorf("map<varchar, ...> registered as %q", def.Columns[0].Type)
	}
	wantErr(t, h.queryErr(`CREATE TABLE ks.x (k int PRIMARY KEY, m map<int, reset_counter>)`), frame.ErrInvalid, "Counters are not allowed inside collections: map<int, reset_counter>")
	wantErr(t, h.queryErr(`CREATE TABLE ks.x (k int PRIMARY KEY, m map<text, counter>)`), frame.ErrInvalid, "Counters are not allowed inside collections")
	wantErr(t, h.queryErr(`CREATE TABLE ks.x (k int PRIMARY KEY, m map<text, reset_counter>, b bigint)`), frame.ErrInvalid, "Cannot mix counter and non counter columns")
	// A map of bigints is a regular column, of a regular table.
	h.query(`CREATE TABLE ks.x (k int PRIMARY KEY, m map<text, bigint>)`)
	if def, _ := h.f.sch.Table("ks", "x"); def.Columns[0].Type != coltype.RegularType || def.Columns[0].CQL != "map<text, bigint>" {
		t.Errorf("map<text, bigint> defined as %+v", def.Columns[0])
	}
	// system_schema.columns shows the CQL type as written (DESCRIBE reads it).
	r := h.rows(`SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 'r'`)
	types := map[string]string{}
	for _, row := range r.Rows {
		types[string(row[0].Bytes)] = string(row[1].Bytes)
	}
	if types["m"] != "map<text, reset_counter>" || types["c"] != "reset_counter" {
		t.Errorf("system_schema.columns types %v", types)
	}
	// The type as shown parses back to the same column type.
	st, err := parse.Parse(`CREATE TABLE ks.y (k int PRIMARY KEY, m ` + types["m"] + `)`)
	if err != nil {
		t.Fatal(err)
	}
	if name, err := counterTypeName(st.(*parse.CreateTable).Columns[1].Type); name != "map<text, reset_counter>" || err != nil {
		t.Errorf("the shown type reads back as %q, %v", name, err)
	}
}

func TestMapOfCountersUpdateDeleteSelect(t *testing.T) {
	h := newHarness(t)
	h.setupMap()
	h.query(`UPDATE ks.r SET m = m + {'a': 1, 'b': 5} WHERE k = 'x'`)
	h.query(`UPDATE ks.r SET m = m + {'a': ?, 'c': 2}, c = c + 1 WHERE k = ?`, big(2), text_("x"))
	h.query(`UPDATE ks.r SET m = m + ? WHERE k = ?`, encodeMap(map[string]int64{"b": 1, "d": 4, "z": 0}), text_("x"))
	wantMap(t, "after increments", h.mapOf("x"), map[string]int64{"a": 3, "b": 6, "c": 2, "d": 4})
	if v, _ := h.value("ks.r", "c", text_("x")); v != 1 {
		t.Errorf("c = %d, want 1", v)
	}
	// One led update per key, with the key as its element.
	var elems []string
	for _, u := range h.f.updates {
		if u.Column == "m" {
			elems = append(elems, u.Element)
		}
	}
	if strings.Join(elems, ",") != "a,b,a,c,b,d" {
		t.Errorf("map updates' elements %q", elems)
	}

	// SELECT m['a'] and a bound key; an absent key is null.
	r := h.rows(`SELECT m['a'], m[?] AS y, m['nope'] FROM ks.r WHERE k = 'x'`, text_("b"))
	if r.Columns[0].Name != "m['a']" || r.Columns[1].Name != "y" || r.Columns[0].Type.ID != frame.TypeBigint {
		t.Errorf("element columns %+v", r.Columns)
	}
	if a, _ := frame.DecodeBigint(r.Rows[0][0].Bytes); a != 3 {
		t.Errorf("m['a'] = %d, want 3", a)
	}
	if b, _ := frame.DecodeBigint(r.Rows[0][1].Bytes); b != 6 {
		t.Errorf("m[?='b'] = %d, want 6", b)
	}
	if !r.Rows[0][2].Null {
		t.Errorf("m['nope'] is not null")
	}

	// DELETE m['a']: a is gone; a counts again from 0.
	h.query(`DELETE m['a'] FROM ks.r WHERE k = 'x'`)
	wantMap(t, "after DELETE m['a']", h.mapOf("x"), map[string]int64{"b": 6, "c": 2, "d": 4})
	h.query(`UPDATE ks.r SET m = m + {'a': 7} WHERE k = 'x'`)
	wantMap(t, "a again", h.mapOf("x"), map[string]int64{"a": 7, "b": 6, "c": 2, "d": 4})
	// A bound key, two elements in one statement, and a whole column.
	h.query(`DELETE m[?], m['c'] FROM ks.r WHERE k = ?`, text_("b"), text_("x"))
	wantMap(t, "after DELETE m[b], m[c]", h.mapOf("x"), map[string]int64{"a": 7, "d": 4})
	// Deleting a key nobody incremented changes nothing.
	h.query(`DELETE m['never'] FROM ks.r WHERE k = 'x'`)
	wantMap(t, "after DELETE m[never]", h.mapOf("x"), map[string]int64{"a": 7, "d": 4})
	// DELETE m resets every key; the map counts on.
	h.query(`DELETE m FROM ks.r WHERE k = 'x'`)
	if got := h.mapOf("x"); got != nil {
		t.Fatalf("after DELETE m: %v, want null", got)
	}
	h.query(`UPDATE ks.r SET m = m + {'d': 1} WHERE k = 'x'`)
	wantMap(t, "after DELETE m, +1", h.mapOf("x"), map[string]int64{"d": 1})
	// DELETE of the row resets the map and c.
	h.query(`DELETE FROM ks.r WHERE k = 'x'`)
	if got := h.mapOf("x"); got != nil {
		t.Fatalf("after DELETE of the row: %v, want null", got)
	}
	if v, _ := h.value("ks.r", "c", text_("x")); v != 0 {
		t.Errorf("c = %d after DELETE of the row, want 0", v)
	}

	// A counter batch mixes map updates and element deletions.
	h.query(`UPDATE ks.r SET m = m + {'a': 4, 'b': 1} WHERE k = 'x'`)
	h.query(`BEGIN COUNTER BATCH UPDATE ks.r SET m = m + {'b': 2} WHERE k = 'x'; DELETE m['a'] FROM ks.r WHERE k = 'x'; APPLY BATCH`)
	wantMap(t, "after a batch", h.mapOf("x"), map[string]int64{"b": 3})

	// SELECT * and JSON.
	h.query(`UPDATE ks.r SET m = m + {'q': 2, 'p': 1} WHERE k = 'j'`)
	r = h.rows(`SELECT JSON k, m FROM ks.r WHERE k = 'j'`)
	if got := string(r.Rows[0][0].Bytes); got != `{"k": "j", "m": {"p": 1, "q": 2}}` {
		t.Errorf("JSON %s", got)
	}
	r = h.rows(`SELECT * FROM ks.r WHERE k = 'j'`)
	if len(r.Columns) != 3 || r.Columns[2].Name != "m" || !reflect.DeepEqual(r.Columns[2].Type, mapValueType) {
		t.Errorf("SELECT * columns %+v", r.Columns)
	}
}

func TestMapOfCountersRefusals(t *testing.T) {
	h := newHarness(t)
	h.setupMap()
	for _, c := range []struct {
		q    string
		vals []frame.Value
		want string
	}{
		{`UPDATE ks.r SET m = m + {'a': -1} WHERE k = 'x'`, nil, "column m, key 'a': reset_counter columns can only be incremented, got -1"},
		{`UPDATE ks.r SET m = m + {'a': ?} WHERE k = 'x'`, []frame.Value{big(-3)}, "can only be incremented, got -3"},
		{`UPDATE ks.r SET m = m + ? WHERE k = 'x'`, []frame.Value{encodeMap(map[string]int64{"a": -2})}, "can only be incremented, got -2"},
		{`UPDATE ks.r SET m = m - {'a': 1} WHERE k = 'x'`, nil, "Cannot remove from the map of counters m"},
		{`UPDATE ks.r SET m = {'a': 1} WHERE k = 'x'`, nil, "Cannot set the value of counter column m"},
		{`UPDATE ks.r SET m = m + 1 WHERE k = 'x'`, nil, "add a map, m = m + {'key': 1}"},
		{`UPDATE ks.r SET m = m + {'a': 1, 'a': 2} WHERE k = 'x'`, nil, "key 'a' given twice"},
		{`UPDATE ks.r SET m = m + {'': 1} WHERE k = 'x'`, nil, "Invalid empty map key"},
		{`UPDATE ks.r SET m = m + {1: 1} WHERE k = 'x'`, nil, "Invalid INTEGER constant"},
		{`UPDATE ks.r SET m = m + {'a': 'b'} WHERE k = 'x'`, nil, "Invalid STRING constant"},
		{`UPDATE ks.r SET m = m + ? WHERE k = 'x'`, []frame.Value{frame.Null}, "Invalid null value for counter increment"},
		{`UPDATE ks.r SET m = m + ? WHERE k = 'x'`, []frame.Value{frame.Bytes([]byte{0, 0, 0, 1})}, "Invalid map value for m"},
		{`UPDATE ks.r SET c = c + {'a': 1} WHERE k = 'x'`, nil, "Invalid MAP constant"},
		{`DELETE c['a'] FROM ks.r WHERE k = 'x'`, nil, "Invalid element access syntax for non-collection column c"},
		{`DELETE m[?] FROM ks.r WHERE k = 'x'`, []frame.Value{frame.Null}, "Invalid null map key for m"},
		{`DELETE m[''] FROM ks.r WHERE k = 'x'`, nil, "Invalid empty map key"},
		{`SELECT c['a'] FROM ks.r WHERE k = 'x'`, nil, "Invalid element selection: c is not a map"},
	} {
		wantErr(t, h.queryErr(c.q, c.vals...), frame.ErrInvalid, c.want)
	}
	if len(h.f.updates) != 0 {
		t.Errorf("refused statements wrote %d updates", len(h.f.updates))
	}
}

func TestMapOfCountersPreparedAndOpIDs(t *testing.T) {
	h := newHarness(t)
	// The replica prunes op ids older than its window by its own clock.
	h.e.opts.Now = time.Now
	h.setupMap()
	q := `UPDATE ks.r SET m = m + {'a': ?, 'b': 1} WHERE k = ?`
	out, err := h.e.Prepare(ctx, h.sess, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr := out.Result.(frame.PreparedResult)
	want := []frame.ColumnSpec{
		{Keyspace: "ks", Table: "r", Name: "value(m)", Type: frame.Bigint},
		{Keyspace: "ks", Table: "r", Name: "k", Type: frame.Text},
	}
	if !reflect.DeepEqual(pr.Params, want) {
		t.Errorf("params %+v, want %+v", pr.Params, want)
	}
	// A retry with the same op id is dismissed key by key; each key has
	// its own op id.
	for range 2 {
		if _, err := h.e.Execute(ctx, h.sess, pr.ID, params(big(4), text_("p")), opPayload(9, 1)); err != nil {
			t.Fatal(err)
		}
	}
	wantMap(t, "after a retry", h.mapOf("p"), map[string]int64{"a": 4, "b": 1})
	if n := len(h.f.updates); n != 4 {
		t.Fatalf("%d updates, want 4", n)
	}
	if a, b := h.f.updates[0], h.f.updates[1]; !a.HasOp || a.OpID == b.OpID || a.OpID != h.f.updates[2].OpID {
		t.Errorf("op ids: %x %x %x", a.OpID, b.OpID, h.f.updates[2].OpID)
	}
	// A marker for the whole map is typed map<text, bigint>; element markers text.
	for q, want := range map[string][]frame.ColumnSpec{
		`UPDATE ks.r SET m = m + ? WHERE k = ?`: {{Keyspace: "ks", Table: "r", Name: "m", Type: mapValueType}, {Keyspace: "ks", Table: "r", Name: "k", Type: frame.Text}},
		`DELETE m[?] FROM ks.r WHERE k = ?`:     {{Keyspace: "ks", Table: "r", Name: "key(m)", Type: frame.Text}, {Keyspace: "ks", Table: "r", Name: "k", Type: frame.Text}},
		`SELECT m[?] FROM ks.r WHERE k = ?`:     {{Keyspace: "ks", Table: "r", Name: "key(m)", Type: frame.Text}, {Keyspace: "ks", Table: "r", Name: "k", Type: frame.Text}},
	} {
		out, err := h.e.Prepare(ctx, h.sess, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Result.(frame.PreparedResult).Params; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: params %+v, want %+v", q, got, want)
		}
	}
}
