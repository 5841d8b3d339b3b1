package node

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/schema"
	"github.com/idemkv/idemkv/sstable"
	"github.com/idemkv/idemkv/transport"
	"github.com/idemkv/idemkv/vfs"
)

var randomSteps = flag.Int("steps", 0, "TestRandomCluster: fault steps per subtest (default $IDEMKV_RANDOM_STEPS, else 30)")

// randomStepsFor returns the number of fault steps of TestRandomCluster.
func randomStepsFor(t *testing.T) int {
	if *randomSteps > 0 {
		return *randomSteps
	}
	if s := os.Getenv("IDEMKV_RANDOM_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("IDEMKV_RANDOM_STEPS=%q is not a non-negative integer", s)
		}
		return n
	}
	return 30
}

// Table ids of the random test: a vanilla counter table and an FBF one.
const (
	rtVanilla uint64 = 42
	rtFBF     uint64 = 43
	rtKeys           = 6 // keys per table
)

// TestRandomCluster runs 3 or 4 in-process nodes, each on its own in-memory
// filesystem (vfs.MemFS), under clients issuing counter updates (QUORUM
// mostly, some ONE and ALL) to a vanilla counter table and an FBF table
// (RF 3, op ids, timed-out updates retried with the same op id, at most 4
// attempts), while a seeded schedule injects faults: power cuts (the node's
// filesystem is replaced by its CrashClone, with and without torn unsynced
// appends, and the node restarted on it), clean restarts, flushes, disk
// faults on a crashed node's image (a listed commit log segment or SSTable
// component lost, a manifest corrupted: the node must refuse to start with
// an error naming the file; the file is then restored and the node
// started), partitions and message loss,
// duplication (except of counter-write requests: TCP never duplicates one,
// and a duplicate vanilla update counts twice by design) and reordering. Then
// everything is healed, every node restarted, in-doubt updates and hints
// settle, and every key is read at ALL and checked against the clients'
// ledger (see checkLedger): nothing acknowledged is lost, an FBF update is
// counted at most once, a vanilla one at most once per attempt, and every
// replica holds the value read.
//
// Subtests: batch, group and periodic (sync period 100 ms) commit log
// sync. Under periodic sync the check is the upper bound alone (a power cut
// may lose acknowledged updates the node held unsynced; shortfalls are
// logged); IDEMKV_RANDOM_PERIODIC_CRASH=0 runs periodic without power cuts,
// with the full check. (Power cuts under periodic sync were off by default
// while they over-counted FBF updates: TestFBFPeriodicLeaderPowerCut.)
//
// Clients may send through nodes that do not see every running node up yet
// (see staleViews) and start a retry only within rtRetryWindow of the first
// attempt, inside the FBF retry horizon.
//
// The seed is printed on failure; IDEMKV_SEED=<n> replays the schedule (the
// goroutines' interleaving is not replayed, so a replay is likely, not
// certain, to fail the same way). With the default 30 steps it takes about
// 10 s per subtest. To run it for hours, raise the steps and loop over
// fresh seeds, e.g.
//
//	go test -c -o /tmp/node.test ./node/
//	while IDEMKV_RANDOM_STEPS=400 /tmp/node.test -test.run '^TestRandomCluster$' -test.timeout 0; do :; done
//
// or pass -args -steps N to go test. IDEMKV_RANDOM_FAULTS chooses the fault
// kinds (see faultOn; every kind by default).
func TestRandomCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("long randomized test")
	}
	for _, mode := range []string{"batch", "group", "periodic"} {
		t.Run(mode, func(t *testing.T) {
			// Power cuts under periodic sync over-count FBF updates (see
			// the doc comment): off unless asked for.
			powerCuts := mode != "periodic" || os.Getenv("IDEMKV_RANDOM_PERIODIC_CRASH") != "0"
			runRandomCluster(t, mode, randomStepsFor(t), powerCuts)
		})
	}
}

// faultOn reports whether a fault kind of TestRandomCluster's schedule is
// enabled: $IDEMKV_RANDOM_FAULTS, a comma-separated subset of crash
// (power cuts), restart (clean), partition, loss (message loss,
// duplication, reordering), flush and disk (damaged crash images), enables
// those alone; unset or "all", every kind. Partitions and message loss were
// off by default while they over-counted FBF updates (a leader that applied
// an update whose replication they lost stayed up with it hinted, a retry
// sent to another leader counted it again, and the hints later delivered
// the first application too: 1 run of 8 failed, IDEMKV_SEED=
// 1795451988189914220, group); the leaders now settle such a conflict
// between them (coordinator/conflict.go).
func faultOn(kind string) bool {
	s := os.Getenv("IDEMKV_RANDOM_FAULTS")
	if s == "" || s == "all" {
		return true
	}
	return slices.Contains(strings.Split(s, ","), kind)
}

