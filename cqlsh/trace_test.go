package cqlsh

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestTracingPrintsTraces turns tracing on and checks that each statement
// is followed by its trace as cqlsh prints it, that SHOW SESSION prints a
// trace again, and the messages of TRACING.
func TestTracingPrintsTraces(t *testing.T) {
	table := freshTable(t)
	s := open(t, 1, "")
	if out := run(t, s, "TRACING"); out != "Tracing is currently disabled. Use TRACING ON to enable.\n" {
		t.Errorf("TRACING: %q", out)
	}
	out := run(t, s, "TRACING ON; UPDATE "+table+" SET c = c + 1 WHERE k = 'a'; SELECT c FROM "+table+" WHERE k = 'a'")
	t.Logf("%s", out)
	for _, want := range []string{
		"Now Tracing is enabled\n",
		"\nTracing session: ",
		"\n activity ",
		" | timestamp ",
		" | source    | source_elapsed | client\n",
		"Execute CQL3 prepared query | ",
		"Leader chosen: ",
		" (of 3 candidates) [Native-Transport-Requests] | ",
		"Executing SELECT on " + table + " [Native-Transport-Requests] | ",
		"Request complete | ",
		"\n c\n---\n 1\n\n(1 rows)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	ids := regexp.MustCompile(`Tracing session: ([0-9a-f-]{36})`).FindAllStringSubmatch(out, -1)
	if len(ids) != 2 {
		t.Fatalf("%d traces printed, want 2", len(ids))
	}
	again := run(t, s, "SHOW SESSION "+ids[1][1])
	if !strings.Contains(again, "Tracing session: "+ids[1][1]) || !strings.Contains(again, "Executing SELECT on") {
		t.Errorf("SHOW SESSION:\n%s", again)
	}
	full := run(t, s, "DESCRIBE FULL SCHEMA")
	for _, want := range []string{
		"CREATE TABLE system_traces.events (\n    session_id uuid,\n    event_id timeuuid,\n    activity text,\n",
		"    PRIMARY KEY (session_id, event_id)\n) WITH ",
		"CREATE TABLE system_traces.sessions (\n    session_id uuid PRIMARY KEY,\n    client inet,\n",
		"    parameters map<text, text>,\n",
	} {
		if !strings.Contains(full, want) {
			t.Errorf("DESCRIBE FULL SCHEMA lacks %q", want)
		}
	}
	if strings.Contains(run(t, s, "DESCRIBE SCHEMA"), "system_traces") {
		t.Error("DESCRIBE SCHEMA shows system_traces, a system keyspace")
	}
	var errOut bytes.Buffer
	if err := s.ExecString("SELECT c FROM ks.nope", &bytes.Buffer{}, &errOut); err == nil {
		t.Error("no error for a missing table")
	}
	if out := run(t, s, "TRACING OFF; SELECT c FROM "+table+" WHERE k = 'a'"); strings.Contains(out, "Tracing session") || !strings.HasPrefix(out, "Disabled Tracing.\n") {
		t.Errorf("TRACING OFF:\n%s", out)
	}
}
