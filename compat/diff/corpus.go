// Package diff is idemkv's differential CQL test: a corpus of statements
// and driver operations run through the unmodified gocql driver against
// Apache Cassandra (recorded once into golden files under testdata) and
// against an in-process idemkv node, whose answers must equal the golden
// ones except where testdata/differences.txt lists the entry with a
// reason. See docs/differential.md.
package diff

import "github.com/gocql/gocql"

// Op is how an entry is run through gocql.
type Op int

const (
	// OpQuery runs Stmt with Values as a query (prepared by gocql when it
	// has values) and reads every row.
	OpQuery Op = iota
	// OpPrepare runs Stmt through Session.Bind, recording the prepared
	// statement's metadata (bind markers, result columns, partition key
	// indexes) as well as the answer.
	OpPrepare
	// OpBatch runs Stmts as one batch of type Batch.
	OpBatch
	// OpPage runs Stmt with page size PageSize, one page per request,
	// recording each page.
	OpPage
)

// Stmt is one statement of a batch.
type Stmt struct {
	Stmt   string
	Values []any
}

// Entry is one statement or driver operation of the corpus.
type Entry struct {
	Name   string // unique; the golden files and differences.txt use it
	Op     Op
	Stmt   string
	Values []any
	CL     string // consistency level, ONE when empty
	Serial string // serial consistency (SERIAL, LOCAL_SERIAL), none when empty
	Batch  gocql.BatchType
	Stmts  []Stmt
	// PageSize is OpPage's page size.
	PageSize int
	// Unordered sorts the rows: their order is not specified.
	Unordered bool
	// ColumnsOnly keeps the (sorted) column names and types, not the rows.
	ColumnsOnly bool
	// Mask lists more columns whose values are host-specific.
	Mask []string
}

func q(name, stmt string, values ...any) Entry {
	return Entry{Name: name, Stmt: stmt, Values: values}
}

func qcl(name, cl, stmt string, values ...any) Entry {
	return Entry{Name: name, Stmt: stmt, Values: values, CL: cl}
}

func sorted(e Entry) Entry { e.Unordered = true; return e }

func prep(name, stmt string, values ...any) Entry {
	return Entry{Name: name, Op: OpPrepare, Stmt: stmt, Values: values}
}

func batch(name string, typ gocql.BatchType, stmts ...Stmt) Entry {
	return Entry{Name: name, Op: OpBatch, Batch: typ, Stmts: stmts}
}

func page(name string, size int, stmt string, values ...any) Entry {
	return Entry{Name: name, Op: OpPage, Stmt: stmt, Values: values, PageSize: size}
}