// ---- the ledger and its checker ----

type rtKey struct {
	table uint64
	key   string
}

// rtUpdate is one logical client update and what its attempts returned.
type rtUpdate struct {
	rtKey
	delta int64
	acked bool // some attempt was acknowledged
	// maybe counts the attempts whose outcome is unknown (a timeout, an
	// error other than Unavailable, or the coordinator crashed meanwhile).
	maybe int
	// For a failure's post-mortem (dumpKey): the op id (FBF) and each
	// attempt's coordinator, level, outcome and times.
	opID     [16]byte
	attempts []rtAttempt
}

// rtAttempt is one attempt of an update, for a failure's post-mortem.
type rtAttempt struct {
	node      int // coordinator, 0-based (-1: none was up)
	cl        coordinator.ConsistencyLevel
	res       int
	err       string
	sent, end time.Duration // since the run began
}

// rtBounds is what a counter may read given the ledger.
type rtBounds struct {
	lo, hi             int64
	acked, uncertain   int
	definitivelyFailed int
	ackedAfterRetry    int // acknowledged, after attempts of unknown outcome
}

// ledgerBounds folds the ledger into per-key bounds. An acknowledged
// update counts in lo; in hi it counts once on the FBF table (its op id
// makes every attempt one update) and once per attempt that may have
// applied on the vanilla table (a retry of a vanilla update is a new
// update). An uncertain update counts in hi only; a definitively failed one
// (every attempt Unavailable, or never sent) nowhere.
func ledgerBounds(ups []rtUpdate) map[rtKey]rtBounds {
	out := map[rtKey]rtBounds{}
	for _, u := range ups {
		b := out[u.rtKey]
		attempts := int64(u.maybe)
		if u.acked {
			attempts++
		}
		switch {
		case u.acked:
			b.acked++
			b.lo += u.delta
			if u.maybe > 0 {
				b.ackedAfterRetry++
			}
		case u.maybe > 0:
			b.uncertain++
		default:
			b.definitivelyFailed++
		}
		if u.table == rtFBF {
			attempts = min(attempts, 1)
		}
		b.hi += u.delta * attempts
		out[u.rtKey] = b
	}
	return out
}

// checkLedger compares the values read with the ledger; it returns one
// line per violation. checkLower off checks the upper bound alone.
func checkLedger(ups []rtUpdate, got map[rtKey]int64, checkLower bool) []string {
	var bad []string
	bounds := ledgerBounds(ups)
	keys := make([]rtKey, 0, len(bounds))
	for k := range bounds {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].table != keys[j].table {
			return keys[i].table < keys[j].table
		}
		return keys[i].key < keys[j].key
	})
	for _, k := range keys {
		b, v := bounds[k], got[k]
		if checkLower && v < b.lo {
			bad = append(bad, fmt.Sprintf("table %d key %s = %d, below the %d acknowledged (%d updates acked, %d uncertain): acknowledged updates lost",
				k.table, k.key, v, b.lo, b.acked, b.uncertain))
		}
		if v > b.hi {
			bad = append(bad, fmt.Sprintf("table %d key %s = %d, above %d = acknowledged %d + what %d uncertain updates may add (%d acknowledged after a retry, %d failed definitively): over-counted",
				k.table, k.key, v, b.hi, b.lo, b.uncertain, b.ackedAfterRetry, b.definitivelyFailed))
		}
	}
	return bad
}

// TestRandomClusterOracle checks the checker on a ledger made up by hand:
// exact values pass, a lost acknowledged update and an FBF update counted
// twice are caught.
func TestRandomClusterOracle(t *testing.T) {
	f := rtKey{rtFBF, "k0"}
	v := rtKey{rtVanilla, "k0"}
	ups := []rtUpdate{
		{rtKey: f, delta: 1, acked: true},
		{rtKey: f, delta: 1, acked: true, maybe: 2}, // acked at the third attempt: once
		{rtKey: f, delta: 1, maybe: 3},              // uncertain: 0 or 1
		{rtKey: f, delta: 1},                        // failed: 0
		{rtKey: v, delta: 5, acked: true, maybe: 1}, // 5 or 10
		{rtKey: v, delta: 3, maybe: 2},              // 0, 3 or 6
	}
	for _, ok := range []map[rtKey]int64{{f: 2, v: 5}, {f: 3, v: 16}} {
		if bad := checkLedger(ups, ok, true); len(bad) > 0 {
			t.Errorf("values %v flagged: %v", ok, bad)
		}
	}
	for _, wrong := range []map[rtKey]int64{{f: 1, v: 5}, {f: 4, v: 5}, {f: 2, v: 4}, {f: 2, v: 17}} {
		if bad := checkLedger(ups, wrong, true); len(bad) != 1 {
			t.Errorf("values %v: %d violations reported (%v), want 1", wrong, len(bad), bad)
		}
	}
	if bad := checkLedger(ups, map[rtKey]int64{f: 1, v: 0}, false); len(bad) != 0 {
		t.Errorf("upper bound alone flagged values below the lower bound: %v", bad)
	}
}

