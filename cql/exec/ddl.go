package exec

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/schema"
)

// ExtensionPrefix prefixes, in system_schema.tables' extensions map, the
// names of the table options that counter designs register (see
// coltype.TableOption): a table's idempotence option shows as
// "idemkv.idempotence".
const ExtensionPrefix = "idemkv."

var validName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

func (e *Executor) use(s *cql.Session, st *parse.Use) (frame.Result, error) {
	if !isSystemKeyspace(st.Keyspace) {
		if _, ok := e.b.Schema().Visible().Keyspaces[st.Keyspace]; !ok {
			return nil, invalid("Keyspace '%s' does not exist", st.Keyspace)
		}
	}
	if s != nil {
		s.Keyspace = st.Keyspace
	}
	return frame.SetKeyspaceResult{Keyspace: st.Keyspace}, nil
}

// waitAgreement waits, bounded, for the other nodes to have the new schema.
// Cassandra answers DDL after such a wait whatever its outcome; so does
// idemkv, logging a wait that did not succeed.
func (e *Executor) waitAgreement(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.SchemaAgreementTimeout)
	defer cancel()
	if err := e.b.WaitSchemaAgreement(ctx); err != nil {
		e.opts.Logger.Warn("cql/exec: schema agreement not reached", "err", err)
	}
}

// termText is a constant as option text: strings as they are, numbers and
// booleans as written.
func termText(t parse.Term) (string, bool) {
	switch t.Kind {
	case parse.TermString, parse.TermInt, parse.TermFloat, parse.TermBool, parse.TermUUID, parse.TermBlob:
		return t.Text, true
	}
	return "", false
}

// termMap reads a map literal of constants.
func termMap(t parse.Term, prop string) (map[string]string, error) {
	if t.Kind != parse.TermMap {
		return nil, frame.Errorf(frame.ErrSyntax, "Invalid value for property '%s'. It should be a map.", prop)
	}
	out := map[string]string{}
	for _, en := range t.Map {
		k, ok1 := termText(en.Key)
		v, ok2 := termText(en.Value)
		if !ok1 || !ok2 {
			return nil, frame.Errorf(frame.ErrSyntax, "Invalid value for property '%s': a map of constants is expected", prop)
		}
		out[k] = v
	}
	return out, nil
}

func strategyError(err error) error {
	msg := strings.TrimPrefix(err.Error(), ring.ErrStrategy.Error()+": ")
	return frame.Errorf(frame.ErrConfig, "%s", msg)
}

