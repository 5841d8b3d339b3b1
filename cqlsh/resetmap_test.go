package cqlsh

import (
	"strings"
	"testing"
)

// TestDescribeResetCounterMap: a map of observed-reset counters describes
// as it was created (m map<text, reset_counter>), the printed statement
// creates it again, and a SELECT prints the map.
func TestDescribeResetCounterMap(t *testing.T) {
	s := open(t, 2, "")
	run(t, s, `CREATE KEYSPACE IF NOT EXISTS desc_map WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3};
		DROP TABLE IF EXISTS desc_map.r;
		CREATE TABLE desc_map.r (k text PRIMARY KEY, c reset_counter, m map<text, reset_counter>)`)
	ddl := run(t, s, "DESCRIBE TABLE desc_map.r")
	if !strings.Contains(ddl, "CREATE TABLE desc_map.r (\n    k text PRIMARY KEY,\n    c reset_counter,\n    m map<text, reset_counter>\n) WITH") {
		t.Errorf("DESCRIBE TABLE:\n%s", ddl)
	}
	run(t, s, "DROP TABLE desc_map.r")
	run(t, s, ddl)
	if again := run(t, s, "DESC desc_map.r"); again != ddl {
		t.Errorf("recreated table describes as\n%s\nwas\n%s", again, ddl)
	}
	run(t, s, "CONSISTENCY ALL; UPDATE desc_map.r SET m = m + {'b': 2, 'a': 1} WHERE k = 'x'")
	if out := run(t, s, "CONSISTENCY ALL; SELECT m FROM desc_map.r WHERE k = 'x'"); !strings.Contains(out, "{'a': 1, 'b': 2}") {
		t.Errorf("SELECT m:\n%s", out)
	}
}
