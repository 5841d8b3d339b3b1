// Package exec runs the statements of idemkv's CQL subset (package
// cql/parse) against a node's Backend: DDL through the cluster schema,
// counter updates and deletions through the coordinator, reads and paged
// scans of counter tables, and the system tables that drivers read
// (system.local, system.peers, system_schema.*), typed as Cassandra 3.11
// types them. It implements cql.Executor; every error it returns is a
// *frame.Error with Cassandra's code and, where Cassandra has one, its text.
//
// Operation ids. A request may carry the custom payload `idemkv-op`: 16
// bytes, the client id then a sequence number, both uint64 big-endian. A
// payload of any other length is an Invalid error, never a silent vanilla
// write. Statement i of a request (0 for a plain UPDATE; the statement's
// position in a BATCH, counting every statement) uses sequence + i; the SET
// clauses of one statement are updates of different columns of one row and
// share that statement's op id (filters are kept per counter column). A
// request without the payload is applied as a vanilla update. When leaders
// dismissed some of a request's updates as retries of op ids their filters
// had, the response carries the custom payload `idemkv-dismissed`: how many,
// a uint32 big-endian (absent when none was). A first attempt dismissed is
// a false positive of the filter: the op was not counted.
//
// Exchanged columns (coltype.Exchanger: handoff counters, coltype/handoffcol,
// payload `idemkv-handoff`; Borrow-Counters, coltype/borrowcol, payload
// `idemkv-borrow`). Such a column is updated with
// `UPDATE t SET c = c + ? WHERE k = ?`. With the custom payload its type
// names (the client's message, e.g. a handoff state as package client sends
// it) the update is an exchange: the delta is ignored, the request must hold
// exactly this one update, the payload goes to the Backend's Exchange, and
// the response carries the answer under the same key. The column type
// decides how the coordinator serves it (coordinator.Exchange): a
// coltype.Coordinated type runs its own coordinator-side logic, a
// DirectExchanger's payload goes unchanged to the replicas (everywhere at
// the request's consistency level when the type says so, else to one).
// Without the payload, the update of a coltype.Coordinated column goes to
// the Backend's CoordinatedWrite (handoff counters: the coordinator acts
// as the tier-1 participant for the request, at-least-once with driver
// retries), any other is led like a vanilla counter's. The type's
// coltype.CQL says which deltas are valid (a handoff counter only grows),
// its coltype.Deleter whether DELETE is (handoff counter cells cannot be
// deleted), and SELECT combines the replicas' answers by its ReadPolicy.
//
// The FBF table option. `WITH idempotence = {'class': 'fbf', ...}` is kept
// in TableDef.Options["idempotence"] as the JSON of the map's entries (all
// values as text, as given); system_schema.tables shows it in its
// `extensions` map<text, blob> under the key "idemkv.idempotence", the JSON
// as the blob.
package exec

import (
	"container/list"
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/cql/trace"
)

// OpPayloadKey is the custom payload key of an operation id.
const OpPayloadKey = "idemkv-op"

// DismissedPayloadKey is the response's custom payload key that counts the
// request's updates leaders dismissed as retries (see the package comment).
const DismissedPayloadKey = "idemkv-dismissed"

// Defaults of Options.
const (
	DefaultPreparedCacheSize      = 10_000
	DefaultSchemaAgreementTimeout = 10 * time.Second
	DefaultReleaseVersion         = "3.11.16"
	DefaultClusterName            = "idemkv"
	CQLVersion                    = "3.4.4"
)

