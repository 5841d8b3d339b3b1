package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"golang.org/x/term"

	"github.com/idemkv/idemkv/localring"
	"github.com/idemkv/idemkv/peer/cassandra"
)

// Command runs the load-generator benchmarks of the idemkv command line:
// name "" is 'idemkv bench' (the main comparison: over-count, then
// latency), "overcount" and "latency" the single benchmarks, "durable" the
// durable-writes comparison of the commit log sync modes. args are the
// flags; the output goes to stdout (table, JSON or CSV), the progress bar
// and the files written to stderr.
func Command(name string, args []string, stdout, stderr io.Writer) error {
	switch name {
	case "":
		return runMainCommand(args, stdout, stderr)
	case "overcount", "latency":
		return runLoadCommand(name, args, stdout, stderr)
	case "durable":
		return runDurableCommand(args, stdout, stderr)
	}
	return fmt.Errorf("bench: unknown benchmark %q", name)
}

// loadFlags are the flags of the load-generator benchmarks.
type loadFlags struct {
	hosts, ringDir             *string
	port                       *int
	nodes, rf                  *int
	cl, modes                  *string
	clients                    *int
	rate                       *float64
	ops                        *int64
	duration                   *time.Duration
	keys                       *int
	dist                       *string
	zipfS                      *float64
	batch                      *int
	deltaMax                   *int64
	attempts                   *int
	horizon, timeout           *time.Duration
	coalesce                   *time.Duration
	lostAck, delay             *float64
	delayBy                    *time.Duration
	killEvery, down            *time.Duration
	pauseEvery, pauseFor       *time.Duration
	sample                     *time.Duration
	handoffExchanges           *int
	resetSampler               *time.Duration
	resetSampleKeys            *int
	seed                       *uint64
	format, out, dir           *string
	quiet, check               *bool
	counterWriteTimeout        *time.Duration
	sync                       *string
	fbfBits, fbfFPP, fbfFilter *string
	fbfLeader                  *string
	proxy                      *bool
	proxyListen                *string
	proxyReset                 *float64
}

// loadDefaults are a benchmark's flag defaults.
type loadDefaults struct {
	ops      int64
	duration time.Duration
	lostAck  float64
	delay    float64
}

