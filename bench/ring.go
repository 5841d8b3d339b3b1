package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/node"
	"github.com/idemkv/idemkv/schema"
)

// RingConfig is the embedded-ring benchmark: N nodes in this process, each
// on its own loopback address, talking over real TCP; closed-loop writers
// send counter increments to random coordinators.
type RingConfig struct {
	Nodes, RF int
	Levels    []coordinator.ConsistencyLevel
	Keys      []int // distinct keys per run; 1 is one hot counter
	// Tables are the counter kinds compared side by side: "vanilla"
	// (Cassandra's counter), "fbf" (the FBF counter, every update with
	// an op id) and "fbf2" (an FBF counter with WindowOptions, e.g. a long
	// window). A kind may repeat (runs alternate). Default: vanilla.
	Tables   []string
	Writers  int
	Duration time.Duration
	Warmup   time.Duration
	Seed     uint64
	Sync     string // commit log sync mode of every node
	Access   string // commit log disk access mode of every node (default auto)
	Leader   string // counter leader rule: random or first
	// Via are the client paths measured side by side on the same ring,
	// keys and writers: "coordinator" (each writer calls a random node's
	// coordinator in process, the default) and "cql" (each writer sends
	// the statement through one shared gocql session, token-aware, to
	// the nodes' CQL ports: the path a user's client takes).
	Via []string
	// Route is how a client picks the node it sends an update to: "any"
	// (the default: a random node in process; over CQL, a replica of the
	// key, shuffled, as the main benchmark's clients do) or "primary"
	// (the key's first replica, which leads under the first leader rule:
	// no hop from coordinator to leader).
	Route string
	// Breakdown profiles the CPU of each measured run and charges it to
	// the components an update passes through (RingResult.Breakdown).
	Breakdown bool
	// ProfileDir, with Breakdown, keeps each measured run's CPU profile
	// there, named NN-table-CL-keys-via.prof (NN: the run's number).
	ProfileDir string
	// Coalesce is the "cql" path's gocql write coalescing wait; 0 writes
	// each request at once (CoalesceFlag).
	Coalesce time.Duration
	Dir      string // data directories; a temporary one when empty
	Port     int    // peer port; 0 picks a free one
	Progress io.Writer

	// WindowOptions are the idempotence options of table kind fbf2 besides
	// 'class': 'fbf' (default: 'filter': 'aging', 'window': '10m').
	WindowOptions map[string]string
}

// RingResult is one (table, level, keys) run.
type RingResult struct {
	Table   string // vanilla or fbf
	Via     string // coordinator or cql
	CL      coordinator.ConsistencyLevel
	Keys    int
	Ops     int64
	Errors  int64 // timeouts and unavailable answers
	Elapsed time.Duration
	Latency *hdrhistogram.Histogram // microseconds, acknowledged writes
	Wrong   int                     // counters whose value at ALL is above every increment attempted
	Under   int64                   // acknowledged increments missing (FBF false positives; the run checks Under ≤ Dismissed)
	Unknown int64                   // writes whose outcome the client could not know
	// Dismissed counts updates the leaders recognised as retries (FBF):
	// the benchmark sends no retries, so any is a false positive.
	Dismissed uint64
	// CPU is the process's CPU time (user and system, every node and the
	// clients) during the measured time: CPU/Ops is the cost of an update
	// on a machine shared with other work, where ops/s is not.
	CPU time.Duration
	// Allocs and AllocBytes are the heap allocations of the process (every
	// node and the clients) during the measured time.
	Allocs, AllocBytes uint64
	// Breakdown is the measured time's CPU by component, with
	// RingConfig.Breakdown (see WriteBreakdown).
	Breakdown Breakdown
}

// CPUPerOp is the process's CPU time per acknowledged write.
func (r RingResult) CPUPerOp() time.Duration {
	if r.Ops == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Ops)
}

