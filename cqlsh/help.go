package cqlsh

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// helpTopics is the text of HELP <topic>.
var helpTopics = map[string]string{
	"DESCRIBE": `DESCRIBE (or DESC) shows the schema, from the node's system_schema tables:
  DESCRIBE KEYSPACES          the keyspaces' names
  DESCRIBE KEYSPACE [ks]      CREATE statements of a keyspace (default: the current one) and its tables
  DESCRIBE TABLES             the tables' names (of the current keyspace, or of all)
  DESCRIBE TABLE [ks.]t       the CREATE TABLE statement of a table
  DESCRIBE SCHEMA             every user keyspace; DESCRIBE FULL SCHEMA adds the system ones
  DESCRIBE CLUSTER            the cluster's name and partitioner
  DESCRIBE <name>             a keyspace of that name, else a table of the current keyspace`,
	"EXPAND":      "EXPAND [ON|OFF]  prints each row as a block of column | value lines (ON), or rows as a table (OFF).",
	"PAGING":      "PAGING [ON|OFF|<n>]  pauses at ---MORE--- after each page of n rows (default 100) in an interactive shell.\nScripts and -e never pause.",
	"SOURCE":      "SOURCE '<file>'  runs the statements of a file; the first error stops it.",
	"SHOW":        "SHOW VERSION  the server's Cassandra, CQL and protocol versions\nSHOW HOST     the cluster and the host this shell is connected to (it uses no other)\nSHOW SESSION <id>  the trace session <id> (system_traces of this host)",
	"TRACING":     "TRACING [ON|OFF]  trace each statement and print its trace after its result, as cqlsh does (docs/tracing.md).",
	"CONSISTENCY": "CONSISTENCY [level]  shows or sets the consistency level of the following statements (ONE, QUORUM, ALL, ...).",
	"USE":         "USE <keyspace>;  makes a keyspace the current one (tables without a keyspace are looked up there).",
	"EXIT":        "EXIT, QUIT or Ctrl-D  ends the shell. An unfinished statement is not executed.",
	"HISTORY":     "HISTORY  lists the statements entered in this session; the arrow keys and Ctrl-R recall earlier ones (kept in ~/.idemkv_history).",
	"CLEAR":       "CLEAR (or CLS)  clears the screen.",
	"CQL": `CQL statements end with ';' and may span lines; several may share a line.
Comments: -- and // to the end of the line, /* ... */ anywhere. Ctrl-C drops the statement being typed.
idemkv serves counter tables: CREATE KEYSPACE, CREATE TABLE (counter columns), UPDATE ... SET c = c + n,
SELECT, DROP, ALTER TABLE ... WITH idempotence = {'class': 'fbf', ...}, and the system tables.`,
}

func init() {
	helpTopics["DESC"] = helpTopics["DESCRIBE"]
	helpTopics["QUIT"] = helpTopics["EXIT"]
	helpTopics["CLS"] = helpTopics["CLEAR"]
}

func (s *Shell) help(topic string, out io.Writer) error {
	topic = strings.ToUpper(strings.TrimSpace(topic))
	if topic == "" {
		names := make([]string, 0, len(helpTopics))
		for n := range helpTopics {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintln(out, "\nShell commands (HELP <topic> for more):")
		fmt.Fprintf(out, "  %s\n\n", strings.Join(names, "  "))
		fmt.Fprintln(out, helpTopics["CQL"])
		fmt.Fprintln(out)
		return nil
	}
	text, ok := helpTopics[topic]
	if !ok {
		return fmt.Errorf("no help on '%s' (HELP lists the topics)", topic)
	}
	fmt.Fprintf(out, "\n%s\n\n", text)
	return nil
}
