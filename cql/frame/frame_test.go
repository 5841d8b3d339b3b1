package frame

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/idemkv/idemkv/internal/testseed"
)

// encode encodes f and fails the test on error.
func encode(t testing.TB, f *Frame) []byte {
	t.Helper()
	b, err := AppendFrame(nil, f)
	if err != nil {
		t.Fatalf("AppendFrame(%T): %v", f.Message, err)
	}
	return b
}

// decodeOne reads one frame from b, checks that it used all of b, and
// decodes it.
func decodeOne(t testing.TB, b []byte) (Header, *Frame) {
	t.Helper()
	r := NewReader(bytes.NewReader(b), 0)
	h, body, err := r.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if _, _, err := r.Read(); err != io.EOF {
		t.Fatalf("second Read: %v, want io.EOF", err)
	}
	f, err := DecodeFrame(h, body)
	if err != nil {
		t.Fatalf("DecodeFrame(%v): %v", h.Op, err)
	}
	return h, f
}

// gocqlFrames are frames shaped as gocql v1.7.0 sends and expects them
// (its connection sequence, system tables and EXECUTE/BATCH shapes), used by the round-trip test and as
// fuzz seeds.
func gocqlFrames() []*Frame {
	ts := int64(1700000000000000)
	id := []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	op := []byte{0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 42}
	host := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	local := []ColumnSpec{
		{"system", "local", "key", Text},
		{"system", "local", "host_id", UUID},
		{"system", "local", "rpc_address", Inet},
		{"system", "local", "tokens", SetOf(Text)},
		{"system", "local", "replication", MapOf(Text, Text)},
		{"system", "local", "lst", ListOf(Int)},
		{"system", "local", "c", Counter},
	}
	return []*Frame{
		{Version: 4, Stream: 1, Message: &Options{}},
		{Version: 4, Stream: 2, Message: &Startup{Options: map[string]string{
			"CQL_VERSION": "3.0.0", "DRIVER_NAME": "github.com/apache/cassandra-gocql-driver", "DRIVER_VERSION": ""}}},
		{Version: 4, Stream: 3, Message: &Query{Query: "SELECT * FROM system.local WHERE key='local'",
			Params: QueryParams{Consistency: 1, PageSize: 5000, Timestamp: ts, HasTimestamp: true}}},
		{Version: 4, Stream: 4, Message: &Register{Events: []string{EventTopologyChange, EventStatusChange, EventSchemaChange}}},
		{Version: 4, Stream: 5, Message: &Prepare{Query: "UPDATE ks.t SET c = c + ? WHERE k = ?"}},
		{Version: 4, Stream: 6, Payload: map[string][]byte{"idemkv-op": op}, Message: &Execute{ID: id, Params: QueryParams{
			Consistency: 4, Values: []Value{Bytes(EncodeBigint(5)), Bytes(EncodeText("a"))},
			SkipMetadata: true, PageSize: 5000, Timestamp: ts, HasTimestamp: true}}},
		{Version: 4, Stream: 7, Message: &Execute{ID: id, Params: QueryParams{
			Consistency: 6, Values: []Value{Null, Unset, Bytes([]byte{})}, Names: []string{"a", "b", "c"},
			PageSize: 100, PagingState: []byte{9, 9}, SerialConsistency: 9, HasSerial: true}}},
		{Version: 4, Stream: 8, Payload: map[string][]byte{"idemkv-op": op, "nil": nil}, Message: &Batch{Type: BatchCounter,
			Statements: []BatchStatement{
				{PreparedID: id, Values: []Value{Bytes(EncodeBigint(1)), Bytes(EncodeText("a"))}},
				{Query: "UPDATE ks.t SET c = c + 1 WHERE k = 'b'", Values: []Value{}},
			}, Consistency: 4, Timestamp: ts, HasTimestamp: true}},
		{Version: 4, Stream: 9, Message: &Batch{Type: BatchUnlogged, Statements: []BatchStatement{
			{Query: "UPDATE ks.t SET c = c + :d WHERE k = :k", Values: []Value{Bytes(EncodeBigint(1)), Null}, Names: []string{"d", "k"}},
		}, Consistency: 1, SerialConsistency: 8, HasSerial: true}},
		{Version: 4, Stream: 10, Message: &AuthResponse{Token: []byte("\x00cassandra\x00cassandra")}},
		{Version: 4, Stream: 1, Message: &Supported{Options: map[string][]string{
			"CQL_VERSION": {"3.4.4"}, "PROTOCOL_VERSIONS": {"3/v3", "4/v4"}, "COMPRESSION": {}}}},
		{Version: 4, Stream: 2, Message: &Ready{}},
		{Version: 4, Stream: 2, Message: &Authenticate{Authenticator: "org.apache.cassandra.auth.PasswordAuthenticator"}},
		{Version: 4, Stream: 2, Message: &AuthChallenge{Token: []byte{1}}},
		{Version: 4, Stream: 2, Message: &AuthSuccess{}},
		{Version: 4, Stream: 3, Message: &RowsResult{Columns: local, Rows: [][]Value{{
			Bytes(EncodeText("local")), Bytes(EncodeUUID(host)), Bytes(EncodeInet(net.IPv4(127, 0, 0, 1))),
			Bytes(EncodeSet([][]byte{EncodeText("-9223372036854775808"), EncodeText("0")})),
			Bytes(EncodeMap([][]byte{EncodeText("class")}, [][]byte{EncodeText("SimpleStrategy")})),
			Bytes(EncodeList([][]byte{EncodeInt(1), EncodeInt(2)})), Null,
		}}}},
		{Version: 4, Stream: 3, Warnings: []string{"careful"}, Payload: map[string][]byte{}, TracingID: host[:],
			Message: &RowsResult{Columns: []ColumnSpec{{"ks", "t", "k", Text}, {"ks", "u", "c", Counter}},
				Rows: [][]Value{{Bytes(EncodeText("a")), Bytes(EncodeBigint(3))}, {Bytes(EncodeText("b")), Null}}, PagingState: []byte{1, 2, 3}}},
		{Version: 4, Stream: 3, Message: &RowsResult{NoMetadata: true, Rows: [][]Value{{Bytes(EncodeBigint(7))}}}},
		{Version: 4, Stream: 3, Message: &RowsResult{}},
		{Version: 4, Stream: 11, Message: &SetKeyspaceResult{Keyspace: "ks"}},
		{Version: 4, Stream: 12, Message: &VoidResult{}},
		{Version: 4, Stream: 5, Message: &PreparedResult{ID: id,
			Params: []ColumnSpec{{"ks", "t", "c", Counter}, {"ks", "t", "k", Text}}, PKIndexes: []uint16{1}}},
		{Version: 4, Stream: 5, Message: &PreparedResult{ID: id,
			Params:        []ColumnSpec{{"ks", "t", "k", Text}},
			PKIndexes:     []uint16{0},
			ResultColumns: []ColumnSpec{{"ks", "t", "c", Counter}, {"ks", "t", "d", Counter}}}},
		{Version: 4, Stream: 13, Message: &SchemaChangeResult{Change: "CREATED", Target: TargetKeyspace, Keyspace: "ks"}},
		{Version: 4, Stream: 13, Message: &SchemaChangeResult{Change: "DROPPED", Target: TargetTable, Keyspace: "ks", Name: "t"}},
		{Version: 4, Stream: -1, Message: &Event{Type: EventTopologyChange, Change: "NEW_NODE", IP: []byte{127, 0, 0, 2}, Port: 9042}},
		{Version: 4, Stream: -1, Message: &Event{Type: EventStatusChange, Change: "DOWN", IP: net.ParseIP("::1"), Port: 9042}},
		{Version: 4, Stream: -1, Message: &Event{Type: EventSchemaChange, Change: "UPDATED",
			Schema: SchemaChangeResult{Change: "UPDATED", Target: TargetTable, Keyspace: "ks", Name: "t"}}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrUnavailable, Message: "Cannot achieve consistency level QUORUM",
			Consistency: 4, Required: 2, Alive: 1}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrWriteTimeout, Message: "Operation timed out - received only 0 responses.",
			Consistency: 4, Received: 0, BlockFor: 1, WriteType: "COUNTER"}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrReadTimeout, Message: "Operation timed out",
			Consistency: 1, Received: 1, BlockFor: 2, DataPresent: true}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrReadFailure, Message: "rf", Consistency: 1, Received: 1, BlockFor: 2, NumFailures: 1, DataPresent: true}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrWriteFailure, Message: "wf", Consistency: 1, Received: 1, BlockFor: 2, NumFailures: 1, WriteType: "SIMPLE"}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrFunctionFailure, Message: "ff", Keyspace: "ks", Function: "f", ArgTypes: []string{"int"}}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrAlreadyExists, Message: "Cannot add existing keyspace \"ks\"", Keyspace: "ks"}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrUnprepared, Message: "Prepared query with ID deadbeef not found", UnknownID: id}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrInvalid, Message: "unconfigured table peers_v2"}},
		{Version: 4, Stream: 14, Message: &Error{Code: ErrSyntax, Message: "line 1:0 no viable alternative at input 'SELEC'"}},
		{Version: 3, Stream: 15, Message: &PreparedResult{ID: id, Params: []ColumnSpec{{"ks", "t", "k", Text}}}},
		{Version: 3, Stream: 15, Message: &Query{Query: "SELECT 1", Params: QueryParams{Consistency: 1, Values: []Value{Null}}}},
	}
}