// plantedBugsCaught runs the checker on the real run's ledger with two
// planted bugs and fails the test if it misses either: an acknowledged FBF
// update the cluster never saw (as if an acknowledged update were lost;
// its delta is larger than what the uncertain updates added),
// and an FBF counter read one more than every uncertain update could add
// (as if an update were counted twice).
func plantedBugsCaught(t *testing.T, ups []rtUpdate, got map[rtKey]int64) {
	t.Helper()
	k := rtKey{rtFBF, "k0"}
	b := ledgerBounds(ups)[k]
	// Its delta exceeds what the uncertain updates that did apply add.
	lost := append(slices.Clone(ups), rtUpdate{rtKey: k, delta: got[k] - b.lo + 1, acked: true})
	if bad := checkLedger(lost, got, true); len(bad) == 0 {
		t.Errorf("oracle self-check: an acknowledged update missing from the cluster was not reported")
	}
	twice := map[rtKey]int64{}
	for kk, v := range got {
		twice[kk] = v
	}
	twice[k] = b.hi + 1
	if bad := checkLedger(ups, twice, false); len(bad) == 0 {
		t.Errorf("oracle self-check: a counter above acknowledged + uncertain was not reported")
	}
}

// ---- the cluster ----

type rtNode struct {
	cfg     Config
	fs      *vfs.MemFS
	nd      *Node // nil while down
	gen     atomic.Uint64
	crashed bool // the last stop was a power cut
}

type rtCluster struct {
	t    *testing.T
	net  *transport.MemNetwork
	seed uint64
	rng  *rand.Rand // the schedule's; used by the test goroutine only

	mu    sync.RWMutex
	nodes []*rtNode

	partition [][]transport.Addr // the partition in force, if any

	// stats, for the log
	crashes, tornCrashes, cleanRestarts, partitions, losses, flushes, diskFaults int

	// began and events are the schedule's timeline, for a failure's
	// post-mortem (dumpKey).
	began    time.Time
	eventsMu sync.Mutex
	events   []string
	opLogs   opLog // the nodes' log lines naming an op
}

// since is the time since the run began.
func (c *rtCluster) since() time.Duration { return time.Since(c.began) }

// event notes a step of the schedule in the timeline.
func (c *rtCluster) event(format string, args ...any) {
	c.eventsMu.Lock()
	defer c.eventsMu.Unlock()
	c.events = append(c.events, fmt.Sprintf("%8.3fs  ", c.since().Seconds())+fmt.Sprintf(format, args...))
}

func (c *rtCluster) addr(i int) transport.Addr {
	return transport.Addr(c.nodes[i].cfg.ListenAddress + ":7000")
}

func (c *rtCluster) start(i int) error {
	r := c.nodes[i]
	logger := c.opLogs.logger(i, func() float64 { return c.since().Seconds() })
	nd, err := Start(r.cfg, Options{Listen: c.net.Listen, Logger: logger, Seed: c.seed + uint64(i) + 1, FS: r.fs})
	if err != nil {
		return err
	}
	c.mu.Lock()
	r.nd = nd
	c.mu.Unlock()
	return nil
}

