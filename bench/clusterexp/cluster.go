package clusterexp

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/idemkv/idemkv/bench"
)

// Options size the ring experiments; zero values take the paper's settings
// where they fit this machine.
type Options struct {
	Nodes    int           // fig14: 10, fig15: 4, leader-rules: 5
	Duration time.Duration // per phase
	Clients  int
	Seed     uint64
	LostAck  float64 // probability of a lost answer (fig14, leader-rules)
	Progress io.Writer
	// CassandraHosts, the CQL addresses (host:port) of an Apache Cassandra
	// ring ('idemkv peer cassandra up'), add a "cassandra vanilla" row to
	// Fig14's retries phase and to Fig15: the same op stream at the same
	// time on that ring (bench.RunWithPeer), faults client-side on both.
	CassandraHosts []string
	// CassandraAfter runs the Cassandra rows after idemkv's instead of at
	// the same time (bench.RunThenPeer), so that neither load competes with
	// the other for the CPU.
	CassandraAfter bool
	// CassandraKiller, with CassandraHosts, kills and restarts the
	// Cassandra ring's nodes (a PeerKiller) in Fig14's node-kill phase,
	// which then has a "cassandra vanilla" row too; without it that phase
	// runs on idemkv alone.
	CassandraKiller bench.Killer
}

// runPeer runs cfg on the cluster and, with o.CassandraHosts, on the
// Cassandra ring: at the same time, or after with o.CassandraAfter. A
// config with node kills runs on the cluster alone unless
// o.CassandraKiller can kill the Cassandra ring's nodes.
func (o Options) runPeer(ctx context.Context, c *bench.Cluster, cfg bench.Config) (*bench.Report, error) {
	peer := bench.Target{Hosts: o.CassandraHosts, Killer: o.CassandraKiller}
	if cfg.Faults.KillEvery > 0 && peer.Killer == nil {
		peer.Hosts = nil
	}
	if o.CassandraAfter {
		return bench.RunThenPeer(ctx, bench.Target{Cluster: c}, cfg, peer)
	}
	return bench.RunWithPeer(ctx, bench.Target{Cluster: c}, cfg, peer)
}

