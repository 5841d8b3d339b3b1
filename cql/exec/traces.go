package exec

import (
	"crypto/md5"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/trace"
)

// The keyspace system_traces, as Cassandra 4's TraceKeyspace defines it
// (SimpleStrategy, replication factor 2; here held in memory on the
// coordinator only, see package cql/trace).
const tracesKeyspace = "system_traces"

// Its tables' columns in Cassandra's order: partition key, clustering,
// then the others by name.
var (
	traceSessionsCols = cols("session_id", uuidT, "client", inetT, "command", textT, "coordinator", inetT,
		"coordinator_port", intT, "duration", intT, "parameters", textMap, "request", textT, "started_at", tsT)
	traceEventsCols = cols("session_id", uuidT, "event_id", frame.TimeUUID, "activity", textT, "source", inetT,
		"source_elapsed", intT, "source_port", intT, "thread", textT)
)

// traceTables are system_traces' tables: name, comment, columns, and how
// many leading columns form the partition key and the clustering.
var traceTables = []struct {
	name, comment string
	cols          []sysCol
	pk, ck        int
}{
	{"events", "tracing events", traceEventsCols, 1, 1},
	{"sessions", "tracing sessions", traceSessionsCols, 1, 0},
}

// systemTableID is Cassandra's TableId.forSystemTable: the name-based UUID
// of the keyspace's and the table's names.
func systemTableID(ks, table string) [16]byte {
	u := md5.Sum([]byte(ks + table))
	u[6] = u[6]&0x0f | 0x30
	u[8] = u[8]&0x3f | 0x80
	return u
}

func micros32(v int64) int32 {
	if v > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(v)
}

func timestampV(ms int64) frame.Value { return frame.Bytes(frame.EncodeBigint(ms)) }

func sessionRow(s trace.Snapshot) []frame.Value {
	dur := frame.Null
	if s.Duration >= 0 {
		dur = i32(micros32(s.Duration))
	}
	return []frame.Value{uuidV(s.ID), inet(s.Client), text(s.Command), inet(s.Coordinator),
		i32(int32(s.CoordinatorPort)), dur, mapV(s.Parameters), text(s.Request), timestampV(s.Started.UnixMilli())}
}

func eventRows(s trace.Snapshot) [][]frame.Value {
	out := make([][]frame.Value, 0, len(s.Events))
	for _, ev := range s.Events {
		out = append(out, []frame.Value{uuidV(s.ID), frame.Bytes(frame.EncodeUUID(ev.ID)), text(ev.Activity),
			inet(ev.Source), i32(micros32(ev.Elapsed)), i32(int32(ev.SourcePort)), text(ev.Thread)})
	}
	return out
}

// traceTable returns system_traces.sessions or .events, or nil.
func (e *Executor) traceTable(name string) *sysTable {
	lookup := func(key []byte) (trace.Snapshot, bool) {
		if len(key) != 16 {
			return trace.Snapshot{}, false
		}
		return e.traces.Get([16]byte(key))
	}
	switch name {
	case "sessions":
		return &sysTable{keyspace: tracesKeyspace, name: name, cols: traceSessionsCols, pk: 1,
			rows: func() [][]frame.Value {
				var out [][]frame.Value
				for _, s := range e.traces.All() {
					out = append(out, sessionRow(s))
				}
				return out
			},
			byKey: func(key []byte) [][]frame.Value {
				if s, ok := lookup(key); ok {
					return [][]frame.Value{sessionRow(s)}
				}
				return nil
			}}
	case "events":
		return &sysTable{keyspace: tracesKeyspace, name: name, cols: traceEventsCols, pk: 1, ck: 1,
			rows: func() [][]frame.Value {
				var out [][]frame.Value
				for _, s := range e.traces.All() {
					out = append(out, eventRows(s)...)
				}
				return out
			},
			byKey: func(key []byte) [][]frame.Value {
				if s, ok := lookup(key); ok {
					return eventRows(s)
				}
				return nil
			}}
	}
	return nil
}

// traceTableRows are system_schema.tables' rows of system_traces, with
// Cassandra's options for them (gc_grace_seconds 0, a memtable flush
// period of an hour).
func traceTableRows() [][]frame.Value {
	var out [][]frame.Value
	for _, t := range traceTables {
		out = append(out, []frame.Value{
			text(tracesKeyspace), text(t.name), f64(0.01),
			mapV(map[string]string{"keys": "ALL", "rows_per_partition": "NONE"}), boolean(false), text(t.comment),
			mapV(map[string]string{"class": "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy", "max_threshold": "32", "min_threshold": "4"}),
			mapV(map[string]string{"chunk_length_in_kb": "64", "class": "org.apache.cassandra.io.compress.LZ4Compressor"}),
			f64(1), f64(0), i32(0), mapV(nil), textSetV([]string{"compound"}), i32(0),
			uuidV(systemTableID(tracesKeyspace, t.name)), i32(2048), i32(3600000), i32(128), f64(0),
			text("99PERCENTILE"),
		})
	}
	return out
}

// traceColumnRows are system_schema.columns' rows of system_traces.
func traceColumnRows() [][]frame.Value {
	var out [][]frame.Value
	for _, t := range traceTables {
		for i, c := range t.cols {
			kind, pos, order := "regular", int32(-1), "none"
			switch {
			case i < t.pk:
				kind, pos = "partition_key", int32(i)
			case i < t.pk+t.ck:
				kind, pos, order = "clustering", int32(i-t.pk), "asc"
			}
			out = append(out, []frame.Value{
				text(tracesKeyspace), text(t.name), text(c.name), text(order),
				frame.Bytes([]byte(c.name)), text(kind), i32(pos), text(cqlTypeName(c.typ)),
			})
		}
	}
	return out
}