// take marks node i down for clients and returns it; a client whose
// request spans this sees the generation change and counts the request
// uncertain, whatever it returned.
func (c *rtCluster) take(i int) *Node {
	r := c.nodes[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := r.nd
	r.nd = nil
	r.gen.Add(1)
	return nd
}

// crash emulates a power cut of node i: it is cut from the network (no
// answer leaves it any more), its filesystem is replaced by what a crash
// leaves, and the running node is stopped (what it writes meanwhile goes
// to the old filesystem and is lost).
func (c *rtCluster) crash(i int, tear bool) {
	c.event("power cut of node %d (torn %v)", i+1, tear)
	nd := c.take(i)
	c.net.Isolate(c.addr(i))
	r := c.nodes[i]
	clone := r.fs.CrashClone(vfs.CrashOptions{Seed: c.rng.Uint64(), TearUnsynced: tear})
	_ = nd.Stop() // a crashed node's shutdown reaches nobody
	r.fs = clone
	r.crashed = true
	c.crashes++
	if tear {
		c.tornCrashes++
	}
}

func (c *rtCluster) stopClean(i int) {
	c.event("clean stop of node %d", i+1)
	nd := c.take(i)
	if err := nd.Stop(); err != nil {
		c.t.Errorf("clean stop of node %d: %v", i+1, err)
	}
	c.nodes[i].crashed = false
}

// applyNet restores the network to the partition in force (Heal also ends
// the isolation of crashed nodes).
func (c *rtCluster) applyNet() {
	c.net.Heal()
	if c.partition != nil {
		c.net.Partition(c.partition[0], c.partition[1])
	}
}

// restart starts a stopped node i; after a power cut it first, sometimes,
// damages the crash image and checks that the node refuses it.
func (c *rtCluster) restart(i int, diskFault bool) error {
	c.event("restart of node %d", i+1)
	c.applyNet()
	r := c.nodes[i]
	if diskFault && r.crashed {
		c.diskFault(i)
	}
	if err := c.start(i); err != nil {
		how := "a clean stop"
		if r.crashed {
			how = "a power cut"
		}
		return fmt.Errorf("restart node %d after %s: %w", i+1, how, err)
	}
	return nil
}

// diskFault damages a file the node's data needs on its (stopped) image,
// checks that Start refuses the image naming the file, and puts the
// undamaged image back.
func (c *rtCluster) diskFault(i int) {
	r := c.nodes[i]
	victims := listedFiles(r.fs, r.cfg.DataDirectory)
	if len(victims) == 0 {
		return
	}
	victim := victims[c.rng.IntN(len(victims))]
	pristine := r.fs.CrashClone(vfs.CrashOptions{}) // the image is durable: an exact copy
	what := "lost"
	var err error
	if strings.HasSuffix(victim, commitlog.ManifestName) || strings.HasSuffix(victim, sstable.ManifestName) {
		what = "corrupt"
		fi, serr := r.fs.Stat(victim)
		if serr != nil {
			c.t.Errorf("disk fault: stat %s: %v", victim, serr)
			return
		}
		err = r.fs.Corrupt(victim, fi.Size()-6, 0x01)
	} else {
		err = r.fs.Lose(victim)
	}
	if err != nil {
		c.t.Errorf("disk fault on %s: %v", victim, err)
		return
	}
	c.diskFaults++
	logger := c.opLogs.logger(i, func() float64 { return c.since().Seconds() })
	nd, err := Start(r.cfg, Options{Listen: c.net.Listen, Logger: logger, Seed: c.seed + uint64(i) + 1, FS: r.fs})
	switch {
	case err == nil:
		nd.Stop()
		c.t.Errorf("node %d started with %s %s: data silently lost", i+1, victim, what)
	case !strings.Contains(err.Error(), filepath.Base(victim)):
		c.t.Errorf("node %d refused to start with %s %s, but its error does not name the file: %v", i+1, victim, what, err)
	}
	r.fs = pristine
}

// listedFiles returns the files of a data directory that its manifests
// list (commit log segments, SSTable components) and the manifests.
func listedFiles(fsys *vfs.MemFS, dir string) []string {
	var out []string
	cl := filepath.Join(dir, "commitlog")
	if b, err := fsys.ReadFile(filepath.Join(cl, commitlog.ManifestName)); err == nil && len(b) >= 16 {
		out = append(out, filepath.Join(cl, commitlog.ManifestName))
		n := int(binary.BigEndian.Uint32(b[8:]))
		for j := 0; j < n && 12+8*j+8 <= len(b)-4; j++ {
			p := filepath.Join(cl, commitlog.SegmentName(binary.BigEndian.Uint64(b[12+8*j:])))
			if _, err := fsys.Stat(p); err == nil {
				out = append(out, p)
			}
		}
	}
	tables, _ := fsys.ReadDir(filepath.Join(dir, "data"))
	for _, td := range tables {
		if !td.IsDir() {
			continue
		}
		tdir := filepath.Join(dir, "data", td.Name())
		gens, err := sstable.ReadManifest(fsys, tdir)
		if err != nil {
			continue
		}
		out = append(out, filepath.Join(tdir, sstable.ManifestName))
		ents, _ := fsys.ReadDir(tdir)
		for _, g := range gens {
			prefix := fmt.Sprintf("ik-%d-big-", g)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), prefix) && !strings.HasSuffix(e.Name(), ".tmp") {
					out = append(out, filepath.Join(tdir, e.Name()))
				}
			}
		}
	}
	return out
}

// waitFor polls cond for up to bound (a safety net against a hang, not a
// timing assertion).
func (c *rtCluster) waitFor(what string, bound time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	c.t.Errorf("%s: not reached after %v", what, bound)
	return false
}

func (c *rtCluster) allUp() bool {
	for _, r := range c.nodes {
		if r.nd == nil {
			return false
		}
		up := 0
		for _, p := range r.nd.Gossip().Nodes() {
			if p.Up {
				up++
			}
		}
		if up != len(c.nodes) {
			return false
		}
	}
	return true
}

// ---- clients ----

const (
	rtAcked = iota
	rtFailed
	rtUncertain
)

