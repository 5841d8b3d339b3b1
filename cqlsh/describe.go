package cqlsh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gocql/gocql"
)

// describe handles DESCRIBE (DESC): KEYSPACES, KEYSPACE [ks], TABLES,
// TABLE [ks.]t, SCHEMA, FULL SCHEMA, CLUSTER, or a bare name (a keyspace,
// else a table of the current keyspace). Everything comes from the
// system_schema tables of the connected node.
func (s *Shell) describe(args []string, out io.Writer) error {
	what := ""
	if len(args) > 0 {
		what = strings.ToUpper(args[0])
	}
	rest := strings.Join(args[min(1, len(args)):], " ")
	switch what {
	case "":
		return fmt.Errorf("improper DESCRIBE command: DESCRIBE KEYSPACES | KEYSPACE [ks] | TABLES | TABLE [ks.]t | SCHEMA | CLUSTER")
	case "KEYSPACES":
		ks, err := s.keyspaces()
		if err != nil {
			return err
		}
		names := make([]string, len(ks))
		for i, k := range ks {
			names[i] = quoteName(k.name)
		}
		fmt.Fprintf(out, "\n%s\n\n", strings.Join(names, "  "))
		return nil
	case "KEYSPACE", "SCHEMA":
		name := s.cfg.Keyspace
		if what == "KEYSPACE" && rest != "" {
			name = unquoteName(rest)
		}
		if what == "SCHEMA" || name == "" {
			if what == "KEYSPACE" {
				return fmt.Errorf("no keyspace specified and no current keyspace")
			}
			return s.describeAll(out, false)
		}
		return s.describeKeyspace(name, out)
	case "FULL":
		if strings.EqualFold(rest, "SCHEMA") {
			return s.describeAll(out, true)
		}
		return fmt.Errorf("improper DESCRIBE FULL command: DESCRIBE FULL SCHEMA")
	case "TABLES", "COLUMNFAMILIES":
		return s.describeTables(out)
	case "TABLE", "COLUMNFAMILY":
		if rest == "" {
			return fmt.Errorf("improper DESCRIBE TABLE command: DESCRIBE TABLE [keyspace.]table")
		}
		ks, t, err := s.tableName(rest)
		if err != nil {
			return err
		}
		ddl, err := s.tableDDL(ks, t)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n%s\n\n", ddl)
		return nil
	case "CLUSTER":
		fmt.Fprintf(out, "\nCluster: %s\nPartitioner: Murmur3Partitioner\n\n", s.clusterName())
		return nil
	case "TYPES", "FUNCTIONS", "AGGREGATES", "INDEXES", "MATERIALIZED":
		fmt.Fprintf(out, "\n(idemkv has no %s)\n\n", strings.ToLower(what))
		return nil
	}
	// A bare name: a keyspace, else a table.
	name := strings.Join(args, " ")
	if !strings.Contains(name, ".") {
		ks, err := s.keyspaces()
		if err != nil {
			return err
		}
		for _, k := range ks {
			if k.name == unquoteName(name) {
				return s.describeKeyspace(k.name, out)
			}
		}
	}
	ks, t, err := s.tableName(name)
	if err != nil {
		return err
	}
	ddl, err := s.tableDDL(ks, t)
	if err != nil {
		return fmt.Errorf("'%s' is neither a keyspace nor a table (%w)", name, err)
	}
	fmt.Fprintf(out, "\n%s\n\n", ddl)
	return nil
}

type keyspaceRow struct {
	name        string
	durable     bool
	replication map[string]string
}

