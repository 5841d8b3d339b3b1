package borrowcol

import (
	"bytes"
	"testing"

	"github.com/idemkv/idemkv/counters/borrow"
	"github.com/idemkv/idemkv/row"
)

func seedState() *borrow.State {
	s := borrow.New()
	a, c := borrow.ID{1}, borrow.ID{0xcc}
	s.Create(a, a)
	_ = s.Inc(a, 3)
	d := s.Create(a, c)
	s.Join(borrow.Write(c, d, borrow.Cell{Count: 2}))
	return s
}

// FuzzDecodeCell feeds arbitrary bytes to the cell decoder: it fails
// cleanly or returns a state that encodes back to the same bytes (the
// encoding is canonical), and Check, Value and Merge agree with it.
func FuzzDecodeCell(f *testing.F) {
	enc, err := seedState().MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	empty, _ := borrow.New().MarshalBinary()
	f.Add(enc)
	f.Add(empty)
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 1, 0x80})
	f.Add(append(enc, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeCell(b)
		cell := row.Cell{Column: "c", Value: b, Timestamp: 1}
		_, verr := Type{}.Value(cell)
		if cerr := (Type{}).Check(b); (err == nil) != (cerr == nil) || (err == nil) != (verr == nil) {
			t.Fatalf("decode %v, Check %v, Value %v disagree", err, cerr, verr)
		}
		if err != nil {
			return
		}
		again, err := EncodeCell(s)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encode: %x, %v; want %x", again, err, b)
		}
		if m, err := (Type{}).Merge(cell, cell); err != nil || !bytes.Equal(m.Value, b) {
			t.Fatalf("Merge of a cell with itself: %x, %v", m.Value, err)
		}
	})
}

// FuzzDecodePayload feeds arbitrary bytes to the exchange payload decoder:
// it fails cleanly or returns a payload of a known kind whose encoding is
// the input.
func FuzzDecodePayload(f *testing.F) {
	f.Add(EncodeBorrow(borrow.ID{0xcc}))
	w, _ := EncodeWrite(borrow.Write(borrow.ID{0xcc}, borrow.Dot{Creator: borrow.ID{1}, Seq: 2}, borrow.Cell{Frozen: true, Count: 7}))
	f.Add(w)
	st, _ := EncodeState(seedState())
	f.Add(st)
	f.Add([]byte{PayloadVersion, 9})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePayload(b)
		if err != nil {
			return
		}
		var again []byte
		switch p.Kind {
		case KindBorrow:
			again = EncodeBorrow(p.Client)
		case KindWrite:
			again, err = EncodeWrite(p.State)
		case KindState:
			again, err = EncodeState(p.State)
		default:
			t.Fatalf("kind %d decoded", p.Kind)
		}
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encode: %x, %v; want %x", again, err, b)
		}
	})
}
