package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Report is what one run measured. Its JSON form is a contract: scripts
// read modes[].mode, expected, final, overcount, undercount, error_pct,
// retries, dismissed, ops, ops_per_s, p50_ms and p99_ms.
type Report struct {
	Name    string         `json:"name"`
	Config  ReportConfig   `json:"config"`
	Modes   []ModeResult   `json:"modes"`
	Faults  map[string]int `json:"faults"` // injected faults by kind
	Horizon HorizonCheck   `json:"horizon"`
	Series  []Sample       `json:"series,omitempty"`
	// ServerCPU is each measured ring's servers' CPU time during the run
	// (Target.ServerPids): the ring's own, then a peer's (MergePeer).
	ServerCPU []ServerCPU `json:"server_cpu,omitempty"`

	faultEvents []FaultEvent
}

// ReportConfig is the run's setting, as reported.
type ReportConfig struct {
	Ring        string   `json:"ring"` // "embedded", "hosts", or "processes" (hosts of a ring whose processes the run kills)
	Hosts       []string `json:"hosts"`
	Proxies     []string `json:"proxies,omitempty"` // fault proxies in front of Hosts
	Nodes       int      `json:"nodes,omitempty"`   // embedded ring size
	RF          int      `json:"rf"`
	Consistency string   `json:"consistency"`
	Clients     int      `json:"clients"`
	Loop        string   `json:"loop"` // closed or open
	Rate        float64  `json:"rate,omitempty"`
	Ops         int64    `json:"ops,omitempty"`
	DurationS   float64  `json:"duration_s,omitempty"`
	Keys        int      `json:"keys"`
	Dist        string   `json:"dist"`
	Batch       int      `json:"batch"`
	DeltaMax    int64    `json:"delta_max"`
	Attempts    int      `json:"attempts"`
	HorizonS    float64  `json:"horizon_s"`
	TimeoutMS   float64  `json:"timeout_ms"`
	// CoalesceUS is the clients' gocql write coalescing wait in µs (0: off).
	CoalesceUS  float64 `json:"gocql_coalesce_us"`
	LostAck     float64 `json:"lost_ack"`
	Delay       float64 `json:"delay"`
	DelayByMS   float64 `json:"delay_by_ms,omitempty"`
	KillEveryS  float64 `json:"kill_every_s,omitempty"`
	PauseEveryS float64 `json:"pause_every_s,omitempty"`
	FaultSide   string  `json:"fault_side"` // server (embedded executor), proxy or client
	ResetP      float64 `json:"proxy_reset,omitempty"`
	FBFOptions  string  `json:"fbf_options"`
	Seed        uint64  `json:"seed"`
	// Peer describes the rows of another CQL server run with the same op
	// stream and faults at the same time as this ring's (e.g. "cassandra vanilla").
	Peer string `json:"peer,omitempty"`
	// Alone: the modes ran one at a time, each alone (RunEachAlone), not
	// at the same time.
	Alone bool `json:"modes_alone,omitempty"`
}

