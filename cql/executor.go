// Package cql serves the CQL native protocol on each node: connections,
// frames, stream ids, the handshake, authentication and events. Statements
// themselves are executed by an Executor (package cql/exec), so that this
// package knows the protocol and nothing of the ring.
package cql

import (
	"context"
	"net"

	"github.com/idemkv/idemkv/cql/frame"
)

// Session is one client connection's state that statements see and change.
// The server hands each request its own copy, so that requests of one
// connection running at once do not race: a Keyspace set by a request (USE,
// answered with a SetKeyspaceResult) becomes the connection's keyspace for
// the requests that start after it returns.
type Session struct {
	Keyspace        string // set by USE
	User            string // the authenticated user, "" without authentication
	ProtocolVersion byte
	// Client is the client's address (system_traces.sessions.client).
	Client net.IP
	// Trace is set on a request's copy when the request frame has the
	// tracing flag: the executor then records a trace session and returns
	// its id in Outcome.TraceID.
	Trace bool
}

// Outcome is an executor's answer: a result, and optionally a custom payload
// and warnings for the response frame.
type Outcome struct {
	Result   frame.Result
	Payload  map[string][]byte
	Warnings []string
	// TraceID is the trace session's id (a 16-byte time-based UUID) of a
	// traced request: the response, result or error, carries it with the
	// tracing flag.
	TraceID []byte
}

// Executor runs statements. An error of type *frame.Error is sent as it is;
// any other error is sent as a server error. Executors are called from many
// goroutines at once.
type Executor interface {
	Query(ctx context.Context, s *Session, query string, p frame.QueryParams, payload map[string][]byte) (Outcome, error)
	Prepare(ctx context.Context, s *Session, query string, payload map[string][]byte) (Outcome, error) // Result is a frame.PreparedResult
	Execute(ctx context.Context, s *Session, id []byte, p frame.QueryParams, payload map[string][]byte) (Outcome, error)
	Batch(ctx context.Context, s *Session, b frame.Batch, payload map[string][]byte) (Outcome, error)
}

// Events is where the server learns the events it pushes to connections that
// sent REGISTER: topology, status and schema changes.
type Events interface {
	Subscribe(fn func(frame.Event)) (cancel func())
}
