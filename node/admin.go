package node

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkv/idemkv/admin"
	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/metrics"
	"github.com/idemkv/idemkv/replica"
	"github.com/idemkv/idemkv/ring"
)

// This file is the node's side of its admin endpoint (package admin): the
// metrics registry, the JSON API that nodetool calls, and Drain.

// AdminAddr is the address of the node's admin endpoint (metrics and
// nodetool), "" when it does not serve one.
func (n *Node) AdminAddr() string {
	if n.admin == nil {
		return ""
	}
	return n.admin.Addr()
}

// Metrics is the node's metrics registry and instruments.
func (n *Node) Metrics() *metrics.Metrics { return n.metrics }

// Drained reports whether the node was drained.
func (n *Node) Drained() bool { return n.drained.Load() }

// Drain prepares the node for a stop as nodetool drain does: it stops
// serving CQL (new connections are refused, open ones closed), flushes
// every table, then leaves the ring as Stop does (announces the shutdown,
// closes the peer transport, the coordinator and the hints, and marks the
// data directory clean). The admin endpoint keeps answering until Stop;
// the process should be stopped next. Draining twice is a no-op.
func (n *Node) Drain(ctx context.Context) error {
	n.drainMu.Lock()
	defer n.drainMu.Unlock()
	if n.drained.Load() {
		return nil
	}
	var errs []error
	if n.cql != nil {
		if err := n.cql.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: drain: close CQL: %w", err))
		}
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(append(errs, fmt.Errorf("node: drain: %w", err))...)
	}
	if err := n.replica.FlushAll(); err != nil {
		errs = append(errs, fmt.Errorf("node: drain: flush: %w", err))
	}
	n.drained.Store(true)
	if err := n.stop(); err != nil {
		errs = append(errs, fmt.Errorf("node: drain: stop: %w", err))
	}
	n.logger.Info("node drained")
	return errors.Join(errs...)
}

// closeAdmin stops the admin endpoint.
func (n *Node) closeAdmin() {
	n.adminOnce.Do(func() {
		if n.admin != nil {
			if err := n.admin.Close(); err != nil {
				n.logger.Warn("admin endpoint close", "err", err)
			}
		}
	})
}

// startAdmin serves the admin endpoint on admin_port of the listen
// address. A port that cannot be bound is logged and the node runs without
// the endpoint: the metrics and nodetool are not worth refusing to serve
// data for, and in-process nodes of tests and benches share hosts. A
// stepped node (Options.Stepped) serves none.
func (n *Node) startAdmin() {
	if n.cfg.AdminPort < 0 || n.stepped {
		return // a stepped node (tests) runs nothing the test does not drive
	}
	addr := net.JoinHostPort(n.cfg.ListenAddress, strconv.Itoa(n.cfg.AdminPort))
	srv, err := admin.Listen(addr, adminNode{n}, n.metrics.Handler(), n.logger, admin.Options{Profiling: n.cfg.AdminProfiling})
	if err != nil {
		n.logger.Error("admin endpoint (metrics, nodetool) not started: the node runs without it; set admin_port to a free port, or -1", "err", err)
		return
	}
	n.admin = srv
	n.logger.Info("admin endpoint up", "addr", srv.Addr())
}

// adminNode is the node as the admin endpoint and the metrics collector
// see it.
type adminNode struct{ n *Node }

var (
	_ admin.Node           = adminNode{}
	_ admin.Decommissioner = adminNode{}
	_ metrics.Source       = adminNode{}
)

