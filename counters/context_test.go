package counters

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

func id(b byte) ID {
	var x ID
	x[0] = b
	x[15] = b
	return x
}

func TestMergeShardRules(t *testing.T) {
	a := id(1)
	cases := []struct {
		name string
		x, y Shard
		want Shard
	}{
		{"global higher clock wins", Shard{a, 5, 10, Global}, Shard{a, 3, 99, Global}, Shard{a, 5, 10, Global}},
		{"global equal clock higher count", Shard{a, 5, 10, Global}, Shard{a, 5, 12, Global}, Shard{a, 5, 12, Global}},
		{"global beats local", Shard{a, 1, 10, Local}, Shard{a, 1, 3, Global}, Shard{a, 1, 3, Global}},
		{"global beats remote", Shard{a, 9, 10, Remote}, Shard{a, 1, 3, Global}, Shard{a, 1, 3, Global}},
		{"local plus local sums", Shard{a, 1, 10, Local}, Shard{a, 2, 5, Local}, Shard{a, 3, 15, Local}},
		{"local beats remote", Shard{a, 1, 10, Local}, Shard{a, 7, 50, Remote}, Shard{a, 1, 10, Local}},
		{"remote higher clock", Shard{a, 4, 1, Remote}, Shard{a, 7, 0, Remote}, Shard{a, 7, 0, Remote}},
		{"remote equal clock higher count", Shard{a, 7, 1, Remote}, Shard{a, 7, 2, Remote}, Shard{a, 7, 2, Remote}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := MergeShard(c.x, c.y); got != c.want {
				t.Errorf("MergeShard(%v, %v) = %v, want %v", c.x, c.y, got, c.want)
			}
			if got := MergeShard(c.y, c.x); got != c.want {
				t.Errorf("MergeShard(%v, %v) = %v, want %v (reversed)", c.y, c.x, got, c.want)
			}
		})
	}
}

func TestValueSumsAllKinds(t *testing.T) {
	c := FromShards(Shard{id(3), 2, 7, Global}, Shard{id(1), 1, -2, Local}, Shard{id(2), 4, 10, Remote})
	if got := c.Value(); got != 15 {
		t.Fatalf("Value = %d, want 15", got)
	}
	if c.Shards()[0].ID != id(1) || c.Shards()[2].ID != id(3) {
		t.Fatalf("shards not sorted by id: %v", c)
	}
	if cl, n := c.ClockAndCount(id(3)); cl != 2 || n != 7 {
		t.Fatalf("ClockAndCount(3) = %d,%d", cl, n)
	}
	if cl, n := c.ClockAndCount(id(9)); cl != 0 || n != 0 {
		t.Fatalf("ClockAndCount(absent) = %d,%d, want 0,0", cl, n)
	}
}

// TestEncodingMatchesCassandra checks the 36-byte layout of a context with a
// single global shard, as the reference documents it: 00 01 | 80 00 | id |
// clock | count.
func TestEncodingMatchesCassandra(t *testing.T) {
	var x ID
	for i := range x {
		x[i] = byte(i + 1)
	}
	b, err := NewGlobal(x, 2, -5).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("0001" + "8000" + "0102030405060708090a0b0c0d0e0f10" +
		"0000000000000002" + "fffffffffffffffb")
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding\n got %x\nwant %x", b, want)
	}
	// Mixed kinds: remote shards are absent from the header, locals index plainly.
	c := FromShards(Shard{id(1), 1, 1, Remote}, Shard{id(2), 1, 1, Local}, Shard{id(3), 1, 1, Global})
	b, _ = c.MarshalBinary()
	if got := hex.EncodeToString(b[:6]); got != "00020001"+"8002" {
		t.Fatalf("header = %s, want 00020001 8002", got)
	}
}

func randContext(r *rand.Rand, kinds []Kind) Context {
	n := r.IntN(5)
	shards := make([]Shard, n)
	for i := range shards {
		shards[i] = Shard{ID: id(byte(r.IntN(6))), Clock: r.Int64N(4), Count: r.Int64N(7) - 3, Kind: kinds[r.IntN(len(kinds))]}
	}
	// Same id must not carry two kinds in one property run of global-only
	// contexts; FromShards merges duplicates by the rules.
	return FromShards(shards...)
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	r := testseed.Rand(t)
	for i := 0; i < 2000; i++ {
		c := randContext(r, []Kind{Global, Local, Remote})
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != c.EncodedLen() && c.Len() > 0 {
			t.Fatalf("EncodedLen %d, encoding %d bytes", c.EncodedLen(), len(b))
		}
		d, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(%x) of %v: %v", b, c, err)
		}
		if !d.Equal(c) {
			t.Fatalf("round trip: %v became %v", c, d)
		}
	}
}

