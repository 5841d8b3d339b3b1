package cql

import (
	"bytes"
	"context"
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
)

// tracingExecutor answers like fakeExecutor and gives a traced request
// (Session.Trace) the trace id traceID, on results and errors alike.
type tracingExecutor struct{ *fakeExecutor }

var traceID = []byte{0x5e, 0x55, 0x10, 0x4e, 0xe9, 0xff, 0x11, 0xf1, 0x80, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07}

func (e tracingExecutor) Query(ctx context.Context, s *Session, q string, p frame.QueryParams, payload map[string][]byte) (Outcome, error) {
	out, err := e.fakeExecutor.Query(ctx, s, q, p, payload)
	if s.Trace {
		out.TraceID = traceID
	}
	if q == "warn" {
		out.Warnings = []string{"careful"}
	}
	return out, err
}

// sendTraced sends m with the tracing flag (which adds no body bytes).
func (c *client) sendTraced(stream int16, m frame.Message, payload map[string][]byte) {
	c.t.Helper()
	b, err := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: stream, Message: m, Payload: payload, Tracing: true})
	if err != nil {
		c.t.Fatal(err)
	}
	if b[1] != frame.FlagTracing|flagIf(payload != nil, frame.FlagCustomPayload) {
		c.t.Fatalf("request flags %#x", b[1])
	}
	c.write(b)
}

func flagIf(b bool, f byte) byte {
	if b {
		return f
	}
	return 0
}

// recvRaw reads one frame's header and raw body.
func (c *client) recvRaw() (frame.Header, []byte) {
	c.t.Helper()
	h, body, err := c.r.Read()
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return h, append([]byte(nil), body...)
}

// TestTracingFlag checks the tracing flag on the wire: STARTUP, OPTIONS
// and REGISTER are not traced (their answers have no flag and no id, as
// Cassandra's); a traced QUERY's RESULT, and ERROR, have the flag and
// begin with the 16-byte trace id, before the warnings and the custom
// payload; an untraced QUERY's answer has neither.
func TestTracingFlag(t *testing.T) {
	s, _ := startServer(t, ServerConfig{Executor: tracingExecutor{newFakeExecutor()}})
	c := dial(t, s)
	c.sendTraced(1, &frame.Options{}, nil)
	if h, _ := c.recvRaw(); h.Op != frame.OpSupported || h.Flags != 0 {
		t.Fatalf("OPTIONS with tracing: %v flags %#x", h.Op, h.Flags)
	}
	c.sendTraced(2, &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}, nil)
	if h, body := c.recvRaw(); h.Op != frame.OpReady || h.Flags != 0 || len(body) != 0 {
		t.Fatalf("STARTUP with tracing: %v flags %#x body %x", h.Op, h.Flags, body)
	}
	c.sendTraced(3, &frame.Register{Events: []string{frame.EventSchemaChange}}, nil)
	if h, body := c.recvRaw(); h.Op != frame.OpReady || h.Flags != 0 || len(body) != 0 {
		t.Fatalf("REGISTER with tracing: %v flags %#x body %x", h.Op, h.Flags, body)
	}

	// A traced result: the flag, the id, then the RESULT body as it is
	// without tracing.
	c.send(4, query("echo"), nil)
	_, plain := c.recvRaw()
	c.sendTraced(5, query("echo"), nil)
	h, body := c.recvRaw()
	if h.Op != frame.OpResult || h.Flags != frame.FlagTracing || !bytes.Equal(body[:16], traceID) || !bytes.Equal(body[16:], plain) {
		t.Fatalf("traced RESULT: flags %#x body %x, want the id then %x", h.Flags, body, plain)
	}
	f, err := frame.DecodeFrame(h, body)
	if err != nil || !bytes.Equal(f.TracingID, traceID) || f.Message.Opcode() != frame.OpResult {
		t.Fatalf("decode: %+v, %v", f, err)
	}

	// A traced error (Cassandra 4 sends the id with the ERROR too).
	c.sendTraced(6, query("timeout"), nil)
	h, body = c.recvRaw()
	if h.Op != frame.OpError || h.Flags != frame.FlagTracing || !bytes.Equal(body[:16], traceID) {
		t.Fatalf("traced ERROR: flags %#x body %x", h.Flags, body)
	}
	if f, err := frame.DecodeFrame(h, body); err != nil {
		t.Fatal(err)
	} else {
		wantError(t, f.Message, frame.ErrWriteTimeout, "timed out")
	}

	// The prefixes' order: trace id, warnings, custom payload.
	c.sendTraced(7, query("warn"), map[string][]byte{"k": []byte("v")})
	h, body = c.recvRaw()
	want := frame.FlagTracing | frame.FlagWarning | frame.FlagCustomPayload
	if h.Flags != want || !bytes.Equal(body[:16], traceID) ||
		!bytes.HasPrefix(body[16:], []byte("\x00\x01\x00\x07careful\x00\x01\x00\x01k\x00\x00\x00\x01v")) {
		t.Fatalf("traced answer with warnings and payload: flags %#x body %x", h.Flags, body)
	}

	// No flag, no id.
	c.send(8, query("echo"), nil)
	if h, body := c.recvRaw(); h.Flags != 0 || !bytes.Equal(body, plain) {
		t.Fatalf("untraced: flags %#x body %x", h.Flags, body)
	}
}
