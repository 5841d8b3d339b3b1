package cql

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/internal/testseed"
)

// fakeExecutor answers statements by their text:
//
//	"wait N"      blocks until release(N) (or the request's context ends)
//	"echo"        Rows with one row: the session's keyspace and user
//	"USE ks"      SetKeyspaceResult
//	"panic"       panics
//	"timeout"     a WriteTimeout(COUNTER) error, wrapped
//	"fail"        a plain error
//	"block"       blocks until the request's context ends, and counts that
//	"big N"       Rows with one blob value of N zero bytes
//
// Every answer mirrors the request's custom payload.
type fakeExecutor struct {
	mu        sync.Mutex
	gates     map[int]chan struct{}
	cancelled int
	payloads  []map[string][]byte
	batches   []frame.Batch
	started   chan string
}

func newFakeExecutor() *fakeExecutor {
	return &fakeExecutor{gates: map[int]chan struct{}{}, started: make(chan string, 1024)}
}

func (e *fakeExecutor) gate(n int) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	g, ok := e.gates[n]
	if !ok {
		g = make(chan struct{})
		e.gates[n] = g
	}
	return g
}

func (e *fakeExecutor) release(n int) { close(e.gate(n)) }

var preparedID = []byte{0xfe, 0xed}

func (e *fakeExecutor) Query(ctx context.Context, s *Session, q string, p frame.QueryParams, payload map[string][]byte) (Outcome, error) {
	e.mu.Lock()
	e.payloads = append(e.payloads, payload)
	e.mu.Unlock()
	select {
	case e.started <- q:
	default:
	}
	out := Outcome{Result: frame.VoidResult{}, Payload: payload}
	var n int
	switch {
	case strings.HasPrefix(q, "wait "):
		fmt.Sscanf(q, "wait %d", &n)
		select {
		case <-e.gate(n):
		case <-ctx.Done():
			return out, ctx.Err()
		}
		out.Result = frame.RowsResult{Columns: []frame.ColumnSpec{{Keyspace: "t", Table: "t", Name: "n", Type: frame.Int}},
			Rows: [][]frame.Value{{frame.Bytes(frame.EncodeInt(int32(n)))}}}
	case strings.HasPrefix(q, "big "):
		fmt.Sscanf(q, "big %d", &n)
		out.Result = frame.RowsResult{Columns: []frame.ColumnSpec{{Keyspace: "t", Table: "t", Name: "b", Type: frame.Blob}},
			Rows: [][]frame.Value{{frame.Bytes(make([]byte, n))}}}
	case q == "echo":
		out.Result = &frame.RowsResult{
			Columns: []frame.ColumnSpec{{Keyspace: "t", Table: "t", Name: "ks", Type: frame.Text}, {Keyspace: "t", Table: "t", Name: "user", Type: frame.Text}},
			Rows:    [][]frame.Value{{frame.Bytes(frame.EncodeText(s.Keyspace)), frame.Bytes(frame.EncodeText(s.User))}}}
	case strings.HasPrefix(q, "USE "):
		s.Keyspace = strings.TrimPrefix(q, "USE ")
		out.Result = frame.SetKeyspaceResult{Keyspace: s.Keyspace}
	case q == "panic":
		panic("boom")
	case q == "timeout":
		return out, fmt.Errorf("coordinator: %w", &frame.Error{Code: frame.ErrWriteTimeout, Message: "Operation timed out",
			Consistency: 4, BlockFor: 2, WriteType: "COUNTER"})
	case q == "fail":
		return out, errors.New("disk on fire")
	case q == "block":
		<-ctx.Done()
		e.mu.Lock()
		e.cancelled++
		e.mu.Unlock()
		return out, ctx.Err()
	}
	return out, nil
}

func (e *fakeExecutor) Prepare(ctx context.Context, s *Session, q string, payload map[string][]byte) (Outcome, error) {
	return Outcome{Result: frame.PreparedResult{ID: preparedID,
		Params: []frame.ColumnSpec{{Keyspace: "ks", Table: "t", Name: "k", Type: frame.Text}}, PKIndexes: []uint16{0}}}, nil
}

