package exec

import (
	"context"
	"crypto/sha256"
	"encoding/binary"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
	"github.com/idemkv/idemkv/schema"
)

// TRUNCATE empties a table on every replica. idemkv has no request that
// reaches every node apart from the schema, so TRUNCATE is a schema change:
// in one change of the schema document (a CRDT that every node merges, the
// nodes down at the time included when they come back), the table's id is
// dropped and the same definition is created under a new id. Each replica
// applies it as DROP TABLE of the old id (its data, files and commit-log
// records are discarded for good) and CREATE TABLE of the new, empty one.
// Statements name tables, not ids, so clients see the same table, empty.
//
// The new id is derived from the old one, so that two nodes truncating the
// same table at once make the same new table rather than two of one name.
// A concurrent ALTER TABLE of the old id is lost; writes in flight to the
// old id fail as writes to a dropped table.

// truncatedID is the id a table gets when the table of id old is truncated.
func truncatedID(old uint64) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], old)
	for salt := byte(0); ; salt++ {
		s := sha256.Sum256(append([]byte("idemkv truncate\x00"+string(salt)), b[:]...))
		if id := binary.BigEndian.Uint64(s[:8]); id != 0 && id != old {
			return id
		}
	}
}

func (e *Executor) truncate(ctx context.Context, sessionKS string, st *parse.Truncate) (frame.Result, error) {
	ks, err := e.tableKeyspace(sessionKS, st.Table)
	if err != nil {
		return nil, err
	}
	def, ok := e.b.Schema().Table(ks, st.Table.Name)
	if !ok {
		if _, ok := e.b.Schema().Visible().Keyspaces[ks]; !ok {
			return nil, invalid("Keyspace %s does not exist", ks)
		}
		return nil, invalid("table %s does not exist", st.Table.Name)
	}
	next := def
	next.ID = truncatedID(def.ID)
	d := schema.Doc{
		Tables:        map[uint64]coltype.TableDef{next.ID: next},
		DroppedTables: map[uint64]bool{def.ID: true},
	}
	if _, err := e.b.Schema().Merge(d); err != nil {
		return nil, frame.Errorf(frame.ErrServer, "truncate %s.%s: %s", ks, def.Name, err.Error())
	}
	e.waitAgreement(ctx)
	return frame.VoidResult{}, nil
}
