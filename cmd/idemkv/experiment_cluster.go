package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/idemkv/idemkv/bench/clusterexp"
)

func init() {
	experiments = append(experiments, struct {
		name, summary string
		run           func(args []string, stdout, stderr io.Writer) error
	}{"cluster", "reproduce the paper's cluster figures: fig6 (the four-step scenario)", runExperimentCluster})
}

func runExperimentCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: idemkv experiment cluster fig6 [--out DIR]")
		return flag.ErrHelp
	}
	which := args[0]
	fs := flag.NewFlagSet("experiment cluster "+which, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "results", "directory for the CSV and PNG")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
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
	}
	return fmt.Errorf("unknown cluster experiment %q (have: fig6)", which)
}