func (a adminNode) Info() admin.Info {
	n := a.n
	self := n.gossip.Self()
	st := n.replica.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	pending := 0
	for _, c := range n.hints.Pending() {
		pending += c
	}
	mode := "NORMAL"
	switch self.Status {
	case gossip.StatusJoining:
		mode = "JOINING"
	case gossip.StatusLeaving:
		mode = "LEAVING"
	case gossip.StatusLeft:
		mode = "DECOMMISSIONED"
	}
	if n.drained.Load() && self.Status != gossip.StatusLeft {
		mode = "DRAINED"
	}
	return admin.Info{
		HostID: n.HostID(), Address: n.cfg.ListenAddress, PeerAddr: n.cfg.PeerAddr(), CQLAddr: n.cfg.CQLAddr(),
		AdminAddr: n.AdminAddr(), DC: n.cfg.DC, Rack: n.cfg.Rack, ClusterName: n.cfg.ClusterName,
		ReleaseVersion: ReleaseVersion, SchemaVersion: n.schema.Version(), Mode: mode,
		Gossip: !n.drained.Load() && !n.stepped, NativeProtocol: n.cql != nil && !n.drained.Load(),
		Tokens: len(self.Tokens), Generation: self.Generation,
		Started: n.started, UptimeSeconds: time.Since(n.started).Seconds(),
		LoadBytes: n.load(), HeapUsedBytes: ms.HeapAlloc, HeapSysBytes: ms.HeapSys,
		CounterCache:   counterCache(n.replica.CellCache().Stats()),
		CommitLogBytes: a.commitLogBytes(), HintsPending: pending, CorruptBlocks: st.CorruptBlocks,
		CQLConnections: n.CQLStats().ConnectionsOpen,
	}
}

// counterCache is the counter cache's line of nodetool info: the cell
// cache of every design (counter_cache_size_in_mb).
func counterCache(st cellcache.Stats) admin.Cache {
	return admin.Cache{Entries: st.Entries, SizeBytes: st.Cost, CapacityBytes: st.Bound, Pinned: st.Pinned,
		Hits: st.Hits, Misses: st.Misses, Evictions: st.Evictions}
}

func (a adminNode) commitLogBytes() int64 {
	if a.n.drained.Load() {
		return 0
	}
	var size int64
	for _, s := range a.n.replica.CommitLog().Segments() {
		size += s.Size
	}
	return size
}

func (a adminNode) Ring(keyspace string) ([]admin.Peer, error) {
	var eff map[string]float64
	if keyspace != "" {
		s, m, err := a.strategy(keyspace)
		if err != nil {
			return nil, err
		}
		eff = effectiveOwnership(s, m)
	}
	var out []admin.Peer
	for _, p := range a.n.Status() {
		host, _, err := net.SplitHostPort(p.Addr)
		if err != nil {
			host = p.Addr
		}
		out = append(out, admin.Peer{
			HostID: p.HostID, Address: host, Addr: p.Addr, CQLAddr: p.CQLAddr, DC: p.DC, Rack: p.Rack,
			Up: p.Up, Status: p.Status, Tokens: len(p.Tokens), Load: p.Load, Owns: p.Owns,
		})
		if eff != nil {
			out[len(out)-1].Owns = eff[p.HostID]
		}
	}
	slices.SortFunc(out, func(x, y admin.Peer) int {
		return cmp.Or(cmp.Compare(x.DC, y.DC), compareAddr(x.Address, y.Address), cmp.Compare(x.Addr, y.Addr))
	})
	return out, nil
}

// effectiveOwnership is, for each endpoint, the share of the token space
// whose data it holds under a replication strategy: the sizes of the
// ranges (prev, t] it replicates over 2^64 (nodetool status KEYSPACE's
// "Owns (effective)").
func effectiveOwnership(s ring.Strategy, m *ring.Metadata) map[string]float64 {
	own := map[string]float64{}
	toks := m.Ring()
	if len(toks) == 1 {
		for _, e := range s.Replicas(m, toks[0].Token) {
			own[e.ID] = 1
		}
		return own
	}
	const space = 1 << 64
	for i, t := range toks {
		prev := toks[(i+len(toks)-1)%len(toks)].Token
		size := float64(uint64(t.Token)-uint64(prev)) / space
		for _, e := range s.Replicas(m, t.Token) {
			own[e.ID] += size
		}
	}
	return own
}

// compareAddr orders IP addresses numerically (127.0.0.2 before 127.0.0.10).
func compareAddr(a, b string) int {
	ia, ea := netipParse(a)
	ib, eb := netipParse(b)
	if ea != nil || eb != nil {
		return cmp.Compare(a, b)
	}
	return slices.Compare(ia, ib)
}