func (s *Shell) keyspaces() ([]keyspaceRow, error) {
	iter := s.query(`SELECT keyspace_name, durable_writes, replication FROM system_schema.keyspaces`).Iter()
	var out []keyspaceRow
	var k keyspaceRow
	for iter.Scan(&k.name, &k.durable, &k.replication) {
		out = append(out, k)
		k = keyspaceRow{}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read system_schema.keyspaces: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func (s *Shell) tablesOf(ks string) ([]string, error) {
	iter := s.query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?`, ks).Iter()
	var out []string
	var t string
	for iter.Scan(&t) {
		out = append(out, t)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read system_schema.tables: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

func (s *Shell) describeTables(out io.Writer) error {
	var kss []string
	if s.cfg.Keyspace != "" {
		kss = []string{s.cfg.Keyspace}
	} else {
		all, err := s.keyspaces()
		if err != nil {
			return err
		}
		for _, k := range all {
			kss = append(kss, k.name)
		}
	}
	for _, ks := range kss {
		ts, err := s.tablesOf(ks)
		if err != nil {
			return err
		}
		names := make([]string, len(ts))
		for i, t := range ts {
			names[i] = quoteName(t)
		}
		if s.cfg.Keyspace == "" {
			fmt.Fprintf(out, "\nKeyspace %s\n%s\n", quoteName(ks), strings.Repeat("-", len("Keyspace ")+len(quoteName(ks))))
		} else {
			fmt.Fprintln(out)
		}
		if len(names) == 0 {
			fmt.Fprintln(out, "<empty>")
		} else {
			fmt.Fprintln(out, strings.Join(names, "  "))
		}
	}
	fmt.Fprintln(out)
	return nil
}

func (s *Shell) describeAll(out io.Writer, full bool) error {
	ks, err := s.keyspaces()
	if err != nil {
		return err
	}
	for _, k := range ks {
		if !full && (k.name == "system" || k.name == "system_schema" || k.name == "system_traces") {
			continue
		}
		if err := s.describeKeyspace(k.name, out); err != nil {
			return err
		}
	}
	return nil
}

func (s *Shell) describeKeyspace(name string, out io.Writer) error {
	ks, err := s.keyspaces()
	if err != nil {
		return err
	}
	for _, k := range ks {
		if k.name != name {
			continue
		}
		fmt.Fprintf(out, "\n%s\n", keyspaceDDL(k))
		tables, err := s.tablesOf(name)
		if err != nil {
			return err
		}
		for _, t := range tables {
			ddl, err := s.tableDDL(name, t)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "\n%s\n", ddl)
		}
		fmt.Fprintln(out)
		return nil
	}
	return fmt.Errorf("keyspace '%s' not found", name)
}

// keyspaceDDL is the CREATE KEYSPACE statement of a keyspace, the strategy's
// class shortened as cqlsh shortens it.
func keyspaceDDL(k keyspaceRow) string {
	repl := map[string]string{}
	for o, v := range k.replication {
		repl[o] = strings.TrimPrefix(v, "org.apache.cassandra.locator.")
	}
	return fmt.Sprintf("CREATE KEYSPACE %s WITH replication = %s  AND durable_writes = %t;",
		quoteName(k.name), textMap(repl, "class"), k.durable)
}

// textMap prints a map<text, text> as a CQL literal, its keys sorted (first
// before the others).
func textMap(m map[string]string, first string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == first) != (keys[j] == first) {
			return keys[i] == first
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = quoteString(k) + ": " + quoteString(m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

var plainName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// quoteName quotes an identifier that would not read back as itself.
func quoteName(n string) string {
	if plainName.MatchString(n) {
		return n
	}
	return `"` + strings.ReplaceAll(n, `"`, `""`) + `"`
}

// unquoteName reads an identifier: quoted keeps its case, bare is lowered.
func unquoteName(n string) string {
	n = strings.TrimSpace(n)
	if len(n) >= 2 && n[0] == '"' && n[len(n)-1] == '"' {
		return strings.ReplaceAll(n[1:len(n)-1], `""`, `"`)
	}
	return strings.ToLower(n)
}

// tableName splits [ks.]table, the keyspace defaulting to the current one.
func (s *Shell) tableName(arg string) (string, string, error) {
	arg = strings.TrimSpace(arg)
	// Split at a dot outside quotes.
	inQuote := false
	for i := 0; i < len(arg); i++ {
		switch {
		case arg[i] == '"':
			inQuote = !inQuote
		case arg[i] == '.' && !inQuote:
			return unquoteName(arg[:i]), unquoteName(arg[i+1:]), nil
		}
	}
	if s.cfg.Keyspace == "" {
		return "", "", fmt.Errorf("no keyspace specified and no current keyspace: DESCRIBE TABLE keyspace.table")
	}
	return s.cfg.Keyspace, unquoteName(arg), nil
}

type columnRow struct {
	name, kind, typ, order string
	pos                    int
}

// tableDDL is the CREATE TABLE statement of a table, from system_schema.
func (s *Shell) tableDDL(ks, table string) (string, error) {
	var (
		bloom, crc, dclocal, rr                float64
		caching, compaction, compression       map[string]string
		comment, speculative                   string
		ttl, gcGrace, maxIdx, minIdx, flushPer int
		extensions                             map[string][]byte
	)
	err := s.query(`SELECT bloom_filter_fp_chance, caching, comment, compaction, compression, crc_check_chance,
		dclocal_read_repair_chance, default_time_to_live, extensions, gc_grace_seconds, max_index_interval,
		memtable_flush_period_in_ms, min_index_interval, read_repair_chance, speculative_retry
		FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, ks, table).
		Scan(&bloom, &caching, &comment, &compaction, &compression, &crc, &dclocal, &ttl, &extensions,
			&gcGrace, &maxIdx, &flushPer, &minIdx, &rr, &speculative)
	if errors.Is(err, gocql.ErrNotFound) {
		return "", fmt.Errorf("table '%s.%s' not found", ks, table)
	}
	if err != nil {
		return "", fmt.Errorf("read system_schema.tables: %w", err)
	}
	iter := s.query(`SELECT column_name, kind, position, type, clustering_order FROM system_schema.columns
		WHERE keyspace_name = ? AND table_name = ?`, ks, table).Iter()
	var cols []columnRow
	var c columnRow
	for iter.Scan(&c.name, &c.kind, &c.pos, &c.typ, &c.order) {
		cols = append(cols, c)
		c = columnRow{}
	}
	if err := iter.Close(); err != nil {
		return "", fmt.Errorf("read system_schema.columns: %w", err)
	}
	rank := map[string]int{"partition_key": 0, "clustering": 1, "static": 2, "regular": 3}
	sort.SliceStable(cols, func(i, j int) bool {
		a, b := cols[i], cols[j]
		if rank[a.kind] != rank[b.kind] {
			return rank[a.kind] < rank[b.kind]
		}
		if a.kind == "partition_key" || a.kind == "clustering" {
			return a.pos < b.pos
		}
		return a.name < b.name
	})
	var pk, ck, desc []string
	for _, c := range cols {
		switch c.kind {
		case "partition_key":
			pk = append(pk, quoteName(c.name))
		case "clustering":
			ck = append(ck, quoteName(c.name))
			if strings.EqualFold(c.order, "desc") {
				desc = append(desc, quoteName(c.name)+" DESC")
			} else {
				desc = append(desc, quoteName(c.name)+" ASC")
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s.%s (\n", quoteName(ks), quoteName(table))
	single := len(pk) == 1 && len(ck) == 0
	for _, c := range cols {
		fmt.Fprintf(&b, "    %s %s", quoteName(c.name), c.typ)
		switch {
		case c.kind == "static":
			b.WriteString(" static")
		case single && c.kind == "partition_key":
			b.WriteString(" PRIMARY KEY")
		}
		b.WriteString(",\n")
	}
	if single {
		s := b.String()
		b.Reset()
		b.WriteString(strings.TrimSuffix(s, ",\n") + "\n")
	} else {
		key := strings.Join(pk, ", ")
		if len(pk) > 1 {
			key = "(" + key + ")"
		}
		if len(ck) > 0 {
			key += ", " + strings.Join(ck, ", ")
		}
		fmt.Fprintf(&b, "    PRIMARY KEY (%s)\n", key)
	}
	b.WriteString(") WITH ")
	var opts []string
	hasDesc := false
	for _, d := range desc {
		hasDesc = hasDesc || strings.HasSuffix(d, "DESC")
	}
	if hasDesc {
		opts = append(opts, "CLUSTERING ORDER BY ("+strings.Join(desc, ", ")+")")
	}
	opts = append(opts,
		"bloom_filter_fp_chance = "+pyFloat(bloom),
		"caching = "+textMap(caching, "keys"),
		"comment = "+quoteString(comment),
		"compaction = "+textMap(compaction, "class"),
		"compression = "+textMap(compression, "chunk_length_in_kb"),
		"crc_check_chance = "+pyFloat(crc),
		"dclocal_read_repair_chance = "+pyFloat(dclocal),
		"default_time_to_live = "+strconv.Itoa(ttl),
		"gc_grace_seconds = "+strconv.Itoa(gcGrace),
		"max_index_interval = "+strconv.Itoa(maxIdx),
		"memtable_flush_period_in_ms = "+strconv.Itoa(flushPer),
		"min_index_interval = "+strconv.Itoa(minIdx),
		"read_repair_chance = "+pyFloat(rr),
		"speculative_retry = "+quoteString(speculative))
	if raw, ok := extensions["idemkv.idempotence"]; ok {
		var m map[string]string
		if json.Unmarshal(raw, &m) == nil {
			opts = append(opts, "idempotence = "+textMap(m, "class"))
		}
	}
	b.WriteString(strings.Join(opts, "\n    AND "))
	b.WriteString(";")
	return b.String(), nil
}

// pyFloat prints a double as cqlsh's DESCRIBE does (Python's repr: 1.0,
// 0.01).
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEN") {
		s += ".0"
	}
	return s
}
