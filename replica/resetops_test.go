package replica

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/commitlog"
)

// TestResetOpIDsSurviveRestarts: a reset_counter replica keeps the op ids
// of the window beside its cells, not in their blobs (each blob holds the
// op ids of its last write), so a restart learns them again from the
// commit log: the log keeps a segment holding op ids of the window
// although the cells were flushed and many segments came after it, and a
// retry is dismissed after a clean stop and after a crash. Past the
// window, the segment is released and the op id forgotten.
func TestResetOpIDsSurviveRestarts(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	cfg := testConfig(dir)
	cfg.CommitLog = commitlog.Options{Sync: commitlog.SyncPeriodic, SegmentSize: 64 << 10}
	cfg.Now = clock
	r := mustOpen(t, cfg)
	defer func() { r.Close() }()
	if err := r.CreateTable(resetTable); err != nil {
		t.Fatal(err)
	}
	inc := func(key string, opID [16]byte) coltype.Mutation {
		t.Helper()
		m, err := r.Apply(coltype.Update{Table: resetTable.ID, Key: []byte(key), Column: "r", Delta: 1, HasOp: true, OpID: opID, OpTime: clock().UnixNano()})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := op(7, 1)
	inc("k", first)
	// Later writes of the same cell and of others roll many segments; none
	// carries the first op id.
	for i := range 3000 {
		inc(fmt.Sprintf("k%d", i%50), op(8, uint64(i+1)))
		inc("k", op(9, uint64(i+1)))
	}
	if n := len(r.CommitLog().Segments()); n < 4 {
		t.Fatalf("%d commit log segments: the test wants the first op's segment sealed", n)
	}
	if err := r.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if st := resetcol.ReplicaStats(r); st.Recent != 6001 {
		t.Fatalf("%d op ids remembered, want 6001", st.Recent)
	}
	for _, crash := range []bool{false, true} {
		if crash {
			if err := r.Crash(); err != nil {
				t.Fatal(err)
			}
		} else if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		r = mustOpen(t, cfg)
		if m := inc("k", first); !m.Dismissed {
			t.Fatalf("after a restart (crash %v): the retry of an op of the window was applied again", crash)
		}
		if st := resetcol.ReplicaStats(r); st.Recent != 6001 {
			t.Fatalf("after a restart (crash %v): %d op ids remembered, want 6001", crash, st.Recent)
		}
	}
	if v := value(t, r, resetTable.ID, "k", "r"); v != 3001 {
		t.Fatalf("k reads %d, want 3001", v)
	}
	// Past the window: new writes roll the log again, the flush releases
	// the old segments, and a restart no longer knows the op.
	advance(resetcol.DefaultOpWindow + time.Second)
	for i := range 3000 {
		inc(fmt.Sprintf("k%d", i%50), op(10, uint64(i+1)))
	}
	if err := r.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, cfg)
	if m := inc("k", first); m.Dismissed {
		t.Fatal("a retry past the op window was dismissed: the op id was kept longer than the window")
	}
}

// TestResetBlobHoldsItsWriteOpIDs: the stored blob of a cell holds the op
// ids of its last write only, whatever the window holds.
func TestResetBlobHoldsItsWriteOpIDs(t *testing.T) {
	r := mustOpen(t, testConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(resetTable); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := r.Apply(coltype.Update{Table: resetTable.ID, Key: []byte("k"), Column: "r", Delta: 1, HasOp: true, OpID: op(3, uint64(i+1)), OpTime: time.Now().UnixNano()}); err != nil {
			t.Fatal(err)
		}
	}
	c, found, err := r.Read(resetTable.ID, []byte("k"), "r")
	if err != nil || !found {
		t.Fatalf("read: %v %v", found, err)
	}
	b, err := resetcol.DecodeCell(c.Value)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Recent) != 1 || b.Recent[0].ID != op(3, 100) {
		t.Fatalf("the stored blob holds %d op ids (%v), want the last write's one", len(b.Recent), b.Recent)
	}
	if st := resetcol.ReplicaStats(r); st.Recent != 100 {
		t.Fatalf("%d op ids remembered, want 100", st.Recent)
	}
}
