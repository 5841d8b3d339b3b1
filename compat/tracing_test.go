package compat

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// idTracer is a gocql.Tracer that keeps the trace ids it is given.
type idTracer struct {
	mu  sync.Mutex
	ids [][]byte
}

func (t *idTracer) Trace(id []byte) {
	t.mu.Lock()
	t.ids = append(t.ids, append([]byte(nil), id...))
	t.mu.Unlock()
}

// TestGocqlTracing traces an update, a read and a batch with gocql on a
// one-node ring: each gets a trace id, a version 1 UUID, whose session
// (with a duration) and events (with activities) gocql's NewTraceWriter
// and plain SELECTs read back from system_traces.
func TestGocqlTracing(t *testing.T) {
	r := startRing(t, 1, nil)
	s := r.session(r.cluster())
	exec(t, s, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	exec(t, s, "CREATE TABLE ks.t (k text PRIMARY KEY, c counter)")

	var out bytes.Buffer
	w := gocql.NewTraceWriter(s, &out)
	if err := s.Query("UPDATE ks.t SET c = c + 1 WHERE k = ?", "a").Trace(w).Exec(); err != nil {
		t.Fatal(err)
	}
	t.Logf("trace writer:\n%s", out.String())
	if !strings.Contains(out.String(), "Tracing session") || !strings.Contains(out.String(), "Leader chosen: this node") {
		t.Fatalf("trace writer printed:\n%s", out.String())
	}

	ids := &idTracer{}
	if err := s.Query("UPDATE ks.t SET c = c + 2 WHERE k = ?", "a").Trace(ids).Exec(); err != nil {
		t.Fatal(err)
	}
	var v int64
	if err := s.Query("SELECT c FROM ks.t WHERE k = ?", "a").Trace(ids).Scan(&v); err != nil || v != 3 {
		t.Fatalf("read: %d, %v", v, err)
	}
	b := s.NewBatch(gocql.CounterBatch)
	b.Query("UPDATE ks.t SET c = c + 1 WHERE k = ?", "b")
	b.Trace(ids)
	if err := s.ExecuteBatch(b); err != nil {
		t.Fatal(err)
	}
	// An error is traced too (Cassandra 4 sends the id with the ERROR).
	if err := s.Query("SELECT c FROM ks.nope WHERE k = ?", "a").Trace(ids).Exec(); err == nil {
		t.Fatal("no error for a missing table")
	}
	ids.mu.Lock()
	got := ids.ids
	ids.mu.Unlock()
	// gocql traces its PREPARE of a statement too: at least one id per
	// request, and more for the first use of a statement.
	if len(got) < 4 {
		t.Fatalf("%d trace ids, want 4 or more", len(got))
	}
	for i, id := range got {
		u, err := gocql.UUIDFromBytes(id)
		if err != nil || u.Version() != 1 {
			t.Fatalf("trace id %x: version %d, %v", id, u.Version(), err)
		}
		var (
			client, coord net.IP
			command, req  string
			duration      int
			params        map[string]string
		)
		if err := s.Query("SELECT client, command, coordinator, duration, parameters, request FROM system_traces.sessions WHERE session_id = ?", u).
			Scan(&client, &command, &coord, &duration, &params, &req); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		if command != "QUERY" || duration <= 0 || !coord.Equal(net.ParseIP("127.0.0.1")) || params["query"] == "" && params["consistency_level"] == "" || req == "" {
			t.Errorf("session %d: client %v command %q coordinator %v duration %d params %v request %q", i, client, command, coord, duration, params, req)
		}
		it := s.Query("SELECT * FROM system_traces.events WHERE session_id = ?", u).Iter()
		var activities []string
		for {
			row := map[string]any{}
			if !it.MapScan(row) {
				break
			}
			activities = append(activities, row["activity"].(string))
		}
		if err := it.Close(); err != nil {
			t.Fatalf("events %d: %v", i, err)
		}
		if len(activities) < 2 {
			t.Errorf("session %d: events %q", i, activities)
		}
		t.Logf("session %d (%s): %q", i, req, activities)
	}
}

// TestPythonDriverTracing traces statements with the DataStax Python
// driver (the one the real cqlsh runs on, provisioned by package
// cqlshpy): session.execute(q, trace=True).get_query_trace() polls
// system_traces until the session has a duration, then reads its events.
// The ring has one node: traces are kept by the coordinator only, and the
// driver reads them back through any node.
func TestPythonDriverTracing(t *testing.T) {
	bin := realCqlsh(t)
	r := startRing(t, 1, nil)
	dir := t.TempDir()
	script := filepath.Join(dir, "trace.py")
	if err := os.WriteFile(script, []byte(`import sys
from cassandra.cluster import Cluster
cluster = Cluster([sys.argv[1]], port=int(sys.argv[2]), protocol_version=4, connect_timeout=30)
s = cluster.connect()
s.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE ks.t (k text PRIMARY KEY, c counter)")
for q in ["UPDATE ks.t SET c = c + 1 WHERE k = 'a'", "SELECT c FROM ks.t WHERE k = 'a'"]:
    rs = s.execute(q, trace=True)
    tr = rs.get_query_trace(max_wait_sec=10)
    print("trace:", tr.trace_id.version, tr.request_type, tr.coordinator, tr.duration is not None, tr.parameters.get("query"))
    for e in tr.events:
        print("event:", e.description, "|", e.source, e.source_elapsed is not None, e.thread_name)
cluster.shutdown()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	py := filepath.Join(filepath.Dir(bin), "python")
	out, err := osexec.CommandContext(ctx, py, script, "127.0.0.1", strconv.Itoa(r.port+1)).CombinedOutput()
	if err != nil {
		t.Fatalf("python driver tracing: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, want := range []string{
		"trace: 1 Execute CQL3 query 127.0.0.1 True UPDATE ks.t SET c = c + 1 WHERE k = 'a'",
		"trace: 1 Execute CQL3 query 127.0.0.1 True SELECT c FROM ks.t WHERE k = 'a'",
		"event: Leader chosen: this node",
		"event: Read from this node: 1 cells",
		"event: Merged 1 answers | 127.0.0.1 True Native-Transport-Requests",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
}

// TestGocqlTracingRing traces writes and reads at ALL on a 3-node ring
// with replication factor 3, through node 1 only (gocql reads traces on
// its control connection, and traces are kept by their coordinator): the
// events name the leader and its answer, or the replicas' acks when node 1
// leads, and each replica read. The key of the read is k0, written once.
func TestGocqlTracingRing(t *testing.T) {
	r := startRing(t, 3, nil)
	c := r.cluster()
	c.HostFilter = gocql.WhiteListHostFilter("127.0.0.1")
	s := r.session(c)
	exec(t, s, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
	exec(t, s, "CREATE TABLE ks.t (k text PRIMARY KEY, c counter)")
	var out bytes.Buffer
	w := gocql.NewTraceWriter(s, &out)
	remoteRe := regexp.MustCompile(`Leader 127\.0\.0\.[23]:\d+ answered`)
	localRe := regexp.MustCompile(`Replica 127\.0\.0\.[23]:\d+ acknowledged`)
	// Leaders are drawn at random among the replicas: update until both
	// kinds were seen (60 updates miss one with probability (2/3)^60).
	for i := 0; i < 60 && !(remoteRe.MatchString(out.String()) && localRe.MatchString(out.String())); i++ {
		if err := s.Query("UPDATE ks.t SET c = c + 1 WHERE k = ?", fmt.Sprint("k", i)).Consistency(gocql.All).Trace(w).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	var v int64
	if err := s.Query("SELECT c FROM ks.t WHERE k = ?", "k0").Consistency(gocql.All).Trace(w).Scan(&v); err != nil || v != 1 {
		t.Fatalf("read: %d, %v", v, err)
	}
	got := out.String()
	t.Logf("%s", got)
	remote, local := remoteRe.MatchString(got), localRe.MatchString(got)
	if !remote || !local {
		t.Errorf("want both a remote leader's answer (%t) and replicas' acks to node 1 leading (%t)", remote, local)
	}
	for _, want := range []string{
		"Consistency level ALL met: 3 acks",
		"Read at ALL: 3 live replicas, 3 answers needed",
		"Read from this node: 1 cells",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("trace lacks %q", want)
		}
	}
	if n := len(regexp.MustCompile(`Read from 127\.0\.0\.[23]:\d+: 1 cells`).FindAllString(got, -1)); n != 2 {
		t.Errorf("%d reads from the other replicas, want 2", n)
	}
}
