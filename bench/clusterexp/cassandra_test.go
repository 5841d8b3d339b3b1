package clusterexp

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/peer/cassandra"
)

var (
	cassandraHosts = flag.String("cassandra-hosts", "", "CQL addresses of A and B of a live 2-node Apache Cassandra ring ('idemkv peer cassandra up -n 2'): run TestFig6CassandraLive against it")
	cassandraDir   = flag.String("cassandra-dir", "", "with -cassandra-hosts 127.0.1.1,127.0.1.2: the directory of that peer ring, started with --jmx: step 3 flushes")
)

// TestFig6CassandraLive runs the four-step scenario on a live 2-node
// Cassandra ring and requires the paper's Fig. 6 on both coordinators: 1,
// 3, 3, then 9 (the retry counted twice), and with -cassandra-dir still 9
// after A's crash and commit log replay. It runs only with
// -cassandra-hosts: go test ./bench/clusterexp -run Live -args
// -cassandra-hosts 127.0.1.1,127.0.1.2 [-cassandra-dir D]
func TestFig6CassandraLive(t *testing.T) {
	if *cassandraHosts == "" {
		t.Skip("give -cassandra-hosts A,B of a 2-node Cassandra ring")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var peer Fig6Peer
	want := []int64{1, 3, 3, 9}
	if *cassandraDir != "" {
		peer = cassandra.Ring{Dir: *cassandraDir}
		want = append(want, 9)
	}
	rows, err := Fig6Cassandra(ctx, bench.ParseHosts(*cassandraHosts, 9042), peer)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		if r.A != want[i] || r.B != want[i] || r.Mode != Fig6CassandraMode {
			t.Errorf("%s step %q: A %d, B %d; want %d", r.Mode, r.Step, r.A, r.B, want[i])
		}
	}
	if peer != nil && rows[2].Step != Fig6CassandraSteps[2] {
		t.Errorf("step 3 %q; want A and B flushed", rows[2].Step)
	}
}

// TestFig6CassandraHosts: the scenario needs exactly A and B, and refuses
// an address it cannot connect with before touching any ring.
func TestFig6CassandraHosts(t *testing.T) {
	ctx := context.Background()
	for _, hosts := range [][]string{nil, {"127.0.1.1:9042"}, {"127.0.1.1:9042", "127.0.1.2:9042", "127.0.1.3:9042"}, {"no-port", "127.0.1.2:9042"}} {
		if _, err := Fig6Cassandra(ctx, hosts, nil); err == nil {
			t.Errorf("Fig6Cassandra(%v) ran", hosts)
		}
	}
}
