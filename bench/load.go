package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"
	"github.com/schollz/progressbar/v3"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/coltype/borrowcol"
)

// Config is one run of the load generator: every mode in Modes runs the
// same stream of operations (client c's i-th op is the same in each mode),
// side by side on the same ring, at the same time.
type Config struct {
	Name string // scenario name, for reports (e.g. "overcount")
	Workload
	Modes []string // counter modes (default vanilla, fbf)
	// Clients is the number of concurrent clients per mode (default 16),
	// each with its own op-id client id.
	Clients int
	// Rate, when positive, runs an open loop: each mode issues Rate ops/s
	// on a fixed schedule, whatever the latency, and an op's latency counts
	// from its scheduled time. Zero is a closed loop.
	Rate float64
	// Ops per mode; zero runs for Duration instead.
	Ops      int64
	Duration time.Duration
	// Consistency of the updates (default QUORUM); final values are read
	// at ALL.
	Consistency gocql.Consistency
	// Attempts is A, the most attempts of one op (default 4); Horizon is
	// H: no retry starts later than H after the op's first attempt
	// (default 10 s). gocql's own retry policy is off: the generator
	// retries, with the same op id, and counts.
	Attempts int
	Horizon  time.Duration
	// Timeout is the client's timeout per attempt (default 1 s).
	Timeout time.Duration
	// Coalesce is the gocql sessions' write coalescing wait
	// (ClusterConfig.WriteCoalesceWaitTime); 0, the default, writes each
	// request at once (CoalesceFlag says why).
	Coalesce time.Duration
	Faults   Faults
	Seed     uint64
	// RF is the replication factor of keyspace bench when the run creates
	// it (default 3, at most the ring's size).
	RF int
	// FBFOptions are extra idempotence options of table bench.fbf;
	// retry_horizon defaults to Horizon.
	FBFOptions map[string]string
	// HandoffExchanges is the handoff mode's exchanges per op and key
	// (default 1): with 2 an op's increments are handed off within the op.
	HandoffExchanges int
	// SampleEvery, when positive, records every mode's expected total and
	// the total it reads (at QUORUM, over the keys touched so far) at that
	// period: Report.Series.
	SampleEvery time.Duration
	// ResetSampler, when positive, runs the reset sampler (resetsample.go)
	// at that period beside the reset mode's clients: it reads
	// ResetSampleKeys (default 4) random keys with their reset contexts
	// and resets each at ALL with its context; the mode's accuracy is
	// then checked on the samples plus the final values.
	ResetSampler    time.Duration
	ResetSampleKeys int
	// Progress receives a progress bar; nil shows none.
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	c.Workload = c.Workload.withDefaults()
	if len(c.Modes) == 0 {
		c.Modes = []string{ModeVanilla, ModeFBF}
	}
	if c.Clients <= 0 {
		c.Clients = 16
	}
	if c.Consistency == 0 {
		c.Consistency = gocql.Quorum
	}
	if c.Attempts <= 0 {
		c.Attempts = 4
	}
	if c.Horizon <= 0 {
		c.Horizon = 10 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.RF <= 0 {
		c.RF = 3
	}
	if c.HandoffExchanges <= 0 {
		c.HandoffExchanges = 1
	}
	if c.ResetSampleKeys <= 0 {
		c.ResetSampleKeys = 4
	}
	if c.Faults.DelayBy <= 0 {
		c.Faults.DelayBy = c.Timeout + 100*time.Millisecond
	}
	if c.Faults.Down <= 0 {
		c.Faults.Down = 2 * time.Second
	}
	if c.Faults.PauseFor <= 0 {
		c.Faults.PauseFor = c.Timeout * 3 / 2
	}
	return c
}

func (c Config) validate() error {
	if err := c.Workload.Validate(); err != nil {
		return err
	}
	if c.Ops <= 0 && c.Duration <= 0 {
		return errors.New("bench: give an op count or a duration")
	}
	if c.Clients > MaxClients {
		return fmt.Errorf("bench: at most %d clients", MaxClients)
	}
	seen := map[string]bool{}
	for _, m := range c.Modes {
		if _, ok := modeNumber(m); !ok {
			return fmt.Errorf("bench: counter mode %q: want one of %s", m, strings.Join(knownModes, ", "))
		}
		if seen[m] {
			return fmt.Errorf("bench: counter mode %q given twice", m)
		}
		seen[m] = true
	}
	if c.ResetSampler > 0 && !seen[ModeReset] {
		return errNoResetMode
	}
	for _, p := range []float64{c.Faults.LostAck, c.Faults.Delay, c.Faults.Reset} {
		if p < 0 || p > 1 {
			return fmt.Errorf("bench: fault probability %g: want 0 to 1", p)
		}
	}
	return nil
}

// Target is where a run sends its load: an embedded Cluster (server-side
// faults, dismissal counts, kills and pauses), or the CQL addresses of a
// running ring (client-side faults only). With Proxies, fault proxies in
// front of either take the load and inject the lost acks, delays and
// resets (the embedded ring's injector and the client inject none).
type Target struct {
	Cluster *Cluster
	Hosts   []string // host:port; ignored when Cluster is set
	Proxies *Proxies
	// Killer, with Hosts, kills and restarts the running ring's nodes
	// (Faults.KillEvery), e.g. a ProcessRing; an embedded Cluster is its
	// own.
	Killer Killer
	// ClientFaults, with Cluster, injects the lost acks and delays on the
	// client as on Hosts (decided per op and attempt alike) instead of in
	// the embedded ring's executor: the same mechanism as a run against
	// another CQL server, e.g. Apache Cassandra, side by side.
	ClientFaults bool
	// ServerPids, when set, names the processes of the ring's servers
	// (a ring of node processes, Apache Cassandra's JVMs): their CPU time
	// during the run is reported per acknowledged op (Report.ServerCPU).
	// Not with node kills, which replace the processes.
	ServerPids func() ([]int, error)
	// Name is the ring's name in Report.ServerCPU (default "idemkv").
	Name string
}

// killer is what kills the target's nodes, if anything can.
func (t Target) killer() Killer {
	if t.Cluster != nil {
		return t.Cluster
	}
	return t.Killer
}

func (t Target) hosts() []string {
	switch {
	case t.Proxies != nil:
		return t.Proxies.Hosts()
	case t.Cluster != nil:
		return t.Cluster.Hosts()
	}
	return t.Hosts
}

// servers are the addresses of the ring's nodes, behind the proxies if any.
func (t Target) servers() []string {
	if t.Cluster != nil {
		return t.Cluster.Hosts()
	}
	return t.Hosts
}

// modeRun is one mode's state during a run.
type modeRun struct {
	name   string
	stmt   string
	ledger *Ledger
	hists  []*hdrhistogram.Histogram // per client, microseconds
	start  time.Time
	end    atomic.Int64 // unix nanos of the last client's end

	attempts, retries, updates atomic.Int64
	maxRetryAfter              atomic.Int64 // nanoseconds after the first attempt
	clientDups                 atomic.Int64 // updates known applied whose ack the client dropped
	// dismissedSeen counts the updates answered as dismissed retries
	// (client.Dismissed), firstDismissed the acknowledged ops of a single
	// attempt that was: false positives of the filter, since nothing else
	// carried the op id (a lower bound: an op retried after a false
	// positive is not counted). Single updates only (batches:
	// dismissedPartial).
	dismissedSeen, firstDismissed atomic.Int64
	dismissedPartial              atomic.Bool
	handoff                       *handoffRun // the handoff mode's counters
	borrow                        *borrowRun  // the borrow mode's counters
	resetBook                     *resetBook  // the reset sampler's samples, if it runs
}

type runner struct {
	cfg     Config
	target  Target
	session *gocql.Session
	log     *FaultLog
	prefix  string
	nonce   uint64
	modes   []*modeRun
	stop    atomic.Bool
	done    atomic.Int64 // ops finished, all modes
	fatal   atomic.Pointer[error]
	series  []Sample
	seriesM sync.Mutex
}

// Run runs the load generator against target and returns its report. It
// creates keyspace bench and the mode tables through CQL if they do not
// exist; every run writes its own keys (a fresh prefix), so runs on the same
// ring do not mix.
func Run(ctx context.Context, target Target, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	hosts := target.hosts()
	if len(hosts) == 0 {
		return nil, errors.New("bench: no hosts to send the load to")
	}
	r := &runner{cfg: cfg, target: target, nonce: mix(cfg.Seed ^ uint64(time.Now().UnixNano()))}
	r.prefix = fmt.Sprintf("r%010x-", r.nonce>>24)
	if k := target.killer(); k != nil {
		r.log = k.Log()
	} else {
		r.log = NewFaultLog()
	}
	setup, err := r.newSession(hosts, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	if err := r.createTables(setup); err != nil {
		return nil, err
	}
	if r.session, err = r.newSession(hosts, cfg.Timeout); err != nil {
		return nil, err
	}
	defer r.session.Close()

	var dismissedBefore, resetDismissedBefore uint64
	var dupsBefore map[string]int64
	if c := target.Cluster; c != nil {
		dismissedBefore, resetDismissedBefore, dupsBefore = c.Dismissed(), c.ResetDismissed(), c.Injector().Duplicates()
		if target.Proxies == nil && !target.ClientFaults {
			c.Injector().Set(cfg.Faults)
			defer c.Injector().Set(Faults{})
		}
	}
	var proxyDupsBefore map[string]int64
	if p := target.Proxies; p != nil {
		proxyDupsBefore = p.duplicates()
		disarm, err := p.arm(cfg, r.log)
		if err != nil {
			return nil, err
		}
		defer disarm()
	}
	for _, m := range cfg.Modes {
		mr := &modeRun{name: m, stmt: "UPDATE bench." + m + " SET c = c + ? WHERE k = ?", ledger: NewLedger()}
		for range cfg.Clients {
			mr.hists = append(mr.hists, hdrhistogram.New(1, 120_000_000, 3))
		}
		if m == ModeHandoff {
			mr.handoff = newHandoffRun(cfg.Clients)
		}
		if m == ModeBorrow {
			mr.borrow = newBorrowRun(cfg.Clients)
		}
		r.modes = append(r.modes, mr)
	}
	logStart := r.log.Len()
	var slotsPeak atomic.Int64
	stopSlots := func() {}
	var syncBefore ClusterHandoffStats
	if c := target.Cluster; c != nil && slices.Contains(cfg.Modes, ModeHandoff) {
		syncBefore = c.HandoffStats()
		stopSlots = r.sampleSlots(&slotsPeak)
	}
	var borrowBefore borrowcol.Stats
	if c := target.Cluster; c != nil && slices.Contains(cfg.Modes, ModeBorrow) {
		borrowBefore = c.borrowStats()
	}
	faultsDone := r.scheduleFaults(ctx)
	stopResetSampler := func() (*ResetSampleResult, error) { return nil, nil }
	for _, mr := range r.modes {
		if mr.name == ModeReset && cfg.ResetSampler > 0 {
			stopResetSampler = r.startResetSampler(ctx, mr)
		}
	}
	var meter, selfMeter *cpuMeter
	if target.ServerPids != nil && cfg.Faults.KillEvery <= 0 {
		pids, err := target.ServerPids()
		if err == nil {
			meter, err = startCPUMeter(pids)
		}
		if err == nil {
			selfMeter, err = clientMeter(pids)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: server CPU: %w", err)
		}
	}
	start := time.Now()
	finishOutboxes := func() *ResetOutboxResult { return nil }
	if c := target.Cluster; c != nil && slices.Contains(cfg.Modes, ModeReset) {
		finishOutboxes = watchResetOutboxes(c, start, r.stop.Load)
	}
	stopProgress := r.progress(start)
	stopSampling := r.sample(ctx, start, setup)
	var timer *time.Timer
	if cfg.Ops <= 0 {
		timer = time.AfterFunc(cfg.Duration, func() { r.stop.Store(true) })
	}
	var wg sync.WaitGroup
	for _, mr := range r.modes {
		mr.start = start
		for c := range cfg.Clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.client(ctx, mr, c)
				now := time.Now().UnixNano()
				for {
					old := mr.end.Load()
					if old >= now || mr.end.CompareAndSwap(old, now) {
						break
					}
				}
			}()
		}
	}
	wg.Wait()
	var serverCPU, clientCPU time.Duration
	var serverErr error
	if meter != nil {
		serverCPU, serverErr = meter.stop()
	}
	if selfMeter != nil && serverErr == nil {
		clientCPU, serverErr = selfMeter.stop()
	}
	if timer != nil {
		timer.Stop()
	}
	r.stop.Store(true)
	stopSampling()
	stopProgress()
	stopSlots()
	faultErr := <-faultsDone
	sampled, samplerErr := stopResetSampler()
	if p := r.fatal.Load(); p != nil {
		return nil, *p
	}
	if samplerErr != nil {
		return nil, samplerErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bench: run interrupted: %w", err)
	}
	if faultErr != nil {
		return nil, faultErr
	}
	if k := target.killer(); k != nil {
		// The final read is at ALL: every node killed is back and seen up.
		if err := k.WaitUp(ctx); err != nil {
			return nil, err
		}
	}
	outboxes := finishOutboxes()
	rep := &Report{Name: cfg.Name, Config: reportConfig(cfg, target, hosts), Series: r.series, faultEvents: r.log.Since(logStart)}
	for _, mr := range r.modes {
		var hres *HandoffResult
		var bres *BorrowResult
		var final map[int]int64
		var err error
		if mr.handoff != nil {
			final, hres, err = r.finishHandoff(ctx, setup, mr, syncBefore, int(slotsPeak.Load()))
		} else if mr.borrow != nil {
			final, bres, err = r.finishBorrow(ctx, setup, mr, borrowBefore)
		} else {
			final, err = r.readFinal(ctx, setup, mr)
		}
		if err != nil {
			return nil, err
		}
		if mr.resetBook != nil {
			sampled.FinalRead = 0
			for _, v := range final {
				sampled.FinalRead += v
			}
			final = mr.resetBook.combine(final)
		}
		res := mr.result(final)
		if mr.resetBook != nil {
			res.ResetSample = sampled
		}
		if mr.name == ModeReset {
			res.ResetOutbox = outboxes
		}
		res.Handoff = hres
		res.Borrow = bres
		rep.Modes = append(rep.Modes, res)
	}
	if c := target.Cluster; c != nil {
		c.Injector().Forget()
		dups := c.Injector().Duplicates()
		resetDismissed := int64(c.ResetDismissed() - resetDismissedBefore)
		dismissed := int64(c.Dismissed()-dismissedBefore) - resetDismissed
		for i := range rep.Modes {
			m := &rep.Modes[i]
			m.Duplicates += dups[m.Mode] - dupsBefore[m.Mode]
			m.DismissedKnown = true
			switch m.Mode {
			case ModeFBF: // the only mode with a filter: every other dismissal is its
				m.Dismissed = dismissed
				m.FalsePositives = max(0, m.Dismissed-m.Duplicates)
			case ModeReset: // op ids kept by the cells for the op window: no false positive
				m.Dismissed = resetDismissed
			}
		}
	}
	if p := target.Proxies; p != nil {
		p.Group().Forget()
	}
	if p := target.Proxies; p != nil && target.Cluster == nil { // an embedded ring counts them itself
		dups := p.duplicates()
		for i := range rep.Modes {
			m := &rep.Modes[i]
			m.Duplicates = dups[m.Mode] - proxyDupsBefore[m.Mode]
		}
	}
	rep.Faults = CountKinds(rep.faultEvents)
	rep.Horizon = HorizonCheck{HorizonMS: ms(cfg.Horizon), Attempts: cfg.Attempts}
	for _, m := range rep.Modes {
		rep.Horizon.MaxRetryAfterMS = max(rep.Horizon.MaxRetryAfterMS, m.MaxRetryAfterMS)
		rep.Horizon.Retries += m.Retries
	}
	rep.Horizon.AllWithin = rep.Horizon.MaxRetryAfterMS < rep.Horizon.HorizonMS
	if meter != nil {
		if serverErr != nil {
			return nil, fmt.Errorf("bench: server CPU: %w", serverErr)
		}
		sc := ServerCPU{Target: cmp.Or(target.Name, "idemkv"), Processes: len(meter.pids), CPUS: serverCPU.Seconds()}
		for _, m := range rep.Modes {
			sc.Ops += m.Ops
		}
		if sc.Ops > 0 {
			sc.PerOpUS = float64(serverCPU) / float64(time.Microsecond) / float64(sc.Ops)
			if selfMeter != nil {
				sc.ClientCPUS = clientCPU.Seconds()
				sc.ClientPerOpUS = float64(clientCPU) / float64(time.Microsecond) / float64(sc.Ops)
			}
		}
		rep.ServerCPU = append(rep.ServerCPU, sc)
	}
	return rep, nil
}

