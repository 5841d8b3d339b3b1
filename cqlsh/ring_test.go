package cqlsh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/node"
)

// testPort is the peer port of the ring the tests share (CQL on
// testPort+1), on 127.0.0.1-3; 0 when no ring could start.
var testPort int

// TestMain starts one three-node ring on loopback TCP for every test of the
// package, with a fixed seed.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cqlsh-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodes, err := startRing(dir, 3)
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "cqlsh tests: start ring:", err)
	} else {
		code = m.Run()
	}
	for _, nd := range nodes {
		nd.Stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func startRing(dir string, n int) ([]*node.Node, error) {
	rng := rand.New(rand.NewPCG(17, 17))
	port, err := bench.FreePort(n, rng)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes []*node.Node
	for i := 1; i <= n; i++ {
		nd, err := node.Start(node.Config{
			DataDirectory: filepath.Join(dir, fmt.Sprintf("node%d", i)),
			ListenAddress: fmt.Sprintf("127.0.0.%d", i),
			StoragePort:   port, NativeTransportPort: port + 1,
			Seeds:            []string{fmt.Sprintf("127.0.0.1:%d", port)},
			NumTokens:        8,
			GossipIntervalMS: 100, PhiConvictThreshold: 12,
			CounterWriteTimeoutMS: 2000,
		}, node.Options{Logger: logger, Seed: rng.Uint64()})
		if err != nil {
			return nodes, fmt.Errorf("node %d: %w", i, err)
		}
		nodes = append(nodes, nd)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		up := 0
		for _, nd := range nodes {
			for _, p := range nd.Gossip().Nodes() {
				if p.Up {
					up++
				}
			}
		}
		if up == n*n {
			break
		}
		if time.Now().After(deadline) {
			return nodes, errors.New("ring not up after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	testPort = port
	return nodes, nil
}

// open connects a shell to node i of the ring.
func open(t *testing.T, i int, keyspace string) *Shell {
	t.Helper()
	s, err := Open(Config{Hosts: []string{fmt.Sprintf("127.0.0.%d", i)}, Port: testPort + 1, Keyspace: keyspace})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// run executes statements as -e does and returns the output.
func run(t *testing.T, s *Shell, stmts string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := s.ExecString(stmts, &out, &errOut); err != nil {
		t.Fatalf("%s: %v (stderr %q)", stmts, err, errOut.String())
	}
	return out.String()
}

// counterValue reads table's counter c of key k through a fresh shell on
// node 1 at consistency ALL ("" if there is no row).
func counterValue(t *testing.T, table, k string) string {
	t.Helper()
	s := open(t, 1, "")
	out := run(t, s, "CONSISTENCY ALL; EXPAND ON; SELECT c FROM "+table+" WHERE k = '"+k+"'")
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "c" && f[1] == "|" {
			return f[2]
		}
	}
	return ""
}

var tables int

// freshTable creates keyspace ks if need be and a new counter table in it,
// and returns its name (ks.tN): each test, and each run of -count, has its
// own counters.
func freshTable(t *testing.T) string {
	t.Helper()
	tables++
	name := fmt.Sprintf("ks.t%d", tables)
	s := open(t, 1, "")
	run(t, s, `CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3};
		CREATE TABLE `+name+` (k text PRIMARY KEY, c counter);`)
	return name
}

func TestShellStaysOnItsHost(t *testing.T) {
	for i := 1; i <= 3; i++ {
		s := open(t, i, "")
		want := fmt.Sprintf("127.0.0.%d", i)
		for j := 0; j < 6; j++ {
			out := run(t, s, "SELECT broadcast_address FROM system.local")
			if !strings.Contains(out, " "+want+"\n") {
				t.Fatalf("statement %d on a shell connected to %s answered by another node:\n%s", j, want, out)
			}
		}
		out := run(t, s, "SELECT peer FROM system.peers")
		if strings.Contains(out, " "+want+"\n") || !strings.Contains(out, "(2 rows)") {
			t.Errorf("system.peers of %s should list the two others:\n%s", want, out)
		}
		if got := run(t, s, "SHOW HOST"); !strings.Contains(got, fmt.Sprintf("at %s:%d.", want, testPort+1)) {
			t.Errorf("SHOW HOST: %q", got)
		}
		if s.Host() != fmt.Sprintf("%s:%d", want, testPort+1) {
			t.Errorf("Host() = %q", s.Host())
		}
	}
}

func TestCtrlDDoesNotRunAnUnfinishedStatement(t *testing.T) {
	tbl := freshTable(t)
	s := open(t, 2, "")
	lr := NewScripted("UPDATE "+tbl+" SET c = c + 1", "WHERE k = 'ctrl-d'")
	var out, errOut bytes.Buffer
	if err := s.Run(lr, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if v := counterValue(t, tbl, "ctrl-d"); v != "" {
		t.Errorf("the unfinished UPDATE ran: counter %s", v)
	}
	if !strings.HasSuffix(out.String(), "\n") {
		t.Errorf("the output does not end with a new line: %q", out.String())
	}
	if !strings.Contains(errOut.String(), "not executed") {
		t.Errorf("no notice of the dropped statement: %q", errOut.String())
	}
	want := []string{"idemkv> ", "   ... ", "   ... "}
	if fmt.Sprint(lr.Prompts) != fmt.Sprint(want) {
		t.Errorf("prompts %q, want %q", lr.Prompts, want)
	}
}

func TestCtrlCDropsTheStatementBeingTyped(t *testing.T) {
	tbl := freshTable(t)
	s := open(t, 3, "")
	lr := NewScripted("UPDATE "+tbl+" SET c = c + 100", Interrupt,
		"UPDATE "+tbl+" SET c = c + 5 WHERE k = 'ctrl-c'; -- five", "EXIT")
	var out, errOut bytes.Buffer
	if err := s.Run(lr, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if errOut.Len() > 0 {
		t.Errorf("errors: %s", errOut.String())
	}
	if v := counterValue(t, tbl, "ctrl-c"); v != "5" {
		t.Errorf("counter %q, want 5", v)
	}
	want := []string{"idemkv> ", "   ... ", "idemkv> ", "idemkv> "}
	if fmt.Sprint(lr.Prompts) != fmt.Sprint(want) {
		t.Errorf("prompts %q, want %q", lr.Prompts, want)
	}
	if got := fmt.Sprint(lr.History); got != "[UPDATE "+tbl+" SET c = c + 5 WHERE k = 'ctrl-c'; EXIT]" {
		t.Errorf("history %s", got)
	}
}

func TestScriptsStopAtTheFirstError(t *testing.T) {
	tbl := freshTable(t)
	s := open(t, 1, "")
	var out, errOut bytes.Buffer
	err := s.ExecString("UPDATE "+tbl+" SET c = c + 1 WHERE k = 'e1'; SELECT * FROM ks.nope; UPDATE "+tbl+" SET c = c + 1 WHERE k = 'e2'", &out, &errOut)
	var se *ScriptError
	if !errors.As(err, &se) || se.Source != "-e" {
		t.Fatalf("-e with a failing statement: %v", err)
	}
	if !strings.Contains(err.Error(), "InvalidRequest") {
		t.Errorf("error %q", err)
	}
	if counterValue(t, tbl, "e1") != "1" || counterValue(t, tbl, "e2") != "" {
		t.Errorf("e1 %q (want 1), e2 %q (want none)", counterValue(t, tbl, "e1"), counterValue(t, tbl, "e2"))
	}

	script := "UPDATE " + tbl + " SET c = c + 1 WHERE k = 'p1';\n\nSELECT * FROM\n  ks.nope;\nUPDATE " + tbl + " SET c = c + 1 WHERE k = 'p2';\n"
	l := NewLines(strings.NewReader(script))
	l.Name = "<stdin>"
	err = s.Run(l, &out, &errOut)
	if !errors.As(err, &se) || se.Line != 4 || !strings.HasPrefix(err.Error(), "<stdin>:4: ") {
		t.Fatalf("piped script: %v", err)
	}
	if counterValue(t, tbl, "p2") != "" {
		t.Error("the statement after the error ran")
	}

	// A script cut in the middle of a statement does not run it and fails.
	err = s.Run(NewLines(strings.NewReader("UPDATE "+tbl+" SET c = c + 1 WHERE k = 'p3'\n")), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "incomplete statement") {
		t.Errorf("unterminated script: %v", err)
	}
	if counterValue(t, tbl, "p3") != "" {
		t.Error("the unterminated statement ran")
	}

	// An interactive shell prints the error and goes on.
	out.Reset()
	errOut.Reset()
	if err := s.Run(NewScripted("SELECT * FROM ks.nope;", "SHOW VERSION"), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "InvalidRequest") || !strings.Contains(out.String(), "CQL spec") {
		t.Errorf("interactive error: stdout %q stderr %q", out.String(), errOut.String())
	}
}

func TestCommentsAndSemicolonsInStrings(t *testing.T) {
	tbl := freshTable(t)
	s := open(t, 2, "ks")
	// At ALL: a read at ONE may reach a replica the update at ONE has
	// not reached yet (CI read 3 for 5 once).
	out := run(t, s, "CONSISTENCY ALL; UPDATE "+tbl+" SET c = c + 2 WHERE k = 'a;b'; -- a comment; with a semicolon\n"+
		"/* block; */ UPDATE "+tbl+" SET c = c + 3 WHERE k = 'a;b'; // another\n"+
		"SELECT k, c FROM "+tbl+" WHERE k = 'a;b';")
	want := "Consistency level set to ALL.\n\n k   | c\n-----+---\n a;b | 5\n\n(1 rows)\n"
	if out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

func TestSelectPrintsAsCqlsh(t *testing.T) {
	freshTable(t) // keyspace ks
	s := open(t, 1, "")
	out := run(t, s, "SELECT keyspace_name, durable_writes, replication FROM system_schema.keyspaces WHERE keyspace_name = 'ks'")
	for _, want := range []string{
		" keyspace_name | durable_writes | replication\n",
		"            ks |           True | {'class': 'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': '3'}\n",
		"\n(1 rows)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out = run(t, s, "EXPAND ON; SELECT key, truncated_at FROM system.local")
	if !strings.Contains(out, "\n@ Row 1\n") || !strings.Contains(out, " truncated_at | null\n") {
		t.Errorf("expanded output:\n%s", out)
	}
}

func TestPagingPausesInteractiveShells(t *testing.T) {
	tbl := freshTable(t)
	s := open(t, 1, "")
	for _, k := range []string{"a", "b", "c"} {
		// At ALL, so that every replica holds the rows the reads at ONE count.
		run(t, s, "CONSISTENCY ALL; UPDATE "+tbl+" SET c = c + 1 WHERE k = '"+k+"'")
	}
	lr := NewScripted("PAGING 2", "SELECT * FROM "+tbl+";", "")
	var out, errOut bytes.Buffer
	if err := s.Run(lr, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	more := 0
	for _, p := range lr.Prompts {
		if p == "---MORE---" {
			more++
		}
	}
	if more != 1 || !strings.Contains(out.String(), "(3 rows)") {
		t.Errorf("%d pauses (want 1); output:\n%s%s", more, out.String(), errOut.String())
	}
	// Scripts never pause, and print one table whatever the pages.
	defer func(n int) { batchPageSize = n }(batchPageSize)
	batchPageSize = 2
	if out := run(t, s, "PAGING 1; SELECT * FROM "+tbl); !strings.Contains(out, "(3 rows)") || strings.Count(out, " k | c") != 1 {
		t.Errorf("script output:\n%s", out)
	}
}

func TestDescribe(t *testing.T) {
	s := open(t, 3, "")
	run(t, s, `CREATE KEYSPACE IF NOT EXISTS desc_ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2};
		DROP TABLE IF EXISTS desc_ks.events;
		CREATE TABLE desc_ks.events (site text, day int, hits counter, misses counter, PRIMARY KEY ((site, day)))`)
	ddl := run(t, s, "DESCRIBE TABLE desc_ks.events")
	for _, want := range []string{
		"CREATE TABLE desc_ks.events (\n    site text,\n    day int,\n    hits counter,\n    misses counter,\n    PRIMARY KEY ((site, day))\n) WITH bloom_filter_fp_chance = 0.01\n",
		"    AND comment = ''\n",
		"    AND speculative_retry = '99PERCENTILE';\n",
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DESCRIBE TABLE lacks %q:\n%s", want, ddl)
		}
	}
	if out := run(t, s, "DESCRIBE KEYSPACES"); !strings.Contains(out, "desc_ks") || !strings.Contains(out, "system_schema") {
		t.Errorf("DESCRIBE KEYSPACES:\n%s", out)
	}
	if out := run(t, s, "USE desc_ks; DESCRIBE TABLES"); out != "\nevents\n\n" {
		t.Errorf("DESCRIBE TABLES: %q", out)
	}
	out := run(t, s, "DESCRIBE KEYSPACE desc_ks")
	if !strings.Contains(out, "CREATE KEYSPACE desc_ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '2'}  AND durable_writes = true;") ||
		!strings.Contains(out, "CREATE TABLE desc_ks.events (") {
		t.Errorf("DESCRIBE KEYSPACE:\n%s", out)
	}
	// The statements DESCRIBE prints create the same table again.
	run(t, s, "DROP TABLE desc_ks.events")
	run(t, s, ddl)
	if again := run(t, s, "DESC desc_ks.events"); again != ddl {
		t.Errorf("recreated table describes as\n%s\nwas\n%s", again, ddl)
	}
}

func TestDescribeShowsIdempotence(t *testing.T) {
	freshTable(t) // keyspace ks
	s := open(t, 1, "ks")
	run(t, s, "DROP TABLE IF EXISTS idem; CREATE TABLE idem (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}")
	if out := run(t, s, "DESCRIBE TABLE idem"); !strings.Contains(out, "    k text PRIMARY KEY,\n    c counter\n) WITH") ||
		!strings.Contains(out, "AND idempotence = {'class': 'fbf'}") {
		t.Errorf("DESCRIBE TABLE:\n%s", out)
	}
}

func TestUnknownKeyspaceIsOneError(t *testing.T) {
	_, err := Open(Config{Hosts: []string{"127.0.0.1"}, Port: testPort + 1, Keyspace: "nope"})
	if err == nil || err.Error() != "keyspace 'nope' does not exist" {
		t.Errorf("Open with an unknown keyspace: %v", err)
	}
	s := open(t, 1, "")
	var out, errOut bytes.Buffer
	if err := s.Run(NewScripted("USE nope;", "USE ks;"), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if errOut.String() != "keyspace 'nope' does not exist\n" || s.Keyspace() != "ks" {
		t.Errorf("stderr %q, keyspace %q", errOut.String(), s.Keyspace())
	}
}

func TestShellCommands(t *testing.T) {
	s := open(t, 1, "")
	var out, errOut bytes.Buffer
	lr := NewScripted("HELP", "HELP DESCRIBE", "TRACING ON", "CONSISTENCY QUORUM", "CONSISTENCY", "EXPAND", "quit;", "SELECT never")
	if err := s.Run(lr, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Shell commands", "DESCRIBE TABLE [ks.]t", "Consistency level set to QUORUM.",
		"Current consistency level is QUORUM.", "Expanded output is currently OFF."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), "Now Tracing is enabled") {
		t.Errorf("TRACING ON: %q", out.String())
	}
	if len(lr.Prompts) != 7 {
		t.Errorf("the shell read on after quit: %q", lr.Prompts)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "it's.cql")
	if err := os.WriteFile(file, []byte("SELECT key FROM system.local;\nSELECT * FROM ks.nope;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err := s.ExecString("SOURCE '"+strings.ReplaceAll(file, "'", "''")+"'", &out, &errOut)
	if err == nil || !strings.HasPrefix(err.Error(), file+":2: ") || !strings.Contains(out.String(), " local\n") {
		t.Errorf("SOURCE: %v\n%s", err, out.String())
	}
	// At the prompt, the error of a sourced file keeps its place too.
	errOut.Reset()
	if err := s.Run(NewScripted("SOURCE '"+strings.ReplaceAll(file, "'", "''")+"'"), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(errOut.String(), file+":2: InvalidRequest: ") {
		t.Errorf("interactive SOURCE error: %q", errOut.String())
	}
}
