// Package transport carries messages between idemkv nodes: requests with
// responses, matched by request id and pipelined over one connection per
// peer. Two implementations share the Transport interface: TCP for real
// nodes, and an in-memory network with seeded fault injection (drop, delay,
// duplicate, reorder, partition) for deterministic multi-node tests. Node code
// cannot tell them apart.
//
// # Bodies
//
// The transport only reads a body passed to Request or Send; the caller must
// not modify it afterwards (TCP may still be writing it after a timeout or
// after Send returns), but may pass the same body to several calls. A
// handler owns the body it receives, and a requester the response's body.
//
// # TCP wire format, version 1
//
// All integers are big-endian. CRC32C is CRC-32 with the Castagnoli
// polynomial. A connection starts with a preamble from the dialler:
//
//	magic    4 bytes  "IDKV"
//	version  uint16   1
//	flags    uint16   0 (reserved)
//	addrLen  uint16   ≤ 1024
//	addr     addrLen bytes: the dialler's listen Addr, which handlers see as from
//	crc      uint32   CRC32C of every preceding preamble byte
//
// The acceptor answers with its own preamble (its listen Addr) and both
// sides then exchange frames. Magic and version keep their place in every
// future version. An acceptor that does not speak the dialler's version
// answers with its own preamble and closes the connection, so the dialler
// can report "peer speaks protocol version N"; a bad magic, checksum or
// length closes the connection without an answer. Each frame is
//
//	length   uint32   body length, at most TCPOptions.MaxFrame (64 MiB)
//	flags    uint8    bits 0-1 kind: 0 request, 1 response, 2 error, 3 one-way;
//	                  bits 2-7 reserved, zero
//	id       uint64   request id; 0 for one-way, nonzero otherwise
//	type     uint16   the message Type
//	body     length bytes (an error frame's body is the handler's error text)
//	crc      uint32   CRC32C of header and body
//
// A response or error frame carries the id of the request it answers; its
// type is the response's (an error frame repeats the request's). A frame that
// breaks any of these rules, or announces a body over the limit (refused
// before anything is read or allocated for it), is logged at Error level and
// closes its connection; other connections are not affected.
//
// # TCP connections
//
// Each endpoint dials one outbound connection per peer, lazily on the first
// message, and uses it for its own requests and one-way messages; it
// answers the requests of a peer on the connection that peer dialled. Of
// two peers, the one whose listen address orders second sends its own
// requests on the connection the first dialled, while it is open (and
// dials its own before that, or once it broke): the frames the two send
// each other then share writes and a reader. A connection carries frames
// of every kind both ways; the code never depends on who dialled it.
// Requests are pipelined:
// ids are per connection, any number may be in flight, and responses are
// matched by id whatever their order. Each inbound request runs its handler
// on its own goroutine (the peer's callers bound how many run at once). One
// writer goroutine per connection drains a queue of frames into a buffered
// writer and flushes only when the queue is empty, so frames queued together
// leave in one system call.
//
// A broken connection fails the requests in flight on it with
// ErrUnreachable (the peer may or may not have handled them); the next
// message dials again at once. A failed dial starts a backoff
// (TCPOptions.MinBackoff, doubling up to MaxBackoff) during which messages to
// that peer fail at once with ErrUnreachable wrapping the dial error. No
// goroutine outlives Close.
package transport

import (
	"context"
	"errors"
	"fmt"
)

// Addr names a node's peer endpoint, "host:port" (node i of a local ring is
// 127.0.0.i:7000). The in-memory network uses the same form.
type Addr string

// Type is a message's verb. Each subsystem owns a range: 1–15 gossip and
// membership, 16–47 writes, reads, hints and repair, 48–63 schema, 64+ for
// later subsystems. The transport does not interpret it, except that fault
// rules may select messages by type.
type Type uint16

// Message is what travels between nodes: a verb and an opaque body that the
// subsystem owning the verb encodes.
type Message struct {
	Type Type
	Body []byte
}

// Handler serves one request from a peer. It may be called concurrently, from
// many goroutines. Its returned message is the response; a returned error
// reaches the requester as a *RemoteError. A handler must honour ctx, which
// ends when the transport closes.
type Handler func(ctx context.Context, from Addr, req Message) (Message, error)

// Transport is one node's endpoint.
type Transport interface {
	// Addr is this endpoint's address.
	Addr() Addr
	// Request sends req to a peer and waits for its response, until ctx is
	// done. Requests to the same peer are pipelined on one connection.
	Request(ctx context.Context, to Addr, req Message) (Message, error)
	// Send sends a one-way message: no response is awaited and delivery is
	// not guaranteed. It returns once the message is handed to the network.
	// The handler's answer to a one-way message is discarded.
	Send(ctx context.Context, to Addr, msg Message) error
	// Close stops serving, closes connections and fails requests in flight.
	Close() error
}

// Errors every implementation returns (possibly wrapped).
var (
	// ErrClosed: the local endpoint is closed.
	ErrClosed = errors.New("transport: closed")
	// ErrUnreachable: no connection to the peer could be made (refused,
	// unknown address, partitioned).
	ErrUnreachable = errors.New("transport: peer unreachable")
	// ErrTimeout: ctx ended before the response came. It wraps
	// context.DeadlineExceeded or context.Canceled as well.
	ErrTimeout = errors.New("transport: request timed out")
	// ErrNotSent is wrapped, beside ErrUnreachable, when the message
	// certainly never left this endpoint (no connection could be made, no
	// one listens): the peer did not handle it, so a caller may send it
	// elsewhere without risking that both handle it.
	ErrNotSent = errors.New("transport: message not sent")
)

// RemoteError is an error returned by the peer's handler.
type RemoteError struct {
	Peer Addr
	Msg  string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("transport: peer %s: %s", e.Peer, e.Msg) }