func (r *runner) newSession(hosts []string, timeout time.Duration) (*gocql.Session, error) {
	cc := gocql.NewCluster(hosts...)
	if _, p, err := net.SplitHostPort(hosts[0]); err == nil {
		cc.Port, _ = strconv.Atoi(p) // the port of discovered peers
	}
	cc.Consistency = r.cfg.Consistency
	cc.Timeout = timeout
	cc.WriteTimeout = timeout
	cc.ConnectTimeout = 5 * time.Second
	cc.RetryPolicy = nil // the generator retries, and counts
	cc.ReconnectInterval = time.Second
	cc.NumConns = 2
	setCoalesce(cc, r.cfg.Coalesce)
	cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy(), gocql.ShuffleReplicas())
	s, err := cc.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("bench: gocql session to %v: %w", hosts, err)
	}
	return s, nil
}

func (r *runner) createTables(s *gocql.Session) error {
	rf := r.cfg.RF
	if c := r.target.Cluster; c != nil {
		rf = min(rf, c.Size())
	}
	stmts := []string{fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS bench WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}", rf)}
	for _, m := range r.cfg.Modes {
		typ := "counter"
		if m == ModeHandoff {
			typ = "handoff_counter"
		}
		if t, ok := modeColumnTypes[m]; ok {
			typ = t
		}
		stmt := "CREATE TABLE IF NOT EXISTS bench." + m + " (k text PRIMARY KEY, c " + typ + ")"
		if m == ModeFBF {
			stmt += " WITH idempotence = " + fbfOptions(r.cfg)
		}
		stmts = append(stmts, stmt)
	}
	for i, stmt := range stmts {
		if err := s.Query(stmt).Consistency(gocql.One).Exec(); err != nil {
			if i > 0 && r.cfg.Modes[i-1] != ModeVanilla && r.target.Cluster == nil {
				// Apache Cassandra (idemkv peer cassandra) has neither
				// the idempotence option nor handoff_counter.
				return fmt.Errorf("bench: %s: %w (mode %s needs an idemkv server; against another CQL server use --modes vanilla)", stmt, err, r.cfg.Modes[i-1])
			}
			return fmt.Errorf("bench: %s: %w", stmt, err)
		}
	}
	return nil
}