// Options configures an Executor.
type Options struct {
	// ClusterName is system.local's cluster_name; default the node's
	// NodeInfo.ClusterName, else "idemkv".
	ClusterName string
	// ReleaseVersion is system.local's release_version when the node's
	// NodeInfo has none; default 3.11.16.
	ReleaseVersion string
	// Now is the clock of operation times; default time.Now.
	Now func() time.Time
	// Logger receives warnings (schema agreement not reached); default
	// slog.Default().
	Logger *slog.Logger
	// PreparedCacheSize bounds the prepared statements kept (least recently
	// used first out); default 10 000.
	PreparedCacheSize int
	// SchemaAgreementTimeout bounds the wait for schema agreement after DDL;
	// default 10 s.
	SchemaAgreementTimeout time.Duration
	// BatchSizeWarnThreshold and BatchSizeFailThreshold are cassandra.yaml's
	// batch_size_warn_threshold and batch_size_fail_threshold, in bytes: a
	// request whose writes span several partitions and exceed them is
	// warned about, or refused (see checkBatchSize). 0: the defaults, 5 KiB
	// and 50 KiB; negative: no threshold.
	BatchSizeWarnThreshold, BatchSizeFailThreshold int64
	// TableOptionMemory bounds, in bytes, what the table options of all
	// tables together may make each node allocate (the FBF filters: see
	// checkOptionMemory); 0: DefaultTableOptionMemory; negative: no bound.
	TableOptionMemory int64
	// Traces keeps the trace sessions of requests sent with the tracing
	// flag, served as system_traces; nil: a store of the defaults
	// (trace.DefaultMaxSessions, trace.DefaultTTL).
	Traces *trace.Store
}

// Executor runs statements against a Backend. It is safe for concurrent use.
type Executor struct {
	b    Backend
	opts Options

	mu       sync.Mutex
	prepared map[string]*list.Element // by string(id)
	lru      *list.List               // of *prepared, most recent first

	traces *trace.Store

	tablesMu sync.RWMutex
	tables   map[tableKey]*tableInfo // resolved tables, by id and revision
}

var _ cql.Executor = (*Executor)(nil)

// New returns an executor over b.
func New(b Backend, opts Options) *Executor {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PreparedCacheSize <= 0 {
		opts.PreparedCacheSize = DefaultPreparedCacheSize
	}
	if opts.SchemaAgreementTimeout <= 0 {
		opts.SchemaAgreementTimeout = DefaultSchemaAgreementTimeout
	}
	if opts.ReleaseVersion == "" {
		opts.ReleaseVersion = DefaultReleaseVersion
	}
	if opts.Traces == nil {
		opts.Traces = trace.NewStore()
	}
	return &Executor{b: b, opts: opts, prepared: map[string]*list.Element{}, lru: list.New(), traces: opts.Traces, tables: map[tableKey]*tableInfo{}}
}

// prepared is a prepared statement.
type prepared struct {
	id       []byte
	query    string
	keyspace string // the session's keyspace when it was prepared
	stmt     parse.Statement
	result   frame.PreparedResult
	// table is the user table the statement reads or writes, as it was
	// when prepared (id and revision); zero for other statements. A
	// statement whose table changed since (ALTER, DROP and CREATE again)
	// is forgotten, as Cassandra forgets it, so that the driver prepares
	// it again and gets the new columns.
	table    parse.TableName
	tableID  uint64
	revision uint64
}

// statementTable is the table a statement names, if one.
func statementTable(st parse.Statement) (parse.TableName, bool) {
	switch st := st.(type) {
	case *parse.Select:
		return st.Table, true
	case *parse.Insert:
		return st.Table, true
	case *parse.Update:
		return st.Table, true
	case *parse.Delete:
		return st.Table, true
	}
	return parse.TableName{}, false
}

// tableVersion is the id and revision of a prepared statement's table now.
func (e *Executor) tableVersion(ks string, tn parse.TableName) (id, rev uint64) {
	if tn.Keyspace != "" {
		ks = tn.Keyspace
	}
	def, ok := e.b.Schema().Table(ks, tn.Name)
	if !ok {
		return 0, 0
	}
	return def.ID, def.Revision
}

// invalid builds an Invalid (0x2200) error.
func invalid(format string, args ...any) *frame.Error {
	return frame.Errorf(frame.ErrInvalid, format, args...)
}

// Query implements cql.Executor.
func (e *Executor) Query(ctx context.Context, s *cql.Session, query string, p frame.QueryParams, payload map[string][]byte) (out cql.Outcome, err error) {
	defer e.recoverTo(&err)
	ctx, ts := e.startTrace(ctx, s, "Execute CQL3 query", func() map[string]string {
		return traceParams(query, p.Consistency, p.SerialConsistency, p.HasSerial, p.PageSize)
	})
	defer endTrace(ts, &out)
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Parsing %s", query)
	}
	st, err := parseQuery(query)
	if err != nil {
		return cql.Outcome{}, err
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Preparing statement")
	}
	ks := sessionKeyspace(s)
	if len(p.Names) > 0 {
		params, _, _, err := e.describe(ks, st)
		if err != nil {
			return cql.Outcome{}, mapError(err)
		}
		if p.Values, err = byName(params, p.Names, p.Values); err != nil {
			return cql.Outcome{}, err
		}
	}
	reply := map[string][]byte{}
	ctx, warns := withWarnings(ctx)
	res, err := e.run(ctx, s, ks, st, p, payload, reply)
	out = outcome(res, reply)
	warns.attach(&out)
	return out, mapError(err)
}

