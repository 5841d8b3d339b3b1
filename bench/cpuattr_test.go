package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/internal/testseed"
)

func TestBreakdownChargesInnermostComponent(t *testing.T) {
	fn := map[string]*profile.Function{}
	loc := func(names ...string) []*profile.Location { // innermost first
		var out []*profile.Location
		for _, n := range names {
			if fn[n] == nil {
				fn[n] = &profile.Function{ID: uint64(len(fn) + 1), Name: n}
			}
			out = append(out, &profile.Location{Line: []profile.Line{{Function: fn[n]}}})
		}
		return out
	}
	const m = "github.com/idemkv/idemkv/"
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			// A write system call made by the transport's writer.
			{Location: loc("internal/runtime/syscall/linux.Syscall6", "syscall.write", m+"transport.(*conn).writeLoop"), Value: []int64{1, 30}},
			// An allocation of the replica's, under the coordinator.
			{Location: loc("runtime.mallocgc", m+"memtable.(*Memtable).Apply", m+"replica.(*table).write", m+"coordinator.(*Coordinator).lead"), Value: []int64{1, 20}},
			{Location: loc(m+"cql/exec.bind", m+"cql/exec.(*Executor).Execute", m+"cql.(*conn).execute"), Value: []int64{1, 7}},
			{Location: loc("github.com/gocql/gocql.(*Conn).exec", m+"bench.runRingOnce.func1"), Value: []int64{1, 5}},
			{Location: loc("runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"), Value: []int64{1, 11}},
			{Location: loc("runtime.futex", "runtime.findRunnable", "runtime.schedule"), Value: []int64{1, 3}},
			{Location: loc("runtime.memmove"), Value: []int64{1, 2}},
			// A request handed to a waiting goroutine: scheduling.
			{Location: loc("runtime.selectgo", m+"internal/workpool.(*Pool).run"), Value: []int64{1, 4}},
		},
	}
	b := breakdownOf(p)
	want := Breakdown{"transport": 30, "replica": 20, "executor": 7, "client": 5, "runtime: gc": 11, "runtime: scheduler": 7, "other": 2}
	for c, d := range want {
		if b[c] != d {
			t.Errorf("%s: %v, want %v (all: %v)", c, b[c], d, b)
		}
	}
	if len(b) != len(want) {
		t.Errorf("breakdown %v, want exactly %v", b, want)
	}

	// Printed per update: 82 ns sampled over a run of 2 updates and 164 µs
	// of CPU; the transport's 30/82 of 82 µs per update is 30 µs.
	var out bytes.Buffer
	res := []RingResult{{Table: "fbf", Via: "cql", Ops: 2, CPU: 164 * time.Microsecond, Breakdown: b}}
	if err := WriteBreakdown(&out, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("output:\n%s", out.String())
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	col := -1
	for i, h := range head {
		if h == "transport" {
			col = i
		}
	}
	// Multi-word headers ("CPU µs/op", "runtime: gc") split into more
	// fields than their values: count from the row's end.
	if col < 0 || row[len(row)-(len(Components)-4)] != "30.0" {
		t.Errorf("transport column: %v in\n%s", row, out.String())
	}
}

// TestRingBreakdownKeepsProfiles: with ProfileDir, each measured run of
// RunRing leaves its CPU profile, which parses and holds samples, and its
// breakdown charges the run's CPU to components.
func TestRingBreakdownKeepsProfiles(t *testing.T) {
	dir := t.TempDir()
	res, err := RunRing(context.Background(), RingConfig{
		Nodes: 1, RF: 1, Levels: []coordinator.ConsistencyLevel{coordinator.One}, Keys: []int{10}, Tables: []string{"vanilla", "fbf"},
		Writers: 4, Duration: 300 * time.Millisecond, Warmup: 20 * time.Millisecond, Seed: testseed.Seed(t),
		Breakdown: true, ProfileDir: dir, Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results, want 2", len(res))
	}
	for i, r := range res {
		if r.Ops == 0 || len(r.Breakdown) == 0 {
			t.Errorf("run %d (%s): %d ops, breakdown %v", i+1, r.Table, r.Ops, r.Breakdown)
		}
		path := filepath.Join(dir, fmt.Sprintf("%02d-%s-ONE-10-coordinator.prof", i+1, r.Table))
		f, err := os.Open(path)
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(p.Sample) == 0 {
			t.Errorf("%s: no samples", path)
		}
	}
}
