package diff

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/node"
)

var (
	peerFlag   = flag.String("peer", "", "a live Cassandra node's CQL address (host or host:port): run the corpus against it instead of idemkv and compare with the golden file, or re-record it with -record")
	recordFlag = flag.Bool("record", false, "with -peer: write the live node's answers into the golden file")
	dumpFlag   = flag.String("dump", "", "write idemkv's answers, in the golden file's format, to this file (to read them beside Cassandra's)")
	serverFlag = flag.String("server", "Apache Cassandra 5.0.9, 1 node (idemkv peer cassandra up -n 1)", "with -record: what answered, for the golden file's header")
)

const (
	goldenPath      = "testdata/cassandra-5.0.9.json"
	differencesPath = "testdata/differences.txt"
)

func cluster(host string, port int) *gocql.ClusterConfig {
	c := gocql.NewCluster(host)
	c.Port = port
	c.ProtoVersion = 4
	c.Timeout = 20 * time.Second
	c.ConnectTimeout = 10 * time.Second
	c.Consistency = gocql.One
	c.NumConns = 1
	return c
}

func session(t *testing.T, c *gocql.ClusterConfig) *gocql.Session {
	t.Helper()
	s, err := c.CreateSession()
	if err != nil {
		t.Fatalf("gocql session: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// startIdemkv starts a one-node idemkv ring in the test's process (one
// node, as the golden answers come from one Cassandra node) and returns
// its CQL port on 127.0.0.1.
func startIdemkv(t *testing.T) int {
	t.Helper()
	rng := testseed.Rand(t)
	port, err := bench.FreePort(1, rng)
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.Config{
		DataDirectory: filepath.Join(t.TempDir(), "node1"),
		ListenAddress: "127.0.0.1",
		StoragePort:   port, NativeTransportPort: port + 1,
		Seeds:            []string{fmt.Sprintf("127.0.0.1:%d", port)},
		NumTokens:        8,
		GossipIntervalMS: 100, PhiConvictThreshold: 12,
		CounterWriteTimeoutMS: 2000,
	}
	nd, err := node.Start(cfg, node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: rng.Uint64()})
	if err != nil {
		t.Fatalf("start idemkv: %v", err)
	}
	t.Cleanup(func() { _ = nd.Stop() })
	return port + 1
}

// TestDifferential runs the corpus against an in-process idemkv node and
// compares its answers with Cassandra's golden ones under
// testdata/differences.txt. With -peer it runs against a live Cassandra
// node instead and compares exactly (no differences apply); with -peer
// and -record it rewrites the golden file from that node.
func TestDifferential(t *testing.T) {
	golden, err := ReadGolden(goldenPath)
	if err != nil && !*recordFlag && *dumpFlag == "" {
		t.Fatal(err)
	}
	if *peerFlag != "" {
		host, port := *peerFlag, 9042
		if h, p, err := net.SplitHostPort(*peerFlag); err == nil {
			host = h
			if port, err = strconv.Atoi(p); err != nil {
				t.Fatalf("-peer %s: %v", *peerFlag, err)
			}
		}
		got := Run(session(t, cluster(host, port)), Corpus)
		if *recordFlag {
			if err := WriteGolden(goldenPath, NewGolden(*serverFlag, Corpus, got)); err != nil {
				t.Fatal(err)
			}
			t.Logf("recorded %d answers from %s into %s", len(got), *peerFlag, goldenPath)
			return
		}
		report(t, Compare(Corpus, got, golden, nil))
		return
	}
	if *recordFlag {
		t.Fatal("-record needs -peer")
	}
	diffs, err := ReadDifferences(differencesPath)
	if err != nil {
		t.Fatal(err)
	}
	got := Run(session(t, cluster("127.0.0.1", startIdemkv(t))), Corpus)
	if *dumpFlag != "" {
		if err := WriteGolden(*dumpFlag, NewGolden("idemkv, 1 in-process node", Corpus, got)); err != nil {
			t.Fatal(err)
		}
	}
	report(t, Compare(Corpus, got, golden, diffs))
}

// TestDifferentialTwice runs the corpus twice on one idemkv node, as a
// test harness that drops and creates its keyspaces on every run does (the
// corpus drops its keyspaces at the start and the end): the second run
// answers as the first, against the same golden answers and differences,
// so a dropped keyspace's name is created again, with empty tables.
func TestDifferentialTwice(t *testing.T) {
	if *peerFlag != "" || *recordFlag {
		t.Skip("runs against idemkv only")
	}
	golden, err := ReadGolden(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := ReadDifferences(differencesPath)
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, cluster("127.0.0.1", startIdemkv(t)))
	Run(s, Corpus)
	report(t, Compare(Corpus, Run(s, Corpus), golden, diffs))
}

func report(t *testing.T, verdicts []Verdict) {
	t.Helper()
	agree, kinds := 0, map[string]int{}
	for _, v := range verdicts {
		if v.Agree {
			agree++
		}
		if v.Listed != "" {
			kinds[v.Listed]++
		}
		if v.Problem != "" {
			t.Errorf("%s: %s", v.Name, v.Problem)
		}
	}
	t.Logf("corpus %d entries: %d agree; listed differences: %d deliberate, %d bug, %d wording",
		len(Corpus), agree, kinds[Deliberate], kinds[Bug], kinds[Wording])
}