func (e *fakeExecutor) Execute(ctx context.Context, s *Session, id []byte, p frame.QueryParams, payload map[string][]byte) (Outcome, error) {
	if !bytes.Equal(id, preparedID) {
		return Outcome{}, &frame.Error{Code: frame.ErrUnprepared, Message: "Prepared query not found", UnknownID: id}
	}
	return Outcome{Result: frame.VoidResult{}, Payload: payload}, nil
}

func (e *fakeExecutor) Batch(ctx context.Context, s *Session, b frame.Batch, payload map[string][]byte) (Outcome, error) {
	e.mu.Lock()
	e.batches = append(e.batches, b)
	e.payloads = append(e.payloads, payload)
	e.mu.Unlock()
	return Outcome{Result: frame.VoidResult{}}, nil
}

// fakeEvents is an Events source the test publishes to.
type fakeEvents struct {
	mu   sync.Mutex
	subs map[int]func(frame.Event)
	next int
}

func (f *fakeEvents) Subscribe(fn func(frame.Event)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[int]func(frame.Event){}
	}
	id := f.next
	f.next++
	f.subs[id] = fn
	return func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}
}

func (f *fakeEvents) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func (f *fakeEvents) publish(ev frame.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fn := range f.subs {
		fn(ev)
	}
}

func startServer(t *testing.T, cfg ServerConfig) (*Server, *fakeExecutor) {
	t.Helper()
	ex := newFakeExecutor()
	if cfg.Executor == nil {
		cfg.Executor = ex
	}
	cfg.Addr = "127.0.0.1:0"
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ex
}

// client is a raw-socket CQL client.
type client struct {
	t  *testing.T
	nc net.Conn
	r  *frame.Reader
	// comp, when set, compresses every frame sent (compress_test.go);
	// frames received with the compression flag are decompressed.
	comp frame.Compression
}

// safety is a deadline on every read, so that a broken server fails the
// test instead of hanging it; no test asserts anything about time.
const safety = 20 * time.Second

func dial(t *testing.T, s *Server) *client {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: frame.NewReader(nc, 0)}
}

func (c *client) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) send(stream int16, m frame.Message, payload map[string][]byte) {
	c.t.Helper()
	b, err := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: stream, Message: m, Payload: payload})
	if err != nil {
		c.t.Fatal(err)
	}
	if b, err = frame.CompressFrame(c.comp, b); err != nil {
		c.t.Fatal(err)
	}
	c.write(b)
}

// recv reads one frame; the version of a frame the reader does not serve
// (an answer to a v5 or v2 request) is allowed through as its header.
func (c *client) recv() (frame.Header, *frame.Frame) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(safety))
	h, body, err := c.r.Read()
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	dh := h // the header returned keeps the compression flag
	if h.Flags&frame.FlagCompression != 0 && c.comp != frame.NoCompression {
		if body, err = frame.Decompress(c.comp, body, frame.DefaultMaxBody); err != nil {
			c.t.Fatalf("decompress %v: %v", h.Op, err)
		}
		dh.Flags &^= frame.FlagCompression
	}
	f, err := frame.DecodeFrame(dh, body)
	if err != nil {
		c.t.Fatalf("decode %v: %v", h.Op, err)
	}
	return h, f
}

func (c *client) call(stream int16, m frame.Message) frame.Message {
	c.t.Helper()
	c.send(stream, m, nil)
	h, f := c.recv()
	if h.Stream != stream {
		c.t.Fatalf("answer on stream %d, want %d", h.Stream, stream)
	}
	return f.Message
}

// expectEOF checks that the server closed the connection.
func (c *client) expectEOF() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(safety))
	if h, _, err := c.r.Read(); err != io.EOF {
		c.t.Fatalf("after a fatal error: frame %+v, err %v; want EOF", h, err)
	}
}

