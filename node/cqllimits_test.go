package node

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/transport"
)

// TestCQLLimitsFromConfig: the native transport keys reach the node's CQL
// server: a frame over native_transport_max_auth_message_size_in_kb before
// STARTUP is refused, and a second connection over
// native_transport_max_concurrent_connections is answered OVERLOADED.
func TestCQLLimitsFromConfig(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	on := true
	nd, err := Start(Config{
		DataDirectory: t.TempDir(), ListenAddress: "127.0.0.1", Seeds: []string{"127.0.0.1"}, NumTokens: 4,
		NativeTransportPort: port, StartNativeTransport: &on,
		NativeTransportMaxAuthMessageKB: 1, NativeTransportMaxConcurrentConnections: 1,
	}, Options{Listen: transport.NewMemNetwork(1).Listen, Logger: quiet(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Stop()
	addr := nd.Config().CQLAddr()
	call := func(req []byte) (*frame.Frame, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		h, body, err := frame.NewReader(c, 0).Read()
		if err != nil {
			t.Fatal(err)
		}
		f, err := frame.DecodeFrame(h, body)
		if err != nil {
			t.Fatal(err)
		}
		return f, c
	}
	wantErr := func(f *frame.Frame, code frame.ErrorCode, substr string) {
		t.Helper()
		if e, ok := f.Message.(*frame.Error); !ok || e.Code != code || !strings.Contains(e.Message, substr) {
			t.Fatalf("got %+v, want error %v with %q", f.Message, code, substr)
		}
	}
	f, _ := call(frame.AppendHeader(nil, frame.Header{Version: 4, Stream: 1, Op: frame.OpStartup, Length: 1025}))
	wantErr(f, frame.ErrProtocol, "Request is too big")
	deadline := time.Now().Add(20 * time.Second)
	for nd.CQLStats().ConnectionsOpen != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the refused connection is still open")
		}
		time.Sleep(5 * time.Millisecond)
	}
	startup, err := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: 2, Message: &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := call(startup); f.Message.Opcode() != frame.OpReady {
		t.Fatalf("STARTUP: %+v", f.Message)
	}
	f, _ = call(startup)
	wantErr(f, frame.ErrOverloaded, "Exceeded maximum native connection limit of 1 by using 2 connections")
	if st := nd.CQLStats(); st.FramesTooLarge != 1 || st.ConnectionsRefused != 1 {
		t.Errorf("stats %+v", st)
	}
}
