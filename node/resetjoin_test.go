package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/schema"
)

// The observed-reset columns through a bootstrap and a decommission
// (docs/reset-counter.md, "Joining and leaving"): ks.r (c reset_counter,
// table 44) and ks.m (m map<text, reset_counter>, table 45) at RF 2.

const (
	rjCounter, rjMap = uint64(44), uint64(45)
	rjSampled        = 16 // keys s0.. : increments and resets with contexts
	rjPlain          = 6  // keys p0.. : increments and resets without contexts
)

func rjColumn(table uint64) string {
	if table == rjMap {
		return "m"
	}
	return "c"
}

// newResetTCPRing starts n nodes with a fast anti-entropy and creates the
// two tables at RF 2.
func newResetTCPRing(t *testing.T, n int) *tcpRing {
	t.Helper()
	r := newTCPRingWith(t, n, func(c *Config) { c.HandoffSyncMS = 50 })
	n1 := r.node(1)
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "2"}}, false); err != nil {
		t.Fatal(err)
	}
	for _, def := range []coltype.TableDef{
		{ID: rjCounter, Keyspace: "ks", Name: "r", Columns: []coltype.ColumnDef{{Name: "c", Type: resetcol.TypeName}}},
		{ID: rjMap, Keyspace: "ks", Name: "m", Columns: []coltype.ColumnDef{{Name: "m", Type: resetcol.MapTypeName}}},
	} {
		if err := n1.Schema().CreateTable(def, false); err != nil {
			t.Fatal(err)
		}
	}
	r.waitFor("tables on every node", func() bool {
		for _, nd := range r.nodes {
			if nd != nil {
				if _, ok := nd.Schema().Table("ks", "m"); !ok {
					return false
				}
			}
		}
		return true
	})
	return r
}

// rjBook is a run's own accounting, per table and key: increments
// acknowledged, increments whose outcome is unknown, and the values that
// resets with contexts cancelled (each read with its context, then
// deleted with it at ALL until acknowledged).
type rjBook struct {
	mu                        sync.Mutex
	acked, uncertain, sampled map[uint64]map[string]int64
	incs, samples, plains     atomic.Int64
}

func newRJBook() *rjBook {
	b := &rjBook{acked: map[uint64]map[string]int64{}, uncertain: map[uint64]map[string]int64{}, sampled: map[uint64]map[string]int64{}}
	for _, t := range []uint64{rjCounter, rjMap} {
		b.acked[t], b.uncertain[t], b.sampled[t] = map[string]int64{}, map[string]int64{}, map[string]int64{}
	}
	return b
}

// rjReplicas returns the nodes (indexes) that are a key's natural replicas
// in node via's view.
func (r *tcpRing) rjReplicas(via int, key string) []int {
	byID := map[string]int{}
	r.mu.Lock()
	for i, nd := range r.nodes {
		if nd != nil {
			byID[nd.HostID()] = i + 1
		}
	}
	r.mu.Unlock()
	var out []int
	for _, e := range (ring.SimpleStrategy{RF: 2}).Replicas(r.node(via).ClusterMetadata(), ring.Token([]byte(key))) {
		if i, ok := byID[e.ID]; ok {
			out = append(out, i)
		}
	}
	return out
}

// rjLocal reads a key's cell on node i's own replica: its value (a map's
// sum) and its reset context.
func (r *tcpRing) rjLocal(i int, table uint64, key string) (int64, []byte, error) {
	c, found, err := r.node(i).Replica().Read(table, []byte(key), rjColumn(table))
	if err != nil || !found {
		return 0, nil, err
	}
	v, err := resetcol.Type{}.Value(c)
	if err != nil {
		return 0, nil, err
	}
	ctx, err := resetcol.Type{}.ContextOf(c)
	return v, ctx, err
}