func (c *client) handshake() {
	c.t.Helper()
	if m := c.call(1, &frame.Options{}); m.Opcode() != frame.OpSupported {
		c.t.Fatalf("OPTIONS answered %T", m)
	}
	if m := c.call(2, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}); m.Opcode() != frame.OpReady {
		c.t.Fatalf("STARTUP answered %+v", m)
	}
}

func query(q string) *frame.Query {
	return &frame.Query{Query: q, Params: frame.QueryParams{Consistency: 1, PageSize: 5000}}
}

func wantError(t *testing.T, m frame.Message, code frame.ErrorCode, substr string) *frame.Error {
	t.Helper()
	e, ok := m.(*frame.Error)
	if !ok || e.Code != code || !strings.Contains(e.Message, substr) {
		t.Fatalf("got %+v, want error 0x%04x containing %q", m, int32(code), substr)
	}
	return e
}

func TestHandshakeAndQueries(t *testing.T) {
	s, _ := startServer(t, ServerConfig{})
	c := dial(t, s)
	wantError(t, c.call(1, query("echo")), frame.ErrProtocol, "expecting STARTUP or OPTIONS")
	m := c.call(1, &frame.Options{})
	sup := m.(*frame.Supported).Options
	if sup["CQL_VERSION"][0] != "3.4.4" || strings.Join(sup["COMPRESSION"], ",") != "snappy,lz4" || strings.Join(sup["PROTOCOL_VERSIONS"], ",") != "3/v3,4/v4" {
		t.Errorf("SUPPORTED %v", sup)
	}
	wantError(t, c.call(2, &frame.Startup{Options: map[string]string{}}), frame.ErrProtocol, "CQL_VERSION")
	wantError(t, c.call(2, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "ZSTD"}}),
		frame.ErrProtocol, "Unknown compression algorithm: zstd")
	if m := c.call(2, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}); m.Opcode() != frame.OpReady {
		t.Fatalf("STARTUP: %+v", m)
	}
	wantError(t, c.call(2, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}), frame.ErrProtocol, "already initialized")
	// Heartbeats work after the handshake too.
	if m := c.call(3, &frame.Options{}); m.Opcode() != frame.OpSupported {
		t.Fatalf("OPTIONS: %+v", m)
	}

	if m := c.call(4, query("USE ks1")); m.(*frame.SetKeyspaceResult).Keyspace != "ks1" {
		t.Fatalf("USE: %+v", m)
	}
	rows := c.call(5, query("echo")).(*frame.RowsResult)
	if got := string(rows.Rows[0][0].Bytes); got != "ks1" {
		t.Errorf("session keyspace %q after USE", got)
	}
	e := wantError(t, c.call(6, query("timeout")), frame.ErrWriteTimeout, "timed out")
	if e.WriteType != "COUNTER" || e.BlockFor != 2 || e.Consistency != 4 {
		t.Errorf("write timeout %+v", e)
	}
	wantError(t, c.call(7, query("fail")), frame.ErrServer, "disk on fire")
	wantError(t, c.call(8, query("panic")), frame.ErrServer, "boom")

	// The connection survived the panic; PREPARE, EXECUTE, UNPREPARED,
	// BATCH.
	p := c.call(9, &frame.Prepare{Query: "SELECT"}).(*frame.PreparedResult)
	if !bytes.Equal(p.ID, preparedID) || p.PKIndexes[0] != 0 {
		t.Errorf("prepared %+v", p)
	}
	if m := c.call(10, &frame.Execute{ID: preparedID, Params: frame.QueryParams{Consistency: 4}}); m.Opcode() != frame.OpResult {
		t.Errorf("execute: %+v", m)
	}
	u := wantError(t, c.call(11, &frame.Execute{ID: []byte{1, 2, 3}}), frame.ErrUnprepared, "")
	if !bytes.Equal(u.UnknownID, []byte{1, 2, 3}) {
		t.Errorf("unprepared id %x", u.UnknownID)
	}
	if _, ok := c.call(12, &frame.Batch{Type: frame.BatchCounter, Statements: []frame.BatchStatement{{PreparedID: preparedID}}}).(*frame.VoidResult); !ok {
		t.Error("batch not void")
	}
}

