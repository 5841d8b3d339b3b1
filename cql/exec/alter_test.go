package exec

import (
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// TestAlterColumns: ALTER TABLE ... ADD / DROP answer Cassandra's errors;
// a valid change is refused with a message saying so, and the table is
// unchanged.
func TestAlterColumns(t *testing.T) {
	h := newHarness(t)
	h.setup()
	for _, c := range []struct {
		q    string
		code frame.ErrorCode
		msg  string
	}{
		{`ALTER TABLE ks.t ADD v int`, frame.ErrConfig, `ks.t: Cannot have a non counter column ("v") in a counter table`},
		{`ALTER TABLE ks.t ADD (e counter, v map<text, int>)`, frame.ErrConfig, `Cannot have a non counter column ("v")`},
		{`ALTER TABLE ks.t ADD v countr`, frame.ErrInvalid, "Unknown type ks.countr"},
		{`ALTER TABLE ks.t ADD c counter`, frame.ErrInvalid, "Column with name 'c' already exists"},
		{`ALTER TABLE ks.t ADD k counter`, frame.ErrInvalid, "Column with name 'k' already exists"},
		{`ALTER TABLE ks.t DROP k`, frame.ErrInvalid, "Cannot drop PRIMARY KEY column k"},
		{`ALTER TABLE ks.t DROP (d, nope)`, frame.ErrInvalid, "Column nope was not found in table ks.t"},
		{`ALTER TABLE ks.nope ADD x counter`, frame.ErrInvalid, "Table 'ks.nope' doesn't exist"},
		{`ALTER TABLE nosuchks.t ADD x counter`, frame.ErrInvalid, "Keyspace 'nosuchks' doesn't exist"},
		{`ALTER TABLE ks.t ADD e counter`, frame.ErrInvalid, "idemkv does not add or drop columns"},
		{`ALTER TABLE ks.t DROP d`, frame.ErrInvalid, "idemkv does not add or drop columns"},
	} {
		wantErr(t, h.queryErr(c.q), c.code, c.msg)
	}
	if def, _ := h.f.sch.Table("ks", "t"); len(def.Columns) != 2 || def.Revision != 0 {
		t.Errorf("the table changed: %+v", def)
	}
}
