package handoffcol

import (
	"testing"

	"github.com/idemkv/idemkv/coltype"
)

// TestNoticeRef: the sweep's set keeps a cell by its CellKey alone and
// rebuilds the cell's reference from it, for a cell named by its column
// and for a cell with a composite name (a table with clustering columns).
func TestNoticeRef(t *testing.T) {
	col := &Column{id: coltype.ColumnID{Table: 9, Column: "h"}}
	composite := coltype.CellKey([]byte("ck"), "", "h") + "\x00h" // any name other than the column's
	for _, tc := range []struct{ key, name, wantName string }{
		{"k", "", "h"},
		{"k", "h", "h"},
		{"a longer partition key", composite, composite},
		{"", composite, composite},
	} {
		k := col.id.CellKey([]byte(tc.key), tc.name)
		ref, ok := col.noticeRef(k, noticeCell{composite: col.id.CellName(tc.name) != col.id.Column})
		if !ok || ref.Table != 9 || string(ref.Key) != tc.key || ref.Column != tc.wantName {
			t.Errorf("key %q name %q: got %+v %v, want key %q column %q", tc.key, tc.name, ref, ok, tc.key, tc.wantName)
		}
	}
	if _, ok := col.noticeRef("\xff", noticeCell{composite: true}); ok {
		t.Error("a damaged composite key was accepted")
	}
}