func TestRoundTripEveryMessage(t *testing.T) {
	seen := map[Opcode]bool{}
	var stream bytes.Buffer
	frames := gocqlFrames()
	for _, f := range frames {
		b := encode(t, f)
		stream.Write(b)
		h, got := decodeOne(t, b)
		seen[h.Op] = true
		if h.IsResponse() != h.Op.IsResponse() {
			t.Errorf("%v: direction bit %#x", h.Op, h.Version)
		}
		if !reflect.DeepEqual(got, f) {
			t.Errorf("%v round trip:\n got %+v %+v\nwant %+v %+v", h.Op, got, got.Message, f, f.Message)
		}
		// Re-encoding the decoded frame gives the same bytes.
		if b2 := encode(t, got); !bytes.Equal(b, b2) {
			t.Errorf("%v: re-encoding differs:\n%x\n%x", h.Op, b, b2)
		}
	}
	for op := OpError; op <= OpAuthSuccess; op++ {
		if (op.IsRequest() || op.IsResponse()) && !seen[op] {
			t.Errorf("no round trip for %v", op)
		}
	}

	// The same frames as one stream, read through a reader that returns
	// one byte at a time (a frame spans reads) and one that returns
	// everything at once (several frames per read).
	for _, r := range []io.Reader{iotest.OneByteReader(bytes.NewReader(stream.Bytes())), bytes.NewReader(stream.Bytes())} {
		fr := NewReader(r, 0)
		for i := range frames {
			h, body, err := fr.Read()
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if _, err := DecodeFrame(h, body); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
		}
		if _, _, err := fr.Read(); err != io.EOF {
			t.Fatalf("after the last frame: %v", err)
		}
	}
}