func netipParse(s string) ([]byte, error) {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, fmt.Errorf("not an IP: %q", s)
	}
	return ip.To16(), nil
}

// tables lists the visible tables of a keyspace (all when "") and of a
// name (all when ""), sorted.
func (a adminNode) tables(keyspace, table string) ([]coltype.TableDef, error) {
	doc := a.n.schema.Visible()
	if keyspace != "" {
		if _, ok := doc.Keyspaces[keyspace]; !ok {
			return nil, fmt.Errorf("%w: keyspace %q", admin.ErrNotFound, keyspace)
		}
	} else if table != "" {
		return nil, fmt.Errorf("%w: a table needs its keyspace", admin.ErrBadRequest)
	}
	var out []coltype.TableDef
	for _, t := range doc.Tables {
		if (keyspace == "" || t.Keyspace == keyspace) && (table == "" || t.Name == table) {
			out = append(out, t)
		}
	}
	if table != "" && len(out) == 0 {
		return nil, fmt.Errorf("%w: table %s.%s", admin.ErrNotFound, keyspace, table)
	}
	slices.SortFunc(out, func(x, y coltype.TableDef) int {
		return cmp.Or(cmp.Compare(x.Keyspace, y.Keyspace), cmp.Compare(x.Name, y.Name))
	})
	return out, nil
}

func (a adminNode) TableStats(keyspace, table string) ([]admin.TableStats, error) {
	if a.n.drained.Load() {
		return nil, admin.ErrDrained
	}
	defs, err := a.tables(keyspace, table)
	if err != nil {
		return nil, err
	}
	out := []admin.TableStats{}
	for _, d := range defs {
		st, err := a.n.replica.TableStats(d.ID)
		if err != nil {
			continue // created in the schema, not yet on this replica
		}
		ts := admin.TableStats{
			Keyspace: d.Keyspace, Table: d.Name, ID: d.ID, SSTables: st.SSTables, SSTableBytes: st.SSTableBytes,
			SSTableRows: st.SSTableRows, MemtableBytes: st.MemtableBytes, MemtableRows: st.MemtableRows,
		}
		for _, b := range st.SSTableBytes {
			ts.SpaceUsedLive += b
		}
		if dir, err := a.n.replica.TableDir(d.ID); err == nil {
			ts.SpaceUsedTotal = dirSize(a.n.fsys, dir)
		}
		for _, c := range d.Columns {
			cs, ok := st.Columns[c.Name]
			if !ok {
				continue
			}
			col := admin.ColumnStats{Name: c.Name, Type: cs.Type, Design: cs.Design}
			if cs.Dedup != nil {
				col.Dedup = &admin.Dedup{Dismissed: cs.Dedup.Dismissed, Applied: cs.Dedup.Applied, NoOpID: cs.Dedup.NoOpID,
					BitsInUse: cs.Dedup.BitsInUse, EstimatedFPP: cs.Dedup.EstimatedFPP}
			}
			ts.Columns = append(ts.Columns, col)
		}
		out = append(out, ts)
	}
	return out, nil
}

// endpoints turns ring endpoints into the admin endpoint's replicas.
func (a adminNode) endpoints(eps []ring.Endpoint) []admin.Endpoint {
	out := make([]admin.Endpoint, 0, len(eps))
	for _, e := range eps {
		x := admin.Endpoint{HostID: e.ID, DC: e.DC, Rack: e.Rack}
		if p, ok := a.n.gossip.Node(e.ID); ok {
			x.Address, _, _ = net.SplitHostPort(string(p.Addr))
			x.CQLAddr = p.CQLAddr
		}
		out = append(out, x)
	}
	return out
}

func (a adminNode) strategy(keyspace string) (ring.Strategy, *ring.Metadata, error) {
	if keyspace == "" {
		return nil, nil, fmt.Errorf("%w: keyspace is required", admin.ErrBadRequest)
	}
	k, ok := a.n.schema.Visible().Keyspaces[keyspace]
	if !ok {
		return nil, nil, fmt.Errorf("%w: keyspace %q", admin.ErrNotFound, keyspace)
	}
	s, err := ring.ParseStrategy(k.Class, k.Options)
	if err != nil {
		return nil, nil, fmt.Errorf("node: keyspace %s: %w", keyspace, err)
	}
	m := a.n.ClusterMetadata()
	if m == nil || m.Len() == 0 {
		return nil, nil, errors.New("node: no token map yet")
	}
	return s, m, nil
}

