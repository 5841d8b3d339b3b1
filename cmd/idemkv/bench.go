package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/coordinator"
)

func init() {
	register("bench", "benchmark counters: vanilla vs FBF over-count and latency on a ring (no args: the main comparison); engine; ring; storm; soak; durable", runBench)
}

// startCPUProfile profiles the process's CPU into the file at path until
// stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// profileFile is a runtime profile (allocs, block, mutex) to be written
// after a run to a file created before it, so that a bad path fails first.
type profileFile struct {
	flag, name string
	f          *os.File
}

// createProfiles creates the file of each profile given a path.
func createProfiles(ps []profileFile, paths ...string) ([]profileFile, error) {
	var out []profileFile
	for i, p := range ps {
		if paths[i] == "" {
			continue
		}
		f, err := os.Create(paths[i])
		if err != nil {
			for _, o := range out {
				o.f.Close()
			}
			return nil, fmt.Errorf("--%s: %w", p.flag, err)
		}
		p.f = f
		out = append(out, p)
	}
	return out, nil
}

// writeProfiles writes and closes each profile's file.
func writeProfiles(ps []profileFile) error {
	var first error
	for _, p := range ps {
		err := pprof.Lookup(p.name).WriteTo(p.f, 0)
		if cerr := p.f.Close(); err == nil {
			err = cerr
		}
		if err != nil && first == nil {
			first = fmt.Errorf("--%s: %w", p.flag, err)
		}
	}
	return first
}

func runBench(args []string, stdout, stderr io.Writer) error {
	// --cpuprofile FILE, accepted by every benchmark, profiles the whole run
	// (the embedded ring's nodes and the clients share this process).
	for i := 0; i < len(args) && args[0] != "ring"; i++ { // bench ring has its own --cpuprofile
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || name != "cpuprofile" {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return errors.New("--cpuprofile needs a file name")
			}
			value = args[i+1]
			args = append(args[:i:i], args[i+2:]...)
		} else {
			args = append(args[:i:i], args[i+1:]...)
		}
		stop, err := startCPUProfile(value)
		if err != nil {
			return err
		}
		defer stop()
		break
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return bench.Command("", args, stdout, stderr)
	}
	switch args[0] {
	case "overcount", "latency", "durable":
		return bench.Command(args[0], args[1:], stdout, stderr)
	case "engine":
		return runBenchEngine(args[1:], stdout, stderr)
	case "ring":
		return runBenchRing(args[1:], stdout, stderr)
	case "storm":
		return bench.RunStormCommand(args[1:], stdout, stderr)
	case "soak":
		return bench.RunSoakCommand(args[1:], stdout, stderr)
	case "help":
		benchUsage(stderr)
		return flag.ErrHelp
	}
	benchUsage(stderr)
	return fmt.Errorf("unknown benchmark %q (have: overcount, latency, engine, ring, storm, soak, durable)", args[0])
}

func benchUsage(w io.Writer) {
	fmt.Fprint(w, `usage: idemkv bench [flags]              the main comparison: over-count under lost acks, then latency,
                                         vanilla vs FBF counters, about a minute on an embedded 3-node ring
       idemkv bench overcount [flags]    over-count of each counter mode under injected faults and retries
       idemkv bench latency [flags]      write latency and throughput of each counter mode
       idemkv bench engine [flags]       one node's leader path, in process
       idemkv bench ring [flags]         coordinator-level writes on an embedded ring, no CQL
       idemkv bench storm [flags]        hostile CQL clients (connection storm, never-reading pipeliner,
                                         oversized frames) against a node process of its own (--embedded:
                                         in this process): a client's latency, the node's RSS and CPU
       idemkv bench soak [flags]         distinct counters of each design (10 million by default) through CQL into
                                         a node process of its own: its RSS, Go heap and counter cache as they go
       idemkv bench durable [flags]      raw fsync latency, then QUORUM updates through CQL in each
                                         commitlog_sync mode with 1, 4 and 16 clients (about a minute)

run 'idemkv bench <benchmark> -h' for its flags; --hosts h1,h2 sends the load to a running ring
(e.g. 'idemkv ring up', CQL on 9042) instead of an embedded one; --ring-dir DIR sends it to the
ring 'idemkv ring up --dir DIR' started, whose node processes --kill-every kills with SIGKILL
`)
}

