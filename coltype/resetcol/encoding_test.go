package resetcol

import (
	"bytes"
	"encoding/hex"
	"errors"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/idemkv/idemkv/counters/reset"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/row"
)

func id(b byte) reset.ID { return reset.ID{b} }

// sampleBlobs returns blobs of three replicas that exchanged some ops.
func sampleBlobs(t testing.TB, rng *rand.Rand) []*Blob { return sampleBlobsOf(t, rng, false) }

// sampleBlobsOf returns blobs of three replicas of a counter cell, or of
// a map cell (keys a, b, c; resets of one key or of every key), that
// exchanged some ops.
func sampleBlobsOf(t testing.TB, rng *rand.Rand, isMap bool) []*Blob {
	t.Helper()
	ids := []reset.ID{id(1), id(2), id(3)}
	var bs []*Blob
	for _, self := range ids {
		st := reset.NewCounter(self)
		if isMap {
			st = reset.NewMap(self)
		}
		b := &Blob{State: st, Out: map[reset.ID]*reset.Outbox{}, In: map[reset.ID]*reset.Inbox{}}
		for _, p := range ids {
			if p != self {
				b.Out[p], b.In[p] = &reset.Outbox{}, &reset.Inbox{}
			}
		}
		bs = append(bs, b)
	}
	for range 30 {
		i := rng.IntN(3)
		var op reset.Op
		var err error
		key := ""
		if isMap {
			key = []string{"a", "b", "c"}[rng.IntN(3)]
		}
		switch {
		case isMap && rng.IntN(8) == 0:
			op, err = bs[i].State.ResetAll()
		case rng.IntN(4) == 0:
			op, err = bs[i].State.ResetKey(key)
		default:
			op, err = bs[i].State.Inc(key, int64(1+rng.IntN(3)))
		}
		if err != nil {
			t.Fatal(err)
		}
		p, err := op.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		bs[i].Gen++
		bs[i].Version++
		if op.Kind == reset.OpInc && rng.IntN(2) == 0 {
			remember(bs[i], OpRecord{ID: [16]byte{byte(rng.IntN(256)), byte(rng.IntN(256))}, Time: rng.Int64N(1 << 40)})
		}
		for j, b := range bs {
			if j == i {
				continue
			}
			e := bs[i].Out[ids[j]].Push(p)
			if rng.IntN(3) > 0 { // delivered, else left pending
				b.In[ids[i]].Receive(e)
				for {
					q, ok := b.In[ids[i]].Next()
					if !ok {
						break
					}
					var o reset.Op
					if err := o.UnmarshalBinary(q); err != nil {
						t.Fatal(err)
					}
					if err := b.State.Apply(o); err != nil {
						t.Fatal(err)
					}
				}
				b.Version++
			}
		}
	}
	return bs
}

