package bench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestHandoffModeExact: the handoff mode under seeded lost acks, late
// answers and a node killed and restarted mid-run: every increment added is
// counted exactly once after the clients flush, while vanilla over-counts
// the same stream; the mode's costs are measured, and once the clients
// retire no slot is left on the replicas.
func TestHandoffModeExact(t *testing.T) {
	seed := testseed.Seed(t)
	c := startTestCluster(t, 3, seed)
	rep, err := Run(context.Background(), Target{Cluster: c}, Config{
		Name: "handoff", Ops: 600, Clients: 8, Seed: seed, Modes: []string{ModeVanilla, ModeHandoff},
		Workload: Workload{Keys: 30, Batch: 1, DeltaMax: 5},
		Timeout:  2 * time.Second,
		Faults:   Faults{LostAck: 0.1, Delay: 0.01, DelayBy: 2100 * time.Millisecond, KillEvery: 700 * time.Millisecond, Down: 700 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = WriteTable(&buf, rep)
	t.Log("\n" + buf.String())
	h, ok := rep.Mode(ModeHandoff)
	v, _ := rep.Mode(ModeVanilla)
	if !ok || h.Handoff == nil {
		t.Fatalf("no handoff result in %+v", rep.Modes)
	}
	if rep.Faults[FaultLostAck] == 0 {
		t.Fatalf("no lost ack injected: %v", rep.Faults)
	}
	if h.Overcount != 0 || h.Undercount != 0 || h.Final != h.Expected {
		t.Errorf("handoff: final %d, expected %d, over %d, under %d; want exact", h.Final, h.Expected, h.Overcount, h.Undercount)
	}
	if h.Retries == 0 || v.Overcount == 0 {
		t.Errorf("handoff retries %d, vanilla over-count %d: the faults did not bite", h.Retries, v.Overcount)
	}
	r := h.Handoff
	if r.Updates != 600 || r.ExchangesPerUpdate < 1 || r.BytesPerUpdate <= 0 || r.SlotsPeak == 0 || !r.Converged {
		t.Errorf("handoff costs %+v", *r)
	}
	// Every client retired with a notice (§7.4): no slot is left behind,
	// not even those of exchanges whose answers were lost.
	if r.SlotsAfter != 0 || r.NoticesAfter == 0 {
		t.Errorf("after the clients retired: %d slots left, %d notices held; want none, and the notices", r.SlotsAfter, r.NoticesAfter)
	}
}
