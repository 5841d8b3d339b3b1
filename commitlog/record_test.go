package commitlog

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	rng := testRand(t)
	for i := 0; i < 2000; i++ {
		rec := randRecord(rng, 200)
		b, err := rec.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary: %v", err)
		}
		if len(b) != rec.EncodedSize() {
			t.Fatalf("encoded %d bytes, EncodedSize says %d", len(b), rec.EncodedSize())
		}
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("DecodeRecord(%x): %v", b, err)
		}
		if !recordsEqual(got, rec) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, rec)
		}
		if again := got.AppendBinary(nil); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b)
		}
		// Every strict prefix fails to decode, as does a trailing byte.
		for n := 0; n < len(b); n++ {
			if _, err := DecodeRecord(b[:n]); err == nil {
				t.Fatalf("prefix of %d/%d bytes decoded", n, len(b))
			}
		}
		if _, err := DecodeRecord(append(b, 0)); err == nil {
			t.Fatal("trailing byte accepted")
		}
	}
}

// TestRecordGolden pins the byte format documented in doc.go.
func TestRecordGolden(t *testing.T) {
	rec := Record{Table: 7, Key: []byte("k"), Column: "c", Kind: PayloadShard, Payload: []byte{0xAA},
		Timestamp: 1, HasOp: true, OpID: [16]byte{0: 1, 15: 2}, OpTime: 3}
	want := "01" + "01" + "01" + "0000000000000007" + "0000000000000001" +
		"00000001" + "6b" + "00000001" + "63" + "00000001" + "aa" +
		"01000000000000000000000000000002" + "0000000000000003"
	if got := hex.EncodeToString(rec.AppendBinary(nil)); got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	rec.Led, rec.Delta, rec.Compensation = true, -2, true
	if got := hex.EncodeToString(rec.AppendBinary(nil)); got != "0101"+"07"+want[6:]+"fffffffffffffffe" {
		t.Fatalf("encoding of a led compensation\n got %s", got)
	}
	rec.Compensation = false
	rec.Carried = []CarriedOp{{OpID: [16]byte{0: 4}, OpTime: 5, Delta: 6, Clock: 7}, {Delta: -1, Compensation: true}}
	wantCarried := "0101" + "0b" + want[6:] + "fffffffffffffffe" + "00000002" +
		"04000000000000000000000000000000" + "0000000000000005" + "0000000000000006" + "0000000000000007" + "00" +
		"00000000000000000000000000000000" + "0000000000000000" + "ffffffffffffffff" + "0000000000000000" + "01"
	if got := hex.EncodeToString(rec.AppendBinary(nil)); got != wantCarried {
		t.Fatalf("encoding of a led record carrying two ops\n got %s\nwant %s", got, wantCarried)
	}
	rec.Led, rec.Carried = false, nil
	rec.HasOp = false
	want = "0101" + "00" + want[6:len(want)-48]
	if got := hex.EncodeToString(rec.AppendBinary(nil)); got != want {
		t.Fatalf("encoding without op\n got %s\nwant %s", got, want)
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	good := (&Record{Kind: PayloadDelta, Key: []byte("key"), Payload: []byte("p")}).AppendBinary(nil)
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// carried changes a led record that carries one op (count at
	// len-4-carriedSize, the op's flags in the last byte).
	carried := func(f func(b []byte) []byte) []byte {
		return f((&Record{Kind: PayloadShard, HasOp: true, Led: true, Carried: []CarriedOp{{Delta: 1}}}).AppendBinary(nil))
	}
	cases := map[string][]byte{
		"empty":            nil,
		"unknown version":  mut(func(b []byte) []byte { b[0] = 2; return b }),
		"kind zero":        mut(func(b []byte) []byte { b[1] = 0; return b }),
		"unknown kind":     mut(func(b []byte) []byte { b[1] = 4; return b }),
		"unknown flag":     mut(func(b []byte) []byte { b[2] = 16; return b }),
		"carried, no led":  mut(func(b []byte) []byte { b[2] = 9; return b }),
		"carried count 0":  carried(func(b []byte) []byte { b[len(b)-4-carriedSize] = 0; return b[:len(b)-carriedSize] }),
		"carried flags":    carried(func(b []byte) []byte { b[len(b)-1] = 2; return b }),
		"carried short":    carried(func(b []byte) []byte { return b[:len(b)-1] }),
		"carried too many": carried(func(b []byte) []byte { b[len(b)-4-carriedSize] = 2; return b }),
		"absurd key len":   mut(func(b []byte) []byte { b[19], b[20] = 0xff, 0xff; return b }),
		"trailing":         append(bytes.Clone(good), 1, 2),
		"op truncated":     mut(func(b []byte) []byte { b[2] = 1; return b }),
		"led without op":   mut(func(b []byte) []byte { b[2] = 2; return b }),
		"comp without led": mut(func(b []byte) []byte { b[2] = 5; return b }),
	}
	for name, b := range cases {
		if _, err := DecodeRecord(b); err == nil {
			t.Errorf("%s: decoded", name)
		} else if !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: error %v does not wrap ErrInvalidRecord", name, err)
		}
	}
	if _, err := (&Record{Kind: 9}).MarshalBinary(); err == nil {
		t.Error("MarshalBinary accepted kind 9")
	}
}

func TestDecodeRecordDoesNotAlias(t *testing.T) {
	b := (&Record{Kind: PayloadShard, Key: []byte("key"), Payload: []byte("payload")}).AppendBinary(nil)
	r, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if string(r.Key) != "key" || string(r.Payload) != "payload" {
		t.Fatalf("decoded record aliases its input: %q %q", r.Key, r.Payload)
	}
}

func TestParseSyncMode(t *testing.T) {
	for _, m := range []SyncMode{SyncPeriodic, SyncBatch, SyncGroup} {
		got, err := ParseSyncMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseSyncMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseSyncMode("sometimes"); err == nil {
		t.Error("ParseSyncMode accepted an unknown mode")
	}
}

func TestSegmentName(t *testing.T) {
	if got := SegmentName(42); got != "CommitLog-1-42.log" {
		t.Fatalf("SegmentName(42) = %q", got)
	}
	for name, ok := range map[string]bool{
		"CommitLog-1-42.log": true, "CommitLog-1-042.log": false, "CommitLog-1-42.log.tmp": false,
		"CommitLog-x-1.log": false, "commitlog-1-1.log": false, "CommitLog-1-.log": false,
	} {
		if _, _, got := parseSegmentName(name); got != ok {
			t.Errorf("parseSegmentName(%q) ok = %v, want %v", name, got, ok)
		}
	}
}
