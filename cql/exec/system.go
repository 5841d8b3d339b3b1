package exec

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/ring"
)

// sysTable is a virtual system table: its columns in Cassandra 3.11's order
// (partition key, clustering, then the others by name) and its rows.
type sysTable struct {
	keyspace, name string
	cols           []sysCol
	pk             int // how many leading columns form the partition key
	ck             int // how many columns after those form the clustering
	rows           func() [][]frame.Value
	// byKey, when set, returns the rows of one partition key (the first
	// column's value), so that a SELECT by key reads no other.
	byKey func(key []byte) [][]frame.Value
}

type sysCol struct {
	name string
	typ  frame.DataType
}

func (s *sysTable) info() *tableInfo {
	t := &tableInfo{keyspace: s.keyspace, name: s.name, cols: map[string]*column{}, sys: s}
	for i, c := range s.cols {
		col := &column{name: c.name, typ: c.typ, cqlType: cqlTypeName(c.typ), pkIndex: -1}
		if i < s.pk {
			col.pkIndex = i
			t.pk = append(t.pk, col)
		} else {
			t.regular = append(t.regular, col)
		}
		t.cols[c.name] = col
	}
	return t
}

func isSystemKeyspace(ks string) bool {
	return ks == "system" || ks == "system_schema" || ks == tracesKeyspace
}

var (
	textT    = frame.Text
	intT     = frame.Int
	uuidT    = frame.UUID
	inetT    = frame.Inet
	boolT    = frame.Boolean
	doubleT  = frame.Double
	blobT    = frame.Blob
	tsT      = frame.Timestamp
	textSet  = frame.SetOf(frame.Text)
	textList = frame.ListOf(frame.Text)
	textMap  = frame.MapOf(frame.Text, frame.Text)
	blobMap  = frame.MapOf(frame.Text, frame.Blob)
)

func cols(spec ...any) []sysCol {
	out := make([]sysCol, 0, len(spec)/2)
	for i := 0; i+1 < len(spec); i += 2 {
		out = append(out, sysCol{name: spec[i].(string), typ: spec[i+1].(frame.DataType)})
	}
	return out
}

// The system tables' columns, as Cassandra 3.11 has them.
var (
	localCols = cols("key", textT, "bootstrapped", textT, "broadcast_address", inetT, "cluster_name", textT,
		"cql_version", textT, "data_center", textT, "gossip_generation", intT, "host_id", uuidT,
		"listen_address", inetT, "native_protocol_version", textT, "partitioner", textT, "rack", textT,
		"release_version", textT, "rpc_address", inetT, "schema_version", uuidT, "thrift_version", textT,
		"tokens", textSet, "truncated_at", frame.MapOf(uuidT, blobT))
	peersCols = cols("peer", inetT, "data_center", textT, "host_id", uuidT, "preferred_ip", inetT, "rack", textT,
		"release_version", textT, "rpc_address", inetT, "schema_version", uuidT, "tokens", textSet)
	keyspacesCols = cols("keyspace_name", textT, "durable_writes", boolT, "replication", textMap)
	tablesCols    = cols("keyspace_name", textT, "table_name", textT, "bloom_filter_fp_chance", doubleT,
		"caching", textMap, "cdc", boolT, "comment", textT, "compaction", textMap, "compression", textMap,
		"crc_check_chance", doubleT, "dclocal_read_repair_chance", doubleT, "default_time_to_live", intT,
		"extensions", blobMap, "flags", textSet, "gc_grace_seconds", intT, "id", uuidT,
		"max_index_interval", intT, "memtable_flush_period_in_ms", intT, "min_index_interval", intT,
		"read_repair_chance", doubleT, "speculative_retry", textT)
	columnsCols = cols("keyspace_name", textT, "table_name", textT, "column_name", textT, "clustering_order", textT,
		"column_name_bytes", blobT, "kind", textT, "position", intT, "type", textT)
	droppedCols = cols("keyspace_name", textT, "table_name", textT, "column_name", textT, "dropped_time", tsT,
		"kind", textT, "type", textT)
	triggersCols = cols("keyspace_name", textT, "table_name", textT, "trigger_name", textT, "options", textMap)
	viewsCols    = cols("keyspace_name", textT, "view_name", textT, "base_table_id", uuidT, "base_table_name", textT,
		"bloom_filter_fp_chance", doubleT, "caching", textMap, "cdc", boolT, "comment", textT,
		"compaction", textMap, "compression", textMap, "crc_check_chance", doubleT,
		"dclocal_read_repair_chance", doubleT, "default_time_to_live", intT, "extensions", blobMap,
		"gc_grace_seconds", intT, "id", uuidT, "include_all_columns", boolT, "max_index_interval", intT,
		"memtable_flush_period_in_ms", intT, "min_index_interval", intT, "read_repair_chance", doubleT,
		"speculative_retry", textT, "where_clause", textT)
	typesCols = cols("keyspace_name", textT, "type_name", textT, "field_names", textList, "field_types", textList)
	funcsCols = cols("keyspace_name", textT, "function_name", textT, "argument_types", textList,
		"argument_names", textList, "body", textT, "called_on_null_input", boolT, "language", textT, "return_type", textT)
	aggsCols = cols("keyspace_name", textT, "aggregate_name", textT, "argument_types", textList, "final_func", textT,
		"initcond", textT, "return_type", textT, "state_func", textT, "state_type", textT)
	indexesCols = cols("keyspace_name", textT, "table_name", textT, "index_name", textT, "kind", textT, "options", textMap)
)

