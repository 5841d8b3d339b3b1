package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/coltype/handoffcol"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/schema"
)

// tcpRing is a ring of in-process nodes that talk over real TCP on
// 127.0.0.1, each on its own free port.
type tcpRing struct {
	t     *testing.T
	seed  uint64
	dir   string
	cfgs  []Config
	mu    sync.Mutex // nodes: the load reads it while a node is added
	nodes []*Node
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newTCPRing starts n nodes (node 1 is the seed) and waits until they see
// each other up.
func newTCPRing(t *testing.T, n int) *tcpRing {
	t.Helper()
	return newTCPRingWith(t, n, nil)
}

// newTCPRingWith is newTCPRing with tweak applied to every node's config.
func newTCPRingWith(t *testing.T, n int, tweak func(*Config)) *tcpRing {
	t.Helper()
	r := &tcpRing{t: t, seed: testseed.Seed(t), dir: t.TempDir()}
	t.Cleanup(func() {
		for _, nd := range r.nodes {
			if nd != nil {
				nd.Stop()
			}
		}
	})
	for i := 1; i <= n; i++ {
		r.add(tweak)
		r.start(i)
	}
	r.waitUp(n)
	return r
}

// add appends a node's configuration (not started); it returns its index.
func (r *tcpRing) add(tweak func(*Config)) int {
	i := len(r.cfgs) + 1
	seedPort := 0
	if i > 1 {
		seedPort = r.cfgs[0].StoragePort
	}
	port := freePort(r.t)
	if i == 1 {
		seedPort = port
	}
	cfg := Config{
		DataDirectory: filepath.Join(r.dir, fmt.Sprintf("node%d", i)),
		ListenAddress: "127.0.0.1", StoragePort: port,
		Seeds:     []string{"127.0.0.1:" + strconv.Itoa(seedPort)},
		NumTokens: 8, GossipIntervalMS: 50, PhiConvictThreshold: 12, HintDeliveryMS: 50,
		CounterWriteTimeoutMS: 1500, ReadTimeoutMS: 3000, CommitLogSync: "batch",
		StartNativeTransport: new(bool), AdminPort: -1,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	r.cfgs = append(r.cfgs, cfg)
	r.mu.Lock()
	r.nodes = append(r.nodes, nil)
	r.mu.Unlock()
	return i
}

func (r *tcpRing) start(i int) {
	r.t.Helper()
	nd, err := Start(r.cfgs[i-1], Options{Logger: quiet(), Seed: r.seed + uint64(i)})
	if err != nil {
		r.t.Fatalf("start node %d: %v", i, err)
	}
	r.mu.Lock()
	r.nodes[i-1] = nd
	r.mu.Unlock()
}

func (r *tcpRing) node(i int) *Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[i-1]
}

func (r *tcpRing) waitFor(what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	r.t.Fatalf("timed out waiting for %s", what)
}

func (r *tcpRing) waitUp(want int) {
	r.waitFor(fmt.Sprintf("%d nodes up and normal everywhere", want), func() bool {
		r.mu.Lock()
		nodes := slices.Clone(r.nodes)
		r.mu.Unlock()
		for _, nd := range nodes {
			if nd == nil {
				continue
			}
			up := 0
			for _, p := range nd.Gossip().Nodes() {
				if p.Up && p.Status == gossip.StatusNormal {
					up++
				}
			}
			if up != want {
				return false
			}
		}
		return true
	})
}

// createTables makes keyspace ks at rf with a vanilla table (id 42) and an
// FBF one (id 43) through node 1, and waits until every node has them.
func (r *tcpRing) createTables(rf int) {
	r.t.Helper()
	n1 := r.node(1)
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": strconv.Itoa(rf)}}, false); err != nil {
		r.t.Fatal(err)
	}
	for _, def := range []coltype.TableDef{
		{ID: 42, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}},
		{ID: 43, Keyspace: "ks", Name: "f", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
			Options: map[string]string{counter.IdempotenceOption: `{"class": "fbf"}`}},
	} {
		if err := n1.Schema().CreateTable(def, false); err != nil {
			r.t.Fatal(err)
		}
	}
	r.waitFor("tables on every node", func() bool {
		for _, nd := range r.nodes {
			if nd != nil {
				if _, ok := nd.Schema().Table("ks", "f"); !ok {
					return false
				}
			}
		}
		return true
	})
}