// fbfOptions is the idempotence map of table bench.fbf.
func fbfOptions(cfg Config) string {
	opts := map[string]string{"class": "fbf", "retry_horizon": cfg.Horizon.String()}
	for k, v := range cfg.FBFOptions {
		opts[k] = v
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sortStrings(keys)
	out := "{"
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += "'" + k + "': '" + opts[k] + "'"
	}
	return out + "}"
}

// opsFor is how many ops client c runs (ops mode), split evenly.
func (r *runner) opsFor(c int) int64 {
	n, C := r.cfg.Ops, int64(r.cfg.Clients)
	q := n / C
	if int64(c) < n%C {
		q++
	}
	return q
}

// client runs client c of mode mr until its ops are done or the run stops.
func (r *runner) client(ctx context.Context, mr *modeRun, c int) {
	stream := NewStream(r.cfg.Seed, c, r.cfg.Workload)
	cli := client.New(r.session, client.Options{ClientID: ClientID(r.nonce, mr.name, c), StartSequence: 1})
	hist := mr.hists[c]
	var interval time.Duration
	if r.cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(r.cfg.Clients) / r.cfg.Rate)
	}
	limit := int64(-1)
	if r.cfg.Ops > 0 {
		limit = r.opsFor(c)
	}
	for i := int64(0); limit < 0 || i < limit; i++ {
		if r.stop.Load() || ctx.Err() != nil || r.fatal.Load() != nil {
			return
		}
		op := stream.Next()
		begin := time.Now()
		if interval > 0 {
			sched := mr.start.Add(time.Duration(c)*interval/time.Duration(r.cfg.Clients) + time.Duration(i)*interval)
			if d := time.Until(sched); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
				if r.stop.Load() {
					return
				}
			}
			begin = sched
		}
		var out Outcome
		var err error
		if mr.handoff != nil {
			out, err = r.doHandoff(ctx, cli, mr, c, op)
		} else if mr.borrow != nil {
			out, err = r.doBorrow(ctx, cli, mr, c, op)
		} else {
			out, err = r.do(ctx, cli, mr, c, op)
		}
		if err != nil {
			r.fatal.CompareAndSwap(nil, &err)
			return
		}
		if mr.handoff != nil || mr.borrow != nil {
			mr.ledger.RecordHeld(op.Updates, out)
		} else {
			mr.ledger.Record(op.Updates, out)
		}
		if out == Acked {
			mr.updates.Add(int64(len(op.Updates)))
			_ = hist.RecordValue(max(1, time.Since(begin).Microseconds()))
		}
		r.done.Add(1)
	}
}