func addLoadFlags(fs *flag.FlagSet, d loadDefaults) *loadFlags {
	return &loadFlags{
		hosts:               fs.String("hosts", "", "CQL addresses of a running ring, comma-separated (host or host:port); empty: start an embedded ring"),
		ringDir:             fs.String("ring-dir", "", "the directory of a ring started by 'idemkv ring up' (its --dir): the load goes to its nodes (--hosts defaults to their CQL addresses) and --kill-every kills a seeded node process with SIGKILL and starts it again after --down; without kills the nodes' CPU time per acknowledged op is reported"),
		port:                fs.Int("port", 9042, "CQL port of --hosts given without one"),
		nodes:               fs.Int("nodes", 3, "nodes of the embedded ring (node i on 127.0.0.i)"),
		rf:                  fs.Int("rf", 3, "replication factor of keyspace bench when the run creates it"),
		cl:                  fs.String("cl", "QUORUM", "consistency level of the updates (final values are read at ALL)"),
		modes:               fs.String("modes", "vanilla,fbf", "counter modes run side by side: tables vanilla, fbf, handoff (a handoff_counter column; clients are tier-1 participants) reset (a reset_counter column, with op ids like every mode; see --reset-sampler) and borrow (a borrow_counter column; clients borrow a dot)"),
		clients:             fs.Int("clients", 16, "concurrent clients per mode, each with its own op-id client id"),
		rate:                fs.Float64("rate", 0, "open loop: ops/s per mode on a fixed schedule (0: closed loop)"),
		ops:                 fs.Int64("ops", d.ops, "ops per mode (0: run for --duration)"),
		duration:            fs.Duration("duration", d.duration, "how long to run when --ops is 0"),
		keys:                fs.Int("keys", 1000, "distinct counter keys"),
		dist:                fs.String("dist", "uniform", "key distribution: uniform, zipf (seeded) or hot (one key)"),
		zipfS:               fs.Float64("zipf-s", 1.1, "Zipf exponent (> 1)"),
		batch:               fs.Int("batch", 1, "updates per op: 1 is a single UPDATE, more a COUNTER BATCH"),
		deltaMax:            fs.Int64("delta-max", 1, "each update adds a seeded delta in [1, delta-max]"),
		attempts:            fs.Int("attempts", 4, "A: the most attempts of one op (same op id)"),
		horizon:             fs.Duration("horizon", 10*time.Second, "H: no retry starts later than H after its op's first attempt; fbf's retry_horizon"),
		timeout:             fs.Duration("timeout", time.Second, "client timeout per attempt"),
		coalesce:            CoalesceFlag(fs),
		lostAck:             fs.Float64("lost-ack", d.lostAck, "probability that an attempt's answer is lost after it applied"),
		delay:               fs.Float64("delay", d.delay, "probability that an attempt's answer comes after the client timeout (running ring: the client abandons it)"),
		delayBy:             fs.Duration("delay-by", 0, "how long a delayed answer waits (default: --timeout + 100ms)"),
		killEvery:           fs.Duration("kill-every", 0, "stop a seeded random node this often, uncleanly (0: never): the embedded ring's node.Crash, or with --ring-dir SIGKILL of the node's process"),
		down:                fs.Duration("down", 2*time.Second, "how long a killed node stays down"),
		pauseEvery:          fs.Duration("pause-every", 0, "embedded ring: stall a seeded random node's CQL executor this often (0: never)"),
		pauseFor:            fs.Duration("pause-for", 0, "how long a pause lasts (default: 1.5 × --timeout)"),
		sample:              fs.Duration("sample", 0, "record expected and read totals at this period (series in the JSON, a plot with --out)"),
		seed:                fs.Uint64("seed", 1, "seed of the op stream (keys, deltas), the faults and the embedded ring"),
		format:              fs.String("format", "table", "output: table, json or csv"),
		out:                 fs.String("out", "", "directory for results.json, results.csv, faults.jsonl and PNG plots"),
		dir:                 fs.String("dir", "", "data directory of the embedded ring (default: a temporary one)"),
		quiet:               fs.Bool("quiet", false, "no progress bar (there is none either when stderr is not a terminal)"),
		check:               fs.Bool("check", false, "exit 1 if FBF over-counts, under-counts beyond its false positives, or a retry left the horizon"),
		counterWriteTimeout: fs.Duration("counter-write-timeout", time.Second, "embedded ring: the nodes' counter write timeout"),
		sync:                fs.String("commitlog-sync", "periodic", "embedded ring: the nodes' commit log sync mode (periodic, batch, group)"),
		fbfBits:             fs.String("fbf-bits", "", "fbf option bits (default: the column's)"),
		fbfFPP:              fs.String("fbf-target-fpp", "", "fbf option target_fpp (default: the column's)"),
		fbfFilter:           fs.String("fbf-filters", "", "fbf option filters (default: the column's)"),
		fbfLeader:           fs.String("fbf-leader", "", "fbf option leader: first or random (Cassandra's rule: a retry may meet another leader's filter) (default: first)"),
		proxy:               fs.Bool("proxy", false, "start a fault proxy in front of every host (--hosts or the embedded ring) and send the load through them: --lost-ack and --delay are injected by the proxies, for any CQL server alike"),
		proxyListen:         fs.String("proxy-listen", "", "with --proxy: the proxies' listen addresses, comma-separated, one per host (default 127.0.2.i on the host's port)"),
		proxyReset:          fs.Float64("proxy-reset", 0, "with --proxy: probability that a proxy closes the connection after forwarding an attempt"),
		resetSampler:        fs.Duration("reset-sampler", 0, "reset mode: every period a sampler reads --reset-sample-keys random keys with their reset contexts and DELETEs each with its context at ALL (0: no sampler); the mode's accuracy is then the samples plus the final values against the increments"),
		resetSampleKeys:     fs.Int("reset-sample-keys", 4, "keys the reset sampler reads and resets per period"),
		handoffExchanges:    fs.Int("handoff-exchanges", 1, "handoff mode: exchanges per op and key (1: an op's increments are handed off by the next op on the key or the final flush; 2: within the op)"),
	}
}