func (e *Executor) createKeyspace(ctx context.Context, st *parse.CreateKeyspace) (frame.Result, error) {
	if isSystemKeyspace(st.Name) {
		return nil, frame.Errorf(frame.ErrUnauthorized, "%s keyspace is not user-modifiable.", st.Name)
	}
	if len(st.Name) > 48 || !validName.MatchString(st.Name) {
		return nil, invalid("Keyspace name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got \"%s\")", st.Name)
	}
	ks := schema.Keyspace{Name: st.Name, DurableWrites: true}
	var repl map[string]string
	seen := map[string]bool{}
	for _, p := range st.Properties {
		if seen[p.Name] {
			return nil, frame.Errorf(frame.ErrSyntax, "Multiple definition for property '%s'", p.Name)
		}
		seen[p.Name] = true
		switch p.Name {
		case "replication":
			m, err := termMap(p.Value, p.Name)
			if err != nil {
				return nil, err
			}
			repl = m
		case "durable_writes":
			v, ok := termText(p.Value)
			if !ok || (strings.ToLower(v) != "true" && strings.ToLower(v) != "false") {
				return nil, frame.Errorf(frame.ErrSyntax, "Invalid boolean value %s for 'durable_writes' property", p.Value.String())
			}
			ks.DurableWrites = strings.ToLower(v) == "true"
		default:
			return nil, frame.Errorf(frame.ErrSyntax, "Unknown property '%s'", p.Name)
		}
	}
	if repl == nil {
		return nil, frame.Errorf(frame.ErrConfig, "Missing mandatory replication strategy class")
	}
	class, ok := repl["class"]
	if !ok {
		return nil, frame.Errorf(frame.ErrConfig, "Missing mandatory replication strategy class")
	}
	opts := map[string]string{}
	for k, v := range repl {
		if k != "class" {
			opts[k] = v
		}
	}
	strat, err := ring.ParseStrategy(class, opts)
	if err != nil {
		return nil, strategyError(err)
	}
	ks.Class, ks.Options = strat.Class(), strat.Options()
	if _, exists := e.b.Schema().Visible().Keyspaces[st.Name]; exists {
		if st.IfNotExists {
			return frame.VoidResult{}, nil
		}
		return nil, &frame.Error{Code: frame.ErrAlreadyExists, Message: "Cannot add existing keyspace \"" + st.Name + "\"", Keyspace: st.Name}
	}
	if err := e.b.Schema().CreateKeyspace(ks, false); err != nil {
		if _, exists := e.b.Schema().Visible().Keyspaces[st.Name]; exists {
			if st.IfNotExists {
				return frame.VoidResult{}, nil
			}
			return nil, &frame.Error{Code: frame.ErrAlreadyExists, Message: "Cannot add existing keyspace \"" + st.Name + "\"", Keyspace: st.Name}
		}
		if errors.Is(err, ring.ErrStrategy) {
			return nil, strategyError(err)
		}
		return nil, invalid("%s", err.Error())
	}
	e.waitAgreement(ctx)
	return frame.SchemaChangeResult{Change: "CREATED", Target: "KEYSPACE", Keyspace: st.Name}, nil
}

func (e *Executor) dropKeyspace(ctx context.Context, st *parse.DropKeyspace) (frame.Result, error) {
	if isSystemKeyspace(st.Name) {
		return nil, frame.Errorf(frame.ErrUnauthorized, "%s keyspace is not user-modifiable.", st.Name)
	}
	if _, exists := e.b.Schema().Visible().Keyspaces[st.Name]; !exists {
		if st.IfExists {
			return frame.VoidResult{}, nil
		}
		return nil, frame.Errorf(frame.ErrConfig, "Cannot drop non existing keyspace '%s'.", st.Name)
	}
	if err := e.b.Schema().DropKeyspace(st.Name, st.IfExists); err != nil {
		return nil, frame.Errorf(frame.ErrConfig, "%s", err.Error())
	}
	e.waitAgreement(ctx)
	return frame.SchemaChangeResult{Change: "DROPPED", Target: "KEYSPACE", Keyspace: st.Name}, nil
}

// tableOptions are the table options Cassandra 3.11 knows; the options
// counter designs register (coltype.RegisterOption) are accepted too.
var tableOptions = map[string]bool{
	"bloom_filter_fp_chance": true, "caching": true, "cdc": true, "comment": true, "compaction": true,
	"compression": true, "crc_check_chance": true, "dclocal_read_repair_chance": true,
	"default_time_to_live": true, "extensions": true, "gc_grace_seconds": true, "max_index_interval": true,
	"memtable_flush_period_in_ms": true, "min_index_interval": true, "read_repair_chance": true,
	"speculative_retry": true,
}