func reportConfig(cfg Config, t Target, hosts []string) ReportConfig {
	rc := ReportConfig{
		Ring: "hosts", Hosts: hosts, RF: cfg.RF, Consistency: cfg.Consistency.String(), Clients: cfg.Clients,
		Loop: "closed", Rate: cfg.Rate, Ops: cfg.Ops, Keys: cfg.Keys, Dist: cfg.Dist, Batch: cfg.Batch,
		DeltaMax: cfg.DeltaMax, Attempts: cfg.Attempts, HorizonS: cfg.Horizon.Seconds(), TimeoutMS: ms(cfg.Timeout),
		CoalesceUS: float64(cfg.Coalesce) / float64(time.Microsecond),
		LostAck:    cfg.Faults.LostAck, Delay: cfg.Faults.Delay, FaultSide: "client", FBFOptions: fbfOptions(cfg), Seed: cfg.Seed,
	}
	if cfg.Ops <= 0 {
		rc.DurationS = cfg.Duration.Seconds()
	}
	if cfg.Rate > 0 {
		rc.Loop = "open"
	}
	if cfg.Dist == DistHot {
		rc.Keys = 1
	}
	if t.Cluster != nil {
		rc.Ring, rc.Nodes, rc.FaultSide = "embedded", t.Cluster.Size(), "server"
		if t.ClientFaults {
			rc.FaultSide = "client"
		}
		rc.RF = min(rc.RF, rc.Nodes)
		if cfg.Faults.Delay > 0 {
			rc.DelayByMS = ms(cfg.Faults.DelayBy)
		}
		rc.KillEveryS, rc.PauseEveryS = cfg.Faults.KillEvery.Seconds(), cfg.Faults.PauseEvery.Seconds()
	}
	if t.Cluster == nil && t.Killer != nil {
		rc.Ring, rc.Nodes = "processes", t.Killer.Size()
		rc.KillEveryS = cfg.Faults.KillEvery.Seconds()
	}
	if p := t.Proxies; p != nil {
		rc.Hosts, rc.Proxies, rc.FaultSide, rc.ResetP = t.servers(), p.Hosts(), "proxy", cfg.Faults.Reset
		if cfg.Faults.Delay > 0 {
			rc.DelayByMS = ms(cfg.Faults.DelayBy)
		}
	}
	return rc
}

// ModeResult is one counter mode's figures.
type ModeResult struct {
	Mode string `json:"mode"`
	// Ops are the acknowledged ops (each a single update or a batch);
	// Attempted counts every op, Unknown and Failed those not acknowledged.
	Ops         int64   `json:"ops"`
	Attempted   int64   `json:"attempted"`
	Acked       int64   `json:"acked"`
	Unknown     int64   `json:"unknown"`
	Failed      int64   `json:"failed"`
	Updates     int64   `json:"updates"` // acknowledged updates (ops × batch)
	ElapsedS    float64 `json:"elapsed_s"`
	OpsPerS     float64 `json:"ops_per_s"`
	UpdatesPerS float64 `json:"updates_per_s"`
	// Latency of acknowledged ops, retries included, in milliseconds.
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	P999MS float64 `json:"p999_ms"`
	MaxMS  float64 `json:"max_ms"`
	MeanMS float64 `json:"mean_ms"`
	// Accuracy (see Tally): deltas, summed over keys.
	Expected   int64   `json:"expected"`
	Uncertain  int64   `json:"uncertain"`
	Final      int64   `json:"final"`
	Overcount  int64   `json:"overcount"`
	Undercount int64   `json:"undercount"`
	ErrorPct   float64 `json:"error_pct"`
	// Attempts sent, Retries among them (attempts after an op's first),
	// and the latest a retry started after its op's first attempt.
	Attempts        int64   `json:"attempts"`
	Retries         int64   `json:"retries"`
	MaxRetryAfterMS float64 `json:"max_retry_after_ms"`
	// Dismissed: updates the leaders recognised as retries (DismissedKnown:
	// an embedded ring counts them at its coordinators; against a running
	// idemkv ring, the FBF mode counts the answers that said so, the
	// idemkv-dismissed payload, for single updates). Duplicates: updates
	// that reached a coordinator again after their op had applied, i.e. the
	// dismissals a correct FBF makes. FalsePositives: fresh updates
	// dismissed; on an embedded ring max(0, Dismissed − Duplicates) (an
	// estimate: a retry racing its own original counts as a false
	// positive), on a running ring the acknowledged ops of one attempt,
	// answered as dismissed (a lower bound: an op retried after a false
	// positive, or whose attempts overlapped, is not counted).
	Dismissed      int64 `json:"dismissed"`
	DismissedKnown bool  `json:"dismissed_known"`
	Duplicates     int64 `json:"duplicates"`
	FalsePositives int64 `json:"false_positives"`
	// Handoff is the handoff mode's costs (nil for the other modes).
	Handoff *HandoffResult `json:"handoff,omitempty"`
	// Borrow is the borrow mode's costs (nil for the other modes).
	Borrow *BorrowResult `json:"borrow,omitempty"`
	// ResetSample is the reset sampler's work (the reset mode with
	// Config.ResetSampler); Final is then its Sampled + FinalRead.
	ResetSample *ResetSampleResult `json:"reset_sample,omitempty"`
	// ResetOutbox is what the reset mode's outboxes held (embedded ring).
	ResetOutbox *ResetOutboxResult `json:"reset_outbox,omitempty"`

	latency *hdrhistogram.Histogram
}