// systemTable returns a system table, or nil for one idemkv does not have
// (system.peers_v2 among them, as Cassandra 3.11 has none).
func (e *Executor) systemTable(ks, name string) *sysTable {
	empty := func() [][]frame.Value { return nil }
	mk := func(c []sysCol, pk int, rows func() [][]frame.Value) *sysTable {
		return &sysTable{keyspace: ks, name: name, cols: c, pk: pk, rows: rows}
	}
	switch ks + "." + name {
	case "system.local":
		return mk(localCols, 1, e.localRows)
	case "system.peers":
		return mk(peersCols, 1, e.peerRows)
	case "system_schema.keyspaces":
		return mk(keyspacesCols, 1, e.keyspaceRows)
	case "system_schema.tables":
		return mk(tablesCols, 1, e.tableRows)
	case "system_schema.columns":
		return mk(columnsCols, 1, e.columnRows)
	case "system_schema.dropped_columns":
		return mk(droppedCols, 1, empty)
	case "system_schema.triggers":
		return mk(triggersCols, 1, empty)
	case "system_schema.views":
		return mk(viewsCols, 1, empty)
	case "system_schema.types":
		return mk(typesCols, 1, empty)
	case "system_schema.functions":
		return mk(funcsCols, 1, empty)
	case "system_schema.aggregates":
		return mk(aggsCols, 1, empty)
	case "system_schema.indexes":
		return mk(indexesCols, 1, empty)
	}
	if ks == tracesKeyspace {
		return e.traceTable(name)
	}
	return nil
}

func text(s string) frame.Value { return frame.Bytes([]byte(s)) }
func i32(v int32) frame.Value   { return frame.Bytes(frame.EncodeInt(v)) }
func f64(v float64) frame.Value { return frame.Bytes(frame.EncodeDouble(v)) }
func boolean(b bool) frame.Value {
	return frame.Bytes(frame.EncodeBoolean(b))
}
func uuidV(u [16]byte) frame.Value { return frame.Bytes(frame.EncodeUUID(u)) }

func inet(ip net.IP) frame.Value {
	if ip == nil {
		return frame.Null
	}
	return frame.Bytes(frame.EncodeInet(ip))
}

// textSetV encodes a set<text>, ordered as Cassandra orders text.
func textSetV(ss []string) frame.Value {
	ss = append([]string(nil), ss...)
	sort.Strings(ss)
	elems := make([][]byte, len(ss))
	for i, s := range ss {
		elems[i] = []byte(s)
	}
	return frame.Bytes(frame.EncodeSet(elems))
}

// mapV encodes a map<text, text> or map<text, blob>, ordered by key.
func mapV(m map[string]string) frame.Value {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	keys, vals := make([][]byte, len(ks)), make([][]byte, len(ks))
	for i, k := range ks {
		keys[i], vals[i] = []byte(k), []byte(m[k])
	}
	return frame.Bytes(frame.EncodeMap(keys, vals))
}

func tokenStrings(ts []int64) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = strconv.FormatInt(t, 10)
	}
	return out
}

// parseUUID reads a UUID's text (the schema's version string).
func parseUUID(s string) [16]byte {
	var u [16]byte
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err == nil && len(b) == 16 {
		copy(u[:], b)
	}
	return u
}

func (e *Executor) schemaVersion(n NodeInfo) [16]byte {
	if n.SchemaVersion != ([16]byte{}) {
		return n.SchemaVersion
	}
	return parseUUID(e.b.Schema().Version())
}