// TestPayloadReachesExecutor sends the op id payload on QUERY, EXECUTE and
// BATCH: the executor gets it, and the fake's mirror comes back.
func TestPayloadReachesExecutor(t *testing.T) {
	s, ex := startServer(t, ServerConfig{})
	c := dial(t, s)
	c.handshake()
	op := map[string][]byte{"idemkv-op": {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9}, "nil": nil}
	for i, m := range []frame.Message{query("echo"), &frame.Execute{ID: preparedID}} {
		c.send(int16(20+i), m, op)
		_, f := c.recv()
		if !equalPayload(f.Payload, op) {
			t.Errorf("%T: mirrored payload %v", m, f.Payload)
		}
	}
	c.send(30, &frame.Batch{Type: frame.BatchCounter, Statements: []frame.BatchStatement{{Query: "x"}}}, op)
	c.recv()
	c.send(31, query("echo"), nil)
	if _, f := c.recv(); f.Payload != nil {
		t.Errorf("payload %v on an answer to a request without one", f.Payload)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if len(ex.payloads) != 3 || !equalPayload(ex.payloads[0], op) || !equalPayload(ex.payloads[1], op) || ex.payloads[2] != nil {
		t.Errorf("executor saw payloads %v", ex.payloads)
	}
}

func equalPayload(a, b map[string][]byte) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) || (v == nil) != (w == nil) {
			return false
		}
	}
	return true
}

// TestPipelinedOutOfOrder sends many requests in one write, each on its own
// stream id, blocked in the executor; releasing them in a random order must
// answer each on its stream, in release order.
func TestPipelinedOutOfOrder(t *testing.T) {
	r := testseed.Rand(t)
	s, ex := startServer(t, ServerConfig{})
	c := dial(t, s)
	c.handshake()
	const n = 200
	streams := map[int]int16{}
	used := map[int16]bool{}
	var buf []byte
	for i := range n {
		st := int16(r.IntN(32767) + 1)
		for used[st] {
			st = int16(r.IntN(32767) + 1)
		}
		used[st] = true
		streams[i] = st
		var err error
		buf, err = frame.AppendFrame(buf, &frame.Frame{Version: 4, Stream: st, Message: query(fmt.Sprintf("wait %d", i))})
		if err != nil {
			t.Fatal(err)
		}
	}
	c.write(buf)
	// All n are in the executor at once before any is answered.
	for range n {
		select {
		case <-ex.started:
		case <-time.After(safety):
			t.Fatal("requests did not all reach the executor")
		}
	}
	for _, i := range r.Perm(n) {
		ex.release(i)
		h, f := c.recv()
		if h.Stream != streams[i] {
			t.Fatalf("released request %d (stream %d), got an answer on stream %d", i, streams[i], h.Stream)
		}
		rows := f.Message.(*frame.RowsResult)
		if v, _ := frame.DecodeInt(rows.Rows[0][0].Bytes); int(v) != i {
			t.Fatalf("stream %d answered for request %d, want %d", h.Stream, v, i)
		}
	}
}

// TestPipelinedBurst floods one connection with requests from several
// writers and checks that every stream gets exactly its answer.
func TestPipelinedBurst(t *testing.T) {
	s, _ := startServer(t, ServerConfig{})
	c := dial(t, s)
	c.handshake()
	c.call(3, query("USE burst"))
	const n = 2000
	go func() {
		var buf []byte
		for i := range n {
			buf, _ = frame.AppendFrame(buf, &frame.Frame{Version: 4, Stream: int16(i + 1), Message: query("echo")})
			if len(buf) > 4096 || i == n-1 {
				c.nc.Write(buf)
				buf = buf[:0]
			}
		}
	}()
	seen := map[int16]bool{}
	for range n {
		h, f := c.recv()
		if seen[h.Stream] || h.Stream < 1 || h.Stream > n {
			t.Fatalf("unexpected or repeated stream %d", h.Stream)
		}
		seen[h.Stream] = true
		if rows, ok := f.Message.(*frame.RowsResult); !ok || string(rows.Rows[0][0].Bytes) != "burst" {
			t.Fatalf("stream %d: %+v", h.Stream, f.Message)
		}
	}
}

