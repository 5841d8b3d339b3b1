package coltype

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"

	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// ColumnDef is one non-key column of a table.
type ColumnDef struct {
	Name string `json:"name"`
	Type string `json:"type"` // a registered column type: "counter"
	// Desc marks a clustering column in descending order (CLUSTERING
	// ORDER BY ... DESC).
	Desc bool `json:"desc,omitempty"`
	// CQL is a regular column's CQL type ("text", "map<text, int>",
	// "frozen<list<int>>"); empty for a counter column, whose CQL type its
	// design gives.
	CQL string `json:"cql,omitempty"`
	// Static marks a static column of a table with clustering columns:
	// one value per partition, its cells named by row.StaticPrefix.
	Static bool `json:"static,omitempty"`
}

// HasRegularColumns reports whether a table holds regular (non-counter)
// columns, or only its primary key: a table of CQL rows with row markers.
func (d TableDef) HasRegularColumns() bool {
	if len(d.Columns) == 0 {
		return true
	}
	for _, c := range d.Columns {
		if c.Type == RegularType {
			return true
		}
	}
	return false
}

// TableDef describes a table. Partition keys are opaque serialized bytes at
// this level; the CQL layer owns their types.
type TableDef struct {
	ID       uint64      `json:"id"`
	Keyspace string      `json:"keyspace"`
	Name     string      `json:"name"`
	Columns  []ColumnDef `json:"columns"`
	// PartitionKey lists the key's columns with their CQL types ("text",
	// "int", ...). The replica stores keys as opaque serialized bytes and
	// keeps this only for the CQL layer.
	PartitionKey []ColumnDef `json:"partition_key,omitempty"`
	// Clustering lists the clustering columns with their CQL types and
	// orders: a partition then holds many CQL rows, whose cells carry
	// composite names (row.AppendComponent). Empty: one row per partition,
	// cells named by their column.
	Clustering []ColumnDef `json:"clustering,omitempty"`
	// Dropped are the columns ALTER TABLE ... DROP removed, each with the
	// time of its drop (the latest, for a name dropped more than once):
	// the replica keeps merging their cells, and a column added again
	// under the name shows none written before the drop.
	Dropped []DroppedColumn `json:"dropped_columns,omitempty"`
	// Options are the table's options as CQL sets them (e.g. the
	// idempotence map of FBF counters, JSON-encoded under "idempotence").
	Options map[string]string `json:"options,omitempty"`
	// Revision counts the ALTERs of the table; the newest definition wins
	// when nodes exchange schemas.
	Revision uint64 `json:"revision,omitempty"`
	// KeyspaceGeneration is the generation of the keyspace incarnation
	// the table was created in (see package schema): a keyspace dropped
	// and created again under its name does not hold the old one's tables.
	KeyspaceGeneration uint64 `json:"keyspace_generation,omitempty"`
}

// Validate checks a definition against the registered column types and
// table options (see Register and RegisterOption).
func (d TableDef) Validate() error {
	if d.ID == 0 {
		return errors.New("table id 0 is reserved")
	}
	if d.Keyspace == "" || d.Name == "" {
		return fmt.Errorf("table %d: keyspace and name are required", d.ID)
	}
	if len(d.Columns) == 0 && len(d.PartitionKey) == 0 {
		return fmt.Errorf("table %s.%s: no columns", d.Keyspace, d.Name)
	}
	seen := map[string]bool{}
	for _, c := range d.Columns {
		if c.Name == "" {
			return fmt.Errorf("table %s.%s: a column has no name", d.Keyspace, d.Name)
		}
		if seen[c.Name] {
			return fmt.Errorf("table %s.%s: column %q defined twice", d.Keyspace, d.Name, c.Name)
		}
		seen[c.Name] = true
		if _, ok := TypeOf(c); !ok {
			return fmt.Errorf("table %s.%s: column %q has unknown type %q", d.Keyspace, d.Name, c.Name, c.Type)
		}
	}
	for name, o := range registeredOptions() {
		if v, ok := d.Options[name]; ok && v != "" {
			if err := o.Check(d, v); err != nil {
				return fmt.Errorf("table %s.%s: %w", d.Keyspace, d.Name, err)
			}
		}
	}
	return nil
}

// DroppedColumn is a column ALTER TABLE ... DROP removed.
type DroppedColumn struct {
	ColumnDef
	DroppedAt int64 `json:"dropped_at"` // microseconds since the epoch
}

// ClusteringDesc lists the orders of the clustering columns (true:
// descending), as row.ClusteringPrefix takes them; nil without clustering.
func (d TableDef) ClusteringDesc() []bool {
	if len(d.Clustering) == 0 {
		return nil
	}
	out := make([]bool, len(d.Clustering))
	for i, c := range d.Clustering {
		out[i] = c.Desc
	}
	return out
}

// Column returns the definition of a named column.
func (d TableDef) Column(name string) (ColumnDef, bool) {
	for _, c := range d.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return ColumnDef{}, false
}

