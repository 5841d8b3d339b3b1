package cqlsh

import (
	"strings"
	"testing"
)

// TestRegularTableRows: a regular table with a clustering column,
// collections and a tuple: SELECT * prints every column (a tuple column is
// scanned element by element by gocql) and DESCRIBE gives the table back.
func TestRegularTableRows(t *testing.T) {
	s := open(t, 2, "")
	run(t, s, `CREATE KEYSPACE IF NOT EXISTS shell_reg WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3};
		DROP TABLE IF EXISTS shell_reg.u;
		CREATE TABLE shell_reg.u (id int, n int, name text, tags set<text>, pos frozen<tuple<double, text>>, PRIMARY KEY (id, n)) WITH CLUSTERING ORDER BY (n DESC)`)
	run(t, s, `CONSISTENCY ALL;
		INSERT INTO shell_reg.u (id, n, name, tags, pos) VALUES (1, 1, 'ann', {'b', 'a'}, (1.5, 'x'));
		INSERT INTO shell_reg.u (id, n, name) VALUES (1, 2, 'bob')`)
	out := run(t, s, "CONSISTENCY ALL; SELECT * FROM shell_reg.u WHERE id = 1")
	for _, want := range []string{"(1.5, 'x')", "{'a', 'b'}", "bob", "(2 rows)"} {
		if !strings.Contains(out, want) {
			t.Errorf("SELECT * lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "bob") > strings.Index(out, "ann") {
		t.Errorf("rows not in CLUSTERING ORDER BY (n DESC):\n%s", out)
	}
	ddl := run(t, s, "DESCRIBE TABLE shell_reg.u")
	if !strings.Contains(ddl, "pos frozen<tuple<double, text>>") || !strings.Contains(ddl, "WITH CLUSTERING ORDER BY (n DESC)") {
		t.Errorf("DESCRIBE TABLE:\n%s", ddl)
	}
}