func (e *Executor) localRows() [][]frame.Value {
	n := e.b.Local()
	release := n.ReleaseVersion
	if release == "" {
		release = e.opts.ReleaseVersion
	}
	cluster := e.opts.ClusterName
	if cluster == "" {
		cluster = n.ClusterName
	}
	if cluster == "" {
		cluster = DefaultClusterName
	}
	return [][]frame.Value{{
		text("local"), text("COMPLETED"), inet(n.IP), text(cluster),
		text(CQLVersion), text(n.DC), frame.Null, uuidV(n.HostID),
		inet(n.IP), text("4"), text("org.apache.cassandra.dht.Murmur3Partitioner"), text(n.Rack),
		text(release), inet(n.IP), uuidV(e.schemaVersion(n)), text("20.1.0"),
		textSetV(tokenStrings(n.Tokens)), frame.Null,
	}}
}

func (e *Executor) peerRows() [][]frame.Value {
	var out [][]frame.Value
	for _, n := range e.b.Peers() {
		release := n.ReleaseVersion
		if release == "" {
			release = e.opts.ReleaseVersion
		}
		out = append(out, []frame.Value{
			inet(n.IP), text(n.DC), uuidV(n.HostID), frame.Null, text(n.Rack),
			text(release), inet(n.IP), uuidV(e.schemaVersion(n)), textSetV(tokenStrings(n.Tokens)),
		})
	}
	return out
}