// config turns the flags into a load-generator configuration.
func (f *loadFlags) config(name string, stderr io.Writer) (Config, error) {
	cl, err := gocql.ParseConsistencyWrapper(strings.ToUpper(*f.cl))
	if err != nil {
		return Config{}, fmt.Errorf("--cl: %w", err)
	}
	var modes []string
	for _, m := range strings.Split(*f.modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			modes = append(modes, m)
		}
	}
	if *f.coalesce < 0 {
		return Config{}, errors.New("--gocql-coalesce must not be negative")
	}
	if *f.batch < 1 || *f.keys < 1 || *f.clients < 1 || *f.deltaMax < 1 || *f.attempts < 1 {
		return Config{}, errors.New("--batch, --keys, --clients, --delta-max and --attempts must be positive")
	}
	fbf := map[string]string{}
	for k, v := range map[string]string{"bits": *f.fbfBits, "target_fpp": *f.fbfFPP, "filters": *f.fbfFilter, "leader": *f.fbfLeader} {
		if v != "" {
			fbf[k] = v
		}
	}
	cfg := Config{
		Name:     name,
		Workload: Workload{Keys: *f.keys, Dist: *f.dist, ZipfS: *f.zipfS, Batch: *f.batch, DeltaMax: *f.deltaMax},
		Modes:    modes, Clients: *f.clients, Rate: *f.rate, Ops: *f.ops, Duration: *f.duration,
		Consistency: cl, Attempts: *f.attempts, Horizon: *f.horizon, Timeout: *f.timeout, Coalesce: *f.coalesce,
		Faults: Faults{LostAck: *f.lostAck, Delay: *f.delay, DelayBy: *f.delayBy, KillEvery: *f.killEvery, Down: *f.down,
			PauseEvery: *f.pauseEvery, PauseFor: *f.pauseFor, Reset: *f.proxyReset},
		Seed: *f.seed, RF: *f.rf, FBFOptions: fbf, SampleEvery: *f.sample, HandoffExchanges: *f.handoffExchanges,
		ResetSampler: *f.resetSampler, ResetSampleKeys: *f.resetSampleKeys,
	}
	if !*f.quiet {
		if file, ok := stderr.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
			cfg.Progress = stderr
		}
	}
	if *f.proxy && (cfg.Faults.KillEvery > 0 || cfg.Faults.PauseEvery > 0) {
		return cfg, errProxyFaults
	}
	if !*f.proxy && (*f.proxyListen != "" || *f.proxyReset != 0) {
		return cfg, errors.New("--proxy-listen and --proxy-reset need --proxy")
	}
	if r := *f.proxyReset; r < 0 || r > 1 {
		return cfg, fmt.Errorf("--proxy-reset %g: want 0 to 1", r)
	}
	running := *f.hosts != "" || *f.ringDir != ""
	if running && cfg.Faults.PauseEvery > 0 {
		return cfg, errors.New("--pause-every needs the embedded ring: on --hosts only client-side faults apply (--lost-ack, --delay)")
	}
	if *f.ringDir == "" && *f.hosts != "" && cfg.Faults.KillEvery > 0 {
		return cfg, errors.New("--kill-every on --hosts needs --ring-dir (a ring started by 'idemkv ring up', whose node processes it kills); without either it kills the embedded ring's nodes")
	}
	switch *f.format {
	case "table", "json", "csv":
	default:
		return cfg, fmt.Errorf("--format %q: want table, json or csv", *f.format)
	}
	return cfg, nil
}

