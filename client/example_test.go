package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/client"
)

// A client of a handoff_counter column: it counts locally, hands its
// increments off with exchanges (each safe to retry), and retires when done.
// It needs a running ring (`idemkv ring up`) with
//
//	CREATE TABLE ks.likes (k text PRIMARY KEY, c handoff_counter)
func ExampleHandoffCounter() {
	cluster := gocql.NewCluster("127.0.0.1")
	cluster.ProtoVersion = 4 // custom payloads need protocol v4
	session, err := cluster.CreateSession()
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	h, err := client.NewHandoffCounter(session, "ks.likes", "c", "k = ?",
		client.HandoffOptions{File: "/var/lib/myapp/likes-post42.state"}, "post42")
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
	// that Retire left to its notice is delivered by anti-entropy.
	var likes int64
	if err := session.Query("SELECT c FROM ks.likes WHERE k = ?", "post42").Scan(&likes); err != nil {
		log.Fatal(err)
	}
	fmt.Println("likes:", likes)
}
