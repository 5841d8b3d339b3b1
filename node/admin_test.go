package node

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coltype"
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

func TestStatementKind(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT * FROM t":                        "select",
		"  update t SET c = c + 1 WHERE k = 'a'": "update",
		"-- a comment\nDELETE FROM t":            "delete",
		"/* x */ BEGIN BATCH UPDATE":             "batch",
		"CREATE\nTABLE t":                        "create",
		"":                                       "other",
		"/* unterminated":                        "other",
	} {
		if got := statementKind(q); got != want {
			t.Errorf("statementKind(%q) = %q, want %q", q, got, want)
		}
	}
}

func TestPartitionKeyFromText(t *testing.T) {
	text := []coltype.ColumnDef{{Name: "k", Type: "text"}}
	if b, err := partitionKey(text, "home"); err != nil || string(b) != "home" {
		t.Errorf("text: %q %v", b, err)
	}
	if b, err := partitionKey([]coltype.ColumnDef{{Name: "k", Type: "int"}}, "258"); err != nil || !bytes.Equal(b, []byte{0, 0, 1, 2}) {
		t.Errorf("int: %v %v", b, err)
	}
	two := []coltype.ColumnDef{{Name: "a", Type: "text"}, {Name: "b", Type: "bigint"}}
	b, err := partitionKey(two, "x:1")
	if want := []byte{0, 1, 'x', 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0}; err != nil || !bytes.Equal(b, want) {
		t.Errorf("composite: %v %v", b, err)
	}
	for _, bad := range []struct {
		cols []coltype.ColumnDef
		key  string
	}{{two, "x"}, {[]coltype.ColumnDef{{Name: "k", Type: "int"}}, "x"}, {[]coltype.ColumnDef{{Name: "k", Type: "uuid"}}, "12"}, {[]coltype.ColumnDef{{Name: "k", Type: "duration"}}, "1d"}} {
		if _, err := partitionKey(bad.cols, bad.key); err == nil {
			t.Errorf("%v %q: no error", bad.cols, bad.key)
		}
	}
}
