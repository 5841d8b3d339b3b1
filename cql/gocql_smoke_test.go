package cql

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/cql/frame"
)

// systemExecutor is a minimal node for gocql v1.7.0: system.local and
// system.peers with the columns and types gocql reads, and one counter
// table ks.t (k text PRIMARY KEY, c counter) in memory.
type systemExecutor struct {
	ip net.IP

	mu       sync.Mutex
	counters map[string]int64
	opIDs    [][]byte
	queries  []string
}

var (
	smokeHostID   = [16]byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x47, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00}
	smokeSchemaID = [16]byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0x46, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf}
	updateID      = []byte("update-ks.t")
	selectID      = []byte("select-ks.t")
)

func sysCol(table, name string, t frame.DataType) frame.ColumnSpec {
	return frame.ColumnSpec{Keyspace: "system", Table: table, Name: name, Type: t}
}

func (e *systemExecutor) local() frame.RowsResult {
	ip := frame.EncodeInet(e.ip)
	text := func(s string) frame.Value { return frame.Bytes(frame.EncodeText(s)) }
	cols := []frame.ColumnSpec{
		sysCol("local", "key", frame.Text), sysCol("local", "host_id", frame.UUID),
		sysCol("local", "data_center", frame.Text), sysCol("local", "rack", frame.Text),
		sysCol("local", "release_version", frame.Text), sysCol("local", "partitioner", frame.Text),
		sysCol("local", "rpc_address", frame.Inet), sysCol("local", "broadcast_address", frame.Inet),
		sysCol("local", "listen_address", frame.Inet), sysCol("local", "cluster_name", frame.Text),
		sysCol("local", "tokens", frame.SetOf(frame.Text)), sysCol("local", "schema_version", frame.UUID),
		sysCol("local", "cql_version", frame.Text), sysCol("local", "native_protocol_version", frame.Text),
	}
	row := []frame.Value{
		text("local"), frame.Bytes(frame.EncodeUUID(smokeHostID)), text("dc1"), text("rack1"), text("3.11.16"),
		text("org.apache.cassandra.dht.Murmur3Partitioner"), frame.Bytes(ip), frame.Bytes(ip), frame.Bytes(ip), text("mini"),
		frame.Bytes(frame.EncodeSet([][]byte{frame.EncodeText("0")})), frame.Bytes(frame.EncodeUUID(smokeSchemaID)),
		text("3.4.4"), text("4"),
	}
	return frame.RowsResult{Columns: cols, Rows: [][]frame.Value{row}}
}

func (e *systemExecutor) peers() frame.RowsResult {
	return frame.RowsResult{Columns: []frame.ColumnSpec{
		sysCol("peers", "peer", frame.Inet), sysCol("peers", "rpc_address", frame.Inet),
		sysCol("peers", "data_center", frame.Text), sysCol("peers", "rack", frame.Text),
		sysCol("peers", "host_id", frame.UUID), sysCol("peers", "tokens", frame.SetOf(frame.Text)),
		sysCol("peers", "release_version", frame.Text), sysCol("peers", "schema_version", frame.UUID),
	}}
}

func normalize(q string) string { return strings.ToLower(strings.Join(strings.Fields(q), " ")) }

func (e *systemExecutor) Query(ctx context.Context, s *Session, q string, p frame.QueryParams, payload map[string][]byte) (Outcome, error) {
	e.mu.Lock()
	e.queries = append(e.queries, q)
	e.mu.Unlock()
	switch normalize(q) {
	case "select * from system.local where key='local'":
		return Outcome{Result: e.local()}, nil
	case "select * from system.peers":
		return Outcome{Result: e.peers()}, nil
	}
	return Outcome{}, frame.Errorf(frame.ErrInvalid, "unconfigured table for %q", q)
}

func (e *systemExecutor) Prepare(ctx context.Context, s *Session, q string, payload map[string][]byte) (Outcome, error) {
	spec := func(name string, t frame.DataType) frame.ColumnSpec {
		return frame.ColumnSpec{Keyspace: "ks", Table: "t", Name: name, Type: t}
	}
	switch normalize(q) {
	case "update ks.t set c = c + ? where k = ?":
		return Outcome{Result: frame.PreparedResult{ID: updateID,
			Params: []frame.ColumnSpec{spec("c", frame.Counter), spec("k", frame.Text)}, PKIndexes: []uint16{1}}}, nil
	case "select c from ks.t where k = ?":
		return Outcome{Result: frame.PreparedResult{ID: selectID,
			Params: []frame.ColumnSpec{spec("k", frame.Text)}, PKIndexes: []uint16{0},
			ResultColumns: []frame.ColumnSpec{spec("c", frame.Counter)}}}, nil
	}
	return Outcome{}, frame.Errorf(frame.ErrInvalid, "cannot prepare %q", q)
}

