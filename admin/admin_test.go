package admin_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/admin"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/node"
)

// testRing is n nodes in the test's process on 127.0.0.1..n, on real
// sockets: peer port p, CQL p+1, admin p+2.
type testRing struct {
	t     *testing.T
	port  int
	nodes []*node.Node
}

// freePort finds a port p with p, p+1 and p+2 free on 127.0.0.1..n.
func freePort(t *testing.T, n int) int {
	t.Helper()
	rng := testseed.Rand(t)
	for try := 0; try < 50; try++ {
		p := 20000 + rng.IntN(30000)
		var ls []net.Listener
		ok := true
		for i := 1; i <= n && ok; i++ {
			for _, port := range []int{p, p + 1, p + 2} {
				l, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i), strconv.Itoa(port)))
				if err != nil {
					ok = false
					break
				}
				ls = append(ls, l)
			}
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free ports")
	return 0
}

func startRing(t *testing.T, n int) *testRing {
	t.Helper()
	r := &testRing{t: t, port: freePort(t, n)}
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := 1; i <= n; i++ {
		nd, err := node.Start(node.Config{
			DataDirectory: filepath.Join(dir, fmt.Sprintf("node%d", i)),
			ListenAddress: fmt.Sprintf("127.0.0.%d", i),
			StoragePort:   r.port, NativeTransportPort: r.port + 1, AdminPort: r.port + 2,
			Seeds:     []string{fmt.Sprintf("127.0.0.1:%d", r.port)},
			NumTokens: 8, GossipIntervalMS: 100, PhiConvictThreshold: 12,
			CommitLogSync: "batch", CounterWriteTimeoutMS: 3000,
		}, node.Options{Logger: logger, Seed: uint64(i)})
		if err != nil {
			t.Fatalf("start node %d: %v", i, err)
		}
		r.nodes = append(r.nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range r.nodes {
			nd.Stop()
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		up := 0
		for _, p := range r.nodes[0].Gossip().Nodes() {
			if p.Up {
				up++
			}
		}
		if up == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ring not up")
		}
	}
	return r
}

func (r *testRing) session() *gocql.Session {
	r.t.Helper()
	c := gocql.NewCluster("127.0.0.1")
	c.Port = r.port + 1
	c.Timeout = 10 * time.Second
	c.ConnectTimeout = 5 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		r.t.Fatalf("gocql session: %v", err)
	}
	r.t.Cleanup(s.Close)
	return s
}

func (r *testRing) client(i int) *admin.Client {
	return &admin.Client{Addr: r.nodes[i-1].AdminAddr()}
}