// ledger is what a load acknowledged per table and key, and the updates
// whose outcome it does not know (timeouts).
type ledger struct {
	mu        sync.Mutex
	acked     map[uint64]map[string]int64
	uncertain map[uint64]map[string]int64
	n, failed atomic.Int64
}

func newLedger() *ledger {
	return &ledger{acked: map[uint64]map[string]int64{42: {}, 43: {}}, uncertain: map[uint64]map[string]int64{42: {}, 43: {}}}
}

// load runs writers through the nodes via (by index) until ctx ends:
// increments of 1..3 on keys k(from)..k(to-1) of both tables at QUORUM,
// FBF ones with unique op ids (writer ids from first).
// loadColdThenHot writes keys k0..k(keys/2-1) through nodes 1–3 for half a
// second only, then returns while k(keys/2)..k(keys-1) go on being written
// until stop; wg waits for those writers.
func (r *tcpRing) loadColdThenHot(l *ledger, keys, writers int) (stop func(), wg *sync.WaitGroup) {
	cold, stopCold := context.WithCancel(context.Background())
	wgCold := r.load(cold, l, []int{1, 2, 3}, 0, keys/2, 0, writers)
	ctx, stop := context.WithCancel(context.Background())
	wg = r.load(ctx, l, []int{1, 2, 3}, keys/2, keys, writers, writers)
	time.Sleep(500 * time.Millisecond)
	stopCold()
	wgCold.Wait()
	return stop, wg
}

func (r *tcpRing) load(ctx context.Context, l *ledger, via []int, from, to, first, writers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := first; w < first+writers; w++ {
		rng := rand.New(rand.NewPCG(r.seed, uint64(w)))
		wg.Go(func() {
			for seq := uint64(0); ctx.Err() == nil; seq++ {
				table := uint64(42 + rng.IntN(2))
				key := fmt.Sprintf("k%d", from+rng.IntN(to-from))
				delta := int64(1 + rng.IntN(3))
				u := coltype.Update{Table: table, Key: []byte(key), Column: "c", Delta: delta}
				if table == 43 {
					u.HasOp, u.OpTime = true, time.Now().UnixNano()
					binary.BigEndian.PutUint64(u.OpID[:], uint64(w)+1)
					binary.BigEndian.PutUint64(u.OpID[8:], seq)
				}
				nd := r.node(via[rng.IntN(len(via))])
				wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				err := nd.Coordinator().CounterWrite(wctx, u, coordinator.Quorum)
				cancel()
				l.mu.Lock()
				switch {
				case err == nil:
					l.acked[table][key] += delta
					l.n.Add(1)
				case isUnavailable(err):
					// nothing applied
				default:
					l.uncertain[table][key] += delta
					l.failed.Add(1)
				}
				l.mu.Unlock()
			}
		})
	}
	return &wg
}

func isUnavailable(err error) bool {
	var un *coordinator.UnavailableError
	return errors.As(err, &un)
}

// value reads a key through node i at a consistency level.
func (r *tcpRing) value(i int, table uint64, key string, cl coordinator.ConsistencyLevel) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nd := r.node(i)
	rw, found, err := nd.Coordinator().Read(ctx, table, []byte(key), cl)
	if err != nil || !found {
		return 0, err
	}
	cell, ok := rw.Cell("c")
	if !ok {
		return 0, nil
	}
	return nd.Replica().CellValue(table, cell)
}