func (a adminNode) DescribeRing(keyspace string) (admin.Ring, error) {
	s, m, err := a.strategy(keyspace)
	if err != nil {
		return admin.Ring{}, err
	}
	toks := m.Ring()
	out := admin.Ring{SchemaVersion: a.n.schema.Version()}
	for i, t := range toks {
		prev := toks[(i+len(toks)-1)%len(toks)].Token
		out.Ranges = append(out.Ranges, admin.TokenRange{Start: prev, End: t.Token, Endpoints: a.endpoints(s.Replicas(m, t.Token))})
	}
	return out, nil
}

func (a adminNode) Endpoints(keyspace, table, key string) ([]admin.Endpoint, error) {
	if table == "" {
		return nil, fmt.Errorf("%w: table is required", admin.ErrBadRequest)
	}
	s, m, err := a.strategy(keyspace)
	if err != nil {
		return nil, err
	}
	d, ok := a.n.schema.Table(keyspace, table)
	if !ok {
		return nil, fmt.Errorf("%w: table %s.%s", admin.ErrNotFound, keyspace, table)
	}
	k, err := partitionKey(d.PartitionKey, key)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %w", admin.ErrBadRequest, key, err)
	}
	return a.endpoints(s.Replicas(m, ring.Token(k))), nil
}

