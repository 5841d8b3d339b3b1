package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/internal/testseed"
)

// TestLedgerScriptedFaults drives the accounting with a scripted sequence of
// op outcomes and the values a ring might read, and checks every figure
// against a hand-computed answer.
func TestLedgerScriptedFaults(t *testing.T) {
	l := NewLedger()
	// Key 0 (a vanilla-like counter):
	//   +3 acked at once; +2 acked after a lost ack (applied twice);
	//   +5 unknown (every attempt timed out; applied once, say); +7 failed
	//   (unavailable: never applied).
	l.Record([]Update{{0, 3}}, Acked)
	l.Record([]Update{{0, 2}}, Acked)
	l.Record([]Update{{0, 5}}, Unknown)
	l.Record([]Update{{0, 7}}, Failed)
	// Key 1 (an FBF-like counter): a batch of +4 and +1 on keys 1 and 2,
	// acked after a retry the leader dismissed; then +6 acked but
	// dismissed as a false positive (lost).
	l.Record([]Update{{1, 4}, {2, 1}}, Acked)
	l.Record([]Update{{1, 6}}, Acked)
	// Key 3: +9 of unknown outcome, never applied.
	l.Record([]Update{{3, 9}}, Unknown)
	final := map[int]int64{
		0: 3 + 2 + 2 + 5, // the lost ack's retry counted twice, the unknown once
		1: 4,             // the +6 false positive is missing
		2: 1,
		3: 0,
		4: 8, // a key the run never wrote (another writer): all over-count
	}
	got := l.Tally(final)
	want := Tally{
		Expected:  3 + 2 + 4 + 1 + 6, // 16
		Uncertain: 5 + 9,             // 14
		Final:     12 + 4 + 1 + 0 + 8,
		// key 0: 12 > 5 + 5 by 2; key 4: 8 above nothing.
		Over: 2 + 8,
		// key 1: 10 acknowledged, 4 read.
		Under: 6,
	}
	want.ErrorPct = 100 * float64(want.Over+want.Under) / float64(want.Expected)
	if got != want {
		t.Fatalf("tally = %+v, want %+v", got, want)
	}
	if a, u, f := l.Ops(); a != 4 || u != 2 || f != 1 {
		t.Errorf("ops by outcome = %d acked, %d unknown, %d failed; want 4, 2, 1", a, u, f)
	}
	if keys := l.Keys(); len(keys) != 4 || keys[0] != 0 || keys[3] != 3 {
		t.Errorf("keys = %v, want [0 1 2 3]", keys)
	}
	// The unknown +5 read as never applied and +9 applied twice: key 0
	// is exact (7 ≥ 5), key 3 over-counts by 9 (18 > 0 + 9).
	got = l.Tally(map[int]int64{0: 7, 1: 10, 2: 1, 3: 18})
	if got.Over != 9 || got.Under != 0 || got.Final != 36 {
		t.Errorf("second tally = %+v, want over 9, under 0, final 36", got)
	}
}

// TestStreamSameOpsEveryMode: the stream is a function of the seed and the
// client only, and its keys follow the distribution asked for.
func TestStreamSameOpsEveryMode(t *testing.T) {
	seed := testseed.Seed(t)
	for _, w := range []Workload{
		{Keys: 100, Dist: DistUniform, Batch: 1, DeltaMax: 10},
		{Keys: 100, Dist: DistZipf, Batch: 5, DeltaMax: 3},
		{Keys: 100, Dist: DistHot, Batch: 2},
	} {
		a, b, other := NewStream(seed, 3, w), NewStream(seed, 3, w), NewStream(seed, 4, w)
		same := true
		counts := map[int]int{}
		for range 2000 {
			x, y, z := a.Next(), b.Next(), other.Next()
			if len(x.Updates) != w.Batch {
				t.Fatalf("%s: op of %d updates, want %d", w.Dist, len(x.Updates), w.Batch)
			}
			for i, u := range x.Updates {
				if u != y.Updates[i] {
					t.Fatalf("%s: two streams of the same seed and client differ: %+v vs %+v", w.Dist, u, y.Updates[i])
				}
				if u != z.Updates[i] {
					same = false
				}
				if u.Key < 0 || u.Key >= w.Keys || u.Delta < 1 || u.Delta > max(1, w.DeltaMax) {
					t.Fatalf("%s: update %+v out of range", w.Dist, u)
				}
				counts[u.Key]++
			}
		}
		switch w.Dist {
		case DistHot:
			if len(counts) != 1 || counts[0] == 0 {
				t.Errorf("hot: keys %v, want key 0 only", counts)
			}
		case DistZipf:
			if counts[0] <= counts[50] {
				t.Errorf("zipf: key 0 drawn %d times, key 50 %d: want key 0 far more often", counts[0], counts[50])
			}
		default:
			if same {
				t.Errorf("%s: clients 3 and 4 drew the same stream", w.Dist)
			}
		}
	}
}

