package borrowcol

import (
	"errors"
	"fmt"

	"github.com/idemkv/idemkv/counters/borrow"
)

// PayloadKey is the CQL custom payload key of a Borrow-Counter exchange.
const PayloadKey = "idemkv-borrow"

// PayloadVersion is the first byte of every exchange payload.
const PayloadVersion = 1

// Exchange kinds, the second byte of a payload.
const (
	KindBorrow = 1 // a client's borrow request: its id (16 bytes)
	KindWrite  = 2 // a client's write: a borrow.State of the client's dots
	KindState  = 3 // a replica's full state (anti-entropy)
)

// EncodeBorrow returns the payload of a borrow request by client. Every
// payload is: version byte (1), kind byte, body; the body of a borrow
// request is the client id (16 bytes), that of a write or a state is a
// borrow.State encoding (borrow.State.MarshalBinary). The answer to a borrow
// request and to a write is a borrow.State holding the client's dots as
// the replica holds them after the exchange (a retired dot its creator has
// transferred is absent); the answer to a state is the replica's full state.
func EncodeBorrow(client borrow.ID) []byte {
	return append([]byte{PayloadVersion, KindBorrow}, client[:]...)
}

// EncodeWrite returns the payload of a client's write (borrow.Client.Add's
// write, or its retirement).
func EncodeWrite(w *borrow.State) ([]byte, error) { return encodeState(KindWrite, w) }

// EncodeState returns the payload of a replica's full state.
func EncodeState(s *borrow.State) ([]byte, error) { return encodeState(KindState, s) }

func encodeState(kind byte, s *borrow.State) ([]byte, error) {
	return s.AppendBinary([]byte{PayloadVersion, kind})
}

// Payload is a decoded exchange payload.
type Payload struct {
	Kind   byte
	Client borrow.ID     // KindBorrow
	State  *borrow.State // KindWrite, KindState
}

// DecodePayload parses an exchange payload. A write must hold the dots of
// one owner only, none created by that owner (a client's dots are lent).
// Bad bytes are an error, never a panic.
func DecodePayload(b []byte) (Payload, error) {
	if len(b) < 2 || b[0] != PayloadVersion {
		return Payload{}, errors.New("borrow payload: bad version")
	}
	p := Payload{Kind: b[1]}
	body := b[2:]
	switch p.Kind {
	case KindBorrow:
		if len(body) != borrow.IDLen {
			return Payload{}, fmt.Errorf("borrow payload: a borrow request of %d bytes", len(body))
		}
		copy(p.Client[:], body)
		return p, nil
	case KindWrite, KindState:
		p.State = borrow.New()
		if err := p.State.UnmarshalBinary(body); err != nil {
			return Payload{}, fmt.Errorf("borrow payload: %w", err)
		}
		if p.Kind == KindWrite {
			if err := checkWrite(p.State); err != nil {
				return Payload{}, err
			}
		}
		return p, nil
	}
	return Payload{}, fmt.Errorf("borrow payload: unknown kind %d", p.Kind)
}

// checkWrite checks that a write holds dots of one owner, none of its own.
func checkWrite(w *borrow.State) error {
	dots := w.Dots()
	if len(dots) == 0 {
		return errors.New("borrow payload: a write without a dot")
	}
	for _, o := range dots {
		if o.Owner != dots[0].Owner {
			return errors.New("borrow payload: a write of several owners")
		}
		if o.Dot.Creator == o.Owner {
			return errors.New("borrow payload: a client's write of a dot it created")
		}
	}
	return nil
}

// ClientDots returns the state of owner's dots in s (what a borrow request
// or a write is answered with).
func ClientDots(s *borrow.State, owner borrow.ID) *borrow.State {
	out := borrow.New()
	for o := range s.All() {
		if o.Owner == owner {
			out.Join(borrow.Write(o.Owner, o.Dot, o.Cell))
		}
	}
	return out
}

// holds reports whether owner has a dot in s.
func holds(s *borrow.State, owner borrow.ID) bool {
	for o := range s.All() {
		if o.Owner == owner {
			return true
		}
	}
	return false
}
