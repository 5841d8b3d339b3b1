package bench

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestProxiedRunVanillaOvercountsFBFExact: the load generator through
// proxies in front of an embedded ring (its own injector unarmed): the
// proxies' lost acks make vanilla over-count and FBF stay exact, with the
// accounting of a run on --hosts.
func TestProxiedRunVanillaOvercountsFBFExact(t *testing.T) {
	seed := testseed.Seed(t)
	c := startTestCluster(t, 3, seed)
	var listen []string
	for i := range c.Hosts() {
		listen = append(listen, fmt.Sprintf("127.0.2.%d:%d", i+1, c.CQLPort()))
	}
	p, err := StartProxies(c.Hosts(), listen, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	const ops, deltaMax = 300, 3
	rep, err := Run(context.Background(), Target{Hosts: c.Hosts(), Proxies: p}, Config{
		Name: "overcount", Ops: ops, Clients: 4, Seed: seed,
		Workload: Workload{Keys: 40, Batch: 1, DeltaMax: deltaMax},
		Timeout:  time.Second,
		Faults:   Faults{LostAck: 0.1},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = WriteTable(&buf, rep)
	t.Log("\n" + buf.String())
	if rep.Config.FaultSide != "proxy" || len(rep.Config.Proxies) != 3 {
		t.Errorf("config %+v", rep.Config)
	}
	if rep.Faults[FaultProxyLostAck] == 0 || rep.Faults[FaultClientLostAck] != 0 || rep.Faults[FaultLostAck] != 0 {
		t.Fatalf("faults %v: want proxy lost acks only", rep.Faults)
	}
	v, _ := rep.Mode(ModeVanilla)
	f, _ := rep.Mode(ModeFBF)
	for _, m := range []ModeResult{v, f} {
		if m.Attempted != ops || m.Retries == 0 {
			t.Errorf("%s: %d ops attempted, %d retries", m.Mode, m.Attempted, m.Retries)
		}
	}
	if v.Overcount == 0 || v.Undercount != 0 || v.Overcount > v.Duplicates*deltaMax {
		t.Errorf("vanilla: over %d, under %d, %d duplicated updates", v.Overcount, v.Undercount, v.Duplicates)
	}
	if f.Overcount != 0 || f.Duplicates == 0 {
		t.Errorf("fbf: over %d, %d duplicated updates", f.Overcount, f.Duplicates)
	}
}

// TestProxyCommandContract: `idemkv bench overcount --proxy` on the embedded
// ring, with counter batches, lost acks and late answers in the proxies.
func TestProxyCommandContract(t *testing.T) {
	seed := strconv.FormatUint(testseed.Seed(t), 10)
	v := runCommand(t, "overcount", "--nodes", "3", "--proxy", "--ops", "200", "--batch", "3", "--lost-ack", "0.1", "--delay", "0.02",
		"--seed", seed, "--format", "json")
	modes := contractModes(t, v, "mode", "expected", "final", "overcount", "undercount", "error_pct", "retries", "dismissed")
	if o := modes[ModeFBF]["overcount"].(float64); o != 0 {
		t.Errorf("fbf over-count %v", o)
	}
	// The embedded ring behind the proxies still counts what its FBF
	// leaders dismissed: the retries of the proxies' lost acks.
	if d, ok := modes[ModeFBF]["dismissed"].(float64); !ok || d == 0 {
		t.Errorf("fbf dismissed %v", modes[ModeFBF]["dismissed"])
	}
	cfg, faults := v["config"].(map[string]any), v["faults"].(map[string]any)
	if cfg["fault_side"] != "proxy" || cfg["ring"] != "embedded" || len(cfg["proxies"].([]any)) != 3 {
		t.Errorf("config %v", cfg)
	}
	if faults[FaultProxyLostAck] == nil || faults[FaultClientLostAck] != nil || faults[FaultLostAck] != nil {
		t.Errorf("faults %v: want the proxies' only", faults)
	}
}

// TestProxyFlagErrors: the proxy flags are refused where they cannot apply,
// before any ring starts.
func TestProxyFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--proxy-reset", "0.1"},
		{"--proxy-listen", "127.0.2.1:9042"},
		{"--proxy", "--kill-every", "1s"},
		{"--proxy", "--pause-every", "1s"},
		{"--proxy", "--proxy-reset", "2"},
	} {
		var out, errb bytes.Buffer
		if err := Command("overcount", append(args, "--ops", "1", "--quiet"), &out, &errb); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
