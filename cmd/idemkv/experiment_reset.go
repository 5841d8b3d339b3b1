package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/idemkv/idemkv/bench/resetexp"
)

func init() {
	experiments = append(experiments, struct {
		name, summary string
		run           func(args []string, stdout, stderr io.Writer) error
	}{"reset", "the observed-reset counter (reset_counter): concurrent reset, obliviousness, messages", runExperimentReset})
}

func runExperimentReset(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("experiment reset", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.Int("keys", 10000, "counters in the obliviousness table")
	ops := fs.Int("ops", 1000, "ops of each kind in the messages measure")
	seed := fs.Uint64("seed", 1, "seed of the replicas' ids and of the workload")
	only := fs.String("only", "", "run one part: concurrent, oblivious or messages (default all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "idemkv-reset-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(stdout, "reproduce: idemkv experiment reset --keys %d --ops %d --seed %d\n", *keys, *ops, *seed)
	fmt.Fprintln(stdout, "3 replicas (package replica: commit log, memtables, the column types) in one process; the coordinator's messages done by the harness (bench/resetexp)")
	if *only == "" || *only == "concurrent" {
		rows, err := resetexp.Concurrent(dir, *seed)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "\n(a) 5 increments led by A; then +1 led by A concurrent with DELETE led by B; healed; then +1 more")
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "design\treplicas read\tthen +1\texpected\twhy")
		for _, r := range rows {
			reads, after := "(rule, not run)", "—"
			if r.Reads != nil {
				reads, after = fmt.Sprint(r.Reads), fmt.Sprint(r.After)
			}
			want := fmt.Sprint(r.Want)
			if r.Reads != nil && r.Design != "reset_counter" {
				want = "—"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Design, reads, after, want, r.Note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if *only == "" || *only == "oblivious" {
		sizes, err := resetexp.Oblivious(dir, *keys, *seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\n(b) obliviousness: %d reset counters, each incremented once by each replica, then every one reset (DELETE) and healed; summed over the 3 replicas\n", *keys)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "phase\tcells\tbytes\tbytes/cell/replica\tcounter entries\tops pending")
		for _, s := range sizes {
			per := 0.0
			if s.Cells > 0 {
				per = float64(s.Bytes) / float64(s.Cells)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%d\t%d\n", s.Phase, s.Cells, s.Bytes, per, s.Entries, s.Pending)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if *only == "" || *only == "messages" {
		rows, err := resetexp.Messages(dir, *ops, *seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\n(c) messages and bytes per op, RF 3, ops led by random replicas: %d increments on %d counters; %d resets, one per counter, each counter first incremented by every replica\n", *ops, max(1, *ops/10), *ops)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "op\tanti-entropy\tmutations/op\tmutation bytes/op\tsync msgs/op\tsync bytes/op")
		for _, r := range rows {
			m, mb, s, sb := r.PerOp()
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.1f\t%.2f\t%.1f\n", r.Op, r.Regime, m, mb, s, sb)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
