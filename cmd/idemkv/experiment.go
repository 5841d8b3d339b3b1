package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkv/idemkv/bench/fbfexp"
)

func init() {
	register("experiment", "reproduce the papers' experiments (fpp, fbf fig8..fig13)", runExperiment)
}

// experiments is the sub-dispatch table of "idemkv experiment"; later
// experiments (e.g. "cluster") add a line here.
var experiments = []struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}{
	{"fpp", "measure an N-FBF's false-positive probability, empirical vs Eq. 3", runExperimentFPP},
	{"fbf", "reproduce the paper's filter figures: fig8..fig13 or all", runExperimentFBF},
}

func experimentUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: idemkv experiment <experiment> [args] [flags]")
	fmt.Fprintln(w, "\nexperiments:")
	for _, e := range experiments {
		fmt.Fprintf(w, "  %-8s %s\n", e.name, e.summary)
	}
	fmt.Fprintln(w, "\nrun 'idemkv experiment <experiment> -h' for its flags")
}

func runExperiment(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		experimentUsage(stderr)
		return errors.New("no experiment given")
	}
	if a := args[0]; a == "-h" || a == "--help" || a == "help" {
		experimentUsage(stderr)
		return flag.ErrHelp
	}
	for _, e := range experiments {
		if e.name == args[0] {
			return e.run(args[1:], stdout, stderr)
		}
	}
	experimentUsage(stderr)
	return fmt.Errorf("unknown experiment %q", args[0])
}

func runExperimentFPP(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("experiment fpp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bits := fs.Uint("bits", 6250, "bits per filter (m)")
	hashes := fs.Uint("hashes", 5, "hash functions (k)")
	past := fs.Int("past", 1, "past filters (N); the FBF has N+2 filters")
	elements := fs.Int("elements", 300, "ids to insert (L)")
	probes := fs.Int("probes", 200000, "never-inserted ids to probe (P)")
	seed := fs.Uint64("seed", 1, "seed of the ids")
	format := fs.String("format", "table", "output format: table, csv or json")
	schedule := fs.String("schedule", "even", "insertion schedule: even or paper")
	period := fs.Duration("period", 5*time.Second, "refresh period t (virtual time)")
	batch := fs.Int("batch", 75, "paper schedule: ids per batch")
	gap := fs.Duration("gap", 2*time.Second, "paper schedule: wait before each batch")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: idemkv experiment fpp [flags]

Inserts L ids into a fresh N-FBF in virtual time, probes P never-inserted ids
and prints one row: bits, hashes, past, elements, probes, the empirical FPP
of the optimized check (Algorithm 2, corrected), of the simple check (any
filter) and the analytic FPP (Eq. 3, from the ids counted in each filter).

Schedules:
  even   the ids go in N+2 equal batches, one per period t, with a refresh
         between batches: every id is still remembered, the future filter
         holds L/(N+2) ids and every other filter 2L/(N+2) (a constant rate).
  paper  the paper's prototype pacing (Figs. 8/9): wait --gap, insert --batch
         ids, repeat, while the filter refreshes every --period from time 0
         (a refresh due at the same instant as a batch happens first).

flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	r, err := fbfexp.RunFPP(fbfexp.FPPParams{
		Bits: *bits, Hashes: *hashes, Past: *past, Period: *period,
		Elements: *elements, Probes: *probes, Seed: *seed,
		Schedule: fbfexp.Schedule{Kind: *schedule, Batch: *batch, Gap: *gap},
	})
	if err != nil {
		return err
	}
	header := []string{"bits", "hashes", "past", "elements", "probes", "fpp_optimized", "fpp_simple", "fpp_analytic"}
	vals := []string{fmt.Sprint(*bits), fmt.Sprint(*hashes), fmt.Sprint(*past), fmt.Sprint(*elements), fmt.Sprint(*probes),
		fmt.Sprintf("%.6g", r.Optimized), fmt.Sprintf("%.6g", r.Simple), fmt.Sprintf("%.6g", r.Analytic)}
	switch *format {
	case "csv":
		fmt.Fprintln(stdout, strings.Join(header, ","))
		fmt.Fprintln(stdout, strings.Join(vals, ","))
	case "json":
		return json.NewEncoder(stdout).Encode(map[string]any{
			"bits": *bits, "hashes": *hashes, "past": *past, "elements": *elements, "probes": *probes,
			"fpp_optimized": r.Optimized, "fpp_simple": r.Simple, "fpp_analytic": r.Analytic,
		})
	case "table":
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		fmt.Fprintln(tw, strings.Join(vals, "\t"))
		return tw.Flush()
	default:
		return fmt.Errorf("unknown format %q (table, csv, json)", *format)
	}
	return nil
}

func runExperimentFBF(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("experiment fbf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "fbfexp-out", "directory for the CSV and PNG files")
	seed := fs.Uint64("seed", 1, "base seed")
	quiet := fs.Bool("quiet", false, "no progress bar")
	var s fbfexp.Settings
	fs.UintVar(&s.Bits, "bits", 0, "override m (bits per filter); 0 keeps the paper's")
	fs.UintVar(&s.Hashes, "hashes", 0, "override k; 0 keeps the paper's")
	fs.IntVar(&s.Probes, "probes", 0, "override probes per trial (paper: 200000)")
	fs.IntVar(&s.Trials, "trials", 0, "independent filters averaged per point (default 10)")
	fs.IntVar(&s.Elements, "elements", 0, "override the number of ids (fig10..12); fig8/9: added to each point")
	fs.DurationVar(&s.Period, "period", 0, "override the refresh period t")
	fs.Float64Var(&s.Target, "target", 0, "fig13: target FPP (default 1e-3)")
	fs.DurationVar(&s.Horizon, "horizon", 0, "fig13: retry horizon H (default 20s)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: idemkv experiment fbf <%s|all> [flags]\n\n", strings.Join(fbfexp.Names(), "|"))
		fmt.Fprintln(stderr, "Runs the paper's filter experiments in virtual time with the paper's settings")
		fmt.Fprintln(stderr, "(EXPERIMENTS.md), writes NAME.csv and NAME.png into --out and prints our numbers")
		fmt.Fprintln(stderr, "beside the paper's with their ratio.")
		fmt.Fprintln(stderr)
		for _, f := range fbfexp.Figures {
			fmt.Fprintf(stderr, "  %-6s %s\n", f.Name, f.Title)
		}
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if err := fs.Parse(args); err != nil {
			return err
		}
		fs.Usage()
		return errors.New("no figure given")
	}
	name := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := fbfexp.Options{Out: *out, Seed: *seed}
	if !*quiet && fbfexp.IsTerminal(stderr) {
		o.Progress = stderr
	}
	var figs []fbfexp.Figure
	if name == "all" {
		figs = fbfexp.Figures
	} else {
		f, ok := fbfexp.FigureByName(name)
		if !ok {
			return fmt.Errorf("unknown figure %q (%s, all)", name, strings.Join(fbfexp.Names(), ", "))
		}
		figs = []fbfexp.Figure{f}
	}
	for _, f := range figs {
		start := time.Now()
		r, err := f.Run(o, s)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		r.WriteTable(stdout)
		fmt.Fprintf(stderr, "%s done in %v\n", f.Name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