// check reads every key through the nodes via at cl until each holds at
// least its acknowledged sum and at most that plus its uncertain updates,
// for up to wait; it returns the keys that do not and the increments they
// miss.
func (r *tcpRing) check(l *ledger, via []int, keys int, cl coordinator.ConsistencyLevel, wait time.Duration) (bad []string, missing int64) {
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		bad, missing = nil, 0
		for _, i := range via {
			for _, table := range []uint64{42, 43} {
				for k := range keys {
					key := fmt.Sprintf("k%d", k)
					v, err := r.value(i, table, key, cl)
					acked, unc := l.acked[table][key], l.uncertain[table][key]
					if err != nil || v < acked || v > acked+unc {
						bad = append(bad, fmt.Sprintf("node %d table %d %s = %d (err %v), acked %d, uncertain %d", i, table, key, v, err, acked, unc))
						if err == nil && v < acked {
							missing += acked - v
						}
					}
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad, missing
		}
	}
}

// checkCopies reads every key's copy on each of its natural replicas
// among the nodes via (their own replicas, no coordinator, so that no read
// repair fills a copy in) until each holds at least its acknowledged sum,
// for up to wait; it returns the copies that do not.
func (r *tcpRing) checkCopies(l *ledger, via []int, keys, rf int, wait time.Duration) (bad []string, missing int64) {
	byID := map[string]int{}
	for _, i := range via {
		byID[r.node(i).HostID()] = i
	}
	s := ring.SimpleStrategy{RF: rf}
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		bad, missing = nil, 0
		m := r.node(via[0]).ClusterMetadata()
		for _, table := range []uint64{42, 43} {
			for k := range keys {
				key := fmt.Sprintf("k%d", k)
				for _, e := range s.Replicas(m, ring.Token([]byte(key))) {
					i, ok := byID[e.ID]
					if !ok {
						bad = append(bad, fmt.Sprintf("%s: replica %s is not one of the nodes", key, e.ID))
						continue
					}
					v, _, err := r.node(i).Replica().Value(table, []byte(key), "c")
					acked, unc := l.acked[table][key], l.uncertain[table][key]
					if err != nil || v < acked || v > acked+unc {
						bad = append(bad, fmt.Sprintf("node %d's copy of table %d %s = %d (err %v), acked %d, uncertain %d", i, table, key, v, err, acked, unc))
						if err == nil && v < acked {
							missing += acked - v
						}
					}
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad, missing
		}
	}
}

// joinUnderLoad runs a 3-node ring at RF 2 under load while a 4th node
// starts, and returns the ring and the ledger once the load is stopped.
func joinUnderLoad(t *testing.T, autoBootstrap bool) (*tcpRing, *ledger, int, time.Duration) {
	const keys, writers = 200, 4
	r := newTCPRing(t, 3)
	r.createTables(2)
	l := newLedger()
	// Keys k0..k99 are written before the join only: the new node can
	// have them only by streaming (a vanilla counter's replication carries
	// the leader's whole shard, so keys written during the join would
	// reach it anyway). Keys k100..k199 are written throughout.
	stop, wg := r.loadColdThenHot(l, keys, writers)
	defer stop()
	i := r.add(func(c *Config) { c.AutoBootstrap = &autoBootstrap })
	sawJoining := make(chan bool, 1)
	go func() {
		// nodetool status's UJ: node 1 sees the new node joining.
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			for _, p := range r.node(1).Status() {
				if p.Addr == r.cfgs[i-1].PeerAddr() && p.Status == string(gossip.StatusJoining) && p.Up {
					sawJoining <- true
					return
				}
			}
		}
		sawJoining <- false
	}()
	began := time.Now()
	r.start(i)
	took := time.Since(began)
	if self := r.node(i).Gossip().Self().Status; self != gossip.StatusNormal {
		t.Fatalf("node %d is %s after Start, want normal", i, self)
	}
	if autoBootstrap && !<-sawJoining {
		t.Errorf("node 1 never saw node %d joining (UJ)", i)
	}
	time.Sleep(500 * time.Millisecond) // load after the join too
	stop()
	wg.Wait()
	if l.n.Load() == 0 {
		t.Fatal("no write acknowledged")
	}
	return r, l, keys, took
}

// TestBootstrapStreamsUnderLoad: a 4th node bootstraps into a 3-node ring
// at RF 2 under a concurrent counter load (vanilla and FBF): once it is
// normal, every key read at ONE through it holds every acknowledged
// increment.
func TestBootstrapStreamsUnderLoad(t *testing.T) {
	r, l, keys, took := joinUnderLoad(t, true)
	st := r.node(4).StreamStats()
	t.Logf("bootstrap took %v: %d ranges, %d rows, %d cells, %d bytes streamed; %d writes acknowledged, %d uncertain",
		took, st.RangesIn, st.RowsIn, st.CellsIn, st.BytesIn, l.n.Load(), l.failed.Load())
	if bad, missing := r.check(l, []int{4}, keys, coordinator.One, 10*time.Second); len(bad) > 0 {
		for i := 1; i <= 4; i++ {
			t.Logf("node %d: %+v", i, r.node(i).Coordinator().Stats())
		}
		cb, _ := r.checkCopies(l, []int{1, 2, 3, 4}, keys, 2, 0)
		t.Logf("copies: %s", strings.Join(cb, "; "))
		for _, line := range cb {
			var i int
			var table uint64
			var key string
			fmt.Sscanf(line, "node %d's copy of table %d %s", &i, &table, &key)
			for j := 1; j <= 4; j++ {
				c, ok, _ := r.node(j).Replica().Read(table, []byte(key), "c")
				ctx, _ := counters.Decode(c.Value)
				t.Logf("  %s table %d node %d (%s) found %v: %v", key, table, j, r.node(j).HostID()[:6], ok, ctx)
			}
		}
		t.Fatalf("%d reads at ONE through the new node are wrong (%d acknowledged increments missing), e.g. %s", len(bad), missing, strings.Join(bad[:min(5, len(bad))], "; "))
	}
	if st.RowsIn == 0 {
		t.Fatal("nothing streamed")
	}
	// Every node converges on the new ring.
	r.waitUp(4)
}

// TestBootstrapOffMissesIncrements is the control of
// TestBootstrapStreamsUnderLoad: with auto_bootstrap false the new node
// streams nothing, and reads at ONE through it miss acknowledged
// increments, which the check above would catch.
func TestBootstrapOffMissesIncrements(t *testing.T) {
	r, l, keys, _ := joinUnderLoad(t, false)
	if st := r.node(4).StreamStats(); st.RowsIn != 0 {
		t.Fatalf("streamed %d rows with auto_bootstrap false", st.RowsIn)
	}
	bad, missing := r.check(l, []int{4}, keys, coordinator.One, time.Second)
	if missing == 0 {
		t.Fatalf("no increment missed without streaming (%d bad reads): the bootstrap test would not catch a missing stream", len(bad))
	}
	t.Logf("without streaming, reads at ONE through the new node miss %d acknowledged increments over %d keys", missing, len(bad))
}

// TestDecommissionUnderLoad: one node of 4 (RF 2) is decommissioned under
// load; afterwards every acknowledged increment is readable at ALL and at
// QUORUM from the remaining nodes, which no longer list it.
func TestDecommissionUnderLoad(t *testing.T) {
	const keys, writers = 200, 4
	r := newTCPRing(t, 4)
	r.createTables(2)
	l := newLedger()
	// As in joinUnderLoad: k0..k99 before the decommission only, k100..
	// k199 throughout.
	stop, wg := r.loadColdThenHot(l, keys, writers)
	defer stop()
	leaving := r.node(4)
	sawLeaving := make(chan bool, 1)
	go func() {
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			for _, p := range r.node(1).Status() {
				if p.HostID == leaving.HostID() && p.Status == string(gossip.StatusLeaving) {
					sawLeaving <- true
					return
				}
			}
		}
		sawLeaving <- false
	}()
	began := time.Now()
	dctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	err := leaving.Decommission(dctx)
	cancel()
	if err != nil {
		t.Fatalf("decommission: %v", err)
	}
	took := time.Since(began)
	if !<-sawLeaving {
		t.Error("node 1 never saw node 4 leaving (UL)")
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	st := leaving.StreamStats()
	t.Logf("decommission took %v: %d ranges, %d rows, %d cells, %d bytes streamed; %d writes acknowledged, %d uncertain",
		took, st.RangesOut, st.RowsOut, st.CellsOut, st.BytesOut, l.n.Load(), l.failed.Load())
	if err := leaving.Stop(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.nodes[3] = nil
	r.mu.Unlock()
	r.waitFor("node 4 out of every ring view", func() bool {
		for i := 1; i <= 3; i++ {
			if len(r.node(i).ClusterMetadata().Endpoints()) != 3 {
				return false
			}
			for _, p := range r.node(i).Status() {
				if p.HostID == leaving.HostID() {
					return false
				}
			}
		}
		return true
	})
	// Every copy first: reads at ALL would repair a copy streaming missed.
	if bad, missing := r.checkCopies(l, []int{1, 2, 3}, keys, 2, 10*time.Second); len(bad) > 0 {
		t.Fatalf("%d copies on the remaining replicas are short (%d acknowledged increments missing), e.g. %s", len(bad), missing, strings.Join(bad[:min(5, len(bad))], "; "))
	}
	for _, cl := range []coordinator.ConsistencyLevel{coordinator.All, coordinator.Quorum} {
		if bad, missing := r.check(l, []int{1, 2, 3}, keys, cl, 10*time.Second); len(bad) > 0 {
			t.Fatalf("at %v, %d reads are wrong (%d acknowledged increments missing), e.g. %s", cl, len(bad), missing, strings.Join(bad[:min(5, len(bad))], "; "))
		}
	}
	if st.RowsOut == 0 {
		t.Fatal("nothing streamed")
	}
	// A decommissioned node does not come back.
	if _, err := Start(r.cfgs[3], Options{Logger: quiet(), Seed: r.seed + 4}); err == nil || !strings.Contains(err.Error(), "decommissioned") {
		t.Fatalf("restart of a decommissioned node: %v, want a refusal", err)
	}
}

// TestDecommissionRefusedBelowRF: decommissioning one node of 3 that hold
// a keyspace at RF 3 is refused with Cassandra's message, and changes
// nothing.
func TestDecommissionRefusedBelowRF(t *testing.T) {
	r := newTCPRing(t, 3)
	r.createTables(3)
	err := r.node(3).Decommission(context.Background())
	if !errors.Is(err, ErrDecommissionRefused) || !strings.Contains(err.Error(), "Not enough live nodes to maintain replication factor in keyspace ks (RF = 3, N = 3)") {
		t.Fatalf("decommission at RF 3 of 3 nodes: %v", err)
	}
	if st := r.node(3).Gossip().Self().Status; st != gossip.StatusNormal {
		t.Fatalf("status after a refused decommission = %s", st)
	}
	if got := len(r.node(1).ClusterMetadata().Endpoints()); got != 3 {
		t.Fatalf("ring has %d nodes after a refused decommission", got)
	}
}

// fbfRuleTables are the FBF tables of the retry tests: one per leader rule,
// each remembering op ids for a minute, so that a retry after a range
// movement still falls within the filters' window however slow the
// movement.
var fbfRuleTables = []struct {
	id   uint64
	rule string
}{{44, "first"}, {45, "random"}}

// createFBFRuleTables makes keyspace ks at rf with fbfRuleTables through
// node 1, and waits until every node has them.
func (r *tcpRing) createFBFRuleTables(rf int) {
	r.t.Helper()
	n1 := r.node(1)
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": strconv.Itoa(rf)}}, false); err != nil {
		r.t.Fatal(err)
	}
	for _, tb := range fbfRuleTables {
		def := coltype.TableDef{ID: tb.id, Keyspace: "ks", Name: "f_" + tb.rule, Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
			Options: map[string]string{counter.IdempotenceOption: fmt.Sprintf(`{"class": "fbf", "leader": %q, "retry_horizon": "60s"}`, tb.rule)}}
		if err := n1.Schema().CreateTable(def, false); err != nil {
			r.t.Fatal(err)
		}
	}
	r.waitFor("tables on every node", func() bool {
		for _, nd := range r.nodes {
			if nd != nil {
				if _, ok := nd.Schema().Table("ks", "f_random"); !ok {
					return false
				}
			}
		}
		return true
	})
}

// writeOps writes n updates with fresh op ids to each of fbfRuleTables,
// on keys k0..k(keys-1), through the nodes via at QUORUM, and returns those
// acknowledged and each table's acknowledged sums per key; an update that
// fails fails the test (the ring is quiet).
func (r *tcpRing) writeOps(rng *rand.Rand, via []int, n, keys int) ([]coltype.Update, map[uint64]map[string]int64) {
	r.t.Helper()
	var ops []coltype.Update
	sums := map[uint64]map[string]int64{}
	for _, tb := range fbfRuleTables {
		sums[tb.id] = map[string]int64{}
		for seq := range n {
			key := fmt.Sprintf("k%d", rng.IntN(keys))
			u := coltype.Update{Table: tb.id, Key: []byte(key), Column: "c", Delta: int64(1 + rng.IntN(3)),
				HasOp: true, OpTime: time.Now().UnixNano()}
			binary.BigEndian.PutUint64(u.OpID[:], rng.Uint64())
			binary.BigEndian.PutUint64(u.OpID[8:], uint64(seq))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := r.node(via[rng.IntN(len(via))]).Coordinator().CounterWrite(ctx, u, coordinator.Quorum)
			cancel()
			if err != nil {
				r.t.Fatalf("update %d of table %d: %v", seq, tb.id, err)
			}
			ops = append(ops, u)
			sums[tb.id][key] += u.Delta
		}
	}
	return ops, sums
}

// retryOps retries every op through the nodes via at QUORUM and returns,
// per table, how many retries the leaders dismissed and how many updates
// node lead (0: none) led meanwhile.
func (r *tcpRing) retryOps(rng *rand.Rand, ops []coltype.Update, via []int, lead int) (dismissed, led map[uint64]int) {
	r.t.Helper()
	dismissed, led = map[uint64]int{}, map[uint64]int{}
	for _, tb := range fbfRuleTables {
		var before uint64
		if lead > 0 {
			before = r.node(lead).Coordinator().Stats().WritesLed
		}
		for _, op := range ops {
			if op.Table != tb.id {
				continue
			}
			ctx, count := coordinator.WithDismissals(context.Background())
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := r.node(via[rng.IntN(len(via))]).Coordinator().CounterWrite(ctx, op, coordinator.Quorum)
			cancel()
			if err != nil {
				r.t.Fatalf("retry of an update of table %d: %v", tb.id, err)
			}
			dismissed[tb.id] += count()
		}
		if lead > 0 {
			led[tb.id] = int(r.node(lead).Coordinator().Stats().WritesLed - before)
		}
	}
	return dismissed, led
}

// checkSums reads every key of fbfRuleTables through each node of via at
// cl and returns the reads that differ from the acknowledged sums.
func (r *tcpRing) checkSums(sums map[uint64]map[string]int64, via []int, keys int, cl coordinator.ConsistencyLevel) (bad []string, over int64) {
	for _, i := range via {
		for _, tb := range fbfRuleTables {
			for k := range keys {
				key := fmt.Sprintf("k%d", k)
				v, err := r.value(i, tb.id, key, cl)
				if want := sums[tb.id][key]; err != nil || v != want {
					bad = append(bad, fmt.Sprintf("node %d table %d (%s) %s = %d (err %v), acknowledged %d", i, tb.id, tb.rule, key, v, err, want))
					if err == nil && v > want {
						over += v - want
					}
				}
			}
		}
	}
	return bad, over
}

// opsThenJoin starts a 3-node ring with fbfRuleTables at RF 2, writes n
// updates with op ids to each (keys k0..k(keys-1)), then bootstraps a 4th
// node and waits until every coordinator routes with the new ring.
func opsThenJoin(t *testing.T, salt uint64, keys, n int) (*tcpRing, *rand.Rand, []coltype.Update, map[uint64]map[string]int64) {
	t.Helper()
	r := newTCPRing(t, 3)
	r.createFBFRuleTables(2)
	rng := rand.New(rand.NewPCG(r.seed, salt))
	ops, sums := r.writeOps(rng, []int{1, 2, 3}, n, keys)
	r.start(r.add(nil))
	r.waitUp(4)
	return r, rng, ops, sums
}

// TestBootstrapRetriesDismissed: updates with op ids acknowledged by a
// 3-node ring at RF 2, on an FBF table of each leader rule, are retried
// once a 4th node has bootstrapped and leads some of them (it streamed
// their cells, not their op ids): every retry is dismissed, and every read
// equals the acknowledged sum. Without the fix (the new node's filter
// lacks the op ids and it leads without asking anyone), the retries it
// leads are counted again.
func TestBootstrapRetriesDismissed(t *testing.T) {
	const keys, n = 60, 150
	r, rng, ops, sums := opsThenJoin(t, 0xb007, keys, n)
	dismissed, led := r.retryOps(rng, ops, []int{1, 2, 3, 4}, 4)
	for j := 1; j <= 4; j++ {
		t.Logf("node %d: %+v", j, r.node(j).Coordinator().Stats())
	}
	for _, tb := range fbfRuleTables {
		t.Logf("leader %s: %d retries, %d dismissed, %d led by the new node", tb.rule, n, dismissed[tb.id], led[tb.id])
		if led[tb.id] == 0 {
			t.Errorf("leader %s: the new node led none of the retries: the test would not catch a filter it lacks", tb.rule)
		}
	}
	for _, tb := range fbfRuleTables {
		if dismissed[tb.id] != n {
			t.Errorf("leader %s: %d of %d retries dismissed", tb.rule, dismissed[tb.id], n)
		}
	}
	for _, cl := range []coordinator.ConsistencyLevel{coordinator.All, coordinator.One} {
		via := []int{1}
		if cl == coordinator.One {
			via = []int{4}
		}
		if bad, over := r.checkSums(sums, via, keys, cl); len(bad) > 0 {
			t.Errorf("at %v, %d reads differ from the acknowledged sums (%d over-counted), e.g. %s", cl, len(bad), over, strings.Join(bad[:min(5, len(bad))], "; "))
		}
	}
}

// TestBootstrapRetriesDismissedAfterRestart is TestBootstrapRetriesDismissed
// with the new node restarted (a clean stop) after it joined, within the
// filter window: its memory of the range movement must survive the restart,
// or the retries it leads of updates acknowledged before it joined are
// counted again (its filter never held their op ids: it streamed cells).
func TestBootstrapRetriesDismissedAfterRestart(t *testing.T) {
	const keys, n = 60, 150
	r, rng, ops, sums := opsThenJoin(t, 0xb008, keys, n)
	if err := r.node(4).Stop(); err != nil {
		t.Fatal(err)
	}
	r.start(4)
	r.waitUp(4)
	dismissed, led := r.retryOps(rng, ops, []int{1, 2, 3, 4}, 4)
	for _, tb := range fbfRuleTables {
		t.Logf("leader %s: %d retries, %d dismissed, %d led by the restarted new node", tb.rule, n, dismissed[tb.id], led[tb.id])
		if led[tb.id] == 0 {
			t.Errorf("leader %s: the new node led none of the retries: the test would not catch a filter it lacks", tb.rule)
		}
		if dismissed[tb.id] != n {
			t.Errorf("leader %s: %d of %d retries dismissed", tb.rule, dismissed[tb.id], n)
		}
	}
	if bad, over := r.checkSums(sums, []int{1}, keys, coordinator.All); len(bad) > 0 {
		t.Errorf("at ALL, %d reads differ from the acknowledged sums (%d over-counted), e.g. %s", len(bad), over, strings.Join(bad[:min(5, len(bad))], "; "))
	}
}

// TestDecommissionRetriesDismissed: updates with op ids acknowledged by a
// 4-node ring at RF 2, on an FBF table of each leader rule, are retried
// once one node is decommissioned: the nodes that took its ranges over
// (streamed cells, not op ids) lead some of them under the random rule
// (under first, at RF 2, the replica that remains leads: a gainer is
// always second), and every retry is dismissed, every read at ALL equal to
// the acknowledged sum.
func TestDecommissionRetriesDismissed(t *testing.T) {
	const keys, n = 60, 150
	r := newTCPRing(t, 4)
	r.createFBFRuleTables(2)
	rng := rand.New(rand.NewPCG(r.seed, 0xdec0))
	ops, sums := r.writeOps(rng, []int{1, 2, 3, 4}, n, keys)
	before := r.node(1).ClusterMetadata()
	leaving := r.node(4)
	dctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	err := leaving.Decommission(dctx)
	cancel()
	if err != nil {
		t.Fatalf("decommission: %v", err)
	}
	if err := leaving.Stop(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.nodes[3] = nil
	r.mu.Unlock()
	r.waitFor("node 4 out of every ring view", func() bool {
		for i := 1; i <= 3; i++ {
			if len(r.node(i).ClusterMetadata().Endpoints()) != 3 {
				return false
			}
		}
		return true
	})
	// The retries of ops on keys a remaining node gained, which it may lead.
	after, s := r.node(1).ClusterMetadata(), ring.SimpleStrategy{RF: 2}
	moved := map[uint64]int{}
	for _, u := range ops {
		was := s.Replicas(before, ring.Token(u.Key))
		for _, e := range s.Replicas(after, ring.Token(u.Key)) {
			if !hasEndpoint(was, e.ID) {
				moved[u.Table]++
			}
		}
	}
	asked := uint64(0)
	for j := 1; j <= 3; j++ {
		asked -= r.node(j).Coordinator().Stats().OpsAsked
	}
	dismissed, _ := r.retryOps(rng, ops, []int{1, 2, 3}, 0)
	for j := 1; j <= 3; j++ {
		st := r.node(j).Coordinator().Stats()
		asked += st.OpsAsked
		t.Logf("node %d: %+v", j, st)
	}
	for _, tb := range fbfRuleTables {
		t.Logf("leader %s: %d retries, %d on keys a remaining node gained, %d dismissed", tb.rule, n, moved[tb.id], dismissed[tb.id])
	}
	t.Logf("%d retries asked about (their leaders' filters lacked them)", asked)
	if moved[45] == 0 {
		t.Fatal("no retry on a key that moved: the test would not catch a filter a gainer lacks")
	}
	for _, tb := range fbfRuleTables {
		if dismissed[tb.id] != n {
			t.Errorf("leader %s: %d of %d retries dismissed", tb.rule, dismissed[tb.id], n)
		}
	}
	if bad, over := r.checkSums(sums, []int{1}, keys, coordinator.All); len(bad) > 0 {
		t.Errorf("%d reads at ALL differ from the acknowledged sums (%d over-counted), e.g. %s", len(bad), over, strings.Join(bad[:min(5, len(bad))], "; "))
	}
}

// TestBootstrapHandoffCatchUp: a handoff counter's updates are exchanges
// with natural replicas, which a joining node is not. 3 nodes at RF 2 hold
// a handoff table; a 4th node bootstraps, and once it has streamed every
// range, but before it is normal, more plain updates are made (on keys
// streamed already, and on keys first written now), until the replicas
// that served them have run their anti-entropy rounds among themselves.
// Once the new node is normal, every read at ONE through it (its own
// copy, where it is a replica) comes to hold every acknowledged increment
// within a few anti-entropy intervals: the other replicas' rounds include
// the pending replica. Without that, a cell that did not change after the
// join never reached it.
func TestBootstrapHandoffCatchUp(t *testing.T) {
	const keys, table = 40, 46
	const sync = 100 // ms, the anti-entropy interval
	r := newTCPRingWith(t, 3, func(c *Config) { c.HandoffSyncMS = sync })
	n1 := r.node(1)
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "2"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := n1.Schema().CreateTable(coltype.TableDef{ID: table, Keyspace: "ks", Name: "h", Columns: []coltype.ColumnDef{{Name: "c", Type: handoffcol.TypeName}}}, false); err != nil {
		t.Fatal(err)
	}
	r.waitFor("handoff table everywhere", func() bool {
		for i := 1; i <= 3; i++ {
			if _, ok := r.node(i).Schema().Table("ks", "h"); !ok {
				return false
			}
		}
		return true
	})
	rng := rand.New(rand.NewPCG(r.seed, 0x4a0d))
	sums := map[string]int64{}
	write := func(prefix string, n int) error {
		for range n {
			key := fmt.Sprintf("%s%d", prefix, rng.IntN(keys))
			delta := int64(1 + rng.IntN(3))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := r.node(1+rng.IntN(3)).Coordinator().CoordinatedWrite(ctx, table, []byte(key), "c", delta)
			cancel()
			if err != nil {
				return fmt.Errorf("update of %s: %w", key, err)
			}
			sums[key] += delta
		}
		return nil
	}
	if err := write("k", 150); err != nil {
		t.Fatal(err)
	}
	before := n1.ClusterMetadata()
	// converged reports whether every copy on the replicas of the 3-node
	// ring holds its key's sum: their anti-entropy rounds have run.
	converged := func() bool {
		byID := map[string]*Node{}
		for i := 1; i <= 3; i++ {
			byID[r.node(i).HostID()] = r.node(i)
		}
		for key, want := range sums {
			for _, e := range (ring.SimpleStrategy{RF: 2}).Replicas(before, ring.Token([]byte(key))) {
				if v, _, err := byID[e.ID].Replica().Value(table, []byte(key), "c"); err != nil || v != want {
					return false
				}
			}
		}
		return true
	}
	r.waitFor("the handoff copies to converge", converged)
	var hookErr error
	hook := func(nd *Node) {
		if hookErr = write("k", 100); hookErr == nil {
			hookErr = write("j", 100)
		}
		// The rounds of the replicas that served them have run (and,
		// without the pending replica in them, cleared the cells).
		r.waitFor("the handoff copies to converge while node 4 is joining", converged)
	}
	afterBootstrapStream.Store(&hook)
	defer afterBootstrapStream.Store(nil)
	i := r.add(func(c *Config) { c.HandoffSyncMS = sync })
	r.start(i)
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	after := r.node(4).ClusterMetadata()
	gained := 0
	for key := range sums {
		if hasEndpoint((ring.SimpleStrategy{RF: 2}).Replicas(after, ring.Token([]byte(key))), r.node(4).HostID()) {
			gained++
		}
	}
	if gained == 0 {
		t.Fatal("node 4 replicates none of the keys: the test would not catch a copy it lacks")
	}
	read := func() (bad []string) {
		for key, want := range sums {
			if v, err := r.value(4, table, key, coordinator.One); err != nil || v != want {
				bad = append(bad, fmt.Sprintf("%s = %d (err %v), acknowledged %d", key, v, err, want))
			}
		}
		slices.Sort(bad)
		return bad
	}
	bad := read()
	t.Logf("node 4 replicates %d of %d keys; right after the join, %d reads at ONE through it differ from the acknowledged sums", gained, len(sums), len(bad))
	for deadline := time.Now().Add(10 * time.Second); len(bad) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		bad = read()
	}
	if len(bad) > 0 {
		t.Fatalf("%d reads at ONE through the new node still differ from the acknowledged sums, e.g. %s", len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
	}
}
