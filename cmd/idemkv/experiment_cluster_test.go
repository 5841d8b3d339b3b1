package main

import (
	"io"
	"strings"
	"testing"
)

// TestParseClusterCassandraHosts: --cassandra-hosts takes host or
// host:port, and is refused where no Cassandra row can be measured alike.
func TestParseClusterCassandraHosts(t *testing.T) {
	r, err := parseCluster([]string{"fig14", "--cassandra-hosts", "127.0.1.1, 127.0.1.2:9043,127.0.1.3", "--seed", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.1.1:9042", "127.0.1.2:9043", "127.0.1.3:9042"}
	if got := r.opts.CassandraHosts; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("hosts %v, want %v", got, want)
	}
	if r.opts.Seed != 3 || !strings.Contains(r.reproduce, "--cassandra-hosts 127.0.1.1:9042,127.0.1.2:9043,127.0.1.3:9042") {
		t.Errorf("seed %d, reproduce %q", r.opts.Seed, r.reproduce)
	}
	if r, err := parseCluster([]string{"fig6", "--cassandra-hosts", "127.0.1.1,127.0.1.2"}, io.Discard); err != nil || len(r.opts.CassandraHosts) != 2 {
		t.Errorf("fig6 with A and B: %v", err)
	}
	if r, err := parseCluster([]string{"fig15", "--cassandra-hosts", "127.0.1.1", "--cassandra-after"}, io.Discard); err != nil || !r.opts.CassandraAfter || !strings.HasSuffix(r.reproduce, " --cassandra-after") {
		t.Errorf("fig15 --cassandra-after: %+v, %v", r, err)
	}
	if r, err := parseCluster([]string{"fig6", "--cassandra-dir", "/tmp/p"}, io.Discard); err != nil || r.peerDir != "/tmp/p" ||
		strings.Join(r.opts.CassandraHosts, ",") != "127.0.1.1:9042,127.0.1.2:9042" || !strings.HasSuffix(r.reproduce, " --cassandra-dir /tmp/p") {
		t.Errorf("fig6 --cassandra-dir: %+v, %v", r, err)
	}
	if r, err := parseCluster([]string{"fig14", "--cassandra-dir", "/tmp/p", "--cassandra-after"}, io.Discard); err != nil || r.peerDir != "/tmp/p" || r.opts.CassandraHosts != nil || !r.opts.CassandraAfter {
		t.Errorf("fig14 --cassandra-dir: %+v, %v", r, err)
	}
	if r, err := parseCluster([]string{"fig15"}, io.Discard); err != nil || r.opts.CassandraHosts != nil || strings.Contains(r.reproduce, "cassandra") {
		t.Errorf("fig15 without hosts: %+v, %v", r, err)
	}
	for _, bad := range [][]string{
		{"leader-rules", "--cassandra-hosts", "127.0.1.1"},
		{"fig6", "--cassandra-hosts", "127.0.1.1"},
		{"fig6", "--cassandra-hosts", "127.0.1.1,127.0.1.2,127.0.1.3"},
		{"fig14", "--cassandra-hosts", " , "},
		{"fig14", "--lost-ack", "1.5"},
		{"fig15", "--cassandra-after"},
		{"fig15", "--cassandra-dir", "/tmp/p"},
		{"fig14", "--cassandra-dir", "/tmp/p", "--cassandra-hosts", "127.0.1.1"},
		{"fig6", "--cassandra-dir", "/tmp/p", "--cassandra-hosts", "127.0.1.1,127.0.1.2"},
		{"fig6", "--cassandra-hosts", "127.0.1.1,127.0.1.2", "--cassandra-after"},
		{"fig16"},
		{"fig14", "extra"},
		{},
	} {
		if _, err := parseCluster(bad, io.Discard); err == nil {
			t.Errorf("parseCluster(%q) accepted", bad)
		}
	}
}
