package node

import (
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/transport"
)

// A busy admin port is logged and the node runs without the endpoint;
// admin_port -1 serves none.
func TestAdminPortBusyOrOff(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		port int
		want string
	}{{port, "admin endpoint (metrics, nodetool) not started"}, {-1, ""}} {
		var log syncBuffer
		nd, err := Start(Config{
			DataDirectory: filepath.Join(t.TempDir(), "n"), ListenAddress: "127.0.0.1", AdminPort: c.port,
			StartNativeTransport: new(bool),
		}, Options{Listen: transport.NewMemNetwork(1).Listen, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatalf("admin_port %d: %v", c.port, err)
		}
		if nd.AdminAddr() != "" || !strings.Contains(log.String(), c.want) {
			t.Errorf("admin_port %d: admin address %q, log:\n%s", c.port, nd.AdminAddr(), log.String())
		}
		if err := nd.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}