func (o Options) or(nodes int, d time.Duration) Options {
	if o.Nodes <= 0 {
		o.Nodes = nodes
	}
	if o.Duration <= 0 {
		o.Duration = d
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.LostAck <= 0 {
		o.LostAck = 0.05
	}
	return o
}

// Fig14 is the paper's accuracy experiment: a ring (10 nodes, RF 3), a
// vanilla and an FBF counter driven by the same operations, a share of them
// retried after lost answers, the totals sampled over time; then the same
// again while a replica at a time is killed and restarted, so the ring
// routes around it. It returns the two phases' reports. With
// o.CassandraHosts the retries phase has a "cassandra vanilla" row too, and
// so has the node-kill phase with o.CassandraKiller (which kills the
// Cassandra ring's nodes on the same schedule); without it that phase runs
// on idemkv alone.
func Fig14(ctx context.Context, o Options) ([]*bench.Report, error) {
	o = o.or(10, 20*time.Second)
	c, err := bench.StartCluster(ctx, bench.ClusterConfig{Nodes: o.Nodes, Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	base := bench.Config{
		Workload: bench.Workload{Keys: 1}, // one counter per mode, as the paper's two counters
		Clients:  o.Clients, Duration: o.Duration, Seed: o.Seed, RF: 3,
		SampleEvery: o.Duration / 20, Progress: o.Progress,
		Faults: bench.Faults{LostAck: o.LostAck},
	}
	retries := base
	retries.Name = "fig14-retries"
	r1, err := o.runPeer(ctx, c, retries)
	if err != nil {
		return nil, err
	}
	crash := base
	crash.Name = "fig14-node-crash"
	crash.Seed = o.Seed + 1
	crash.Faults.KillEvery = o.Duration / 3
	crash.Faults.Down = o.Duration / 6
	r2, err := o.runPeer(ctx, c, crash)
	if err != nil {
		return nil, err
	}
	return []*bench.Report{r1, r2}, nil
}

// Fig15 is the paper's latency experiment: 4 nodes, one client host,
// batches of 50 counter updates, FBF against vanilla, no faults.
func Fig15(ctx context.Context, o Options) (*bench.Report, error) {
	o = o.or(4, 20*time.Second)
	c, err := bench.StartCluster(ctx, bench.ClusterConfig{Nodes: o.Nodes, Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	return o.runPeer(ctx, c, bench.Config{
		Name:     "fig15",
		Workload: bench.Workload{Keys: 1000, Batch: 50},
		Clients:  o.Clients, Duration: o.Duration, Seed: o.Seed, RF: 3, Progress: o.Progress,
	})
}

// LeaderRules measures the FBF counter's accuracy under the same faults
// (lost and late answers, and nodes killed and restarted) with the
// deterministic leader rule (first live replica, idemkv's default for FBF
// tables) and with Cassandra's random rule: a retry that meets another
// leader meets another filter, unless replication has taught it the id.
func LeaderRules(ctx context.Context, o Options) ([]*bench.Report, error) {
	o = o.or(5, 20*time.Second)
	var out []*bench.Report
	for i, rule := range []string{"first", "random"} {
		c, err := bench.StartCluster(ctx, bench.ClusterConfig{Nodes: o.Nodes, Seed: o.Seed})
		if err != nil {
			return nil, err
		}
		r, err := bench.Run(ctx, bench.Target{Cluster: c}, bench.Config{
			Name:     "leader-" + rule,
			Workload: bench.Workload{Keys: 100},
			Modes:    []string{bench.ModeFBF},
			Clients:  o.Clients, Duration: o.Duration, Seed: o.Seed, RF: 3, Progress: o.Progress,
			FBFOptions: map[string]string{"leader": rule},
			Faults: bench.Faults{LostAck: o.LostAck, Delay: o.LostAck / 5,
				KillEvery: o.Duration / 3, Down: o.Duration / 6},
		})
		c.Stop()
		if err != nil {
			return nil, fmt.Errorf("leader rule %s (run %d): %w", rule, i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// PaperComparison sets the headline of our run beside the paper's.
func PaperComparison(which string, reports []*bench.Report) string {
	mode := func(r *bench.Report, m string) bench.ModeResult {
		res, _ := r.Mode(m)
		return res
	}
	switch which {
	case "fig14":
		var s string
		for _, r := range reports {
			v, f := mode(r, bench.ModeVanilla), mode(r, bench.ModeFBF)
			s += fmt.Sprintf("%s: vanilla error %.2f%% (over %d, under %d), FBF error %.2f%% (over %d, under %d); paper: plain ≈ +6%%, FBF exact (also after a node crash)\n",
				r.Name, v.ErrorPct, v.Overcount, v.Undercount, f.ErrorPct, f.Overcount, f.Undercount)
			if ag, ok := PeerAgreement(r); ok {
				s += fmt.Sprintf("%s: %s; lost acks alone predict %.2f %%\n", r.Name, ag, 100*PredictedOvercount(r.Config.LostAck, r.Config.Attempts))
			}
		}
		return s
	case "fig15":
		v, f := mode(reports[0], bench.ModeVanilla), mode(reports[0], bench.ModeFBF)
		if v.P50MS == 0 {
			return ""
		}
		s := fmt.Sprintf("FBF / vanilla p50 latency %.2f (%.2f vs %.2f ms), p99 %.2f; paper: FBF ≈ 1.10 (≈ 2 ms slower)",
			f.P50MS/v.P50MS, f.P50MS, v.P50MS, f.P99MS/v.P99MS)
		if c, ok := reports[0].Mode(cassandraVanilla); ok && c.P50MS > 0 {
			s += fmt.Sprintf("\ncassandra vanilla / idemkv vanilla: p50 %.2f (%.2f vs %.2f ms), p99 %.2f, batches/s %.2f (%.0f vs %.0f)",
				c.P50MS/v.P50MS, c.P50MS, v.P50MS, c.P99MS/v.P99MS, c.OpsPerS/v.OpsPerS, c.OpsPerS, v.OpsPerS)
		}
		return s
	case "leader-rules":
		var s string
		for _, r := range reports {
			f := mode(r, bench.ModeFBF)
			s += fmt.Sprintf("%s: FBF over %d, under %d, error %.3f%%, retries %d, dismissed %d\n", r.Name, f.Overcount, f.Undercount, f.ErrorPct, f.Retries, f.Dismissed)
		}
		return s
	}
	return ""
}

// cassandraVanilla is the row bench.RunWithPeer adds for the peer ring.
const cassandraVanilla = bench.PeerName + " " + bench.ModeVanilla

// PeerAgreement compares the over-count per update of idemkv's vanilla
// counter with the peer ring's (Apache Cassandra's) in one report, if it
// has both rows.
func PeerAgreement(r *bench.Report) (Agreement, bool) {
	v, ok1 := r.Mode(bench.ModeVanilla)
	c, ok2 := r.Mode(cassandraVanilla)
	if !ok1 || !ok2 {
		return Agreement{}, false
	}
	return Compare(NewRate("idemkv vanilla", v.Overcount, v.Expected), NewRate(cassandraVanilla, c.Overcount, c.Expected)), true
}
