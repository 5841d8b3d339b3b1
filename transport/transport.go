// Package transport carries messages between idemkv nodes: requests with
// responses, matched by request id and pipelined over one connection per
// peer. Two implementations share the Transport interface: TCP for real
// nodes, and an in-memory network with seeded fault injection (drop, delay,
// duplicate, reorder, partition) for deterministic multi-node tests. Node code
// cannot tell them apart.
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
)

// RemoteError is an error returned by the peer's handler.
type RemoteError struct {
	Peer Addr
	Msg  string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("transport: peer %s: %s", e.Peer, e.Msg) }