func TestExactBytes(t *testing.T) {
	cases := []struct {
		name string
		f    *Frame
		hex  string
	}{
		{"OPTIONS", &Frame{Version: 4, Stream: 1, Message: &Options{}}, "04 00 0001 05 00000000"},
		{"READY", &Frame{Version: 4, Stream: 1, Message: &Ready{}}, "84 00 0001 02 00000000"},
		{"STARTUP", &Frame{Version: 4, Stream: 0x0102, Message: &Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}},
			"04 00 0102 01 00000016 0001 000b" + hex.EncodeToString([]byte("CQL_VERSION")) + "0005" + hex.EncodeToString([]byte("3.0.0"))},
		{"RESULT Void", &Frame{Version: 4, Stream: 2, Message: VoidResult{}}, "84 00 0002 08 00000004 00000001"},
		{"EVENT", &Frame{Version: 4, Stream: -1, Message: Event{Type: EventStatusChange, Change: "UP", IP: []byte{127, 0, 0, 2}, Port: 9042}},
			"84 00 ffff 0c 0000001c 000d" + hex.EncodeToString([]byte("STATUS_CHANGE")) + "0002" + hex.EncodeToString([]byte("UP")) +
				"04 7f000002 00002352"},
		{"QUERY", &Frame{Version: 4, Stream: 3, Message: &Query{Query: "USE ks",
			Params: QueryParams{Consistency: 1, PageSize: 5000, Timestamp: 1, HasTimestamp: true}}},
			"04 00 0003 07 00000019 00000006" + hex.EncodeToString([]byte("USE ks")) + "0001 24 00001388 0000000000000001"},
		{"ERROR WriteTimeout", &Frame{Version: 4, Stream: 4, Message: &Error{Code: ErrWriteTimeout, Message: "t",
			Consistency: 4, Received: 0, BlockFor: 1, WriteType: "COUNTER"}},
			"84 00 0004 00 0000001a 00001100 0001 74 0004 00000000 00000001 0007" + hex.EncodeToString([]byte("COUNTER"))},
		{"ERROR Unprepared", &Frame{Version: 4, Stream: 4, Message: &Error{Code: ErrUnprepared, Message: "", UnknownID: []byte{0xab}}},
			"84 00 0004 00 00000009 00002500 0000 0001 ab"},
		{"RESULT Rows", &Frame{Version: 4, Stream: 5, Message: &RowsResult{
			Columns: []ColumnSpec{{"k", "t", "c", Counter}}, Rows: [][]Value{{Bytes(EncodeBigint(1))}, {Null}}}},
			"84 00 0005 08 0000002b 00000002 00000001 00000001 0001 6b 0001 74 0001 63 0005 00000002 00000008 0000000000000001 ffffffff"},
		{"payload+warning", &Frame{Version: 4, Stream: 6, Warnings: []string{"w"}, Payload: map[string][]byte{"k": nil}, Message: &Ready{}},
			"84 0c 0006 02 0000000e 0001 0001 77 0001 0001 6b ffffffff"},
	}
	for _, c := range cases {
		want, err := hex.DecodeString(strings.ReplaceAll(c.hex, " ", ""))
		if err != nil {
			t.Fatalf("%s: bad hex: %v", c.name, err)
		}
		if got := encode(t, c.f); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, got, want)
		}
	}
}