func (e *Executor) keyspaceRows() [][]frame.Value {
	doc := e.b.Schema().Visible()
	local := map[string]string{"class": "org.apache.cassandra.locator.LocalStrategy"}
	out := [][]frame.Value{
		{text("system"), boolean(true), mapV(local)},
		{text("system_schema"), boolean(true), mapV(local)},
		{text(tracesKeyspace), boolean(true), mapV(map[string]string{
			"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "2"})},
	}
	names := make([]string, 0, len(doc.Keyspaces))
	for n := range doc.Keyspaces {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := doc.Keyspaces[n]
		repl := map[string]string{}
		if st, err := ring.ParseStrategy(k.Class, k.Options); err == nil {
			repl = ring.Replication(st)
		} else {
			for o, v := range k.Options {
				repl[o] = v
			}
			repl["class"] = k.Class
		}
		out = append(out, []frame.Value{text(n), boolean(k.DurableWrites), mapV(repl)})
	}
	return out
}

// userTables returns the schema's tables ordered by keyspace and name.
func (e *Executor) userTables() []coltype.TableDef {
	doc := e.b.Schema().Visible()
	out := make([]coltype.TableDef, 0, len(doc.Tables))
	for _, t := range doc.Tables {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Keyspace != out[j].Keyspace {
			return out[i].Keyspace < out[j].Keyspace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// tableUUID is a table's id as system_schema shows it: a name-based UUID of
// the cluster-wide table id, the same on every node.
func tableUUID(id uint64) [16]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], id)
	u := md5.Sum(append([]byte("idemkv table "), b[:]...))
	u[6] = u[6]&0x0f | 0x30
	u[8] = u[8]&0x3f | 0x80
	return u
}

// tableOption reads a stored option for a column of system_schema.tables,
// falling back to Cassandra's default.
func tableOption(def coltype.TableDef, name string, typ frame.DataType, dflt frame.Value) frame.Value {
	v, ok := def.Options[name]
	if !ok {
		return dflt
	}
	switch typ.ID {
	case frame.TypeDouble:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f64(f)
		}
	case frame.TypeInt:
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			return i32(int32(n))
		}
	case frame.TypeBoolean:
		if b, err := strconv.ParseBool(v); err == nil {
			return boolean(b)
		}
	case frame.TypeVarchar:
		return text(v)
	case frame.TypeMap:
		var m map[string]string
		if json.Unmarshal([]byte(v), &m) == nil {
			return mapV(m)
		}
	}
	return dflt
}

func (e *Executor) tableRows() [][]frame.Value {
	out := traceTableRows()
	for _, t := range e.userTables() {
		ext := map[string]string{}
		for _, name := range coltype.OptionNames() {
			if v, ok := t.Options[name]; ok {
				ext[ExtensionPrefix+name] = v
			}
		}
		opt := func(name string, typ frame.DataType, dflt frame.Value) frame.Value {
			return tableOption(t, name, typ, dflt)
		}
		out = append(out, []frame.Value{
			text(t.Keyspace), text(t.Name),
			opt("bloom_filter_fp_chance", doubleT, f64(0.01)),
			opt("caching", textMap, mapV(map[string]string{"keys": "ALL", "rows_per_partition": "NONE"})),
			opt("cdc", boolT, boolean(false)),
			opt("comment", textT, text("")),
			opt("compaction", textMap, mapV(map[string]string{"class": "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy", "max_threshold": "32", "min_threshold": "4"})),
			opt("compression", textMap, mapV(map[string]string{"chunk_length_in_kb": "64", "class": "org.apache.cassandra.io.compress.LZ4Compressor"})),
			opt("crc_check_chance", doubleT, f64(1)),
			opt("dclocal_read_repair_chance", doubleT, f64(0.1)),
			opt("default_time_to_live", intT, i32(0)),
			mapV(ext),
			textSetV([]string{"compound", "counter"}),
			opt("gc_grace_seconds", intT, i32(864000)),
			uuidV(tableUUID(t.ID)),
			opt("max_index_interval", intT, i32(2048)),
			opt("memtable_flush_period_in_ms", intT, i32(0)),
			opt("min_index_interval", intT, i32(128)),
			opt("read_repair_chance", doubleT, f64(0)),
			opt("speculative_retry", textT, text("99PERCENTILE")),
		})
	}
	return out
}

func (e *Executor) columnRows() [][]frame.Value {
	out := traceColumnRows()
	for _, t := range e.userTables() {
		info := newTableInfo(t)
		for _, c := range info.all() {
			kind, pos, order := "regular", int32(-1), "none"
			switch {
			case c.pkIndex >= 0:
				kind, pos = "partition_key", int32(c.pkIndex)
			case c.ckPos > 0:
				kind, pos, order = "clustering", int32(c.ckPos-1), "asc"
				if c.desc {
					order = "desc"
				}
			case c.static:
				kind = "static"
			}
			out = append(out, []frame.Value{
				text(t.Keyspace), text(t.Name), text(c.name), text(order),
				frame.Bytes([]byte(c.name)), text(kind), i32(pos), text(c.cqlType),
			})
		}
	}
	return out
}

// selectSystem answers a SELECT of a system table: rows filtered by
// equality (or IN lists) on any column, projected, counted and limited.
func (e *Executor) selectSystem(t *tableInfo, st *parse.Select, sel []selected, values []frame.Value, limit int) ([][]frame.Value, error) {
	type filter struct {
		idx  int
		want [][]byte
	}
	index := map[string]int{}
	for i, c := range t.sys.cols {
		index[c.name] = i
	}
	var filters []filter
	for _, r := range st.Where {
		c, err := t.column(r.Column)
		if err != nil {
			return nil, err
		}
		terms := []parse.Term{r.Value}
		switch {
		case r.Op == "IN" && r.InList:
			terms = r.In
		case r.Op == "IN":
			v, err := bind(r.Value, values, frame.ListOf(c.typ), c.name)
			if err != nil {
				return nil, err
			}
			elems, err := frame.DecodeList(v.Bytes)
			if err != nil {
				return nil, invalid("Invalid list value for IN on %s", c.name)
			}
			filters = append(filters, filter{idx: index[c.name], want: elems})
			continue
		case r.Op != "=":
			return nil, invalid("idemkv filters system tables by equality only (%s %s)", c.name, r.Op)
		}
		f := filter{idx: index[c.name]}
		for _, term := range terms {
			v, err := bind(term, values, c.typ, c.name)
			if err != nil {
				return nil, err
			}
			if v.Unset {
				return nil, invalid("Invalid unset value for column %s", c.name)
			}
			if v.Null {
				continue // = NULL matches nothing
			}
			f.want = append(f.want, v.Bytes)
		}
		filters = append(filters, f)
	}
	var out [][]frame.Value
	var count int64
	counting := len(sel) == 1 && sel[0].count
	rows := t.sys.rows
	for _, f := range filters {
		if f.idx == 0 && t.sys.byKey != nil {
			want := f.want
			rows = func() [][]frame.Value {
				var out [][]frame.Value
				for _, w := range want {
					out = append(out, t.sys.byKey(w)...)
				}
				return out
			}
			break
		}
	}
	for _, r := range rows() {
		match := true
		for _, f := range filters {
			ok := false
			for _, w := range f.want {
				ok = ok || (!r[f.idx].Null && bytes.Equal(r[f.idx].Bytes, w))
			}
			match = match && ok
		}
		if !match {
			continue
		}
		if counting {
			count++
			continue
		}
		if limit > 0 && len(out) >= limit {
			break
		}
		vals := make([]frame.Value, len(sel))
		for i, s := range sel {
			vals[i] = r[index[s.col.name]]
		}
		out = append(out, vals)
	}
	if counting {
		return [][]frame.Value{{frame.Bytes(frame.EncodeBigint(count))}}, nil
	}
	return out, nil
}
