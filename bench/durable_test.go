package bench

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestDurableCommandSmoke: `idemkv bench durable` with tiny durations runs
// end to end on an embedded ring and prints one CSV line per (mode,
// clients), with acknowledged updates, a raw fsync figure and, in the
// modes that fsync before acknowledging, commit log fsyncs counted.
func TestDurableCommandSmoke(t *testing.T) {
	seed := strconv.FormatUint(testseed.Seed(t), 10)
	var out, errb bytes.Buffer
	args := []string{"--nodes", "2", "--modes", "batch,group", "--clients", "1,3", "--duration", "300ms", "--warmup", "50ms",
		"--fsyncs", "20", "--keys", "50", "--seed", seed, "--csv", "--quiet"}
	if err := Command("durable", args, &out, &errb); err != nil {
		t.Fatalf("idemkv bench durable %v: %v\n%s", args, err, errb.String())
	}
	recs, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
	if err != nil {
		t.Fatalf("output is not CSV: %v\n%s", err, out.String())
	}
	if len(recs) != 5 {
		t.Fatalf("%d CSV lines, want a header and 4 rows:\n%s", len(recs), out.String())
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range []string{"commitlog_sync", "clients", "updates", "p50_ms", "p50_over_fsync_p50", "fsyncs_per_s_per_node", "raw_fsync_p50_ms"} {
		if _, ok := col[h]; !ok {
			t.Fatalf("no column %q in %v", h, recs[0])
		}
	}
	num := func(r []string, h string) float64 {
		v, err := strconv.ParseFloat(r[col[h]], 64)
		if err != nil {
			t.Fatalf("column %s: %v", h, err)
		}
		return v
	}
	want := []string{"batch 1", "batch 3", "group 1", "group 3"}
	for i, r := range recs[1:] {
		if got := r[col["commitlog_sync"]] + " " + r[col["clients"]]; got != want[i] {
			t.Errorf("row %d is %q, want %q", i, got, want[i])
		}
		if num(r, "updates") <= 0 || num(r, "p50_ms") <= 0 || num(r, "raw_fsync_p50_ms") <= 0 || num(r, "p50_over_fsync_p50") <= 0 {
			t.Errorf("row %v: want updates, p50 and the fsync figures positive", r)
		}
		if num(r, "fsyncs_per_s_per_node") <= 0 {
			t.Errorf("row %v: no commit log fsync counted in a mode that fsyncs every acknowledged update", r)
		}
	}
}

// TestDurableCommandFlags: bad flags fail before anything starts.
func TestDurableCommandFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--modes", "sometimes"},
		{"--clients", "0"},
		{"--duration", "0s"},
		{"--gocql-coalesce", "-1ms"},
	} {
		var out, errb bytes.Buffer
		if err := Command("durable", append(args, "--quiet", "--fsyncs", "1"), &out, &errb); err == nil {
			t.Errorf("idemkv bench durable %v: no error", args)
		}
	}
}
