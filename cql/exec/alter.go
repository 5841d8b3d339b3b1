package exec

import (
	"context"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// cqlNativeTypes are CQL's native types: ALTER TABLE ... ADD of one of
// them to a counter table is Cassandra's ConfigurationException, of an
// unknown name its "Unknown type".
var cqlNativeTypes = map[string]bool{
	"ascii": true, "bigint": true, "blob": true, "boolean": true, "date": true, "decimal": true,
	"double": true, "duration": true, "float": true, "inet": true, "int": true, "smallint": true,
	"text": true, "time": true, "timestamp": true, "timeuuid": true, "tinyint": true, "uuid": true,
	"varchar": true, "varint": true, "list": true, "set": true, "map": true, "frozen": true,
	"tuple": true, "vector": true,
}

// alterColumns runs ALTER TABLE ... ADD / DROP with Cassandra's checks
// (an existing column, a column of the other kind, an unknown column, a
// key column, a counter column added again after its drop) and messages.
// A dropped column's cells stay until compaction; a column added again
// under a dropped name shows none written before its drop.
func (e *Executor) alterColumns(ctx context.Context, ks string, def coltype.TableDef, st *parse.AlterTable) (frame.Result, error) {
	t := newTableInfo(def)
	next := def
	next.Columns = append([]coltype.ColumnDef(nil), def.Columns...)
	next.Dropped = append([]coltype.DroppedColumn(nil), def.Dropped...)
	for _, c := range st.Add {
		if _, ok := t.cols[c.Name]; ok {
			return nil, invalid("Column with name '%s' already exists", c.Name)
		}
		if c.Static && len(def.Clustering) == 0 {
			return nil, invalid("Static columns are only useful (and thus allowed) if the table has at least one clustering column")
		}
		name, bad := counterTypeName(c.Type)
		if bad != nil {
			return nil, bad
		}
		switch {
		case name != "" && t.regularTable:
			return nil, frame.Errorf(frame.ErrConfig, "Cannot add a counter column (%s) in a non counter column family", c.Name)
		case name == "" && !t.regularTable:
			if len(c.Type.Params) == 0 && !cqlNativeTypes[c.Type.Name] {
				return nil, invalid("Unknown type %s.%s", ks, c.Type.Name)
			}
			return nil, frame.Errorf(frame.ErrConfig, "%s.%s: Cannot have a non counter column (\"%s\") in a counter table", ks, def.Name, c.Name)
		case name != "":
			for _, d := range def.Dropped {
				if d.Name == c.Name {
					return nil, invalid("Cannot re-add previously dropped counter column %s", c.Name)
				}
			}
			if t, ok := coltype.Lookup(name); ok && len(def.Clustering) > 0 {
				if _, per := t.(coltype.Clustered); !per {
					return nil, invalid("idemkv does not serve %s columns in tables with clustering columns (%s): the design keeps its state per partition", name, c.Name)
				}
			}
			next.Columns = append(next.Columns, coltype.ColumnDef{Name: c.Name, Type: name, Static: c.Static})
		default:
			_, text, _, err := regularType(ks, c.Type)
			if err != nil {
				return nil, err
			}
			for _, d := range def.Dropped {
				if d.Name == c.Name && d.CQL != text {
					return nil, invalid("Cannot re-add previously dropped column '%s' of type %s, incompatible with previous type %s", c.Name, text, d.CQL)
				}
			}
			next.Columns = append(next.Columns, coltype.ColumnDef{Name: c.Name, Type: coltype.RegularType, CQL: text, Static: c.Static})
		}
	}
	now := e.opts.Now().UnixMicro()
	for _, n := range st.Drop {
		c, ok := t.cols[n]
		if !ok {
			return nil, invalid("Column %s was not found in table %s.%s", n, ks, def.Name)
		}
		if c.isKey() {
			return nil, invalid("Cannot drop PRIMARY KEY column %s", n)
		}
		var cd coltype.ColumnDef
		kept := next.Columns[:0]
		for _, x := range next.Columns {
			if x.Name == n {
				cd = x
				continue
			}
			kept = append(kept, x)
		}
		next.Columns = kept
		dropped := next.Dropped[:0]
		for _, x := range next.Dropped {
			if x.Name != n {
				dropped = append(dropped, x)
			}
		}
		next.Dropped = append(dropped, coltype.DroppedColumn{ColumnDef: cd, DroppedAt: now})
	}
	if len(next.Columns) == 0 && !t.regularTable {
		return nil, invalid("Cannot drop the last counter column of %s.%s", ks, def.Name)
	}
	if err := e.b.Schema().AlterTable(next); err != nil {
		return nil, frame.Errorf(frame.ErrConfig, "%s", err.Error())
	}
	e.waitAgreement(ctx)
	return frame.SchemaChangeResult{Change: "UPDATED", Target: "TABLE", Keyspace: ks, Name: def.Name}, nil
}
