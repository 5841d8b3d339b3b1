package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/internal/testseed"
)

// Where ExampleHandoffCounter finds its ring and keeps its state file;
// TestExampleHandoffCounter points them at an in-process ring.
var (
	exampleHosts = []string{"127.0.0.1"}
	examplePort  = 9042
	exampleState = "/var/lib/myapp/likes-post42.state"
)

// A client of a handoff_counter column: it counts locally, hands its
// increments off with exchanges (each safe to retry), and retires when done.
// It needs a running ring (`idemkv ring up`) with
//
//	CREATE TABLE ks.likes (k text PRIMARY KEY, c handoff_counter)
//
// (go test runs it against a one-node ring: TestExampleHandoffCounter.)
func ExampleHandoffCounter() {
	cluster := gocql.NewCluster(exampleHosts...)
	cluster.Port = examplePort
	cluster.ProtoVersion = 4 // custom payloads need protocol v4
	session, err := cluster.CreateSession()
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	h, err := client.NewHandoffCounter(session, "ks.likes", "c", "k = ?",
		client.HandoffOptions{File: exampleState}, "post42")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		if err := h.Add(1); err != nil { // durable in the file before it returns
			log.Fatal(err)
		}
		if err := h.Exchange(ctx); err != nil {
			log.Print(err) // nothing is lost: the next exchange carries it again
		}
	}
	if err := h.Retire(ctx); err != nil { // hands everything off, then stops for good
		log.Fatal(err)
	}
	// Reads show the increments once replicas have acquired them: a token
	// that Retire left to its notice is delivered by anti-entropy (at once
	// on one node).
	var likes int64
	if err := session.Query("SELECT c FROM ks.likes WHERE k = ?", "post42").Scan(&likes); err != nil {
		log.Fatal(err)
	}
	fmt.Println("likes:", likes)
}

// TestExampleHandoffCounter runs ExampleHandoffCounter against an
// in-process one-node ring and checks what it prints.
func TestExampleHandoffCounter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := bench.StartCluster(ctx, bench.ClusterConfig{Nodes: 1, Dir: t.TempDir(), Seed: testseed.Seed(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	hosts, port, state := exampleHosts, examplePort, exampleState
	t.Cleanup(func() { exampleHosts, examplePort, exampleState = hosts, port, state })
	exampleHosts, examplePort = []string{"127.0.0.1"}, c.CQLPort()
	exampleState = filepath.Join(t.TempDir(), "likes-post42.state")

	cc := gocql.NewCluster(exampleHosts...)
	cc.Port = examplePort
	cc.Timeout = 10 * time.Second
	s, err := cc.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE ks.likes (k text PRIMARY KEY, c handoff_counter)",
	} {
		if err := s.Query(stmt).Exec(); err != nil {
			s.Close()
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	s.Close()

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	func() {
		defer func() { os.Stdout = stdout }()
		ExampleHandoffCounter()
	}()
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "likes: 3" {
		t.Fatalf("ExampleHandoffCounter printed %q, want likes: 3", got)
	}
	if _, err := os.Stat(exampleState); !os.IsNotExist(err) {
		t.Errorf("state file after Retire: %v; want it removed", err)
	}
}
