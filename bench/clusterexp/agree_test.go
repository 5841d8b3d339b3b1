package clusterexp

import (
	"math"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/bench"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestWilson checks the interval against values computed by hand (Wilson
// 1927; e.g. 5 of 10 at 95 %: [0.2366, 0.7634]).
func TestWilson(t *testing.T) {
	for _, c := range []struct {
		k, n   int64
		lo, hi float64
	}{
		{5, 10, 0.2366, 0.7634},
		{0, 10, 0, 0.2775},
		{10, 10, 0.7225, 1},
		{541, 10000, 0.0498, 0.0587},
	} {
		lo, hi := Wilson(c.k, c.n, z95)
		if !near(lo, c.lo, 1e-4) || !near(hi, c.hi, 1e-4) {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	if lo, hi := Wilson(3, 0, z95); lo != 0 || hi != 1 {
		t.Errorf("Wilson(3, 0) = [%g, %g], want [0, 1]", lo, hi)
	}
}

// TestCompare: equal rates agree, rates several standard errors apart do
// not, and the z statistic is the pooled two-proportion one.
func TestCompare(t *testing.T) {
	same := Compare(NewRate("a", 523, 10000), NewRate("b", 1050, 20000))
	if !same.Agree || math.Abs(same.Z) > 0.5 {
		t.Errorf("5.23 %% vs 5.25 %%: %+v, want agreement", same)
	}
	// 5 % vs 6 % over 10,000 each: pooled p 0.055, se 0.003224, z −3.10.
	diff := Compare(NewRate("a", 500, 10000), NewRate("b", 600, 10000))
	if diff.Agree || !near(diff.Z, -3.10, 0.01) {
		t.Errorf("5 %% vs 6 %%: z = %.3f agree %v, want z ≈ −3.10 and no agreement", diff.Z, diff.Agree)
	}
	if !strings.Contains(diff.String(), "differ") || !strings.Contains(same.String(), "agree within") {
		t.Errorf("verdicts: %q, %q", diff, same)
	}
	if empty := Compare(NewRate("a", 0, 0), NewRate("b", 5, 100)); empty.Z != 0 {
		t.Errorf("empty sample: z = %g, want 0", empty.Z)
	}
}

func TestPredictedOvercount(t *testing.T) {
	if got := PredictedOvercount(0.05, 4); !near(got, 0.052625, 1e-12) {
		t.Errorf("PredictedOvercount(0.05, 4) = %g, want 0.052625", got)
	}
	if got := PredictedOvercount(0.05, 1); got != 0 {
		t.Errorf("one attempt: %g, want 0", got)
	}
}

// TestPeerAgreement finds the two vanilla rows of a report by name and
// measures over-counts against expected totals.
func TestPeerAgreement(t *testing.T) {
	r := &bench.Report{Modes: []bench.ModeResult{
		{Mode: bench.ModeVanilla, Expected: 10000, Overcount: 520},
		{Mode: bench.ModeFBF, Expected: 10000},
		{Mode: "cassandra vanilla", Expected: 5000, Overcount: 400},
	}}
	ag, ok := PeerAgreement(r)
	if !ok || ag.A.N != 10000 || ag.A.Over != 520 || ag.B.N != 5000 || ag.B.Over != 400 || ag.Agree {
		t.Fatalf("PeerAgreement = %+v, %v; want 5.2 %% vs 8 %%, not agreeing", ag, ok)
	}
	r.Modes = r.Modes[:2]
	if _, ok := PeerAgreement(r); ok {
		t.Fatal("PeerAgreement found a cassandra row in a report without one")
	}
	s := PaperComparison("fig14", []*bench.Report{{Name: "fig14-retries", Modes: []bench.ModeResult{
		{Mode: bench.ModeVanilla, Expected: 10000, Overcount: 520},
		{Mode: "cassandra vanilla", Expected: 10000, Overcount: 530},
	}, Config: bench.ReportConfig{LostAck: 0.05, Attempts: 4}}})
	if !strings.Contains(s, "z = -0.32: agree") || !strings.Contains(s, "predict 5.26 %") {
		t.Errorf("fig14 comparison:\n%s", s)
	}
}

// TestFig6PlotCassandra: a cassandra series is drawn as a fourth bar group.
func TestFig6PlotCassandra(t *testing.T) {
	var rows []Fig6Row
	for _, m := range []string{"vanilla", "fbf", "legacy", Fig6CassandraMode} {
		for i, v := range []int64{1, 3, 9} {
			rows = append(rows, Fig6Row{Step: string(rune('1'+i)) + " step", Mode: m, A: v, B: v, PaperValue: -1})
		}
	}
	if _, err := fig6Plot(rows); err != nil {
		t.Fatal(err)
	}
	if m := fig6Modes(rows); len(m) != 4 || m[3] != Fig6CassandraMode {
		t.Fatalf("bar groups %v, want idemkv's three and %q", m, Fig6CassandraMode)
	}
	if m := fig6Modes(rows[:9]); len(m) != 3 {
		t.Fatalf("bar groups without cassandra rows: %v", m)
	}
}