// Prepare implements cql.Executor: the id is the MD5 of the keyspace and the
// query, as Cassandra computes it.
func (e *Executor) Prepare(ctx context.Context, s *cql.Session, query string, payload map[string][]byte) (out cql.Outcome, err error) {
	defer e.recoverTo(&err)
	ctx, ts := e.startTrace(ctx, s, "Preparing CQL3 query", func() map[string]string { return map[string]string{"query": query} })
	defer endTrace(ts, &out)
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Parsing %s", query)
	}
	st, err := parseQuery(query)
	if err != nil {
		return cql.Outcome{}, err
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Preparing statement")
	}
	ks := sessionKeyspace(s)
	sum := md5.Sum([]byte(ks + query))
	pr := &prepared{id: sum[:], query: query, keyspace: ks, stmt: st}
	params, pk, resultCols, err := e.describe(ks, st)
	if err != nil {
		return cql.Outcome{}, mapError(err)
	}
	pr.result = frame.PreparedResult{ID: pr.id, Params: params, PKIndexes: pk, ResultColumns: resultCols}
	if tn, ok := statementTable(st); ok {
		pr.table = tn
		pr.tableID, pr.revision = e.tableVersion(ks, tn)
	}
	e.mu.Lock()
	if el, ok := e.prepared[string(pr.id)]; ok {
		e.lru.MoveToFront(el)
		el.Value = pr
	} else {
		e.prepared[string(pr.id)] = e.lru.PushFront(pr)
		for e.lru.Len() > e.opts.PreparedCacheSize {
			old := e.lru.Back()
			e.lru.Remove(old)
			delete(e.prepared, string(old.Value.(*prepared).id))
		}
	}
	e.mu.Unlock()
	return cql.Outcome{Result: pr.result}, nil
}

func (e *Executor) lookup(id []byte) (*prepared, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	el, ok := e.prepared[string(id)]
	if ok {
		if pr := el.Value.(*prepared); pr.tableID != 0 {
			if tid, rev := e.tableVersion(pr.keyspace, pr.table); tid != pr.tableID || rev != pr.revision {
				e.lru.Remove(el)
				delete(e.prepared, string(id))
				ok = false
			}
		}
	}
	if !ok {
		return nil, &frame.Error{Code: frame.ErrUnprepared,
			Message:   fmt.Sprintf("Prepared query with ID %x not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)", id),
			UnknownID: append([]byte(nil), id...)}
	}
	e.lru.MoveToFront(el)
	return el.Value.(*prepared), nil
}

// Forget drops every prepared statement, as a restarted Cassandra node
// has forgotten them (clients then get Unprepared and prepare again).
func (e *Executor) Forget() {
	e.mu.Lock()
	e.prepared = map[string]*list.Element{}
	e.lru.Init()
	e.mu.Unlock()
}

// Execute implements cql.Executor.
func (e *Executor) Execute(ctx context.Context, s *cql.Session, id []byte, p frame.QueryParams, payload map[string][]byte) (out cql.Outcome, err error) {
	defer e.recoverTo(&err)
	pr, err := e.lookup(id)
	var query string
	if pr != nil {
		query = pr.query
	}
	ctx, ts := e.startTrace(ctx, s, "Execute CQL3 prepared query", func() map[string]string {
		return traceParams(query, p.Consistency, p.SerialConsistency, p.HasSerial, p.PageSize)
	})
	defer endTrace(ts, &out)
	if err != nil {
		return cql.Outcome{}, err
	}
	if len(p.Names) > 0 {
		if p.Values, err = byName(pr.result.Params, p.Names, p.Values); err != nil {
			return cql.Outcome{}, err
		}
	}
	reply := map[string][]byte{}
	ctx, warns := withWarnings(ctx)
	res, err := e.run(ctx, s, pr.keyspace, pr.stmt, p, payload, reply)
	out = outcome(res, reply)
	warns.attach(&out)
	return out, mapError(err)
}

