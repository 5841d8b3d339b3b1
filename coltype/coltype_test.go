package coltype_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/row"
)

// plain is a column type with no capability: every default applies.
type plain struct{ name string }

func (p plain) Name() string                        { return p.name }
func (plain) Merge(a, b row.Cell) (row.Cell, error) { return a, nil }
func (plain) Value(row.Cell) (int64, error)         { return 0, nil }
func (plain) ReadRule() coltype.ReadRule            { return coltype.ReadNoRepair }
func (plain) CQLType() string                       { return "bigint" }
func (plain) CheckDelta(d int64) error              { return nil }
func (plain) CheckDelete(string) error              { return errors.New("no") }
func (plain) Delete(coltype.Leader, coltype.Deletion) (coltype.Mutation, error) {
	return coltype.Mutation{}, nil
}

type bare struct{}

func (bare) Name() string                          { return "coltype_test_bare" }
func (bare) Merge(a, b row.Cell) (row.Cell, error) { return a, nil }
func (bare) Value(row.Cell) (int64, error)         { return 0, nil }

// option is a table option that asks for the first leader and deduplicates.
type option struct{}

func (option) Name() string                                 { return "coltype_test_option" }
func (option) ParseCQL(m map[string]string) (string, error) { return "{}", nil }
func (option) Check(_ coltype.TableDef, v string) error {
	if v != "{}" {
		return errors.New("bad option value")
	}
	return nil
}
func (option) LeaderRule(string) (coltype.LeaderRule, coltype.RuleSource) {
	return coltype.LeaderFirst, coltype.RuleDesignDefault
}
func (option) Deduplicates(string) bool { return true }

func init() {
	coltype.MustRegister(plain{"coltype_test_plain"})
	coltype.MustRegister(bare{})
	if err := coltype.RegisterOption(option{}); err != nil {
		panic(err)
	}
}

func TestRegistry(t *testing.T) {
	if err := coltype.Register(plain{"coltype_test_plain"}); err == nil {
		t.Error("a second registration of a name: no error")
	}
	if err := coltype.RegisterOption(option{}); err == nil {
		t.Error("a second registration of an option: no error")
	}
	ct, ok := coltype.Lookup("coltype_test_plain")
	if !ok || ct.Name() != "coltype_test_plain" {
		t.Fatalf("Lookup: %v, %v", ct, ok)
	}
	names := coltype.Names()
	if !strings.Contains(strings.Join(names, ","), "coltype_test_bare,coltype_test_plain") {
		t.Errorf("Names not sorted or incomplete: %v", names)
	}
	if coltype.CQLTypeOf(ct) != "bigint" || coltype.ReadRuleOf(ct) != coltype.ReadNoRepair {
		t.Errorf("capabilities of plain: %s, %v", coltype.CQLTypeOf(ct), coltype.ReadRuleOf(ct))
	}
	b, _ := coltype.Lookup("coltype_test_bare")
	if coltype.CQLTypeOf(b) != "counter" || coltype.ReadRuleOf(b) != coltype.ReadMerge {
		t.Errorf("defaults: %s, %v", coltype.CQLTypeOf(b), coltype.ReadRuleOf(b))
	}
}

func TestValidate(t *testing.T) {
	good := coltype.TableDef{ID: 1, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "coltype_test_plain"}}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mutate func(*coltype.TableDef)
		want   string
	}{
		{func(d *coltype.TableDef) { d.ID = 0 }, "reserved"},
		{func(d *coltype.TableDef) { d.Name = "" }, "required"},
		{func(d *coltype.TableDef) { d.Columns = nil }, "no columns"},
		{func(d *coltype.TableDef) { d.Columns = append(d.Columns, d.Columns[0]) }, "defined twice"},
		{func(d *coltype.TableDef) { d.Columns[0].Type = "nope" }, "unknown type"},
		{func(d *coltype.TableDef) { d.Options = map[string]string{"coltype_test_option": "x"} }, "bad option value"},
	} {
		d := good
		d.Columns = append([]coltype.ColumnDef(nil), good.Columns...)
		tc.mutate(&d)
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error containing %q, got %v", tc.want, err)
		}
	}
	d := good
	d.Options = map[string]string{"coltype_test_option": "{}"}
	if rule, src, dedup := coltype.TableLeaderRule(d); rule != coltype.LeaderFirst || src != coltype.RuleDesignDefault || !dedup {
		t.Errorf("TableLeaderRule: %v %v %v", rule, src, dedup)
	}
	if _, src, dedup := coltype.TableLeaderRule(good); src != coltype.RuleNone || dedup {
		t.Errorf("a table without options: %v %v", src, dedup)
	}
}

func TestUpdateMutation(t *testing.T) {
	u := coltype.Update{Table: 3, Key: []byte("k"), Column: "c", Timestamp: 9, HasOp: true, OpID: [16]byte{1}, OpTime: 5}
	m := u.Mutation([]byte{7})
	if m.Table != 3 || string(m.Key) != "k" || m.Cell.Column != "c" || m.Cell.Timestamp != 9 || !m.HasOp || m.OpID != u.OpID || m.OpTime != 5 {
		t.Errorf("mutation %+v", m)
	}
	if u.RowKey().Token != m.RowKey().Token || string(u.RowKey().Partition) != string(m.RowKey().Partition) {
		t.Errorf("row keys differ: %v, %v", u.RowKey(), m.RowKey())
	}
	d := coltype.Deletion{Key: []byte("k")}
	if d.RowKey().Token != u.RowKey().Token {
		t.Error("a deletion's token differs from the update's")
	}
	if _, err := coltype.ParseLeaderRule("nope"); err == nil {
		t.Error("ParseLeaderRule(nope): no error")
	}
	for _, s := range []string{"first", "random"} {
		if r, err := coltype.ParseLeaderRule(s); err != nil || r.String() != s {
			t.Errorf("ParseLeaderRule(%s) = %v, %v", s, r, err)
		}
	}
}

func TestColumnIDNamesCells(t *testing.T) {
	id := coltype.ColumnID{Table: 7, Column: "c"}
	composite := "\x01a\x00c"
	for _, tc := range []struct {
		name, wantName string
		wantKey        string
	}{
		{"", "c", "k"},
		{"c", "c", "k"},
		{composite, composite, coltype.CellKey([]byte("k"), composite, "c")},
	} {
		if got := id.CellName(tc.name); got != tc.wantName {
			t.Errorf("CellName(%q) = %q, want %q", tc.name, got, tc.wantName)
		}
		if got := id.CellKey([]byte("k"), tc.name); got != tc.wantKey {
			t.Errorf("CellKey(k, %q) = %q, want %q", tc.name, got, tc.wantKey)
		}
		if got := id.CellRef([]byte("k"), tc.name); got.Table != 7 || string(got.Key) != "k" || got.Column != tc.wantName {
			t.Errorf("CellRef(k, %q) = %+v", tc.name, got)
		}
	}
	if id.CellKey([]byte("k"), composite) == id.CellKey([]byte("k"), "") {
		t.Error("a row's cell and the partition's cell share a key")
	}
	// A reference owns its key: the request's buffer may be reused or
	// must not be kept alive by it.
	buf := []byte("k and the rest of a frame")
	ref := id.CellRef(buf[:1], "")
	buf[0] = 'x'
	if string(ref.Key) != "k" || cap(ref.Key) > 8 {
		t.Errorf("CellRef shares its key's buffer: %q (cap %d)", ref.Key, cap(ref.Key))
	}
}
