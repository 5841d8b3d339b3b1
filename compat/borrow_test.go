package compat

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/coltype/borrowcol"
	"github.com/idemkv/idemkv/counters/borrow"
	"github.com/idemkv/idemkv/node"
)

// TestGocqlBorrowCounter drives borrow_counter through the unmodified gocql
// driver on a 3-node ring: plain updates at several levels; clients
// (client.BorrowCounter, one durable in a file and reopened mid-way)
// borrowing, adding and retiring; a hand-made client whose borrow requests,
// writes and retirement are all sent twice; reads at QUORUM and ALL (the
// writes are acknowledged at the session's level, QUORUM); after
// the retirements every replica reads the total and holds no client dot.
// Then a client whose creator is stopped retires: its frozen dot stays on
// the live replicas while the creator is down, and goes once the creator,
// restarted (replaying its commit log), transfers it.
func TestGocqlBorrowCounter(t *testing.T) {
	r := startRing(t, 3, nil)
	cc := r.cluster()
	cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	s := r.session(cc)
	exec(t, s, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
	exec(t, s, "CREATE TABLE ks.b (k text PRIMARY KEY, c borrow_counter)")
	md, err := s.KeyspaceMetadata("ks")
	if err != nil {
		t.Fatalf("keyspace metadata: %v", err)
	}
	if tm, ok := md.Tables["b"]; !ok || tm.Columns["c"] == nil || tm.Columns["c"].Validator != borrowcol.TypeName {
		t.Fatalf("system_schema does not show c as %s: %+v", borrowcol.TypeName, tm)
	}
	id := tableID(t, r, "b")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	want := map[string]int64{}

	// Plain driver updates, led into the leaders' own dots.
	for i, cl := range []gocql.Consistency{gocql.One, gocql.Quorum, gocql.All} {
		if err := s.Query("UPDATE ks.b SET c = c + ? WHERE k = ?", int64(i+1), "k0").Consistency(cl).Exec(); err != nil {
			t.Fatalf("plain update at %v: %v", cl, err)
		}
		want["k0"] += int64(i + 1)
	}
	if err := s.Query("UPDATE ks.b SET c = c - 1 WHERE k = 'k0'").Exec(); requestCode(err) != 0x2200 {
		t.Errorf("decrement: %v, want Invalid", err)
	}

	// Helper clients.
	const clients, ops = 4, 20
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		key := fmt.Sprintf("k%d", i%2)
		want[key] += int64((i + 1) * ops)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o client.BorrowOptions
			if i == 0 {
				o.File = filepath.Join(dir, "c0.state")
			}
			b, err := client.NewBorrowCounter(s, "ks.b", "c", "k = ?", o, key)
			if err != nil {
				errs <- err
				return
			}
			for j := 0; j < ops; j++ {
				if err := b.Add(ctx, uint64(i+1)); err != nil {
					errs <- err
					return
				}
				if i == 0 && j == ops/2 { // a restart: the state comes back from the file
					if b, err = client.NewBorrowCounter(s, "ks.b", "c", "k = ?", o, key); err != nil {
						errs <- err
						return
					}
				}
			}
			if err := b.Retire(ctx); err != nil {
				errs <- err
				return
			}
			if err := b.Add(ctx, 1); !errors.Is(err, client.ErrBorrowRetired) {
				errs <- fmt.Errorf("Add after Retire: %v", err)
			}
			if st := b.Stats(); i != 0 && (st.Borrows != 1 || st.Writes != ops+1) {
				errs <- fmt.Errorf("client %d: %+v, want 1 borrow and %d writes", i, st, ops+1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// A hand-made client: every exchange sent twice (a duplicate, or a
	// retry after a lost answer), through different coordinators.
	raw := borrow.NewClient(borrow.ID{0xab, 1})
	exchange := func(payload []byte) []byte {
		t.Helper()
		var reply []byte
		for range 2 {
			iter := s.Query("UPDATE ks.b SET c = c + 0 WHERE k = ?", "k1").CustomPayload(map[string][]byte{borrowcol.PayloadKey: payload}).Iter()
			ans := iter.GetCustomPayload()
			if err := iter.Close(); err != nil {
				t.Fatalf("exchange: %v", err)
			}
			if reply != nil && string(reply) != string(ans[borrowcol.PayloadKey]) && payload[1] == borrowcol.KindBorrow {
				t.Fatalf("a repeated borrow request got another answer")
			}
			reply = ans[borrowcol.PayloadKey]
		}
		return reply
	}
	lent := borrow.New()
	if err := lent.UnmarshalBinary(exchange(borrowcol.EncodeBorrow(raw.ID()))); err != nil {
		t.Fatal(err)
	}
	d := lent.Dots()[0].Dot
	if err := raw.Ask(d.Creator); err != nil {
		t.Fatal(err)
	}
	if err := raw.Lent(d); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 5; j++ {
		w, err := raw.Add(7)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := borrowcol.EncodeWrite(w)
		exchange(p)
	}
	want["k1"] += 35
	ret, err := raw.Retire()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := borrowcol.EncodeWrite(ret)
	exchange(p)

	read := func(key string, cl gocql.Consistency) int64 {
		t.Helper()
		var v int64
		var err error
		for range 50 { // a restarted node may take a moment to be seen up
			if err = s.Query("SELECT c FROM ks.b WHERE k = ?", key).Consistency(cl).Scan(&v); err == nil {
				return v
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("read %s at %v: %v", key, cl, err)
		return 0
	}
	for k, w := range want {
		if got := read(k, gocql.All); got != w {
			t.Fatalf("%s at ALL: %d, want %d", k, got, w)
		}
		// The clients' writes were acknowledged at QUORUM (the session's
		// level): a QUORUM read sees them at once.
		if got := read(k, gocql.Quorum); got != w {
			t.Fatalf("%s at QUORUM: %d, want %d", k, got, w)
		}
	}
	// Every replica reaches the totals and no client dot is left.
	cellOn := func(i int, key string) *borrow.State {
		t.Helper()
		c, found, err := r.nodes[i].Replica().Read(id, []byte(key), "c")
		if err != nil {
			t.Fatalf("node %d: read %s: %v", i+1, key, err)
		}
		if !found {
			return borrow.New()
		}
		st, err := borrowcol.DecodeCell(c.Value)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	settled := func(nodes []int, key string, w int64) bool {
		for _, i := range nodes {
			if st := cellOn(i, key); int64(st.Value()) != w || st.Borrowed() != 0 {
				return false
			}
		}
		return true
	}
	all := []int{0, 1, 2}
	for k, w := range want {
		waitFor(t, k+": every replica reads the total with no client dot", func() bool { return settled(all, k, w) })
	}

	// A creator down at retirement.
	b, err := client.NewBorrowCounter(s, "ks.b", "c", "k = ?", client.BorrowOptions{}, "k2")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, 9); err != nil {
		t.Fatal(err)
	}
	want["k2"] = 9
	creator := -1
	for i := range all {
		for _, o := range cellOn(i, "k2").Dots() {
			if o.Owner == b.ID() && borrow.ID(r.nodes[i].Replica().HostID()) == o.Dot.Creator {
				creator = i
			}
		}
	}
	if creator < 0 {
		t.Fatal("no replica holds the dot it lent")
	}
	if err := r.nodes[creator].Stop(); err != nil {
		t.Fatalf("stop node %d: %v", creator+1, err)
	}
	r.nodes[creator] = nil
	var live []int
	for _, i := range all {
		if i != creator {
			live = append(live, i)
		}
	}
	if err := b.Retire(ctx); err != nil {
		t.Fatalf("retire with the creator down: %v", err)
	}
	waitFor(t, "the live replicas read the total", func() bool {
		for _, i := range live {
			if int64(cellOn(i, "k2").Value()) != 9 {
				return false
			}
		}
		return true
	})
	left := 0
	for _, i := range live {
		left += cellOn(i, "k2").Borrowed()
	}
	if left == 0 {
		t.Fatal("a dot was collected while its creator was down")
	}
	if got := read("k2", gocql.Quorum); got != 9 {
		t.Fatalf("k2 at QUORUM with the creator down: %d, want 9", got)
	}
	nd, err := node.Start(r.cfgs[creator], r.opts[creator])
	if err != nil {
		t.Fatalf("restart node %d: %v", creator+1, err)
	}
	r.nodes[creator] = nd
	if st := nd.Replica().Stats(); st.ReplayedRecords == 0 {
		t.Errorf("node %d replayed no commit log record: %+v", creator+1, st)
	}
	for k, w := range want {
		waitFor(t, k+" after the creator's return: every replica reads the total with no client dot", func() bool { return settled(all, k, w) })
		if got := read(k, gocql.All); got != w {
			t.Fatalf("%s at ALL after the restart: %d, want %d", k, got, w)
		}
	}
	if err := s.Query("DELETE FROM ks.b WHERE k = ?", "k0").Exec(); err == nil {
		t.Fatal("DELETE of a borrow counter row succeeded")
	}
}
