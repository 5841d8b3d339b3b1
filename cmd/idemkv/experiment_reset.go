package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/idemkv/idemkv/bench/resetexp"
	"github.com/idemkv/idemkv/coltype/resetcol"
)

func init() {
	experiments = append(experiments, struct {
		name, summary string
		run           func(args []string, stdout, stderr io.Writer) error
	}{"reset", "the observed-reset counter (reset_counter): concurrent reset, obliviousness, messages, sampling, partition, state against clients", runExperimentReset})
}

func runExperimentReset(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("experiment reset", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.Int("keys", 10000, "counters in the obliviousness table")
	ops := fs.Int("ops", 1000, "ops of each kind in the messages measure")
	seed := fs.Uint64("seed", 1, "seed of the replicas' ids and of the workload")
	samples := fs.Int("sample-incs", 10000, "increments in the sample-and-reset run (a sample every 100)")
	clients := fs.String("clients", "1,10,100,1000", "numbers of distinct clients in the state-against-clients measure")
	mapKeys := fs.Int("map-keys", 4, "keys of the map cell in the state-against-clients measure")
	only := fs.String("only", "", "run one part: concurrent, oblivious, messages, sample, partition or clients (default all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "idemkv-reset-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var ns []int
	for _, f := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("--clients %q: want positive numbers, comma-separated", *clients)
		}
		ns = append(ns, n)
	}
	if *mapKeys < 2 {
		return fmt.Errorf("--map-keys %d: want at least 2", *mapKeys)
	}
	fmt.Fprintf(stdout, "reproduce: idemkv experiment reset --keys %d --ops %d --sample-incs %d --clients %s --map-keys %d --seed %d\n", *keys, *ops, *samples, *clients, *mapKeys, *seed)
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
	if *only == "" || *only == "sample" {
		res, err := resetexp.Sample(dir, *samples, 100, *seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\n(d) sample-and-reset: %d increments (weights 1-5) led by random replicas, their mutations lost (p 0.1), duplicated (p 0.1) and reordered; every 100, a sampler reads at a random replica with its context and DELETEs it at ALL, led by a random replica\n", *samples)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "issued\tsamples\tsampled\tfinal\tsampled + final\tlost\tduplicated")
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\n", res.Issued, res.Samples, res.Sampled, res.Final, res.Sampled+res.Final, res.Lost, res.Dup)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if *only == "" || *only == "partition" {
		rows, err := resetexp.Partition(dir, 3050, *seed)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "\n(e) outboxes during a partition: replica 3 cut off while replicas 1 and 2 lead 3050 ops (a DELETE every 100th, the rest +1), anti-entropy every 10 ops; then healed")
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "phase\tops in outboxes\treplicas read")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%v\n", r.Phase, r.Pending, r.Reads)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if *only == "" || *only == "clients" {
		fmt.Fprintf(stdout, "\n(f) state against clients: n distinct clients each increment one cell once with an op id, led by random replicas, delivered and healed; bytes of the stored cell per replica (mean of 3) and op ids the replica keeps in memory beside it, within the op window (%s) and after it (one more increment delivered, which expires the old ones)\n", resetcol.DefaultOpWindow)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "cell	clients	bytes within window	op ids kept	bytes after window	op ids kept	counter entries")
		for _, k := range []int{1, *mapKeys} {
			rows, err := resetexp.ClientState(dir, k, ns, *seed)
			if err != nil {
				return err
			}
			for _, r := range rows {
				cell := r.Type
				if r.Keys > 1 {
					cell = fmt.Sprintf("%s, %d keys", r.Type, r.Keys)
				}
				fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n", cell, r.Clients, r.Within, r.RecentWithin, r.After, r.RecentAfter, r.Entries)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
