package exec

import (
	"context"
	"strconv"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/trace"
)

// Traces is the executor's store of trace sessions (Options.Traces).
func (e *Executor) Traces() *trace.Store { return e.traces }

// startTrace begins a trace session for a request with the tracing flag
// (s.Trace), with Cassandra's request text and parameters (params is
// called only then), and returns ctx carrying it; for any other request it
// returns ctx and nil.
func (e *Executor) startTrace(ctx context.Context, s *cql.Session, request string, params func() map[string]string) (context.Context, *trace.Session) {
	if s == nil || !s.Trace {
		return ctx, nil
	}
	n := e.b.Local()
	port := n.NativePort
	if port == 0 {
		port = 9042
	}
	ts := e.traces.Start(s.Client, n.IP, port, "QUERY", request, params())
	return trace.With(ctx, ts), ts
}

// endTrace ends a trace session (nil: none) and puts its id in the
// outcome, whether the request succeeded or not.
func endTrace(ts *trace.Session, out *cql.Outcome) {
	if ts == nil {
		return
	}
	ts.Finish()
	out.TraceID = append([]byte(nil), ts.ID[:]...)
}

// traceParams are the parameters Cassandra records for a query
// (QueryMessage.traceQuery): the query, consistency levels, page size.
func traceParams(query string, cl frame.Consistency, serial frame.Consistency, hasSerial bool, pageSize int32) map[string]string {
	m := map[string]string{"consistency_level": coordinator.ConsistencyLevel(cl).String()}
	if query != "" {
		m["query"] = query
	}
	if hasSerial {
		m["serial_consistency_level"] = coordinator.ConsistencyLevel(serial).String()
	}
	if pageSize > 0 {
		m["page_size"] = strconv.Itoa(int(pageSize))
	}
	return m
}
