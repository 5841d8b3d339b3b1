package commitlog

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemkv/idemkv/vfs"
)

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add((&Record{Kind: PayloadShard}).AppendBinary(nil))
	f.Add((&Record{Table: 1, Key: []byte("k"), Column: "c", Kind: PayloadDelta, Payload: []byte{1, 2, 3},
		Timestamp: -1, HasOp: true, OpID: [16]byte{1}, OpTime: 99}).AppendBinary(nil))
	f.Add((&Record{Kind: PayloadTombstone, Key: bytes.Repeat([]byte{0xff}, 40)}).AppendBinary(nil))
	f.Add((&Record{Kind: PayloadShard, HasOp: true, Led: true, Delta: -5, Compensation: true}).AppendBinary(nil))
	f.Add((&Record{Kind: PayloadShard, HasOp: true, Led: true, Delta: 3, Carried: []CarriedOp{{OpID: [16]byte{9}, Delta: 2, Clock: 4}, {Compensation: true}}}).AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if again := r.AppendBinary(nil); !bytes.Equal(again, b) {
			t.Fatalf("decode/encode not canonical:\n in %x\nout %x", b, again)
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded record does not validate: %v", err)
		}
	})
}

// segmentBody returns frames for a few records, used as fuzz seeds.
func segmentBody(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		r := Record{Table: uint64(i), Key: []byte{byte(i)}, Kind: PayloadShard, Payload: bytes.Repeat([]byte{byte(i)}, i*7),
			HasOp: i%2 == 0, OpTime: int64(i)}
		b = appendFrame(b, &r)
	}
	return b
}

// fuzzSegSize is the SegmentSize FuzzSegmentReplay opens with.
const fuzzSegSize = vfs.PageSize

func FuzzSegmentReplay(f *testing.F) {
	body := segmentBody(4)
	f.Add(true, false, body)
	f.Add(true, true, body)
	f.Add(true, false, body[:len(body)-5])
	f.Add(true, false, append(bytes.Clone(body), make([]byte, 64)...))
	mid := bytes.Clone(body)
	mid[30] ^= 0xff
	f.Add(true, false, mid)
	f.Add(true, true, mid)
	f.Add(false, false, append(appendHeader(nil, 1), body...))
	f.Add(false, false, []byte("IDCL"))
	f.Add(true, false, []byte{0, 0, 0, 0, 0, 0, 0, 0})
	// A mapped segment that did not close: frames, then zeros to exactly
	// fuzzSegSize bytes.
	pre := append(bytes.Clone(body), make([]byte, fuzzSegSize-HeaderSize-len(body))...)
	f.Add(true, false, pre)
	// A hole: a page of zeros between frames (pages persisted out of order).
	var big []byte
	for i := 0; i < 6; i++ {
		r := Record{Table: uint64(i), Key: []byte{byte(i)}, Kind: PayloadShard, Payload: bytes.Repeat([]byte{byte(i + 1)}, 1500)}
		big = appendFrame(big, &r)
	}
	holed := bytes.Clone(big)
	clear(holed[vfs.PageSize-HeaderSize : 2*vfs.PageSize-HeaderSize])
	f.Add(true, false, holed)
	f.Fuzz(func(t *testing.T, withHeader, skip bool, data []byte) {
		if withHeader {
			data = append(appendHeader(nil, 1), data...)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, SegmentName(1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		replay := func(p Position, r Record) error {
			if p.Segment != 1 || p.Offset < HeaderSize || p.Offset+FrameOverhead > int64(len(data)) {
				t.Fatalf("replayed position %v outside the %d-byte file", p, len(data))
			}
			rem := data[p.Offset:]
			n := int64(binary.BigEndian.Uint32(rem))
			if binary.BigEndian.Uint32(rem[4:]) != crc(rem[:4]) || n+FrameOverhead > int64(len(rem)) ||
				binary.BigEndian.Uint32(rem[8+n:]) != crc(rem[8:8+n]) {
				t.Fatalf("replayed a record at %v whose checksums fail", p)
			}
			if !bytes.Equal(r.AppendBinary(nil), rem[8:8+n]) {
				t.Fatalf("replayed record at %v differs from its bytes", p)
			}
			return nil
		}
		// write(2): the new segment Open starts need not be preallocated
		// for every input.
		l, err := Open(Options{Dir: dir, SkipCorrupt: skip, SegmentSize: fuzzSegSize, Access: AccessStandard, Logger: quietLogger()}, replay)
		if err != nil {
			return
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
