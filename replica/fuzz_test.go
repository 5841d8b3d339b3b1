package replica

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
)

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

// FuzzDecodeInDoubt feeds arbitrary bytes, with a valid checksum appended
// (so that the fuzzer gets past it), to the decoder of the in_doubt file:
// it must not panic, and what decodes encodes to bytes that decode to the
// same.
func FuzzDecodeInDoubt(f *testing.F) {
	valid := encodeInDoubt(inDoubtState{
		covered: map[counters.ID]int64{{1}: 7, {2}: 9},
		ops: []coltype.InDoubtOp{{Table: 3, Key: []byte("k"), Column: "c", OpID: [16]byte{4}, OpTime: 5, CounterID: counters.ID{1}, Clock: 6, Delta: -2},
			{Table: 3, Key: nil, Column: "", OpTime: 1}},
	})
	f.Add(valid[:len(valid)-4])
	withSettled := encodeInDoubt(inDoubtState{
		covered: map[counters.ID]int64{{1}: 7},
		settled: []settledOp{{op: coltype.InDoubtOp{Table: 3, Key: []byte("k"), Column: "c", OpID: [16]byte{5}, OpTime: 2, CounterID: counters.ID{1}, Clock: 3, Delta: 1}, kept: true, until: 99}},
	})
	f.Add(withSettled[:len(withSettled)-4])
	// A version 1 body: the version 2 one without the settled count.
	v1 := append([]byte(inDoubtMagicV1), valid[len(inDoubtMagic):len(valid)-5]...)
	f.Add(v1)
	f.Add([]byte(inDoubtMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		b := binary.BigEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, inDoubtCRC))
		s, err := decodeInDoubt(b)
		if err != nil {
			return
		}
		again, err := decodeInDoubt(encodeInDoubt(s))
		if err != nil {
			t.Fatalf("%x decodes, and its re-encoding does not: %v", b, err)
		}
		if !bytes.Equal(encodeInDoubt(s), encodeInDoubt(again)) {
			t.Fatalf("%x decodes to %+v, re-encoded to %+v", b, s, again)
		}
	})
}