// errDroppedAck stands for an acknowledgement the client itself dropped.
var errDroppedAck = errors.New("bench: acknowledgement dropped by the client (injected lost ack)")

// errAbandoned stands for an attempt the client gave up on while in flight.
var errAbandoned = errors.New("bench: attempt abandoned by the client (injected timeout)")

// do runs one op: up to Attempts attempts with the same op id, no retry
// starting later than Horizon after the first. A non-nil error is fatal to
// the run (a statement the ring refuses as invalid).
func (r *runner) do(ctx context.Context, cli *client.Client, mr *modeRun, c int, op Op) (Outcome, error) {
	// exec runs attempt n. Attempts may overlap (an abandoned one still
	// runs), so each builds its own statement; every one carries op id id.
	var (
		exec func(ctx context.Context, n int) error
		id   client.OpID
	)
	// sent counts the attempts sent, firstDismissed whether the first was
	// answered as a dismissed retry: with no other attempt (none could
	// have overtaken it), that is a false positive of the filter.
	var sent atomic.Int32
	var firstDismissed atomic.Bool
	if len(op.Updates) == 1 {
		u := op.Updates[0]
		q1, first := cli.Query(mr.stmt, u.Delta, r.key(u.Key))
		q1.Consistency(r.cfg.Consistency).RetryPolicy(nil)
		id = first
		exec = func(ctx context.Context, n int) error {
			q := q1
			if n > 1 {
				q = r.session.Query(mr.stmt, u.Delta, r.key(u.Key)).Idempotent(true).Consistency(r.cfg.Consistency).RetryPolicy(nil)
				q.CustomPayload(map[string][]byte{client.PayloadKey: id.Bytes()})
			}
			sent.Add(1)
			iter := q.WithContext(ctx).Iter()
			payload := iter.GetCustomPayload()
			if err := iter.Close(); err != nil {
				return err
			}
			if d := client.Dismissed(payload); d > 0 {
				mr.dismissedSeen.Add(int64(d))
				if n == 1 {
					firstDismissed.Store(true)
				}
			}
			return nil
		}
	} else {
		mr.dismissedPartial.Store(true)
		b := cli.NewBatch()
		for _, u := range op.Updates {
			b.Query(mr.stmt, u.Delta, r.key(u.Key))
		}
		g := b.Gocql()
		g.SetConsistency(r.cfg.Consistency)
		g.RetryPolicy(nil)
		exec = func(ctx context.Context, n int) error {
			if n == 1 { // numbers the batch: its op id (the first statement's) is fixed from now on
				var err error
				id, err = b.Exec(ctx)
				return err
			}
			return r.session.ExecuteBatch(g.WithContext(ctx))
		}
	}
	out, err := r.attempts(ctx, mr, op, &id, exec)
	if err == nil && out == Acked && sent.Load() == 1 && firstDismissed.Load() {
		mr.firstDismissed.Add(1)
	}
	return out, err
}

