package node

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/exec"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/metrics"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/transport"
	"github.com/idemkv/idemkv/vfs"
)

// This file holds the few instruments on the node's request paths (the
// rest of the metrics are read at scrape time, see adminNode.MetricsSnapshot):
// the backend's client requests, the CQL executor's messages, the peer
// transport's messages, and the commit log's fsyncs.

// meteredBackend times the client requests the CQL executor sends to the
// node, by operation and consistency level, and counts counter writes by
// design.
type meteredBackend struct {
	backend
	m *metrics.Metrics
}

var _ exec.Backend = meteredBackend{}

// design is the registered type name of a table's column ("unknown" when
// the node does not hold the table).
func (b meteredBackend) design(table uint64, column string) string {
	if name, ok := b.n.replica.ColumnTypeName(table, column); ok {
		return name
	}
	return "unknown"
}

func (b meteredBackend) CounterWrite(ctx context.Context, u coltype.Update, cl coordinator.ConsistencyLevel) error {
	start := time.Now()
	err := b.backend.CounterWrite(ctx, u, cl)
	op := "counter_write"
	if u.Delete {
		op = "delete"
	}
	b.m.ObserveClient(op, cl.String(), time.Since(start), err)
	if !u.Delete {
		b.m.CounterWrite(b.design(u.Table, u.Column), err)
	}
	return err
}

func (b meteredBackend) Exchange(ctx context.Context, table uint64, key []byte, column string, payload []byte, cl coordinator.ConsistencyLevel) ([]byte, error) {
	start := time.Now()
	out, err := b.backend.Exchange(ctx, table, key, column, payload, cl)
	b.m.ObserveClient("exchange", "none", time.Since(start), err)
	b.m.CounterWrite(b.design(table, column), err)
	return out, err
}

func (b meteredBackend) CoordinatedWrite(ctx context.Context, table uint64, key []byte, column string, delta int64) error {
	start := time.Now()
	err := b.backend.CoordinatedWrite(ctx, table, key, column, delta)
	b.m.ObserveClient("coordinated_write", "none", time.Since(start), err)
	b.m.CounterWrite(b.design(table, column), err)
	return err
}

func (b meteredBackend) Read(ctx context.Context, table uint64, key []byte, cl coordinator.ConsistencyLevel) (row.Row, bool, error) {
	start := time.Now()
	r, found, err := b.backend.Read(ctx, table, key, cl)
	b.m.ObserveClient("read", cl.String(), time.Since(start), err)
	return r, found, err
}

func (b meteredBackend) Scan(ctx context.Context, table uint64, after *row.Key, limit int, cl coordinator.ConsistencyLevel) ([]row.Row, error) {
	start := time.Now()
	rs, err := b.backend.Scan(ctx, table, after, limit, cl)
	b.m.ObserveClient("range_read", cl.String(), time.Since(start), err)
	return rs, err
}

func (b meteredBackend) Delete(ctx context.Context, table uint64, key []byte, columns []string, cl coordinator.ConsistencyLevel) error {
	start := time.Now()
	err := b.backend.Delete(ctx, table, key, columns, cl)
	b.m.ObserveClient("delete", cl.String(), time.Since(start), err)
	return err
}

// meteredExecutor times the CQL executor's requests by message and
// statement kind.
type meteredExecutor struct {
	cql.Executor
	m        *metrics.Metrics
	prepared sync.Map     // prepared statement id (string) → statement kind
	nprep    atomic.Int64 // entries in prepared
}

// statementKind is the first keyword of a statement, lower case.
func statementKind(q string) string {
	q = strings.TrimSpace(q)
	for strings.HasPrefix(q, "--") || strings.HasPrefix(q, "//") || strings.HasPrefix(q, "/*") {
		end := "\n"
		if strings.HasPrefix(q, "/*") {
			end = "*/"
		}
		i := strings.Index(q, end)
		if i < 0 {
			return "other"
		}
		q = strings.TrimSpace(q[i+len(end):])
	}
	w, _, _ := strings.Cut(q, " ")
	w, _, _ = strings.Cut(w, "\n")
	switch w = strings.ToLower(strings.TrimSpace(w)); w {
	case "select", "update", "insert", "delete", "begin", "apply", "use", "create", "alter", "drop", "truncate", "grant", "revoke", "list":
		if w == "begin" {
			return "batch"
		}
		return w
	}
	return "other"
}

