package exec

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	_ "github.com/idemkv/idemkv/coltype/builtin" // the counter designs the tests use

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/replica"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/schema"
)

// fakeBackend is a one-node Backend over a real replica and schema in a
// temporary directory: writes are applied as the leader, reads and scans
// read the replica. It records what the executor asked for.
type fakeBackend struct {
	rep *replica.Replica
	sch *schema.Schema

	mu       sync.Mutex
	nextID   uint64
	updates  []coltype.Update
	deletes  []string
	cls      []coordinator.ConsistencyLevel
	waits    int
	writeErr error // returned by CounterWrite and Delete when set
	readErr  error // returned by Read and Scan when set
	peers    []NodeInfo

	coordinatedWrites []int64
	participants      byte // the temporary participants' ids given
}

func newFake(t testing.TB) *fakeBackend {
	t.Helper()
	dir := t.TempDir()
	rep, err := replica.Open(replica.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Close() })
	sch, err := schema.Open(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeBackend{rep: rep, sch: sch, nextID: 100, peers: []NodeInfo{{
		HostID: [16]byte{2, 2}, IP: net.IPv4(127, 0, 0, 2), DC: "dc1", Rack: "rack1", Tokens: []int64{42, -7},
		SchemaVersion: [16]byte{9}, ReleaseVersion: "3.11.16", Up: true,
	}}}
}

func (f *fakeBackend) Schema() *schema.Schema { return f.sch }

func (f *fakeBackend) WaitSchemaAgreement(ctx context.Context) error {
	f.mu.Lock()
	f.waits++
	f.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("fake: schema agreement wait without a deadline")
	}
	return nil
}

func (f *fakeBackend) NewTableID() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	return f.nextID
}

func (f *fakeBackend) CounterWrite(ctx context.Context, u coltype.Update, cl coordinator.ConsistencyLevel) error {
	f.mu.Lock()
	err := f.writeErr
	f.updates = append(f.updates, u)
	f.cls = append(f.cls, cl)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = f.rep.Apply(u)
	return err
}

// Exchange runs the column type's coordinator-side logic over the one
// replica (fakeCoordination) when it is coltype.Coordinated, else hands the
// payload to the replica.
func (f *fakeBackend) Exchange(ctx context.Context, table uint64, key []byte, column string, payload []byte, cl coordinator.ConsistencyLevel) ([]byte, error) {
	if co, ok := f.coordinated(table, column); ok {
		return co.CoordinateExchange(ctx, f.coordination(table, key, column), payload)
	}
	return f.rep.Exchange(table, key, column, payload)
}

// CoordinatedWrite runs the column type's coordinator-side logic for a
// plain update (handoff counters: a temporary tier-1 participant).
func (f *fakeBackend) CoordinatedWrite(ctx context.Context, table uint64, key []byte, column string, delta int64) error {
	f.mu.Lock()
	f.coordinatedWrites = append(f.coordinatedWrites, delta)
	f.mu.Unlock()
	co, ok := f.coordinated(table, column)
	if !ok {
		return &coordinator.InvalidError{Msg: "not a coordinated type"}
	}
	return co.CoordinateWrite(ctx, f.coordination(table, key, column), delta)
}

func (f *fakeBackend) coordinated(table uint64, column string) (coltype.Coordinated, bool) {
	name, ok := f.rep.ColumnTypeName(table, column)
	if !ok {
		return nil, false
	}
	t, _ := coltype.Lookup(name)
	co, ok := t.(coltype.Coordinated)
	return co, ok
}

func (f *fakeBackend) coordination(table uint64, key []byte, column string) *fakeCoordination {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.participants++
	return &fakeCoordination{f: f, cell: coltype.CellRef{Table: table, Key: key, Column: column}, id: counters.ID{0xc0, f.participants}}
}

// fakeCoordination is the one-node coordinator of fakeBackend: the
// replica is the only replica of every key.
type fakeCoordination struct {
	f    *fakeBackend
	cell coltype.CellRef
	id   counters.ID // NewID's answer
}

var fakeSelf = counters.ID{0x5e, 0x1f}

func (x *fakeCoordination) Cell() coltype.CellRef  { return x.cell }
func (x *fakeCoordination) Natural() []counters.ID { return []counters.ID{fakeSelf} }
func (x *fakeCoordination) Live() []counters.ID    { return []counters.ID{fakeSelf} }
func (x *fakeCoordination) Exchange(ctx context.Context, replicas []counters.ID, payload []byte) ([]byte, bool, error) {
	if len(replicas) == 0 {
		return nil, false, &coordinator.UnavailableError{CL: coordinator.One, Required: 1}
	}
	reply, err := x.f.rep.Exchange(x.cell.Table, x.cell.Key, x.cell.Column, payload)
	if err != nil {
		return nil, false, &coordinator.InvalidError{Msg: err.Error()}
	}
	return reply, false, nil
}
func (x *fakeCoordination) Timeout() time.Duration { return time.Second }
func (x *fakeCoordination) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
func (x *fakeCoordination) NewID() (counters.ID, error) { return x.id, nil }
func (x *fakeCoordination) Refused(msg string) error    { return &coordinator.InvalidError{Msg: msg} }
func (x *fakeCoordination) TimedOut() error {
	return &coordinator.WriteTimeoutError{CL: coordinator.One, BlockFor: 1, WriteType: coordinator.WriteTypeCounter}
}
func (x *fakeCoordination) Retired() {}
func (x *fakeCoordination) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (f *fakeBackend) Read(ctx context.Context, table uint64, key []byte, cl coordinator.ConsistencyLevel) (row.Row, bool, error) {
	if f.readErr != nil {
		return row.Row{}, false, f.readErr
	}
	return f.rep.ReadRow(table, key)
}