// TestGlobalMergeIsASemilattice is the property that makes 2.1+ replay,
// replication and compaction safe: merge of global shards is commutative,
// associative and idempotent.
func TestGlobalMergeIsASemilattice(t *testing.T) {
	r := testseed.Rand(t)
	for i := 0; i < 5000; i++ {
		a := randContext(r, []Kind{Global})
		b := randContext(r, []Kind{Global})
		c := randContext(r, []Kind{Global})
		if ab, ba := a.Merge(b), b.Merge(a); !ab.Equal(ba) {
			t.Fatalf("not commutative: %v ∪ %v = %v, reversed %v", a, b, ab, ba)
		}
		if l, rr := a.Merge(b).Merge(c), a.Merge(b.Merge(c)); !l.Equal(rr) {
			t.Fatalf("not associative: %v, %v, %v: %v vs %v", a, b, c, l, rr)
		}
		if aa := a.Merge(a); !aa.Equal(a) {
			t.Fatalf("not idempotent: %v ∪ itself = %v", a, aa)
		}
		if ab := a.Merge(b); !ab.Merge(b).Equal(ab) {
			t.Fatalf("re-applying %v to %v changed it", b, ab)
		}
	}
}

// TestLegacyDeltaReplayOverCounts shows why Cassandra 2.0's commit log was
// unsafe to replay: a logged delta merged twice counts twice, whereas the
// global shard a 2.1 leader logs can be merged any number of times.
func TestLegacyDeltaReplayOverCounts(t *testing.T) {
	node := id(7)
	// 2.0: memtable holds the delta; a replay re-merges the logged delta.
	var legacy Context
	logged := NewLegacyDelta(node, 5)
	legacy = legacy.Merge(logged)
	legacy = legacy.Merge(logged) // replay
	if legacy.Value() != 10 {
		t.Fatalf("legacy replay value = %d, want the over-count 10", legacy.Value())
	}
	// 2.1: the leader logs the resulting shard.
	var global Context
	shard := NewGlobal(node, 1, 5)
	global = global.Merge(shard)
	global = global.Merge(shard) // replay
	if global.Value() != 5 {
		t.Fatalf("2.1 replay value = %d, want 5", global.Value())
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := FromShards(Shard{id(1), 1, 1, Global}, Shard{id(2), 1, 1, Global}).MarshalBinary()
	unsorted, _ := FromShards(Shard{id(1), 1, 1, Remote}, Shard{id(2), 1, 1, Remote}).MarshalBinary()
	copy(unsorted[2:], bytes.Repeat([]byte{9}, 16)) // first id now above the second
	cases := map[string][]byte{
		"one byte":          {0},
		"negative count":    {0xff, 0xff},
		"short header":      {0, 2, 0x80, 0},
		"partial shard":     good[:len(good)-1],
		"header past body":  append([]byte{0, 3}, good[2:]...),
		"unsorted ids":      unsorted,
		"index out of body": {0, 1, 0, 5},
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode(%x) err = %v, want ErrCorrupt", name, b, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	g, _ := NewGlobal(id(1), 3, 4).MarshalBinary()
	m, _ := FromShards(Shard{id(1), 1, 1, Remote}, Shard{id(2), 1, 1, Local}, Shard{id(3), 1, 1, Global}).MarshalBinary()
	f.Add(g)
	f.Add(m)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		// A decoded context re-encodes to the same bytes (the encoding is canonical).
		e, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if len(b) > 0 && !bytes.Equal(e, b) {
			t.Fatalf("Decode(%x) re-encodes as %x", b, e)
		}
	})
}

func TestClearLocal(t *testing.T) {
	c := FromShards(Shard{id(1), 3, 5, Local}, Shard{id(2), 2, 7, Global}, Shard{id(3), 4, 1, Remote})
	r := c.ClearLocal()
	if s, _ := r.Shard(id(1)); s.Kind != Remote || s.Count != 5 || s.Clock != 3 {
		t.Fatalf("local shard after ClearLocal: %+v", s)
	}
	if s, _ := r.Shard(id(2)); s.Kind != Global {
		t.Fatalf("global shard changed kind: %+v", s)
	}
	if c.Shards()[0].Kind != Local {
		t.Fatal("ClearLocal modified its receiver")
	}
	if r.Value() != c.Value() {
		t.Fatalf("value changed: %d vs %d", r.Value(), c.Value())
	}
}