func exec(t *testing.T, s *gocql.Session, stmt string, values ...any) {
	t.Helper()
	if err := s.Query(stmt, values...).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// scrape reads a node's /metrics as series → value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func setup(t *testing.T) (*testRing, *gocql.Session) {
	r := startRing(t, 3)
	s := r.session()
	exec(t, s, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
	exec(t, s, "CREATE TABLE ks.plain (k text PRIMARY KEY, c counter)")
	exec(t, s, "CREATE TABLE ks.fbf (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}")
	exec(t, s, "CREATE TABLE ks.h (k text PRIMARY KEY, c handoff_counter)")
	return r, s
}

func TestMetricsAfterCounterWrites(t *testing.T) {
	r, s := setup(t)
	addr := r.nodes[0].AdminAddr()
	if addr != fmt.Sprintf("127.0.0.1:%d", r.port+2) {
		t.Fatalf("admin address %q", addr)
	}
	// Every series a test asserts on below exists at the first scrape.
	before := scrape(t, addr)
	writes := `idemkv_client_request_latency_seconds_count{consistency="ONE",operation="counter_write"}`
	plain := `idemkv_counter_writes_total{design="counter",result="ok"}`
	// Scrapes while the writes run (as during a bench) see consistent
	// snapshots (the race detector checks the collectors).
	done := make(chan struct{})
	var werr error
	go func() {
		defer close(done)
		for k := 0; k < 20 && werr == nil; k++ {
			for _, tbl := range []string{"plain", "fbf", "h"} {
				if err := s.Query("UPDATE ks."+tbl+" SET c = c + 1 WHERE k = ?", fmt.Sprint("k", k%4)).Exec(); err != nil {
					werr = fmt.Errorf("update ks.%s: %w", tbl, err)
				}
			}
		}
	}()
	for scrapes := 0; ; scrapes++ {
		select {
		case <-done:
		default:
			scrape(t, r.nodes[scrapes%3].AdminAddr())
			continue
		}
		break
	}
	if werr != nil {
		t.Fatal(werr)
	}
	var total, handoff float64
	for _, nd := range r.nodes {
		m := scrape(t, nd.AdminAddr())
		total += m[plain]
		handoff += m[`idemkv_counter_writes_total{design="handoff_counter",result="ok"}`]
		for _, series := range []string{
			`idemkv_gossip_nodes{state="up"}`,
			`idemkv_dedup_estimated_fpp{design="counter"}`,
			`idemkv_dedup_filter_bits_in_use{design="counter"}`,
			`idemkv_dedup_dismissed_total{design="counter"}`,
			`idemkv_coordinator_retries_dismissed_total`,
			`idemkv_table_sstables{keyspace="ks",table="fbf"}`,
			`idemkv_table_memtable_bytes{keyspace="ks",table="plain"}`,
			`idemkv_hints_stored_total`,
			`idemkv_cql_connections`,
			`idemkv_cql_connections_refused_total`,
			`idemkv_commitlog_sync_latency_seconds_count`,
			`idemkv_design_stat{design="handoff_counter",stat="Writes"}`,
			`go_goroutines`,
		} {
			if _, ok := m[series]; !ok {
				t.Errorf("node %s: no series %s", nd.Config().ListenAddress, series)
			}
		}
		if m[`idemkv_gossip_nodes{state="up"}`] != 3 {
			t.Errorf("node %s sees %v nodes up", nd.Config().ListenAddress, m[`idemkv_gossip_nodes{state="up"}`])
		}
		if m[`idemkv_commitlog_sync_latency_seconds_count`] == 0 {
			t.Errorf("node %s: no commit-log sync timed (batch mode)", nd.Config().ListenAddress)
		}
	}
	// The counter cache (counter_cache_size_in_mb): every write this ring
	// led looked its cell up in its leader's cache (60 writes, of 12
	// cells), and the cells are cached.
	var cacheReq, cacheEntries float64
	for _, nd := range r.nodes {
		m := scrape(t, nd.AdminAddr())
		for _, series := range []string{"entries", "size_bytes", "capacity_bytes", "pinned_entries", "hits_total", "misses_total", "evictions_total"} {
			if _, ok := m[`idemkv_cache_`+series+`{cache="counter"}`]; !ok {
				t.Errorf("node %s: no series idemkv_cache_%s{cache=\"counter\"}", nd.Config().ListenAddress, series)
			}
		}
		if m[`idemkv_cache_capacity_bytes{cache="counter"}`] <= 0 {
			t.Errorf("node %s: counter cache capacity %v, want counter_cache_size_in_mb's default", nd.Config().ListenAddress, m[`idemkv_cache_capacity_bytes{cache="counter"}`])
		}
		if e, sz := m[`idemkv_cache_entries{cache="counter"}`], m[`idemkv_cache_size_bytes{cache="counter"}`]; e > 0 && sz < e*160 {
			t.Errorf("node %s: %v counter cache entries of %v bytes in all", nd.Config().ListenAddress, e, sz)
		}
		cacheReq += m[`idemkv_cache_hits_total{cache="counter"}`] + m[`idemkv_cache_misses_total{cache="counter"}`]
		cacheEntries += m[`idemkv_cache_entries{cache="counter"}`]
	}
	if cacheReq < 60 || cacheEntries < 12 {
		t.Errorf("counter cache over the ring: %v lookups, %v entries after 60 led writes on 12 cells; want at least 60 and 12", cacheReq, cacheEntries)
	}
	if handoff != 20 {
		t.Errorf("counter writes of design handoff_counter, summed over the ring: %v, want 20", handoff)
	}
	if total != 40 {
		// gocql routes each statement to any node: the sum over the
		// ring is every write, both tables' columns being "counter".
		t.Errorf("counter writes of design counter, summed over the ring: %v, want 40", total)
	}
	after := scrape(t, addr)
	if !(after[writes] > before[writes]) && total == 0 {
		t.Errorf("%s did not increase: %v → %v", writes, before[writes], after[writes])
	}
	if after[`idemkv_cql_request_latency_seconds_count{message="query",statement="create"}`]+
		after[`idemkv_cql_request_latency_seconds_count{message="prepare",statement="update"}`]+
		after[`idemkv_cql_request_latency_seconds_count{message="execute",statement="update"}`] == 0 {
		t.Errorf("no CQL request of node 1 timed")
	}
}

func TestFlushCompactTableStats(t *testing.T) {
	r, s := setup(t)
	ctx := context.Background()
	for k := 0; k < 10; k++ {
		exec(t, s, "UPDATE ks.fbf SET c = c + 1 WHERE k = ?", fmt.Sprint("k", k))
	}
	c := r.client(1)
	st, err := c.TableStats(ctx, "ks", "fbf")
	if err != nil || len(st) != 1 {
		t.Fatalf("tablestats: %v %v", st, err)
	}
	n0 := st[0].SSTables
	if st[0].MemtableBytes == 0 || len(st[0].Columns) != 1 || st[0].Columns[0].Dedup == nil || st[0].Columns[0].Type != "counter" {
		t.Fatalf("tablestats before the flush: %+v", st[0])
	}
	if err := c.Flush(ctx, "ks", "fbf"); err != nil {
		t.Fatal(err)
	}
	st, err = c.TableStats(ctx, "ks", "fbf")
	if err != nil || st[0].SSTables != n0+1 || st[0].MemtableBytes != 0 || st[0].SpaceUsedLive == 0 || st[0].SpaceUsedTotal == 0 {
		t.Fatalf("tablestats after the flush (%d SSTables before): %+v %v", n0, st, err)
	}
	exec(t, s, "UPDATE ks.fbf SET c = c + 1 WHERE k = 'x'")
	if err := c.Flush(ctx, "ks", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(ctx, "ks", "fbf"); err != nil {
		t.Fatal(err)
	}
	if st, err = c.TableStats(ctx, "ks", "fbf"); err != nil || st[0].SSTables != 1 {
		t.Fatalf("after a major compaction: %+v %v", st, err)
	}
	// The mutating calls answer POST only; unknown tables are 404.
	resp, err := http.Get("http://" + r.nodes[0].AdminAddr() + "/api/v1/flush")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/v1/flush: %s", resp.Status)
	}
	var se *admin.StatusError
	if err := c.Flush(ctx, "ks", "nope"); !errors.As(err, &se) || se.Code != http.StatusNotFound {
		t.Errorf("flush of an unknown table: %v", err)
	}
	eps, err := c.Endpoints(ctx, "ks", "fbf", "k1")
	if err != nil || len(eps) != 3 {
		t.Errorf("getendpoints: %v %v", eps, err)
	}
	ring, err := c.DescribeRing(ctx, "ks")
	if err != nil || len(ring.Ranges) != 24 || len(ring.Ranges[0].Endpoints) != 3 {
		t.Errorf("describering: %d ranges, %v", len(ring.Ranges), err)
	}
	peers, err := c.Status(ctx, "")
	if err != nil || len(peers) != 3 || peers[0].Address != "127.0.0.1" || !peers[2].Up || peers[1].Tokens != 8 {
		t.Errorf("status: %+v %v", peers, err)
	}
}

func TestDrainRefusesCQL(t *testing.T) {
	r, s := setup(t)
	ctx := context.Background()
	exec(t, s, "UPDATE ks.plain SET c = c + 1 WHERE k = 'a'")
	c := r.client(2)
	if err := c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	cqlAddr := r.nodes[1].Config().CQLAddr()
	if conn, err := net.DialTimeout("tcp", cqlAddr, 5*time.Second); err == nil {
		conn.Close()
		t.Errorf("a drained node accepts CQL connections on %s", cqlAddr)
	}
	info, err := c.Info(ctx)
	if err != nil || info.Mode != "DRAINED" || info.NativeProtocol || info.Gossip {
		t.Errorf("info after drain: %+v %v", info, err)
	}
	m := scrape(t, r.nodes[1].AdminAddr())
	if m["idemkv_node_drained"] != 1 {
		t.Errorf("idemkv_node_drained %v", m["idemkv_node_drained"])
	}
	var se *admin.StatusError
	if err := c.Flush(ctx, "", ""); !errors.As(err, &se) || se.Code != http.StatusConflict {
		t.Errorf("flush after drain: %v", err)
	}
	if err := c.Drain(ctx); err != nil {
		t.Errorf("second drain: %v", err)
	}
	// The other nodes see it leave.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, ok := r.nodes[0].Gossip().Node(r.nodes[1].HostID())
		if ok && !p.Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node 1 still sees the drained node up")
		}
	}
	if err := r.nodes[1].Stop(); err != nil {
		t.Errorf("stop after drain: %v", err)
	}
	var ue *admin.UnreachableError
	if _, err := c.Info(ctx); !errors.As(err, &ue) {
		t.Errorf("info of a stopped node: %v", err)
	}
}

// TestProfiling: the runtime's profiles are served under /debug/pprof/ only
// when Options.Profiling is set.
func TestProfiling(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv, err := admin.Listen("127.0.0.1:0", nil, nil, slog.Default(), admin.Options{Profiling: on})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + srv.Addr() + "/debug/pprof/heap?debug=1")
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "heap profile")
		if served != on {
			t.Fatalf("profiling %v: GET /debug/pprof/heap answered %d (%.60q)", on, resp.StatusCode, body)
		}
	}
}
