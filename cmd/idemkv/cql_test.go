package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/node"
)

// A node that cannot be reached is one error line and status 1.
func TestCQLUnreachableHostIsOneError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	var out, errOut bytes.Buffer
	code := run([]string{"cql", "--port", strconv.Itoa(port), "-e", "SELECT * FROM system.local"}, &out, &errOut)
	if code != 1 {
		t.Errorf("status %d, want 1", code)
	}
	msg := errOut.String()
	if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "idemkv cql: connect to 127.0.0.1:"+strconv.Itoa(port)) {
		t.Errorf("stderr %q", msg)
	}
}

func TestCQLHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"cql", "-h"}, &out, &errOut); code != 0 {
		t.Errorf("status %d", code)
	}
	if !strings.Contains(errOut.String(), "usage: idemkv cql [flags] [host [port]]") {
		t.Errorf("help %q", errOut.String())
	}
}

// startNode runs one node on 127.0.0.1 for the test and returns its CQL port.
func startNode(t *testing.T) int {
	t.Helper()
	port, err := bench.FreePort(1, rand.New(rand.NewPCG(5, 5)))
	if err != nil {
		t.Fatal(err)
	}
	nd, err := node.Start(node.Config{
		DataDirectory: t.TempDir(), ListenAddress: "127.0.0.1",
		StoragePort: port, NativeTransportPort: port + 1,
		Seeds: []string{fmt.Sprintf("127.0.0.1:%d", port)}, NumTokens: 4,
	}, node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Stop() })
	return port + 1
}

// Scripts (-e, -f) exit with status 1 at the first failing statement, the
// error on stderr with its place; the statements after it do not run.
func TestCQLScriptsExitNonZeroOnError(t *testing.T) {
	port := strconv.Itoa(startNode(t))
	cql := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"cql", "--host", "127.0.0.1", "--port", port}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := cql("-e", "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}; "+
		"CREATE TABLE ks.t (k text PRIMARY KEY, c counter); UPDATE ks.t SET c = c + 1 WHERE k = 'a'; SELECT * FROM ks.t")
	if code != 0 || !strings.Contains(out, " a | 1\n") || errOut != "" {
		t.Fatalf("status %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = cql("-e", "UPDATE ks.t SET c = c + 1 WHERE k = 'a'; SELECT * FROM ks.nope; UPDATE ks.t SET c = c + 1 WHERE k = 'a'")
	if code != 1 || !strings.HasPrefix(errOut, "idemkv cql: -e:1: InvalidRequest: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("-e with an error: status %d, stderr %q", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "script.cql")
	if err := os.WriteFile(file, []byte("USE ks;\nUPDATE t SET c = c + 1 WHERE k = 'a';\nSELEC;\nUPDATE t SET c = c + 1 WHERE k = 'a';\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cql("-f", file)
	if code != 1 || !strings.HasPrefix(errOut, "idemkv cql: "+file+":3: SyntaxException: ") {
		t.Errorf("-f with an error: status %d, stderr %q", code, errOut)
	}
	if _, out, _ = cql("-k", "ks", "-e", "SELECT c FROM t WHERE k = 'a'"); !strings.Contains(out, " 3\n") {
		t.Errorf("the statements after the errors ran (want c = 3):\n%s", out)
	}
	code, _, errOut = cql("--keyspace", "nope", "-e", "SELECT * FROM t")
	if code != 1 || errOut != "idemkv cql: keyspace 'nope' does not exist\n" {
		t.Errorf("--keyspace nope: status %d, stderr %q", code, errOut)
	}
}
