package exec

import (
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

// alterColumns checks ALTER TABLE ... ADD / DROP as Cassandra does (an
// existing column, a non-counter column in a counter table, an unknown
// column, a key column), then refuses the change itself: a replica keeps
// a table's column set fixed (replica.AlterTable refuses a change of
// columns: the cells of a dropped column would need dropping in reads and
// compactions, and re-adding one is refused by Cassandra for counters).
func alterColumns(ks string, def coltype.TableDef, st *parse.AlterTable) (frame.Result, error) {
	t := newTableInfo(def)
	for _, c := range st.Add {
		if _, ok := t.cols[c.Name]; ok {
			return nil, invalid("Column with name '%s' already exists", c.Name)
		}
		if name, _ := counterTypeName(c.Type); name == "" {
			if len(c.Type.Params) == 0 && !cqlNativeTypes[c.Type.Name] {
				return nil, invalid("Unknown type %s.%s", ks, c.Type.Name)
			}
			return nil, frame.Errorf(frame.ErrConfig, "%s.%s: Cannot have a non counter column (\"%s\") in a counter table", ks, def.Name, c.Name)
		}
		if c.Static {
			return nil, invalid("Static columns are only useful (and thus allowed) if the table has at least one clustering column")
		}
	}
	for _, n := range st.Drop {
		c, ok := t.cols[n]
		if !ok {
			return nil, invalid("Column %s was not found in table %s.%s", n, ks, def.Name)
		}
		if c.pkIndex >= 0 {
			return nil, invalid("Cannot drop PRIMARY KEY column %s", n)
		}
	}
	return nil, invalid("idemkv does not add or drop columns of an existing table (ALTER TABLE ... ADD/DROP): its replicas keep a table's columns fixed")
}