func (e *meteredExecutor) Query(ctx context.Context, s *cql.Session, query string, p frame.QueryParams, payload map[string][]byte) (cql.Outcome, error) {
	start := time.Now()
	out, err := e.Executor.Query(ctx, s, query, p, payload)
	e.m.ObserveCQL("query", statementKind(query), time.Since(start), err)
	return out, err
}

func (e *meteredExecutor) Prepare(ctx context.Context, s *cql.Session, query string, payload map[string][]byte) (cql.Outcome, error) {
	start := time.Now()
	out, err := e.Executor.Prepare(ctx, s, query, payload)
	kind := statementKind(query)
	e.m.ObserveCQL("prepare", kind, time.Since(start), err)
	if pr, ok := out.Result.(frame.PreparedResult); ok && err == nil {
		if e.nprep.Load() < 10000 { // more than a sane client prepares
			if _, loaded := e.prepared.LoadOrStore(string(pr.ID), kind); !loaded {
				e.nprep.Add(1)
			}
		}
	}
	return out, err
}

func (e *meteredExecutor) Execute(ctx context.Context, s *cql.Session, id []byte, p frame.QueryParams, payload map[string][]byte) (cql.Outcome, error) {
	start := time.Now()
	out, err := e.Executor.Execute(ctx, s, id, p, payload)
	kind := "other"
	if k, ok := e.prepared.Load(string(id)); ok {
		kind, _ = k.(string)
	}
	e.m.ObserveCQL("execute", kind, time.Since(start), err)
	return out, err
}

func (e *meteredExecutor) Batch(ctx context.Context, s *cql.Session, b frame.Batch, payload map[string][]byte) (cql.Outcome, error) {
	start := time.Now()
	out, err := e.Executor.Batch(ctx, s, b, payload)
	e.m.ObserveCQL("batch", "batch", time.Since(start), err)
	return out, err
}

// meteredTransport counts the messages the node sends to peers and those
// that got no answer.
type meteredTransport struct {
	transport.Transport
	m *metrics.Metrics
}

func family(t transport.Type) string {
	switch {
	case gossip.IsGossipType(t):
		return "gossip"
	case coordinator.IsCoordinatorType(t):
		return "coordinator"
	}
	return "node"
}

func (t meteredTransport) Request(ctx context.Context, to transport.Addr, req transport.Message) (transport.Message, error) {
	resp, err := t.Transport.Request(ctx, to, req)
	t.m.PeerMessage(family(req.Type), int(req.Type), err)
	return resp, err
}

func (t meteredTransport) Send(ctx context.Context, to transport.Addr, msg transport.Message) error {
	err := t.Transport.Send(ctx, to, msg)
	t.m.PeerMessage(family(msg.Type), int(msg.Type), err)
	return err
}

// syncTimedFS times the fsyncs of the files below dir (the commit log's
// segments): the commit log itself exposes no timings.
type syncTimedFS struct {
	vfs.FS
	dir string
	m   *metrics.Metrics
}

func (f syncTimedFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || f.m == nil {
		return file, err
	}
	if rel, rerr := filepath.Rel(f.dir, name); rerr != nil || strings.HasPrefix(rel, "..") {
		return file, nil
	}
	return timedFile{File: file, m: f.m}, nil
}

func (f syncTimedFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	return f.wrap(name, file, err)
}

func (f syncTimedFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	return f.wrap(name, file, err)
}

type timedFile struct {
	vfs.File
	m *metrics.Metrics
}

// Unwrap lets vfs.Map map the file beneath (the commit log's segments).
func (f timedFile) Unwrap() vfs.File { return f.File }

func (f timedFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.m.ObserveSync(time.Since(start))
	return err
}
