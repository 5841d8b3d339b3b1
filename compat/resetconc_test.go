package compat

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gocql/gocql"
)

// TestGocqlResetCounterConcurrentUpdates: plain gocql UPDATEs of a
// reset_counter (no clustering columns) from four goroutines, 60 each,
// on four keys at QUORUM on a healthy ring: every one is acknowledged and
// each key reads, at ALL, the number of increments — as a vanilla
// counter does under the same load. (Replicas hold an op that overtook an
// earlier one of its cell, and answered it with an error the coordinator
// counted as a failure; it now sends it again.)
func TestGocqlResetCounterConcurrentUpdates(t *testing.T) {
	r := startRing(t, 3, nil)
	s := r.session(r.cluster())
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.r (k text PRIMARY KEY, c reset_counter)`)
	const workers, ops, keys = 4, 60, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*ops)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ops {
				if err := s.Query(`UPDATE ks.r SET c = c + 1 WHERE k = ?`, fmt.Sprint("k", i%keys)).Exec(); err != nil {
					errs <- fmt.Errorf("update k%d: %w", i%keys, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed == 0 {
			t.Error(err)
		}
		failed++
	}
	if failed > 0 {
		t.Errorf("%d of %d updates failed", failed, workers*ops)
	}
	for k := range keys {
		var v int64
		if err := s.Query(`SELECT c FROM ks.r WHERE k = ?`, fmt.Sprint("k", k)).Consistency(gocql.All).Scan(&v); err != nil || v != workers*ops/keys {
			t.Errorf("k%d at ALL = %d (%v), want %d", k, v, err, workers*ops/keys)
		}
	}
}