func (a adminNode) forTables(keyspace, table string, f func(id uint64) error) error {
	if a.n.drained.Load() {
		return admin.ErrDrained
	}
	defs, err := a.tables(keyspace, table)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range defs {
		if err := f(d.ID); err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", d.Keyspace, d.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (a adminNode) Flush(_ context.Context, keyspace, table string) error {
	return a.forTables(keyspace, table, a.n.replica.Flush)
}

func (a adminNode) Compact(_ context.Context, keyspace, table string) error {
	return a.forTables(keyspace, table, func(id uint64) error { return a.n.replica.Compact(id, true) })
}

func (a adminNode) Drain(ctx context.Context) error { return a.n.Drain(ctx) }

// Decommission implements admin.Decommissioner; a refusal is a bad request.
func (a adminNode) Decommission(ctx context.Context) error {
	err := a.n.Decommission(ctx)
	if errors.Is(err, ErrDecommissionRefused) {
		return fmt.Errorf("%w: %w", admin.ErrBadRequest, err)
	}
	return err
}

// MetricsSnapshot implements metrics.Source.
func (a adminNode) MetricsSnapshot() metrics.Snapshot {
	n := a.n
	s := metrics.Snapshot{
		Coordinator: n.coord.Stats(), Replica: n.replica.Stats(), CQL: n.CQLStats(),
		CounterCacheEntries: n.replica.CacheSize(), HintsPending: map[string]int{},
		Caches: map[string]cellcache.Stats{"counter": n.replica.CellCache().Stats()},
		Dedup:  map[string]coltype.DedupStats{}, Design: map[string]map[string]float64{},
		Drained: n.drained.Load(), CommitLogBytes: a.commitLogBytes(),
	}
	for t, c := range n.hints.Pending() {
		s.HintsPending[t] = c
	}
	s.HintsStored, s.HintsDelivered = n.hints.Counts()
	s.HintsExpired = n.hints.Expired()
	st := n.StreamStats()
	s.StreamIn = metrics.Stream{Ranges: st.RangesIn, Rows: st.RowsIn, Cells: st.CellsIn, Bytes: st.BytesIn}
	s.StreamOut = metrics.Stream{Ranges: st.RangesOut, Rows: st.RowsOut, Cells: st.CellsOut, Bytes: st.BytesOut}
	for _, p := range n.gossip.Nodes() {
		s.Nodes = append(s.Nodes, metrics.Node{HostID: p.HostID, Addr: string(p.Addr), DC: p.DC, Rack: p.Rack, Status: string(p.Status), Up: p.Up})
	}
	if n.drained.Load() {
		return s
	}
	for _, d := range n.schema.Visible().Tables {
		st, err := n.replica.TableStats(d.ID)
		if err != nil {
			continue
		}
		t := metrics.Table{Keyspace: d.Keyspace, Name: d.Name, SSTables: st.SSTables, MemtableBytes: st.MemtableBytes}
		for _, b := range st.SSTableBytes {
			t.SSTableBytes += b
		}
		s.Tables = append(s.Tables, t)
		for _, c := range st.Columns {
			addColumn(&s, c)
		}
	}
	return s
}

// addColumn sums a column's statistics into its design's.
func addColumn(s *metrics.Snapshot, c replica.ColumnStats) {
	if c.Dedup != nil {
		d := s.Dedup[c.Type]
		d.Dismissed += c.Dedup.Dismissed
		d.Applied += c.Dedup.Applied
		d.NoOpID += c.Dedup.NoOpID
		d.BitsInUse += c.Dedup.BitsInUse
		d.EstimatedFPP = max(d.EstimatedFPP, c.Dedup.EstimatedFPP)
		s.Dedup[c.Type] = d
	}
	if len(c.Design) > 0 {
		m := s.Design[c.Type]
		if m == nil {
			m = map[string]float64{}
			s.Design[c.Type] = m
		}
		for k, v := range c.Design {
			m[k] += v
		}
	}
}

// partitionKey serializes a partition key given as text, as nodetool
// getendpoints takes it: one value per partition key column, separated by
// ':' for a composite key.
func partitionKey(cols []coltype.ColumnDef, key string) ([]byte, error) {
	if len(cols) <= 1 {
		typ := "text"
		if len(cols) == 1 {
			typ = cols[0].Type
		}
		return keyValue(typ, key)
	}
	parts := strings.Split(key, ":")
	if len(parts) != len(cols) {
		return nil, fmt.Errorf("the partition key has %d columns: give %d values separated by ':'", len(cols), len(cols))
	}
	var out []byte
	for i, c := range cols {
		v, err := keyValue(c.Type, parts[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(v)))
		out = append(out, v...)
		out = append(out, 0)
	}
	return out, nil
}

// keyValue serializes one value of a CQL type from its text form.
func keyValue(typ, s string) ([]byte, error) {
	intOf := func(bits int) (int64, error) {
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("not a %s: %w", typ, err)
		}
		return v, nil
	}
	switch strings.ToLower(typ) {
	case "text", "varchar", "ascii":
		return []byte(s), nil
	case "blob":
		b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"))
		if err != nil {
			return nil, fmt.Errorf("not a blob (hex): %w", err)
		}
		return b, nil
	case "bigint", "counter", "timestamp":
		v, err := intOf(64)
		return binary.BigEndian.AppendUint64(nil, uint64(v)), err
	case "int":
		v, err := intOf(32)
		return binary.BigEndian.AppendUint32(nil, uint32(v)), err
	case "smallint":
		v, err := intOf(16)
		return binary.BigEndian.AppendUint16(nil, uint16(v)), err
	case "tinyint":
		v, err := intOf(8)
		return []byte{byte(v)}, err
	case "boolean":
		v, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("not a boolean: %w", err)
		}
		if v {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case "uuid", "timeuuid":
		b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
		if err != nil || len(b) != 16 {
			return nil, fmt.Errorf("not a %s", typ)
		}
		return b, nil
	}
	return nil, fmt.Errorf("keys of type %s are not supported by getendpoints", typ)
}

// lazySource is the metrics' source before the node exists: the registry
// is made before the storage it times, and no scrape happens before the
// admin endpoint starts, after the node is set.
type lazySource struct{ n *Node }

func (s *lazySource) MetricsSnapshot() metrics.Snapshot {
	if s.n == nil {
		return metrics.Snapshot{}
	}
	return adminNode{s.n}.MetricsSnapshot()
}