// Latency is the histogram of acknowledged ops' latency in microseconds.
func (m ModeResult) Latency() *hdrhistogram.Histogram { return m.latency }

// HorizonCheck states the retry bound the run kept.
type HorizonCheck struct {
	Attempts        int     `json:"attempts"`   // A
	HorizonMS       float64 `json:"horizon_ms"` // H
	Retries         int64   `json:"retries"`
	MaxRetryAfterMS float64 `json:"max_retry_after_ms"`
	AllWithin       bool    `json:"all_within"` // every retry started less than H after its op's first attempt
}

// Sample is one point of Report.Series.
type Sample struct {
	AtS      float64 `json:"at_s"`
	Mode     string  `json:"mode"`
	Expected int64   `json:"expected"` // acknowledged so far
	Read     int64   `json:"read"`     // Σ values read at QUORUM over the keys touched so far
	ReadOK   bool    `json:"read_ok"`
}

// Mode returns the result of mode, if the report has it.
func (r *Report) Mode(mode string) (ModeResult, bool) {
	for _, m := range r.Modes {
		if m.Mode == mode {
			return m, true
		}
	}
	return ModeResult{}, false
}

// FaultEvents returns the faults injected during the run.
func (r *Report) FaultEvents() []FaultEvent { return r.faultEvents }

// Describe is a one-line description of the run's setting.
func (r *Report) Describe() string {
	c := r.Config
	var b strings.Builder
	if c.Ring == "embedded" {
		fmt.Fprintf(&b, "embedded ring of %d nodes (127.0.0.1-%d)", c.Nodes, c.Nodes)
	} else {
		fmt.Fprintf(&b, "ring at %s", strings.Join(c.Hosts, ","))
	}
	if len(c.Proxies) > 0 {
		fmt.Fprintf(&b, " behind fault proxies at %s", strings.Join(c.Proxies, ","))
	}
	fmt.Fprintf(&b, ", RF %d, %s; %d clients per mode, %s loop", c.RF, c.Consistency, c.Clients, c.Loop)
	if c.Alone {
		b.WriteString(", modes one at a time")
	}
	if c.Loop == "open" {
		fmt.Fprintf(&b, " at %.0f ops/s", c.Rate)
	}
	if c.Ops > 0 {
		fmt.Fprintf(&b, ", %d ops per mode", c.Ops)
	} else {
		fmt.Fprintf(&b, ", %gs", c.DurationS)
	}
	if c.Dist == DistHot {
		b.WriteString("; one hot key")
	} else {
		fmt.Fprintf(&b, "; %s keys (%d)", c.Dist, c.Keys)
	}
	if c.Batch > 1 {
		fmt.Fprintf(&b, ", batches of %d", c.Batch)
	} else {
		b.WriteString(", single updates")
	}
	fmt.Fprintf(&b, "; seed %d; %s", c.Seed, CoalesceSummary(time.Duration(c.CoalesceUS*float64(time.Microsecond))))
	if c.Ring == "embedded" && c.FaultSide == "client" {
		b.WriteString("; faults injected client-side")
	}
	if c.Peer != "" {
		fmt.Fprintf(&b, "\n  %s", c.Peer)
	}
	return b.String()
}