// attempts runs an op's attempts (exec(ctx, n) runs attempt n; *id is the
// op's id, known before the first attempt of a single update and after the
// first of a batch) with the run's client-side faults, retries and horizon.
func (r *runner) attempts(ctx context.Context, mr *modeRun, op Op, idp *client.OpID, exec func(ctx context.Context, n int) error) (Outcome, error) {
	clientFaults := (r.target.Cluster == nil || r.target.ClientFaults) && r.target.Proxies == nil
	f := r.cfg.Faults
	var start time.Time
	sawUnknown := false
	for attempt := 1; ; attempt++ {
		now := time.Now()
		if attempt == 1 {
			start = now
		} else {
			after := now.Sub(start)
			mr.retries.Add(1)
			for {
				old := mr.maxRetryAfter.Load()
				if int64(after) <= old || mr.maxRetryAfter.CompareAndSwap(old, int64(after)) {
					break
				}
			}
		}
		mr.attempts.Add(1)
		actx, cancel := context.WithTimeout(ctx, 2*r.cfg.Timeout)
		var err error
		// The op id of a batch is known after its first Exec; a single
		// update's before. Client-side faults need it, so a batch's first
		// attempt is never abandoned.
		abandon := clientFaults && f.Delay > 0 && (len(op.Updates) == 1 || attempt > 1) &&
			decide(r.cfg.Seed, saltDelay, *idp, attempt) < f.Delay
		if abandon {
			ch := make(chan struct{})
			go func() { _ = exec(actx, attempt); cancel(); close(ch) }()
			select {
			case <-ch:
			case <-time.After(time.Millisecond):
			}
			r.log.Add(FaultEvent{Kind: FaultClientAbandon, Mode: mr.name, Client: idp.Client, Seq: idp.Sequence, Attempt: attempt})
			err = errAbandoned
		} else {
			err = exec(actx, attempt)
			cancel()
			if err == nil && clientFaults && f.LostAck > 0 && decide(r.cfg.Seed, saltLost, *idp, attempt) < f.LostAck {
				r.log.Add(FaultEvent{Kind: FaultClientLostAck, Mode: mr.name, Client: idp.Client, Seq: idp.Sequence, Attempt: attempt})
				mr.clientDups.Add(int64(len(op.Updates)))
				err = errDroppedAck
			}
		}
		out, retry, fatal := classify(err)
		if fatal {
			return 0, fmt.Errorf("bench: %s update refused: %w", mr.name, err)
		}
		if out == Acked {
			return Acked, nil
		}
		if out == Unknown {
			sawUnknown = true
		}
		if !retry || ctx.Err() != nil || attempt >= r.cfg.Attempts {
			break
		}
		backoff := time.Duration(attempt) * 5 * time.Millisecond
		if time.Since(start)+backoff >= r.cfg.Horizon {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	if sawUnknown {
		return Unknown, nil
	}
	return Failed, nil
}

// classify reads an attempt's error: its outcome, whether to retry it and
// whether the run cannot go on.
func classify(err error) (out Outcome, retry, fatal bool) {
	if err == nil {
		return Acked, false, false
	}
	if errors.Is(err, gocql.ErrNoConnections) {
		return Failed, true, false // never sent
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		switch re.Code() {
		case gocql.ErrCodeUnavailable, gocql.ErrCodeOverloaded, gocql.ErrCodeBootstrapping:
			return Failed, true, false // refused before applying
		case gocql.ErrCodeSyntax, gocql.ErrCodeInvalid, gocql.ErrCodeUnauthorized, gocql.ErrCodeConfig, gocql.ErrCodeCredentials:
			return Failed, false, true
		}
	}
	return Unknown, true, false // timeouts, lost answers, closed connections
}

func (r *runner) key(k int) string { return r.prefix + strconv.Itoa(k) }

// readFinal reads every key the mode touched at ALL, retrying each read a
// few times (a node may have just come back).
func (r *runner) readFinal(ctx context.Context, s *gocql.Session, mr *modeRun) (map[int]int64, error) {
	return readKeys(ctx, s, mr.name, r.prefix, mr.ledger.Keys(), gocql.All)
}

func readKeys(ctx context.Context, s *gocql.Session, mode, prefix string, keys []int, cl gocql.Consistency) (map[int]int64, error) {
	out := make(map[int]int64, len(keys))
	var mu sync.Mutex
	var firstErr error
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				var v int64
				var err error
				for try := 0; try < 20; try++ {
					err = s.Query("SELECT c FROM bench."+mode+" WHERE k = ?", prefix+strconv.Itoa(k)).
						Consistency(cl).RetryPolicy(nil).WithContext(ctx).Scan(&v)
					if err == nil || errors.Is(err, gocql.ErrNotFound) || ctx.Err() != nil {
						break
					}
					time.Sleep(250 * time.Millisecond)
				}
				mu.Lock()
				switch {
				case err == nil:
					out[k] = v
				case errors.Is(err, gocql.ErrNotFound):
					out[k] = 0
				case firstErr == nil:
					firstErr = fmt.Errorf("bench: read bench.%s key %d at %s: %w", mode, k, cl, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return out, firstErr
}

// scheduleFaults kills and pauses nodes of the target on the seeded
// schedule until the run stops; the channel yields the first error once
// every stopped node is back.
func (r *runner) scheduleFaults(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	k, c, f := r.target.killer(), r.target.Cluster, r.cfg.Faults
	if f.KillEvery <= 0 {
		k = nil
	}
	if f.PauseEvery <= 0 {
		c = nil
	}
	if k == nil && c == nil {
		done <- nil
		return done
	}
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	setErr := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	stopped := func() bool { return r.stop.Load() }
	if k != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := killLoop(ctx, k, pickNode(k, r.cfg.Seed), f.KillEvery, f.Down, stopped); err != nil {
				setErr(err)
			}
		}()
	}
	if c != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wait(ctx, f.PauseEvery, stopped) {
				c.Pause(c.randomNode(), f.PauseFor)
			}
		}()
	}
	go func() {
		wg.Wait()
		done <- firstErr
	}()
	return done
}