func (e *systemExecutor) update(vals []frame.Value, payload map[string][]byte) error {
	if len(vals) != 2 {
		return frame.Errorf(frame.ErrInvalid, "%d values", len(vals))
	}
	d, err := frame.DecodeBigint(vals[0].Bytes)
	if err != nil {
		return frame.Errorf(frame.ErrInvalid, "delta: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counters[frame.DecodeText(vals[1].Bytes)] += d
	if id, ok := payload["idemkv-op"]; ok {
		e.opIDs = append(e.opIDs, bytes.Clone(id))
	}
	return nil
}

func (e *systemExecutor) Execute(ctx context.Context, s *Session, id []byte, p frame.QueryParams, payload map[string][]byte) (Outcome, error) {
	switch {
	case bytes.Equal(id, updateID):
		return Outcome{Result: frame.VoidResult{}, Payload: payload}, e.update(p.Values, payload)
	case bytes.Equal(id, selectID):
		e.mu.Lock()
		v := e.counters[frame.DecodeText(p.Values[0].Bytes)]
		e.mu.Unlock()
		return Outcome{Result: frame.RowsResult{NoMetadata: true, Columns: []frame.ColumnSpec{{Name: "c", Type: frame.Counter}},
			Rows: [][]frame.Value{{frame.Bytes(frame.EncodeBigint(v))}}}, Payload: payload}, nil
	}
	return Outcome{}, &frame.Error{Code: frame.ErrUnprepared, Message: "unknown id", UnknownID: id}
}

func (e *systemExecutor) Batch(ctx context.Context, s *Session, b frame.Batch, payload map[string][]byte) (Outcome, error) {
	if b.Type != frame.BatchCounter {
		return Outcome{}, frame.Errorf(frame.ErrInvalid, "Cannot include non-counter statement in a counter batch")
	}
	for _, st := range b.Statements {
		if !bytes.Equal(st.PreparedID, updateID) {
			return Outcome{}, frame.Errorf(frame.ErrInvalid, "unexpected batch statement %+v", st)
		}
		if err := e.update(st.Values, payload); err != nil {
			return Outcome{}, err
		}
	}
	return Outcome{Result: frame.VoidResult{}}, nil
}

// TestGocqlSmoke runs the unmodified gocql driver against the server:
// protocol discovery, control connection, host lookup, pool, prepared
// counter updates with an op id payload, a counter batch and a read.
func TestGocqlSmoke(t *testing.T) {
	t.Run("default", func(t *testing.T) { gocqlSmoke(t, 0, false) })
	t.Run("v3", func(t *testing.T) { gocqlSmoke(t, 3, false) })
	t.Run("auth", func(t *testing.T) { gocqlSmoke(t, 4, true) })
}

func gocqlSmoke(t *testing.T, proto int, auth bool) {
	ex := &systemExecutor{ip: net.IPv4(127, 0, 0, 1), counters: map[string]int64{}}
	cfg := ServerConfig{Addr: "127.0.0.1:0", Executor: ex, Events: &fakeEvents{}}
	if auth {
		cfg.Auth = map[string]string{"cassandra": "cassandra"}
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	cluster := gocql.NewCluster("127.0.0.1")
	cluster.Port = s.Addr().(*net.TCPAddr).Port
	cluster.ProtoVersion = proto
	if auth {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: "cassandra", Password: "cassandra"}
	}
	cluster.Timeout = safety
	cluster.ConnectTimeout = safety
	cluster.Consistency = gocql.Quorum
	sess, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	defer sess.Close()

	op := []byte{0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1}
	q := sess.Query("UPDATE ks.t SET c = c + ? WHERE k = ?", int64(5), "a")
	if proto != 3 { // v3 has no custom payloads (gocql panics)
		q.CustomPayload(map[string][]byte{"idemkv-op": op})
	}
	it := q.Iter()
	if got := it.GetCustomPayload(); proto != 3 && !bytes.Equal(got["idemkv-op"], op) {
		t.Errorf("mirrored payload %v", got)
	}
	if err := it.Close(); err != nil {
		t.Fatalf("update: %v", err)
	}
	b := sess.NewBatch(gocql.CounterBatch)
	b.Query("UPDATE ks.t SET c = c + ? WHERE k = ?", int64(2), "a")
	b.Query("UPDATE ks.t SET c = c + ? WHERE k = ?", int64(-1), "b")
	if err := sess.ExecuteBatch(b); err != nil {
		t.Fatalf("batch: %v", err)
	}
	var c int64
	if err := sess.Query("SELECT c FROM ks.t WHERE k = ?", "a").Scan(&c); err != nil {
		t.Fatalf("select: %v", err)
	}
	if c != 7 {
		t.Errorf("counter a = %d, want 7", c)
	}
	// An error travels back typed.
	err = sess.Query("SELECT nothing FROM nowhere").Exec()
	var re gocql.RequestError
	if err == nil || !errors.As(err, &re) || re.Code() != int(frame.ErrInvalid) {
		t.Errorf("bad statement: %v", err)
	}

	// The host that served a query is the one system.local described.
	it = sess.Query("SELECT c FROM ks.t WHERE k = ?", "a").Iter()
	if h := it.Host(); h == nil || h.HostID() != gocql.UUID(smokeHostID).String() || !h.ConnectAddress().Equal(ex.ip) {
		t.Errorf("served by host %v", h)
	}
	it.Close()
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if proto != 3 && (len(ex.opIDs) != 1 || !bytes.Equal(ex.opIDs[0], op)) {
		t.Errorf("op ids that reached the executor: %x", ex.opIDs)
	}
	var sawLocal bool
	for _, q := range ex.queries {
		sawLocal = sawLocal || normalize(q) == "select * from system.local where key='local'"
	}
	if !sawLocal {
		t.Errorf("gocql never read system.local: %q", ex.queries)
	}
}
