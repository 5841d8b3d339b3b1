package replica

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
)

// TestTakeBackLedOp: an FBF update this node led counts until it is taken
// back because another leader counts it too (conflict.go); it is taken
// back once however often asked, answers as dropped, and stays taken back
// after a restart (the compensation record). A replicated mutation that
// carries its leader's delta (the mark of package coordinator) is not this
// node's led record: it never puts the op in doubt here, nor counts as led.
func TestTakeBackLedOp(t *testing.T) {
	dir := t.TempDir()
	r := mustOpen(t, testConfig(dir))
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(fbfUpdate("k", 5, op(1, 1))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(fbfUpdate("k", 7, op(1, 2))); err != nil {
		t.Fatal(err)
	}
	id, counts := r.CountsLedOp(fbfTable.ID, []byte("k"), "c", op(1, 1))
	if !counts || id != r.CounterID() {
		t.Fatalf("an op led here: counts %v under %s, want true under %s", counts, id, r.CounterID())
	}
	x := coltype.InDoubtOp{Table: fbfTable.ID, Key: []byte("k"), Column: "c", OpID: op(1, 1), Delta: 5}
	m, ok, err := r.TakeBackLedOp(x)
	if err != nil || !ok || !m.HasOp || m.OpID != x.OpID || m.Cell.Value == nil {
		t.Fatalf("take back: %+v %v %v, want the cell with the op id", m, ok, err)
	}
	if _, ok, err := r.TakeBackLedOp(x); ok || err != nil {
		t.Fatalf("a second take-back: %v %v, want nothing done", ok, err)
	}
	if v := value(t, r, fbfTable.ID, "k", "c"); v != 7 {
		t.Fatalf("after the take-back: %d, want 7", v)
	}
	if _, counts := r.CountsLedOp(fbfTable.ID, []byte("k"), "c", op(1, 1)); counts {
		t.Fatal("an op taken back still counts")
	}
	if a, _ := r.OpStatus(fbfTable.ID, []byte("k"), "c", op(1, 1)); a.Status != coltype.OpDropped {
		t.Fatalf("status of an op taken back: %v, want dropped", a.Status)
	}
	// Another leader's replication of op 3, with its mark.
	other := counters.ID{9}
	cell := ctxCell(t, counters.Shard{ID: other, Clock: 1, Count: 3, Kind: counters.Global})
	mu := coltype.Mutation{Table: fbfTable.ID, Key: []byte("k"), Cell: cell, HasOp: true, OpID: op(2, 1), OpTime: time.Now().UnixNano(),
		Log: coltype.LeaderLog{Led: true, Delta: 3}}
	if _, counts, err := r.ApplyCounted(mu); err != nil || counts {
		t.Fatalf("another leader's replication of a fresh op: counts %v, %v; want false", counts, err)
	}
	if _, counts := r.CountsLedOp(fbfTable.ID, []byte("k"), "c", op(2, 1)); counts {
		t.Fatal("an op another leader led counts as led here")
	}
	// Another leader's replication of op 2, which this node led and counts.
	mu2 := mu
	mu2.OpID, mu2.Log.Delta = op(1, 2), 7
	mu2.Cell = ctxCell(t, counters.Shard{ID: other, Clock: 2, Count: 3, Kind: counters.Global})
	if id, counts, err := r.ApplyCounted(mu2); err != nil || !counts || id != r.CounterID() {
		t.Fatalf("another leader's replication of an op led here: %s, %v, %v; want %s, true", id, counts, err, r.CounterID())
	}
	// An unclean restart: op 2 (led here, in the last moments) is in doubt;
	// op 1 is settled by its compensation; op 3 was not led here.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, testConfig(dir))
	defer r.Close()
	doubt := r.InDoubt()
	if len(doubt) != 1 || doubt[0].OpID != op(1, 2) {
		t.Fatalf("in doubt after the restart: %+v, want op 2 alone", doubt)
	}
	if _, err := r.ResolveInDoubt(doubt[0], true); err != nil {
		t.Fatal(err)
	}
	if _, counts := r.CountsLedOp(fbfTable.ID, []byte("k"), "c", op(1, 1)); counts {
		t.Fatal("after a restart, an op taken back counts again")
	}
	if _, ok, err := r.TakeBackLedOp(x); ok || err != nil {
		t.Fatalf("take-back after a restart: %v %v, want nothing done", ok, err)
	}
	if v := value(t, r, fbfTable.ID, "k", "c"); v != 10 {
		t.Fatalf("after the restart: %d, want 10 (7 + another leader's 3, its shard at clock 2)", v)
	}
}
