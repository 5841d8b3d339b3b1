package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"text/tabwriter"

	"github.com/idemkv/idemkv/bench"
	"github.com/idemkv/idemkv/bench/clusterexp"
)

func init() {
	experiments = append(experiments, struct {
		name, summary string
		run           func(args []string, stdout, stderr io.Writer) error
	}{"cluster", "reproduce the paper's cluster figures: fig6, fig14, fig15, leader-rules", runExperimentCluster})
}

func runExperimentCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: idemkv experiment cluster fig6|fig14|fig15|leader-rules [--out DIR] [--nodes N --duration D --clients C --lost-ack P --seed S]")
		return flag.ErrHelp
	}
	which := args[0]
	fs := flag.NewFlagSet("experiment cluster "+which, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "results", "directory for the CSV and PNG")
	nodes := fs.Int("nodes", 0, "ring size (default: fig14 10, fig15 4, leader-rules 5)")
	dur := fs.Duration("duration", 0, "load time of each phase (default 20s)")
	clients := fs.Int("clients", 8, "clients per counter mode")
	lost := fs.Float64("lost-ack", 0.05, "probability that an answer is lost after the update applied")
	seed := fs.Uint64("seed", 1, "seed of the ring, the operations and the faults")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	opts := clusterexp.Options{Nodes: *nodes, Duration: *dur, Clients: *clients, LostAck: *lost, Seed: *seed, Progress: stderr}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	reproduce := fmt.Sprintf("idemkv experiment cluster %s --out %s --clients %d --lost-ack %g --seed %d", which, *out, *clients, *lost, *seed)
	if *nodes > 0 {
		reproduce += fmt.Sprintf(" --nodes %d", *nodes)
	}
	if *dur > 0 {
		reproduce += " --duration " + dur.String()
	}
	var reports []*bench.Report
	var err error
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
		fmt.Fprintf(stdout, "reproduce: idemkv experiment cluster fig6 --out %s\n", *out)
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
	default:
		return fmt.Errorf("unknown cluster experiment %q (have: fig6, fig14, fig15, leader-rules)", which)
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
