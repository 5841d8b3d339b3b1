package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/node"
	"github.com/idemkv/idemkv/schema"
)

// startAdminRing runs n nodes on 127.0.0.1..n with peer port p, CQL p+1
// and admin p+2, and returns p.
func startAdminRing(t *testing.T, n int) (int, []*node.Node) {
	t.Helper()
	rng := testseed.Rand(t)
	port := 0
	for try := 0; try < 50 && port == 0; try++ {
		p := 20000 + rng.IntN(30000)
		var ls []net.Listener
		ok := true
		for i := 1; i <= n && ok; i++ {
			for _, q := range []int{p, p + 1, p + 2} {
				l, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i), strconv.Itoa(q)))
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
			port = p
		}
	}
	if port == 0 {
		t.Fatal("no free ports")
	}
	dir := t.TempDir()
	var nodes []*node.Node
	for i := 1; i <= n; i++ {
		nd, err := node.Start(node.Config{
			DataDirectory: filepath.Join(dir, fmt.Sprintf("node%d", i)),
			ListenAddress: fmt.Sprintf("127.0.0.%d", i),
			StoragePort:   port, NativeTransportPort: port + 1, AdminPort: port + 2,
			Seeds:     []string{fmt.Sprintf("127.0.0.1:%d", port)},
			NumTokens: 4, GossipIntervalMS: 100, PhiConvictThreshold: 12,
		}, node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: uint64(i)})
		if err != nil {
			t.Fatalf("start node %d: %v", i, err)
		}
		nodes = append(nodes, nd)
		t.Cleanup(func() { nd.Stop() })
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		up := 0
		for _, p := range nodes[0].Gossip().Nodes() {
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
	return port, nodes
}

