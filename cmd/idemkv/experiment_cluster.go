package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/bench/clusterexp"
	"github.com/idemkv/idemkv/peer/cassandra"
)

func init() {
	experiments = append(experiments, struct {
		name, summary string
		run           func(args []string, stdout, stderr io.Writer) error
	}{"cluster", "reproduce the paper's cluster figures: fig6, fig14, fig15, leader-rules", runExperimentCluster})
}

// clusterRun is the parsed command line of 'idemkv experiment cluster'.
type clusterRun struct {
	which     string
	out       string
	opts      clusterexp.Options
	reproduce string
	peerDir   string // fig6: the peer ring's directory, whose nodes flush
}

const clusterUsage = "usage: idemkv experiment cluster fig6|fig14|fig15|leader-rules [--out DIR] [--nodes N --duration D --clients C --lost-ack P --seed S] [--cassandra-hosts H,... [--cassandra-after]] [fig6: --cassandra-dir D]"

// parseCluster parses the arguments of 'idemkv experiment cluster'. It
// refuses --cassandra-hosts where no Cassandra row can be measured alike:
// leader-rules (the FBF counter alone), and fig6 with other than 2 hosts.
func parseCluster(args []string, stderr io.Writer) (*clusterRun, error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, clusterUsage)
		return nil, flag.ErrHelp
	}
	which := args[0]
	switch which {
	case "fig6", "fig14", "fig15", "leader-rules":
	default:
		return nil, fmt.Errorf("unknown cluster experiment %q (have: fig6, fig14, fig15, leader-rules)", which)
	}
	fs := flag.NewFlagSet("experiment cluster "+which, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "results", "directory for the CSV and PNG")
	nodes := fs.Int("nodes", 0, "ring size (default: fig14 10, fig15 4, leader-rules 5)")
	dur := fs.Duration("duration", 0, "load time of each phase (default 20s)")
	clients := fs.Int("clients", 8, "clients per counter mode")
	lost := fs.Float64("lost-ack", 0.05, "probability that an answer is lost after the update applied")
	seed := fs.Uint64("seed", 1, "seed of the ring, the operations and the faults")
	peer := fs.String("cassandra-hosts", "", "CQL addresses of an Apache Cassandra ring ('idemkv peer cassandra up'), comma-separated: adds Cassandra rows; fig6: exactly A and B of a 2-node ring (RF 2); fig14 (retries phase) and fig15: the same op stream at the same time, faults client-side on both sides")
	dir := fs.String("cassandra-dir", "", "the directory of a peer ring ('idemkv peer cassandra up --dir D'), instead of --cassandra-hosts: its nodes are the Cassandra ring, and the experiment may kill them; fig6: a 2-node ring started with --jmx, nodes 1 and 2 are A and B, step 3 flushes both with nodetool, and step 5 SIGKILLs A and restarts it; fig14: the node-kill phase kills and restarts Cassandra's nodes too")
	after := fs.Bool("cassandra-after", false, "fig14, fig15: run the Cassandra rows after idemkv's rather than at the same time, so that neither competes with the other for the CPU")
	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("experiment cluster %s: unexpected argument %q", which, fs.Arg(0))
	}
	hosts := bench.ParseHosts(*peer, cassandra.CQLPort)
	switch {
	case *dir != "" && which != "fig6" && which != "fig14":
		return nil, fmt.Errorf("experiment cluster %s: --cassandra-dir is for fig6 (flush and crash) and fig14 (node kills); use --cassandra-hosts", which)
	case *dir != "" && *peer != "":
		return nil, fmt.Errorf("experiment cluster %s: give --cassandra-dir or --cassandra-hosts, not both (--cassandra-dir's nodes are the ring)", which)
	case *dir != "" && which == "fig6":
		hosts = []string{net.JoinHostPort(cassandra.Address(1), strconv.Itoa(cassandra.CQLPort)), net.JoinHostPort(cassandra.Address(2), strconv.Itoa(cassandra.CQLPort))}
	case *peer != "" && len(hosts) == 0:
		return nil, fmt.Errorf("experiment cluster %s: --cassandra-hosts %q: no address", which, *peer)
	case len(hosts) > 0 && which == "leader-rules":
		return nil, errors.New("experiment cluster leader-rules: --cassandra-hosts: it measures the FBF counter alone, which Cassandra does not have")
	case len(hosts) > 0 && which == "fig6" && len(hosts) != 2:
		return nil, fmt.Errorf("experiment cluster fig6: --cassandra-hosts: want the 2 nodes A and B of a 2-node ring, got %d addresses", len(hosts))
	case *after && len(hosts) == 0 && *dir == "":
		return nil, fmt.Errorf("experiment cluster %s: --cassandra-after without --cassandra-hosts or --cassandra-dir", which)
	case *after && which == "fig6":
		return nil, errors.New("experiment cluster fig6: --cassandra-after: the scenario runs on idemkv, then on Cassandra, anyway")
	case *lost < 0 || *lost > 1:
		return nil, fmt.Errorf("experiment cluster %s: --lost-ack %g: want 0 to 1", which, *lost)
	}
	r := &clusterRun{which: which, out: *out, opts: clusterexp.Options{Nodes: *nodes, Duration: *dur, Clients: *clients, LostAck: *lost, Seed: *seed, Progress: stderr, CassandraHosts: hosts, CassandraAfter: *after}}
	r.reproduce = fmt.Sprintf("idemkv experiment cluster %s --out %s --clients %d --lost-ack %g --seed %d", which, *out, *clients, *lost, *seed)
	if which == "fig6" {
		r.reproduce = "idemkv experiment cluster fig6 --out " + *out
	}
	if *nodes > 0 {
		r.reproduce += fmt.Sprintf(" --nodes %d", *nodes)
	}
	if *dur > 0 {
		r.reproduce += " --duration " + dur.String()
	}
	switch {
	case *dir != "":
		r.peerDir = *dir
		r.reproduce += " --cassandra-dir " + *dir
	case len(hosts) > 0:
		r.reproduce += " --cassandra-hosts " + strings.Join(hosts, ",")
	}
	if *after {
		r.reproduce += " --cassandra-after"
	}
	return r, nil
}