func TestRegisterAndEvents(t *testing.T) {
	evs := &fakeEvents{}
	s, _ := startServer(t, ServerConfig{Events: evs})
	c := dial(t, s)
	c.handshake()
	wantError(t, c.call(3, &frame.Register{Events: []string{"NOPE"}}), frame.ErrProtocol, "NOPE")
	if m := c.call(3, &frame.Register{Events: []string{frame.EventStatusChange, frame.EventSchemaChange}}); m.Opcode() != frame.OpReady {
		t.Fatalf("REGISTER: %+v", m)
	}
	if evs.count() != 1 {
		t.Fatalf("%d subscriptions after REGISTER", evs.count())
	}
	// Not registered: never sent. Registered: sent on stream -1, in order.
	evs.publish(frame.Event{Type: frame.EventTopologyChange, Change: "NEW_NODE", IP: []byte{127, 0, 0, 3}, Port: 9042})
	evs.publish(frame.Event{Type: frame.EventStatusChange, Change: "DOWN", IP: []byte{127, 0, 0, 2}, Port: 9042})
	evs.publish(frame.Event{Type: frame.EventSchemaChange, Change: "CREATED",
		Schema: frame.SchemaChangeResult{Change: "CREATED", Target: frame.TargetTable, Keyspace: "ks", Name: "t"}})
	h, f := c.recv()
	ev := f.Message.(*frame.Event)
	if h.Stream != -1 || h.Version != 0x84 || ev.Type != frame.EventStatusChange || ev.Change != "DOWN" || !bytes.Equal(ev.IP, []byte{127, 0, 0, 2}) {
		t.Fatalf("event %+v on %+v", ev, h)
	}
	h, f = c.recv()
	if ev := f.Message.(*frame.Event); h.Stream != -1 || ev.Schema.Name != "t" || ev.Schema.Target != frame.TargetTable {
		t.Fatalf("schema event %+v", ev)
	}
	// A second REGISTER widens the subscription, still one.
	c.call(4, &frame.Register{Events: []string{frame.EventTopologyChange}})
	if evs.count() != 1 {
		t.Fatalf("%d subscriptions after a second REGISTER", evs.count())
	}
	evs.publish(frame.Event{Type: frame.EventTopologyChange, Change: "NEW_NODE", IP: []byte{127, 0, 0, 3}, Port: 9042})
	if _, f := c.recv(); f.Message.(*frame.Event).Type != frame.EventTopologyChange {
		t.Fatalf("event %+v", f.Message)
	}
	// Closing the connection unsubscribes.
	c.nc.Close()
	s.Close()
	if evs.count() != 0 {
		t.Fatalf("%d subscriptions after close", evs.count())
	}
}

