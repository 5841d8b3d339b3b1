package borrow

import (
	"encoding/binary"
	"testing"
)

// hotState is a cell as a hot key holds it under the latency benchmark:
// three permanent nodes, each with its own dot, and clients active at once,
// each counting into a dot one of the nodes lent it.
func hotState(clients int) (*State, []ID, []Dot) {
	s := New()
	nodes := []ID{{1}, {2}, {3}}
	for _, n := range nodes {
		s.Create(n, n)
		_ = s.Inc(n, 1000)
	}
	ids := make([]ID, clients)
	dots := make([]Dot, clients)
	for i := range ids {
		binary.BigEndian.PutUint64(ids[i][:], uint64(i)<<20|0xc1)
		dots[i] = s.Create(nodes[i%len(nodes)], ids[i])
	}
	return s, ids, dots
}

// BenchmarkHotWrite is what a replica does with a client's write to a hot
// cell: decode the stored state, join the write, encode the result.
func BenchmarkHotWrite(b *testing.B) {
	s, ids, dots := hotState(16)
	enc, err := s.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for i := 0; b.Loop(); i++ {
		k := i % len(ids)
		var st State
		if err := st.UnmarshalBinary(enc); err != nil {
			b.Fatal(err)
		}
		st.Join(Write(ids[k], dots[k], Cell{Count: uint64(i)}))
		st.TransferAll(ID{1})
		if enc, err = st.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHotDots lists the dots of a hot cell.
func BenchmarkHotDots(b *testing.B) {
	s, _, _ := hotState(16)
	b.ReportAllocs()
	for b.Loop() {
		if len(s.Dots()) == 0 {
			b.Fatal("no dots")
		}
	}
}