// pickNode draws the nodes to kill: the embedded ring's and a
// ProcessRing's seeded draws, the same for the same seed.
func pickNode(k Killer, seed uint64) func() int {
	if p, ok := k.(interface{ randomNode() int }); ok {
		return p.randomNode
	}
	rng := rand.New(rand.NewPCG(seed, saltNode))
	return func() int { return 1 + rng.IntN(k.Size()) }
}

// wait sleeps d, or less when the run stops; false when the run is over.
func wait(ctx context.Context, d time.Duration, stopped func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if stopped() || ctx.Err() != nil {
			return false
		}
		time.Sleep(min(50*time.Millisecond, time.Until(end)))
	}
	return !stopped() && ctx.Err() == nil
}

// progress shows a bar on cfg.Progress until the returned function is called.
func (r *runner) progress(start time.Time) func() {
	if r.cfg.Progress == nil {
		return func() {}
	}
	total, unit := r.cfg.Ops*int64(len(r.modes)), "ops"
	if r.cfg.Ops <= 0 {
		total, unit = r.cfg.Duration.Milliseconds(), "ms"
	}
	desc := r.cfg.Name
	if desc == "" {
		desc = "load"
	}
	bar := progressbar.NewOptions64(total, progressbar.OptionSetWriter(r.cfg.Progress), progressbar.OptionSetDescription(desc),
		progressbar.OptionSetItsString(unit), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetPredictTime(true))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				_ = bar.Finish()
				return
			case <-t.C:
				if r.cfg.Ops > 0 {
					_ = bar.Set64(r.done.Load())
				} else {
					_ = bar.Set64(min(total, time.Since(start).Milliseconds()))
				}
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
}

