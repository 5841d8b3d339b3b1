package clusterexp

import "testing"

// TestFig6 checks the scenario's outcome against the paper: vanilla reads
// 9 after the retried step 4, FBF reads 6, and the legacy counter's replay
// over-counts what its replica A holds.
func TestFig6(t *testing.T) {
	rows, err := Fig6(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	final := map[string]Fig6Row{}
	for _, r := range rows {
		final[r.Mode] = r
		if r.PaperValue >= 0 && (r.A != r.PaperValue || r.B != r.PaperValue) {
			t.Errorf("%s step %q: A=%d B=%d, paper %d", r.Mode, r.Step, r.A, r.B, r.PaperValue)
		}
	}
	if final["vanilla"].A != 9 || final["fbf"].A != 6 {
		t.Fatalf("final values vanilla %d, fbf %d; want 9 and 6", final["vanilla"].A, final["fbf"].A)
	}
	var beforeRestart int64
	for _, r := range rows {
		if r.Mode == "legacy" && r.Step[0] == '4' {
			beforeRestart = r.A
		}
	}
	if final["legacy"].A <= beforeRestart {
		t.Fatalf("legacy counter: %d before the restart, %d after replay; want an over-count", beforeRestart, final["legacy"].A)
	}
}

// TestFig6PlotFromZero: the bar chart's value axis starts at 0.
func TestFig6PlotFromZero(t *testing.T) {
	var rows []Fig6Row
	for _, m := range []string{"vanilla", "fbf", "legacy"} {
		for i, v := range []int64{5, 6, 9} {
			rows = append(rows, Fig6Row{Step: string(rune('1'+i)) + " step", Mode: m, A: v, B: v, PaperValue: -1})
		}
	}
	p, err := fig6Plot(rows)
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 0 {
		t.Fatalf("fig6 value axis starts at %g, want 0", p.Y.Min)
	}
}
