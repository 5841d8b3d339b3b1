package bench

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// fakeReport is a report of a vanilla mode that over-counted 5 % and a
// handoff mode whose ops returned in about a millisecond while their
// increments were counted by the servers seconds later.
func fakeReport() *Report {
	lat := hdrhistogram.New(1, 120_000_000, 3)
	acct := hdrhistogram.New(1, 600_000_000, 3)
	for i := range int64(1000) {
		_ = lat.RecordValue(500 + i)             // 0.5–1.5 ms
		_ = acct.RecordValue(2_000_000 + i*1000) // 2–3 s
	}
	return &Report{Name: "t", Modes: []ModeResult{
		{Mode: ModeVanilla, Ops: 1000, Expected: 100_000, Final: 105_000, Overcount: 5000, ErrorPct: 5, P50MS: 2, P99MS: 9, MaxMS: 12, latency: lat},
		{Mode: ModeHandoff, Ops: 1000, Expected: 100_000, Final: 100_000, P50MS: 1, P99MS: 1.5, MaxMS: 1.5, latency: lat,
			Handoff: &HandoffResult{AccountP50MS: 2500, AccountP99MS: 2990, AccountMaxMS: 3000, SettledMS: 4200, FlushMS: 3100, acct: acct}},
	}}
}

// TestReportShowsAccountingAndZeroBars: the bar chart's value axis starts
// at 0; the handoff mode's accounting delay is in the table (columns and a
// note), the CSV and the latency plot (a line of its own).
func TestReportShowsAccountingAndZeroBars(t *testing.T) {
	r := fakeReport()
	p, _, err := expectedPlot("t", r)
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 0 || p.Y.Max != 125_000 {
		t.Errorf("expected-vs-final value axis [%g, %g], want from 0 to 125000", p.Y.Min, p.Y.Max)
	}

	for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if strings.Contains(tk.Label, ".") {
			t.Errorf("expected-vs-final tick label %q", tk.Label)
		}
	}

	_, labels, err := latencyPlot("t", r)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(labels, "handoff: increment counted by the servers") || !slices.Contains(labels, "handoff: exchange acknowledged") {
		t.Errorf("latency plot legend %q lacks the handoff accounting delay", labels)
	}

	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"counted p50 ms", "counted p99 ms", "counted max ms", "4.2 s after the load ended", "retirement 3.1 s"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	row := ""
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == ModeHandoff && len(f) == 13 {
			row = strings.Join(f[10:], " ")
		}
	}
	if row != "2500.00 2990.00 3000.00" {
		t.Errorf("handoff row's counted columns %q, want 2500.00 2990.00 3000.00:\n%s", row, out)
	}

	b.Reset()
	if err := WriteCSV(&b, r); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, c := range []string{"counted_p50_ms", "counted_p99_ms", "counted_max_ms", "settled_ms"} {
		if _, ok := col[c]; !ok {
			t.Fatalf("CSV header %v lacks %s", recs[0], c)
		}
	}
	if h := recs[2]; h[col["counted_p50_ms"]] != "2500" || h[col["settled_ms"]] != "4200" {
		t.Errorf("handoff CSV row %v", h)
	}
	if v := recs[1]; v[col["counted_p50_ms"]] != "2" || v[col["settled_ms"]] != "" {
		t.Errorf("vanilla CSV row %v", v)
	}
}

// TestReportExplainsFBFUnderCount: an FBF under-count is printed with the
// false positives that explain it and what is left unexplained.
func TestReportExplainsFBFUnderCount(t *testing.T) {
	lat := hdrhistogram.New(1, 120_000_000, 3)
	_ = lat.RecordValue(1000)
	r := &Report{Name: "t", Config: ReportConfig{DeltaMax: 1}, Modes: []ModeResult{
		{Mode: ModeFBF, Ops: 1000, Expected: 1000, Final: 997, Undercount: 3, Dismissed: 40, FalsePositives: 2, DismissedKnown: true, latency: lat},
	}}
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	if want := "fbf: under 3; 2 fresh updates were dismissed as retries (the filter's false positives), so at most 1 increments are unexplained"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
	r.Modes[0].DismissedKnown = false
	b.Reset()
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "unexplained") {
		t.Errorf("dismissals unknown, yet the table explains the under-count:\n%s", b.String())
	}
}