// DescribeFaults is a one-line description of the faults and retries.
func (r *Report) DescribeFaults() string {
	c := r.Config
	var parts []string
	if c.LostAck > 0 {
		parts = append(parts, fmt.Sprintf("lost ack p=%g (%d)", c.LostAck, r.Faults[FaultLostAck]+r.Faults[FaultClientLostAck]+r.Faults[FaultProxyLostAck]))
	}
	if c.Delay > 0 {
		if c.FaultSide == "server" || c.FaultSide == "proxy" {
			parts = append(parts, fmt.Sprintf("answer delayed %gms p=%g (%d)", c.DelayByMS, c.Delay, r.Faults[FaultDelay]+r.Faults[FaultProxyDelay]))
		} else {
			parts = append(parts, fmt.Sprintf("attempt abandoned p=%g (%d)", c.Delay, r.Faults[FaultClientAbandon]))
		}
	}
	if c.ResetP > 0 {
		parts = append(parts, fmt.Sprintf("connection reset p=%g (%d)", c.ResetP, r.Faults[FaultProxyReset]))
	}
	if c.KillEveryS > 0 {
		what := "a node killed"
		if c.Ring == "processes" {
			what = "a node process killed (SIGKILL)"
		}
		parts = append(parts, fmt.Sprintf("%s every %gs (%d)", what, c.KillEveryS, r.Faults[FaultKill]))
	}
	if c.PauseEveryS > 0 {
		parts = append(parts, fmt.Sprintf("a node paused every %gs (%d)", c.PauseEveryS, r.Faults[FaultPause]))
	}
	f := "no faults"
	if len(parts) > 0 {
		f = c.FaultSide + " side: " + strings.Join(parts, ", ")
	}
	h := r.Horizon
	within := "every retry started within H"
	if !h.AllWithin {
		within = "NOT every retry started within H"
	}
	return fmt.Sprintf("faults: %s\n  retries: at most %d attempts per op, client timeout %gms, H=%gs: %d retries, %s (latest %.0fms after its op's first attempt)",
		f, h.Attempts, c.TimeoutMS, h.HorizonMS/1000, h.Retries, within, h.MaxRetryAfterMS)
}

