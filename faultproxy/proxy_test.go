package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/faultproxy"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/ring"
)

// proxiedRing is an embedded 3-node idemkv ring (127.0.0.i) behind a group
// of proxies on 127.0.2.i, same port.
type proxiedRing struct {
	c *bench.Cluster
	g *faultproxy.Group
}

func startProxiedRing(t *testing.T, seed uint64) *proxiedRing {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := bench.StartCluster(ctx, bench.ClusterConfig{Nodes: 3, Seed: seed, CounterWriteTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	g, err := faultproxy.NewGroup(faultproxy.Config{Schedule: faultproxy.Schedule{Seed: seed}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	for i, h := range c.Hosts() {
		if _, err := g.Listen(fmt.Sprintf("127.0.2.%d:%d", i+1, c.CQLPort()), h); err != nil {
			t.Fatal(err)
		}
	}
	return &proxiedRing{c: c, g: g}
}

// session connects gocql to the first proxy only; seen records every host
// the driver learns of.
func (r *proxiedRing) session(t *testing.T, timeout time.Duration, seen *sync.Map) *gocql.Session {
	t.Helper()
	return r.sessionWith(t, timeout, seen, nil)
}

// sessionWith is session with gocql's frame compressor comp (nil: none).
func (r *proxiedRing) sessionWith(t *testing.T, timeout time.Duration, seen *sync.Map, comp gocql.Compressor) *gocql.Session {
	t.Helper()
	cc := gocql.NewCluster(r.g.Proxies()[0].Addr())
	cc.Compressor = comp
	cc.Port = r.c.CQLPort()
	cc.ProtoVersion = 4
	cc.Timeout, cc.WriteTimeout, cc.ConnectTimeout = timeout, timeout, 5*time.Second
	cc.RetryPolicy = nil
	cc.Consistency = gocql.Quorum
	cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	if seen != nil {
		cc.HostFilter = gocql.HostFilterFunc(func(h *gocql.HostInfo) bool {
			seen.Store(net.JoinHostPort(h.ConnectAddress().String(), fmt.Sprint(h.Port())), true)
			return true
		})
	}
	s, err := cc.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func exec(t *testing.T, s *gocql.Session, stmt string) {
	t.Helper()
	if err := s.Query(stmt).Consistency(gocql.All).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// TestDriverSeesOnlyProxiesAndRoutesByToken: gocql, given one proxy,
// discovers exactly the three proxies, and its token-aware routing sends
// each key's update to the proxy of the node that owns it (RF 1).
func TestDriverSeesOnlyProxiesAndRoutesByToken(t *testing.T) {
	seed := testseed.Seed(t)
	r := startProxiedRing(t, seed)
	setup := r.session(t, 5*time.Second, nil)
	exec(t, setup, `CREATE KEYSPACE rf1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`)
	exec(t, setup, `CREATE TABLE rf1.c (k text PRIMARY KEY, c counter)`)
	setup.Close()

	var seen sync.Map
	s := r.session(t, 5*time.Second, &seen)
	want := map[string]bool{}
	for _, p := range r.g.Proxies() {
		want[p.Addr()] = true
	}
	got := map[string]bool{}
	seen.Range(func(k, _ any) bool { got[k.(string)] = true; return true })
	if len(got) != len(want) {
		t.Fatalf("driver discovered %v, want the proxies %v", got, want)
	}
	for a := range got {
		if !want[a] {
			t.Fatalf("driver discovered %s, not a proxy (all: %v)", a, got)
		}
	}

	meta := r.c.Node(1).ClusterMetadata()
	owner := map[string]int{}
	for i := 1; i <= 3; i++ {
		owner[r.c.Node(i).HostID()] = i
	}
	wantPer := map[int]int64{}
	before := map[int]int64{}
	for _, p := range r.g.Proxies() {
		before[p.Node()] = p.Stats().Matched
	}
	const keys = 60
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		reps := ring.SimpleStrategy{RF: 1}.Replicas(meta, ring.Token([]byte(key)))
		if len(reps) != 1 {
			t.Fatalf("key %s: replicas %v", key, reps)
		}
		wantPer[owner[reps[0].ID]]++
		if err := s.Query(`UPDATE rf1.c SET c = c + 1 WHERE k = ?`, key).Exec(); err != nil {
			t.Fatalf("update %s: %v", key, err)
		}
	}
	for _, p := range r.g.Proxies() {
		got := p.Stats().Matched - before[p.Node()]
		if got != wantPer[p.Node()] {
			t.Errorf("proxy %d (%s → %s): %d updates, its node owns %d of the %d keys", p.Node(), p.Addr(), p.Target(), got, wantPer[p.Node()], keys)
		}
	}
	var rewrites int64
	for _, p := range r.g.Proxies() {
		rewrites += p.Stats().Rewrites
	}
	if rewrites == 0 { // the control connection's system.local and system.peers reads
		t.Error("no system rows rewritten")
	}
}

// TestStatusEventsRewritten: a node that stops and starts again is
// announced to the driver by STATUS_CHANGE events, which reach it with the
// proxy's address: the driver still knows only the proxies, and its
// session works on.
func TestStatusEventsRewritten(t *testing.T) {
	seed := testseed.Seed(t)
	r := startProxiedRing(t, seed)
	var seen sync.Map
	s := r.session(t, 5*time.Second, &seen)
	events := func() int64 {
		var n int64
		for _, p := range r.g.Proxies() {
			n += p.Stats().Events
		}
		return n
	}
	waitEvents := func(n int64, what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a bound on a wait, not a timing assertion
		for events() < n {
			if time.Now().After(deadline) {
				t.Fatalf("no %s event rewritten (%d events)", what, events())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := r.c.Kill(3); err != nil {
		t.Fatal(err)
	}
	waitEvents(1, "DOWN")
	if err := r.c.Restart(3); err != nil {
		t.Fatal(err)
	}
	waitEvents(2, "UP")
	seen.Range(func(k, _ any) bool {
		if !strings.HasPrefix(k.(string), "127.0.2.") {
			t.Errorf("driver learned of %s", k)
		}
		return true
	})
	var v string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
		t.Fatal(err)
	}
}

// TestLostAcksOverCountVanillaNotFBF: counter increments through the
// proxies with seeded lost acks, each op retried with its op id until
// acknowledged (at most 4 attempts): the vanilla counter counts every
// applied attempt, at least once more per lost ack, FBF counts each op once.
func TestLostAcksOverCountVanillaNotFBF(t *testing.T) {
	seed := testseed.Seed(t)
	r := startProxiedRing(t, seed)
	setup := r.session(t, 5*time.Second, nil)
	exec(t, setup, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, setup, `CREATE TABLE ks.vanilla (k text PRIMARY KEY, c counter)`)
	exec(t, setup, `CREATE TABLE ks.fbf (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf', 'retry_horizon': '30s'}`)
	if err := r.g.SetSchedule(faultproxy.Schedule{Seed: seed, LostAck: 0.25}); err != nil {
		t.Fatal(err)
	}
	s := r.session(t, 2*time.Second, nil)

	const ops, workers, attempts = 48, 8, 4
	tables := map[string]uint64{"vanilla": 1, "fbf": 2} // op-id client ids
	unknown := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for table, id := range tables {
		cli := client.New(s, client.Options{ClientID: id, StartSequence: 1})
		stmt := "UPDATE ks." + table + " SET c = c + 1 WHERE k = ?"
		work := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range work {
					key := fmt.Sprintf("k%d", k%8)
					q, op := cli.Query(stmt, key)
					var err error
					for a := 1; a <= attempts; a++ {
						if a > 1 {
							q = s.Query(stmt, key)
							q.CustomPayload(map[string][]byte{client.PayloadKey: op.Bytes()})
						}
						if err = q.Exec(); err == nil {
							break
						}
						// A lost answer is a timeout; a slow server may time out
						// too. Only a refused statement ends the test.
						var re gocql.RequestError
						if errors.As(err, &re) && (re.Code() == gocql.ErrCodeSyntax || re.Code() == gocql.ErrCodeInvalid) {
							t.Errorf("%s op %v attempt %d: %v", table, op, a, err)
							return
						}
					}
					if err != nil {
						mu.Lock()
						unknown[table]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(work)
			for k := range ops {
				work <- k
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	lost := map[uint64]int{}
	for _, ev := range r.g.Events() {
		if ev.Kind != faultproxy.KindLostAck || !ev.HasOp {
			t.Fatalf("unexpected event %+v", ev)
		}
		lost[ev.Op.Client]++
	}
	total := func(table string) int64 {
		var sum int64
		iter := setup.Query("SELECT c FROM ks." + table).Consistency(gocql.All).Iter()
		var v int64
		for iter.Scan(&v) {
			sum += v
		}
		if err := iter.Close(); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	van, fbf := total("vanilla"), total("fbf")
	t.Logf("lost acks: vanilla %d, fbf %d; unknown ops: %v; totals: vanilla %d, fbf %d of %d ops", lost[1], lost[2], unknown, van, fbf, ops)
	if lost[1] == 0 || lost[2] == 0 {
		t.Fatalf("no lost acks injected: %v", lost)
	}
	// Every acknowledged op applied at least once, and so did every lost
	// ack; an op none of whose attempts was acknowledged (a slow server
	// under -race) may have applied or not.
	if acked := int64(ops - unknown["vanilla"]); van < acked+int64(lost[1]) {
		t.Errorf("vanilla counted %d: fewer than %d acknowledged ops + %d lost acks", van, acked, lost[1])
	}
	if acked := int64(ops - unknown["fbf"]); fbf < acked || fbf > ops {
		t.Errorf("fbf counted %d for %d ops, %d acknowledged (%d lost acks)", fbf, ops, acked, lost[2])
	}
	dups := r.g.Duplicates()
	if dups[2] == 0 || dups[1] == 0 {
		t.Errorf("duplicates %v: want retries after acknowledged attempts in both tables", dups)
	}
	if c := r.g.Counts()[faultproxy.KindLostAck]; c != int64(lost[1]+lost[2]) {
		t.Errorf("count %d, events %d", c, lost[1]+lost[2])
	}
}

// TestDriverThroughProxyCompressed: gocql with snappy frame compression
// through the proxies still discovers only the proxies (the peer rows and
// events are decompressed, rewritten and compressed again) and its
// prepared updates are matched and applied.
func TestDriverThroughProxyCompressed(t *testing.T) {
	seed := testseed.Seed(t)
	r := startProxiedRing(t, seed)
	var seen sync.Map
	s := r.sessionWith(t, 5*time.Second, &seen, gocql.SnappyCompressor{})
	n := 0
	seen.Range(func(k, _ any) bool {
		n++
		found := false
		for _, p := range r.g.Proxies() {
			found = found || p.Addr() == k.(string)
		}
		if !found {
			t.Errorf("driver discovered %s, not a proxy", k)
		}
		return true
	})
	if n != 3 {
		t.Errorf("driver discovered %d hosts, want the 3 proxies", n)
	}
	exec(t, s, `CREATE KEYSPACE z WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE z.c (k text PRIMARY KEY, c counter)`)
	var matched int64
	for _, p := range r.g.Proxies() {
		matched -= p.Stats().Matched
	}
	for k := range 30 {
		if err := s.Query(`UPDATE z.c SET c = c + 2 WHERE k = ?`, fmt.Sprint("key-", k)).Exec(); err != nil {
			t.Fatalf("update: %v", err)
		}
	}
	for _, p := range r.g.Proxies() {
		matched += p.Stats().Matched
	}
	if matched != 30 {
		t.Errorf("proxies matched %d updates, want 30", matched)
	}
	var v int64
	if err := s.Query(`SELECT c FROM z.c WHERE k = 'key-3'`).Consistency(gocql.All).Scan(&v); err != nil || v != 2 {
		t.Errorf("read: %d, %v", v, err)
	}
}
