package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/node"
	"github.com/idemkv/idemkv/schema"
)

// StormConfig configures the hostile-client benchmark (idemkv bench storm).
type StormConfig struct {
	Dir       string        // data directory; "" a temporary one
	Phase     time.Duration // length of each measured phase: before, during and after the storm
	Settle    time.Duration // wait after the storm before the last RSS reading
	Conns     int           // connections the storm opens and holds
	Churners  int           // goroutines that connect, handshake and close in a loop
	Pipeline  int           // requests the never-reading client pipelines
	Oversized int           // goroutines sending oversized frames in a loop
	Clients   int           // gocql goroutines measuring latency
	// Embedded runs the node in this process, with the attackers and the
	// measured client, instead of as a process of its own: the RSS read is
	// then the whole benchmark's.
	Embedded bool
	// Binary is the idemkv binary the node process, and the attackers'
	// process, run ('idemkv node', 'idemkv bench storm --attack-only');
	// "" this executable.
	Binary string
	// AttackProcess runs the attackers in a process of their own rather
	// than in the benchmark's, with the measured client.
	AttackProcess bool
	// AttackNice is the nice value of the attackers' process (with
	// AttackProcess): 19 gives the node and the measured client the CPU
	// first, as if the attackers were other machines.
	AttackNice int
	// Node is the configuration of the node; its data directory, address
	// and ports are set by the benchmark.
	Node node.Config
	Out  io.Writer // progress lines; nil: none
	// MemProfile, when set, receives a heap profile taken after the last
	// RSS reading (Embedded only).
	MemProfile string
}

// StormPhase is a measured phase's gocql latency.
type StormPhase struct {
	Name     string
	Ops      int
	Errors   int
	P50, P99 time.Duration
	Max      time.Duration
	NodeCPU  time.Duration // CPU time the node's process used during the phase (the whole benchmark's when embedded)
}

// StormResult is what the storm benchmark measured.
type StormResult struct {
	Embedded      bool // the node ran in the benchmark's process
	AttackProcess bool // the attackers ran in a process of their own
	Phases        []StormPhase
	// RSS of the node's process (VmRSS from /proc/<pid>/status; the
	// benchmark's own when the node is embedded), in bytes: before the
	// storm, its peak during it, at the end of the after phase and after
	// the settle time.
	RSSBaseline, RSSPeak, RSSEnd, RSSSettled int64
	Settle                                   time.Duration
	// RSSStormSettled is the RSS the settle time after the storm's end
	// (during the after phase if Settle is shorter than it).
	RSSStormSettled int64
	// Anonymous and file-backed RSS at the baseline and after the settle
	// time (RssAnon, RssFile), in bytes.
	AnonBaseline, FileBaseline, AnonSettled, FileSettled int64
	// The node's Go memory at the baseline, at the sample with the highest
	// RSS and after the settle time, to tell the heap from the rest.
	MemBaseline, MemPeak, MemSettled StormMem
	Goroutines, GoroutinesPeak       int // the node's, after the settle time, at the RSS peak sample
	// Peak is the CQL server's counters at the sample with the most
	// request bytes in flight; Final at the end.
	Peak, Final cql.Stats
	PeakConns   int64
	Attack      StormAttack
	LogPath     string // the node process's log (kept when Dir is set)
}

// StormAttack counts what the attackers did.
type StormAttack struct {
	Held, Refused, DialErrors int64 // storm connections held, refused (OVERLOADED or closed), failed to dial
	Churned                   int64 // connect-handshake-close cycles
	Pipelined                 int64 // requests the never-reading client wrote
	OversizedSent             int64 // oversized frame headers sent
}

