package cql

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

var compressions = []frame.Compression{frame.LZ4, frame.Snappy}

// startupWith opens a raw connection and negotiates comp; the STARTUP goes
// uncompressed and its READY answer comes compressed, as Cassandra sends it.
func startupWith(t *testing.T, s *Server, comp frame.Compression) *client {
	t.Helper()
	c := dial(t, s)
	c.send(1, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": comp.String()}}, nil)
	c.comp = comp
	h, f := c.recv()
	if f.Message.Opcode() != frame.OpReady || (h.Flags&frame.FlagCompression != 0) != (comp != frame.NoCompression) {
		t.Fatalf("%v: STARTUP answered %v with flags %#x", comp, f.Message.Opcode(), h.Flags)
	}
	return c
}

// rawFrame is a request frame with the compression flag and the given body
// as it is, for bodies that are not what the flag promises.
func rawFrame(stream int16, op frame.Opcode, body []byte) []byte {
	b := frame.AppendHeader(nil, frame.Header{Version: frame.Version4, Flags: frame.FlagCompression,
		Stream: stream, Op: op, Length: int32(len(body))})
	return append(b, body...)
}

func TestCompressionNegotiated(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp.String(), func(t *testing.T) {
			s, _ := startServer(t, ServerConfig{})
			c := startupWith(t, s, comp)
			// Every answer after READY is compressed.
			c.send(2, query("USE ks1"), nil)
			h, f := c.recv()
			if h.Flags&frame.FlagCompression == 0 || f.Message.(*frame.SetKeyspaceResult).Keyspace != "ks1" {
				t.Fatalf("USE: flags %#x, %+v", h.Flags, f.Message)
			}
			c.send(3, query("big 100000"), map[string][]byte{"k": []byte("v")})
			h, f = c.recv()
			rows := f.Message.(*frame.RowsResult)
			if h.Flags&frame.FlagCompression == 0 || h.Length > 10000 || len(rows.Rows[0][0].Bytes) != 100000 ||
				string(f.Payload["k"]) != "v" {
				t.Fatalf("big: flags %#x, %d bytes on the wire", h.Flags, h.Length)
			}
			// A request sent uncompressed after STARTUP is served too (gocql
			// sends its OPTIONS heartbeats so), and answered compressed.
			c.comp = frame.NoCompression
			c.send(4, &frame.Options{}, nil)
			c.comp = comp
			h, f = c.recv()
			if h.Flags&frame.FlagCompression == 0 || f.Message.Opcode() != frame.OpSupported {
				t.Fatalf("OPTIONS: flags %#x, %v", h.Flags, f.Message.Opcode())
			}
			// An error answer is compressed too.
			wantError(t, c.call(5, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}),
				frame.ErrProtocol, "already initialized")
		})
	}
}

func TestCompressionUnknown(t *testing.T) {
	s, _ := startServer(t, ServerConfig{})
	c := dial(t, s)
	wantError(t, c.call(1, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "Deflate"}}),
		frame.ErrProtocol, "Unknown compression algorithm: deflate")
	// The connection still takes a STARTUP, and names are matched without
	// regard to case, as Cassandra lower-cases them.
	c.send(2, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "LZ4"}}, nil)
	c.comp = frame.LZ4
	if _, f := c.recv(); f.Message.Opcode() != frame.OpReady {
		t.Fatalf("STARTUP: %v", f.Message.Opcode())
	}
	if m := c.call(3, query("echo")); m.Opcode() != frame.OpResult {
		t.Fatalf("echo: %+v", m)
	}
}

func TestCompressionAuth(t *testing.T) {
	s, _ := startServer(t, ServerConfig{Auth: map[string]string{"u": "p"}})
	c := dial(t, s)
	c.send(1, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "snappy"}}, nil)
	c.comp = frame.Snappy
	h, f := c.recv()
	if f.Message.Opcode() != frame.OpAuthenticate || h.Flags&frame.FlagCompression == 0 {
		t.Fatalf("STARTUP answered %v, flags %#x", f.Message.Opcode(), h.Flags)
	}
	c.send(2, &frame.AuthResponse{Token: []byte("\x00u\x00p")}, nil)
	h, f = c.recv()
	if f.Message.Opcode() != frame.OpAuthSuccess || h.Flags&frame.FlagCompression == 0 {
		t.Fatalf("AUTH_RESPONSE answered %v, flags %#x", f.Message.Opcode(), h.Flags)
	}
}

// A compressed frame before any compression is negotiated cannot be read:
// a fatal protocol error, as before.
func TestCompressedFrameNotNegotiated(t *testing.T) {
	s, _ := startServer(t, ServerConfig{})
	c := startupWith(t, s, frame.NoCompression)
	z, _ := frame.Compress(frame.LZ4, nil, []byte{0, 0, 0, 0})
	c.write(rawFrame(2, frame.OpQuery, z))
	_, f := c.recv()
	wantError(t, f.Message, frame.ErrProtocol, "no compression was negotiated")
	c.expectEOF()
}