// target starts the embedded ring, or names the running one; stop stops
// what it started.
func (f *loadFlags) target(ctx context.Context, stderr io.Writer) (t Target, stop func(), err error) {
	if *f.ringDir != "" {
		p, err := OpenProcessRing(*f.ringDir, *f.seed)
		if err != nil {
			return t, nil, err
		}
		hosts := ParseHosts(*f.hosts, *f.port)
		if len(hosts) == 0 {
			if hosts, err = p.Hosts(); err != nil {
				return t, nil, err
			}
		}
		t, stop = Target{Hosts: hosts, Killer: p, ServerPids: localring.Ring{Dir: *f.ringDir}.Pids}, func() {}
		fmt.Fprintf(stderr, "ring of %d node processes in %s, commit log sync %s, hosts %s\n", p.Size(), *f.ringDir, p.CommitLogSync(), strings.Join(hosts, ","))
		if err := p.WaitUp(ctx); err != nil {
			return t, nil, err
		}
	} else if *f.hosts != "" {
		t, stop = Target{Hosts: ParseHosts(*f.hosts, *f.port)}, func() {}
	} else {
		c, err := StartCluster(ctx, ClusterConfig{Nodes: *f.nodes, Dir: *f.dir, Seed: *f.seed, CounterWriteTimeout: *f.counterWriteTimeout, Sync: *f.sync})
		if err != nil {
			return t, nil, err
		}
		t, stop = Target{Cluster: c}, c.Stop
	}
	if *f.proxy {
		return f.proxied(t, stop, stderr)
	}
	return t, stop, nil
}

// proxied puts fault proxies in front of t's hosts; their warnings (a
// connection closed on a malformed frame, a failed dial) go to stderr.
func (f *loadFlags) proxied(t Target, stop func(), stderr io.Writer) (Target, func(), error) {
	var listen []string
	if *f.proxyListen != "" {
		listen = ParseHosts(*f.proxyListen, *f.port)
	}
	p, err := StartProxies(t.servers(), listen, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		stop()
		return t, nil, err
	}
	t.Proxies = p
	return t, func() { _ = p.Close(); stop() }, nil
}

// emit prints the reports and writes --out.
func (f *loadFlags) emit(stdout, stderr io.Writer, command string, reports ...*Report) error {
	var err error
	switch *f.format {
	case "json":
		err = WriteJSON(stdout, reports...)
	case "csv":
		err = WriteCSV(stdout, reports...)
	default:
		fmt.Fprintf(stdout, "# %s\n", command)
		err = WriteTable(stdout, reports...)
		if err == nil {
			fmt.Fprint(stdout, benchLegend)
		}
	}
	if err != nil {
		return err
	}
	if *f.out != "" {
		files, err := WriteOut(*f.out, reports...)
		for _, p := range files {
			fmt.Fprintf(stderr, "wrote %s\n", p)
		}
		if err != nil {
			return err
		}
	}
	if *f.check {
		return checkReports(reports)
	}
	return nil
}

const benchLegend = `
# ops: acknowledged ops (latency: theirs, retries included); dismissed: updates the FBF (or reset_counter) leaders
# recognised as retries
# expected: Σ acknowledged increments; final: Σ counters read at ALL after the run; unknown: Σ increments no attempt
# of which was acknowledged; over: Σ per key above expected + unknown (counted twice); under: Σ per key below
# expected (lost); error % = 100 · (over + under) / expected
`