// WriteTable prints the reports as aligned tables, one block per report.
func WriteTable(w io.Writer, reports ...*Report) error {
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		name := r.Name
		if name == "" {
			name = "run"
		}
		fmt.Fprintf(w, "%s: %s\n", name, r.Describe())
		fmt.Fprintf(w, "  %s\n", r.DescribeFaults())
		handoff := false
		for _, m := range r.Modes {
			handoff = handoff || m.Handoff != nil
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "mode\tops\tops/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tretries\tdismissed\t"
		if handoff {
			head += "counted p50 ms\tcounted p99 ms\tcounted max ms\t"
		}
		fmt.Fprintln(tw, head)
		for _, m := range r.Modes {
			dismissed := "-"
			if m.DismissedKnown {
				dismissed = strconv.FormatInt(m.Dismissed, 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%s\t",
				m.Mode, m.Ops, m.OpsPerS, m.P50MS, m.P90MS, m.P99MS, m.P999MS, m.MaxMS, m.Retries, dismissed)
			if handoff {
				p50, p99, pmax := countedMS(m)
				fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t", p50, p99, pmax)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("bench: write table: %w", err)
		}
		for _, m := range r.Modes {
			if h := m.Handoff; h != nil {
				fmt.Fprintf(w, "  %s ops are acknowledged when their exchange returns, before a replica counts their increments:\n"+
					"  counted is the accounting delay, from an increment until its client knew it in the servers' value (an\n"+
					"  upper bound; for the other modes, the ack: the consistency level's replicas hold the update); every\n"+
					"  increment was in the servers' values (read at ALL) %.1f s after the load ended (final flush and\n"+
					"  retirement %.1f s)\n",
					m.Mode, h.SettledMS/1000, h.FlushMS/1000)
			}
		}
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "mode\texpected\tfinal\tunknown\tover\tunder\terror %\t")
		for _, m := range r.Modes {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t\n", m.Mode, m.Expected, m.Final, m.Uncertain, m.Overcount, m.Undercount, m.ErrorPct)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("bench: write table: %w", err)
		}
		for _, m := range r.Modes {
			if s := m.ResetSample; s != nil {
				fmt.Fprintf(w, "  %s: final = Σ samples + Σ read at ALL after the run = %d + %d. Every %.0f ms a sampler read %d random keys\n"+
					"  with their reset contexts and DELETEd each with its context at ALL, replaying it until acknowledged, then\n"+
					"  booked the value read: %d samples in %d periods (%d DELETE attempts, %d failed, %d acks dropped and replayed;\n"+
					"  %d reads failed; longest read-to-ack %.0f ms). over/under compare samples + final per key with the increments\n",
					m.Mode, s.Sampled, s.FinalRead, s.PeriodMS, s.Keys, s.Samples, s.Ticks, s.DeleteAttempts, s.Failed,
					s.DroppedAcks, s.ReadErrors, s.MaxResetMS)
			}
		}
		for _, m := range r.Modes {
			if o := m.ResetOutbox; o != nil {
				drained := fmt.Sprintf("empty %.1f s later", o.DrainedS)
				if !o.Drained {
					drained = "NOT empty a minute later"
				}
				fmt.Fprintf(w, "  %s outboxes (ops a peer has not acknowledged, running nodes): peak %d at %.1f s; %d when the load ended, %s\n",
					m.Mode, o.PeakPending, o.PeakAtS, o.EndPending, drained)
			}
		}
		if len(r.ServerCPU) > 0 {
			var parts []string
			for _, sc := range r.ServerCPU {
				procs := "processes"
				if sc.Processes == 1 {
					procs = "process"
				}
				parts = append(parts, fmt.Sprintf("%s %.1f µs (%d %s, %.2f s for %d ops)", sc.Target, sc.PerOpUS, sc.Processes, procs, sc.CPUS, sc.Ops))
			}
			fmt.Fprintf(w, "  servers' CPU per acknowledged op: %s\n", strings.Join(parts, "; "))
			parts = parts[:0]
			for _, sc := range r.ServerCPU {
				if sc.ClientPerOpUS > 0 {
					parts = append(parts, fmt.Sprintf("%s %.1f µs (%.2f s)", sc.Target, sc.ClientPerOpUS, sc.ClientCPUS))
				}
			}
			if len(parts) > 0 {
				fmt.Fprintf(w, "  clients' CPU per acknowledged op (this process, same cores): %s\n", strings.Join(parts, "; "))
			}
		}
		for _, m := range r.Modes {
			if m.Mode == ModeFBF && m.Undercount > 0 && m.DismissedKnown {
				fmt.Fprintf(w, "  %s: under %d; %d fresh updates were dismissed as retries (the filter's false positives), so at most %d increments are unexplained\n",
					m.Mode, m.Undercount, m.FalsePositives, max(0, m.Undercount-m.FalsePositives*r.Config.DeltaMax))
			}
		}
		for _, m := range r.Modes {
			if h := m.Handoff; h != nil {
				fmt.Fprintf(w, "\nhandoff: %d updates; per update %.2f client exchanges (%.0f B), %.2f tier-0 sync exchanges (%.0f B); %d client cells, %.2f exchanges per cell; "+
					"accounted at tier 0 after p50 %.1f ms, p99 %.1f ms, max %.1f ms; server slots peak %d, after the clients retired %d (%d notices held); "+
					"exact at ALL %.0f ms and on every replica %.0f ms after the flush\n",
					h.Updates, h.ExchangesPerUpdate, h.BytesPerUpdate, h.SyncPerUpdate, h.SyncBytesPerUpdate, h.Cells, h.RoundTripsPerCell,
					h.AccountP50MS, h.AccountP99MS, h.AccountMaxMS, h.SlotsPeak, h.SlotsAfter, h.NoticesAfter, h.ReadExactMS, h.ConvergeMS)
			}
			if b := m.Borrow; b != nil {
				fmt.Fprintf(w, "\nborrow: %d updates; per update %.2f client round trips (%.0f B) served by %.2f replica exchanges, %.2f replica sync exchanges (%.0f B); "+
					"%d client cells, %.2f round trips and %.2f borrows per cell; client dots left after the retirements %d "+
					"(%d increments transferred, %d unlearnt loans closed); exact %.0f ms and on every replica %.0f ms after the flush\n",
					b.Updates, b.ExchangesPerUpdate, b.BytesPerUpdate, b.ReplicaExchangesPerUpdate, b.SyncPerUpdate, b.SyncBytesPerUpdate,
					b.Cells, b.RoundTripsPerCell, b.BorrowsPerCell, b.BorrowedAfter, b.Transferred, b.Closed, b.ReadExactMS, b.ConvergeMS)
				if b.MaxCellBytes > 0 {
					fmt.Fprintf(w, "  borrow cells on the replicas: the largest written %d B; after the retirements %.0f B on average\n",
						b.MaxCellBytes, b.CellBytesAfter)
				}
			}
		}
	}
	return nil
}

// countedMS is the delay until a mode's increments were counted by the
// servers (p50, p99, max, in milliseconds): the handoff mode's accounting
// delay, and for the other modes their ops' latency (an acknowledged update
// is held by the replicas the consistency level asks for).
func countedMS(m ModeResult) (p50, p99, pmax float64) {
	if h := m.Handoff; h != nil {
		return h.AccountP50MS, h.AccountP99MS, h.AccountMaxMS
	}
	return m.P50MS, m.P99MS, m.MaxMS
}

// WriteJSON writes one report as a JSON object, or several as an object
// keyed by their names.
func WriteJSON(w io.Writer, reports ...*Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	var v any = reports
	if len(reports) == 1 {
		v = reports[0]
	} else {
		m := map[string]*Report{}
		for _, r := range reports {
			m[r.Name] = r
		}
		v = m
	}
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("bench: write JSON: %w", err)
	}
	return nil
}