// staleViews lets clients send updates through a node that does not see
// every running node up yet (just restarted: its remembered peers start
// down until heard from; or slow to notice a restart). Such a coordinator
// may send an FBF retry to another leader than the first attempt's, one
// that missed the first attempt's replication (it was down), and the first
// leader, up all along and holding nothing in doubt, later delivers its
// hinted application; the two leaders settle it between them
// (coordinator/conflict.go). On by default since they do;
// IDEMKV_RANDOM_STALE_VIEWS=0 turns it off.
var staleViews = os.Getenv("IDEMKV_RANDOM_STALE_VIEWS") != "0"

// seesAllUp reports whether node i's gossip holds every running node up;
// c.mu is held.
func (c *rtCluster) seesAllUp(i int, running []int) bool {
	g := c.nodes[i].nd.Gossip()
	for _, j := range running {
		if j != i && !g.IsUp(c.nodes[j].nd.HostID()) {
			return false
		}
	}
	return true
}

// try sends one attempt through a random running node that sees the
// others up (see staleViews).
func (c *rtCluster) try(rng *rand.Rand, u coltype.Update, cl coordinator.ConsistencyLevel) (res, node int, err error) {
	c.mu.RLock()
	var running, up []int
	for i, r := range c.nodes {
		if r.nd != nil {
			running = append(running, i)
		}
	}
	for _, i := range running {
		if staleViews || c.seesAllUp(i, running) {
			up = append(up, i)
		}
	}
	if len(up) == 0 {
		c.mu.RUnlock()
		time.Sleep(10 * time.Millisecond)
		return rtFailed, -1, nil // never sent
	}
	i := up[rng.IntN(len(up))]
	nd, gen := c.nodes[i].nd, c.nodes[i].gen.Load()
	c.mu.RUnlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err = nd.Coordinator().CounterWrite(ctx, u, cl)
	cancel()
	if c.nodes[i].gen.Load() != gen {
		return rtUncertain, i, err // the coordinator crashed or stopped meanwhile
	}
	var ue *coordinator.UnavailableError
	switch {
	case err == nil:
		return rtAcked, i, nil
	case errors.As(err, &ue):
		return rtFailed, i, err
	default:
		return rtUncertain, i, err
	}
}

func (c *rtCluster) client(id int, rng *rand.Rand, stop <-chan struct{}, out *[]rtUpdate) {
	var seq uint64
	for {
		select {
		case <-stop:
			return
		default:
		}
		fbf := rng.IntN(2) == 0
		k := rtKey{rtVanilla, fmt.Sprint("k", rng.IntN(rtKeys))}
		delta := int64(1 + rng.IntN(9))
		if fbf {
			k.table, delta = rtFBF, 1
		}
		cl := coordinator.Quorum
		switch x := rng.IntN(10); {
		case x == 0:
			cl = coordinator.One
		case x == 1:
			cl = coordinator.All
		}
		u := coltype.Update{Table: k.table, Key: []byte(k.key), Column: "c", Delta: delta}
		if fbf {
			seq++
			u.HasOp, u.OpTime = true, time.Now().UnixNano()
			binary.BigEndian.PutUint64(u.OpID[:8], uint64(id)+1)
			binary.BigEndian.PutUint64(u.OpID[8:], seq)
		}
		rec := rtUpdate{rtKey: k, delta: delta, opID: u.OpID}
		first := time.Now()
		for attempt := 0; attempt < 4; attempt++ {
			sent := c.since()
			res, node, err := c.try(rng, u, cl)
			a := rtAttempt{node: node, cl: cl, res: res, sent: sent, end: c.since()}
			if err != nil {
				a.err = err.Error()
			}
			rec.attempts = append(rec.attempts, a)
			if res == rtAcked {
				rec.acked = true
				break
			}
			if res == rtFailed {
				break
			}
			rec.maybe++
			// A vanilla update is retried only sometimes (each retry may
			// count again); an FBF one always, with its op id, within the
			// retry horizon.
			if !fbf && rng.IntN(2) == 0 {
				break
			}
			if time.Since(first) > rtRetryWindow {
				break
			}
			time.Sleep(time.Duration(10+rng.IntN(90)) * time.Millisecond)
		}
		*out = append(*out, rec)
		time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
	}
}

// rtRetryWindow is how long after its first attempt a client still starts
// a retry: the last attempt ends a counter write timeout (1 s) later, well
// within the FBF table's retry horizon (4 × the timeout). A retry past the
// horizon may meet a filter that forgot the op id and count again, which
// is the documented contract, not a bug; on a loaded machine the attempts
// stretch, so the window leaves a margin.
const rtRetryWindow = 2 * time.Second

// ---- the run ----

