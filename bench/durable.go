package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/vfs"
)

// DurableConfig is the durable-writes benchmark (idemkv bench durable):
// the raw fsync latency of the data directory's filesystem, then QUORUM
// counter updates through CQL on an embedded 3-node ring in each commit
// log sync mode, with several client counts, in one run.
type DurableConfig struct {
	Dir     string   // data directory; a temporary one when empty
	Modes   []string // commit log sync modes (default periodic, batch, group)
	Access  string   // commit log disk access mode (default auto)
	Clients []int    // gocql clients per row (default 1, 4, 16)
	Nodes   int      // ring size (default 3, RF = min(3, Nodes))
	Keys    int      // distinct counter keys, uniform (default 10,000)
	// Duration is each row's measured time when Ops is 0; Warmup runs
	// before it, unmeasured.
	Duration, Warmup time.Duration
	Ops              int64 // updates per row (0: run for Duration)
	// FsyncSamples is how many write+fsync pairs the raw measurement takes.
	FsyncSamples int
	Timeout      time.Duration // client timeout per update (default 2 s)
	// Coalesce is the gocql session's write coalescing wait; 0 writes each
	// request at once (CoalesceFlag).
	Coalesce time.Duration
	Seed     uint64
	Progress io.Writer // progress lines; nil: none
}

// FsyncStats is the raw fsync measurement: a small record appended to a
// file and fsynced, as the commit log does, one at a time.
type FsyncStats struct {
	Dir      string
	Samples  int
	P50, P99 time.Duration
	Mean     time.Duration
}

// DurableRow is one (mode, clients) measurement.
type DurableRow struct {
	Mode    string
	Clients int
	Ops     int64 // acknowledged updates
	Errors  int64 // timeouts and other failures
	Elapsed time.Duration
	Latency *hdrhistogram.Histogram // microseconds, acknowledged updates
	// Fsyncs is the commit log fsyncs of all nodes during the row and
	// FsyncTime their summed duration.
	Fsyncs    int64
	FsyncTime time.Duration
	Nodes     int
	// Hints is the hints the leaders stored during the row: replications
	// that failed or timed out.
	Hints uint64
}

// Throughput is acknowledged updates per second.
func (r DurableRow) Throughput() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// FsyncsPerNode is commit log fsyncs per second per node.
func (r DurableRow) FsyncsPerNode() float64 {
	return float64(r.Fsyncs) / r.Elapsed.Seconds() / float64(max(r.Nodes, 1))
}

// MeanFsync is the mean duration of the ring's commit log fsyncs.
func (r DurableRow) MeanFsync() time.Duration {
	if r.Fsyncs == 0 {
		return 0
	}
	return r.FsyncTime / time.Duration(r.Fsyncs)
}

// DurableResult is the whole run.
type DurableResult struct {
	Config DurableConfig
	Fsync  FsyncStats
	Rows   []DurableRow
}

