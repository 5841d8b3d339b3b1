// Package client is a small helper over the unmodified gocql driver for
// idemkv's idempotent counters. It gives a client an id, numbers its counter
// updates, attaches the operation id (the `idemkv-op` custom payload: client
// id, then sequence number, both uint64 big-endian) to each update and batch,
// and marks them idempotent, so that gocql's retry policy may resend them:
// on an FBF counter column a resent operation is recognised and not counted
// twice. In a batch, statement i carries sequence + i.
//
// A vanilla counter column ignores the op id; a retried update may then be
// counted twice, which is exactly what idemkv measures.
//
// # Handoff counters
//
// For a `handoff_counter` column, HandoffCounter makes the client a tier-1
// participant of one cell (see its documentation and counters/handoff):
//
//	h, err := client.NewHandoffCounter(session, "ks.t", "c", "k = ?",
//		client.HandoffOptions{File: "/var/lib/app/t-c-key1.state"}, "key1")
//	h.Add(1)                 // counted locally (and durably, with a file)
//	err = h.Exchange(ctx)    // one UPDATE carrying the state; safe to retry
//	...
//	err = h.Flush(ctx)       // exchange until everything is handed off
//	err = h.Retire()         // then stop taking part
//
// A plain `UPDATE ks.t SET c = c + 1 WHERE k = ?` from any driver also
// works: the coordinator then acts as the tier-1 participant for that one
// request, and a driver retry after a lost answer may count it twice.
package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync/atomic"

	"github.com/gocql/gocql"
)

// PayloadKey is the custom payload key that carries an operation id.
const PayloadKey = "idemkv-op"

// DismissedPayloadKey is the response payload in which an idemkv node says
// how many of a request's updates leaders dismissed as retries of op ids
// their filters had: a uint32, big-endian, absent when none was.
const DismissedPayloadKey = "idemkv-dismissed"

// Dismissed reads DismissedPayloadKey from a response's custom payload
// (gocql: Iter.GetCustomPayload); 0 when absent or malformed.
func Dismissed(payload map[string][]byte) int {
	v, ok := payload[DismissedPayloadKey]
	if !ok || len(v) != 4 {
		return 0
	}
	return int(binary.BigEndian.Uint32(v))
}

// OpID names one counter operation: the client that issued it and its
// sequence number at that client.
type OpID struct {
	Client   uint64
	Sequence uint64
}

// Bytes returns the 16-byte wire form.
func (o OpID) Bytes() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, o.Client)
	binary.BigEndian.PutUint64(b[8:], o.Sequence)
	return b
}

// ParseOpID reads the 16-byte wire form.
func ParseOpID(b []byte) (OpID, error) {
	if len(b) != 16 {
		return OpID{}, errors.New("client: an op id is 16 bytes")
	}
	return OpID{Client: binary.BigEndian.Uint64(b), Sequence: binary.BigEndian.Uint64(b[8:])}, nil
}

// Client numbers the counter operations of one client over a gocql session.
// It is safe for concurrent use.
type Client struct {
	session *gocql.Session
	id      uint64
	seq     atomic.Uint64
}

// Options configure a Client.
type Options struct {
	// ClientID identifies the client; 0 picks a random one. A client that
	// restarts with the same id must also resume its sequence (StartSequence)
	// above every number it used, or its new operations look like retries.
	ClientID uint64
	// StartSequence is the first sequence number to use.
	StartSequence uint64
}

// New returns a client over session.
func New(session *gocql.Session, o Options) *Client {
	c := &Client{session: session, id: o.ClientID}
	for c.id == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.id = binary.BigEndian.Uint64(b[:])
	}
	c.seq.Store(o.StartSequence)
	return c
}

// ID returns the client's id.
func (c *Client) ID() uint64 { return c.id }

// reserve takes n consecutive sequence numbers and returns the first.
func (c *Client) reserve(n int) uint64 { return c.seq.Add(uint64(n)) - uint64(n) }

// NextOpID reserves n consecutive op ids and returns the first: for
// statements sent by other means (a HandoffCounter exchange tagged for
// tracing or fault injection).
func (c *Client) NextOpID(n int) OpID { return OpID{Client: c.id, Sequence: c.reserve(max(1, n))} }

// Query returns a counter update statement carrying a fresh op id, marked
// idempotent; set its consistency and retry policy as usual and Exec it.
// Every execution of the returned query, retries included, carries the same
// op id.
func (c *Client) Query(stmt string, values ...any) (*gocql.Query, OpID) {
	op := OpID{Client: c.id, Sequence: c.reserve(1)}
	q := c.session.Query(stmt, values...).Idempotent(true)
	q.CustomPayload(map[string][]byte{PayloadKey: op.Bytes()})
	return q, op
}

// Update runs a counter update with a fresh op id at the session's defaults.
func (c *Client) Update(ctx context.Context, stmt string, values ...any) (OpID, error) {
	q, op := c.Query(stmt, values...)
	return op, q.WithContext(ctx).Exec()
}

// Batch is a counter batch whose statements get consecutive op ids.
type Batch struct {
	c *Client
	b *gocql.Batch
}

// NewBatch starts a COUNTER batch.
func (c *Client) NewBatch() *Batch {
	return &Batch{c: c, b: c.session.NewBatch(gocql.CounterBatch)}
}

// Query adds a counter update to the batch.
func (b *Batch) Query(stmt string, values ...any) *Batch {
	b.b.Query(stmt, values...)
	return b
}

// Gocql returns the underlying batch, to set its consistency or retry policy.
func (b *Batch) Gocql() *gocql.Batch { return b.b }

// Exec runs the batch: statement i carries op id (client, first + i). The
// returned op id is the first one.
func (b *Batch) Exec(ctx context.Context) (OpID, error) {
	op := OpID{Client: b.c.id, Sequence: b.c.reserve(max(1, b.b.Size()))}
	b.b.CustomPayload = map[string][]byte{PayloadKey: op.Bytes()}
	for i := range b.b.Entries {
		b.b.Entries[i].Idempotent = true // gocql retries a batch only if every entry is
	}
	return op, b.c.session.ExecuteBatch(b.b.WithContext(ctx))
}
