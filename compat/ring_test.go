package compat

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/node"
	idring "github.com/idemkv/idemkv/ring"
)

// ring is an in-process ring whose nodes listen on 127.0.0.i, peer port
// port, CQL port port+1.
type ring struct {
	t     *testing.T
	port  int
	nodes []*node.Node
	cfgs  []node.Config  // each node's configuration, for restarts
	opts  []node.Options // each node's options, for restarts
}

func startRing(t *testing.T, n int, wrap func(i int) func(cql.Executor) cql.Executor) *ring {
	t.Helper()
	rng := testseed.Rand(t)
	port, err := bench.FreePort(n, rng)
	if err != nil {
		t.Fatal(err)
	}
	r := &ring{t: t, port: port}
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := 1; i <= n; i++ {
		opts := node.Options{Logger: logger, Seed: rng.Uint64()}
		if wrap != nil {
			opts.WrapExecutor = wrap(i)
		}
		cfg := node.Config{
			DataDirectory: filepath.Join(dir, fmt.Sprintf("node%d", i)),
			ListenAddress: fmt.Sprintf("127.0.0.%d", i),
			StoragePort:   r.port, NativeTransportPort: r.port + 1,
			Seeds:            []string{fmt.Sprintf("127.0.0.1:%d", r.port)},
			NumTokens:        8,
			GossipIntervalMS: 100, PhiConvictThreshold: 12,
			CounterWriteTimeoutMS: 2000,
		}
		nd, err := node.Start(cfg, opts)
		if err != nil {
			t.Fatalf("start node %d: %v", i, err)
		}
		r.nodes = append(r.nodes, nd)
		r.cfgs = append(r.cfgs, cfg)
		r.opts = append(r.opts, opts)
	}
	t.Cleanup(func() {
		for _, nd := range r.nodes {
			if nd != nil {
				nd.Stop()
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		up := 0
		for _, p := range r.nodes[0].Gossip().Nodes() {
			if p.Up {
				up++
			}
		}
		if up == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ring not up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

func (r *ring) cluster() *gocql.ClusterConfig {
	c := gocql.NewCluster("127.0.0.1")
	c.Port = r.port + 1
	c.Timeout = 10 * time.Second
	c.ConnectTimeout = 5 * time.Second
	return c
}

func (r *ring) session(c *gocql.ClusterConfig) *gocql.Session {
	r.t.Helper()
	s, err := c.CreateSession()
	if err != nil {
		r.t.Fatalf("gocql session: %v", err)
	}
	r.t.Cleanup(s.Close)
	return s
}

func exec(t *testing.T, s *gocql.Session, stmt string, values ...any) {
	t.Helper()
	if err := s.Query(stmt, values...).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

func counter(t *testing.T, s *gocql.Session, table, key string) int64 {
	t.Helper()
	var v int64
	if err := s.Query("SELECT c FROM ks."+table+" WHERE k = ?", key).Consistency(gocql.All).Scan(&v); err != nil && err != gocql.ErrNotFound {
		t.Fatalf("read %s/%s: %v", table, key, err)
	}
	return v
}

func requestCode(err error) int {
	if re, ok := err.(gocql.RequestError); ok {
		return re.Code()
	}
	return -1
}

// TestGocqlDefaultAndTokenAware connects gocql with its default cluster
// configuration and with TokenAwareHostPolicy, discovers the three hosts,
// creates keyspaces and counter tables (with and without the FBF), runs
// simple, prepared and batched counter updates at several consistency
// levels, reads them back, and checks the errors of bad statements.
func TestGocqlDefaultAndTokenAware(t *testing.T) {
	r := startRing(t, 3, nil)
	for _, tokenAware := range []bool{false, true} {
		t.Run(fmt.Sprintf("tokenaware=%v", tokenAware), func(t *testing.T) {
			c := r.cluster()
			var mu sync.Mutex
			hosts := map[string]bool{}
			c.HostFilter = gocql.HostFilterFunc(func(h *gocql.HostInfo) bool {
				mu.Lock()
				hosts[h.ConnectAddress().String()] = true
				mu.Unlock()
				return true
			})
			if tokenAware {
				c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
			}
			s := r.session(c)
			mu.Lock()
			if len(hosts) != 3 {
				t.Errorf("gocql discovered hosts %v, want 127.0.0.1-3", hosts)
			}
			mu.Unlock()
			exec(t, s, `CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
			exec(t, s, `CREATE TABLE IF NOT EXISTS ks.plain (k text PRIMARY KEY, c counter)`)
			exec(t, s, `CREATE TABLE IF NOT EXISTS ks.idem (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf', 'target_fpp': '0.0001'}`)
			key := fmt.Sprintf("key-%v", tokenAware)
			want := int64(0)
			for i, cl := range []gocql.Consistency{gocql.One, gocql.Quorum, gocql.All, gocql.LocalQuorum, gocql.Two} {
				for _, table := range []string{"plain", "idem"} {
					// Literal (no bind values) and prepared (bind values) forms.
					if err := s.Query(fmt.Sprintf("UPDATE ks.%s SET c = c + %d WHERE k = '%s'", table, i+1, key)).Consistency(cl).Exec(); err != nil {
						t.Fatalf("literal update at %v: %v", cl, err)
					}
					if err := s.Query("UPDATE ks."+table+" SET c = c + ? WHERE k = ?", int64(10), key).Consistency(cl).Exec(); err != nil {
						t.Fatalf("prepared update at %v: %v", cl, err)
					}
				}
				want += int64(i+1) + 10
			}
			b := s.NewBatch(gocql.CounterBatch)
			for i := 0; i < 50; i++ {
				b.Query("UPDATE ks.plain SET c = c + 1 WHERE k = ?", key)
			}
			if err := s.ExecuteBatch(b); err != nil {
				t.Fatalf("counter batch: %v", err)
			}
			if got := counter(t, s, "plain", key); got != want+50 {
				t.Errorf("plain counter = %d, want %d", got, want+50)
			}
			if got := counter(t, s, "idem", key); got != want {
				t.Errorf("FBF counter (updates without op ids) = %d, want %d", got, want)
			}
			// Bad statements get Cassandra's errors.
			for _, bad := range []struct {
				stmt string
				code int
			}{
				{"UPDTE ks.plain SET c = c + 1 WHERE k = 'x'", 0x2000},
				{"UPDATE ks.plain USING TIMESTAMP 5 SET c = c + 1 WHERE k = 'x'", 0x2200},
				{"UPDATE ks.nope SET c = c + 1 WHERE k = 'x'", 0x2200},
				{"CREATE TABLE ks.mixed (k text PRIMARY KEY, c counter, v int)", 0x2200},
			} {
				if err := s.Query(bad.stmt).Exec(); requestCode(err) != bad.code {
					t.Errorf("%q: %v (code %#x), want code %#x", bad.stmt, err, requestCode(err), bad.code)
				}
			}
			lb := s.NewBatch(gocql.LoggedBatch)
			lb.Query("UPDATE ks.plain SET c = c + 1 WHERE k = 'x'")
			if err := s.ExecuteBatch(lb); requestCode(err) != 0x2200 {
				t.Errorf("counter in a logged batch: %v, want Invalid", err)
			}
		})
	}
}

// TestTokenAwareRoutesToOwner: for random keys of an RF = 1 keyspace, the
// host gocql's token-aware policy sends an update to is the key's owner by
// idemkv's ring.
func TestTokenAwareRoutesToOwner(t *testing.T) {
	r := startRing(t, 3, nil)
	c := r.cluster()
	c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	s := r.session(c)
	exec(t, s, `CREATE KEYSPACE ks1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`)
	exec(t, s, `CREATE TABLE ks1.t (k blob PRIMARY KEY, c counter)`)
	// Let the driver learn the new keyspace's replication.
	if _, err := s.KeyspaceMetadata("ks1"); err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{} // host id → IP
	for i, nd := range r.nodes {
		owners[nd.HostID()] = fmt.Sprintf("127.0.0.%d", i+1)
	}
	def, _ := r.nodes[0].Schema().Table("ks1", "t")
	rng := testseed.Rand(t)
	for i := 0; i < 200; i++ {
		key := make([]byte, 1+rng.IntN(40))
		for j := range key {
			key[j] = byte(rng.IntN(256)) // bytes ≥ 0x80 exercise the sign-extended tail
		}
		var got string
		q := s.Query("UPDATE ks1.t SET c = c + 1 WHERE k = ?", key).Observer(observer(func(o gocql.ObservedQuery) {
			got = o.Host.ConnectAddress().String()
		}))
		if err := q.Exec(); err != nil {
			t.Fatal(err)
		}
		st, err := r.nodes[0].Schema().Strategy(def.ID)
		if err != nil {
			t.Fatal(err)
		}
		m := r.nodes[0].ClusterMetadata()
		owner := owners[st.Replicas(m, idring.Token(key))[0].ID]
		if got != owner {
			t.Fatalf("key %x: gocql sent the update to %s, idemkv's owner is %s", key, got, owner)
		}
	}
}

type observer func(gocql.ObservedQuery)

func (o observer) ObserveQuery(_ context.Context, q gocql.ObservedQuery) { o(q) }