// rjLoad runs, until ctx ends, writers that increment every key through
// nodes via at QUORUM (map keys: element a or b), a sampler that reads a
// sampled key with its context on a replica that was a natural replica in
// the first ring and is one now and DELETEs it with that context at ALL
// until acknowledged, and a deleter that resets plain keys without a
// context at QUORUM.
func (r *tcpRing) rjLoad(ctx context.Context, b *rjBook, via []int, first map[string][]int, writers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	write := func(u coltype.Update, cl coordinator.ConsistencyLevel, rng *rand.Rand) error {
		wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return r.node(via[rng.IntN(len(via))]).Coordinator().CounterWrite(wctx, u, cl)
	}
	for w := range writers {
		rng := rand.New(rand.NewPCG(r.seed, uint64(100+w)))
		wg.Go(func() {
			for ctx.Err() == nil {
				table := rjCounter + uint64(rng.IntN(2))
				key := fmt.Sprintf("s%d", rng.IntN(rjSampled))
				if rng.IntN(4) == 0 {
					key = fmt.Sprintf("p%d", rng.IntN(rjPlain))
				}
				u := coltype.Update{Table: table, Key: []byte(key), Column: rjColumn(table), Delta: int64(1 + rng.IntN(3))}
				if table == rjMap {
					u.Element = string(rune('a' + rng.IntN(2)))
				}
				err := write(u, coordinator.Quorum, rng)
				b.mu.Lock()
				switch {
				case err == nil:
					b.acked[table][key] += u.Delta
					b.incs.Add(1)
				case isUnavailable(err):
				default:
					b.uncertain[table][key] += u.Delta
				}
				b.mu.Unlock()
			}
		})
	}
	rng := rand.New(rand.NewPCG(r.seed, 200))
	wg.Go(func() {
		for ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			table := rjCounter + uint64(rng.IntN(2))
			key := fmt.Sprintf("s%d", rng.IntN(rjSampled))
			var from []int
			for _, i := range r.rjReplicas(1, key) {
				if slices.Contains(first[key], i) {
					from = append(from, i)
				}
			}
			if len(from) == 0 {
				r.t.Errorf("key %s has no replica left from the first ring", key)
				return
			}
			v, rctx, err := r.rjLocal(from[rng.IntN(len(from))], table, key)
			if err != nil {
				r.t.Errorf("sample read of %s: %v", key, err)
				return
			}
			if v == 0 {
				continue
			}
			u := coltype.Update{Table: table, Key: []byte(key), Column: rjColumn(table), Delete: true, Context: rctx}
			for attempt := 0; ; attempt++ {
				err := write(u, coordinator.All, rng)
				if err == nil {
					break
				}
				if attempt == 50 {
					r.t.Errorf("DELETE of %s with its context never acknowledged: %v", key, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			b.mu.Lock()
			b.sampled[table][key] += v
			b.mu.Unlock()
			b.samples.Add(1)
		}
	})
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(r.seed, 300))
		for ctx.Err() == nil {
			time.Sleep(30 * time.Millisecond)
			table := rjCounter + uint64(rng.IntN(2))
			u := coltype.Update{Table: table, Key: fmt.Appendf(nil, "p%d", rng.IntN(rjPlain)), Column: rjColumn(table), Delete: true}
			if table == rjMap && rng.IntN(2) == 0 {
				u.Element = "a"
			}
			if write(u, coordinator.Quorum, rng) == nil {
				b.plains.Add(1)
			}
		}
	})
	return &wg
}