// checkReports fails when FBF counted a retry twice, lost more than its
// false positives explain, a retry left the horizon, the handoff or borrow
// mode was not exact, or the reset mode's samples plus final values were
// not (with --reset-sampler).
func checkReports(reports []*Report) error {
	for _, r := range reports {
		if !r.Horizon.AllWithin {
			return fmt.Errorf("%s: a retry started %.0fms after its op's first attempt, beyond H", r.Name, r.Horizon.MaxRetryAfterMS)
		}
		if m, ok := r.Mode(ModeHandoff); ok && (m.Overcount > 0 || m.Undercount > 0) {
			return fmt.Errorf("%s: handoff over-counted by %d and under-counted by %d", r.Name, m.Overcount, m.Undercount)
		}
		if m, ok := r.Mode(ModeBorrow); ok && (m.Overcount > 0 || m.Undercount > 0) {
			return fmt.Errorf("%s: borrow over-counted by %d and under-counted by %d", r.Name, m.Overcount, m.Undercount)
		}
		if m, ok := r.Mode(ModeReset); ok && m.ResetSample != nil && (m.Overcount > 0 || m.Undercount > 0) {
			return fmt.Errorf("%s: reset samples + final over-counted by %d and under-counted by %d", r.Name, m.Overcount, m.Undercount)
		}
		m, ok := r.Mode(ModeFBF)
		if !ok {
			continue
		}
		if m.Overcount > 0 {
			return fmt.Errorf("%s: fbf over-counted by %d", r.Name, m.Overcount)
		}
		if m.DismissedKnown && m.Undercount > m.FalsePositives*r.Config.DeltaMax {
			return fmt.Errorf("%s: fbf under-counted by %d, more than its %d false positives explain", r.Name, m.Undercount, m.FalsePositives)
		}
	}
	return nil
}

func benchFlagSet(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	return fs
}

func runLoadCommand(name string, args []string, stdout, stderr io.Writer) error {
	d := loadDefaults{ops: 20000, lostAck: 0.05, duration: 20 * time.Second}
	usage := `usage: idemkv bench overcount [flags]

Runs the same seeded stream of counter updates against vanilla and
fbf at the same time, with injected faults (lost acknowledgements,
answers delayed past the client timeout, killed or paused nodes); clients
retry an op with its op id up to --attempts times within --horizon, then
every key is read at ALL and compared with the acknowledged increments.
`
	if name == "latency" {
		d = loadDefaults{duration: 10 * time.Second}
		usage = `usage: idemkv bench latency [flags]

Measures the write latency (HdrHistogram) and throughput of vanilla and
fbf side by side on the same ring with the same seeded op stream, no
faults by default; the accuracy columns are reported too.
`
	}
	fs := benchFlagSet("bench "+name, stderr, usage)
	lf := addLoadFlags(fs, d)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := lf.config(name, stderr)
	if err != nil {
		return err
	}
	quietGocql()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	t, stopRing, err := lf.target(ctx, stderr)
	if err != nil {
		return err
	}
	defer stopRing()
	rep, err := Run(ctx, t, cfg)
	if err != nil {
		return err
	}
	return lf.emit(stdout, stderr, strings.TrimSpace("idemkv bench "+name+" "+strings.Join(args, " ")), rep)
}

// mainRun is the parsed command line of 'idemkv bench'.
type mainRun struct {
	lf      *loadFlags
	oc, lat Config
	peer    []string // --cassandra-hosts, host:port
	peerDir string   // --cassandra-dir
	alone   bool     // --alone
}