// startStormNode starts the benchmark's node, embedded or as a process of
// its own, and creates its schema; it returns the node and its CQL port.
func startStormNode(ctx context.Context, cfg StormConfig) (stormNode, int, error) {
	port, err := FreePort(1, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)))
	if err != nil {
		return nil, 0, err
	}
	nc := cfg.Node
	nc.DataDirectory = filepath.Join(cfg.Dir, "node1")
	nc.ListenAddress = "127.0.0.1"
	nc.StoragePort, nc.NativeTransportPort = port, port+1
	nc.Seeds = []string{fmt.Sprintf("127.0.0.1:%d", port)}
	if cfg.Embedded {
		nc.AdminPort = -1
		n, err := node.Start(nc, node.Options{Logger: slog.New(slog.DiscardHandler), Seed: 1})
		if err != nil {
			return nil, 0, fmt.Errorf("bench: storm: start node: %w", err)
		}
		err = n.Schema().CreateKeyspace(schema.Keyspace{Name: "bench", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "1"}}, true)
		if err == nil {
			err = n.Schema().CreateTable(VanillaTable, true)
		}
		if err == nil {
			err = n.WaitSchemaAgreement(ctx)
		}
		if err != nil {
			n.Stop()
			return nil, 0, fmt.Errorf("bench: storm: schema: %w", err)
		}
		return embeddedNode{n}, port + 1, nil
	}
	if nc.AdminPort, err = freeTCPPort(); err != nil {
		return nil, 0, err
	}
	bin := cfg.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, 0, fmt.Errorf("bench: storm: %w", err)
		}
	}
	p, err := startNodeProcess(ctx, bin, cfg.Dir, nc)
	if err != nil {
		return nil, 0, err
	}
	return p, port + 1, nil
}

// createStormSchema creates the benchmark's table through CQL.
func createStormSchema(sess *gocql.Session) error {
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS bench WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS bench.counters (k text PRIMARY KEY, c counter)",
	} {
		if err := sess.Query(q).Exec(); err != nil {
			return fmt.Errorf("bench: storm: schema: %w", err)
		}
	}
	return nil
}

