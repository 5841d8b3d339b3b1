package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/admin"
	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/node"
)

// The soak ('idemkv bench soak', issue 20): one node, a process of its own
// with its default configuration (counter_cache_size_in_mb left at
// Cassandra's default), takes N distinct counters of one design through
// CQL, each written once, sequential keys, by closed-loop gocql writers.
// The node's RSS (VmRSS of /proc/PID/status), its Go heap in use and its
// counter cache (the idemkv_cache_* series of its /metrics) are sampled
// every SampleEvery counters, then at the After offsets once the load has
// stopped, then after a flush of the design's table. Each design gets a
// fresh node, so its figures are its own.
//
// The designs are written as 'idemkv bench' writes them (load.go): the
// same tables (runner.createTables), and through the same code
// (runner.do, runner.doHandoff, runner.doBorrow). A handoff or borrow
// client's counter is flushed and retired once its one update is
// acknowledged, so that the writers do not keep ten million counters: a
// counter written once and never again, as the soak's are, is retired by
// its client.

// SoakConfig is one soak.
type SoakConfig struct {
	Designs     []string        // counter designs (modes of load.go); default vanilla, fbf
	Counters    int64           // distinct counters per design (default 10,000,000)
	SampleEvery int64           // counters between samples during the load (default 1,000,000)
	After       []time.Duration // samples after the load stops (default 0, 30 s, 60 s)
	Flush       bool            // flush the table after the last After sample, and sample again
	Writers     int             // closed-loop writers (default 32)
	Timeout     time.Duration   // per attempt (default 2 s)
	// LoadLimit, when positive, stops a design's load after that long even
	// if fewer than Counters were written (the result says how many).
	LoadLimit time.Duration
	Seed      uint64
	Dir       string // data directories and node logs (default: a temporary directory, removed)
	Binary    string // the idemkv binary the node runs (default: this executable)
	Node      node.Config
	// HeapProfiles turns the node's admin_profiling on and saves its heap
	// profile (/debug/pprof/heap, as of the last collection: no collection
	// is forced) after every sample, as heap-LABEL.pb.gz in the design's
	// directory.
	HeapProfiles bool
	// MemoryLimit, when not empty, is the node process's GOMEMLIMIT (e.g.
	// "256MiB"): the Go runtime's soft memory limit, from which the node's
	// counter cache and memtable space defaults derive.
	MemoryLimit string
	// Progress, if not nil, gets a line every ProgressEvery (default 10 s).
	Progress      io.Writer
	ProgressEvery time.Duration
}

func (c SoakConfig) withDefaults() SoakConfig {
	if len(c.Designs) == 0 {
		c.Designs = []string{ModeVanilla, ModeFBF}
	}
	if c.Counters <= 0 {
		c.Counters = 10_000_000
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = 1_000_000
	}
	if c.After == nil {
		c.After = []time.Duration{0, 30 * time.Second, 60 * time.Second}
	}
	if c.Writers <= 0 {
		c.Writers = 32
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 10 * time.Second
	}
	return c
}

// SoakSample is one reading of the node.
type SoakSample struct {
	Label    string        // counters written ("1000000"), "+30s" after the load, "flushed"
	Counters int64         // counters acknowledged when taken
	At       time.Duration // since the load started
	OpsPerS  float64       // since the previous sample during the load; 0 after
	RSS      int64         // VmRSS, bytes
	Anon     int64         // RssAnon, bytes
	Heap     int64         // Go heap in use (go_memstats_heap_inuse_bytes), bytes
	// The counter cache (idemkv_cache_*{cache="counter"}); -1 when the
	// node exposes no such series.
	CacheEntries, CacheBytes, CacheCapacity, CacheEvictions int64
	// The design's table on the node (idemkv_table_*).
	SSTables, SSTableBytes, MemtableBytes int64
	Load1                                 float64 // the machine's 1-minute load average
	OK                                    bool    // the metrics could be read
}