var csvHeader = []string{"name", "mode", "ops", "attempted", "unknown", "failed", "updates", "elapsed_s", "ops_per_s", "updates_per_s",
	"p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms", "expected", "uncertain", "final", "overcount", "undercount", "error_pct",
	"attempts", "retries", "max_retry_after_ms", "dismissed", "duplicates", "false_positives",
	"nodes", "rf", "consistency", "clients", "loop", "keys", "dist", "batch", "lost_ack", "delay", "seed",
	"counted_p50_ms", "counted_p99_ms", "counted_max_ms", "settled_ms"}

// WriteCSV writes one row per report and mode.
func WriteCSV(w io.Writer, reports ...*Report) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(csvHeader)
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	d := func(x int64) string { return strconv.FormatInt(x, 10) }
	counted := func(m ModeResult, q int) string {
		p50, p99, pmax := countedMS(m)
		return f(map[int]float64{50: p50, 99: p99, 100: pmax}[q])
	}
	settled := func(m ModeResult) string {
		if m.Handoff == nil {
			return ""
		}
		return f(m.Handoff.SettledMS)
	}
	for _, r := range reports {
		c := r.Config
		for _, m := range r.Modes {
			_ = cw.Write([]string{r.Name, m.Mode, d(m.Ops), d(m.Attempted), d(m.Unknown), d(m.Failed), d(m.Updates), f(m.ElapsedS), f(m.OpsPerS), f(m.UpdatesPerS),
				f(m.P50MS), f(m.P90MS), f(m.P99MS), f(m.P999MS), f(m.MaxMS), f(m.MeanMS), d(m.Expected), d(m.Uncertain), d(m.Final),
				d(m.Overcount), d(m.Undercount), f(m.ErrorPct), d(m.Attempts), d(m.Retries), f(m.MaxRetryAfterMS),
				d(m.Dismissed), d(m.Duplicates), d(m.FalsePositives),
				strconv.Itoa(c.Nodes), strconv.Itoa(c.RF), c.Consistency, strconv.Itoa(c.Clients), c.Loop, strconv.Itoa(c.Keys), c.Dist,
				strconv.Itoa(c.Batch), f(c.LostAck), f(c.Delay), strconv.FormatUint(c.Seed, 10),
				counted(m, 50), counted(m, 99), counted(m, 100), settled(m)})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("bench: write CSV: %w", err)
	}
	return nil
}

