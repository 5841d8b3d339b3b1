package node

import (
	"bytes"
	"context"

	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/schema"
)

// mirroringExecutor is custom_query_handler_class:
// CustomPayloadMirroringQueryHandler, as Cassandra's test handler of that
// name: the answer to a QUERY, PREPARE, EXECUTE or BATCH carries the
// request's custom payload. idemkv's own reply keys (the exchanges of
// coltype.Exchanger columns, idemkv-dismissed) are kept when a request key
// collides with them. A request without a payload gets the reply idemkv
// would send anyway; errors carry no mirrored payload (Cassandra's handler
// sets it on results only).
type mirroringExecutor struct{ cql.Executor }

// mirror merges the request's payload under the reply's.
func mirror(out cql.Outcome, err error, req map[string][]byte) (cql.Outcome, error) {
	if err != nil || req == nil {
		return out, err
	}
	merged := make(map[string][]byte, len(req)+len(out.Payload))
	for k, v := range req {
		merged[k] = bytes.Clone(v) // nil stays nil: a null value is echoed as null
	}
	for k, v := range out.Payload {
		merged[k] = v
	}
	out.Payload = merged
	return out, nil
}

func (e mirroringExecutor) Query(ctx context.Context, s *cql.Session, query string, p frame.QueryParams, payload map[string][]byte) (cql.Outcome, error) {
	out, err := e.Executor.Query(ctx, s, query, p, payload)
	return mirror(out, err, payload)
}

func (e mirroringExecutor) Prepare(ctx context.Context, s *cql.Session, query string, payload map[string][]byte) (cql.Outcome, error) {
	out, err := e.Executor.Prepare(ctx, s, query, payload)
	return mirror(out, err, payload)
}

func (e mirroringExecutor) Execute(ctx context.Context, s *cql.Session, id []byte, p frame.QueryParams, payload map[string][]byte) (cql.Outcome, error) {
	out, err := e.Executor.Execute(ctx, s, id, p, payload)
	return mirror(out, err, payload)
}

func (e mirroringExecutor) Batch(ctx context.Context, s *cql.Session, b frame.Batch, payload map[string][]byte) (cql.Outcome, error) {
	out, err := e.Executor.Batch(ctx, s, b, payload)
	return mirror(out, err, payload)
}

// refuseWrites is the coordinator's RefuseWrites of
// test_fail_writes_keyspace: the tables of that keyspace; nil when it is
// not set.
func refuseWrites(s *schema.Schema, keyspace string) func(table uint64) bool {
	if keyspace == "" {
		return nil
	}
	return func(table uint64) bool {
		ks, ok := s.KeyspaceOf(table)
		return ok && ks == keyspace
	}
}