func (c DurableConfig) withDefaults() DurableConfig {
	if len(c.Modes) == 0 {
		c.Modes = []string{"periodic", "batch", "group"}
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{1, 4, 16}
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Keys == 0 {
		c.Keys = 10000
	}
	if c.Duration == 0 && c.Ops == 0 {
		c.Duration = 3 * time.Second
	}
	if c.FsyncSamples == 0 {
		c.FsyncSamples = 2000
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	return c
}

// RunDurable runs the benchmark.
func RunDurable(ctx context.Context, cfg DurableConfig) (*DurableResult, error) {
	cfg = cfg.withDefaults()
	for _, m := range cfg.Modes {
		if _, err := commitlog.ParseSyncMode(m); err != nil {
			return nil, err
		}
	}
	if cfg.Keys < 1 || cfg.Nodes < 1 || cfg.FsyncSamples < 1 {
		return nil, errors.New("bench: durable: keys, nodes and fsync samples must be positive")
	}
	for _, n := range cfg.Clients {
		if n < 1 {
			return nil, errors.New("bench: durable: client counts must be positive")
		}
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "idemkv-bench-durable-")
		if err != nil {
			return nil, fmt.Errorf("bench: durable: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := &DurableResult{Config: cfg}
	fst, err := MeasureFsync(dir, cfg.FsyncSamples)
	if err != nil {
		return nil, err
	}
	res.Fsync = fst
	progress("raw fsync on %s: p50 %s, p99 %s (%d samples)", dir, fst.P50, fst.P99, fst.Samples)
	for mi, mode := range cfg.Modes {
		rows, err := runDurableMode(ctx, cfg, filepath.Join(dir, mode), mode, uint64(mi))
		if err != nil {
			return res, fmt.Errorf("bench: durable: %s: %w", mode, err)
		}
		for _, r := range rows {
			progress("  done: %s, %d clients: %.0f updates/s, p50 %.2f ms", r.Mode, r.Clients, r.Throughput(), float64(r.Latency.ValueAtQuantile(50))/1000)
		}
		res.Rows = append(res.Rows, rows...)
	}
	return res, nil
}

// MeasureFsync appends a 100-byte record to a fresh file in dir and fsyncs
// it, samples times, and reports the fsync latencies (write included).
func MeasureFsync(dir string, samples int) (FsyncStats, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return FsyncStats{}, err
	}
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return FsyncStats{}, fmt.Errorf("bench: fsync probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rec := make([]byte, 100)
	for i := range rec {
		rec[i] = byte(i)
	}
	// One unmeasured round: the file's creation is not the steady state.
	if _, err := f.Write(rec); err != nil {
		return FsyncStats{}, err
	}
	if err := f.Sync(); err != nil {
		return FsyncStats{}, err
	}
	h := hdrhistogram.New(1, 60_000_000, 3)
	var total time.Duration
	for range samples {
		start := time.Now()
		if _, err := f.Write(rec); err != nil {
			return FsyncStats{}, err
		}
		if err := f.Sync(); err != nil {
			return FsyncStats{}, err
		}
		d := time.Since(start)
		total += d
		_ = h.RecordValue(max(1, d.Microseconds()))
	}
	return FsyncStats{Dir: dir, Samples: samples,
		P50:  time.Duration(h.ValueAtQuantile(50)) * time.Microsecond,
		P99:  time.Duration(h.ValueAtQuantile(99)) * time.Microsecond,
		Mean: total / time.Duration(samples)}, nil
}

// syncCounter counts the fsyncs of the commit log files of one node.
type syncCounter struct {
	n, ns atomic.Int64
}

// countingFS is the OS's filesystem with the Syncs of files in a
// directory named commitlog counted.
type countingFS struct {
	vfs.FS
	c *syncCounter
}

func (f countingFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || filepath.Base(filepath.Dir(name)) != "commitlog" {
		return file, err
	}
	return countedFile{File: file, c: f.c}, nil
}

func (f countingFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	return f.wrap(name, file, err)
}

type countedFile struct {
	vfs.File
	c *syncCounter
}

// Unwrap lets the commit log map the file beneath (vfs.Map).
func (f countedFile) Unwrap() vfs.File { return f.File }

func (f countedFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.c.ns.Add(int64(time.Since(start)))
	f.c.n.Add(1)
	return err
}

func runDurableMode(ctx context.Context, cfg DurableConfig, dir, mode string, salt uint64) ([]DurableRow, error) {
	counters := make([]*syncCounter, cfg.Nodes)
	for i := range counters {
		counters[i] = &syncCounter{}
	}
	c, err := StartCluster(ctx, ClusterConfig{Nodes: cfg.Nodes, Dir: dir, Seed: cfg.Seed + salt, Sync: mode, Access: cfg.Access,
		CounterWriteTimeout: cfg.Timeout,
		FS:                  func(i int) vfs.FS { return countingFS{FS: vfs.Default, c: counters[i-1]} }})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	hosts := c.Hosts()
	cc := gocql.NewCluster(hosts...)
	if _, p, err := net.SplitHostPort(hosts[0]); err == nil {
		cc.Port, _ = strconv.Atoi(p)
	}
	cc.Consistency = gocql.Quorum
	cc.Timeout, cc.WriteTimeout = cfg.Timeout, cfg.Timeout
	cc.ConnectTimeout = 5 * time.Second
	cc.RetryPolicy = nil
	cc.NumConns = 2
	setCoalesce(cc, cfg.Coalesce)
	cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy(), gocql.ShuffleReplicas())
	s, err := cc.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("gocql session: %w", err)
	}
	defer s.Close()
	rf := min(3, cfg.Nodes)
	for _, stmt := range []string{
		fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS durable WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}", rf),
		"CREATE TABLE IF NOT EXISTS durable.c (k text PRIMARY KEY, c counter)",
	} {
		if err := s.Query(stmt).Consistency(gocql.One).Exec(); err != nil {
			return nil, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	var rows []DurableRow
	for ri, n := range cfg.Clients {
		row, err := runDurableRow(ctx, cfg, s, c, counters, mode, n, salt*100+uint64(ri))
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func runDurableRow(ctx context.Context, cfg DurableConfig, s *gocql.Session, c *Cluster, counters []*syncCounter, mode string, clients int, salt uint64) (DurableRow, error) {
	row := DurableRow{Mode: mode, Clients: clients, Nodes: len(counters), Latency: hdrhistogram.New(1, 60_000_000, 3)}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var measuring atomic.Bool
	var ops, errs atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	const stmt = "UPDATE durable.c SET c = c + 1 WHERE k = ?"
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, salt<<16|uint64(w)))
			h := hdrhistogram.New(1, 60_000_000, 3)
			defer func() { mu.Lock(); row.Latency.Merge(h); mu.Unlock() }()
			for runCtx.Err() == nil {
				k := "k" + strconv.Itoa(rng.IntN(cfg.Keys))
				start := time.Now()
				err := s.Query(stmt, k).Consistency(gocql.Quorum).WithContext(runCtx).Exec()
				if !measuring.Load() {
					continue
				}
				if err != nil {
					if runCtx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				_ = h.RecordValue(max(1, time.Since(start).Microseconds()))
				if ops.Add(1) == cfg.Ops {
					cancel()
				}
			}
		}()
	}
	select {
	case <-time.After(cfg.Warmup):
	case <-runCtx.Done():
	}
	syncs := func() (n, ns int64, hints uint64) {
		for _, c := range counters {
			n += c.n.Load()
			ns += c.ns.Load()
		}
		for i := 1; i <= c.Size(); i++ {
			if nd := c.Node(i); nd != nil {
				stored, _ := nd.Hints().Counts()
				hints += stored
			}
		}
		return n, ns, hints
	}
	n0, ns0, h0 := syncs()
	measuring.Store(true)
	start := time.Now()
	if cfg.Ops > 0 {
		<-runCtx.Done()
	} else {
		select {
		case <-time.After(cfg.Duration):
		case <-runCtx.Done():
		}
	}
	measuring.Store(false)
	row.Elapsed = time.Since(start)
	n1, ns1, h1 := syncs()
	cancel()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return row, err
	}
	row.Ops, row.Errors = ops.Load(), errs.Load()
	row.Fsyncs, row.FsyncTime, row.Hints = n1-n0, time.Duration(ns1-ns0), h1-h0
	if row.Ops == 0 {
		return row, fmt.Errorf("%d clients: no update was acknowledged (%d failed)", clients, row.Errors)
	}
	return row, nil
}

// WriteDurableTable prints the result as a table.
func WriteDurableTable(w io.Writer, r *DurableResult) error {
	fmt.Fprintf(w, "# raw fsync (write 100 B + fsync, %d samples, one at a time) in %s: p50 %.3f ms, p99 %.3f ms, mean %.3f ms\n",
		r.Fsync.Samples, r.Fsync.Dir, msf(r.Fsync.P50), msf(r.Fsync.P99), msf(r.Fsync.Mean))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "commitlog_sync\tclients\tupdates\tupdates/s\tp50 ms\tp99 ms\tp50/fsync p50\tfsyncs/s/node\tfsync ms\terrors\thints\t")
	for _, row := range r.Rows {
		p50 := time.Duration(row.Latency.ValueAtQuantile(50)) * time.Microsecond
		p99 := time.Duration(row.Latency.ValueAtQuantile(99)) * time.Microsecond
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.1f×\t%.0f\t%.3f\t%d\t%d\t\n", row.Mode, row.Clients, row.Ops, row.Throughput(),
			msf(p50), msf(p99), ratio(p50, r.Fsync.P50), row.FsyncsPerNode(), msf(row.MeanFsync()), row.Errors, row.Hints)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, `
# QUORUM counter updates (UPDATE ... SET c = c + 1) from gocql clients, closed loop, uniform keys, on an embedded ring
# (RF 3); p50/fsync p50: the update's p50 as a multiple of the raw fsync p50 above; fsyncs/s/node and fsync ms: the
# commit log's fsyncs during the row (per node, and their mean duration under the load); errors: failed updates;
# hints: replications to a replica that failed or timed out during the row (stored as hints)
`)
	return err
}