// Batch implements cql.Executor.
func (e *Executor) Batch(ctx context.Context, s *cql.Session, b frame.Batch, payload map[string][]byte) (out cql.Outcome, err error) {
	defer e.recoverTo(&err)
	ctx, ts := e.startTrace(ctx, s, "Execute batch of CQL3 queries", func() map[string]string { return traceParams("", b.Consistency, b.SerialConsistency, b.HasSerial, 0) })
	defer endTrace(ts, &out)
	items := make([]batchItem, 0, len(b.Statements))
	for _, bs := range b.Statements {
		var it batchItem
		if bs.PreparedID != nil {
			pr, err := e.lookup(bs.PreparedID)
			if err != nil {
				return cql.Outcome{}, err
			}
			it = batchItem{keyspace: pr.keyspace, stmt: pr.stmt, values: bs.Values}
			if len(bs.Names) > 0 {
				if it.values, err = byName(pr.result.Params, bs.Names, bs.Values); err != nil {
					return cql.Outcome{}, err
				}
			}
		} else {
			st, err := parseQuery(bs.Query)
			if err != nil {
				return cql.Outcome{}, err
			}
			it = batchItem{keyspace: sessionKeyspace(s), stmt: st, values: bs.Values}
		}
		items = append(items, it)
	}
	var typ parse.BatchType
	switch b.Type {
	case frame.BatchLogged:
		typ = parse.Logged
	case frame.BatchUnlogged:
		typ = parse.Unlogged
	case frame.BatchCounter:
		typ = parse.CounterBatch
	default:
		return cql.Outcome{}, frame.Errorf(frame.ErrProtocol, "Unknown batch type %d", b.Type)
	}
	reply := map[string][]byte{}
	ctx, warns := withWarnings(ctx)
	var clientTS int64
	if b.HasTimestamp {
		clientTS = b.Timestamp
	}
	err = e.runBatch(ctx, typ, nil, items, frame.Consistency(b.Consistency), clientTS, payload, reply)
	if err != nil {
		return cql.Outcome{}, mapError(err)
	}
	out = outcome(frame.VoidResult{}, reply)
	warns.attach(&out)
	return out, nil
}

// outcome is a result with the response's custom payload, if any.
func outcome(res frame.Result, reply map[string][]byte) cql.Outcome {
	out := cql.Outcome{Result: res}
	if len(reply) > 0 {
		out.Payload = reply
	}
	return out
}

// recoverTo turns a panic into a server error, so that no input crashes the
// node.
func (e *Executor) recoverTo(err *error) {
	if r := recover(); r != nil {
		e.opts.Logger.Error("cql/exec: panic while executing a statement", "panic", r)
		*err = frame.Errorf(frame.ErrServer, "internal error: %v", r)
	}
}

func sessionKeyspace(s *cql.Session) string {
	if s == nil {
		return ""
	}
	return s.Keyspace
}

// parseQuery parses a query; a syntax error becomes a Syntax (0x2000) error.
func parseQuery(q string) (parse.Statement, error) {
	st, err := parse.Parse(q)
	if err != nil {
		return nil, frame.Errorf(frame.ErrSyntax, "%s", err.Error())
	}
	return st, nil
}

// byName orders values sent with names by the statement's bind variables.
func byName(params []frame.ColumnSpec, names []string, values []frame.Value) ([]frame.Value, error) {
	if len(names) != len(values) {
		return nil, frame.Errorf(frame.ErrProtocol, "%d names for %d values", len(names), len(values))
	}
	out := make([]frame.Value, len(params))
	for i, p := range params {
		found := false
		for j, n := range names {
			if n == p.Name {
				out[i], found = values[j], true
				break
			}
		}
		if !found {
			return nil, invalid("Invalid unset value for column %s", p.Name)
		}
	}
	return out, nil
}

