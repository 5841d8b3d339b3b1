package exec

import (
	"reflect"
	"testing"

	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/trace"
)

// TestTracing runs a traced update, read and failing query, and reads
// their sessions and events back from system_traces, typed as Cassandra
// types them, by session_id as drivers ask.
func TestTracing(t *testing.T) {
	h := newHarness(t)
	h.setup()
	traced := &cql.Session{ProtocolVersion: 4, Trace: true, Client: []byte{127, 0, 0, 9}}
	run := func(q string, vals ...frame.Value) (cql.Outcome, error) {
		t.Helper()
		return h.e.Query(ctx, traced, q, params(vals...), nil)
	}
	var ids [][16]byte
	for _, q := range []string{"UPDATE ks.t SET c = c + 1 WHERE k = ?", "SELECT c FROM ks.t WHERE k = ?"} {
		out, err := run(q, text_("a"))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if len(out.TraceID) != 16 {
			t.Fatalf("%s: trace id %x", q, out.TraceID)
		}
		ids = append(ids, [16]byte(out.TraceID))
	}
	out, err := run("SELECT c FROM ks.nope WHERE k = 'a'")
	if err == nil || len(out.TraceID) != 16 {
		t.Fatalf("failing query: %v, trace id %x", err, out.TraceID)
	}
	ids = append(ids, [16]byte(out.TraceID))
	if out, _ := h.e.Query(ctx, h.sess, "SELECT c FROM ks.t WHERE k = 'a'", params(), nil); out.TraceID != nil {
		t.Fatalf("untraced query has trace id %x", out.TraceID)
	}
	for i, id := range ids {
		if id[6]>>4 != 1 || i > 0 && !trace.UUIDTime(ids[i-1]).Before(trace.UUIDTime(id)) {
			t.Errorf("trace ids %x are not increasing version 1 UUIDs", ids)
		}
	}

	sessions := h.rows("SELECT * FROM system_traces.sessions")
	types := specTypes(sessions.Columns)
	for name, want := range map[string]frame.DataType{"session_id": frame.UUID, "client": frame.Inet, "command": frame.Text,
		"coordinator": frame.Inet, "coordinator_port": frame.Int, "duration": frame.Int,
		"parameters": frame.MapOf(frame.Text, frame.Text), "request": frame.Text, "started_at": frame.Timestamp} {
		if !reflect.DeepEqual(types[name], want) {
			t.Errorf("sessions.%s: %+v, want %+v", name, types[name], want)
		}
	}
	if len(sessions.Rows) != 3 {
		t.Errorf("%d sessions, want 3", len(sessions.Rows))
	}
	for i, id := range ids {
		r := h.rows("SELECT client, command, duration, parameters, request FROM system_traces.sessions WHERE session_id = ?", frame.Bytes(id[:]))
		if len(r.Rows) != 1 {
			t.Fatalf("session %d: %d rows", i, len(r.Rows))
		}
		row := r.Rows[0]
		keys, vals, _ := frame.DecodeMap(row[3].Bytes)
		params := map[string]string{}
		for j := range keys {
			params[string(keys[j])] = string(vals[j])
		}
		if string(row[0].Bytes) != "\x7f\x00\x00\x09" || string(row[1].Bytes) != "QUERY" || row[2].Null ||
			string(row[4].Bytes) != "Execute CQL3 query" || params["consistency_level"] != "QUORUM" || params["query"] == "" {
			t.Errorf("session %d: %v params %v", i, row, params)
		}
		ev := h.rows("SELECT * FROM system_traces.events WHERE session_id = ?", frame.Bytes(id[:]))
		et := specTypes(ev.Columns)
		if et["event_id"].ID != frame.TypeTimeUUID || et["source_elapsed"].ID != frame.TypeInt || et["activity"].ID != frame.TypeVarchar {
			t.Errorf("events columns %+v", ev.Columns)
		}
		var acts []string
		for _, r := range ev.Rows {
			acts = append(acts, string(r[2].Bytes))
		}
		if len(acts) < 2 || acts[0] != "Parsing "+string(params["query"]) || acts[len(acts)-1] == "" {
			t.Errorf("session %d events %q", i, acts)
		}
	}
	var none [16]byte
	if r := h.rows("SELECT * FROM system_traces.events WHERE session_id = ?", frame.Bytes(none[:])); len(r.Rows) != 0 {
		t.Errorf("unknown session: %d events", len(r.Rows))
	}

	// The schema tables show the keyspace and its tables.
	ks := h.rows("SELECT keyspace_name, replication FROM system_schema.keyspaces WHERE keyspace_name = 'system_traces'")
	if len(ks.Rows) != 1 {
		t.Errorf("system_schema.keyspaces: %d rows for system_traces", len(ks.Rows))
	}
	tabs := h.rows("SELECT table_name, gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = 'system_traces'")
	if len(tabs.Rows) != 2 || string(tabs.Rows[0][0].Bytes) != "events" || string(tabs.Rows[1][0].Bytes) != "sessions" {
		t.Errorf("system_schema.tables: %v", tabs.Rows)
	}
	colRows := h.rows("SELECT table_name, column_name, kind, position, type FROM system_schema.columns WHERE keyspace_name = 'system_traces'")
	got := map[string]string{}
	for _, r := range colRows.Rows {
		got[string(r[0].Bytes)+"."+string(r[1].Bytes)] = string(r[2].Bytes) + " " + string(r[4].Bytes)
	}
	for c, want := range map[string]string{"sessions.session_id": "partition_key uuid", "sessions.parameters": "regular map<text, text>",
		"sessions.started_at": "regular timestamp", "events.session_id": "partition_key uuid",
		"events.event_id": "clustering timeuuid", "events.source_port": "regular int", "events.thread": "regular text"} {
		if got[c] != want {
			t.Errorf("system_schema.columns %s: %q, want %q", c, got[c], want)
		}
	}
	if len(got) != 16 {
		t.Errorf("%d system_traces columns, want 16", len(got))
	}
	if fe := h.queryErr("UPDATE system_traces.sessions SET duration = 1 WHERE session_id = ?", frame.Bytes(none[:])); fe == nil {
		t.Error("system_traces is writable")
	}
}