// SoakResult is one design's soak.
type SoakResult struct {
	Design   string
	Counters int64 // acknowledged
	Failed   int64 // ops not acknowledged after their attempts
	// Dismissed counts the updates the node answered as dismissed
	// retries (client.Dismissed): every soak update is fresh, so each is a
	// false positive of the design's op-id filter and its counter holds 0.
	Dismissed int64
	Elapsed   time.Duration
	Samples   []SoakSample
	// Checked counters read back (the first, a middle and the last) and
	// those that did not read 1.
	Checked, Wrong int
	LogPath        string
	Limited        bool // the load stopped at SoakConfig.LoadLimit

}

// OpsPerS is the run's throughput.
func (r SoakResult) OpsPerS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Counters) / r.Elapsed.Seconds()
}

// ParseDesigns reads a comma-separated list of counter designs.
func ParseDesigns(s string) ([]string, error) {
	var out []string
	for _, d := range strings.Split(s, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		if !slices.Contains(knownModes, d) {
			return nil, fmt.Errorf("bench: soak: design %q: want one of %s", d, strings.Join(knownModes, ", "))
		}
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("bench: soak: design %q given twice", d)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("bench: soak: no design given")
	}
	return out, nil
}

// ParseDurations reads a comma-separated list of durations ("0,30s,60s").
func ParseDurations(s string) ([]time.Duration, error) {
	out := []time.Duration{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if f == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			return nil, fmt.Errorf("bench: soak: %w", err)
		}
		if d < 0 || (len(out) > 0 && d < out[len(out)-1]) {
			return nil, fmt.Errorf("bench: soak: durations %q: want increasing, not negative", s)
		}
		out = append(out, d)
	}
	return out, nil
}

// parseSeries reads Prometheus text exposition: every series' value by its
// name with its labels as written ("idemkv_cache_entries{cache=\"counter\"}").
func parseSeries(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, '}')
		if i < 0 {
			i = strings.IndexByte(line, ' ')
		} else {
			i++
		}
		if i <= 0 || i >= len(line) {
			continue
		}
		name := line[:i]
		val, _, _ := strings.Cut(strings.TrimSpace(line[i:]), " ") // a timestamp
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: soak: metrics: %w", err)
	}
	return out, nil
}

// soakReading fills a sample's node figures from the node's /proc status
// file and its metrics (nil: not read).
func soakReading(status string, m map[string]float64, design string) SoakSample {
	s := SoakSample{RSS: vmRSS(status), Anon: statusField(status, "RssAnon"),
		CacheEntries: -1, CacheBytes: -1, CacheCapacity: -1, CacheEvictions: -1}
	if m == nil {
		return s
	}
	s.OK = true
	s.Heap = int64(m["go_memstats_heap_inuse_bytes"])
	get := func(name string) int64 {
		if v, ok := m[name]; ok {
			return int64(v)
		}
		return -1
	}
	s.CacheEntries = get(`idemkv_cache_entries{cache="counter"}`)
	s.CacheBytes = get(`idemkv_cache_size_bytes{cache="counter"}`)
	s.CacheCapacity = get(`idemkv_cache_capacity_bytes{cache="counter"}`)
	s.CacheEvictions = get(`idemkv_cache_evictions_total{cache="counter"}`)
	tbl := `{keyspace="bench",table="` + design + `"}`
	s.SSTables = max(0, get("idemkv_table_sstables"+tbl))
	s.SSTableBytes = max(0, get("idemkv_table_sstable_bytes"+tbl))
	s.MemtableBytes = max(0, get("idemkv_table_memtable_bytes"+tbl))
	return s
}

// loadAvg1 is the 1-minute load average of /proc/loadavg; 0 if it cannot.
func loadAvg1(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// soakNode is the node process of one design's soak.
type soakNode struct {
	*nodeProcess
	admin *admin.Client
	cql   string // host:port
}

func startSoakNode(ctx context.Context, cfg SoakConfig, dir string) (*soakNode, error) {
	port, err := FreePort(1, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 20)))
	if err != nil {
		return nil, err
	}
	nc := cfg.Node
	nc.DataDirectory = filepath.Join(dir, "node1")
	nc.ListenAddress = "127.0.0.1"
	nc.StoragePort, nc.NativeTransportPort = port, port+1
	nc.Seeds = []string{fmt.Sprintf("127.0.0.1:%d", port)}
	nc.AdminProfiling = nc.AdminProfiling || cfg.HeapProfiles
	if nc.AdminPort, err = freeTCPPort(); err != nil {
		return nil, err
	}
	bin := cfg.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bench: soak: %w", err)
		}
	}
	var env []string
	if cfg.MemoryLimit != "" {
		env = append(env, "GOMEMLIMIT="+cfg.MemoryLimit)
	}
	p, err := startNodeProcess(ctx, bin, dir, nc, env...)
	if err != nil {
		return nil, fmt.Errorf("bench: soak: %w", err)
	}
	return &soakNode{nodeProcess: p, cql: nc.CQLAddr(),
		admin: &admin.Client{Addr: net.JoinHostPort(nc.ListenAddress, strconv.Itoa(nc.AdminPort)), HTTP: &http.Client{}}}, nil
}

