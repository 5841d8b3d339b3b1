package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"net"
	"strconv"
	"strings"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql/exec"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/schema"
)

// backend is the node as the CQL executor sees it (exec.Backend).
type backend struct{ n *Node }

var (
	_ exec.Backend      = backend{}
	_ exec.RangeScanner = backend{}
)

func (b backend) Schema() *schema.Schema { return b.n.schema }

func (b backend) WaitSchemaAgreement(ctx context.Context) error { return b.n.WaitSchemaAgreement(ctx) }

func (b backend) NewTableID() uint64 {
	var x [8]byte
	for {
		_, _ = rand.Read(x[:])
		if id := binary.BigEndian.Uint64(x[:]); id != 0 {
			return id
		}
	}
}

func (b backend) CounterWrite(ctx context.Context, u coltype.Update, cl coordinator.ConsistencyLevel) error {
	return b.n.coord.CounterWrite(ctx, u, cl)
}

func (b backend) Exchange(ctx context.Context, table uint64, key []byte, column string, payload []byte, cl coordinator.ConsistencyLevel) ([]byte, error) {
	return b.n.coord.Exchange(ctx, table, key, column, payload, cl)
}

func (b backend) CoordinatedWrite(ctx context.Context, table uint64, key []byte, column string, delta int64) error {
	return b.n.coord.CoordinatedWrite(ctx, table, key, column, delta)
}

func (b backend) Read(ctx context.Context, table uint64, key []byte, cl coordinator.ConsistencyLevel) (row.Row, bool, error) {
	return b.n.coord.Read(ctx, table, key, cl)
}

func (b backend) Scan(ctx context.Context, table uint64, after *row.Key, limit int, cl coordinator.ConsistencyLevel) ([]row.Row, error) {
	return b.n.coord.Scan(ctx, table, after, limit, cl)
}

func (b backend) ScanRange(ctx context.Context, table uint64, after *row.Key, end int64, limit int, cl coordinator.ConsistencyLevel) ([]row.Row, error) {
	return b.n.coord.ScanRange(ctx, table, after, end, limit, cl)
}

func (b backend) Delete(ctx context.Context, table uint64, key []byte, columns []string, cl coordinator.ConsistencyLevel) error {
	if len(columns) == 0 {
		t, ok := b.n.schema.Doc().Tables[table]
		if !ok {
			return &coordinator.InvalidError{Msg: "unknown table"}
		}
		for _, c := range t.Columns {
			columns = append(columns, c.Name)
		}
	}
	return b.n.coord.Delete(ctx, table, key, columns, cl)
}

func (b backend) WriteCells(ctx context.Context, table uint64, key []byte, cells []row.Cell, cl coordinator.ConsistencyLevel) error {
	return b.n.coord.WriteCells(ctx, table, key, cells, cl)
}

func (b backend) CellValue(table uint64, c row.Cell) (int64, error) {
	return b.n.replica.CellValue(table, c)
}

func (b backend) Local() exec.NodeInfo {
	cfg := b.n.cfg
	info := exec.NodeInfo{
		IP: net.ParseIP(cfg.ListenAddress), NativePort: cfg.NativeTransportPort,
		DC: cfg.DC, Rack: cfg.Rack, Tokens: b.n.gossip.Self().Tokens,
		ReleaseVersion: ReleaseVersion, ClusterName: cfg.ClusterName, Up: true,
	}
	info.HostID = b.n.replica.HostID()
	info.SchemaVersion = parseUUID(b.n.schema.Version())
	return info
}

func (b backend) Peers() []exec.NodeInfo {
	var out []exec.NodeInfo
	self := b.n.HostID()
	for _, p := range b.n.gossip.Nodes() {
		if p.HostID == self {
			continue
		}
		host, port, err := net.SplitHostPort(p.CQLAddr)
		if err != nil {
			host, _, _ = net.SplitHostPort(string(p.Addr))
			port = strconv.Itoa(b.n.cfg.NativeTransportPort)
		}
		np, _ := strconv.Atoi(port)
		var id [16]byte
		if raw, err := hex.DecodeString(p.HostID); err == nil && len(raw) == 16 {
			copy(id[:], raw)
		}
		out = append(out, exec.NodeInfo{
			HostID: id, IP: net.ParseIP(host), NativePort: np, DC: p.DC, Rack: p.Rack,
			Tokens: p.Tokens, SchemaVersion: parseUUID(p.SchemaVersion), ReleaseVersion: p.ReleaseVersion,
			ClusterName: b.n.cfg.ClusterName, Up: p.Up,
		})
	}
	return out
}

// parseUUID reads a UUID's 16 bytes from its text form (zero if malformed).
func parseUUID(s string) [16]byte {
	var out [16]byte
	raw, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err == nil && len(raw) == 16 {
		copy(out[:], raw)
	}
	return out
}