// TestV3 checks what differs in protocol v3: no pk indexes in Prepared, no
// unset values, no payload or warnings.
func TestV3(t *testing.T) {
	b := encode(t, &Frame{Version: 3, Stream: 1, Payload: map[string][]byte{"a": nil}, Warnings: []string{"w"},
		Message: &PreparedResult{ID: []byte{1}, Params: []ColumnSpec{{"k", "t", "c", Int}}, PKIndexes: []uint16{0}}})
	h, f := decodeOne(t, b)
	if h.Flags != 0 || f.Payload != nil || f.Warnings != nil {
		t.Errorf("v3 frame has flags %#x payload %v warnings %v", h.Flags, f.Payload, f.Warnings)
	}
	if p := f.Message.(*PreparedResult); p.PKIndexes != nil {
		t.Errorf("v3 Prepared has pk indexes %v", p.PKIndexes)
	}
	q := encode(t, &Frame{Version: 3, Stream: 1, Message: &Query{Query: "q", Params: QueryParams{Values: []Value{Unset}}}})
	h, _ = ParseHeader(q)
	if _, err := DecodeFrame(h, q[HeaderSize:]); !errors.Is(err, ErrMalformed) {
		t.Errorf("unset value in v3: %v, want ErrMalformed", err)
	}
}