func (f *fakeBackend) Scan(ctx context.Context, table uint64, after *row.Key, limit int, cl coordinator.ConsistencyLevel) ([]row.Row, error) {
	if f.readErr != nil {
		return nil, f.readErr
	}
	return f.rep.Scan(table, after, ring.MinToken, ring.MaxToken, limit)
}

// ScanRange makes the fake a RangeScanner.
func (f *fakeBackend) ScanRange(ctx context.Context, table uint64, after *row.Key, end int64, limit int, cl coordinator.ConsistencyLevel) ([]row.Row, error) {
	if f.readErr != nil {
		return nil, f.readErr
	}
	start := int64(ring.MinToken)
	if after != nil && after.Token > ring.MinToken {
		start = after.Token - 1
	}
	if start >= end {
		return nil, nil
	}
	return f.rep.Scan(table, after, start, end, limit)
}

func (f *fakeBackend) Delete(ctx context.Context, table uint64, key []byte, columns []string, cl coordinator.ConsistencyLevel) error {
	f.mu.Lock()
	err := f.writeErr
	f.deletes = append(f.deletes, string(key))
	f.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = f.rep.Delete(table, key, 0, columns...)
	return err
}

func (f *fakeBackend) WriteCells(ctx context.Context, table uint64, key []byte, cells []row.Cell, cl coordinator.ConsistencyLevel) error {
	f.mu.Lock()
	err := f.writeErr
	f.cls = append(f.cls, cl)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	for _, c := range cells {
		if err := f.rep.ApplyMutation(coltype.Mutation{Table: table, Key: key, Cell: c}); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeBackend) CellValue(table uint64, c row.Cell) (int64, error) {
	return f.rep.CellValue(table, c)
}

func (f *fakeBackend) Local() NodeInfo {
	return NodeInfo{HostID: [16]byte{1, 1}, IP: net.IPv4(127, 0, 0, 1), DC: "dc1", Rack: "rack1",
		Tokens: []int64{-100, 5, 1 << 40}, ReleaseVersion: "3.11.16", ClusterName: "mini", Up: true}
}

func (f *fakeBackend) Peers() []NodeInfo { return f.peers }

// harness is an executor over a fake backend with a session.
type harness struct {
	t    testing.TB
	f    *fakeBackend
	e    *Executor
	sess *cql.Session
}

func newHarness(t testing.TB) *harness {
	f := newFake(t)
	e := New(f, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return time.Unix(1700000000, 0) }, SchemaAgreementTimeout: time.Second})
	return &harness{t: t, f: f, e: e, sess: &cql.Session{ProtocolVersion: 4}}
}

var ctx = context.Background()

func params(vals ...frame.Value) frame.QueryParams {
	return frame.QueryParams{Consistency: frame.Consistency(coordinator.Quorum), Values: vals}
}

// query runs a statement that must succeed.
func (h *harness) query(q string, vals ...frame.Value) frame.Result {
	h.t.Helper()
	out, err := h.e.Query(ctx, h.sess, q, params(vals...), nil)
	if err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
	return out.Result
}

// queryErr runs a statement that must fail and returns its error.
func (h *harness) queryErr(q string, vals ...frame.Value) *frame.Error {
	h.t.Helper()
	_, err := h.e.Query(ctx, h.sess, q, params(vals...), nil)
	if err == nil {
		h.t.Fatalf("%s: succeeded, want an error", q)
	}
	fe, ok := err.(*frame.Error)
	if !ok {
		h.t.Fatalf("%s: error %T %v is not a *frame.Error", q, err, err)
	}
	return fe
}

func (h *harness) rows(q string, vals ...frame.Value) frame.RowsResult {
	h.t.Helper()
	r, ok := h.query(q, vals...).(frame.RowsResult)
	if !ok {
		h.t.Fatalf("%s: result is not rows", q)
	}
	return r
}

func text_(s string) frame.Value { return frame.Bytes([]byte(s)) }
func big(v int64) frame.Value    { return frame.Bytes(frame.EncodeBigint(v)) }
func int_(v int32) frame.Value   { return frame.Bytes(frame.EncodeInt(v)) }

// setup creates keyspace ks and the counter table ks.t (k text PRIMARY KEY, c counter, d counter).
func (h *harness) setup() {
	h.t.Helper()
	h.query(`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`)
	h.query(`CREATE TABLE ks.t (k text PRIMARY KEY, c counter, d counter)`)
}

// value reads ks.t's counter col of key k; ok is false when null or absent.
func (h *harness) value(table, col string, key frame.Value) (int64, bool) {
	h.t.Helper()
	r := h.rows("SELECT "+col+" FROM "+table+" WHERE k = ?", key)
	if len(r.Rows) == 0 || r.Rows[0][0].Null {
		return 0, false
	}
	v, err := frame.DecodeBigint(r.Rows[0][0].Bytes)
	if err != nil {
		h.t.Fatal(err)
	}
	return v, true
}
