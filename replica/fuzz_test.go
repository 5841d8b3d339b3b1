package replica

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"maps"
	"reflect"
	"slices"
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
	state := inDoubtState{
		covered: map[counters.ID]int64{{1}: 7, {2}: 9},
		ops: []coltype.InDoubtOp{{Table: 3, Key: []byte("k"), Column: "c", OpID: [16]byte{4}, OpTime: 5, CounterID: counters.ID{1}, Clock: 6, Delta: -2,
			CountedBy: []counters.ID{{8}, {9}}},
			{Table: 3, Key: nil, Column: "", OpTime: 1}},
	}
	valid := encodeInDoubt(state)
	f.Add(valid[:len(valid)-4])
	withSettled := encodeInDoubt(inDoubtState{
		covered: map[counters.ID]int64{{1}: 7},
		settled: []settledOp{{op: coltype.InDoubtOp{Table: 3, Key: []byte("k"), Column: "c", OpID: [16]byte{5}, OpTime: 2, CounterID: counters.ID{1}, Clock: 3, Delta: 1}, kept: true, until: 99}},
	})
	f.Add(withSettled[:len(withSettled)-4])
	for _, v := range []int{1, 2} {
		b := encodeInDoubtVersion(v, state)
		f.Add(b[:len(b)-4])
	}
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

// encodeInDoubtVersion encodes an in_doubt file as an earlier version
// wrote it: version 1 without the settled updates, versions 1 and 2
// without the other leaders of an update in doubt.
func encodeInDoubtVersion(version int, s inDoubtState) []byte {
	b := []byte(map[int]string{1: inDoubtMagicV1, 2: inDoubtMagicV2}[version])
	ids := slices.SortedFunc(maps.Keys(s.covered), func(a, b counters.ID) int { return a.Compare(b) })
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = append(b, id[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(s.covered[id]))
	}
	b = binary.AppendUvarint(b, uint64(len(s.ops)))
	for _, op := range s.ops {
		b = appendInDoubtOp(b, op)
	}
	if version == 2 {
		b = binary.AppendUvarint(b, uint64(len(s.settled)))
		for _, o := range s.settled {
			b = appendInDoubtOp(b, o.op)
			b = append(b, map[bool]byte{false: 0, true: 1}[o.kept])
			b = binary.BigEndian.AppendUint64(b, uint64(o.until))
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, inDoubtCRC))
}

// TestDecodeInDoubtEarlierVersions: the files of versions 1 and 2 decode to
// what they hold, without what later versions added.
func TestDecodeInDoubtEarlierVersions(t *testing.T) {
	op := coltype.InDoubtOp{Table: 3, Key: []byte("k"), Column: "c", OpID: [16]byte{4}, OpTime: 5, CounterID: counters.ID{1}, Clock: 6, Delta: -2,
		CountedBy: []counters.ID{{8}}}
	settled := settledOp{op: coltype.InDoubtOp{Table: 3, Key: []byte("k2"), Column: "c", OpID: [16]byte{5}, OpTime: 2, CounterID: counters.ID{1}, Clock: 3, Delta: 1},
		kept: true, until: 99}
	s := inDoubtState{covered: map[counters.ID]int64{{1}: 7}, ops: []coltype.InDoubtOp{op}, settled: []settledOp{settled}}
	withoutLeaders := op
	withoutLeaders.CountedBy = nil
	for _, tc := range []struct {
		version int
		want    inDoubtState
	}{
		{1, inDoubtState{covered: s.covered, ops: []coltype.InDoubtOp{withoutLeaders}}},
		{2, inDoubtState{covered: s.covered, ops: []coltype.InDoubtOp{withoutLeaders}, settled: s.settled}},
	} {
		got, err := decodeInDoubt(encodeInDoubtVersion(tc.version, s))
		if err != nil {
			t.Fatalf("version %d: %v", tc.version, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("version %d decodes to %+v, want %+v", tc.version, got, tc.want)
		}
	}
	got, err := decodeInDoubt(encodeInDoubt(s))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("version 3 decodes to %+v, want %+v", got, s)
	}
}
