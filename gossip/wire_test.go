package gossip

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/transport"
)

func randHostID(r *rand.Rand) string { return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()) }

func randState(r *rand.Rand) NodeState {
	s := NodeState{
		HostID:         randHostID(r),
		Addr:           transport.Addr(fmt.Sprintf("127.0.0.%d:7000", r.IntN(250)+1)),
		DC:             "dc1",
		Rack:           fmt.Sprintf("rack%d", r.IntN(3)),
		Status:         statusCodes[1+r.IntN(len(statusCodes)-1)],
		SchemaVersion:  randHostID(r),
		ReleaseVersion: "3.11.4",
		Load:           r.Int64N(1 << 40),
		Generation:     1 + r.Int64N(1<<62),
		Version:        r.Int64N(1 << 40),
	}
	if r.IntN(2) == 0 {
		s.CQLAddr = "127.0.0.1:9042"
	}
	for range r.IntN(20) {
		s.Tokens = append(s.Tokens, int64(r.Uint64()))
	}
	return s
}

// sampleBodies returns valid bodies of every kind, with their decoders.
func sampleBodies(r *rand.Rand) [][]byte {
	var ss []NodeState
	var ds []digest
	for range 1 + r.IntN(4) {
		s := randState(r)
		ss = append(ss, s)
		ds = append(ds, s.digest())
	}
	return [][]byte{encodeSyn(ds), encodeAck(ss, ds), encodeStates(ss), encodeSyn(nil), encodeAck(nil, nil)}
}

func TestWireRoundTrip(t *testing.T) {
	r := testseed.Rand(t)
	for range 200 {
		var ss []NodeState
		var ds []digest
		for range r.IntN(6) {
			s := randState(r)
			ss = append(ss, s)
			ds = append(ds, s.digest())
		}
		gotD, err := decodeSyn(encodeSyn(ds))
		if err != nil || !reflect.DeepEqual(gotD, ds) {
			t.Fatalf("SYN round trip: %v\n got %+v\nwant %+v", err, gotD, ds)
		}
		gotS, gotD, err := decodeAck(encodeAck(ss, ds))
		if err != nil || !reflect.DeepEqual(gotS, ss) || !reflect.DeepEqual(gotD, ds) {
			t.Fatalf("ACK round trip: %v\n got %+v %+v\nwant %+v %+v", err, gotS, gotD, ss, ds)
		}
		gotS, err = decodeStates(encodeStates(ss))
		if err != nil || !reflect.DeepEqual(gotS, ss) {
			t.Fatalf("ACK2 round trip: %v\n got %+v\nwant %+v", err, gotS, ss)
		}
	}
}

// decodeAny decodes body as each message kind; it reports whether any
// accepted it.
func decodeAny(body []byte) (ok bool) {
	if _, err := decodeSyn(body); err == nil {
		ok = true
	}
	if _, _, err := decodeAck(body); err == nil {
		ok = true
	}
	if _, err := decodeStates(body); err == nil {
		ok = true
	}
	return ok
}

func TestDecodeRejectsTruncated(t *testing.T) {
	r := testseed.Rand(t)
	for range 20 {
		for _, body := range sampleBodies(r) {
			kinds := []func([]byte) error{
				func(b []byte) error { _, err := decodeSyn(b); return err },
				func(b []byte) error { _, _, err := decodeAck(b); return err },
				func(b []byte) error { _, err := decodeStates(b); return err },
			}
			// The kind that accepts the whole body must reject every prefix.
			for _, dec := range kinds {
				if dec(body) != nil {
					continue
				}
				for n := 0; n < len(body); n++ {
					err := dec(body[:n])
					if err == nil {
						t.Fatalf("prefix %d/%d of %x accepted", n, len(body), body)
					}
					if !errors.Is(err, ErrMalformed) {
						t.Fatalf("prefix %d: error %v does not wrap ErrMalformed", n, err)
					}
				}
				if dec(append(bytes.Clone(body), 0)) == nil {
					t.Fatalf("trailing byte accepted after %x", body)
				}
			}
		}
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	r := testseed.Rand(t)
	s := randState(r)
	st := encodeStates([]NodeState{s})
	hostEnd := 1 + 1 + 16 // version, count, host id
	cases := map[string][]byte{
		"empty":            nil,
		"unknown version":  append([]byte{2}, st[1:]...),
		"count too large":  {1, 0xff, 0xff, 0x03},
		"count beyond end": {1, 5, 0},
		"overlong varint":  {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"bad status code": func() []byte {
			b := bytes.Clone(st)
			i := hostEnd + len(varint(s.Generation)) + len(varint(s.Version))
			b[i] = 9
			return b
		}(),
		"zero generation": encodeStatesUnchecked(func(s *NodeState) { s.Generation = 0 }, s),
		"bad host id len": {1, 1, 1, 2, 3},
		"padded varint":   {1, 0x80, 0x00},
	}
	for name, b := range cases {
		if _, err := decodeStates(b); err == nil {
			t.Errorf("%s: accepted %x", name, b)
		}
	}
	if _, err := decodeSyn([]byte{1, 1, 0xaa}); err == nil {
		t.Error("truncated digest accepted")
	}
	neg := append(encodeSyn(nil)[:1], 1)
	neg = append(neg, make([]byte, 16)...)
	neg = append(neg, varint(-1)...)
	neg = append(neg, varint(1)...)
	if _, err := decodeSyn(neg); err == nil {
		t.Error("negative generation accepted")
	}
	// Random bytes: never a panic; what is accepted must re-encode to
	// the same bytes (the encoding is canonical).
	accepted := 0
	for range 20000 {
		b := make([]byte, r.IntN(64))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if r.IntN(2) == 0 && len(b) > 0 {
			b[0] = wireVersion
		}
		if decodeAny(b) {
			accepted++
			checkCanonical(t, b)
		}
	}
	// Valid bodies with one to three bytes changed.
	mutated := 0
	for range 3000 {
		for _, body := range sampleBodies(r) {
			b := bytes.Clone(body)
			for range 1 + r.IntN(3) {
				b[r.IntN(len(b))] = byte(r.Uint32())
			}
			if decodeAny(b) {
				mutated++
				checkCanonical(t, b)
			}
		}
	}
	t.Logf("%d random bodies and %d mutated bodies accepted", accepted, mutated)
}

func varint(v int64) []byte { return binary.AppendVarint(nil, v) }

// encodeStatesUnchecked encodes s after f, bypassing validation.
func encodeStatesUnchecked(f func(*NodeState), s NodeState) []byte {
	f(&s)
	return encodeStates([]NodeState{s})
}

// checkCanonical checks that an accepted body re-encodes identically.
func checkCanonical(t testing.TB, b []byte) {
	t.Helper()
	if ds, err := decodeSyn(b); err == nil {
		if got := encodeSyn(ds); !bytes.Equal(got, b) {
			t.Fatalf("SYN %x re-encodes as %x", b, got)
		}
	}
	if ss, ds, err := decodeAck(b); err == nil {
		if got := encodeAck(ss, ds); !bytes.Equal(got, b) {
			t.Fatalf("ACK %x re-encodes as %x", b, got)
		}
	}
	if ss, err := decodeStates(b); err == nil {
		if got := encodeStates(ss); !bytes.Equal(got, b) {
			t.Fatalf("states %x re-encode as %x", b, got)
		}
	}
}

func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 3 {
		for _, b := range sampleBodies(r) {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeAny(b)
		checkCanonical(t, b)
	})
}