func runRandomCluster(t *testing.T, mode string, steps int, powerCuts bool) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	n := 3 + rng.IntN(2)
	c := &rtCluster{t: t, net: transport.NewMemNetwork(seed), seed: seed, rng: rng, began: time.Now()}
	c.setup(n, func(cfg *Config) { cfg.CommitLogSync = mode })
	t.Logf("%d nodes, commit log sync %s, %d steps, power cuts %v", n, mode, steps, powerCuts)

	// Clients.
	const clients = 4
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ledgers := make([][]rtUpdate, clients)
	for id := 0; id < clients; id++ {
		crng := rand.New(rand.NewPCG(seed, uint64(id)+100))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.client(id, crng, stop, &ledgers[id])
		}()
	}

	// The schedule.
	down, downUntil := -1, 0
	partUntil, lossUntil := -1, -1
	for step := 0; step < steps && !t.Failed(); step++ {
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		if down >= 0 && step >= downUntil {
			if err := c.restart(down, rng.IntN(3) == 0 && faultOn("disk")); err != nil {
				t.Error(err)
				break
			}
			down = -1
		}
		if partUntil >= 0 && step >= partUntil {
			c.partition, partUntil = nil, -1
			c.applyNet()
			c.event("partition healed")
		}
		if lossUntil >= 0 && step >= lossUntil {
			c.net.ClearFaults()
			lossUntil = -1
			c.event("message loss ended")
		}
		// Every draw is made whatever is enabled, so that disabling a kind
		// leaves the rest of the schedule as it was.
		x, j, tear := rng.IntN(12), rng.IntN(n), rng.IntN(2) == 0
		downFor := 1 + rng.IntN(3)
		switch {
		case x < 4:
			if down < 0 && powerCuts && faultOn("crash") {
				down, downUntil = j, step+downFor
				c.crash(down, tear)
			}
		case x < 6:
			if down < 0 && faultOn("restart") {
				down, downUntil = j, step+downFor
				c.stopClean(down)
				c.cleanRestarts++
			}
		case x < 8 && partUntil < 0 && faultOn("partition"):
			var a, b []transport.Addr
			minority := 1 + rng.IntN((n-1)/2+1)
			for j, p := range rng.Perm(n) {
				if j < minority {
					a = append(a, c.addr(p))
				} else {
					b = append(b, c.addr(p))
				}
			}
			c.partition, partUntil = [][]transport.Addr{a, b}, step+1+rng.IntN(3)
			c.applyNet()
			c.partitions++
			c.event("partition %v | %v", a, b)
		case x < 10 && lossUntil < 0 && faultOn("loss"):
			drop := 0.02 + 0.15*rng.Float64()
			c.net.SetFault("", "", nil, transport.Fault{Drop: drop, Duplicate: 0.05, Reorder: 0.05})
			// TCP never duplicates a request: a duplicated counter write
			// (coordinator to leader) would count a vanilla update twice
			// by design, which no client could tell from a bug.
			c.net.SetFault("", "", []transport.Type{coordinator.TypeCounterWrite}, transport.Fault{Drop: drop, Reorder: 0.05})
			lossUntil = step + 1 + rng.IntN(2)
			c.losses++
			c.event("message loss p=%.2f", drop)
		case x == 10 && faultOn("flush"):
			if c.nodes[j].nd != nil {
				if err := c.nodes[j].nd.Replica().FlushAll(); err != nil {
					t.Errorf("flush node %d: %v", j+1, err)
				}
				c.flushes++
				c.event("flush of node %d", j+1)
			}
		}
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}

	// Heal, restart every node, settle.
	c.partition = nil
	c.applyNet()
	c.net.ClearFaults()
	if down >= 0 {
		if err := c.restart(down, rng.IntN(3) == 0 && faultOn("disk")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.nodes {
		c.stopClean(i)
		if err := c.start(i); err != nil {
			t.Fatalf("final restart of node %d: %v", i+1, err)
		}
	}
	if !c.waitFor("every node up after the final restarts", 60*time.Second, c.allUp) {
		t.FailNow()
	}
	settled := c.waitFor("in-doubt updates resolved and hints delivered", 60*time.Second, func() bool {
		for _, r := range c.nodes {
			if len(r.nd.Replica().InDoubt()) > 0 || len(r.nd.Hints().Pending()) > 0 {
				return false
			}
		}
		return true
	})
	if !settled {
		for i, r := range c.nodes {
			t.Logf("node %d: %d in doubt, hints pending %v", i+1, len(r.nd.Replica().InDoubt()), r.nd.Hints().Pending())
		}
		t.FailNow()
	}

	// Read every key at ALL and check.
	var ups []rtUpdate
	for _, l := range ledgers {
		ups = append(ups, l...)
	}
	got := map[rtKey]int64{}
	for _, table := range []uint64{rtVanilla, rtFBF} {
		for j := 0; j < rtKeys; j++ {
			k := rtKey{table, fmt.Sprint("k", j)}
			v, err := c.readAll(k)
			if err != nil {
				t.Fatalf("read %v at ALL: %v", k, err)
			}
			got[k] = v
			c.checkReplicasAgree(k, v)
		}
	}
	lossy := mode == "periodic" && powerCuts
	bad := checkLedger(ups, got, !lossy)
	for _, b := range bad {
		t.Error(b)
	}
	if len(bad) > 0 {
		c.dumpKeys(ups, got)
	}
	if lossy {
		for _, b := range checkLedger(ups, got, true) {
			if strings.Contains(b, "below") {
				t.Logf("periodic sync, not a failure: %s", b)
			}
		}
	}
	if len(bad) == 0 {
		plantedBugsCaught(t, ups, got)
	}
	var acked, uncertain, failed int
	for _, b := range ledgerBounds(ups) {
		acked += b.acked
		uncertain += b.uncertain
		failed += b.definitivelyFailed
	}
	t.Logf("%d updates (%d acknowledged, %d uncertain, %d failed) in %v; faults: %d power cuts (%d torn), %d clean restarts, %d partitions, %d lossy periods, %d flushes, %d disk faults refused",
		len(ups), acked, uncertain, failed, c.since().Round(time.Millisecond),
		c.crashes, c.tornCrashes, c.cleanRestarts, c.partitions, c.losses, c.flushes, c.diskFaults)
}

// setup starts n nodes, each on its own MemFS, and creates the keyspace
// (RF 3) and the two tables.
func (c *rtCluster) setup(n int, tweak func(*Config)) {
	t := c.t
	t.Helper()
	for i := 0; i < n; i++ {
		cfg := Config{
			DataDirectory:          fmt.Sprintf("/idemkv/node%d", i+1),
			ListenAddress:          fmt.Sprintf("127.0.0.%d", i+1),
			Seeds:                  []string{"127.0.0.1"},
			NumTokens:              8,
			GossipIntervalMS:       50,
			PhiConvictThreshold:    12,
			HintDeliveryMS:         50,
			CounterWriteTimeoutMS:  1000,
			ReadTimeoutMS:          2000,
			CommitLogSyncPeriodMS:  100,
			CommitLogGroupWindowMS: 3,
			StartNativeTransport:   new(bool),
		}
		tweak(&cfg)
		c.nodes = append(c.nodes, &rtNode{cfg: cfg, fs: vfs.NewMem()})
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			if nd := c.take(i); nd != nil {
				nd.Stop()
			}
		}
	})
	for i := range c.nodes {
		if err := c.start(i); err != nil {
			t.Fatalf("start node %d: %v", i+1, err)
		}
	}
	if !c.waitFor("every node up", 30*time.Second, c.allUp) {
		t.FailNow()
	}
	n1 := c.nodes[0].nd
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "3"}}, false); err != nil {
		t.Fatal(err)
	}
	for _, def := range []coltype.TableDef{
		{ID: rtVanilla, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}},
		{ID: rtFBF, Keyspace: "ks", Name: "f", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
			Options: map[string]string{counter.IdempotenceOption: `{"class": "fbf"}`}},
	} {
		if err := n1.Schema().CreateTable(def, false); err != nil {
			t.Fatal(err)
		}
	}
	if !c.waitFor("schema on every node", 30*time.Second, func() bool {
		for _, r := range c.nodes {
			if _, ok := r.nd.Schema().Table("ks", "f"); !ok {
				return false
			}
			if _, ok := r.nd.Schema().Table("ks", "t"); !ok {
				return false
			}
		}
		return true
	}) {
		t.FailNow()
	}
}

