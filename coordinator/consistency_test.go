package coordinator

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

func eps(spec ...string) []ring.Endpoint {
	var out []ring.Endpoint
	for i, dc := range spec {
		out = append(out, ring.Endpoint{ID: string(rune('a' + i)), DC: dc})
	}
	return out
}

func TestBlockFor(t *testing.T) {
	simple := ring.SimpleStrategy{RF: 3}
	nts := ring.NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3, "dc2": 2}}
	cases := []struct {
		cl   ConsistencyLevel
		s    ring.Strategy
		want int
	}{
		{One, simple, 1}, {Two, simple, 2}, {Three, simple, 3}, {Quorum, simple, 2}, {All, simple, 3},
		{LocalOne, simple, 1}, {LocalQuorum, simple, 2}, {EachQuorum, simple, 2},
		{Quorum, nts, 3}, {All, nts, 5}, {LocalQuorum, nts, 2}, {EachQuorum, nts, 4},
	}
	for _, c := range cases {
		if got := newRequirement(c.cl, c.s, "dc1").blockFor; got != c.want {
			t.Errorf("%s on %v: blockFor %d, want %d", c.cl, c.s, got, c.want)
		}
	}
}

func TestSufficientAndTally(t *testing.T) {
	nts := ring.NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3, "dc2": 2}}
	cases := []struct {
		cl   ConsistencyLevel
		live []ring.Endpoint
		ok   bool
	}{
		{LocalQuorum, eps("dc1", "dc1", "dc2", "dc2"), true},
		{LocalQuorum, eps("dc1", "dc2", "dc2"), false}, // only one local replica
		{LocalOne, eps("dc2", "dc2"), false},
		{EachQuorum, eps("dc1", "dc1", "dc2", "dc2"), true},
		{EachQuorum, eps("dc1", "dc1", "dc1", "dc2"), false}, // dc2 lacks its quorum
		{Quorum, eps("dc1", "dc2", "dc2"), true},
		{All, eps("dc1", "dc1", "dc1", "dc2"), false},
	}
	for _, c := range cases {
		req := newRequirement(c.cl, nts, "dc1")
		err := req.sufficient(c.live)
		var un *UnavailableError
		if c.ok != (err == nil) || (err != nil && !errors.As(err, &un)) {
			t.Errorf("%s with live %v: %v, want ok=%v", c.cl, c.live, err, c.ok)
		}
		// Acks from exactly the live replicas meet the level iff they suffice.
		tl := req.newTally()
		for _, e := range c.live {
			tl.add(e.DC)
		}
		if tl.met() != c.ok {
			t.Errorf("%s: tally of %v met=%v, want %v", c.cl, c.live, tl.met(), c.ok)
		}
	}
}

func TestValidateLevels(t *testing.T) {
	for _, cl := range []ConsistencyLevel{Any, Serial, LocalSerial, 99} {
		var inv *InvalidError
		if err := validateCounterWrite(cl); !errors.As(err, &inv) {
			t.Errorf("counter write at %s: %v, want Invalid", cl, err)
		}
	}
	if err := validateCounterWrite(Any); err.Error() != "Consistency level ANY is not yet supported for counter table" {
		t.Errorf("ANY message %q differs from Cassandra's", err)
	}
	for _, cl := range []ConsistencyLevel{Any, Serial} {
		if validateRead(cl) == nil {
			t.Errorf("read at %s accepted", cl)
		}
	}
	// Cassandra 4.0+ reads at EACH_QUORUM, asking a quorum of every DC.
	if err := validateRead(EachQuorum); err != nil {
		t.Errorf("read at EACH_QUORUM: %v", err)
	}
}

func TestEachQuorumOrder(t *testing.T) {
	nts := ring.NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3, "dc2": 3}}
	req := newRequirement(EachQuorum, nts, "dc1")
	var got []string
	for _, e := range req.order(eps("dc1", "dc1", "dc1", "dc2", "dc2", "dc2")) {
		got = append(got, e.DC)
	}
	// The first blockFor (4) candidates hold a quorum (2) of each DC.
	if want := "dc1 dc1 dc2 dc2 dc1 dc2"; strings.Join(got, " ") != want {
		t.Errorf("EACH_QUORUM candidates %v, want %s", got, want)
	}
}

