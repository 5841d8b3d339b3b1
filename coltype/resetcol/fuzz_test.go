package resetcol

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/idemkv/idemkv/counters/reset"
	"github.com/idemkv/idemkv/row"
)

// seeds are real encodings of every kind, the fuzzers' seed corpus.
func seeds(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	blobs := sampleBlobs(f, rand.New(rand.NewPCG(1, 2)))
	blobs = append(blobs, sampleBlobsOf(f, rand.New(rand.NewPCG(3, 4)), true)...)
	for _, b := range blobs {
		out = append(out, mustEncode(f, b))
		for p, o := range b.Out {
			out = append(out, EncodeSync(Sync{From: b.State.Self(), To: p, Ack: 1, Ops: o.Pending()}))
		}
	}
	st := reset.NewCounter(id(1))
	op, _ := st.Inc("", 2)
	p, _ := op.MarshalBinary()
	out = append(out, EncodeOp(id(1), EncodeChannelOp(p, nil), []Seq{{id(2), 1}, {id(3), 1}}),
		EncodeOp(id(1), EncodeChannelOp(p, &OpRecord{ID: [16]byte{7}, Time: 99}), []Seq{{id(2), 3}}),
		EncodeOp(id(1), nil, nil), nil, []byte{FormatCell}, []byte{FormatOp}, []byte{FormatSync})
	return out
}

// FuzzDecodeCell: bad bytes are an error, never a panic; what decodes
// re-encodes to the same bytes.
func FuzzDecodeCell(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		b, err := DecodeCell(v)
		if err != nil {
			return
		}
		enc, err := EncodeCell(b)
		if err != nil {
			t.Fatalf("a decoded cell does not encode: %v", err)
		}
		if !bytes.Equal(enc, v) {
			t.Fatalf("re-encoding differs:\n%x\n%x", v, enc)
		}
		_, _ = Type{}.Value(row.Cell{Value: v})
		_, _ = MapType{}.MapValue(row.Cell{Value: v})
		_, _ = Type{}.ContextOf(row.Cell{Value: v})
	})
}

// FuzzDecodeOp: bad bytes are an error, never a panic; what decodes
// re-encodes to the same bytes.
func FuzzDecodeOp(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		o, p, seqs, err := DecodeOp(v)
		if err != nil {
			return
		}
		if enc := EncodeOp(o, p, seqs); !bytes.Equal(enc, v) {
			t.Fatalf("re-encoding differs:\n%x\n%x", v, enc)
		}
	})
}

// FuzzDecodeChannelOp: bad bytes are an error, never a panic.
func FuzzDecodeChannelOp(f *testing.F) {
	st := reset.NewCounter(id(1))
	op, _ := st.Inc("", 2)
	p, _ := op.MarshalBinary()
	f.Add(EncodeChannelOp(p, nil))
	f.Add(EncodeChannelOp(p, &OpRecord{ID: [16]byte{7}, Time: 99}))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, v []byte) {
		o, rec, err := DecodeChannelOp(v)
		if err != nil {
			return
		}
		enc, err := o.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded op does not encode: %v", err)
		}
		if again := EncodeChannelOp(enc, rec); !bytes.Equal(again, v) {
			t.Fatalf("re-encoding differs:\n%x\n%x", v, again)
		}
	})
}

// FuzzDecodeSync: bad bytes are an error, never a panic; what decodes
// re-encodes to the same bytes.
func FuzzDecodeSync(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		s, err := DecodeSync(v)
		if err != nil {
			return
		}
		if enc := EncodeSync(s); !bytes.Equal(enc, v) {
			t.Fatalf("re-encoding differs:\n%x\n%x", v, enc)
		}
	})
}