// parseMain parses the flags of 'idemkv bench'.
func parseMain(args []string, stderr io.Writer) (*mainRun, error) {
	fs := benchFlagSet("bench", stderr, `usage: idemkv bench [flags]

The main comparison of vanilla and FBF counters, about a minute: an embedded
3-node ring on 127.0.0.1-3 (or --hosts), RF 3, QUORUM; first the over-count
phase (--overcount-duration, lost acks and late answers, clients retrying the
same op id), then the latency phase (--latency-duration, no faults); --duration
sets both phases that are not given their own. The flags are those of 'idemkv
bench overcount'; --lost-ack and --delay apply to the first phase only. --cassandra-hosts adds a row "cassandra vanilla" to
both tables: the same op stream on an Apache Cassandra ring ('idemkv peer
cassandra up'), at the same time as the idemkv modes of each phase, with
client-side faults on both sides. --alone runs the rows of each phase one
at a time instead (the idemkv modes in order, then Cassandra's), so that
each row's throughput is what its server takes alone, not its share of
cores the other rows also want.
`)
	lf := addLoadFlags(fs, loadDefaults{lostAck: 0.05, delay: 0.002})
	ocDur := fs.Duration("overcount-duration", 25*time.Second, "length of the over-count phase")
	latDur := fs.Duration("latency-duration", 25*time.Second, "length of the latency phase")
	peerDir := fs.String("cassandra-dir", "", "with --cassandra-hosts, the directory of that ring ('idemkv peer cassandra up --dir'): its JVMs' CPU time during each phase is reported per acknowledged op, beside idemkv's nodes' with --ring-dir")
	peer := fs.String("cassandra-hosts", "", "CQL addresses of an Apache Cassandra ring ('idemkv peer cassandra up'), comma-separated: adds a row \"cassandra vanilla\" (keyspace bench there, RF min(--rf, hosts), --cl) to both tables; the faults are then client-side for every row")
	alone := fs.Bool("alone", false, "run the rows of each phase one at a time, each alone on the machine (the modes in order, then the --cassandra-hosts row), not all at the same time")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	oc, err := lf.config("overcount", stderr)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["duration"] {
		// --duration is the load flags' length of a run: here, of each
		// phase not given its own.
		if !set["overcount-duration"] {
			*ocDur = *lf.duration
		}
		if !set["latency-duration"] {
			*latDur = *lf.duration
		}
	}
	if oc.Ops <= 0 {
		oc.Duration = *ocDur
	}
	lat := oc
	lat.Name, lat.Faults, lat.Ops, lat.Duration = "latency", Faults{}, 0, *latDur
	m := &mainRun{lf: lf, oc: oc, lat: lat, peer: ParseHosts(*peer, *lf.port), peerDir: *peerDir, alone: *alone}
	if m.peerDir != "" && len(m.peer) == 0 {
		return nil, errors.New("--cassandra-dir: give the ring's CQL addresses with --cassandra-hosts")
	}
	if len(m.peer) > 0 {
		switch {
		case *lf.proxy:
			return nil, errors.New("--cassandra-hosts: faults are client-side on both sides; --proxy is not supported with it")
		case oc.Faults.KillEvery > 0 || oc.Faults.PauseEvery > 0:
			return nil, errors.New("--cassandra-hosts: --kill-every and --pause-every cannot be applied to the Cassandra ring alike")
		}
	}
	return m, nil
}

// runMainCommand is `idemkv bench` with no benchmark: the over-count
// comparison under lost acks, then the latency comparison, on one ring, and
// with --cassandra-hosts on an Apache Cassandra ring too.
func runMainCommand(args []string, stdout, stderr io.Writer) error {
	m, err := parseMain(args, stderr)
	if err != nil {
		return err
	}
	quietGocql()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	t, stopRing, err := m.lf.target(ctx, stderr)
	if err != nil {
		return err
	}
	defer stopRing()
	var reports []*Report
	for _, cfg := range []Config{m.oc, m.lat} {
		// The peer's row runs at the same time as the idemkv modes, as
		// the modes run at the same time as one another; with --alone
		// every row runs by itself.
		peer := Target{Hosts: m.peer}
		if m.peerDir != "" {
			peer.ServerPids = cassandra.Ring{Dir: m.peerDir}.Pids
		}
		run := RunWithPeer
		if m.alone {
			run = RunEachAlone
		}
		rep, err := run(ctx, t, cfg, peer)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
	}
	return m.lf.emit(stdout, stderr, strings.TrimSpace("idemkv bench "+strings.Join(args, " ")), reports...)
}

// quietGocql silences gocql's log: a benchmark that kills nodes makes it
// report every failed dial, and the failures are counted anyway.
func quietGocql() { gocql.Logger = log.New(io.Discard, "", 0) }