// rjCheck waits (up to wait) until, for every key, the natural replicas
// among nodes (node via's view) read the same value, and for each sampled
// key Σ sampled + that value lies between its acknowledged increments and
// those plus the uncertain ones; it returns what is still wrong.
func (r *tcpRing) rjCheck(b *rjBook, via int, wait time.Duration) (bad []string, missing int64) {
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		bad, missing = nil, 0
		for _, table := range []uint64{rjCounter, rjMap} {
			for k := range rjSampled + rjPlain {
				key := fmt.Sprintf("s%d", k)
				if k >= rjSampled {
					key = fmt.Sprintf("p%d", k-rjSampled)
				}
				var vals []string
				var v0 int64
				for n, i := range r.rjReplicas(via, key) {
					v, _, err := r.rjLocal(i, table, key)
					if err != nil {
						bad = append(bad, fmt.Sprintf("node %d table %d %s: %v", i, table, key, err))
					}
					vals = append(vals, fmt.Sprintf("node %d: %d", i, v))
					if n == 0 {
						v0 = v
					} else if v != v0 {
						bad = append(bad, fmt.Sprintf("table %d %s: replicas differ (%s)", table, key, strings.Join(vals, ", ")))
					}
				}
				if k >= rjSampled {
					continue
				}
				b.mu.Lock()
				acked, unc, s := b.acked[table][key], b.uncertain[table][key], b.sampled[table][key]
				b.mu.Unlock()
				if got := s + v0; got < acked || got > acked+unc {
					bad = append(bad, fmt.Sprintf("table %d %s: sampled %d + read %d = %d, acknowledged %d, uncertain %d (%s)", table, key, s, v0, got, acked, unc, strings.Join(vals, ", ")))
					if got < acked {
						missing += acked - got
					}
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad, missing
		}
	}
}

// rjFinal resets every plain key without a context at ALL, then adds 7 to
// each at ALL (a map key: 7 to element a), and waits until every natural
// replica reads 7: a reset-free final phase that the new replica must
// count exactly like the others.
func (r *tcpRing) rjFinal(via int) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, table := range []uint64{rjCounter, rjMap} {
		for k := range rjPlain {
			key := fmt.Appendf(nil, "p%d", k)
			u := coltype.Update{Table: table, Key: key, Column: rjColumn(table), Delete: true}
			if err := r.node(via).Coordinator().CounterWrite(ctx, u, coordinator.All); err != nil {
				return []string{fmt.Sprintf("final DELETE of %s: %v", key, err)}
			}
			u = coltype.Update{Table: table, Key: key, Column: rjColumn(table), Delta: 7}
			if table == rjMap {
				u.Element = "a"
			}
			if err := r.node(via).Coordinator().CounterWrite(ctx, u, coordinator.All); err != nil {
				return []string{fmt.Sprintf("final increment of %s: %v", key, err)}
			}
		}
	}
	var bad []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		bad = nil
		for _, table := range []uint64{rjCounter, rjMap} {
			for k := range rjPlain {
				key := "p" + strconv.Itoa(k)
				for _, i := range r.rjReplicas(via, key) {
					if v, _, err := r.rjLocal(i, table, key); err != nil || v != 7 {
						bad = append(bad, fmt.Sprintf("node %d table %d %s = %d (err %v), want 7", i, table, key, v, err))
					}
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad
		}
	}
}

// rjFirst is every sampled key's natural replicas in the first ring.
func (r *tcpRing) rjFirst() map[string][]int {
	out := map[string][]int{}
	for k := range rjSampled {
		key := fmt.Sprintf("s%d", k)
		out[key] = r.rjReplicas(1, key)
	}
	return out
}

// resetJoinUnderLoad runs the load on a 3-node ring while a 4th node
// starts (autoBootstrap: streams, or not), stops it, and checks.
func resetJoinUnderLoad(t *testing.T, autoBootstrap bool) (r *tcpRing, bad []string, missing int64) {
	r = newResetTCPRing(t, 3)
	b := newRJBook()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wg := r.rjLoad(ctx, b, []int{1, 2, 3}, r.rjFirst(), 4)
	time.Sleep(700 * time.Millisecond)
	i := r.add(func(c *Config) { c.HandoffSyncMS = 50; c.AutoBootstrap = &autoBootstrap })
	began := time.Now()
	r.start(i)
	took := time.Since(began)
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()
	st := r.node(i).StreamStats()
	t.Logf("seed %d: join took %v: %d ranges, %d rows, %d bytes streamed; %d increments acknowledged, %d samples, %d resets without context",
		r.seed, took, st.RangesIn, st.RowsIn, st.BytesIn, b.incs.Load(), b.samples.Load(), b.plains.Load())
	if b.incs.Load() == 0 || b.samples.Load() == 0 {
		t.Fatalf("seed %d: no load (%d increments, %d samples)", r.seed, b.incs.Load(), b.samples.Load())
	}
	r.waitUp(4)
	bad, missing = r.rjCheck(b, i, map[bool]time.Duration{true: 10 * time.Second, false: 2 * time.Second}[autoBootstrap])
	return r, bad, missing
}

// TestResetBootstrapUnderLoad: a 4th node bootstraps into a 3-node ring at
// RF 2 holding reset_counter and map<text, reset_counter> columns while
// clients increment, reset with contexts at ALL (sample and reset) and
// reset without contexts. Once the load stops, the natural replicas of
// every key, the new node included, read the same value; for the sampled
// keys Σ sampled + that value is the increments acknowledged (up to the
// uncertain ones); a final reset and a reset-free phase read exactly on
// every replica.
func TestResetBootstrapUnderLoad(t *testing.T) {
	r, bad, missing := resetJoinUnderLoad(t, true)
	if len(bad) > 0 {
		t.Fatalf("seed %d: %d wrong (%d acknowledged increments missing), e.g. %s", r.seed, len(bad), missing, strings.Join(bad[:min(6, len(bad))], "; "))
	}
	if st := r.node(4).StreamStats(); st.RowsIn == 0 {
		t.Fatalf("seed %d: nothing streamed", r.seed)
	}
	if bad := r.rjFinal(4); len(bad) > 0 {
		t.Fatalf("seed %d: final phase: %s", r.seed, strings.Join(bad[:min(6, len(bad))], "; "))
	}
}

// TestResetBootstrapOffIsCaught is the control of
// TestResetBootstrapUnderLoad: with auto_bootstrap false the new node
// adopts nothing, and the check finds its copies wrong.
func TestResetBootstrapOffIsCaught(t *testing.T) {
	r, bad, _ := resetJoinUnderLoad(t, false)
	if st := r.node(4).StreamStats(); st.RowsIn != 0 {
		t.Fatalf("seed %d: streamed %d rows with auto_bootstrap false", r.seed, st.RowsIn)
	}
	if len(bad) == 0 {
		t.Fatalf("seed %d: every check passed without streaming: the bootstrap test would not catch a missing stream", r.seed)
	}
	t.Logf("without streaming: %d wrong, e.g. %s", len(bad), bad[0])
}

// resetDecommissionUnderLoad decommissions node 4 of 4 under the load
// (through nodes 1–3), skipping the reset tables' streams when skip is
// set, and checks the remaining replicas (wait: how long the check may
// take to pass).
func resetDecommissionUnderLoad(t *testing.T, skip bool, wait time.Duration) (r *tcpRing, rowsOut uint64, bad []string, missing int64) {
	r = newResetTCPRing(t, 4)
	b := newRJBook()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wg := r.rjLoad(ctx, b, []int{1, 2, 3}, r.rjFirst(), 4)
	time.Sleep(700 * time.Millisecond)
	leaving := r.node(4)
	leaving.skipJoinable = skip
	began := time.Now()
	limit := 25 * time.Second
	if skip {
		limit = 10 * time.Second
	}
	dctx, cancel := context.WithTimeout(context.Background(), limit)
	err := leaving.Decommission(dctx)
	cancel()
	if err != nil && skip {
		// The leaving node's ops never reach the new owners, whose
		// channels have gaps: it cannot drain its outboxes.
		stop()
		wg.Wait()
		return r, 0, []string{fmt.Sprintf("decommission failed: %v", err)}, 0
	}
	if err != nil {
		t.Fatalf("seed %d: decommission: %v", r.seed, err)
	}
	took := time.Since(began)
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	st := leaving.StreamStats()
	t.Logf("seed %d: decommission took %v: %d ranges, %d rows, %d bytes streamed; %d increments acknowledged, %d samples, %d resets without context",
		r.seed, took, st.RangesOut, st.RowsOut, st.BytesOut, b.incs.Load(), b.samples.Load(), b.plains.Load())
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
	bad, missing = r.rjCheck(b, 1, wait)
	return r, st.RowsOut, bad, missing
}

// TestResetDecommissionUnderLoad: node 4 of 4 (RF 2) is decommissioned
// under the same load; afterwards the remaining natural replicas of every
// key read the same value, the sampled keys account exactly, and the
// final phase reads exactly.
func TestResetDecommissionUnderLoad(t *testing.T) {
	r, rows, bad, missing := resetDecommissionUnderLoad(t, false, 10*time.Second)
	if len(bad) > 0 {
		t.Fatalf("seed %d: %d wrong (%d acknowledged increments missing), e.g. %s", r.seed, len(bad), missing, strings.Join(bad[:min(6, len(bad))], "; "))
	}
	if rows == 0 {
		t.Fatalf("seed %d: nothing streamed", r.seed)
	}
	if bad := r.rjFinal(1); len(bad) > 0 {
		t.Fatalf("seed %d: final phase: %s", r.seed, strings.Join(bad[:min(6, len(bad))], "; "))
	}
}

// TestResetDecommissionSkipIsCaught is the control of
// TestResetDecommissionUnderLoad: a decommission that streams none of the
// reset tables leaves the new owners without the cells, and either the
// leaving node cannot drain its outboxes (the new owners' channels have
// gaps) or the check finds them wrong.
func TestResetDecommissionSkipIsCaught(t *testing.T) {
	r, _, bad, _ := resetDecommissionUnderLoad(t, true, 2*time.Second)
	if len(bad) == 0 {
		t.Fatalf("seed %d: every check passed without streaming: the decommission test would not catch a missing stream", r.seed)
	}
	t.Logf("without streaming: %d wrong, e.g. %s", len(bad), bad[0])
}