func TestAuth(t *testing.T) {
	s, _ := startServer(t, ServerConfig{Auth: map[string]string{"alice": "s3cret"}})
	c := dial(t, s)
	a, ok := c.call(1, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}).(*frame.Authenticate)
	if !ok || a.Authenticator != "org.apache.cassandra.auth.PasswordAuthenticator" {
		t.Fatalf("STARTUP with auth: %+v", a)
	}
	wantError(t, c.call(2, query("echo")), frame.ErrProtocol, "expecting SASL_RESPONSE")
	// OPTIONS is still answered while authenticating.
	if m := c.call(2, &frame.Options{}); m.Opcode() != frame.OpSupported {
		t.Fatalf("OPTIONS: %+v", m)
	}
	e := wantError(t, c.call(3, &frame.AuthResponse{Token: []byte("\x00alice\x00wrong")}), frame.ErrBadCredentials, "")
	if e.Message != "Provided username alice and/or password are incorrect" {
		t.Errorf("message %q", e.Message)
	}
	wantError(t, c.call(3, &frame.AuthResponse{Token: []byte("\x00bob\x00s3cret")}), frame.ErrBadCredentials, "username bob")
	wantError(t, c.call(3, &frame.AuthResponse{Token: []byte("garbage")}), frame.ErrBadCredentials, "must not be null")
	if m := c.call(4, &frame.AuthResponse{Token: []byte("\x00alice\x00s3cret")}); m.Opcode() != frame.OpAuthSuccess {
		t.Fatalf("good credentials: %+v", m)
	}
	rows := c.call(5, query("echo")).(*frame.RowsResult)
	if got := string(rows.Rows[0][1].Bytes); got != "alice" {
		t.Errorf("session user %q", got)
	}
	wantError(t, c.call(6, &frame.AuthResponse{Token: []byte("\x00alice\x00s3cret")}), frame.ErrProtocol, "already authenticated")
}

// gocqlVersionRe is gocql v1.7.0's control.go protocolSupportRe.
var gocqlVersionRe = regexp.MustCompile(`the lowest supported version is \d+ and the greatest is (\d+)$`)

