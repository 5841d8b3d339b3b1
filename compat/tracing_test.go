package compat

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"

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
	if !strings.Contains(out.String(), "Tracing session") || !strings.Contains(out.String(), "Request complete") {
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
		if len(activities) < 2 || activities[len(activities)-1] != "Request complete" {
			t.Errorf("session %d: events %q", i, activities)
		}
		t.Logf("session %d (%s): %q", i, req, activities)
	}
}
