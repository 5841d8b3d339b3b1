package fbfexp

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

func TestRunFPPDeterministicAndOrdered(t *testing.T) {
	p := FPPParams{Bits: 6250, Hashes: 5, Past: 1, Period: 5 * time.Second, Elements: 600, Probes: 50_000, Seed: 3,
		Schedule: Schedule{Kind: "even"}}
	a, err := RunFPP(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RunFPP(p)
	if a != b {
		t.Fatalf("same seed, different results:\n%+v\n%+v", a, b)
	}
	if !(a.Optimized < a.Simple) || a.Analytic <= 0 {
		t.Fatalf("optimized %g simple %g analytic %g", a.Optimized, a.Simple, a.Analytic)
	}
	p.Schedule.Kind = "bogus"
	if _, err := RunFPP(p); err == nil {
		t.Fatal("unknown schedule accepted")
	}
}

// TestFiguresSmall runs every figure with few probes (seconds in all) and
// checks that each writes its files and a table.
func TestFiguresSmall(t *testing.T) {
	dir := t.TempDir()
	rs, err := All(Options{Out: dir, Seed: 1}, Settings{Probes: 2000, Trials: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		var b bytes.Buffer
		r.WriteTable(&b)
		if len(r.Rows) == 0 || !strings.Contains(b.String(), "ours/paper") {
			t.Errorf("%s: empty table", r.Name)
		}
		for _, f := range r.Files {
			if st, err := os.Stat(f); err != nil || st.Size() == 0 || filepath.Dir(f) != dir {
				t.Errorf("%s: file %s: %v", r.Name, f, err)
			}
		}
	}
	// fig13: the idemkv variant keeps the estimate under target and the window ≥ H
	for _, row := range rs[len(rs)-1].Rows {
		if strings.HasPrefix(row.Metric, "idemkv: max") && row.Ours >= 1 {
			t.Errorf("fig13: %s = %g ≥ 1", row.Metric, row.Ours)
		}
		if strings.HasPrefix(row.Metric, "idemkv: ids forgotten") && row.Ours != 0 {
			t.Errorf("fig13: %s = %g", row.Metric, row.Ours)
		}
	}
}

// TestPlotsReadable checks what the plots and CSVs show, from the plot
// objects and files the figures wrote: fig8.csv has the paper's columns that
// fig8.png plots; the log axes of fig11/fig12 are labelled 10, 100, 1000;
// and in every plot no line series hides another (each has its own marker,
// one that shares points with a later one is drawn wider underneath, and a
// series equal to an earlier one says so).
func TestPlotsReadable(t *testing.T) {
	dir := t.TempDir()
	rs, err := All(Options{Out: dir, Seed: 1}, Settings{Probes: 500, Trials: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "fig8.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, c := range []string{"paper_fpp_optimized", "paper_fpp_simple"} {
		if _, ok := col[c]; !ok {
			t.Fatalf("fig8.csv header %v lacks %s", recs[0], c)
		}
	}
	for i, rec := range recs[1:] {
		got, _ := strconv.ParseFloat(rec[col["paper_fpp_optimized"]], 64)
		gotS, _ := strconv.ParseFloat(rec[col["paper_fpp_simple"]], 64)
		if got != paperSmart[i] || gotS != paperUnion[i] {
			t.Errorf("fig8.csv row %d: paper %g, %g; want %g, %g", i, got, gotS, paperSmart[i], paperUnion[i])
		}
	}

	for _, r := range rs {
		for name, d := range r.plots {
			for _, ax := range []struct {
				name  string
				ticks func() []string
			}{
				{"x", func() []string { return labels(d.p.X.Tick.Marker.Ticks(d.p.X.Min, d.p.X.Max)) }},
				{"y", func() []string { return labels(d.p.Y.Tick.Marker.Ticks(d.p.Y.Min, d.p.Y.Max)) }},
			} {
				for _, l := range ax.ticks() {
					if strings.Contains(l, "e+") {
						t.Errorf("%s: %s tick label %q", name, ax.name, l)
					}
				}
			}
			var lines []entry
			for _, e := range d.entries {
				if e.line != nil {
					lines = append(lines, e)
				}
			}
			for i, b := range lines {
				for _, a := range lines[:i] {
					if a.pts.Shape == b.pts.Shape {
						t.Errorf("%s: %q and %q have the same marker", name, a.label, b.label)
					}
					if shares(a.xys, b.xys) && (a.line.Width <= b.line.Width || a.pts.Radius <= b.pts.Radius) {
						t.Errorf("%s: %q hides %q where they meet (widths %v, %v)", name, b.label, a.label, b.line.Width, a.line.Width)
					}
					if slices.Equal(a.xys, b.xys) && !strings.Contains(b.label, "(= "+a.label) {
						t.Errorf("%s: %q equals %q and does not say so", name, b.label, a.label)
					}
				}
			}
		}
	}
	for _, name := range []string{"fig11", "fig12"} {
		fig, _ := FigureByName(name)
		r, err := fig.Run(Options{Out: dir, Seed: 1}, Settings{Probes: 200, Trials: 1})
		if err != nil {
			t.Fatal(err)
		}
		d := r.plots[name+".png"]
		got := labels(d.p.X.Tick.Marker.Ticks(d.p.X.Min, d.p.X.Max))
		if !slices.Equal(got, []string{"10", "100", "1000"}) {
			t.Errorf("%s: x tick labels %q, want 10, 100, 1000", name, got)
		}
	}
}

// shares reports whether a and b have a point in common.
func shares(a, b plotter.XYs) bool {
	for _, p := range a {
		if slices.Contains(b, p) {
			return true
		}
	}
	return false
}

func labels(ts []plot.Tick) []string {
	var out []string
	for _, t := range ts {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}