// TestFaultsHitTheSameOpInEveryMode: the fault decision ignores the mode
// and the run's nonce, and depends on the attempt.
func TestFaultsHitTheSameOpInEveryMode(t *testing.T) {
	rng := testseed.Rand(t)
	seed := rng.Uint64()
	hits, differ := 0, 0
	for i := range 5000 {
		c := rng.IntN(64)
		v := client.OpID{Client: ClientID(rng.Uint64(), ModeVanilla, c), Sequence: uint64(i)}
		f := client.OpID{Client: ClientID(rng.Uint64(), ModeFBF, c), Sequence: uint64(i)}
		if modeOf(v.Client) != ModeVanilla || modeOf(f.Client) != ModeFBF {
			t.Fatalf("modes of %x and %x: %s, %s", v.Client, f.Client, modeOf(v.Client), modeOf(f.Client))
		}
		dv, df := decide(seed, saltLost, v, 1), decide(seed, saltLost, f, 1)
		if dv != df {
			t.Fatalf("op %d of client %d: decisions %v (vanilla) and %v (fbf) differ", i, c, dv, df)
		}
		if dv < 0.1 {
			hits++
		}
		if decide(seed, saltLost, v, 2) != dv {
			differ++
		}
	}
	if hits < 350 || hits > 650 {
		t.Errorf("%d of 5000 decisions under 0.1, want about 500", hits)
	}
	if differ < 4900 {
		t.Errorf("attempts 1 and 2 got the same decision %d times in 5000", 5000-differ)
	}
}

func startTestCluster(t *testing.T, nodes int, seed uint64) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, ClusterConfig{Nodes: nodes, Dir: t.TempDir(), Seed: seed})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// TestVanillaOvercountsFBFExact: under seeded lost acks and late answers,
// with every retry carrying its op id, the vanilla counter counts retried
// increments twice and the FBF counter is exact. FBF may only lose what its
// false positives (dismissed fresh updates) explain: a dismissed retry is
// correct, a dismissed fresh op is a false positive.
func TestVanillaOvercountsFBFExact(t *testing.T) {
	seed := testseed.Seed(t)
	c := startTestCluster(t, 3, seed)
	const deltaMax = 5
	rep, err := Run(context.Background(), Target{Cluster: c}, Config{
		Name: "overcount", Ops: 600, Clients: 8, Seed: seed,
		Workload: Workload{Keys: 40, Batch: 1, DeltaMax: deltaMax},
		Timeout:  2 * time.Second,
		Faults:   Faults{LostAck: 0.1, Delay: 0.01, DelayBy: 2100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = WriteTable(&buf, rep)
	t.Log("\n" + buf.String())
	v, ok1 := rep.Mode(ModeVanilla)
	f, ok2 := rep.Mode(ModeFBF)
	if !ok1 || !ok2 {
		t.Fatalf("report modes %+v", rep.Modes)
	}
	if rep.Faults[FaultLostAck] == 0 {
		t.Fatalf("no lost ack injected in 1200 ops at p=0.1: %v", rep.Faults)
	}
	for _, m := range []ModeResult{v, f} {
		if m.Attempted != 600 || m.Retries == 0 {
			t.Errorf("%s: %d ops attempted, %d retries; want 600 and some", m.Mode, m.Attempted, m.Retries)
		}
	}
	if v.Unknown == 0 && f.Unknown == 0 && v.Failed == 0 && f.Failed == 0 && v.Expected != f.Expected {
		t.Errorf("every op acknowledged in both modes, yet expected %d (vanilla) ≠ %d (fbf): not the same op stream", v.Expected, f.Expected)
	}
	if v.Overcount == 0 || v.Undercount != 0 {
		t.Errorf("vanilla: over %d, under %d; want an over-count and nothing lost", v.Overcount, v.Undercount)
	}
	if v.Overcount > v.Duplicates*deltaMax {
		t.Errorf("vanilla over-counts %d, more than its %d duplicated updates explain", v.Overcount, v.Duplicates)
	}
	if f.Overcount != 0 {
		t.Errorf("fbf over-counts by %d (dismissed %d, duplicates %d)", f.Overcount, f.Dismissed, f.Duplicates)
	}
	if f.Dismissed < f.Duplicates-f.Overcount || f.Duplicates == 0 {
		t.Errorf("fbf dismissed %d of %d duplicated updates", f.Dismissed, f.Duplicates)
	}
	if f.Undercount > f.FalsePositives*deltaMax {
		t.Errorf("fbf lost %d, more than its %d false positives explain", f.Undercount, f.FalsePositives)
	}
	if !rep.Horizon.AllWithin || rep.Horizon.MaxRetryAfterMS <= 0 {
		t.Errorf("horizon check %+v", rep.Horizon)
	}
}

// runCommand runs an idemkv bench command line and decodes its JSON.
func runCommand(t *testing.T, name string, args ...string) map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	if err := Command(name, args, &out, &errb); err != nil {
		t.Fatalf("idemkv bench %s %v: %v\n%s", name, args, err, errb.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("idemkv bench %s: output is not a JSON object: %v\n%s", name, err, out.String())
	}
	return v
}

// contractModes checks that v has a modes array whose elements carry the
// fields, and returns them by mode.
func contractModes(t *testing.T, v map[string]any, fields ...string) map[string]map[string]any {
	t.Helper()
	arr, ok := v["modes"].([]any)
	if !ok || len(arr) == 0 {
		t.Fatalf("no modes array in %v", v)
	}
	out := map[string]map[string]any{}
	for _, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			t.Fatalf("mode element %v is not an object", e)
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("mode element lacks %q: %v", f, m)
			}
		}
		name, _ := m["mode"].(string)
		out[name] = m
	}
	if out[ModeVanilla] == nil || out[ModeFBF] == nil {
		t.Fatalf("modes %v, want vanilla and fbf", arr)
	}
	return out
}