func runBenchEngine(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	syncs := fs.String("sync", "batch,group,periodic", "commit log sync modes to compare, comma-separated")
	writers := fs.String("writers", "16", "concurrent writers, comma-separated list")
	keys := fs.String("keys", "1,10000", "distinct keys (1 = one hot counter), comma-separated list")
	dur := fs.Duration("duration", 2*time.Second, "measured time of each run")
	warm := fs.Duration("warmup", 300*time.Millisecond, "unmeasured time before each run")
	window := fs.Duration("group-window", 0, "group mode window (0: the commit log's default)")
	seed := fs.Uint64("seed", 1, "seed of the key choice")
	dir := fs.String("dir", "", "data directory (default: a fresh temporary directory per run)")
	format := fs.String("format", "table", "output: table or csv")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var modes []commitlog.SyncMode
	for _, s := range strings.Split(*syncs, ",") {
		m, err := commitlog.ParseSyncMode(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		modes = append(modes, m)
	}
	ws, err := intList(*writers)
	if err != nil {
		return fmt.Errorf("--writers: %w", err)
	}
	ks, err := intList(*keys)
	if err != nil {
		return fmt.Errorf("--keys: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stdout, "# idemkv bench engine --sync %s --writers %s --keys %s --duration %s --warmup %s --seed %d\n",
		*syncs, *writers, *keys, *dur, *warm, *seed)
	fmt.Fprintln(stdout, "# vanilla counter increments through one embedded node's leader path (lock, read shard, log, memtable)")
	var results []bench.EngineResult
	for _, k := range ks {
		for _, w := range ws {
			for _, m := range modes {
				res, err := bench.RunEngine(ctx, bench.EngineConfig{Dir: *dir, Sync: m, GroupWindow: *window, Writers: w, Keys: k, Duration: *dur, Warmup: *warm, Seed: *seed})
				if err != nil {
					return err
				}
				if res.Mismatched != 0 {
					return fmt.Errorf("%d counters differ from their acknowledged increments (sync %s, writers %d, keys %d)", res.Mismatched, m, w, k)
				}
				results = append(results, res)
				if *format == "csv" {
					continue
				}
				fmt.Fprintf(stderr, "  done: sync=%s writers=%d keys=%d\n", m, w, k)
			}
		}
	}
	switch *format {
	case "table":
		return bench.WriteEngineTable(stdout, results)
	case "csv":
		fmt.Fprintln(stdout, "sync,writers,keys,ops,ops_per_s,p50_us,p99_us,p999_us,max_us")
		for _, r := range results {
			h := r.Latency
			fmt.Fprintf(stdout, "%s,%d,%d,%d,%.0f,%d,%d,%d,%d\n", r.Config.Sync, r.Config.Writers, r.Config.Keys, r.Ops, r.Throughput(),
				h.ValueAtQuantile(50), h.ValueAtQuantile(99), h.ValueAtQuantile(99.9), h.Max())
		}
		return nil
	}
	return fmt.Errorf("--format %q: want table or csv", *format)
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func runBenchRing(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench ring", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "nodes of the embedded ring (node i on 127.0.0.i)")
	rf := fs.Int("rf", 3, "replication factor")
	levels := fs.String("cl", "ONE,QUORUM,ALL", "consistency levels, comma-separated")
	keys := fs.String("keys", "10000,1", "distinct keys per run (1 = one hot counter), comma-separated")
	tables := fs.String("tables", "vanilla,fbf", "counter kinds compared side by side, in this order (a kind may repeat): vanilla, fbf, fbf2 (an FBF table with --fbf2-options)")
	fbf2 := fs.String("fbf2-options", "filter=aging,window=10m", "idempotence options of table kind fbf2 besides class=fbf, comma-separated key=value")
	writers := fs.Int("writers", 32, "concurrent closed-loop writers")
	via := fs.String("via", "coordinator", "client paths measured side by side on the same ring, comma-separated: coordinator (in-process calls to random coordinators), cql (one gocql session, token-aware, through the nodes' CQL ports)")
	route := fs.String("route", "any", "node each update is sent to: any (a random node; over CQL a shuffled replica of the key) or primary (the key's first replica, the leader under the first rule)")
	dur := fs.Duration("duration", 3*time.Second, "measured time of each run")
	warm := fs.Duration("warmup", 500*time.Millisecond, "unmeasured time before each run")
	syncMode := fs.String("commitlog-sync", "periodic", "commit log sync mode of the nodes")
	access := fs.String("commitlog-access", "auto", "commit log disk access mode of the nodes: auto, mmap or standard")
	leader := fs.String("counter-leader", "", "counter leader rule of every table without its own: random (Cassandra's) or first (default: random, and first for FBF tables)")
	seed := fs.Uint64("seed", 1, "seed of key, coordinator and leader choices")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the whole run to this file (go tool pprof -sample_index=alloc_objects)")
	coalesce := bench.CoalesceFlag(fs)
	blockProfile := fs.String("blockprofile", "", "write a profile of where goroutines blocked (channels, locks, select; every event) to this file")
	mutexProfile := fs.String("mutexprofile", "", "write a profile of contended mutexes (every contention) to this file")
	profileDir := fs.String("profile-dir", "", "with --breakdown, keep each measured run's CPU profile in this directory (NN-table-CL-keys-via.prof); the warm-up is not in them")
	breakdown := fs.Bool("breakdown", false, "profile each measured run and print its CPU µs per update by component (client, CQL server, executor, coordinator, transport, replica, ...); not with --cpuprofile")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *coalesce < 0 {
		return errors.New("bench ring: --gocql-coalesce must not be negative")
	}
	if *profileDir != "" {
		if !*breakdown {
			return errors.New("bench ring: --profile-dir keeps the profiles of --breakdown; give both")
		}
		if err := os.MkdirAll(*profileDir, 0o755); err != nil {
			return fmt.Errorf("--profile-dir: %w", err)
		}
	}
	if *cpuProfile != "" && *breakdown {
		return errors.New("bench ring: --breakdown profiles each run itself; it cannot run with --cpuprofile")
	}
	profiles, err := createProfiles([]profileFile{{"memprofile", "allocs", nil}, {"blockprofile", "block", nil}, {"mutexprofile", "mutex", nil}},
		*memProfile, *blockProfile, *mutexProfile)
	if err != nil {
		return err
	}
	if *blockProfile != "" {
		runtime.SetBlockProfileRate(1)
		defer runtime.SetBlockProfileRate(0)
	}
	if *mutexProfile != "" {
		defer runtime.SetMutexProfileFraction(runtime.SetMutexProfileFraction(1))
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var cls []coordinator.ConsistencyLevel
	for _, s := range strings.Split(*levels, ",") {
		cl, err := coordinator.ParseConsistencyLevel(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		cls = append(cls, cl)
	}
	fbf2Opts := map[string]string{}
	for _, kv := range strings.Split(*fbf2, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--fbf2-options: %q is not key=value", kv)
		}
		fbf2Opts[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	ks, err := intList(*keys)
	if err != nil {
		return fmt.Errorf("--keys: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stdout, "# idemkv bench ring --nodes %d --rf %d --cl %s --keys %s --tables %s --fbf2-options %s --via %s --route %s --writers %d --duration %s --warmup %s --commitlog-sync %s --commitlog-access %s --counter-leader %s --gocql-coalesce %s --seed %d\n",
		*nodes, *rf, *levels, *keys, *tables, *fbf2, *via, *route, *writers, *dur, *warm, *syncMode, *access, *leader, *coalesce, *seed)
	fmt.Fprintln(stdout, "# counter increments of an embedded ring (nodes talk over TCP on 127.0.0.i), via random coordinators called in")
	fmt.Fprintf(stdout, "# process (coordinator) or through gocql and the nodes' CQL servers (cql; %s);\n", bench.CoalesceSummary(*coalesce))
	fmt.Fprintln(stdout, "# fbf: every update carries a fresh op id and the FBF tables lead on the first live replica")
	results, err := bench.RunRing(ctx, bench.RingConfig{
		Nodes: *nodes, RF: *rf, Levels: cls, Keys: ks, Tables: strings.Split(*tables, ","), Writers: *writers, Duration: *dur, Warmup: *warm,
		Via: strings.Split(*via, ","), Route: *route, Breakdown: *breakdown, ProfileDir: *profileDir, Coalesce: *coalesce, Seed: *seed, Sync: *syncMode, Access: *access, Leader: *leader, Progress: stderr,
		WindowOptions: fbf2Opts,
	})
	if err != nil {
		return err
	}
	if err := writeProfiles(profiles); err != nil {
		return err
	}
	if err := bench.WriteRingTable(stdout, results); err != nil {
		return err
	}
	if *breakdown {
		fmt.Fprintln(stdout, "# CPU µs per acknowledged update, by the innermost component on each profiled stack (system calls and")
		fmt.Fprintln(stdout, "# allocations go to the component that made them; client = gocql or the in-process caller)")
		if err := bench.WriteBreakdown(stdout, results); err != nil {
			return err
		}
	}
	for _, r := range results {
		if r.Wrong != 0 {
			return fmt.Errorf("%s at %s: %d counters hold more than every increment attempted, or miss increments no false positive explains", r.Table, r.CL, r.Wrong)
		}
	}
	return nil
}