func runExperimentCluster(args []string, stdout, stderr io.Writer) error {
	run, err := parseCluster(args, stderr)
	if err != nil {
		return err
	}
	which, out, opts := run.which, &run.out, run.opts
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if which == "fig14" && run.peerDir != "" {
		k, err := clusterexp.NewPeerKiller(run.peerDir)
		if err != nil {
			return err
		}
		opts.CassandraHosts, opts.CassandraKiller = k.Hosts(), k
	}
	reproduce := run.reproduce
	var reports []*bench.Report
	switch which {
	case "fig6":
		dir, err := os.MkdirTemp("", "idemkv-fig6-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		rows, err := clusterexp.Fig6(dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "fig6 — the paper's four-step scenario, RF 2 (replicas A and B), flush at step 3, lost ack at step 4\n")
		if hosts := opts.CassandraHosts; len(hosts) > 0 {
			var peer clusterexp.Fig6Peer
			if run.peerDir != "" {
				peer = cassandra.Ring{Dir: run.peerDir}
			}
			crows, err := clusterexp.Fig6Cassandra(ctx, hosts, peer)
			if err != nil {
				return err
			}
			rows = append(rows, crows...)
			fmt.Fprintf(stdout, "%s rows: Apache Cassandra ring of A = %s and B = %s, keyspace %s (RF 2, dropped and created), writes and reads at ALL, \"A/B reads\": a read coordinated by A/B; ack of step 4 dropped by the client after the update applied\n",
				clusterexp.Fig6CassandraMode, hosts[0], hosts[1], clusterexp.Fig6Keyspace)
		}
		fmt.Fprintf(stdout, "reproduce: %s\n", reproduce)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "mode\tstep\tA reads\tB reads\tpaper")
		for _, r := range rows {
			paper := "—"
			if r.PaperValue >= 0 {
				paper = fmt.Sprint(r.PaperValue)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", r.Mode, r.Step, r.A, r.B, paper)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := clusterexp.WriteFig6(*out, rows); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s/fig6.csv and %s/fig6.png\n", *out, *out)
		return nil
	case "fig14":
		fmt.Fprintln(stdout, "fig14 — accuracy with retries: vanilla vs FBF counter, RF 3; then a replica killed and restarted while the load goes on")
		reports, err = clusterexp.Fig14(ctx, opts)
	case "fig15":
		fmt.Fprintln(stdout, "fig15 — write latency, batches of 50 counter updates, FBF vs vanilla, no faults")
		var r *bench.Report
		r, err = clusterexp.Fig15(ctx, opts)
		reports = []*bench.Report{r}
	case "leader-rules":
		fmt.Fprintln(stdout, "leader-rules — FBF counter accuracy with the first-live-replica leader rule vs Cassandra's random rule, same faults")
		reports, err = clusterexp.LeaderRules(ctx, opts)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "reproduce: "+reproduce)
	if err := bench.WriteTable(stdout, reports...); err != nil {
		return err
	}
	fmt.Fprintln(stdout, clusterexp.PaperComparison(which, reports))
	files, err := bench.WriteOut(*out, reports...)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(stdout, "wrote "+f)
	}
	return nil
}