// Throughput is acknowledged writes per second.
func (r RingResult) Throughput() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// FreePort finds a port p such that p and p+1 (peer and CQL) are free on
// 127.0.0.1..n, trying seeded random ports.
func FreePort(n int, rng *rand.Rand) (int, error) {
	for try := 0; try < 50; try++ {
		p := 20000 + rng.IntN(30000)
		var ls []net.Listener
		ok := true
		for i := 1; i <= n && ok; i++ {
			for _, port := range []int{p, p + 1} { // peer and CQL ports
				l, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i), strconv.Itoa(port)))
				if err != nil {
					ok = false
					break
				}
				ls = append(ls, l)
			}
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return p, nil
		}
	}
	return 0, errors.New("bench: no free port on the loopback addresses")
}

// Benchmark tables: bench.counters (vanilla) and bench.fbf_counters (the FBF on).
var (
	VanillaTable = coltype.TableDef{ID: 1001, Keyspace: "bench", Name: "counters", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
		PartitionKey: []coltype.ColumnDef{{Name: "k", Type: "text"}}}
	FBFTable = coltype.TableDef{ID: 1002, Keyspace: "bench", Name: "fbf_counters", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
		PartitionKey: []coltype.ColumnDef{{Name: "k", Type: "text"}},
		Options:      map[string]string{counter.IdempotenceOption: `{"class": "fbf"}`}}
)

// FBFWindowTable is the table of kind fbf2: bench.fbf2_counters, with the
// idempotence options of cfg.WindowOptions.
func FBFWindowTable(cfg RingConfig) (coltype.TableDef, error) {
	opts := map[string]string{"class": "fbf", "filter": "aging", "window": "10m"}
	if cfg.WindowOptions != nil {
		opts = map[string]string{"class": "fbf"}
		for k, v := range cfg.WindowOptions {
			opts[k] = v
		}
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return coltype.TableDef{}, err
	}
	def := FBFTable
	def.ID, def.Name = 1003, "fbf2_counters"
	def.Options = map[string]string{counter.IdempotenceOption: string(b)}
	return def, nil
}