// RunStorm starts a node (a process of its own, or embedded), measures a
// gocql client's latency, then runs a connection storm, a client
// pipelining requests it never reads and clients sending oversized frames
// while measuring again, then measures once more after the storm, and
// reads the node's RSS throughout.
func RunStorm(ctx context.Context, cfg StormConfig) (*StormResult, error) {
	if cfg.Phase <= 0 || cfg.Clients < 1 {
		return nil, errors.New("bench: storm: phase and clients must be positive")
	}
	progress := func(format string, args ...any) {
		if cfg.Out != nil {
			fmt.Fprintf(cfg.Out, format+"\n", args...)
		}
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "idemkv-bench-storm-")
		if err != nil {
			return nil, fmt.Errorf("bench: storm: %w", err)
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: storm: %w", err)
	}
	n, cqlPort, err := startStormNode(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer n.stop()
	addr := fmt.Sprintf("127.0.0.1:%d", cqlPort)
	res := &StormResult{Settle: cfg.Settle, Embedded: cfg.Embedded, AttackProcess: cfg.AttackProcess}
	if p, ok := n.(*nodeProcess); ok {
		res.LogPath = p.logPath
		progress("node process %d, log %s", p.cmd.Process.Pid, p.logPath)
	}

	quietGocql()
	cc := gocql.NewCluster("127.0.0.1")
	cc.Port = cqlPort
	cc.Consistency = gocql.One
	cc.Timeout = 5 * time.Second
	cc.ConnectTimeout = 5 * time.Second
	cc.NumConns = 2
	cc.RetryPolicy = nil
	sess, err := cc.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("bench: storm: gocql: %w", err)
	}
	defer sess.Close()
	if !cfg.Embedded {
		if err := createStormSchema(sess); err != nil {
			return nil, err
		}
	}

	measure := func(name string) StormPhase {
		cpu0 := n.cpu()
		var mu sync.Mutex
		var lat []time.Duration
		errs := 0
		pctx, cancel := context.WithTimeout(ctx, cfg.Phase)
		defer cancel()
		var wg sync.WaitGroup
		for w := range cfg.Clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				bad := 0
				for i := 0; pctx.Err() == nil; i++ {
					t := time.Now()
					err := sess.Query(`UPDATE bench.counters SET c = c + 1 WHERE k = ?`, fmt.Sprintf("k%d-%d", w, i%1000)).
						WithContext(pctx).Exec()
					if err != nil {
						if pctx.Err() == nil {
							if bad == 0 && w == 0 {
								progress("%s: %v", name, err)
							}
							bad++
						}
						continue
					}
					mine = append(mine, time.Since(t))
				}
				mu.Lock()
				lat = append(lat, mine...)
				errs += bad
				mu.Unlock()
			}()
		}
		wg.Wait()
		slices.Sort(lat)
		p := StormPhase{Name: name, Ops: len(lat), Errors: errs, NodeCPU: n.cpu() - cpu0}
		if len(lat) > 0 {
			p.P50, p.P99, p.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
		}
		progress("%-7s %8d ops %5d errors  p50 %-10v p99 %-10v max %-10v node CPU %v", name, p.Ops, p.Errors, p.P50, p.P99, p.Max, p.NodeCPU)
		return p
	}

	// Warm up, then the baseline.
	measure("warmup")
	if cfg.Embedded {
		runtime.GC()
	}
	res.RSSBaseline = n.rss()
	res.Phases = append(res.Phases, measure("before"))
	res.RSSBaseline = max(res.RSSBaseline, n.rss())
	sp := n.split()
	res.AnonBaseline, res.FileBaseline = sp.Anon, sp.File
	_, res.MemBaseline, _, _ = n.sample()
	progress("RSS baseline %s", mb(res.RSSBaseline))

	// The storm, while measuring. RSS is read every 100 ms; the counters
	// and the Go memory (a metrics scrape for a node process) every 500 ms,
	// or at a new RSS peak for an embedded node, as before.
	actx, stopAttack := context.WithCancel(ctx)
	var attackers sync.WaitGroup
	var counts func() StormAttack
	if cfg.AttackProcess {
		bin := cfg.Binary
		if bin == "" {
			if bin, err = os.Executable(); err != nil {
				stopAttack()
				return nil, fmt.Errorf("bench: storm: %w", err)
			}
		}
		stop, err := startAttackProcess(bin, addr, cfg)
		if err != nil {
			stopAttack()
			return nil, err
		}
		var attackErr error
		attackers.Add(1)
		var a StormAttack
		context.AfterFunc(actx, func() {
			defer attackers.Done()
			a, attackErr = stop()
			if attackErr != nil {
				progress("%v", attackErr)
			}
		})
		counts = func() StormAttack { return a }
	} else {
		counts = startAttack(actx, &attackers, addr, cfg)
	}
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var peakAtSample int64
		for tick := 0; ; tick++ {
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
			r := n.rss()
			newPeak := r > res.RSSPeak
			res.RSSPeak = max(res.RSSPeak, r)
			if !(cfg.Embedded && newPeak) && tick%5 != 0 {
				continue
			}
			st, mem, g, ok := n.sample()
			if !ok {
				continue
			}
			if r >= peakAtSample {
				peakAtSample = r
				res.MemPeak, res.GoroutinesPeak = mem, g
			}
			res.PeakConns = max(res.PeakConns, st.ConnectionsOpen)
			if st.RequestBytesInFlight >= res.Peak.RequestBytesInFlight {
				res.Peak = st
			}
		}
	}()
	res.Phases = append(res.Phases, measure("during"))
	stopAttack()
	attackers.Wait()
	<-sampleDone
	var stormSettled atomic.Int64
	stormTimer := time.AfterFunc(cfg.Settle, func() { stormSettled.Store(n.rss()) })
	defer stormTimer.Stop()
	res.Attack = counts()
	att := res.Attack
	res.RSSPeak = max(res.RSSPeak, n.rss())
	progress("storm: %d connections held, %d refused, %d dial errors; %d churned; %d requests pipelined unread; %d oversized frames",
		att.Held, att.Refused, att.DialErrors, att.Churned, att.Pipelined, att.OversizedSent)
	progress("RSS peak %s", mb(res.RSSPeak))

	res.Phases = append(res.Phases, measure("after"))
	res.RSSEnd = n.rss()
	progress("RSS at the end of the after phase %s; settling %v", mb(res.RSSEnd), cfg.Settle)
	select {
	case <-time.After(cfg.Settle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res.RSSSettled = n.rss()
	res.RSSStormSettled = stormSettled.Load()
	sp = n.split()
	res.AnonSettled, res.FileSettled = sp.Anon, sp.File
	res.Final, res.MemSettled, res.Goroutines, _ = n.sample()
	if p, ok := n.(*nodeProcess); ok {
		// Not among the node's metrics: counted from its log.
		res.Final.MemoryReleases = int64(p.countLog(memoryReleaseLog))
	}
	if cfg.MemProfile != "" && cfg.Embedded {
		f, err := os.Create(cfg.MemProfile)
		if err != nil {
			return nil, fmt.Errorf("bench: storm: %w", err)
		}
		runtime.GC()
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("bench: storm: heap profile: %w", err)
		}
	}
	return res, nil
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// rawHandshake connects to addr and does OPTIONS and STARTUP, reading the
// answers; a refusal (an ERROR answer, or a closed connection) is an
// error.
func rawHandshake(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	b, _ := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: 1, Message: &frame.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}})
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		c.Close()
		return nil, err
	}
	// A small buffer: the attackers share the node's process, and their
	// garbage should not be counted as the node's.
	h, _, err := frame.NewReader(bufio.NewReaderSize(c, 64), 0).Read()
	if err == nil && h.Op != frame.OpReady {
		err = fmt.Errorf("STARTUP answered with %v", h.Op)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// startAttack starts the storm's attackers, which stop when ctx ends, and
// returns what reads their counts.
func startAttack(ctx context.Context, wg *sync.WaitGroup, addr string, cfg StormConfig) func() StormAttack {
	var held, refused, dialErrs, churned, pipelined, oversized atomic.Int64
	classify := func(err error) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "connect:") {
			dialErrs.Add(1)
		} else {
			refused.Add(1)
		}
	}
	// Connection storm: Conns connections opened by 16 dialers and held.
	var next atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []net.Conn
			defer func() {
				for _, c := range mine {
					c.Close()
				}
			}()
			for ctx.Err() == nil && next.Add(1) <= int64(cfg.Conns) {
				c, err := rawHandshake(ctx, addr)
				if err != nil {
					if ctx.Err() == nil {
						classify(err)
					}
					continue
				}
				held.Add(1)
				mine = append(mine, c)
			}
			<-ctx.Done()
		}()
	}
	// Churners.
	for range cfg.Churners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := rawHandshake(ctx, addr)
				if err != nil {
					if ctx.Err() == nil {
						classify(err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				c.Close()
				churned.Add(1)
			}
		}()
	}
	// A client pipelining requests it never reads.
	if cfg.Pipeline > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := rawHandshake(ctx, addr)
			if err != nil {
				classify(err)
				return
			}
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			defer c.Close()
			bw := bufio.NewWriterSize(c, 64<<10)
			var b []byte
			for i := 0; i < cfg.Pipeline && ctx.Err() == nil; i++ {
				b, _ = frame.AppendFrame(b[:0], &frame.Frame{Version: 4, Stream: int16(i%32767 + 1),
					Message: &frame.Query{Query: "SELECT * FROM system.local", Params: frame.QueryParams{Consistency: 1}}})
				if _, err := bw.Write(b); err != nil {
					return
				}
				pipelined.Add(1)
			}
			bw.Flush()
			<-ctx.Done()
		}()
	}
	// Oversized frames: a 16 MiB STARTUP (before the handshake) and a
	// 256 MiB QUERY (after it), each header followed by as much of its body
	// as the server takes.
	zeros := make([]byte, 64<<10)
	for i := range cfg.Oversized {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var c net.Conn
				var err error
				hdr := frame.Header{Version: 4, Stream: 9, Op: frame.OpStartup, Length: 16 << 20}
				if i%2 == 1 {
					hdr = frame.Header{Version: 4, Stream: 9, Op: frame.OpQuery, Length: 256 << 20}
					c, err = rawHandshake(ctx, addr)
				} else {
					c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
				}
				if err != nil {
					if ctx.Err() == nil {
						classify(err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write(frame.AppendHeader(nil, hdr)); err == nil {
					oversized.Add(1)
					for sent := 0; sent < int(hdr.Length); sent += len(zeros) {
						if _, err := c.Write(zeros); err != nil {
							break
						}
					}
				}
				stop()
				c.Close()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return func() StormAttack {
		return StormAttack{Held: held.Load(), Refused: refused.Load(), DialErrors: dialErrs.Load(),
			Churned: churned.Load(), Pipelined: pipelined.Load(), OversizedSent: oversized.Load()}
	}
}

// RunStormCommand is 'idemkv bench storm': flags, run, report.
func RunStormCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench storm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	phase := fs.Duration("phase", 10*time.Second, "length of each measured phase (before, during and after the storm)")
	settle := fs.Duration("settle", time.Minute, "wait after the storm before the last RSS reading")
	conns := fs.Int("conns", 2000, "connections the storm opens and holds")
	churners := fs.Int("churners", 4, "goroutines that connect, handshake and close in a loop")
	pipeline := fs.Int("pipeline", 100000, "requests the never-reading client pipelines")
	oversized := fs.Int("oversized", 8, "goroutines sending oversized frames (16 MiB STARTUP, 256 MiB QUERY) in a loop")
	clients := fs.Int("clients", 4, "gocql goroutines measuring latency")
	maxConns := fs.Int("max-conns", 0, "native_transport_max_concurrent_connections (0: the node's default, no limit)")
	maxConnsIP := fs.Int("max-conns-per-ip", 0, "native_transport_max_concurrent_connections_per_ip (0: the node's default, no limit)")
	maxReqs := fs.Int("max-requests-per-conn", 0, "native_transport_max_requests_per_connection (0: the node's default, 1024)")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed)")
	memprofile := fs.String("memprofile", "", "write a heap profile to this file at the end (--embedded only)")
	embedded := fs.Bool("embedded", false, "run the node in the benchmark's process (the RSS read is then the whole benchmark's) instead of as a process of its own")
	binary := fs.String("binary", "", "the idemkv binary the node process and the attackers' process run (default: this executable)")
	attackProcess := fs.Bool("attack-process", false, "run the attackers in a process of their own instead of the benchmark's (with the measured client)")
	attackNice := fs.Int("attack-nice", 0, "nice value of the attackers' process (with --attack-process; 19: they get the CPU last)")
	attackOnly := fs.String("attack-only", "", "internal: be the attackers' process, attacking this CQL address until stdin closes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *attackOnly != "" {
		return runAttackOnly(*attackOnly, StormConfig{Conns: *conns, Churners: *churners, Pipeline: *pipeline, Oversized: *oversized}, os.Stdin, stdout)
	}
	cfg := StormConfig{Dir: *dir, Phase: *phase, Settle: *settle, Conns: *conns, Churners: *churners, Pipeline: *pipeline,
		Oversized: *oversized, Clients: *clients, Out: stderr, MemProfile: *memprofile, Embedded: *embedded, Binary: *binary,
		AttackProcess: *attackProcess, AttackNice: *attackNice,
		Node: node.Config{NativeTransportMaxConcurrentConnections: *maxConns, NativeTransportMaxConnectionsPerIP: *maxConnsIP,
			NativeTransportMaxRequestsPerConnection: *maxReqs}}
	res, err := RunStorm(context.Background(), cfg)
	if err != nil {
		return err
	}
	w := stdout
	where := "the node is a process of its own; RSS, counters and Go memory are the node's"
	if res.Embedded {
		where = "the node is embedded; RSS and Go memory are the whole benchmark's"
	}
	if res.AttackProcess {
		where += "; the attackers are a process of their own"
	} else {
		where += "; the attackers share the benchmark's process with the measured client"
	}
	fmt.Fprintf(w, "%s\n", where)
	fmt.Fprintf(w, "gocql latency (%d clients, counter UPDATE at ONE, %v per phase)\n", cfg.Clients, cfg.Phase)
	fmt.Fprintf(w, "%-8s %9s %7s %10s %10s %10s %10s\n", "phase", "ops", "errors", "p50", "p99", "max", "node CPU")
	for _, p := range res.Phases {
		fmt.Fprintf(w, "%-8s %9d %7d %10v %10v %10v %10v\n", p.Name, p.Ops, p.Errors, p.P50.Round(time.Microsecond), p.P99.Round(time.Microsecond), p.Max.Round(time.Microsecond), p.NodeCPU)
	}
	a := res.Attack
	fmt.Fprintf(w, "storm: %d connections held (peak open %d), %d refused, %d dial errors, %d churned, %d requests pipelined unread, %d oversized frames\n",
		a.Held, res.PeakConns, a.Refused, a.DialErrors, a.Churned, a.Pipelined, a.OversizedSent)
	pk := res.Peak
	fmt.Fprintf(w, "server at peak: %d requests / %d bytes in flight, %d answer bytes queued, %d reads paused\n",
		pk.RequestsInFlight, pk.RequestBytesInFlight, pk.QueuedResponseBytes, pk.ReadsPausedNow)
	f := res.Final
	fmt.Fprintf(w, "server totals: %d accepted, %d refused, %d read pauses, %d frames too large, %d half-frame / %d write / %d idle timeouts, peak %d request bytes in flight, %d memory releases\n",
		f.ConnectionsAccepted, f.ConnectionsRefused, f.ReadPauses, f.FramesTooLarge, f.HalfFrameTimeouts, f.WriteTimeouts, f.IdleTimeouts, f.PeakRequestBytesInFlight, f.MemoryReleases)
	pct := func(v int64) string {
		return fmt.Sprintf("%+.1f%%", 100*float64(v-res.RSSBaseline)/float64(res.RSSBaseline))
	}
	fmt.Fprintf(w, "RSS: baseline %s, peak %s (%s), end of after phase %s (%s), %v later %s (%s)\n",
		mb(res.RSSBaseline), mb(res.RSSPeak), pct(res.RSSPeak), mb(res.RSSEnd), pct(res.RSSEnd), res.Settle, mb(res.RSSSettled), pct(res.RSSSettled))
	fmt.Fprintf(w, "RSS %v after the storm's end: %s (%s)\n", res.Settle, mb(res.RSSStormSettled), pct(res.RSSStormSettled))
	fmt.Fprintf(w, "RSS anonymous / file: baseline %s / %s, settled %s / %s\n",
		mb(res.AnonBaseline), mb(res.FileBaseline), mb(res.AnonSettled), mb(res.FileSettled))
	fmt.Fprintf(w, "goroutines at the RSS peak %d, after settling %d\n", res.GoroutinesPeak, res.Goroutines)
	for _, m := range []struct {
		name string
		m    StormMem
	}{{"baseline", res.MemBaseline}, {"peak", res.MemPeak}, {"settled", res.MemSettled}} {
		fmt.Fprintf(w, "Go memory %-8s: heap in use %s, heap idle not returned %s, stacks %s, runtime other %s, GC metadata %s\n",
			m.name, mb(m.m.HeapInuse), mb(m.m.HeapIdleNotReturned), mb(m.m.Stacks), mb(m.m.RuntimeOther), mb(m.m.GCMeta))
	}
	if res.LogPath != "" && cfg.Dir != "" {
		fmt.Fprintf(w, "node log: %s\n", res.LogPath)
	}
	return nil
}