func TestMergeEncodedMatchesMerge(t *testing.T) {
	r := testseed.Rand(t)
	kinds := []Kind{Global, Local, Remote}
	big := func() Context { // up to 10 shards: past MergeEncoded's stack buffers
		shards := make([]Shard, r.IntN(11))
		for i := range shards {
			shards[i] = Shard{ID: id(byte(r.IntN(14))), Clock: r.Int64N(4), Count: r.Int64N(7) - 3, Kind: kinds[r.IntN(len(kinds))]}
		}
		return FromShards(shards...)
	}
	for i := 0; i < 5000; i++ {
		a, b := randContext(r, kinds), randContext(r, kinds)
		if i%2 == 1 {
			a, b = big(), big()
		}
		ea, _ := a.MarshalBinary()
		eb, _ := b.MarshalBinary()
		if r.IntN(10) == 0 {
			ea = nil // an empty cell value
			a = Context{}
		}
		want, err := a.Merge(b).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := MergeEncoded(ea, eb)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("MergeEncoded(%v, %v) = %x, %v; want %x", a, b, got, err, want)
		}
		if len(got) > 0 && len(eb) > 0 && &got[0] == &eb[0] || len(got) > 0 && len(ea) > 0 && &got[0] == &ea[0] {
			t.Fatalf("MergeEncoded returned an input's bytes")
		}
	}
	good, _ := NewGlobal(id(1), 1, 1).MarshalBinary()
	for _, bad := range [][]byte{{0}, {0xff, 0xff}, good[:len(good)-1]} {
		if _, err := MergeEncoded(good, bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("MergeEncoded(good, %x): %v, want ErrCorrupt", bad, err)
		}
		if _, err := MergeEncoded(bad, good); !errors.Is(err, ErrCorrupt) {
			t.Errorf("MergeEncoded(%x, good): %v, want ErrCorrupt", bad, err)
		}
	}
}

// BenchmarkMergeEncoded is a replica merging a leader's new global shard
// into a cell of three shards.
func BenchmarkMergeEncoded(b *testing.B) {
	cell, _ := FromShards(Shard{id(1), 10, 10, Global}, Shard{id(2), 20, 20, Global}, Shard{id(3), 30, 30, Global}).MarshalBinary()
	shard, _ := NewGlobal(id(2), 21, 21).MarshalBinary()
	b.Run("decode-merge-marshal", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			x, _ := Decode(cell)
			y, _ := Decode(shard)
			_, _ = x.Merge(y).MarshalBinary()
		}
	})
	b.Run("MergeEncoded", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_, _ = MergeEncoded(cell, shard)
		}
	})
}

func FuzzMergeEncoded(f *testing.F) {
	g, _ := NewGlobal(id(1), 3, 4).MarshalBinary()
	m, _ := FromShards(Shard{id(1), 1, 1, Remote}, Shard{id(2), 1, 1, Local}, Shard{id(3), 1, 1, Global}).MarshalBinary()
	f.Add(g, m)
	f.Add(m, []byte{})
	f.Add([]byte{0xff, 0xff}, g)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		got, err := MergeEncoded(a, b)
		ca, errA := Decode(a)
		cb, errB := Decode(b)
		if (err != nil) != (errA != nil || errB != nil) {
			t.Fatalf("MergeEncoded(%x, %x) err = %v; Decode errs %v, %v", a, b, err, errA, errB)
		}
		if err != nil {
			return
		}
		want, _ := ca.Merge(cb).MarshalBinary()
		if !bytes.Equal(got, want) {
			t.Fatalf("MergeEncoded(%x, %x) = %x, want %x", a, b, got, want)
		}
	})
}

// TestEncodedShard: the shard of an id in an encoded context is the one
// Decode's context holds, for contexts within and beyond the stack buffer,
// a damaged context is an error, and a small one costs no allocation.
func TestEncodedShard(t *testing.T) {
	r := testseed.Rand(t)
	kinds := []Kind{Global, Local, Remote}
	for i := 0; i < 3000; i++ {
		shards := make([]Shard, r.IntN(12))
		for j := range shards {
			shards[j] = Shard{ID: id(byte(r.IntN(14))), Clock: r.Int64N(4), Count: r.Int64N(7) - 3, Kind: kinds[r.IntN(len(kinds))]}
		}
		c := FromShards(shards...)
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		who := id(byte(r.IntN(14)))
		want, wantOK := c.Shard(who)
		got, ok, err := EncodedShard(b, who)
		if err != nil || ok != wantOK || got != want {
			t.Fatalf("EncodedShard(%v, %v) = %v %v %v; want %v %v", c, who, got, ok, err, want, wantOK)
		}
	}
	if _, _, err := EncodedShard([]byte{0, 1, 0x80}, id(1)); err == nil {
		t.Error("a damaged context: no error")
	}
	b, _ := FromShards(Shard{ID: id(1), Clock: 3, Count: 9, Kind: Global}, Shard{ID: id(2), Clock: 1, Count: 1, Kind: Global}).MarshalBinary()
	if n := testing.AllocsPerRun(100, func() { _, _, _ = EncodedShard(b, id(2)) }); n != 0 {
		t.Errorf("EncodedShard of a 2-shard context: %v allocations, want 0", n)
	}
}