// saveHeapProfile writes the node's heap profile (admin_profiling) to path.
func (n *soakNode) saveHeapProfile(path string) error {
	resp, err := n.client.Get("http://" + n.admin.Addr + "/debug/pprof/heap")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/heap: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// series scrapes every series of the node's metrics.
func (n *soakNode) series() (map[string]float64, error) {
	resp, err := n.client.Get(n.metrics)
	if err != nil {
		return nil, fmt.Errorf("bench: soak: metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: soak: metrics: %s", resp.Status)
	}
	return parseSeries(resp.Body)
}

func (n *soakNode) reading(design string) SoakSample {
	m, err := n.series()
	if err != nil {
		m = nil
	}
	s := soakReading(n.status, m, design)
	s.Load1 = loadAvg1("/proc/loadavg")
	return s
}

// RunSoak runs the soak of every design of cfg, one after the other, each
// against a node of its own.
func RunSoak(ctx context.Context, cfg SoakConfig) ([]SoakResult, error) {
	cfg = cfg.withDefaults()
	for _, d := range cfg.Designs {
		if !slices.Contains(knownModes, d) {
			return nil, fmt.Errorf("bench: soak: design %q: want one of %s", d, strings.Join(knownModes, ", "))
		}
	}
	base := cfg.Dir
	if base == "" {
		d, err := os.MkdirTemp("", "idemkv-soak-")
		if err != nil {
			return nil, fmt.Errorf("bench: soak: %w", err)
		}
		defer os.RemoveAll(d)
		base = d
	}
	var out []SoakResult
	for _, d := range cfg.Designs {
		dir := filepath.Join(base, d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return out, fmt.Errorf("bench: soak: %w", err)
		}
		res, err := soakDesign(ctx, cfg, d, dir)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

// soakDesign runs one design's soak against a fresh node in dir.
func soakDesign(ctx context.Context, cfg SoakConfig, design, dir string) (res SoakResult, err error) {
	res = SoakResult{Design: design}
	n, err := startSoakNode(ctx, cfg, dir)
	if err != nil {
		return res, err
	}
	res.LogPath = n.logPath
	defer func() {
		if serr := n.stop(); serr != nil && err == nil {
			err = fmt.Errorf("bench: soak: %w", serr)
		}
	}()
	r := &runner{
		cfg: Config{Name: "soak", Modes: []string{design}, Clients: cfg.Writers, Consistency: gocql.One, RF: 1,
			Timeout: cfg.Timeout, Seed: cfg.Seed}.withDefaults(),
		target: Target{Hosts: []string{n.cql}},
		log:    NewFaultLog(),
		nonce:  mix(cfg.Seed ^ uint64(time.Now().UnixNano())),
		prefix: "soak-",
	}
	setup, err := r.newSession([]string{n.cql}, 10*time.Second)
	if err != nil {
		return res, err
	}
	defer setup.Close()
	if err := r.createTables(setup); err != nil {
		return res, err
	}
	if r.session, err = r.newSession([]string{n.cql}, cfg.Timeout); err != nil {
		return res, err
	}
	defer r.session.Close()
	mr := &modeRun{name: design, stmt: "UPDATE bench." + design + " SET c = c + ? WHERE k = ?", ledger: NewLedger()}
	switch design {
	case ModeHandoff:
		mr.handoff = newHandoffRun(cfg.Writers)
	case ModeBorrow:
		mr.borrow = newBorrowRun(cfg.Writers)
	}

	first := n.reading(design)
	first.Label = "start"
	var (
		mu      sync.Mutex
		samples = []SoakSample{first}
		next    atomic.Int64 // the next key to write
		acked   atomic.Int64
		failed  atomic.Int64
		samplew sync.WaitGroup
	)
	start := time.Now()
	take := func(label string, counters int64) {
		s := n.reading(design)
		s.Label, s.Counters, s.At = label, counters, time.Since(start)
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
		if cfg.HeapProfiles {
			if err := n.saveHeapProfile(filepath.Join(dir, "heap-"+label+".pb.gz")); err != nil && cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "soak %s sample %s: heap profile: %v\n", design, label, err)
			}
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "soak %s sample %s: %d counters at %s, RSS %s (anon %s), heap in use %s, cache %d cells / %s, %d SSTables, load %.2f\n",
				design, label, counters, s.At.Round(time.Second), mb(s.RSS), mb(s.Anon), mb(s.Heap), s.CacheEntries, mb(s.CacheBytes), s.SSTables, s.Load1)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var limited atomic.Bool
	if cfg.LoadLimit > 0 {
		t := time.AfterFunc(cfg.LoadLimit, func() { limited.Store(true) })
		defer t.Stop()
	}
	var fatal atomic.Pointer[error]
	var wg sync.WaitGroup
	for c := range cfg.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cli := client.New(r.session, client.Options{ClientID: ClientID(r.nonce, design, c), StartSequence: 1})
			for runCtx.Err() == nil && !limited.Load() {
				k := int(next.Add(1) - 1)
				if int64(k) >= cfg.Counters {
					return
				}
				out, err := soakWrite(runCtx, r, cli, mr, c, k)
				if err != nil {
					fatal.CompareAndSwap(nil, &err)
					cancel()
					return
				}
				if out != Acked {
					failed.Add(1)
					continue
				}
				if a := acked.Add(1); a%cfg.SampleEvery == 0 {
					samplew.Add(1)
					go func() { defer samplew.Done(); take(strconv.FormatInt(a, 10), a) }()
				}
			}
		}()
	}
	stopProgress := soakProgress(cfg, design, start, &acked, &failed, n)
	wg.Wait()
	res.Elapsed = time.Since(start)
	stopProgress()
	samplew.Wait()
	if p := fatal.Load(); p != nil {
		return res, *p
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: soak: interrupted: %w", err)
	}
	res.Counters, res.Failed, res.Limited = acked.Load(), failed.Load(), limited.Load()
	res.Dismissed = mr.dismissedSeen.Load()
	if a := res.Counters; a%cfg.SampleEvery != 0 {
		take(strconv.FormatInt(a, 10), a)
	}
	end := time.Now()
	for _, d := range cfg.After {
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("bench: soak: interrupted: %w", ctx.Err())
		case <-time.After(time.Until(end.Add(d))):
		}
		take(fmt.Sprintf("+%ds", int(d.Seconds())), res.Counters)
	}
	if cfg.Flush {
		fctx, fcancel := context.WithTimeout(ctx, 10*time.Minute)
		err := n.admin.Flush(fctx, "bench", design)
		fcancel()
		if err != nil {
			return res, fmt.Errorf("bench: soak: flush bench.%s: %w", design, err)
		}
		take("flushed", res.Counters)
	}
	// Read back the first, a middle and the last counter.
	if res.Counters > 0 {
		written := min(cfg.Counters, next.Load()) // keys past it were never tried
		keys := []int{0, int(written / 2), int(written - 1)}
		vals, err := readKeys(ctx, setup, design, r.prefix, keys, gocql.One)
		if err != nil {
			return res, err
		}
		for _, k := range keys {
			res.Checked++
			if vals[k] != 1 {
				res.Wrong++
			}
		}
	}
	mu.Lock()
	res.Samples = samples
	mu.Unlock()
	sort.SliceStable(res.Samples, func(i, j int) bool { return res.Samples[i].At < res.Samples[j].At })
	var prev SoakSample
	for i := range res.Samples {
		s := &res.Samples[i]
		if s.Label != "start" && s.Counters > prev.Counters && s.At > prev.At {
			s.OpsPerS = float64(s.Counters-prev.Counters) / (s.At - prev.At).Seconds()
		}
		prev = *s
	}
	return res, nil
}