// A body that does not decompress, or claims more than the frame limit, is
// answered with a protocol error on its stream; the connection goes on.
func TestCompressionBadBodies(t *testing.T) {
	big := append(binary.BigEndian.AppendUint32(nil, 1<<30), 0x10, 'a')
	cases := map[frame.Compression][]struct {
		body []byte
		want string
	}{
		frame.LZ4: {
			{[]byte{0, 1}, "shorter than its 4-byte length"},
			{[]byte{0, 0, 0, 50, 0xff, 0xff}, "Error decompressing lz4"},
			{[]byte{0, 0, 0, 2, 0x30, 'a', 'b', 'c'}, "Error decompressing lz4"},
			{big, "exceeds maximum allowed length"},
		},
		frame.Snappy: {
			{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "Provided frame does not appear to be Snappy compressed"},
			{[]byte{20, 0xff, 0xff}, "Provided frame does not appear to be Snappy compressed"},
			{[]byte{0x80, 0x80, 0x80, 0x80, 0x04, 0}, "exceeds maximum allowed length"},
		},
	}
	for _, comp := range compressions {
		t.Run(comp.String(), func(t *testing.T) {
			s, _ := startServer(t, ServerConfig{MaxFrame: 1 << 16})
			c := startupWith(t, s, comp)
			for i, tc := range cases[comp] {
				stream := int16(10 + i)
				c.write(rawFrame(stream, frame.OpQuery, tc.body))
				h, f := c.recv()
				if h.Stream != stream {
					t.Fatalf("answer on stream %d, want %d", h.Stream, stream)
				}
				wantError(t, f.Message, frame.ErrProtocol, tc.want)
				if h.Flags&frame.FlagCompression == 0 {
					t.Errorf("error answer not compressed")
				}
				if m := c.call(stream+100, query("echo")); m.Opcode() != frame.OpResult {
					t.Fatalf("after %x: %+v", tc.body, m)
				}
			}
			if n := s.Stats().FramesTooLarge; n != 1 {
				t.Errorf("FramesTooLarge %d, want 1", n)
			}
		})
	}
}

// The frame limit applies to the decompressed body: a query that fits
// compressed but not decompressed is refused, one just under it served.
func TestCompressionFrameLimit(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp.String(), func(t *testing.T) {
			s, _ := startServer(t, ServerConfig{MaxFrame: 1 << 14})
			c := startupWith(t, s, comp)
			long := "echo" + strings.Repeat(" ", 1<<14)
			c.send(2, query(long), nil)
			h, f := c.recv()
			wantError(t, f.Message, frame.ErrProtocol, "exceeds maximum allowed length 16384")
			if h.Stream != 2 {
				t.Fatalf("stream %d", h.Stream)
			}
			if m := c.call(3, query("echo"+strings.Repeat(" ", 1<<13))); m.Opcode() != frame.OpResult {
				t.Fatalf("under the limit: %+v", m)
			}
		})
	}
}

// Events pushed on a compressing connection are compressed.
func TestCompressionEvents(t *testing.T) {
	ev := &fakeEvents{}
	s, _ := startServer(t, ServerConfig{Events: ev})
	c := startupWith(t, s, frame.LZ4)
	if m := c.call(2, &frame.Register{Events: []string{frame.EventStatusChange}}); m.Opcode() != frame.OpReady {
		t.Fatalf("REGISTER: %+v", m)
	}
	ev.publish(frame.Event{Type: frame.EventStatusChange, Change: "DOWN", IP: []byte{127, 0, 0, 2}, Port: 9042})
	h, f := c.recv()
	if h.Stream != -1 || h.Flags&frame.FlagCompression == 0 || f.Message.Opcode() != frame.OpEvent {
		t.Fatalf("event: stream %d flags %#x %v", h.Stream, h.Flags, f.Message.Opcode())
	}
}

// A compressed request counts its decompressed length as in flight, from
// before it is decompressed until its answer is written.
func TestCompressionInFlightBytes(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp.String(), func(t *testing.T) {
			s, ex := startServer(t, ServerConfig{})
			c := startupWith(t, s, comp)
			q := "wait 1" + strings.Repeat(" ", 500_000)
			c.send(2, query(q), nil)
			<-ex.started
			st := s.Stats()
			if st.RequestsInFlight != 1 || st.RequestBytesInFlight < 500_000 {
				t.Errorf("in flight: %d requests, %d bytes; want 1 request of over 500,000 bytes",
					st.RequestsInFlight, st.RequestBytesInFlight)
			}
			ex.release(1)
			if _, f := c.recv(); f.Message.Opcode() != frame.OpResult {
				t.Fatalf("wait: %v", f.Message.Opcode())
			}
		})
	}
}