// Update is a client's change to one counter cell, as the leader receives it.
type Update struct {
	Table     uint64
	Key       []byte // serialized partition key
	Column    string
	Delta     int64
	Timestamp int64 // microseconds; 0 means now

	// The operation id, when the client sent one (FBF counters use it).
	HasOp  bool
	OpID   [16]byte
	OpTime int64 // unix nanoseconds

	// Delete makes the update a DELETE of the cell (Delta is unused): the
	// coordinator leads the deletions of a Deleter type's columns through
	// the counter write path, and the leader calls the type's Delete.
	Delete bool
	// Context is what the client observed, for a Delete (Deletion.Context).
	Context []byte
	// Element names one counter of a cell that holds a map of counters
	// (coltype.CounterMap): the key the increment adds to, or the key a
	// Delete removes. "" for a cell of one counter, or a Delete of the
	// whole map.
	Element string

	// Replicas are the key's natural replicas (host ids, ring order), set
	// by the coordinator on the leader before it applies the update, for
	// types that address each replica themselves (a per-replica outbox);
	// nil when the update is applied outside the coordinator.
	Replicas []counters.ID
	// Pending are the key's pending replicas (a node joining the ring, or
	// the new owner of a leaving node's range), set with Replicas: the
	// leader sends them its replication too, and a type that addresses
	// replicas itself addresses them as well (see Joinable).
	Pending []counters.ID
}

// RowKey is the update's partition as the storage engine keys it.
func (u Update) RowKey() row.Key { return row.Key{Token: ring.Token(u.Key), Partition: u.Key} }

// Mutation returns the mutation that carries value as the update's cell,
// with the update's op id.
func (u Update) Mutation(value []byte) Mutation {
	return Mutation{
		Table: u.Table, Key: u.Key,
		Cell:  row.Cell{Column: u.Column, Value: value, Timestamp: u.Timestamp},
		HasOp: u.HasOp, OpID: u.OpID, OpTime: u.OpTime,
	}
}

// Mutation is the state a leader sends to the other replicas: for counters,
// the leader's new shard, never the delta, so that applying it again is
// harmless.
type Mutation struct {
	Table  uint64
	Key    []byte
	Cell   row.Cell
	HasOp  bool
	OpID   [16]byte
	OpTime int64
	// Dismissed is set by Apply when the leader recognised the operation
	// as a retry of one it has seen (an FBF column): nothing was applied.
	// Cell is then the leader's current copy of the cell (empty Value if it
	// holds none), which the coordinator re-sends to the other replicas so
	// that the retry is answered only when the consistency level is met.
	Dismissed bool

	// Log is what a leader logs with its own record (commitlog.Record's
	// Led, Delta, Compensation). A leader's replication of an update with
	// an op id it counted carries Led and Delta to the other replicas, so
	// that one that counted the same op as leader can tell (package
	// coordinator, conflict.go); a replica never logs them as its own.
	Log LeaderLog

	// Acked, when a leader's type sets it, is called by the coordinator
	// with a replica's host id once that replica has acknowledged the
	// leader's replication of this mutation (not for hints). Neither
	// logged nor replicated. A reset_counter trims its outbox to the
	// replica with it instead of waiting for the next anti-entropy round.
	Acked func(replica counters.ID)

	// Supersedes, when a type sets it on a mutation it writes through
	// Leader.Write, is the value of the stored cell (Leader.Cell) that
	// Cell was computed from under the cell's lock, and the type's Merge
	// of that value with Cell gives Cell (a join-semilattice type whose
	// new state joined the old one). A memtable cell holding exactly that
	// value is then replaced without a Merge; any other is merged as
	// usual. Neither logged nor replicated.
	Supersedes []byte
}

// LeaderLog is the part of a leader's commit-log record that only the
// leader keeps: what an op-id-deduplicating type needs to take an update
// back after an unclean restart (see the Deduplicator capability).
type LeaderLog struct {
	// Led: this node led the update (logged only with an op id).
	Led bool
	// Delta is the delta the update added.
	Delta int64
	// Compensation: the record takes back an update this node led.
	Compensation bool
	// Carried are the earlier updates of the same shard whose deltas the
	// record's shard holds but whose own records were not written yet
	// (commitlog.Record.Carried; only with Led). Logged, not replicated.
	Carried []commitlog.CarriedOp
	// Placed, when set, is set once the record has its place in the commit
	// log, before the write waits for its sync (commitlog.Log.AppendPlaced).
	// Neither logged nor replicated.
	Placed *atomic.Bool
}

// RowKey is the mutation's partition as the storage engine keys it.
func (m Mutation) RowKey() row.Key { return row.Key{Token: ring.Token(m.Key), Partition: m.Key} }

// ColumnID names one column of one table, and the cells of it that a design
// keeping state per cell (handoff, borrow, reset) names: by partition key
// and cell name, the column's own or, in a table with clustering columns, a
// composite one (one cell per CQL row).
type ColumnID struct {
	Table  uint64
	Column string
}

// CellName is a cell's name: the column's when name is empty.
func (c ColumnID) CellName(name string) string {
	if name == "" {
		return c.Column
	}
	return name
}

// CellKey is the cell's CellKey.
func (c ColumnID) CellKey(key []byte, name string) string { return CellKey(key, name, c.Column) }

// CellRef references the cell. The reference owns a copy of key: the
// designs keep references in sets that outlive the request (cells to
// synchronise, cells holding notices), and a key slice of a request's frame
// or of a storage block would keep the whole frame or block alive.
func (c ColumnID) CellRef(key []byte, name string) CellRef {
	return CellRef{Table: c.Table, Key: bytes.Clone(key), Column: c.CellName(name)}
}

// CellKey names one cell of a column for a design's per-cell maps and
// caches: the partition key alone when the cell is named by the column
// (name is column, or empty), else the key's length (uvarint), the key
// and the cell's name (a composite name of a table with clustering
// columns). Two cells of one column never share a CellKey.
func CellKey(key []byte, name, column string) string {
	if name == column || name == "" {
		return string(key)
	}
	b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(key)+len(name)), uint64(len(key)))
	return string(append(append(b, key...), name...))
}