func TestProtocolVersionError(t *testing.T) {
	s, _ := startServer(t, ServerConfig{})
	for _, tc := range []struct {
		name string
		req  string // hex
		hdr  int
	}{
		{"v5 OPTIONS", "05 00 0107 05 00000000", 9},
		{"v5 STARTUP with a body", "05 00 0002 01 00000004 0000 0000", 9},
		{"v2 STARTUP", "02 00 07 01 00000002 0000", 8},
		{"v1", "01 00 05 05 00000000", 8},
		{"v6", "06 00 7fff 05 00000000", 9},
		{"v127", "7f 00 0003 05 00000000", 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			req := mustHex(t, tc.req)
			c.write(req)
			c.nc.SetReadDeadline(time.Now().Add(safety))
			resp, err := io.ReadAll(c.nc)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			// The answer, byte by byte: version|0x80, flags 0, the
			// request's stream, ERROR, length, code 0x000A, message. A
			// version above 4 is answered in v4, one below 3 in its own,
			// as Cassandra 5.0.9 answers (checked with raw frames: v6 and
			// v127 in v5, its greatest; v1 and v2 in theirs).
			v := req[0]
			msg := fmt.Sprintf("Invalid or unsupported protocol version (%d); the lowest supported version is 3 and the greatest is 4", v)
			rv := v
			if v > frame.MaxVersion {
				rv = frame.MaxVersion
			}
			want := []byte{0x80 | rv, 0}
			want = append(want, req[2:tc.hdr-5]...) // the stream, 1 or 2 bytes
			want = append(want, 0)
			want = binary.BigEndian.AppendUint32(want, uint32(6+len(msg)))
			want = binary.BigEndian.AppendUint32(want, 0x000A)
			want = binary.BigEndian.AppendUint16(want, uint16(len(msg)))
			want = append(want, msg...)
			if !bytes.Equal(resp, want) {
				t.Fatalf("answer (then EOF):\n got %x\nwant %x", resp, want)
			}
			if m := gocqlVersionRe.FindStringSubmatch(msg); m == nil || m[1] != "4" {
				t.Fatalf("gocql's regexp does not find version 4 in %q", msg)
			}
		})
	}
	// v3 is served.
	c := dial(t, s)
	b, _ := frame.AppendFrame(nil, &frame.Frame{Version: 3, Stream: 1, Message: &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}})
	c.write(b)
	if h, f := c.recv(); h.Version != 0x83 || f.Message.Opcode() != frame.OpReady {
		t.Fatalf("v3 STARTUP: %+v %+v", h, f.Message)
	}
	b, _ = frame.AppendFrame(nil, &frame.Frame{Version: 3, Stream: 2, Message: &frame.Prepare{Query: "x"}})
	c.write(b)
	if h, f := c.recv(); h.Version != 0x83 || f.Message.(*frame.PreparedResult).PKIndexes != nil {
		t.Fatalf("v3 PREPARE: %+v %+v", h, f.Message)
	}
	// ... but not mixed with v4 on one connection.
	c.send(3, &frame.Options{}, nil)
	h, f := c.recv()
	if h.Version != 0x84 || h.Stream != 3 {
		t.Fatalf("mixed versions answered with %+v", h)
	}
	wantError(t, f.Message, frame.ErrProtocol, "Invalid message version. Got 4 but previous messages on this connection had version 3")
	c.expectEOF()
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	if _, err := fmt.Sscanf(strings.ReplaceAll(s, " ", ""), "%x", &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBadFramesCloseOnlyTheirConnection sends broken frames on fresh
// connections while another connection, mid-conversation, keeps working.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	s, ex := startServer(t, ServerConfig{MaxFrame: 1024})
	good := dial(t, s)
	good.handshake()
	// A request in flight on the good connection across all of it.
	good.send(100, query("wait 1"), nil)
	<-ex.started

	for _, tc := range []struct {
		name   string
		req    string
		stream int16
		msg    string
	}{
		{"unknown opcode", "04 00 0011 04 00000000", 0x11, "Unknown opcode 4"},
		{"response opcode", "04 00 0012 08 00000004 00000001", 0x12, "Wrong protocol direction"},
		{"response direction", "84 00 0013 05 00000000", 0x13, "Wrong protocol direction"},
		{"truncated QUERY body", "04 00 0014 07 00000005 00000010 41", 0x14, "not enough bytes"},
		{"QUERY without parameters", "04 00 0015 07 00000005 00000001 41", 0x15, "consistency"},
		{"bad string map", "04 00 0016 01 00000003 0005 41", 0x16, "cannot fit"},
		{"oversized", "04 00 0017 07 00000401", 0x17, "Request is too big: length 1034 exceeds maximum allowed length 1033."},
		{"negative length", "04 00 0018 07 ffffffff", 0x18, "Invalid frame body length -1"},
		{"compressed", "04 01 0019 05 00000000", 0x19, "compress"},
		{"stream ends inside a frame", "04 00 001a 05 00000010 0000", 0x1a, "Truncated frame"},
		{"stream ends inside a header", "04 00 00", 0, "Truncated frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			c.handshake()
			c.write(mustHex(t, tc.req))
			if strings.Contains(tc.name, "stream ends") {
				c.nc.(*net.TCPConn).CloseWrite()
			}
			h, f := c.recv()
			if h.Stream != tc.stream || h.Version != 0x84 {
				t.Errorf("answer header %+v, want stream %d", h, tc.stream)
			}
			wantError(t, f.Message, frame.ErrProtocol, tc.msg)
			c.expectEOF()

			// The other connection is unaffected.
			if m := good.call(5, &frame.Options{}); m.Opcode() != frame.OpSupported {
				t.Fatalf("good connection: %+v", m)
			}
		})
	}
	ex.release(1)
	if h, _ := good.recv(); h.Stream != 100 {
		t.Fatalf("in-flight request answered on stream %d", h.Stream)
	}
}

// TestCloseCancelsRequests closes the server with requests blocked in the
// executor: their contexts end and Close returns.
func TestCloseCancelsRequests(t *testing.T) {
	s, ex := startServer(t, ServerConfig{})
	c := dial(t, s)
	c.handshake()
	for i := range 5 {
		c.send(int16(10+i), query("block"), nil)
	}
	for range 5 {
		<-ex.started
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ex.mu.Lock()
	n := ex.cancelled
	ex.mu.Unlock()
	if n != 5 {
		t.Fatalf("%d of 5 blocked requests saw their context end", n)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Fatal("still accepting after Close")
	}
}
