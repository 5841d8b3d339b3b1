package compat

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/coltype/handoffcol"
)

// TestGocqlHandoffCounter: clients using client.HandoffCounter over gocql
// (token-aware) on a 3-node ring, one of them durable in a file and
// reopened mid-way, and plain driver updates of the same column: SELECT
// returns every increment once the clients have flushed, and every replica
// reaches it by anti-entropy.
func TestGocqlHandoffCounter(t *testing.T) {
	r := startRing(t, 3, nil)
	cc := r.cluster()
	cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	s := r.session(cc)
	exec(t, s, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
	exec(t, s, "CREATE TABLE ks.h (k text PRIMARY KEY, c handoff_counter)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const clients, ops = 4, 25
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", i%2)
			var o client.HandoffOptions
			if i == 0 {
				o.File = filepath.Join(dir, "c0.state")
			}
			h, err := client.NewHandoffCounter(s, "ks.h", "c", "k = ?", o, key)
			if err != nil {
				errs <- err
				return
			}
			for j := 0; j < ops; j++ {
				if err := h.Add(uint64(i + 1)); err != nil {
					errs <- err
					return
				}
				if err := h.Exchange(ctx); err != nil {
					errs <- err
					return
				}
				if i == 0 && j == ops/2 { // a restart: the state comes back from the file
					if h, err = client.NewHandoffCounter(s, "ks.h", "c", "k = ?", o, key); err != nil {
						errs <- err
						return
					}
				}
			}
			if err := h.Flush(ctx); err != nil {
				errs <- err
				return
			}
			if err := h.Retire(ctx); err != nil {
				errs <- err
				return
			}
			if err := h.Add(1); err != client.ErrRetired {
				errs <- fmt.Errorf("Add after Retire: %v", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Plain updates from a driver without the helper.
	for j := 0; j < 10; j++ {
		exec(t, s, "UPDATE ks.h SET c = c + ? WHERE k = ?", int64(100), "k0")
	}
	want := map[string]int64{"k0": (1+3)*ops + 1000, "k1": (2 + 4) * ops}
	for k, w := range want {
		if got := handoffValue(t, s, k, gocql.All); got != w {
			t.Fatalf("%s at ALL: %d, want %d", k, got, w)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			ok := true
			for _, nd := range r.nodes {
				if v, _, _ := nd.Replica().Value(tableID(t, r, "h"), []byte(k), "c"); v != w {
					ok = false
				}
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not every replica reached %d", k, w)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The helpers retired with notices: every replica holds them, and no
	// slot is left.
	deadline := time.Now().Add(20 * time.Second)
	for {
		slots, notices := 0, 0
		for _, nd := range r.nodes {
			st := handoffcol.ReplicaStats(nd.Replica())
			slots, notices = slots+st.Slots, notices+st.Notices
		}
		if slots == 0 && notices > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the helpers retired: %d slots, %d notices on the replicas", slots, notices)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Query("DELETE FROM ks.h WHERE k = ?", "k0").Exec(); err == nil {
		t.Fatal("DELETE of a handoff counter row succeeded")
	}
}

func handoffValue(t *testing.T, s *gocql.Session, key string, cl gocql.Consistency) int64 {
	t.Helper()
	var v int64
	if err := s.Query("SELECT c FROM ks.h WHERE k = ?", key).Consistency(cl).Scan(&v); err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return v
}

func tableID(t *testing.T, r *ring, name string) uint64 {
	t.Helper()
	def, ok := r.nodes[0].Schema().Table("ks", name)
	if !ok {
		t.Fatalf("no table ks.%s", name)
	}
	return def.ID
}
