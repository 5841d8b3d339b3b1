package faultproxy

import (
	"fmt"
	"time"

	"github.com/idemkv/idemkv/client"
)

// Fault kinds, as logged in an Event.
const (
	// KindLostAck: the request was forwarded, the server answered it with
	// a success, and the proxy dropped the answer (the driver times out).
	KindLostAck = "proxy_lost_ack"
	// KindDelay: the server's answer was held for Schedule.DelayBy
	// before it was forwarded (past the client's timeout).
	KindDelay = "proxy_delay"
	// KindReset: the request was forwarded, then both sides of the
	// connection were closed.
	KindReset = "proxy_reset"
)

// Schedule is the fault schedule of a Group: the probability per request of
// each fault, decided by a hash of the seed, the request's op id (client
// index and sequence, from the idemkv-op custom payload) and the attempt
// number (how many times the group has seen that op id), so that the same
// op meets the same faults as under the bench's in-node or client-side
// injection with the same seed. Requests without an op id are numbered in
// arrival order instead (client 0, sequence n, attempt 1).
type Schedule struct {
	Seed    uint64
	LostAck float64 // the server's answer is dropped after it applied
	Delay   float64 // the server's answer is held for DelayBy
	Reset   float64 // the connection is closed once the request is forwarded
	// DelayBy is how long a delayed answer is held (default 1.1 s: past
	// the bench's default client timeout of 1 s).
	DelayBy time.Duration
}

// DefaultDelayBy is Schedule.DelayBy when it is zero.
const DefaultDelayBy = 1100 * time.Millisecond

// Validate reports a probability outside [0, 1] or a negative DelayBy.
func (s Schedule) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"lost-ack", s.LostAck}, {"delay", s.Delay}, {"reset", s.Reset}} {
		if p.v < 0 || p.v > 1 || p.v != p.v {
			return fmt.Errorf("faultproxy: %s probability %g: want 0 to 1", p.name, p.v)
		}
	}
	if s.DelayBy < 0 {
		return fmt.Errorf("faultproxy: negative delay %v", s.DelayBy)
	}
	return nil
}

// Salts of the decisions: the lost-ack and delay salts are the bench's, so
// that a proxy faults the same attempts as the bench's injector.
const (
	SaltLostAck = 0x1057ac4
	SaltDelay   = 0xde1a4
	SaltReset   = 0x7e5e7
)

// Decide returns a uniform number in [0, 1) from the seed, a salt, the op
// id's client index (its low 16 bits) and sequence, and the attempt number:
// the bench's rule (bench.decide), so that both inject the same faults.
func Decide(seed, salt uint64, op client.OpID, attempt int) float64 {
	h := mix(seed ^ salt)
	h = mix(h ^ op.Client&0xffff)
	h = mix(h ^ op.Sequence)
	h = mix(h ^ uint64(attempt))
	return float64(h>>11) / (1 << 53)
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// fault is the decision for one request.
type fault int

const (
	faultNone fault = iota
	faultLostAck
	faultDelay
	faultReset
)

// decide is the schedule's decision for attempt n of op: reset first (it
// precedes the answer), then lost ack, then delay.
func (s *Schedule) decide(op client.OpID, attempt int) fault {
	switch {
	case s.Reset > 0 && Decide(s.Seed, SaltReset, op, attempt) < s.Reset:
		return faultReset
	case s.LostAck > 0 && Decide(s.Seed, SaltLostAck, op, attempt) < s.LostAck:
		return faultLostAck
	case s.Delay > 0 && Decide(s.Seed, SaltDelay, op, attempt) < s.Delay:
		return faultDelay
	}
	return faultNone
}

// Event is one injected fault.
type Event struct {
	At      time.Time
	Node    int    // 1-based index of the proxy in its group
	Proxy   string // the proxy's listen address
	Stream  int16  // the request's stream id
	Kind    string // KindLostAck, KindDelay or KindReset
	Op      client.OpID
	HasOp   bool // Op came from the request's idemkv-op payload
	Attempt int  // how many times the group has seen Op, this request included
	// Statements is how many updates the request carried (a BATCH's
	// statements, else 1).
	Statements int
}