// WriteDurableCSV prints the result as CSV, one line per row.
func WriteDurableCSV(w io.Writer, r *DurableResult) error {
	if _, err := fmt.Fprintln(w, "commitlog_sync,clients,updates,updates_per_s,p50_ms,p99_ms,p50_over_fsync_p50,fsyncs_per_s_per_node,fsync_mean_ms,errors,hints,raw_fsync_p50_ms,raw_fsync_p99_ms"); err != nil {
		return err
	}
	for _, row := range r.Rows {
		p50 := time.Duration(row.Latency.ValueAtQuantile(50)) * time.Microsecond
		p99 := time.Duration(row.Latency.ValueAtQuantile(99)) * time.Microsecond
		if _, err := fmt.Fprintf(w, "%s,%d,%d,%.0f,%.3f,%.3f,%.2f,%.0f,%.3f,%d,%d,%.3f,%.3f\n", row.Mode, row.Clients, row.Ops, row.Throughput(),
			msf(p50), msf(p99), ratio(p50, r.Fsync.P50), row.FsyncsPerNode(), msf(row.MeanFsync()), row.Errors, row.Hints,
			msf(r.Fsync.P50), msf(r.Fsync.P99)); err != nil {
			return err
		}
	}
	return nil
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// runDurableCommand is 'idemkv bench durable'.
func runDurableCommand(args []string, stdout, stderr io.Writer) error {
	fs := benchFlagSet("bench durable", stderr, `usage: idemkv bench durable [flags]

Durable counter writes near the disk, in one run: first the raw fsync
latency of the data directory's filesystem (a 100-byte record appended
and fsynced, as the commit log does), then for each commit log sync mode
an embedded 3-node ring (127.0.0.1-3, RF 3, real files) taking QUORUM
counter updates from gocql clients, with each client count in turn. Each
row reports updates/s, p50, p99, the p50 as a multiple of the raw fsync
p50, and the commit log's fsyncs per second per node. About a minute with
the defaults.
`)
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	modes := fs.String("modes", "periodic,batch,group", "commit log sync modes, comma-separated")
	access := fs.String("commitlog-access", "auto", "the nodes' commit log disk access mode: auto, mmap or standard")
	clients := fs.String("clients", "1,4,16", "gocql client counts, comma-separated")
	nodes := fs.Int("nodes", 3, "nodes of the embedded ring (RF is min(3, nodes))")
	keys := fs.Int("keys", 10000, "distinct counter keys (uniform)")
	dur := fs.Duration("duration", 3*time.Second, "measured time of each row (when --ops is 0)")
	warm := fs.Duration("warmup", 500*time.Millisecond, "unmeasured time before each row")
	ops := fs.Int64("ops", 0, "acknowledged updates per row (0: run for --duration)")
	fsyncs := fs.Int("fsyncs", 2000, "write+fsync samples of the raw fsync measurement")
	timeout := fs.Duration("timeout", 2*time.Second, "client timeout per update, and the nodes' counter write timeout")
	seed := fs.Uint64("seed", 1, "seed of the keys and the embedded ring")
	coalesce := CoalesceFlag(fs)
	procs := fs.Int("gomaxprocs", 0, "run with this GOMAXPROCS (0: Go's default, the CPU count); the three nodes and the clients share the process")
	csv := fs.Bool("csv", false, "print CSV instead of a table")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := DurableConfig{Dir: *dir, Nodes: *nodes, Keys: *keys, Duration: *dur, Warmup: *warm, Ops: *ops, FsyncSamples: *fsyncs,
		Timeout: *timeout, Seed: *seed, Coalesce: *coalesce, Access: *access}
	if *coalesce < 0 {
		return errors.New("--gocql-coalesce must not be negative")
	}
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Modes = append(cfg.Modes, m)
		}
	}
	for _, c := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("--clients: %q is not a positive integer", c)
		}
		cfg.Clients = append(cfg.Clients, n)
	}
	if *dur <= 0 && *ops <= 0 {
		return errors.New("--duration or --ops must be positive")
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if *procs < 0 {
		return errors.New("--gomaxprocs must not be negative")
	}
	if *procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*procs))
	}
	quietGocql()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := RunDurable(ctx, cfg)
	if err != nil {
		return err
	}
	if *csv {
		return WriteDurableCSV(stdout, res)
	}
	fmt.Fprintf(stdout, "# idemkv bench durable %s\n# GOMAXPROCS %d, %d CPUs; %s\n", strings.Join(args, " "), runtime.GOMAXPROCS(0), runtime.NumCPU(), CoalesceSummary(*coalesce))
	return WriteDurableTable(stdout, res)
}