func TestNodetool(t *testing.T) {
	port, nodes := startAdminRing(t, 3)
	c := gocql.NewCluster("127.0.0.1")
	c.Port = port + 1
	c.Timeout = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
		"CREATE TABLE ks.t (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}",
		"UPDATE ks.t SET c = c + 1 WHERE k = 'a'",
		"UPDATE ks.t SET c = c + 1 WHERE k = 'b'",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	nt := func(host string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"nodetool", "--host", host, "--port", strconv.Itoa(port + 2)}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := nt("127.0.0.2", "status")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	t.Logf("nodetool status:\n%s", out)
	line := regexp.MustCompile(`(?m)^UN  127\.0\.0\.[123]  +\S+ (bytes|KiB|MiB)  +4  +\d+\.\d%  +[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}  rack1$`)
	if n := len(line.FindAllString(out, -1)); n != 3 || !strings.HasPrefix(out, "Datacenter: datacenter1\n=======================\nStatus=Up/Down\n") {
		t.Errorf("status: %d UN lines:\n%s", n, out)
	}

	// With a keyspace, Owns is effective: with RF 2 the shares sum to 200%.
	code, out, errOut = nt("127.0.0.1", "status", "ks")
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^UN  .*  (\d+\.\d)%  `).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	if code != 0 || !strings.Contains(out, "Owns (effective)") || sum < 199.8 || sum > 200.2 {
		t.Errorf("status ks: %d %s (effective shares sum to %.1f%%)\n%s", code, errOut, sum, out)
	}

	code, out, errOut = nt("127.0.0.1", "getendpoints", "ks", "t", "a")
	eps := strings.Fields(out)
	if code != 0 || len(eps) != 2 || eps[0] == eps[1] {
		t.Errorf("getendpoints: %d %q %s", code, out, errOut)
	}
	// The replicas the node names are those holding the key's cell.
	for _, ep := range eps {
		i, _ := strconv.Atoi(strings.TrimPrefix(ep, "127.0.0."))
		if i < 1 || i > 3 {
			t.Fatalf("getendpoints: %q", ep)
		}
	}

	// tablestats on a replica of 'a' and 'b', flush, tablestats again.
	host := eps[0]
	code, out, errOut = nt(host, "tablestats", "ks.t")
	if code != 0 || !strings.Contains(out, "Total number of tables: 1\n") || !strings.Contains(out, "Keyspace : ks\n\t\tTable: t\n\t\tSSTable count: 0\n") ||
		!strings.Contains(out, "\t\tColumn c: counter\n\t\t\tFilter bits in use: ") || !strings.Contains(out, "Filter false positive estimate: ") {
		t.Errorf("tablestats: %d %s\n%s", code, errOut, out)
	}
	// Load counts the tables on disk, as Cassandra's: not the commit log,
	// whose mapped segment is preallocated to 32 MiB.
	loadRE := regexp.MustCompile(`(?m)^Load                   : (\d+(\.\d+)?) (bytes|KiB|MiB|GiB)$`)
	load := func(when string) float64 {
		_, out, _ := nt(host, "info")
		m := loadRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("info %s: no Load line:\n%s", when, out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v * map[string]float64{"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[3]]
	}
	before := load("before the flush")
	if before >= 1<<20 {
		t.Errorf("Load before any flush is %.0f bytes: it counts the commit log", before)
	}
	if code, _, errOut = nt(host, "flush", "ks", "t"); code != 0 {
		t.Fatalf("flush: %d %s", code, errOut)
	}
	if after := load("after the flush"); after <= before {
		t.Errorf("Load %.0f bytes after the flush, %.0f before: the SSTable is not counted", after, before)
	}
	_, out, _ = nt(host, "tablestats", "ks")
	t.Logf("nodetool tablestats ks:\n%s", out)
	if !strings.Contains(out, "\t\tSSTable count: 1\n") {
		t.Errorf("tablestats after flush:\n%s", out)
	}
	if code, out, _ = nt("127.0.0.1", "describering", "ks"); code != 0 || strings.Count(out, "\tTokenRange(start_token:") != 12 {
		t.Errorf("describering: %d\n%s", code, out)
	}
	if code, out, _ = nt("127.0.0.3", "info"); code != 0 || !strings.Contains(out, "ID                     : ") || !strings.Contains(out, "Native Transport active: true\n") {
		t.Errorf("info: %d\n%s", code, out)
	}
	// The counter cache line of every node: the two FBF updates' leaders
	// looked their shards up in it.
	cacheRE := regexp.MustCompile(`(?m)^Counter Cache          : entries (\d+), size \d+(\.\d+)? (bytes|KiB|MiB), capacity (\d+\.\d+ (KiB|MiB|GiB)|unbounded), (\d+) hits, (\d+) requests, (NaN|\d\.\d{3}) recent hit rate, \d+ evictions, \d+ pinned$`)
	entries, requests := 0, 0
	for _, h := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		_, out, _ = nt(h, "info")
		if h == "127.0.0.1" {
			t.Logf("nodetool info:\n%s", out)
		}
		m := cacheRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("info on %s: no counter cache line as Cassandra's:\n%s", h, out)
		}
		e, _ := strconv.Atoi(m[1])
		r, _ := strconv.Atoi(m[7])
		entries, requests = entries+e, requests+r
	}
	if entries < 2 || requests < 2 {
		t.Errorf("counter cache over the ring: %d entries, %d requests after two FBF updates of two keys; want at least 2 of each", entries, requests)
	}

	// Errors: an unknown table, bad arguments, an unreachable node.
	if code, _, errOut = nt("127.0.0.1", "flush", "ks", "nope"); code != 1 || !strings.Contains(errOut, "not found: table ks.nope") {
		t.Errorf("flush of an unknown table: %d %q", code, errOut)
	}
	if code, _, errOut = nt("127.0.0.1", "getendpoints", "ks"); code != 1 || !strings.Contains(errOut, "usage: idemkv nodetool [--host HOST] [--port PORT] getendpoints KEYSPACE TABLE KEY") {
		t.Errorf("getendpoints with one argument: %d %q", code, errOut)
	}
	if code, _, errOut = nt("127.0.0.1", "status", "-h"); code != 0 || !strings.Contains(errOut, "usage: idemkv nodetool") {
		t.Errorf("status -h: %d %q", code, errOut)
	}
	if err := nodes[2].Stop(); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut = nt("127.0.0.3", "status"); code != 1 || !strings.Contains(errOut, "idemkv nodetool: cannot reach the admin endpoint of 127.0.0.3:") {
		t.Errorf("status of a stopped node: %d %q", code, errOut)
	}
}

func TestNodetoolHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"nodetool", "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "  getendpoints  ") {
		t.Errorf("nodetool -h: %d %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"nodetool", "nope"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), `unknown command "nope"`) {
		t.Errorf("nodetool nope: %d %q", code, errOut.String())
	}
}

// TestNodetoolDecommission: nodetool decommission removes a node of 3 from
// a ring at RF 2 (the others stop listing it), and is refused, with
// Cassandra's message, on a node of the 2 left.
func TestNodetoolDecommission(t *testing.T) {
	port, nodes := startAdminRing(t, 3)
	if err := nodes[0].Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "2"}}, false); err != nil {
		t.Fatal(err)
	}
	nt := func(host string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"nodetool", "--host", host, "--port", strconv.Itoa(port + 2)}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	for deadline := time.Now().Add(10 * time.Second); nodes[2].Schema().Version() != nodes[0].Schema().Version(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no schema agreement")
		}
	}
	if code, out, errOut := nt("127.0.0.3", "decommission"); code != 0 {
		t.Fatalf("decommission: %d %s %s", code, out, errOut)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, out, _ := nt("127.0.0.1", "status")
		if strings.Count(out, "UN  ") == 2 && !strings.Contains(out, "127.0.0.3") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after the decommission:\n%s", out)
		}
	}
	if _, out, _ := nt("127.0.0.3", "info"); !strings.Contains(out, "DECOMMISSIONED") {
		t.Errorf("info of the decommissioned node:\n%s", out)
	}
	code, _, errOut := nt("127.0.0.2", "decommission")
	if code != 1 || !strings.Contains(errOut, "Not enough live nodes to maintain replication factor in keyspace ks (RF = 2, N = 2)") {
		t.Fatalf("decommission below RF: %d %q", code, errOut)
	}
}