func TestReaderErrors(t *testing.T) {
	// Unsupported versions: the header is read in its version's layout.
	for _, c := range []struct {
		hex    string
		stream int16
		v      byte
	}{
		{"05 00 0007 05 00000000", 7, 5},
		{"02 00 07 05 00000000", 7, 2},
		{"01 00 ff 05 00000000", -1, 1},
		{"7f 00 0102 05 00000000", 0x102, 0x7f},
	} {
		b, _ := hex.DecodeString(strings.ReplaceAll(c.hex, " ", ""))
		_, _, err := NewReader(bytes.NewReader(b), 0).Read()
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Header.Stream != c.stream || ve.Header.ProtoVersion() != c.v {
			t.Errorf("%s: %v (%+v)", c.hex, err, ve)
			continue
		}
		if !strings.HasSuffix(err.Error(), "the lowest supported version is 3 and the greatest is 4") {
			t.Errorf("message %q", err)
		}
	}
	// Too large, checked before reading the body.
	b, _ := hex.DecodeString("040000090700000101")
	_, _, err := NewReader(bytes.NewReader(b), 256).Read()
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Header.Stream != 9 {
		t.Errorf("oversized: %v", err)
	}
	b, _ = hex.DecodeString("04000009078fffffff")
	if _, _, err = NewReader(bytes.NewReader(b), 0).Read(); !errors.As(err, &tl) {
		t.Errorf("negative length: %v", err)
	}
	// Truncated header and body.
	for _, s := range []string{"0400", "040000010500000004aabb"} {
		b, _ := hex.DecodeString(s)
		if _, _, err := NewReader(bytes.NewReader(b), 0).Read(); err != io.ErrUnexpectedEOF {
			t.Errorf("%s: %v, want ErrUnexpectedEOF", s, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		h    Header
		body string
	}{
		{"unknown opcode", Header{Version: 4, Op: 0x04}, ""},
		{"response opcode in request", Header{Version: 4, Op: OpResult}, "00000001"},
		{"request opcode in response", Header{Version: 0x84, Op: OpQuery}, ""},
		{"compressed", Header{Version: 4, Op: OpOptions, Flags: FlagCompression}, ""},
		{"short query", Header{Version: 4, Op: OpQuery}, "0000000a 41"},
		{"negative query length", Header{Version: 4, Op: OpQuery}, "ffffffff"},
		{"missing consistency", Header{Version: 4, Op: OpQuery}, "00000001 41"},
		{"values past end", Header{Version: 4, Op: OpQuery}, "00000001 41 0001 01 ffff"},
		{"value length -3", Header{Version: 4, Op: OpQuery}, "00000001 41 0001 01 0001 fffffffd"},
		{"value past end", Header{Version: 4, Op: OpQuery}, "00000001 41 0001 01 0001 00000005 00"},
		{"missing page size", Header{Version: 4, Op: OpQuery}, "00000001 41 0001 04"},
		{"missing timestamp", Header{Version: 4, Op: OpQuery}, "00000001 41 0001 20 0000"},
		{"bad batch type", Header{Version: 4, Op: OpBatch}, "03 0000 0001 00"},
		{"bad batch kind", Header{Version: 4, Op: OpBatch}, "02 0001 02 0000 0000 0001 00"},
		{"batch count too big", Header{Version: 4, Op: OpBatch}, "02 ffff 00"},
		{"payload past end", Header{Version: 4, Op: OpOptions, Flags: FlagCustomPayload}, "0001 0001 41 00000009"},
		{"string map truncated", Header{Version: 4, Op: OpStartup}, "0002 0001 41 0001 42"},
		{"execute id truncated", Header{Version: 4, Op: OpExecute}, "0010 0102"},
		{"register truncated", Header{Version: 4, Op: OpRegister}, "0003 0001 41"},
		{"auth token truncated", Header{Version: 4, Op: OpAuthResponse}, "00000003 41"},
		{"bad inet size", Header{Version: 0x84, Op: OpEvent}, "000d" + hex.EncodeToString([]byte("STATUS_CHANGE")) + "0002 5550 05 0102030405 00000000"},
		{"rows past end", Header{Version: 0x84, Op: OpResult}, "00000002 00000004 00000001 7fffffff"},
		{"type nested too deep", Header{Version: 0x84, Op: OpResult}, "00000002 00000001 00000001 0000 0000 0001 63" + strings.Repeat("0020", 40)},
	}
	for _, c := range cases {
		body, err := hex.DecodeString(strings.ReplaceAll(c.body, " ", ""))
		if err != nil {
			t.Fatalf("%s: bad hex", c.name)
		}
		c.h.Length = int32(len(body))
		if f, err := DecodeFrame(c.h, body); err == nil {
			t.Errorf("%s: decoded %+v, want an error", c.name, f.Message)
		}
	}
}

// TestTruncatedBodies cuts every gocql-shaped frame at every length: each
// prefix is either a valid message (trailing fields are optional in a few
// places) or an error, never a panic.
func TestTruncatedBodies(t *testing.T) {
	for _, f := range gocqlFrames() {
		b := encode(t, f)
		h, _ := ParseHeader(b)
		body := b[h.Size():]
		for n := range body {
			DecodeFrame(h, body[:n:n])
		}
	}
}

// TestRandomQueryParams round-trips random QUERY, EXECUTE and BATCH
// requests.
func TestRandomQueryParams(t *testing.T) {
	r := testseed.Rand(t)
	for i := range 2000 {
		p := randomParams(r)
		var m Message
		switch r.IntN(3) {
		case 0:
			m = &Query{Query: randomString(r, 50), Params: p}
		case 1:
			m = &Execute{ID: randomBytes(r, 16), Params: p}
		default:
			b := &Batch{Type: BatchType(r.IntN(3)), Consistency: p.Consistency,
				SerialConsistency: p.SerialConsistency, HasSerial: p.HasSerial,
				Timestamp: p.Timestamp, HasTimestamp: p.HasTimestamp}
			named := r.IntN(2) == 0
			for range r.IntN(5) {
				s := BatchStatement{Values: randomParams(r).Values}
				if s.Values == nil {
					s.Values = []Value{}
				}
				if named {
					// Non-empty: empty names make the BATCH layout
					// ambiguous (see decodeBatch).
					s.Names = make([]string, len(s.Values))
					for j := range s.Names {
						s.Names[j] = "n" + randomString(r, 5)
					}
				}
				if r.IntN(2) == 0 {
					s.PreparedID = randomBytes(r, 16)
				} else {
					s.Query = randomString(r, 30)
				}
				b.Statements = append(b.Statements, s)
			}
			if b.Statements == nil {
				b.Statements = []BatchStatement{}
			}
			m = b
		}
		f := &Frame{Version: 4, Stream: int16(r.IntN(65536) - 32768), Message: m}
		if r.IntN(3) == 0 {
			f.Payload = map[string][]byte{"idemkv-op": randomBytes(r, 16)}
		}
		_, got := decodeOne(t, encode(t, f))
		if !reflect.DeepEqual(got, f) {
			t.Fatalf("case %d:\n got %+v\nwant %+v", i, got.Message, f.Message)
		}
	}
}

func randomParams(r *rand.Rand) QueryParams {
	p := QueryParams{Consistency: Consistency(r.IntN(11))}
	if r.IntN(2) == 0 {
		p.Values = make([]Value, r.IntN(6))
		for i := range p.Values {
			switch r.IntN(4) {
			case 0:
				p.Values[i] = Null
			case 1:
				p.Values[i] = Unset
			default:
				p.Values[i] = Bytes(randomBytes(r, 20))
			}
		}
		if r.IntN(3) == 0 {
			p.Names = make([]string, len(p.Values))
			for i := range p.Names {
				p.Names[i] = randomString(r, 8)
			}
		}
	}
	p.SkipMetadata = r.IntN(2) == 0
	if r.IntN(2) == 0 {
		p.PageSize = int32(r.IntN(10000) + 1)
	}
	if r.IntN(3) == 0 {
		p.PagingState = randomBytes(r, 10)
	}
	if r.IntN(3) == 0 {
		p.SerialConsistency, p.HasSerial = Consistency(8+r.IntN(2)), true
	}
	if r.IntN(2) == 0 {
		p.Timestamp, p.HasTimestamp = r.Int64(), true
	}
	return p
}

func randomBytes(r *rand.Rand, max int) []byte {
	b := make([]byte, r.IntN(max+1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randomString(r *rand.Rand, max int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz ?=+*'\"é"
	rs := []rune(letters)
	var sb strings.Builder
	for range r.IntN(max + 1) {
		sb.WriteRune(rs[r.IntN(len(rs))])
	}
	return sb.String()
}

func TestValueCodecs(t *testing.T) {
	if v, err := DecodeInt(EncodeInt(-5)); err != nil || v != -5 {
		t.Errorf("int: %v %v", v, err)
	}
	if v, err := DecodeBigint(EncodeBigint(-1 << 62)); err != nil || v != -1<<62 {
		t.Errorf("bigint: %v %v", v, err)
	}
	if v := DecodeText(EncodeText("héllo")); v != "héllo" {
		t.Errorf("text: %q", v)
	}
	u := [16]byte{15: 1}
	if v, err := DecodeUUID(EncodeUUID(u)); err != nil || v != u {
		t.Errorf("uuid: %v %v", v, err)
	}
	if v, err := DecodeBoolean(EncodeBoolean(true)); err != nil || !v {
		t.Errorf("boolean: %v %v", v, err)
	}
	if v, err := DecodeDouble(EncodeDouble(1.5)); err != nil || v != 1.5 {
		t.Errorf("double: %v %v", v, err)
	}
	if b := EncodeInet(net.ParseIP("127.0.0.2")); len(b) != 4 {
		t.Errorf("inet v4 in 16-byte form encodes as %d bytes", len(b))
	}
	if v, err := DecodeInet(EncodeInet(net.ParseIP("fe80::1"))); err != nil || !v.Equal(net.ParseIP("fe80::1")) {
		t.Errorf("inet: %v %v", v, err)
	}
	elems := [][]byte{EncodeText("a"), {}, EncodeText("ccc")}
	if got, err := DecodeSet(EncodeSet(elems)); err != nil || !reflect.DeepEqual(got, elems) {
		t.Errorf("set: %q %v", got, err)
	}
	if got, err := DecodeList(EncodeList(nil)); err != nil || len(got) != 0 {
		t.Errorf("empty list: %q %v", got, err)
	}
	want := []byte{0, 0, 0, 2, 0, 0, 0, 1, 'a', 0, 0, 0, 0}
	if got := EncodeList([][]byte{{'a'}, {}}); !bytes.Equal(got, want) {
		t.Errorf("list bytes %x, want %x", got, want)
	}
	ks, vs, err := DecodeMap(EncodeMap([][]byte{EncodeText("k")}, [][]byte{EncodeInt(1)}))
	if err != nil || len(ks) != 1 || string(ks[0]) != "k" || !bytes.Equal(vs[0], EncodeInt(1)) {
		t.Errorf("map: %q %q %v", ks, vs, err)
	}
	for _, bad := range [][]byte{
		{0, 0, 0, 1}, {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}, {0x7f, 0xff, 0xff, 0xff}, {0, 0, 0, 0, 1}, {0, 0},
	} {
		if _, err := DecodeList(bad); err == nil {
			t.Errorf("DecodeList(%x) succeeded", bad)
		}
		if _, _, err := DecodeMap(bad); err == nil {
			t.Errorf("DecodeMap(%x) succeeded", bad)
		}
	}
	for _, b := range [][]byte{nil, {1, 2, 3}} {
		if _, err := DecodeInt(b); err == nil {
			t.Errorf("DecodeInt(%x) succeeded", b)
		}
		if _, err := DecodeBigint(b); err == nil {
			t.Errorf("DecodeBigint(%x) succeeded", b)
		}
		if _, err := DecodeUUID(b); err == nil {
			t.Errorf("DecodeUUID(%x) succeeded", b)
		}
		if _, err := DecodeInet(b); err == nil {
			t.Errorf("DecodeInet(%x) succeeded", b)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	for _, m := range []Message{
		&RowsResult{Columns: []ColumnSpec{{Name: "a", Type: Int}}, Rows: [][]Value{{Null, Null}}},
		&Error{Code: ErrServer, Message: strings.Repeat("x", 70000)},
		&Event{Type: EventStatusChange, Change: "UP", IP: []byte{1, 2}},
		&RowsResult{Columns: []ColumnSpec{{Name: "a", Type: DataType{ID: TypeList}}}},
	} {
		if b, err := AppendFrame([]byte{1}, &Frame{Version: 4, Message: m}); err == nil || !bytes.Equal(b, []byte{1}) {
			t.Errorf("%T: err %v, dst %x", m, err, b)
		}
	}
}