// readAll reads a counter at ALL through node 1, retrying a few times on
// errors (a replica may still be catching up with gossip).
func (c *rtCluster) readAll(k rtKey) (int64, error) {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if attempt > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		nd := c.nodes[0].nd
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, found, rerr := nd.Coordinator().Read(ctx, k.table, []byte(k.key), coordinator.All)
		cancel()
		if err = rerr; err != nil {
			continue
		}
		if !found {
			return 0, nil
		}
		cell, ok := r.Cell("c")
		if !ok {
			return 0, nil
		}
		return nd.Replica().CellValue(k.table, cell)
	}
	return 0, err
}

// checkReplicasAgree: after a read at ALL (which repairs every replica it
// asks), each replica of the key holds the value read.
func (c *rtCluster) checkReplicasAgree(k rtKey, want int64) {
	nd := c.nodes[0].nd
	st, err := nd.Schema().Strategy(k.table)
	if err != nil {
		c.t.Errorf("strategy of table %d: %v", k.table, err)
		return
	}
	byID := map[string]*Node{}
	for _, r := range c.nodes {
		byID[r.nd.HostID()] = r.nd
	}
	reps := st.Replicas(nd.ClusterMetadata(), ring.Token([]byte(k.key)))
	if len(reps) != 3 {
		c.t.Errorf("key %v has %d replicas, want 3", k, len(reps))
	}
	for _, e := range reps {
		v, _, err := byID[e.ID].Replica().Value(k.table, []byte(k.key), "c")
		if err != nil || v != want {
			c.t.Errorf("replica %s of table %d key %s holds %d (%v) after a read at ALL returned %d", byID[e.ID].Config().ListenAddress, k.table, k.key, v, err, want)
		}
	}
}

