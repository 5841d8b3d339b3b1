package compat

import (
	"errors"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/node"
)

// TestGocqlResetCounter drives the observed-reset counter (reset_counter,
// issue 13) through the unmodified gocql driver on a three-node ring:
// increments at QUORUM and ALL, decrements refused, DELETE of the column
// and of the row resetting it, counting again at once, a node restart that
// replays its commit log, and a node down during increments and resets
// that catches up (hints and anti-entropy deliver its ops exactly once).
func TestGocqlResetCounter(t *testing.T) {
	r := startRing(t, 3, nil)
	c := r.cluster()
	c.Consistency = gocql.All
	s := r.session(c)
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.r (k text PRIMARY KEY, c reset_counter)`)
	md, err := s.KeyspaceMetadata("ks")
	if err != nil {
		t.Fatalf("keyspace metadata: %v", err)
	}
	if tm, ok := md.Tables["r"]; !ok || tm.Columns["c"] == nil || tm.Columns["c"].Validator != resetcol.TypeName {
		t.Fatalf("system_schema does not show c as %s: %+v", resetcol.TypeName, tm)
	}

	read := func(key string, cl gocql.Consistency) int64 {
		t.Helper()
		var v int64
		var err error
		for range 100 { // a restarted node may take a moment to be seen up
			if err = s.Query(`SELECT c FROM ks.r WHERE k = ?`, key).Consistency(cl).Scan(&v); err == nil || errors.Is(err, gocql.ErrNotFound) {
				return v
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("read %s at %v: %v", key, cl, err)
		return 0
	}
	id := tableID(t, r, "r")
	local := func(i int, key string) int64 {
		t.Helper()
		v, _, err := r.nodes[i].Replica().Value(id, []byte(key), "c")
		if err != nil {
			t.Fatalf("node %d: local read: %v", i+1, err)
		}
		return v
	}
	everywhere := func(key string, want int64) {
		t.Helper()
		waitFor(t, "every replica reads the count", func() bool {
			return local(0, key) == want && local(1, key) == want && local(2, key) == want
		})
	}
	update := func(key string, d int64, cl gocql.Consistency) {
		t.Helper()
		if err := s.Query(`UPDATE ks.r SET c = c + ? WHERE k = ?`, d, key).Consistency(cl).Exec(); err != nil {
			t.Fatalf("update %s +%d at %v: %v", key, d, cl, err)
		}
	}

	want := int64(0)
	for _, cl := range []gocql.Consistency{gocql.One, gocql.Quorum, gocql.All} {
		update("a", 3, cl)
		exec(t, s, `UPDATE ks.r SET c = c + 1 WHERE k = 'a'`)
		want += 4
	}
	for _, cl := range []gocql.Consistency{gocql.Quorum, gocql.All} {
		if got := read("a", cl); got != want {
			t.Fatalf("read at %v = %d, want %d", cl, got, want)
		}
	}
	everywhere("a", want)
	if err := s.Query(`UPDATE ks.r SET c = c - 1 WHERE k = 'a'`).Exec(); requestCode(err) != 0x2200 {
		t.Errorf("decrement: %v, want Invalid", err)
	}

	// DELETE of the column is a reset; the counter counts again at once.
	exec(t, s, `DELETE c FROM ks.r WHERE k = 'a'`)
	if got := read("a", gocql.All); got != 0 {
		t.Fatalf("after DELETE, read at ALL = %d, want 0", got)
	}
	update("a", 5, gocql.Quorum)
	if got := read("a", gocql.Quorum); got != 5 {
		t.Fatalf("counting after DELETE: %d, want 5", got)
	}
	// DELETE of the row resets its reset counters.
	exec(t, s, `DELETE FROM ks.r WHERE k = 'a'`)
	update("a", 2, gocql.All)
	if got := read("a", gocql.All); got != 2 {
		t.Fatalf("after a row DELETE and +2, read at ALL = %d, want 2", got)
	}
	everywhere("a", 2)
	want = 2

	// A restart replays the commit log.
	if err := r.nodes[1].Stop(); err != nil {
		t.Fatalf("stop node 2: %v", err)
	}
	nd, err := node.Start(r.cfgs[1], r.opts[1])
	if err != nil {
		t.Fatalf("restart node 2: %v", err)
	}
	r.nodes[1] = nd
	if got := local(1, "a"); got != want {
		t.Errorf("node 2 after replay: %d, want %d", got, want)
	}
	r.waitAllUp(t)

	// Node 3 down during increments and a reset; it catches up after.
	if err := r.nodes[2].Stop(); err != nil {
		t.Fatalf("stop node 3: %v", err)
	}
	waitFor(t, "node 1 sees node 3 down", func() bool {
		for _, p := range r.nodes[0].Gossip().Nodes() {
			if !p.Up {
				return true
			}
		}
		return false
	})
	for range 4 {
		update("a", 1, gocql.Quorum)
		update("b", 1, gocql.Quorum)
	}
	if err := s.Query(`DELETE c FROM ks.r WHERE k = 'b'`).Consistency(gocql.Quorum).Exec(); err != nil {
		t.Fatalf("DELETE with node 3 down: %v", err)
	}
	update("b", 7, gocql.Quorum)
	want += 4
	if got := read("a", gocql.Quorum); got != want {
		t.Fatalf("with node 3 down, a = %d, want %d", got, want)
	}
	if got := read("b", gocql.Quorum); got != 7 {
		t.Fatalf("with node 3 down, b = %d, want 7", got)
	}
	nd, err = node.Start(r.cfgs[2], r.opts[2])
	if err != nil {
		t.Fatalf("restart node 3: %v", err)
	}
	r.nodes[2] = nd
	r.waitAllUp(t)
	everywhere("a", want)
	everywhere("b", 7)
	if got := read("b", gocql.All); got != 7 {
		t.Fatalf("after catch-up, b at ALL = %d, want 7", got)
	}
	// Once every op is acknowledged, the outboxes are empty.
	waitFor(t, "outboxes drain", func() bool {
		for _, nd := range r.nodes {
			if resetcol.ReplicaStats(nd.Replica()).Pending != 0 {
				return false
			}
		}
		return true
	})
}

// waitAllUp waits until every node sees every node up.
func (r *ring) waitAllUp(t *testing.T) {
	t.Helper()
	waitFor(t, "every node sees every node up", func() bool {
		for _, nd := range r.nodes {
			up := 0
			for _, p := range nd.Gossip().Nodes() {
				if p.Up {
					up++
				}
			}
			if up != len(r.nodes) {
				return false
			}
		}
		return true
	})
}

// TestGocqlResetWhatWasRead: a SELECT carrying the custom payload
// idemkv-reset-context gets the context of what it read; a DELETE carrying
// it cancels exactly those increments (later ones survive), and replaying
// that DELETE changes nothing.
func TestGocqlResetWhatWasRead(t *testing.T) {
	r := startRing(t, 3, nil)
	c := r.cluster()
	c.Consistency = gocql.Quorum
	s := r.session(c)
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.r (k text PRIMARY KEY, c reset_counter)`)
	for range 4 {
		exec(t, s, `UPDATE ks.r SET c = c + 2 WHERE k = 'a'`)
	}
	asked := map[string][]byte{resetcol.ContextPayloadKey: nil}
	iter := s.Query(`SELECT c FROM ks.r WHERE k = 'a'`).CustomPayload(asked).Iter()
	var v int64
	if !iter.Scan(&v) || v != 8 {
		t.Fatalf("read %d, want 8 (%v)", v, iter.Close())
	}
	ctx, ok := iter.GetCustomPayload()[resetcol.ContextPayloadKey]
	if err := iter.Close(); err != nil || !ok || len(ctx) == 0 {
		t.Fatalf("no reset context in the answer (%v, %v)", ok, err)
	}
	exec(t, s, `UPDATE ks.r SET c = c + 3 WHERE k = 'a'`)
	del := s.Query(`DELETE c FROM ks.r WHERE k = 'a'`).CustomPayload(map[string][]byte{resetcol.ContextPayloadKey: ctx})
	for range 2 { // the second is a replay
		if err := del.Exec(); err != nil {
			t.Fatalf("DELETE with context: %v", err)
		}
		if err := s.Query(`SELECT c FROM ks.r WHERE k = 'a'`).Consistency(gocql.All).Scan(&v); err != nil || v != 3 {
			t.Fatalf("after DELETE of what was read: %d (%v), want 3", v, err)
		}
	}
	// A context on a DELETE of the whole row (no single column) is refused.
	if err := s.Query(`DELETE FROM ks.r WHERE k = 'a'`).CustomPayload(map[string][]byte{resetcol.ContextPayloadKey: ctx}).Exec(); requestCode(err) != 0x2200 {
		t.Errorf("context on a row DELETE: %v, want Invalid", err)
	}
	// A request for a context on a SELECT of no reset_counter is refused.
	if err := s.Query(`SELECT k FROM ks.r WHERE k = 'a'`).CustomPayload(asked).Exec(); requestCode(err) != 0x2200 {
		t.Errorf("context on a SELECT of no reset_counter: %v, want Invalid", err)
	}
}