// sample records Report.Series until the returned function is called.
func (r *runner) sample(ctx context.Context, start time.Time, s *gocql.Session) func() {
	if r.cfg.SampleEvery <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.cfg.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			for _, mr := range r.modes {
				exp := mr.ledger.Expected()
				vals, err := readKeys(ctx, s, mr.name, r.prefix, mr.ledger.Keys(), gocql.Quorum)
				var sum int64
				for _, v := range vals {
					sum += v
				}
				smp := Sample{AtS: time.Since(start).Seconds(), Mode: mr.name, Expected: exp, Read: sum, ReadOK: err == nil}
				r.seriesM.Lock()
				r.series = append(r.series, smp)
				r.seriesM.Unlock()
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
}

// result summarises a mode after its final read.
func (mr *modeRun) result(final map[int]int64) ModeResult {
	h := hdrhistogram.New(1, 120_000_000, 3)
	for _, x := range mr.hists {
		h.Merge(x)
	}
	acked, unknown, failed := mr.ledger.Ops()
	t := mr.ledger.Tally(final)
	elapsed := time.Duration(mr.end.Load() - mr.start.UnixNano())
	q := func(p float64) float64 { return float64(h.ValueAtQuantile(p)) / 1000 }
	res := ModeResult{
		Mode: mr.name, Ops: acked, Attempted: acked + unknown + failed, Acked: acked, Unknown: unknown, Failed: failed,
		Updates: mr.updates.Load(), ElapsedS: elapsed.Seconds(),
		P50MS: q(50), P90MS: q(90), P99MS: q(99), P999MS: q(99.9), MaxMS: float64(h.Max()) / 1000, MeanMS: h.Mean() / 1000,
		Expected: t.Expected, Uncertain: t.Uncertain, Final: t.Final, Overcount: t.Over, Undercount: t.Under, ErrorPct: t.ErrorPct,
		Attempts: mr.attempts.Load(), Retries: mr.retries.Load(), MaxRetryAfterMS: ms(time.Duration(mr.maxRetryAfter.Load())),
		Duplicates: mr.clientDups.Load(),
		latency:    h,
	}
	if (mr.name == ModeFBF || mr.name == ModeReset) && !mr.dismissedPartial.Load() {
		// What the answers said; an embedded ring's own counts replace
		// these (Run). An abandoned attempt's answer is read too.
		res.Dismissed, res.FalsePositives, res.DismissedKnown = mr.dismissedSeen.Load(), mr.firstDismissed.Load(), true
	}
	if s := elapsed.Seconds(); s > 0 {
		res.OpsPerS = float64(acked) / s
		res.UpdatesPerS = float64(res.Updates) / s
	}
	return res
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