// WriteOut writes the reports into dir: results.json, results.csv,
// faults.jsonl (every injected fault, one JSON object a line, with the name
// of its report) and the PNG plots. It returns the files written.
func WriteOut(dir string, reports ...*Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var files []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		files = append(files, p)
		return nil
	}
	if err := write("results.json", func(w io.Writer) error { return WriteJSON(w, reports...) }); err != nil {
		return files, err
	}
	if err := write("results.csv", func(w io.Writer) error { return WriteCSV(w, reports...) }); err != nil {
		return files, err
	}
	if err := write("faults.jsonl", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, r := range reports {
			for _, e := range r.faultEvents {
				if err := enc.Encode(struct {
					Run string `json:"run"`
					FaultEvent
				}{r.Name, e}); err != nil {
					return fmt.Errorf("bench: fault log: %w", err)
				}
			}
		}
		return nil
	}); err != nil {
		return files, err
	}
	for _, r := range reports {
		ps, err := WritePlots(dir, r)
		files = append(files, ps...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}

var modeColors = []color.Color{
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
}

// WritePlots draws a report's figures into dir: NAME-latency-cdf.png (the
// latency CDF of each mode and, dashed, the handoff mode's accounting
// delay), NAME-expected-vs-final.png (expected and final totals per mode,
// the value axis from 0) and, with samples, NAME-series.png.
func WritePlots(dir string, r *Report) ([]string, error) {
	name := r.Name
	if name == "" {
		name = "run"
	}
	var files []string
	for _, f := range []struct {
		file string
		w, h vg.Length
		make func(name string, r *Report) (*plot.Plot, []string, error)
	}{
		{name + "-latency-cdf.png", 7 * vg.Inch, 4.5 * vg.Inch, latencyPlot},
		{name + "-expected-vs-final.png", 6 * vg.Inch, 4.5 * vg.Inch, expectedPlot},
		{name + "-series.png", 7 * vg.Inch, 4.5 * vg.Inch, seriesPlot},
	} {
		p, labels, err := f.make(name, r)
		if err != nil {
			return files, fmt.Errorf("bench: plot: %w", err)
		}
		if p == nil || len(labels) == 0 {
			continue
		}
		path := filepath.Join(dir, f.file)
		if err := p.Save(f.w, f.h, path); err != nil {
			return files, fmt.Errorf("bench: plot: %w", err)
		}
		files = append(files, path)
	}
	return files, nil
}

// cdf is the cumulative distribution of h (microseconds) in milliseconds.
func cdf(h *hdrhistogram.Histogram) plotter.XYs {
	var xys plotter.XYs
	total := float64(h.TotalCount())
	var cum int64
	for _, b := range h.Distribution() {
		if b.Count == 0 {
			continue
		}
		cum += b.Count
		xys = append(xys, plotter.XY{X: float64(b.To) / 1000, Y: float64(cum) / total})
	}
	return xys
}

// latencyPlot is the latency CDF of each mode's acknowledged ops and, for
// the handoff mode, dashed in the same colour, the CDF of its accounting
// delay: its ops return before the servers count their increments. It
// returns the plot and its legend labels.
func latencyPlot(name string, r *Report) (*plot.Plot, []string, error) {
	p := plot.New()
	p.Title.Text = name + ": latency of acknowledged ops (dashed: until counted by the servers)"
	p.X.Label.Text = "latency (ms, log)"
	p.Y.Label.Text = "fraction of ops ≤ x"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	var labels []string
	for i, m := range r.Modes {
		c := modeColors[i%len(modeColors)]
		if h := m.latency; h != nil && h.TotalCount() > 0 {
			l, err := plotter.NewLine(cdf(h))
			if err != nil {
				return nil, nil, err
			}
			l.Color = c
			l.Width = vg.Points(1.5)
			p.Add(l)
			label := m.Mode
			if m.Handoff != nil {
				label += ": exchange acknowledged"
			}
			p.Legend.Add(label, l)
			labels = append(labels, label)
		}
		if h := m.Handoff.Accounting(); h != nil && h.TotalCount() > 0 {
			l, err := plotter.NewLine(cdf(h))
			if err != nil {
				return nil, nil, err
			}
			l.Color = c
			l.Width = vg.Points(1.5)
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			p.Add(l)
			label := m.Mode + ": increment counted by the servers"
			p.Legend.Add(label, l)
			labels = append(labels, label)
		}
	}
	return p, labels, nil
}

// expectedPlot is the expected and final totals per mode, as bars whose
// value axis starts at 0 (so that a 5 % over-count looks like 5 %).
func expectedPlot(name string, r *Report) (*plot.Plot, []string, error) {
	p := plot.New()
	p.Title.Text = name + ": expected vs final (read at ALL)"
	p.Y.Label.Text = "Σ counter values"
	p.Legend.Top, p.Legend.Left = true, true
	w := vg.Points(18)
	var exp, fin plotter.Values
	var names []string
	for _, m := range r.Modes {
		exp = append(exp, float64(m.Expected))
		fin = append(fin, float64(m.Final))
		names = append(names, fmt.Sprintf("%s (%+.2f%%)", m.Mode, pctDiff(m)))
	}
	if len(names) == 0 {
		return p, nil, nil
	}
	be, err := plotter.NewBarChart(exp, w)
	if err != nil {
		return nil, nil, err
	}
	bf, err := plotter.NewBarChart(fin, w)
	if err != nil {
		return nil, nil, err
	}
	be.Color, be.Offset = color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, -w/2
	bf.Color, bf.Offset = color.RGBA{0x1f, 0x77, 0xb4, 0xff}, w/2
	p.Add(be, bf)
	p.Legend.Add("expected (acknowledged)", be)
	p.Legend.Add("final", bf)
	p.NominalX(names...)
	_, hi := minMax(append(append(plotter.Values{}, exp...), fin...))
	p.Y.Min, p.Y.Max = 0, niceAbove(1.15*hi) // room for the legend
	p.Y.Tick.Marker = plainTicks{}
	return p, []string{"expected (acknowledged)", "final"}, nil
}

// seriesPlot is the expected and read totals over time, per mode (nil
// labels without samples).
func seriesPlot(name string, r *Report) (*plot.Plot, []string, error) {
	p := plot.New()
	if len(r.Series) == 0 {
		return p, nil, nil
	}
	p.Title.Text = name + ": expected and read over time"
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "Σ counter values"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	byMode := map[string][]Sample{}
	var modes []string
	for _, s := range r.Series {
		if _, ok := byMode[s.Mode]; !ok {
			modes = append(modes, s.Mode)
		}
		byMode[s.Mode] = append(byMode[s.Mode], s)
	}
	sort.Strings(modes)
	var labels []string
	for i, m := range modes {
		var e, rd plotter.XYs
		for _, s := range byMode[m] {
			e = append(e, plotter.XY{X: s.AtS, Y: float64(s.Expected)})
			if s.ReadOK {
				rd = append(rd, plotter.XY{X: s.AtS, Y: float64(s.Read)})
			}
		}
		c := modeColors[i%len(modeColors)]
		for j, xys := range []plotter.XYs{e, rd} {
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, nil, err
			}
			l.Color = c
			label := m + " read"
			if j == 0 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				label = m + " expected"
			}
			p.Add(l)
			p.Legend.Add(label, l)
			labels = append(labels, label)
		}
	}
	return p, labels, nil
}

// plainTicks is plot.DefaultTicks labelled 25000 rather than 25000.00.
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// niceAbove is the least round number (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6 or 8
// times a power of ten) that is ≥ v, and at least 1.
func niceAbove(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func pctDiff(m ModeResult) float64 {
	if m.Expected == 0 {
		return 0
	}
	return 100 * float64(m.Final-m.Expected) / float64(m.Expected)
}

func minMax(v plotter.Values) (lo, hi float64) {
	for i, x := range v {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}

func sortStrings(s []string) { sort.Strings(s) }