// soakWrite writes counter k once (+1) in the design's way; a handoff or
// borrow counter is then flushed and retired, and its client's state
// dropped.
func soakWrite(ctx context.Context, r *runner, cli *client.Client, mr *modeRun, c, k int) (Outcome, error) {
	op := Op{Updates: []Update{{Key: k, Delta: 1}}}
	switch {
	case mr.handoff != nil:
		out, err := r.doHandoff(ctx, cli, mr, c, op)
		if err != nil {
			return out, err
		}
		hr := mr.handoff
		hr.mu.Lock()
		hk := hr.counters[c][k]
		delete(hr.counters[c], k)
		hr.mu.Unlock()
		if hk == nil {
			return out, nil
		}
		if err := hk.h.Flush(ctx); err != nil {
			return Unknown, nil
		}
		if err := hk.h.Retire(ctx); err != nil {
			return Unknown, nil
		}
		return out, nil
	case mr.borrow != nil:
		out, err := r.doBorrow(ctx, cli, mr, c, op)
		if err != nil {
			return out, err
		}
		br := mr.borrow
		br.mu.Lock()
		b := br.counters[c][k]
		delete(br.counters[c], k)
		br.mu.Unlock()
		if b == nil {
			return out, nil
		}
		if err := b.Retire(ctx); err != nil {
			return Unknown, nil
		}
		return out, nil
	}
	return r.do(ctx, cli, mr, c, op)
}