// StartRing starts an embedded ring and creates keyspace bench (SimpleStrategy,
// RF) with the benchmark tables. The caller stops the nodes.
func StartRing(ctx context.Context, cfg RingConfig, logger *slog.Logger) ([]*node.Node, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	port := cfg.Port
	if port == 0 {
		p, err := FreePort(cfg.Nodes, rng)
		if err != nil {
			return nil, err
		}
		port = p
	}
	var nodes []*node.Node
	stopAll := func() {
		for _, n := range nodes {
			n.Stop()
		}
	}
	for i := 1; i <= cfg.Nodes; i++ {
		n, err := node.Start(node.Config{
			DataDirectory: filepath.Join(cfg.Dir, fmt.Sprintf("node%d", i)),
			ListenAddress: fmt.Sprintf("127.0.0.%d", i),
			StoragePort:   port, NativeTransportPort: port + 1,
			Seeds:         []string{fmt.Sprintf("127.0.0.1:%d", port)},
			CommitLogSync: cfg.Sync, CommitLogDiskAccessMode: cfg.Access, CounterLeader: cfg.Leader,
			GossipIntervalMS: 200, PhiConvictThreshold: 12,
		}, node.Options{Logger: logger, Seed: cfg.Seed + uint64(i)})
		if err != nil {
			stopAll()
			return nil, err
		}
		nodes = append(nodes, n)
	}
	err := nodes[0].Schema().CreateKeyspace(schema.Keyspace{Name: "bench", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": strconv.Itoa(cfg.RF)}}, true)
	defs := []coltype.TableDef{VanillaTable, FBFTable}
	if slices.Contains(cfg.Tables, "fbf2") {
		w, werr := FBFWindowTable(cfg)
		defs, err = append(defs, w), errors.Join(err, werr)
	}
	for _, def := range defs {
		if err == nil {
			err = nodes[0].Schema().CreateTable(def, true)
		}
	}
	for err == nil {
		up := 0
		for _, p := range nodes[0].Gossip().Nodes() {
			if p.Up {
				up++
			}
		}
		if up == cfg.Nodes {
			err = nodes[0].WaitSchemaAgreement(ctx)
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil {
		stopAll()
		return nil, err
	}
	return nodes, nil
}

// RunRing runs every (keys, level) combination on one embedded ring.
func RunRing(ctx context.Context, cfg RingConfig) ([]RingResult, error) {
	if cfg.Nodes < 1 || cfg.RF < 1 || cfg.Writers < 1 || cfg.Duration <= 0 {
		return nil, errors.New("bench: nodes, rf, writers and duration must be positive")
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "idemkv-bench-ring-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	nodes, err := StartRing(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	if len(cfg.Tables) == 0 {
		cfg.Tables = []string{"vanilla"}
	}
	if len(cfg.Via) == 0 {
		cfg.Via = []string{ViaCoordinator}
	}
	defer func() {
		for _, n := range nodes {
			n.Stop()
		}
	}()
	switch cfg.Route {
	case "":
		cfg.Route = RouteAny
	case RouteAny, RoutePrimary:
	default:
		return nil, fmt.Errorf("bench: unknown route %q (any, primary)", cfg.Route)
	}
	var session *gocql.Session
	for _, via := range cfg.Via {
		switch via {
		case ViaCoordinator:
		case ViaCQL:
			if session == nil {
				if session, err = ringSession(nodes, cfg.Route == RouteAny, cfg.Coalesce); err != nil {
					return nil, err
				}
				defer session.Close()
			}
		default:
			return nil, fmt.Errorf("bench: unknown client path %q (coordinator, cql)", via)
		}
	}
	var out []RingResult
	run := 0
	for _, keys := range cfg.Keys {
		for _, cl := range cfg.Levels {
			for _, kind := range cfg.Tables {
				def := VanillaTable
				switch kind {
				case "vanilla":
				case "fbf":
					def = FBFTable
				case "fbf2":
					if def, err = FBFWindowTable(cfg); err != nil {
						return out, err
					}
				default:
					return out, fmt.Errorf("bench: unknown table kind %q (vanilla, fbf, fbf2)", kind)
				}
				for _, via := range cfg.Via {
					run++
					send := coordinatorSender(nodes, def, cl, cfg.Route == RoutePrimary)
					if via == ViaCQL {
						send = cqlSender(session, def, cl)
					}
					before := dismissedOn(nodes)
					profPath := ""
					if cfg.ProfileDir != "" {
						profPath = filepath.Join(cfg.ProfileDir, fmt.Sprintf("%02d-%s-%s-%d-%s.prof", run, kind, cl, keys, via))
					}
					res, err := runRingOnce(ctx, cfg, nodes, def, cl, keys, fmt.Sprintf("r%d-", run), profPath, send)
					if err != nil {
						return out, err
					}
					res.Table, res.Via, res.Dismissed = kind, via, dismissedOn(nodes)-before
					if res.Under > int64(res.Dismissed) {
						// Missing increments that no dismissal explains: lost.
						res.Wrong++
					}
					out = append(out, res)
					if cfg.Progress != nil {
						fmt.Fprintf(cfg.Progress, "  done: %s %s keys=%d via %s\n", kind, cl, keys, via)
					}
				}
			}
		}
	}
	return out, nil
}

func dismissedOn(nodes []*node.Node) uint64 {
	var n uint64
	for _, nd := range nodes {
		n += nd.Coordinator().Stats().Dismissed
	}
	return n
}

func runRingOnce(ctx context.Context, cfg RingConfig, nodes []*node.Node, def coltype.TableDef, cl coordinator.ConsistencyLevel, keys int, prefix, profPath string, send ringSend) (RingResult, error) {
	names := make([][]byte, keys)
	for i := range names {
		names[i] = []byte(prefix + strconv.Itoa(i))
	}
	acked := make([]atomic.Int64, keys)
	unknown := make([]atomic.Int64, keys)
	var measuring atomic.Bool
	var ops, errs, unk atomic.Int64
	hists := make([]*hdrhistogram.Histogram, cfg.Writers)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		hists[w] = hdrhistogram.New(1, 60_000_000, 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
			client := rng.Uint64() // this writer's client id for op ids
			var seq uint64
			for runCtx.Err() == nil {
				k := rng.IntN(keys)
				coord := rng.IntN(len(nodes))
				var op *[16]byte
				if def.ID != VanillaTable.ID {
					seq++
					var id [16]byte
					binary.BigEndian.PutUint64(id[:], client)
					binary.BigEndian.PutUint64(id[8:], seq)
					op = &id
				}
				start := time.Now()
				err := send(runCtx, coord, names[k], op)
				lat := time.Since(start)
				switch {
				case err == nil:
					acked[k].Add(1)
					if measuring.Load() {
						ops.Add(1)
						_ = hists[w].RecordValue(max(1, lat.Microseconds()))
					}
				case runCtx.Err() != nil:
					unknown[k].Add(1) // cut short by the end of the run
				case errors.Is(err, errNotApplied):
					errs.Add(1)
				default:
					errs.Add(1)
					unk.Add(1)
					unknown[k].Add(1)
				}
			}
		}()
	}
	select {
	case <-time.After(cfg.Warmup):
	case <-ctx.Done():
	}
	var prof *cpuProfiler
	if cfg.Breakdown {
		var err error
		if prof, err = startCPUProfile(); err != nil {
			cancel()
			wg.Wait()
			return RingResult{}, err
		}
	}
	measuring.Store(true)
	start, cpuStart, allocStart := time.Now(), processCPU(), heapAllocs()
	select {
	case <-time.After(cfg.Duration):
	case <-ctx.Done():
	}
	measuring.Store(false)
	elapsed, cpu, allocEnd := time.Since(start), processCPU()-cpuStart, heapAllocs()
	var breakdown Breakdown
	if prof != nil {
		var err error
		if breakdown, err = prof.stop(profPath); err != nil {
			cancel()
			wg.Wait()
			return RingResult{}, err
		}
	}
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		return RingResult{}, ctx.Err()
	}
	res := RingResult{CL: cl, Keys: keys, Ops: ops.Load(), Errors: errs.Load(), Unknown: unk.Load(), Elapsed: elapsed, CPU: cpu, Breakdown: breakdown,
		Allocs: allocEnd[0] - allocStart[0], AllocBytes: allocEnd[1] - allocStart[1], Latency: hdrhistogram.New(1, 60_000_000, 3)}
	for _, h := range hists {
		res.Latency.Merge(h)
	}
	for k := range names {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, found, err := nodes[0].Coordinator().Read(rctx, def.ID, names[k], coordinator.All)
		cancel()
		if err != nil {
			return res, fmt.Errorf("bench: verification read: %w", err)
		}
		var v int64
		if found {
			if c, ok := r.Cell("c"); ok && !c.Tombstone {
				if v, err = nodes[0].Replica().CellValue(def.ID, c); err != nil {
					return res, err
				}
			}
		}
		lo := acked[k].Load()
		switch {
		case v > lo+unknown[k].Load():
			res.Wrong++ // more than every increment attempted
		case v < lo:
			res.Under += lo - v
		}
	}
	return res, nil
}

// WriteRingTable prints ring results side by side.
func WriteRingTable(w io.Writer, results []RingResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\tvia\tCL\tkeys\tops\tops/s\tCPU µs/op\tallocs/op\tB/op\tp50 µs\tp99 µs\tp99.9 µs\tmax µs\terrors\tdismissed\tunder\twrong\t")
	for _, r := range results {
		h := r.Latency
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Table, r.Via, r.CL, r.Keys, r.Ops, r.Throughput(), float64(r.CPUPerOp().Nanoseconds())/1e3, perOp(r.Allocs, r.Ops), perOp(r.AllocBytes, r.Ops),
			h.ValueAtQuantile(50), h.ValueAtQuantile(99), h.ValueAtQuantile(99.9), h.Max(), r.Errors, r.Dismissed, r.Under, r.Wrong)
	}
	return tw.Flush()
}
