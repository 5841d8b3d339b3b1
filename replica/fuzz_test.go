package replica

import (
	"bytes"
	"testing"

	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/row"
)

// FuzzDecodeHandoffCell feeds arbitrary bytes to the handoff cell decoder
// (the format the package documentation gives): it must fail cleanly or
// return a tier-0 state; the column type's Merge and Value must agree with
// it, and a decoded message cell must encode back to itself.
func FuzzDecodeHandoffCell(f *testing.F) {
	st := handoff.NewCounter(handoff.ID{1}, 0)
	st.Add(3)
	msg, err := (&handoff.Message{State: st}).MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(encodeHandoffCell(7, msg))
	bare, err := st.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte{handoffCellFormatState, 2}, bare...)) // format 1: a bare state
	f.Add([]byte{})
	f.Add([]byte{handoffCellFormatMessage})
	f.Add([]byte{handoffCellFormatMessage, 0x80})
	f.Add([]byte{9, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		version, c, notices, err := decodeHandoffCell(b)
		hc := handoffCounter{}
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
		if b[0] != handoffCellFormatMessage {
			return
		}
		enc, err := (&handoff.Message{State: c, Notices: notices}).MarshalBinary()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if again := encodeHandoffCell(version, enc); !bytes.Equal(again, b) {
			t.Logf("non-canonical input %x re-encodes as %x", b, again)
		}
	})
}

// FuzzDecodePosition feeds arbitrary bytes to the decoder of the replay
// position an SSTable's user metadata holds.
func FuzzDecodePosition(f *testing.F) {
	f.Add(encodePosition(commitlog.Position{Segment: 3, Offset: 4096}))
	f.Add([]byte{})
	f.Add(make([]byte, 17))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePosition(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodePosition(p), b) {
			t.Fatalf("position %+v re-encodes as %x, not %x", p, encodePosition(p), b)
		}
	})
}