// Corpus is the differential corpus, run in this order on one session:
// later entries use the keyspaces, tables and rows earlier ones made. It
// starts by dropping the keyspaces it uses, so that it runs on a server
// that ran it before.
var Corpus = []Entry{
	// Set-up and keyspace DDL.
	q("ddl/drop-keyspace-if-exists", "DROP KEYSPACE IF EXISTS diff"),
	q("ddl/drop-keyspace3-if-exists", "DROP KEYSPACE IF EXISTS diff3"),
	q("ddl/create-keyspace", "CREATE KEYSPACE diff WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"),
	q("ddl/create-keyspace-again", "CREATE KEYSPACE diff WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"),
	q("ddl/create-keyspace-if-not-exists", "CREATE KEYSPACE IF NOT EXISTS diff WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"),
	q("ddl/create-keyspace-bad-strategy", "CREATE KEYSPACE diffx WITH replication = {'class': 'NoSuchStrategy', 'replication_factor': 1}"),
	q("ddl/create-keyspace-no-replication", "CREATE KEYSPACE diffx"),
	q("ddl/create-keyspace-rf3", "CREATE KEYSPACE diff3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"),
	q("ddl/drop-keyspace-unknown", "DROP KEYSPACE nosuchks"),

	// Table DDL.
	q("ddl/create-table-counter", "CREATE TABLE diff.c (k text PRIMARY KEY, c counter)"),
	q("ddl/create-table-again", "CREATE TABLE diff.c (k text PRIMARY KEY, c counter)"),
	q("ddl/create-table-if-not-exists", "CREATE TABLE IF NOT EXISTS diff.c (k text PRIMARY KEY, c counter)"),
	q("ddl/create-table-two-counters", "CREATE TABLE diff.c2 (k text, ck int, a counter, b counter, PRIMARY KEY (k, ck))"),
	q("ddl/create-table-composite", "CREATE TABLE diff.cc (a int, b text, ck int, c counter, PRIMARY KEY ((a, b), ck))"),
	q("ddl/create-table-two-counters-flat", "CREATE TABLE diff.c2f (k text PRIMARY KEY, a counter, b counter)"),
	q("ddl/create-table-composite-partition", "CREATE TABLE diff.cp (a int, b text, c counter, PRIMARY KEY ((a, b)))"),
	q("ddl/create-table-page", "CREATE TABLE diff.page (k text PRIMARY KEY, c counter)"),
	q("ddl/create-table-rf3", "CREATE TABLE diff3.c (k text PRIMARY KEY, c counter)"),
	q("ddl/create-table-mixed", "CREATE TABLE diff.mixed (k text PRIMARY KEY, c counter, v int)"),
	q("ddl/create-table-counter-key", "CREATE TABLE diff.ck (k counter PRIMARY KEY, c counter)"),
	q("ddl/create-table-bad-type", "CREATE TABLE diff.bad (k text PRIMARY KEY, c countr)"),
	q("ddl/create-table-no-primary-key", "CREATE TABLE diff.nopk (k text, c counter)"),
	q("ddl/create-table-unknown-keyspace", "CREATE TABLE nosuchks.t (k text PRIMARY KEY, c counter)"),
	q("ddl/create-table-counter-ttl", "CREATE TABLE diff.ttl (k text PRIMARY KEY, c counter) WITH default_time_to_live = 10"),
	q("ddl/create-table-unknown-option", "CREATE TABLE diff.opt (k text PRIMARY KEY, c counter) WITH nosuchoption = 1"),
	q("ddl/create-table-comment", "CREATE TABLE diff.commented (k text PRIMARY KEY, c counter) WITH comment = 'hello'"),
	q("ddl/create-table-idempotence", "CREATE TABLE diff.idem (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf', 'target_fpp': '0.0001'}"),
	q("ddl/create-table-handoff", "CREATE TABLE diff.handoff (k text PRIMARY KEY, c handoff_counter)"),
	q("ddl/drop-idempotence-if-exists", "DROP TABLE IF EXISTS diff.idem"),
	q("ddl/drop-handoff-if-exists", "DROP TABLE IF EXISTS diff.handoff"),
	q("ddl/create-table-regular", "CREATE TABLE diff.reg (k text PRIMARY KEY, v int)"),
	q("ddl/create-table-syntax", "CREATE TABLE diff.syn (k text PRIMARY KEY c counter)"),
	q("ddl/alter-add-counter", "ALTER TABLE diff.c ADD d counter"),
	q("ddl/alter-add-int", "ALTER TABLE diff.c ADD v int"),
	q("ddl/alter-add-existing", "ALTER TABLE diff.c ADD c counter"),
	q("ddl/alter-drop-counter", "ALTER TABLE diff.c DROP d"),
	q("ddl/alter-drop-key", "ALTER TABLE diff.c DROP k"),
	q("ddl/alter-comment", "ALTER TABLE diff.commented WITH comment = 'bye'"),
	q("ddl/alter-unknown-table", "ALTER TABLE diff.nope ADD x counter"),
	q("ddl/create-index-counter", "CREATE INDEX ON diff.c (c)"),
	q("ddl/create-view", "CREATE MATERIALIZED VIEW diff.v AS SELECT * FROM diff.c WHERE k IS NOT NULL PRIMARY KEY (k)"),
	q("ddl/create-table-tmp", "CREATE TABLE diff.tmp (k text PRIMARY KEY, c counter)"),
	q("ddl/truncate", "TRUNCATE diff.tmp"),
	q("ddl/truncate-unknown", "TRUNCATE diff.nope"),
	q("ddl/drop-table", "DROP TABLE diff.tmp"),
	q("ddl/drop-table-unknown", "DROP TABLE diff.nope"),
	q("ddl/drop-table-if-exists-unknown", "DROP TABLE IF EXISTS diff.nope"),

	// Counter DML.
	q("dml/incr-literal", "UPDATE diff.c SET c = c + 1 WHERE k = 'a'"),
	q("dml/incr-bind", "UPDATE diff.c SET c = c + ? WHERE k = ?", int64(5), "a"),
	q("dml/decr-bind", "UPDATE diff.c SET c = c - ? WHERE k = ?", int64(2), "a"),
	q("dml/incr-negative-literal", "UPDATE diff.c SET c = c + -3 WHERE k = 'b'"),
	q("dml/incr-missing-row", "UPDATE diff.c SET c = c + 7 WHERE k = 'new'"),
	q("dml/incr-two-counters", "UPDATE diff.c2f SET a = a + 1, b = b - 1 WHERE k = 'x'"),
	q("dml/incr-clustering", "UPDATE diff.c2 SET a = a + 1, b = b - 1 WHERE k = 'x' AND ck = 1"),
	q("dml/incr-composite-partition", "UPDATE diff.cp SET c = c + 1 WHERE a = 1 AND b = 'x'"),
	q("dml/incr-partial-partition", "UPDATE diff.cp SET c = c + 1 WHERE a = 1"),
	q("dml/incr-missing-clustering", "UPDATE diff.c2 SET a = a + 1 WHERE k = 'x'"),
	q("dml/incr-in", "UPDATE diff.c SET c = c + 1 WHERE k IN ('in1', 'in2')"),
	q("dml/incr-range", "UPDATE diff.c SET c = c + 1 WHERE k > 'a'"),
	q("dml/incr-no-where", "UPDATE diff.c SET c = c + 1"),
	q("dml/set-counter", "UPDATE diff.c SET c = 5 WHERE k = 'a'"),
	q("dml/insert-counter", "INSERT INTO diff.c (k, c) VALUES ('a', 1)"),
	q("dml/using-timestamp", "UPDATE diff.c USING TIMESTAMP 5 SET c = c + 1 WHERE k = 'a'"),
	q("dml/using-ttl", "UPDATE diff.c USING TTL 10 SET c = c + 1 WHERE k = 'a'"),
	q("dml/incr-other-column", "UPDATE diff.c2f SET a = b + 1 WHERE k = 'x'"),
	q("dml/incr-unknown-column", "UPDATE diff.c SET nope = nope + 1 WHERE k = 'a'"),
	q("dml/incr-string-literal", "UPDATE diff.c SET c = c + 'x' WHERE k = 'a'"),
	q("dml/incr-overflow-literal", "UPDATE diff.c SET c = c + 9223372036854775808 WHERE k = 'a'"),
	q("dml/incr-bind-null", "UPDATE diff.c SET c = c + ? WHERE k = ?", nil, "a"),
	q("dml/incr-bind-string", "UPDATE diff.c SET c = c + ? WHERE k = ?", "x", "a"),
	q("dml/incr-if", "UPDATE diff.c SET c = c + 1 WHERE k = 'a' IF c = 1"),
	q("dml/incr-if-exists", "UPDATE diff.c SET c = c + 1 WHERE k = 'a' IF EXISTS"),
	q("dml/incr-unknown-table", "UPDATE diff.nope SET c = c + 1 WHERE k = 'a'"),
	q("dml/incr-wrong-key-type", "UPDATE diff.c SET c = c + 1 WHERE k = 1"),
	qcl("dml/incr-cl-all", "ALL", "UPDATE diff.c SET c = c + 1 WHERE k = 'cl'"),
	qcl("dml/incr-cl-quorum", "QUORUM", "UPDATE diff.c SET c = c + 1 WHERE k = 'cl'"),
	qcl("dml/incr-cl-local-one", "LOCAL_ONE", "UPDATE diff.c SET c = c + 1 WHERE k = 'cl'"),
	qcl("dml/incr-cl-two", "TWO", "UPDATE diff.c SET c = c + 1 WHERE k = 'cl'"),
	qcl("dml/incr-cl-any", "ANY", "UPDATE diff.c SET c = c + 1 WHERE k = 'cl'"),
	qcl("dml/incr-cl-serial", "SERIAL", "UPDATE diff.c SET c = c + 1 WHERE k = 'cl'"),
	qcl("dml/incr-cl-local-serial", "LOCAL_SERIAL", "UPDATE diff.c SET c = c + 1 WHERE k = 'cl'"),
	qcl("dml/incr-rf3-one", "ONE", "UPDATE diff3.c SET c = c + 1 WHERE k = 'a'"),
	qcl("dml/incr-rf3-quorum", "QUORUM", "UPDATE diff3.c SET c = c + 1 WHERE k = 'a'"),
	qcl("dml/read-rf3-quorum", "QUORUM", "SELECT c FROM diff3.c WHERE k = 'a'"),
	qcl("dml/incr-cl-each-quorum", "EACH_QUORUM", "UPDATE diff.c SET c = c + 1 WHERE k = 'cl'"),
	q("dml/incr-bind-int32", "UPDATE diff.c SET c = c + ? WHERE k = ?", int32(3), "i32"),
	q("dml/incr-zero-missing-row", "UPDATE diff.c SET c = c + 0 WHERE k = 'zero'"),
	q("dml/read-zero-missing-row", "SELECT k, c FROM diff.c WHERE k = 'zero'"),
	q("dml/incr-max", "UPDATE diff.c SET c = c + 9223372036854775807 WHERE k = 'max'"),
	q("dml/incr-past-max", "UPDATE diff.c SET c = c + 1 WHERE k = 'max'"),
	q("dml/read-past-max", "SELECT k, c FROM diff.c WHERE k = 'max'"),
	q("dml/decr-min-literal", "UPDATE diff.c SET c = c - -9223372036854775808 WHERE k = 'min'"),
	q("dml/delete-row", "DELETE FROM diff.c WHERE k = 'b'"),
	q("dml/read-deleted", "SELECT k, c FROM diff.c WHERE k = 'b'"),
	q("dml/incr-after-delete", "UPDATE diff.c SET c = c + 1 WHERE k = 'b'"),
	q("dml/read-after-delete-incr", "SELECT k, c FROM diff.c WHERE k = 'b'"),
	q("dml/delete-column", "DELETE c FROM diff.c WHERE k = 'p'"),
	q("dml/delete-using-timestamp", "DELETE FROM diff.c USING TIMESTAMP 5 WHERE k = 'q'"),
	q("dml/delete-unknown-column", "DELETE nope FROM diff.c WHERE k = 'a'"),
	q("dml/delete-if-exists", "DELETE FROM diff.c WHERE k = 'q' IF EXISTS"),

	// SELECT forms; the scans read diff.page, which holds 7 rows.
	batch("page/fill", gocql.CounterBatch,
		Stmt{"UPDATE diff.page SET c = c + 1 WHERE k = 'p1'", nil},
		Stmt{"UPDATE diff.page SET c = c + 2 WHERE k = 'p2'", nil},
		Stmt{"UPDATE diff.page SET c = c + 3 WHERE k = 'p3'", nil},
		Stmt{"UPDATE diff.page SET c = c + 4 WHERE k = 'p4'", nil},
		Stmt{"UPDATE diff.page SET c = c + 5 WHERE k = 'p5'", nil},
		Stmt{"UPDATE diff.page SET c = c + 6 WHERE k = 'p6'", nil},
		Stmt{"UPDATE diff.page SET c = c + 7 WHERE k = 'p7'", nil}),
	q("sel/by-key", "SELECT c FROM diff.c WHERE k = 'a'"),
	q("sel/star-by-key", "SELECT * FROM diff.c WHERE k = 'a'"),
	q("sel/missing-key", "SELECT * FROM diff.c WHERE k = 'nosuchkey'"),
	q("sel/bind-key", "SELECT k, c FROM diff.c WHERE k = ?", "new"),
	q("sel/in", "SELECT k, c FROM diff.c WHERE k IN ('new', 'a', 'nosuchkey')"),
	q("sel/in-duplicates", "SELECT k, c FROM diff.c WHERE k IN ('a', 'new', 'a')"),
	q("sel/full-scan", "SELECT k, c FROM diff.page"),
	q("sel/limit", "SELECT k, c FROM diff.page LIMIT 2"),
	q("sel/count", "SELECT count(*) FROM diff.page"),
	q("sel/count-by-key", "SELECT count(*) FROM diff.c WHERE k = 'a'"),
	q("sel/count-missing-key", "SELECT count(*) FROM diff.c WHERE k = 'nosuchkey'"),
	q("sel/where-counter", "SELECT k FROM diff.page WHERE c = 4"),
	q("sel/where-counter-allow-filtering", "SELECT k FROM diff.page WHERE c = 4 ALLOW FILTERING"),
	q("sel/token-range", "SELECT k, token(k) FROM diff.page WHERE token(k) > 0"),
	q("sel/token-bind", "SELECT k FROM diff.page WHERE token(k) <= ?", int64(0)),
	q("sel/writetime-counter", "SELECT writetime(c) FROM diff.c WHERE k = 'a'"),
	q("sel/ttl-counter", "SELECT ttl(c) FROM diff.c WHERE k = 'a'"),
	q("sel/count-alias", "SELECT count(*) AS n FROM diff.page"),
	q("sel/limit-zero", "SELECT k FROM diff.page LIMIT 0"),
	q("sel/key-and-counter", "SELECT k FROM diff.c WHERE k = 'a' AND c = 4"),
	q("sel/key-and-counter-allow-filtering", "SELECT k FROM diff.c WHERE k = 'a' AND c = 4 ALLOW FILTERING"),
	qcl("sel/cl-all", "ALL", "SELECT c FROM diff.c WHERE k = 'a'"),
	qcl("sel/cl-each-quorum", "EACH_QUORUM", "SELECT c FROM diff.c WHERE k = 'a'"),
	q("sel/alias", "SELECT c AS total FROM diff.c WHERE k = 'a'"),
	q("sel/distinct", "SELECT DISTINCT k FROM diff.page"),
	q("sel/json", "SELECT JSON k, c FROM diff.c WHERE k = 'a'"),
	q("sel/unknown-column", "SELECT nope FROM diff.c WHERE k = 'a'"),
	q("sel/unknown-table", "SELECT * FROM diff.nope"),
	q("sel/unknown-keyspace", "SELECT * FROM nosuchks.c"),
	q("sel/no-keyspace", "SELECT * FROM c"),
	q("sel/wrong-key-type", "SELECT * FROM diff.c WHERE k = 1"),
	q("sel/order-by-partition", "SELECT * FROM diff.c WHERE k = 'a' ORDER BY k DESC"),
	q("sel/clustering-range", "SELECT ck, a, b FROM diff.c2 WHERE k = 'x' AND ck >= 1"),
	q("sel/clustering-desc", "SELECT ck FROM diff.c2 WHERE k = 'x' ORDER BY ck DESC"),
	q("sel/composite-partition", "SELECT a, b, c FROM diff.cp WHERE a = 1 AND b = 'x'"),
	q("sel/composite-partial-key", "SELECT * FROM diff.cp WHERE a = 1"),
	qcl("sel/cl-serial", "SERIAL", "SELECT c FROM diff.c WHERE k = 'a'"),
	q("sel/syntax-error", "SELEKT * FROM diff.c"),
	q("sel/unterminated-string", "SELECT * FROM diff.c WHERE k = 'a"),

	// Batches.
	batch("batch/counter", gocql.CounterBatch,
		Stmt{"UPDATE diff.c SET c = c + 1 WHERE k = 'bt'", nil},
		Stmt{"UPDATE diff.c SET c = c + ? WHERE k = ?", []any{int64(2), "bt"}},
		Stmt{"UPDATE diff.c2f SET a = a + 1 WHERE k = 'x'", nil}),
	q("batch/read-two-tables", "SELECT k, a, b FROM diff.c2f WHERE k = 'x'"),
	batch("batch/counter-same-key-twice", gocql.CounterBatch,
		Stmt{"UPDATE diff.c SET c = c + 5 WHERE k = 'twice'", nil},
		Stmt{"UPDATE diff.c SET c = c + 6 WHERE k = 'twice'", nil}),
	q("batch/read-same-key-twice", "SELECT k, c FROM diff.c WHERE k = 'twice'"),
	q("batch/read-counter", "SELECT k, c FROM diff.c WHERE k = 'bt'"),
	batch("batch/logged-counter", gocql.LoggedBatch, Stmt{"UPDATE diff.c SET c = c + 1 WHERE k = 'bt'", nil}),
	batch("batch/unlogged-counter", gocql.UnloggedBatch, Stmt{"UPDATE diff.c SET c = c + 1 WHERE k = 'bt'", nil}),
	batch("batch/counter-with-regular", gocql.CounterBatch,
		Stmt{"UPDATE diff.c SET c = c + 1 WHERE k = 'bt'", nil},
		Stmt{"INSERT INTO diff.reg (k, v) VALUES ('a', 1)", nil}),
	batch("batch/counter-unknown-table", gocql.CounterBatch, Stmt{"UPDATE diff.nope SET c = c + 1 WHERE k = 'bt'", nil}),
	batch("batch/counter-select", gocql.CounterBatch, Stmt{"SELECT * FROM diff.c", nil}),
	q("batch/text-counter", "BEGIN COUNTER BATCH UPDATE diff.c SET c = c + 10 WHERE k = 'bt'; UPDATE diff.c SET c = c - 1 WHERE k = 'bt2'; APPLY BATCH"),
	q("batch/text-logged-counter", "BEGIN BATCH UPDATE diff.c SET c = c + 10 WHERE k = 'bt'; APPLY BATCH"),
	q("batch/read-after", "SELECT k, c FROM diff.c WHERE k IN ('bt', 'bt2')"),

	// Paging: diff.page's 7 rows.
	batch("page/fill-clustering", gocql.CounterBatch,
		Stmt{"UPDATE diff.c2 SET a = a + 3 WHERE k = 'y' AND ck = 1", nil},
		Stmt{"UPDATE diff.c2 SET a = a + 3 WHERE k = 'y' AND ck = 2", nil},
		Stmt{"UPDATE diff.c2 SET a = a + 3 WHERE k = 'y' AND ck = 3", nil},
		Stmt{"UPDATE diff.c2 SET a = a + 3 WHERE k = 'y' AND ck = 4", nil},
		Stmt{"UPDATE diff.c2 SET a = a + 3 WHERE k = 'y' AND ck = 5", nil}),
	page("page/scan-2", 2, "SELECT k, c FROM diff.page"),
	page("page/scan-3", 3, "SELECT k, c FROM diff.page"),
	page("page/scan-7", 7, "SELECT k, c FROM diff.page"),
	page("page/limit-5", 2, "SELECT k, c FROM diff.page LIMIT 5"),
	page("page/count", 2, "SELECT count(*) FROM diff.page"),
	page("page/clustering-2", 2, "SELECT ck, a FROM diff.c2 WHERE k = 'y'"),
	page("page/in-2", 2, "SELECT k, c FROM diff.page WHERE k IN ('p1', 'p2', 'p3', 'p4', 'p5')"),
	page("page/empty-2", 2, "SELECT k, c FROM diff.page WHERE k = 'nosuchkey'"),

	// Prepared statement metadata.
	prep("prep/update", "UPDATE diff.c SET c = c + ? WHERE k = ?", int64(1), "pr"),
	prep("prep/update-named", "UPDATE diff.c SET c = c + :delta WHERE k = :key", int64(1), "pr"),
	prep("prep/update-two-counters", "UPDATE diff.c2f SET a = a + ?, b = b - ? WHERE k = ?", int64(1), int64(1), "pr"),
	prep("prep/select", "SELECT k, c FROM diff.c WHERE k = ?", "pr"),
	prep("prep/select-star", "SELECT * FROM diff.c2 WHERE k = ? AND ck = ?", "pr", 1),
	prep("prep/select-in", "SELECT k, c FROM diff.c WHERE k IN ?", []string{"pr", "a"}),
	prep("prep/select-in-each", "SELECT k, c FROM diff.c WHERE k IN (?, ?)", "pr", "a"),
	prep("prep/select-limit", "SELECT k, c FROM diff.page LIMIT ?", 1),
	prep("prep/select-composite", "SELECT a, b, c FROM diff.cp WHERE a = ? AND b = ?", 1, "x"),
	prep("prep/select-composite-reordered", "SELECT c FROM diff.cp WHERE b = ? AND a = ?", "x", 1),
	prep("prep/count", "SELECT count(*) FROM diff.c WHERE k = ?", "pr"),
	prep("prep/token", "SELECT k FROM diff.page WHERE token(k) > ?", int64(0)),
	prep("prep/unknown-table", "SELECT * FROM diff.nope WHERE k = ?", "x"),
	prep("prep/syntax", "UPDATE diff.c SET c = c + ? WHERE", int64(1)),

	// System tables, as drivers read them.
	q("sys/drop-clustering-tables", "DROP TABLE IF EXISTS diff.c2"),
	q("sys/drop-composite-table", "DROP TABLE IF EXISTS diff.cc"),
	q("sys/drop-regular-table", "DROP TABLE IF EXISTS diff.reg"),
	q("sys/local-driver-columns", "SELECT key, bootstrapped, cluster_name, cql_version, data_center, rack, partitioner, release_version, native_protocol_version, host_id, schema_version, tokens, broadcast_address, listen_address, rpc_address FROM system.local WHERE key = 'local'"),
	{Name: "sys/local-star", Stmt: "SELECT * FROM system.local WHERE key = 'local'", ColumnsOnly: true},
	{Name: "sys/peers-star", Stmt: "SELECT * FROM system.peers", ColumnsOnly: true},
	{Name: "sys/peers-v2-star", Stmt: "SELECT * FROM system.peers_v2", ColumnsOnly: true},
	q("sys/peers-rows", "SELECT peer FROM system.peers"),
	sorted(q("sys/schema-keyspaces", "SELECT * FROM system_schema.keyspaces WHERE keyspace_name IN ('diff', 'diff3')")),
	sorted(q("sys/schema-tables", "SELECT * FROM system_schema.tables WHERE keyspace_name = 'diff'")),
	sorted(q("sys/schema-tables-common", "SELECT keyspace_name, table_name, bloom_filter_fp_chance, caching, comment, compaction, compression, crc_check_chance, dclocal_read_repair_chance, default_time_to_live, extensions, flags, gc_grace_seconds, max_index_interval, memtable_flush_period_in_ms, min_index_interval, read_repair_chance, speculative_retry FROM system_schema.tables WHERE keyspace_name = 'diff' AND table_name IN ('c', 'commented')")),
	sorted(q("sys/schema-tables-names", "SELECT keyspace_name, table_name FROM system_schema.tables WHERE keyspace_name = 'diff'")),
	sorted(q("sys/schema-columns", "SELECT * FROM system_schema.columns WHERE keyspace_name = 'diff' AND table_name = 'cp'")),
	sorted(q("sys/schema-columns-c2f", "SELECT * FROM system_schema.columns WHERE keyspace_name = 'diff' AND table_name = 'c2f'")),
	sorted(q("sys/schema-columns-c", "SELECT * FROM system_schema.columns WHERE keyspace_name = 'diff' AND table_name = 'c'")),
	sorted(q("sys/schema-types", "SELECT * FROM system_schema.types WHERE keyspace_name = 'diff'")),
	sorted(q("sys/schema-functions", "SELECT * FROM system_schema.functions WHERE keyspace_name = 'diff'")),
	sorted(q("sys/schema-aggregates", "SELECT * FROM system_schema.aggregates WHERE keyspace_name = 'diff'")),
	sorted(q("sys/schema-indexes", "SELECT * FROM system_schema.indexes WHERE keyspace_name = 'diff'")),
	sorted(q("sys/schema-views", "SELECT * FROM system_schema.views WHERE keyspace_name = 'diff'")),
	sorted(q("sys/schema-triggers", "SELECT * FROM system_schema.triggers WHERE keyspace_name = 'diff'")),
	sorted(q("sys/system-keyspaces", "SELECT keyspace_name FROM system_schema.keyspaces")),

	// Clean-up, so that a server can run the corpus again.
	q("ddl/drop-keyspace", "DROP KEYSPACE diff"),
	q("ddl/drop-keyspace-rf3", "DROP KEYSPACE diff3"),
	q("ddl/drop-keyspace-again", "DROP KEYSPACE diff"),
	q("ddl/drop-keyspace-if-exists-gone", "DROP KEYSPACE IF EXISTS diff"),
}