// TestFBFPeriodicLeaderPowerCut reproduces the over-count TestRandomCluster
// finds under periodic commit log sync with power cuts: an FBF update
// acknowledged at ALL (every replica logged it and learned its op id) whose
// leader then loses power before its periodic sync loses the update from
// the leader's own log, and with it the leader's memory of the op id; the
// leader restarts under a fresh counter id and holds nothing in doubt (its
// log shows nothing it led). A retry of the update (the client missed the
// acknowledgement) goes to the same leader (the first live replica), which
// applied it again (2 where the client added 1) before a leader whose
// filter may be incomplete (one window after an unclean start in periodic
// mode) learned to ask the other replicas about an op it misses. Batch and
// group sync log the update before it is replicated, so the restarted
// leader holds it in doubt and the retry is dismissed.
func TestFBFPeriodicLeaderPowerCut(t *testing.T) {
	for _, mode := range []string{"batch", "periodic"} {
		t.Run(mode, func(t *testing.T) {
			c, _, write := powerCutLeader(t, mode)
			if err := write(0, coordinator.All); err != nil {
				t.Fatalf("retry: %v", err)
			}
			v, err := c.readAll(rtKey{rtFBF, "x"})
			if err != nil {
				t.Fatal(err)
			}
			if v != 1 {
				t.Fatalf("FBF counter after one update, its leader's power cut and a retry: %d, want 1", v)
			}
		})
	}
}

// powerCutLeader starts three nodes in a commit log sync mode (nothing
// synced by the period during the test), writes one FBF update at ALL
// through node 1, cuts the power of the node that led it and restarts it,
// and waits until every node is up and nothing is in doubt there. It
// returns the cluster, the leader, and a writer of the same update (the
// client's retry) through a node at a level.
func powerCutLeader(t *testing.T, mode string) (c *rtCluster, leader int, write func(node int, cl coordinator.ConsistencyLevel) error) {
	t.Helper()
	seed := testseed.Seed(t)
	c = &rtCluster{t: t, net: transport.NewMemNetwork(seed), seed: seed, rng: rand.New(rand.NewPCG(seed, 1)), began: time.Now()}
	c.setup(3, func(cfg *Config) {
		cfg.CommitLogSync = mode
		cfg.CommitLogSyncPeriodMS = 60000
	})
	u := coltype.Update{Table: rtFBF, Key: []byte("x"), Column: "c", Delta: 1, HasOp: true, OpTime: time.Now().UnixNano()}
	u.OpID[7], u.OpID[15] = 9, 1
	write = func(node int, cl coordinator.ConsistencyLevel) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.nodes[node].nd.Coordinator().CounterWrite(ctx, u, cl)
	}
	if err := write(0, coordinator.All); err != nil {
		t.Fatal(err)
	}
	leader = -1
	for i, r := range c.nodes {
		if r.nd.Replica().FBFStats().Applied == 1 {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader applied the update")
	}
	c.crash(leader, false)
	if err := c.restart(leader, false); err != nil {
		t.Fatal(err)
	}
	c.waitFor("every node up", 30*time.Second, c.allUp)
	c.waitFor("nothing in doubt", 30*time.Second, func() bool { return len(c.nodes[leader].nd.Replica().InDoubt()) == 0 })
	return c, leader, write
}

// TestFBFPeriodicLeaderPowerCutCutOff: as TestFBFPeriodicLeaderPowerCut,
// but the retry reaches the restarted leader while it is cut off from the
// other replicas, the ones that hold the op. A leader whose filter may lack
// ids used to lead the op anyway when no replica answered its question
// (they "cannot help"), and counted it again: 2 where the client added 1
// (TestRandomCluster, periodic mode, a partition just after the restart).
// It now leads such an op only once every other natural replica has
// answered; otherwise another leader is tried, and the write times out
// while none can be reached.
func TestFBFPeriodicLeaderPowerCutCutOff(t *testing.T) {
	c, leader, write := powerCutLeader(t, "periodic")
	// The retry, through the restarted leader, cut off from the others.
	var others []transport.Addr
	for i := range c.nodes {
		if i != leader {
			others = append(others, c.addr(i))
		}
	}
	c.partition = [][]transport.Addr{{c.addr(leader)}, others}
	c.applyNet()
	err := write(leader, coordinator.One)
	c.partition = nil
	c.applyNet()
	v, rerr := c.readAll(rtKey{rtFBF, "x"})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if v != 1 {
		t.Fatalf("FBF counter after one update, its leader's power cut and a retry through it while cut off (retry: %v): %d, want 1", err, v)
	}
}
