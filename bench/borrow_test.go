package bench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestBorrowModeExact: the borrow mode under seeded lost acks, late
// answers and a node killed and restarted mid-run: every increment is
// counted exactly once after the clients flush, while vanilla over-counts
// the same stream; once the clients retire and the killed node is back, no
// client dot is left on the replicas.
func TestBorrowModeExact(t *testing.T) {
	seed := testseed.Seed(t)
	c := startTestCluster(t, 3, seed)
	rep, err := Run(context.Background(), Target{Cluster: c}, Config{
		Name: "borrow", Ops: 600, Clients: 8, Seed: seed, Modes: []string{ModeVanilla, ModeBorrow},
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
	b, ok := rep.Mode(ModeBorrow)
	v, _ := rep.Mode(ModeVanilla)
	if !ok || b.Borrow == nil {
		t.Fatalf("no borrow result in %+v", rep.Modes)
	}
	if rep.Faults[FaultLostAck] == 0 {
		t.Fatalf("no lost ack injected: %v", rep.Faults)
	}
	if b.Overcount != 0 || b.Undercount != 0 || b.Final != b.Expected {
		t.Errorf("borrow: final %d, expected %d, over %d, under %d; want exact", b.Final, b.Expected, b.Overcount, b.Undercount)
	}
	if b.Retries == 0 || v.Overcount == 0 {
		t.Errorf("borrow retries %d, vanilla over-count %d: the faults did not bite", b.Retries, v.Overcount)
	}
	r := b.Borrow
	if r.Updates != 600 || r.ExchangesPerUpdate < 1 || r.BytesPerUpdate <= 0 || r.Cells == 0 || !r.Converged {
		t.Errorf("borrow costs %+v", *r)
	}
	if r.BorrowedAfter != 0 {
		t.Errorf("after the clients retired: %d client dots left", r.BorrowedAfter)
	}
	// A cell holds a dot per replica and per client active in it: the
	// largest one written held clients' dots, the retired cells only the
	// replicas'.
	if r.CellBytesAfter <= 0 || float64(r.MaxCellBytes) <= r.CellBytesAfter {
		t.Errorf("cell bytes: largest written %d, after the retirements %.1f on average; want the first larger", r.MaxCellBytes, r.CellBytesAfter)
	}
}
