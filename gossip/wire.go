package gossip

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/idemkv/idemkv/transport"
)

// Message types of the gossip protocol, in the range the transport reserves
// for gossip and membership (1–15).
const (
	// TypeSyn opens an exchange: the digests of every state the sender
	// knows. Request; the answer is a TypeAck.
	TypeSyn transport.Type = 1
	// TypeAck answers a SYN: the states the SYN's sender lacks (newer than
	// its digests, or unknown to it) and digests of the states the answerer
	// wants.
	TypeAck transport.Type = 2
	// TypeAck2 completes an exchange: the states the ACK asked for.
	// Request; the answer is an empty TypeAck2.
	TypeAck2 transport.Type = 3
	// TypeShutdown announces the sender's own state with status shutdown.
	// Request; the answer is an empty TypeShutdown.
	TypeShutdown transport.Type = 4
)

// IsGossipType reports whether t belongs to the gossip range (1–15), whose
// messages a node's transport handler passes to Gossiper.Handle.
func IsGossipType(t transport.Type) bool { return t >= 1 && t <= 15 }

// Wire limits. A decoder rejects any body beyond them, so a hostile or
// damaged body cannot make it allocate more than about its own size.
const (
	wireVersion = 1
	maxBody     = 16 << 20 // bytes in one body
	maxItems    = 4096     // states or digests in one list
	maxTokens   = 4096     // tokens of one node
	maxString   = 255      // bytes of one string field
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("gossip: malformed message")

// Status codes on the wire; 0 is invalid.
var statusCodes = [...]Status{1: StatusJoining, 2: StatusNormal, 3: StatusLeaving, 4: StatusLeft, 5: StatusShutdown}

func statusCode(s Status) byte {
	for i, v := range statusCodes {
		if i > 0 && v == s {
			return byte(i)
		}
	}
	return 0
}

// Encoding (all integers big-endian or varint as noted):
//
//	body     = version:u8(=1) payload
//	SYN      = digests
//	ACK      = states digests
//	ACK2     = states
//	SHUTDOWN = states            (exactly the sender's own state)
//	digests  = n:uvarint(≤4096) digest*n
//	digest   = hostID:16 bytes  generation:varint(≥0)  version:varint(≥0)
//	states   = n:uvarint(≤4096) state*n
//	state    = hostID:16 bytes  generation:varint(>0)  version:varint(≥0)
//	           status:u8(1 joining,2 normal,3 leaving,4 left,5 shutdown)
//	           addr cqlAddr dc rack schemaVersion releaseVersion: string each
//	           load:varint(≥0)  nTokens:uvarint(≤4096) token:int64 BE * nTokens
//	string   = len:uvarint(≤255) bytes
//
// Varints must be minimal, so that the encoding is canonical; nothing may
// follow the payload.

func appendDigest(b []byte, d digest) []byte {
	b = appendHostID(b, d.hostID)
	b = binary.AppendVarint(b, d.generation)
	return binary.AppendVarint(b, d.version)
}

func appendHostID(b []byte, id string) []byte {
	var raw [16]byte
	if _, err := hex.Decode(raw[:], []byte(id)); err != nil || len(id) != 32 {
		panic(fmt.Sprintf("gossip: encoding invalid host id %q", id)) // states are validated before they are stored
	}
	return append(b, raw[:]...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendState(b []byte, s *NodeState) []byte {
	b = appendHostID(b, s.HostID)
	b = binary.AppendVarint(b, s.Generation)
	b = binary.AppendVarint(b, s.Version)
	b = append(b, statusCode(s.Status))
	for _, f := range [...]string{string(s.Addr), s.CQLAddr, s.DC, s.Rack, s.SchemaVersion, s.ReleaseVersion} {
		b = appendString(b, f)
	}
	b = binary.AppendVarint(b, s.Load)
	b = binary.AppendUvarint(b, uint64(len(s.Tokens)))
	for _, t := range s.Tokens {
		b = binary.BigEndian.AppendUint64(b, uint64(t))
	}
	return b
}

func appendDigests(b []byte, ds []digest) []byte {
	b = binary.AppendUvarint(b, uint64(len(ds)))
	for _, d := range ds {
		b = appendDigest(b, d)
	}
	return b
}

func appendStates(b []byte, ss []NodeState) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for i := range ss {
		b = appendState(b, &ss[i])
	}
	return b
}

func encodeSyn(ds []digest) []byte { return appendDigests([]byte{wireVersion}, ds) }

func encodeAck(ss []NodeState, ds []digest) []byte {
	return appendDigests(appendStates([]byte{wireVersion}, ss), ds)
}

func encodeStates(ss []NodeState) []byte { return appendStates([]byte{wireVersion}, ss) }

// decoder reads a body; the first error sticks and every later read returns
// zero values.
type decoder struct {
	b   []byte
	err error
}

func newDecoder(body []byte) *decoder {
	d := &decoder{b: body}
	switch {
	case len(body) > maxBody:
		d.fail("body of %d bytes exceeds %d", len(body), maxBody)
	case len(body) == 0:
		d.fail("empty body")
	case body[0] != wireVersion:
		d.fail("unknown version %d", body[0])
	default:
		d.b = body[1:]
	}
	return d
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n > 1 && d.b[n-1] == 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// nonNeg reads a varint that must not be negative.
func (d *decoder) nonNeg(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || n > 1 && d.b[n-1] == 0 { // overflow, truncation or a non-minimal encoding
		d.fail("bad varint in %s", what)
		return 0
	}
	d.b = d.b[n:]
	if v < 0 {
		d.fail("negative %s %d", what, v)
		return 0
	}
	return v
}

func (d *decoder) bytes(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("%s truncated", what)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// count reads a list length, at most max and at most the bytes left (each
// element takes at least minSize bytes), so that no allocation exceeds the
// body's size.
func (d *decoder) count(max, minSize int, what string) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(max) || n > uint64(len(d.b)/minSize) {
		d.fail("%s count %d too large", what, n)
		return 0
	}
	return int(n)
}

func (d *decoder) hostID() string {
	b := d.bytes(16, "host id")
	if d.err != nil {
		return ""
	}
	return hex.EncodeToString(b)
}

func (d *decoder) str(what string) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > maxString {
		d.fail("%s of %d bytes exceeds %d", what, n, maxString)
		return ""
	}
	return string(d.bytes(int(n), what))
}

const minDigestSize = 16 + 1 + 1

func (d *decoder) digests() []digest {
	n := d.count(maxItems, minDigestSize, "digest")
	if n == 0 {
		return nil
	}
	ds := make([]digest, 0, n)
	for range n {
		var g digest
		g.hostID = d.hostID()
		g.generation = d.nonNeg("generation")
		g.version = d.nonNeg("version")
		if d.err != nil {
			return nil
		}
		ds = append(ds, g)
	}
	return ds
}

const minStateSize = 16 + 1 + 1 + 1 + 6 + 1 + 1

func (d *decoder) states() []NodeState {
	n := d.count(maxItems, minStateSize, "state")
	if n == 0 {
		return nil
	}
	ss := make([]NodeState, 0, n)
	for range n {
		var s NodeState
		s.HostID = d.hostID()
		s.Generation = d.nonNeg("generation")
		s.Version = d.nonNeg("version")
		if c := d.bytes(1, "status"); d.err == nil {
			if c[0] == 0 || int(c[0]) >= len(statusCodes) {
				d.fail("unknown status code %d", c[0])
			} else {
				s.Status = statusCodes[c[0]]
			}
		}
		s.Addr = transport.Addr(d.str("addr"))
		s.CQLAddr = d.str("cql addr")
		s.DC = d.str("dc")
		s.Rack = d.str("rack")
		s.SchemaVersion = d.str("schema version")
		s.ReleaseVersion = d.str("release version")
		s.Load = d.nonNeg("load")
		if nt := d.count(maxTokens, 8, "token"); nt > 0 {
			s.Tokens = make([]int64, nt)
			for i := range s.Tokens {
				if b := d.bytes(8, "token"); d.err == nil {
					s.Tokens[i] = int64(binary.BigEndian.Uint64(b))
				}
			}
		}
		if d.err != nil {
			return nil
		}
		if err := s.validate(); err != nil {
			d.fail("%v", err)
			return nil
		}
		ss = append(ss, s)
	}
	return ss
}

func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func decodeSyn(body []byte) ([]digest, error) {
	d := newDecoder(body)
	ds := d.digests()
	if err := d.end(); err != nil {
		return nil, fmt.Errorf("SYN: %w", err)
	}
	return ds, nil
}

func decodeAck(body []byte) ([]NodeState, []digest, error) {
	d := newDecoder(body)
	ss := d.states()
	ds := d.digests()
	if err := d.end(); err != nil {
		return nil, nil, fmt.Errorf("ACK: %w", err)
	}
	return ss, ds, nil
}

func decodeStates(body []byte) ([]NodeState, error) {
	d := newDecoder(body)
	ss := d.states()
	if err := d.end(); err != nil {
		return nil, err
	}
	return ss, nil
}