func TestWireRoundTrips(t *testing.T) {
	u := coltype.Update{Table: 9, Key: []byte("k"), Column: "c", Delta: -4, Timestamp: 77, HasOp: true, OpID: [16]byte{1, 2, 3}, OpTime: 5}
	cl, got, err := DecodeWriteRequest(EncodeWriteRequest(LocalQuorum, u))
	if err != nil || cl != LocalQuorum || got.Delta != -4 || got.OpID != u.OpID || string(got.Key) != "k" || got.OpTime != 5 {
		t.Fatalf("write request round trip: %v %+v %v", cl, got, err)
	}
	for _, want := range []error{nil, &UnavailableError{CL: All, Required: 3, Alive: 2},
		&WriteTimeoutError{CL: Quorum, Received: 1, BlockFor: 2, WriteType: WriteTypeCounter}, &InvalidError{Msg: "bad"},
		&WriteFailureError{CL: All, Received: 1, BlockFor: 3, Failures: 2, FailedReplicas: []string{"h1", "h2"}, WriteType: WriteTypeCounter}} {
		err := DecodeResult(EncodeResult(want))
		if (want == nil) != (err == nil) || (want != nil && err.Error() != want.Error()) {
			t.Errorf("result round trip: %v became %v", want, err)
		}
		if wf, ok := want.(*WriteFailureError); ok && !reflect.DeepEqual(err, wf) {
			t.Errorf("write failure round trip: %+v became %+v", wf, err)
		}
	}
	r := row.Row{Cells: []row.Cell{{Column: "a", Value: []byte{1}}, {Column: "b", Tombstone: true, Timestamp: 3}}}
	back, found, err := DecodeReadResult(row.Key{}, EncodeReadResult(r, true, nil))
	if err != nil || !found || len(back.Cells) != 2 || !back.Cells[1].Tombstone {
		t.Fatalf("read result round trip: %+v %v %v", back, found, err)
	}
}

// FuzzDecode feeds arbitrary bytes to every decoder of the package: none
// may panic, and whatever decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(EncodeWriteRequest(Quorum, coltype.Update{Table: 1, Key: []byte("k"), Column: "c", Delta: 1}))
	f.Add(EncodeMutation(coltype.Mutation{Table: 1, Key: []byte("k"), Cell: row.Cell{Column: "c", Value: []byte{0, 0}}}))
	f.Add(EncodeMutation(coltype.Mutation{Table: 1, Key: []byte("k"), Cell: row.Cell{Column: "c", Value: []byte{0, 0}}, HasOp: true, OpID: [16]byte{3},
		Log: coltype.LeaderLog{Led: true, Delta: -4}}))
	f.Add(EncodeResult(&WriteTimeoutError{CL: One, WriteType: WriteTypeCounter}))
	f.Add(EncodeResult(&WriteFailureError{CL: One, BlockFor: 1, Failures: 1, FailedReplicas: []string{"h"}, WriteType: WriteTypeSimple}))
	f.Add(EncodeReadResult(row.Row{Cells: []row.Cell{{Column: "c"}}}, true, nil))
	f.Add(encodeOpAnswer(coltype.OpAnswer{Seen: true, Status: coltype.OpPending, Clock: 3, Found: true, Cell: row.Cell{Column: "c", Value: []byte{0, 0}}}))
	op := coltype.InDoubtOp{Table: 7, Key: []byte("k"), Column: "c", OpID: [16]byte{1, 2}}
	f.Add(encodeOpStatusRequest(op))
	f.Add(encodeOpPeekRequest(op))
	f.Add(encodeOpSettleRequest(op))
	f.Fuzz(func(t *testing.T, b []byte) {
		if op, mode, err := decodeOpStatusRequest(b); err == nil {
			again := encodeOpStatusRequest(op)
			if mode != opAsk || len(again) < len(b) {
				again = append(again, mode)
			}
			if string(again) != string(b) {
				t.Fatalf("op status request %x (mode %d) re-encodes as %x", b, mode, again)
			}
		}
		if cl, u, err := DecodeWriteRequest(b); err == nil {
			if again := EncodeWriteRequest(cl, u); string(again) != string(b) {
				t.Fatalf("write request %x re-encodes as %x", b, again)
			}
		}
		if m, err := DecodeMutation(b); err == nil {
			if again := EncodeMutation(m); string(again) != string(b) {
				t.Fatalf("mutation %x re-encodes as %x", b, again)
			}
		}
		_ = DecodeResult(b)
		_, _, _ = DecodeReadResult(row.Key{}, b)
		_, _ = decodeCounterWrite(b)
		if a, err := decodeOpAnswer(b); err == nil {
			if again := encodeOpAnswer(a); string(again) != string(b) {
				t.Fatalf("op answer %x re-encodes as %x", b, again)
			}
		}
	})
}
