package fbfexp

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