// mapError turns the Backend's and coordinator's errors into frame errors
// with their codes and extra bodies.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var fe *frame.Error
	if errors.As(err, &fe) {
		return fe
	}
	var ue *coordinator.UnavailableError
	if errors.As(err, &ue) {
		return &frame.Error{Code: frame.ErrUnavailable, Message: ue.Error(), Consistency: frame.Consistency(ue.CL),
			Required: int32(ue.Required), Alive: int32(ue.Alive)}
	}
	var wt *coordinator.WriteTimeoutError
	if errors.As(err, &wt) {
		wtype := string(wt.WriteType)
		if wtype == "" {
			wtype = string(coordinator.WriteTypeCounter)
		}
		return &frame.Error{Code: frame.ErrWriteTimeout, Message: wt.Error(), Consistency: frame.Consistency(wt.CL),
			Received: int32(wt.Received), BlockFor: int32(wt.BlockFor), WriteType: wtype}
	}
	var wf *coordinator.WriteFailureError
	if errors.As(err, &wf) {
		return &frame.Error{Code: frame.ErrWriteFailure, Message: wf.Error(), Consistency: frame.Consistency(wf.CL),
			Received: int32(wf.Received), BlockFor: int32(wf.BlockFor), NumFailures: int32(wf.Failures), WriteType: string(wf.WriteType)}
	}
	var rt *coordinator.ReadTimeoutError
	if errors.As(err, &rt) {
		return &frame.Error{Code: frame.ErrReadTimeout, Message: rt.Error(), Consistency: frame.Consistency(rt.CL),
			Received: int32(rt.Received), BlockFor: int32(rt.BlockFor), DataPresent: rt.DataPresent}
	}
	var rf *coordinator.ReadFailureError
	if errors.As(err, &rf) {
		return &frame.Error{Code: frame.ErrReadFailure, Message: rf.Error(), Consistency: frame.Consistency(rf.CL),
			Received: int32(rf.Received), BlockFor: int32(rf.BlockFor), NumFailures: int32(rf.Failures), DataPresent: rf.DataPresent}
	}
	var ie *coordinator.InvalidError
	if errors.As(err, &ie) {
		return invalid("%s", ie.Msg)
	}
	return frame.Errorf(frame.ErrServer, "%s", err.Error())
}

// opID reads the idemkv-op payload.
func opID(payload map[string][]byte) (has bool, client, seq uint64, err error) {
	v, ok := payload[OpPayloadKey]
	if !ok {
		return false, 0, 0, nil
	}
	if len(v) != 16 {
		return false, 0, 0, invalid("custom payload %s must be 16 bytes (client id, sequence; uint64 big-endian), got %d", OpPayloadKey, len(v))
	}
	return true, binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), nil
}

// OpSlots returns how many sequence numbers a statement takes: the number
// of statements of a BATCH, 1 for any other statement.
func OpSlots(st parse.Statement) int {
	if b, ok := st.(*parse.Batch); ok {
		return max(1, len(b.Statements))
	}
	return 1
}

// validateCounterWrite refuses the levels Cassandra refuses for counters.
func validateCounterWrite(cl frame.Consistency) error {
	switch coordinator.ConsistencyLevel(cl) {
	case coordinator.Any:
		return invalid("Consistency level ANY is not yet supported for counter table")
	case coordinator.Serial, coordinator.LocalSerial:
		return invalid("Counter operations are inherently non-serializable")
	case coordinator.One, coordinator.Two, coordinator.Three, coordinator.Quorum, coordinator.All,
		coordinator.LocalQuorum, coordinator.EachQuorum, coordinator.LocalOne:
		return nil
	}
	return frame.Errorf(frame.ErrProtocol, "Unknown code %d for a consistency level", uint16(cl))
}

// validateRead refuses the levels Cassandra refuses for reads.
func validateRead(cl frame.Consistency) error {
	switch coordinator.ConsistencyLevel(cl) {
	case coordinator.Any:
		return invalid("ANY ConsistencyLevel is only supported for writes")
	case coordinator.Serial, coordinator.LocalSerial:
		return invalid("SERIAL reads are not supported (no lightweight transactions in idemkv)")
	case coordinator.One, coordinator.Two, coordinator.Three, coordinator.Quorum, coordinator.All,
		coordinator.LocalQuorum, coordinator.EachQuorum, coordinator.LocalOne:
		return nil
	}
	return frame.Errorf(frame.ErrProtocol, "Unknown code %d for a consistency level", uint16(cl))
}