// soakProgress writes a line every cfg.ProgressEvery until stopped.
func soakProgress(cfg SoakConfig, design string, start time.Time, acked, failed *atomic.Int64, n *soakNode) func() {
	if cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		last, lastAt := int64(0), start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				a := acked.Load()
				fmt.Fprintf(cfg.Progress, "soak %s: %d/%d counters (%d failed) in %s, %.0f/s now, node RSS %s, load %.2f\n",
					design, a, cfg.Counters, failed.Load(), now.Sub(start).Round(time.Second),
					float64(a-last)/now.Sub(lastAt).Seconds(), mb(n.rss()), loadAvg1("/proc/loadavg"))
				last, lastAt = a, now
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// WriteSoakTable writes a design's result as a table.
func WriteSoakTable(w io.Writer, r SoakResult) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "design %s: %d counters written in %s (%.0f ops/s), %d ops failed, %d fresh updates dismissed; read back %d, %d wrong\n",
		r.Design, r.Counters, r.Elapsed.Round(time.Second), r.OpsPerS(), r.Failed, r.Dismissed, r.Checked, r.Wrong)
	fmt.Fprintf(bw, "%-9s %9s %8s %7s %8s %9s %9s %11s %9s %9s %10s %5s %9s %9s %6s\n",
		"sample", "counters", "at", "ops/s", "RSS MiB", "anon MiB", "heap MiB", "cache cells", "cache MiB", "cap MiB", "evicted", "SSTs", "SST MiB", "memt MiB", "load1")
	mib := func(b int64) string {
		if b < 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(b)/(1<<20))
	}
	num := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	for _, s := range r.Samples {
		heap := mib(s.Heap)
		if !s.OK {
			heap = "?"
		}
		ops := "-"
		if s.OpsPerS > 0 {
			ops = fmt.Sprintf("%.0f", s.OpsPerS)
		}
		fmt.Fprintf(bw, "%-9s %9d %8s %7s %8s %9s %9s %11s %9s %9s %10s %5d %9s %9s %6.2f\n",
			s.Label, s.Counters, s.At.Round(time.Second), ops, mib(s.RSS), mib(s.Anon), heap, num(s.CacheEntries),
			mib(s.CacheBytes), mib(s.CacheCapacity), num(s.CacheEvictions), s.SSTables, mib(s.SSTableBytes), mib(s.MemtableBytes), s.Load1)
	}
	if r.Limited {
		fmt.Fprintf(bw, "PARTIAL: the load stopped at --load-limit with %d counters written\n", r.Counters)
	}
	if r.LogPath != "" {
		fmt.Fprintf(bw, "node log: %s\n", r.LogPath)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("bench: soak: %w", err)
	}
	return nil
}