func TestCellRoundTrip(t *testing.T) {
	rng := testseed.Rand(t)
	for _, b := range sampleBlobs(t, rng) {
		enc, err := EncodeCell(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeCell(enc)
		if err != nil {
			t.Fatal(err)
		}
		again, err := EncodeCell(got)
		if err != nil || !bytes.Equal(enc, again) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
		if got.Delivered() != b.Delivered() || got.Pending() != b.Pending() || got.State.Value("") != b.State.Value("") {
			t.Fatal("decoded blob differs")
		}
		for n := range enc {
			if _, err := DecodeCell(enc[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a %d-byte prefix decodes: %v", n, err)
			}
		}
	}
}

// TestMapCellRoundTrip: a map cell encodes under FormatMapCell, decodes to
// the same counters and bytes; its prefixes, and its bytes under the
// counter cell's format byte, are errors.
func TestMapCellRoundTrip(t *testing.T) {
	rng := testseed.Rand(t)
	for _, b := range sampleBlobsOf(t, rng, true) {
		enc, err := EncodeCell(b)
		if err != nil {
			t.Fatal(err)
		}
		if enc[0] != FormatMapCell {
			t.Fatalf("a map cell starts with %d, want FormatMapCell", enc[0])
		}
		got, err := DecodeCell(enc)
		if err != nil {
			t.Fatal(err)
		}
		if got.State.Kind() != reset.KindMap || !maps.Equal(got.State.Values(), b.State.Values()) || got.Delivered() != b.Delivered() {
			t.Fatalf("decoded map cell differs: %v, want %v", got.State.Values(), b.State.Values())
		}
		again, err := EncodeCell(got)
		if err != nil || !bytes.Equal(enc, again) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
		for n := range enc {
			if _, err := DecodeCell(enc[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a %d-byte prefix decodes: %v", n, err)
			}
		}
		wrong := append([]byte{FormatCell}, enc[1:]...)
		if _, err := DecodeCell(wrong); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a map state under FormatCell decodes: %v", err)
		}
		vals, err := MapType{}.MapValue(row.Cell{Column: "m", Value: enc})
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for k, v := range b.State.Values() {
			if vals[k] != int64(v) {
				t.Fatalf("MapValue[%q] = %d, want %d", k, vals[k], v)
			}
			sum += int64(v)
		}
		if len(vals) != len(b.State.Values()) {
			t.Fatalf("MapValue has %d keys, want %d", len(vals), len(b.State.Values()))
		}
		if v, err := (Type{}).Value(row.Cell{Value: enc}); err != nil || v != sum {
			t.Fatalf("Value of a map cell = %d, %v; want the sum %d", v, err, sum)
		}
	}
	// A counter cell under the map format byte is refused too.
	c, err := EncodeCell(sampleBlobs(t, rng)[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeCell(append([]byte{FormatMapCell}, c[1:]...)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a counter state under FormatMapCell decodes: %v", err)
	}
}

// TestMergeIsMaxOfTotalOrder: Merge picks one input whole, and is
// commutative, associative and idempotent; a blob whose delivered vector
// dominates wins.
func TestMergeIsMaxOfTotalOrder(t *testing.T) {
	rng := testseed.Rand(t)
	var cells []row.Cell
	for range 4 {
		for _, b := range sampleBlobs(t, rng) {
			enc, err := EncodeCell(b)
			if err != nil {
				t.Fatal(err)
			}
			cells = append(cells, row.Cell{Column: "c", Value: enc, Timestamp: rng.Int64N(100)})
		}
	}
	cells = append(cells, row.Cell{Column: "c", Tombstone: true, Timestamp: 7})
	m := func(a, b row.Cell) row.Cell {
		c, err := Type{}.Merge(a, b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	same := func(a, b row.Cell) bool {
		return a.Tombstone == b.Tombstone && bytes.Equal(a.Value, b.Value) && a.Timestamp == b.Timestamp
	}
	for _, a := range cells {
		if !same(m(a, a), a) {
			t.Fatal("not idempotent")
		}
		for _, b := range cells {
			ab := m(a, b)
			if !same(ab, m(b, a)) {
				t.Fatal("not commutative")
			}
			if !a.Tombstone && !b.Tombstone && !bytes.Equal(ab.Value, a.Value) && !bytes.Equal(ab.Value, b.Value) {
				t.Fatal("merge made a new state")
			}
			for _, c := range cells[:5] {
				if !same(m(ab, c), m(a, m(b, c))) {
					t.Fatal("not associative")
				}
			}
		}
	}
	// Dominance: a replica that delivered strictly more wins.
	bs := sampleBlobs(t, rng)
	hi := bs[0]
	lo, err := DecodeCell(mustEncode(t, hi))
	if err != nil {
		t.Fatal(err)
	}
	op, err := hi.State.Inc("", 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = op
	hi.Gen++
	hi.Version++
	a := row.Cell{Value: mustEncode(t, hi)}
	b := row.Cell{Value: mustEncode(t, lo)}
	if !bytes.Equal(m(b, a).Value, a.Value) {
		t.Fatal("the dominant state lost")
	}
}

func mustEncode(t testing.TB, b *Blob) []byte {
	t.Helper()
	enc, err := EncodeCell(b)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

func TestOpAndSyncRoundTrip(t *testing.T) {
	st := reset.NewCounter(id(1))
	op, err := st.Inc("", 3)
	if err != nil {
		t.Fatal(err)
	}
	p, err := op.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rec := &OpRecord{ID: [16]byte{9}, Time: 12345}
	ch := EncodeChannelOp(p, rec)
	v := EncodeOp(id(1), ch, []Seq{{id(3), 4}, {id(2), 5}})
	o, q, seqs, err := DecodeOp(v)
	if err != nil || o != id(1) || !bytes.Equal(q, ch) || len(seqs) != 2 || seqs[0].Peer != id(2) {
		t.Fatalf("op round trip: %v %v %v", o, seqs, err)
	}
	if got, r, err := DecodeChannelOp(q); err != nil || r == nil || *r != *rec || got.W != 3 {
		t.Fatalf("channel op round trip: %+v %v %v", got, r, err)
	}
	if _, _, _, err := DecodeOp(EncodeOp(id(2), EncodeChannelOp(p, nil), []Seq{{id(3), 1}})); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an op of another origin decodes: %v", err)
	}
	if _, _, _, err := DecodeOp(EncodeOp(id(1), p, []Seq{{id(3), 1}})); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a bare op decodes as a channel op: %v", err)
	}
	s := Sync{From: id(1), To: id(2), Ack: 9, Ops: []reset.Envelope{{Seq: 3, Payload: p}, {Seq: 4, Payload: p}}}
	got, err := DecodeSync(EncodeSync(s))
	if err != nil || got.Ack != 9 || len(got.Ops) != 2 || got.Ops[1].Seq != 4 {
		t.Fatalf("sync round trip: %+v %v", got, err)
	}
}

func TestCheckDelta(t *testing.T) {
	if err := (Type{}).CheckDelta(-1); !errors.Is(err, reset.ErrDecrement) {
		t.Fatalf("decrement: %v", err)
	}
	if err := (Type{}).CheckDelta(2); err != nil {
		t.Fatal(err)
	}
}

// TestCounterCellBytesUnchanged: a reset_counter cell's bytes are those
// the format had before the map form (FormatCell, then the same layout),
// so that existing data directories open; and they decode.
func TestCounterCellBytesUnchanged(t *testing.T) {
	b := &Blob{State: reset.NewCounter(id(1)), Out: map[reset.ID]*reset.Outbox{id(2): {}}, In: map[reset.ID]*reset.Inbox{id(2): {}}, Version: 3, Gen: 1}
	op, err := b.State.Inc("", 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := op.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b.Out[id(2)].Push(EncodeChannelOp(p, nil))
	enc, err := EncodeCell(b)
	if err != nil {
		t.Fatal(err)
	}
	const golden = "0103013a0101010000000000000000000000000000000101000000000000000000000000000000020100010100000000000000000000000000000002000201020000000000000000000000000000001c0121000117000111010000000000000000000000000000000002020101020000000000000000000000000000000301220000"
	if got := hex.EncodeToString(enc); got != golden {
		t.Fatalf("a counter cell encodes as\n%s\nwas\n%s", got, golden)
	}
	got, err := DecodeCell(enc)
	if err != nil || got.State.Value("") != 2 || got.State.Kind() != reset.KindCounter {
		t.Fatalf("decoded %v, %v", got, err)
	}
}