func (e *Executor) tableKeyspace(sessionKS string, tn parse.TableName) (string, error) {
	ks := tn.Keyspace
	if ks == "" {
		ks = sessionKS
	}
	if ks == "" {
		return "", invalid("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
	}
	if isSystemKeyspace(ks) {
		return "", frame.Errorf(frame.ErrUnauthorized, "%s keyspace is not user-modifiable.", ks)
	}
	return ks, nil
}

// tableDef checks a CREATE TABLE against Cassandra's counter rules and
// idemkv's limits, and builds its definition (without an id).
func tableDef(ks string, st *parse.CreateTable) (coltype.TableDef, error) {
	def := coltype.TableDef{Keyspace: ks, Name: st.Table.Name}
	if len(st.Table.Name) > 48 {
		return def, invalid("Table names shouldn't be more than 48 characters long (got \"%s\")", st.Table.Name)
	}
	if !validName.MatchString(st.Table.Name) {
		return def, invalid("\"%s\" is not a valid table name (must be alphanumeric character or underscore only: [a-zA-Z_0-9]+)", st.Table.Name)
	}
	if len(st.PartitionKey) == 0 {
		return def, invalid("No PRIMARY KEY specifed for table '%s.%s' (exactly one required)", ks, st.Table.Name)
	}
	cols := map[string]parse.ColumnDef{}
	for _, c := range st.Columns {
		if _, dup := cols[c.Name]; dup {
			return def, invalid("Multiple definition of identifier %s", c.Name)
		}
		cols[c.Name] = c
	}
	inKey := map[string]bool{}
	for _, n := range append(append([]string(nil), st.PartitionKey...), st.Clustering...) {
		if _, ok := cols[n]; !ok {
			return def, invalid("Unknown definition %s referenced in PRIMARY KEY", n)
		}
		if inKey[n] {
			return def, invalid("Multiple definition of identifier %s", n)
		}
		inKey[n] = true
	}
	for _, n := range st.PartitionKey {
		c := cols[n]
		if c.Type.Name == "counter" || isCounterType(c.Type.Name) {
			return def, invalid("counter type is not supported for PRIMARY KEY part %s", n)
		}
	}
	for _, n := range st.Clustering {
		if isCounterType(cols[n].Type.Name) {
			return def, invalid("counter type is not supported for PRIMARY KEY part %s", n)
		}
	}
	var counters, others []string
	design := map[string]string{} // counter column → its registered type
	for _, c := range st.Columns {
		if inKey[c.Name] {
			continue
		}
		name, bad := counterTypeName(c.Type)
		if bad != nil {
			return def, bad
		}
		if name != "" {
			counters = append(counters, c.Name)
			design[c.Name] = name
		} else {
			others = append(others, c.Name)
		}
	}
	if len(counters) > 0 && len(others) > 0 {
		return def, invalid("Cannot mix counter and non counter columns in the same table")
	}
	if st.CompactStorage {
		return def, invalid("COMPACT STORAGE is not supported by idemkv")
	}
	static := map[string]bool{}
	for _, c := range st.Columns {
		if c.Static && len(st.Clustering) == 0 {
			return def, invalid("Static columns are only useful (and thus allowed) if the table has at least one clustering column")
		}
		if c.Static && inKey[c.Name] {
			return def, invalid("Static column %s cannot be part of the PRIMARY KEY", c.Name)
		}
		static[c.Name] = c.Static
	}
	clustering, err := clusteringDefs(st, cols)
	if err != nil {
		return def, err
	}
	def.Clustering = clustering
	if len(clustering) > 0 {
		for _, n := range counters {
			if t, ok := coltype.Lookup(design[n]); ok {
				if _, per := t.(coltype.Clustered); !per {
					return def, invalid("idemkv does not serve %s columns in tables with clustering columns (%s): the design keeps its state per partition", design[n], n)
				}
			}
		}
	}
	for _, n := range others {
		c := cols[n]
		_, text, _, err := regularType(ks, c.Type)
		if err != nil {
			return def, err
		}
		def.Columns = append(def.Columns, coltype.ColumnDef{Name: n, Type: coltype.RegularType, CQL: text, Static: static[n]})
	}
	for _, n := range st.PartitionKey {
		c := cols[n]
		_, custom := customType(c.Type.Name)
		if _, ok := nativeTypes[c.Type.Name]; (!ok && !custom) || len(c.Type.Params) > 0 {
			return def, invalid("idemkv does not support partition keys of type %s (the native types)", c.Type.String())
		}
		typ := c.Type.Name
		if typ == "varchar" {
			typ = "text"
		}
		def.PartitionKey = append(def.PartitionKey, coltype.ColumnDef{Name: n, Type: typ})
	}
	for _, n := range counters {
		def.Columns = append(def.Columns, coltype.ColumnDef{Name: n, Type: design[n], Static: static[n]})
	}
	opts, err := tablePropertyOptions(st.Properties)
	if err != nil {
		return def, err
	}
	if v, ok := opts["default_time_to_live"]; ok && v != "0" && len(counters) > 0 {
		return def, invalid("Cannot set default_time_to_live on a table with counters")
	}
	if len(opts) > 0 {
		def.Options = opts
	}
	return def, nil
}

// clusteringDefs checks the clustering columns of a CREATE TABLE and its
// CLUSTERING ORDER BY as Cassandra does, and returns their definitions.
func clusteringDefs(st *parse.CreateTable, cols map[string]parse.ColumnDef) ([]coltype.ColumnDef, error) {
	pos := map[string]int{}
	for i, n := range st.Clustering {
		pos[n] = i
	}
	desc := make([]bool, len(st.Clustering))
	for i, o := range st.ClusteringOrder {
		j, ok := pos[o.Column]
		if !ok {
			return nil, invalid("Only clustering key columns can be defined in CLUSTERING ORDER directive")
		}
		if j != i {
			if j < len(st.ClusteringOrder) && i < len(st.Clustering) {
				return nil, invalid("The order of columns in the CLUSTERING ORDER directive must be the one of the clustering key (%s must appear before %s)", st.Clustering[i], o.Column)
			}
			return nil, invalid("Missing CLUSTERING ORDER for column %s", st.Clustering[i])
		}
		desc[j] = o.Desc
	}
	var out []coltype.ColumnDef
	for i, n := range st.Clustering {
		c := cols[n]
		_, custom := customType(c.Type.Name)
		if _, ok := clusteringTypes[c.Type.Name]; (!ok && !custom) || len(c.Type.Params) > 0 {
			return nil, invalid("idemkv does not support clustering columns of type %s (text, varchar, ascii, blob, int, bigint, smallint, tinyint, uuid, timeuuid, boolean, timestamp, date, time, double, float, inet)", c.Type.String())
		}
		typ := c.Type.Name
		if typ == "varchar" {
			typ = "text"
		}
		out = append(out, coltype.ColumnDef{Name: n, Type: typ, Desc: desc[i]})
	}
	return out, nil
}

func (e *Executor) createTable(ctx context.Context, sessionKS string, st *parse.CreateTable) (frame.Result, error) {
	ks, err := e.tableKeyspace(sessionKS, st.Table)
	if err != nil {
		return nil, err
	}
	if _, ok := e.b.Schema().Visible().Keyspaces[ks]; !ok {
		return nil, invalid("Keyspace %s does not exist", ks)
	}
	def, err := tableDef(ks, st)
	if err != nil {
		return nil, err
	}
	exists := func() error {
		if _, ok := e.b.Schema().Table(ks, def.Name); !ok {
			return nil
		}
		return &frame.Error{Code: frame.ErrAlreadyExists, Keyspace: ks, Table: def.Name,
			Message: "Cannot add already existing table \"" + def.Name + "\" to keyspace \"" + ks + "\""}
	}
	if err := exists(); err != nil {
		if st.IfNotExists {
			return frame.VoidResult{}, nil
		}
		return nil, err
	}
	if err := e.checkOptionMemory(def); err != nil {
		return nil, err
	}
	def.ID = e.b.NewTableID()
	if err := e.b.Schema().CreateTable(def, false); err != nil {
		if err := exists(); err != nil {
			if st.IfNotExists {
				return frame.VoidResult{}, nil
			}
			return nil, err
		}
		return nil, invalid("%s", err.Error())
	}
	e.waitAgreement(ctx)
	return frame.SchemaChangeResult{Change: "CREATED", Target: "TABLE", Keyspace: ks, Name: def.Name}, nil
}

func (e *Executor) dropTable(ctx context.Context, sessionKS string, st *parse.DropTable) (frame.Result, error) {
	ks, err := e.tableKeyspace(sessionKS, st.Table)
	if err != nil {
		return nil, err
	}
	if _, ok := e.b.Schema().Table(ks, st.Table.Name); !ok {
		if st.IfExists {
			return frame.VoidResult{}, nil
		}
		if _, ok := e.b.Schema().Visible().Keyspaces[ks]; !ok {
			return nil, invalid("Keyspace %s does not exist", ks)
		}
		return nil, frame.Errorf(frame.ErrConfig, "Cannot drop non existing table '%s' in keyspace '%s'.", st.Table.Name, ks)
	}
	if err := e.b.Schema().DropTable(ks, st.Table.Name, st.IfExists); err != nil {
		return nil, frame.Errorf(frame.ErrConfig, "%s", err.Error())
	}
	e.waitAgreement(ctx)
	return frame.SchemaChangeResult{Change: "DROPPED", Target: "TABLE", Keyspace: ks, Name: st.Table.Name}, nil
}

// tablePropertyOptions checks the properties of CREATE or ALTER TABLE and
// returns them as a table's options.
func tablePropertyOptions(props []parse.Property) (map[string]string, error) {
	opts := map[string]string{}
	for _, p := range props {
		designOpt, isDesignOpt := coltype.LookupOption(p.Name)
		if !tableOptions[p.Name] && !isDesignOpt {
			return nil, frame.Errorf(frame.ErrSyntax, "Unknown property '%s'", p.Name)
		}
		if _, dup := opts[p.Name]; dup {
			return nil, frame.Errorf(frame.ErrSyntax, "Multiple definition for property '%s'", p.Name)
		}
		switch {
		case isDesignOpt:
			m, err := termMap(p.Value, p.Name)
			if err != nil {
				return nil, err
			}
			v, err := designOpt.ParseCQL(m)
			if err != nil {
				return nil, frame.Errorf(frame.ErrConfig, "%s", err.Error())
			}
			opts[p.Name] = v
		case p.Value.Kind == parse.TermMap:
			m, err := termMap(p.Value, p.Name)
			if err != nil {
				return nil, err
			}
			b, _ := json.Marshal(m)
			opts[p.Name] = string(b)
		default:
			v, ok := termText(p.Value)
			if !ok {
				return nil, frame.Errorf(frame.ErrSyntax, "Invalid value for property '%s'", p.Name)
			}
			opts[p.Name] = v
		}
	}
	if err := checkTableParams(opts); err != nil {
		return nil, err
	}
	return opts, nil
}

// alterTable changes a table's options (ALTER TABLE ... WITH ...): the FBF
// option among them, which the replicas apply to their filters at once.
func (e *Executor) alterTable(ctx context.Context, sessionKS string, st *parse.AlterTable) (frame.Result, error) {
	ks, err := e.tableKeyspace(sessionKS, st.Table)
	if err != nil {
		return nil, err
	}
	def, ok := e.b.Schema().Table(ks, st.Table.Name)
	if !ok {
		if _, ok := e.b.Schema().Visible().Keyspaces[ks]; !ok {
			return nil, invalid("Keyspace '%s' doesn't exist", ks)
		}
		return nil, invalid("Table '%s.%s' doesn't exist", ks, st.Table.Name)
	}
	if len(st.Add) > 0 || len(st.Drop) > 0 {
		return e.alterColumns(ctx, ks, def, st)
	}
	opts, err := tablePropertyOptions(st.Properties)
	if err != nil {
		return nil, err
	}
	if v, ok := opts["default_time_to_live"]; ok && v != "0" && !def.HasRegularColumns() {
		return nil, invalid("Cannot set default_time_to_live on a table with counters")
	}
	next := def
	next.Options = map[string]string{}
	for k, v := range def.Options {
		next.Options[k] = v
	}
	for k, v := range opts {
		next.Options[k] = v
	}
	if err := e.checkOptionMemory(next); err != nil {
		return nil, err
	}
	if err := e.b.Schema().AlterTable(next); err != nil {
		return nil, frame.Errorf(frame.ErrConfig, "%s", err.Error())
	}
	e.waitAgreement(ctx)
	return frame.SchemaChangeResult{Change: "UPDATED", Target: "TABLE", Keyspace: ks, Name: st.Table.Name}, nil
}
