package handoffcol

import (
	"bytes"
	"testing"

	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/row"
)

// FuzzDecodeHandoffCell feeds arbitrary bytes to the handoff cell decoder
// (the format TypeName documents): it must fail cleanly or
// return a tier-0 state; the column type's Merge and Value must agree with
// it, and a decoded message cell must encode back to itself.
func FuzzDecodeHandoffCell(f *testing.F) {
	st := handoff.NewCounter(handoff.ID{1}, 0)
	st.Add(3)
	msg, err := (&handoff.Message{State: st}).MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(EncodeCell(7, msg))
	bare, err := st.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte{CellFormatState, 2}, bare...)) // format 1: a bare state
	f.Add([]byte{})
	f.Add([]byte{CellFormatMessage})
	f.Add([]byte{CellFormatMessage, 0x80})
	f.Add([]byte{9, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		version, c, notices, err := DecodeCell(b)
		hc := Type{}
		cell := row.Cell{Column: "h", Value: b, Timestamp: 1}
		_, verr := hc.Value(cell)
		if cerr := hc.Check(b); (err == nil) != (cerr == nil) || (err == nil) != (verr == nil) {
			t.Fatalf("decode %v, Check %v, Value %v disagree", err, cerr, verr)
		}
		if err != nil {
			return
		}
		if c.Tier() != 0 {
			t.Fatalf("decoded a tier-%d state", c.Tier())
		}
		if m, err := hc.Merge(cell, cell); err != nil || !bytes.Equal(m.Value, b) {
			t.Fatalf("Merge of a cell with itself: %x, %v", m.Value, err)
		}
		if b[0] != CellFormatMessage {
			return
		}
		enc, err := (&handoff.Message{State: c, Notices: notices}).MarshalBinary()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if again := EncodeCell(version, enc); !bytes.Equal(again, b) {
			t.Logf("non-canonical input %x re-encodes as %x", b, again)
		}
	})
}