// TestOvercountCommandContract: `idemkv bench overcount --nodes N --rf R
// --ops K --lost-ack P --seed S --format json` runs end to end on an
// embedded ring and prints the contract fields.
func TestOvercountCommandContract(t *testing.T) {
	seed := strconv.FormatUint(testseed.Seed(t), 10)
	v := runCommand(t, "overcount", "--nodes", "3", "--rf", "2", "--ops", "300", "--lost-ack", "0.1", "--seed", seed, "--format", "json")
	modes := contractModes(t, v, "mode", "expected", "final", "overcount", "undercount", "error_pct", "retries", "dismissed")
	if e := modes[ModeVanilla]["expected"].(float64); e <= 0 || e > 300 {
		t.Errorf("vanilla expected %v, want 1..300 (300 ops of +1)", e)
	}
	if o := modes[ModeFBF]["overcount"].(float64); o != 0 {
		t.Errorf("fbf over-count %v", o)
	}
	if r := modes[ModeFBF]["retries"].(float64); r == 0 {
		t.Errorf("no retries at lost-ack 0.1")
	}
}

// TestLatencyCommandContract: `idemkv bench latency --nodes N --batch B
// --duration D --gocql-coalesce W --seed S --format json` runs end to end
// and prints the contract fields, the clients' write coalescing among its
// settings.
func TestLatencyCommandContract(t *testing.T) {
	seed := strconv.FormatUint(testseed.Seed(t), 10)
	v := runCommand(t, "latency", "--nodes", "2", "--batch", "5", "--duration", "1500ms", "--gocql-coalesce", "150us", "--seed", seed, "--format", "json")
	if cfg, _ := v["config"].(map[string]any); cfg["gocql_coalesce_us"] != 150.0 {
		t.Errorf("config %v: want gocql_coalesce_us 150", cfg)
	}
	modes := contractModes(t, v, "mode", "ops", "ops_per_s", "p50_ms", "p99_ms")
	for name, m := range modes {
		ops, p50, p99 := m["ops"].(float64), m["p50_ms"].(float64), m["p99_ms"].(float64)
		if ops <= 0 || m["ops_per_s"].(float64) <= 0 || p50 <= 0 || p99 < p50 {
			t.Errorf("%s: ops %v, ops/s %v, p50 %v ms, p99 %v ms", name, ops, m["ops_per_s"], p50, p99)
		}
		if m["updates"].(float64) != 5*ops {
			t.Errorf("%s: %v updates in %v batches of 5", name, m["updates"], ops)
		}
	}
}
