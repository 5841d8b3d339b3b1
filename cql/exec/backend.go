package exec

import (
	"context"
	"net"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/schema"
)

// Backend is what the executor needs of its node: the cluster schema, the
// coordinator's writes, reads and scans, and the ring's membership for the
// system tables. The node implements it; tests may use a fake.
type Backend interface {
	// Schema is the node's view of the cluster schema. DDL goes through it
	// and reaches the other nodes by the node's schema propagation.
	Schema() *schema.Schema
	// WaitSchemaAgreement waits until every live node has this node's
	// schema version (or ctx ends).
	WaitSchemaAgreement(ctx context.Context) error
	// NewTableID returns a fresh cluster-wide table id.
	NewTableID() uint64

	// CounterWrite coordinates one counter update (coordinator semantics
	// and typed errors: *coordinator.UnavailableError, *WriteTimeoutError,
	// *InvalidError).
	CounterWrite(ctx context.Context, u coltype.Update, cl coordinator.ConsistencyLevel) error
	// Exchange coordinates a client's exchange of a cell whose type is a
	// coltype.Exchanger: payload is the value of the custom payload the
	// type names, the answer goes back under the same key. The column type
	// decides how it is served (coordinator.Exchange: its own
	// coordinator-side logic when it is coltype.Coordinated, else the
	// payload goes unchanged to the replicas); cl is used by the payloads
	// sent to every replica.
	Exchange(ctx context.Context, table uint64, key []byte, column string, payload []byte, cl coordinator.ConsistencyLevel) ([]byte, error)
	// CoordinatedWrite adds delta to a cell whose type is
	// coltype.Coordinated for a client that sent no payload (a plain
	// driver UPDATE): the type's coordinator-side logic serves it (handoff
	// counters act as a tier-1 participant for the request, at-least-once
	// with retries).
	CoordinatedWrite(ctx context.Context, table uint64, key []byte, column string, delta int64) error
	// Read coordinates the read of one partition.
	Read(ctx context.Context, table uint64, key []byte, cl coordinator.ConsistencyLevel) (row.Row, bool, error)
	// Scan coordinates a range read: up to limit partitions in token order
	// after the key after (exclusive; nil for the first page).
	Scan(ctx context.Context, table uint64, after *row.Key, limit int, cl coordinator.ConsistencyLevel) ([]row.Row, error)
	// Delete coordinates the deletion of a partition's counter cells (all
	// of the table's columns when columns is empty): tombstones written to
	// every replica, acknowledged at cl. A deleted counter stays deleted.
	Delete(ctx context.Context, table uint64, key []byte, columns []string, cl coordinator.ConsistencyLevel) error
	// WriteCells writes cells of a partition of a regular table as they
	// are (last-write-wins, coltype.Regular) to every replica, acknowledged
	// at cl.
	WriteCells(ctx context.Context, table uint64, key []byte, cells []row.Cell, cl coordinator.ConsistencyLevel) error
	// CellValue decodes a counter cell's value by its column type.
	CellValue(table uint64, c row.Cell) (int64, error)

	// Local describes this node (system.local); Peers the others (system.peers).
	Local() NodeInfo
	Peers() []NodeInfo
}

// RangeScanner is a Backend that can stop a scan at a token (inclusive):
// Scan, for the partitions whose token is at most end. A SELECT with a
// token() upper bound uses it when the backend has it, and otherwise scans
// on and stops at the first partition past the bound.
type RangeScanner interface {
	ScanRange(ctx context.Context, table uint64, after *row.Key, end int64, limit int, cl coordinator.ConsistencyLevel) ([]row.Row, error)
}

// NodeInfo is one node as the system tables show it.
type NodeInfo struct {
	HostID         [16]byte // a UUID
	IP             net.IP   // rpc_address, broadcast_address, listen_address, peer
	NativePort     int
	DC, Rack       string
	Tokens         []int64
	SchemaVersion  [16]byte // a UUID
	ReleaseVersion string
	ClusterName    string
	Up             bool
}
