package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
)

// TestCommitLogSpace: a table whose memtable stays small (ten counters
// updated 40,000 times) is never flushed by size, so without a bound its
// commit log grows with every update; with CommitLogSpaceBytes the tables
// holding the oldest segment are flushed and the log stays near the bound.
// Nothing is lost either way, across a reopen.
func TestCommitLogSpace(t *testing.T) {
	const (
		bound   = 512 << 10
		segSize = 64 << 10
		keys    = 10
		updates = 40000
	)
	for _, bounded := range []bool{true, false} {
		t.Run(fmt.Sprintf("bounded=%v", bounded), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.CommitLog = commitlog.Options{Sync: commitlog.SyncPeriodic, SegmentSize: segSize}
			cfg.MemtableSpaceBytes = -1
			cfg.CommitLogSpaceBytes = bound
			if !bounded {
				cfg.CommitLogSpaceBytes = -1
			}
			r := mustOpen(t, cfg)
			if err := r.CreateTable(counterTable); err != nil {
				t.Fatal(err)
			}
			for i := range updates {
				u := coltype.Update{Table: counterTable.ID, Key: []byte(fmt.Sprintf("k%d", i%keys)), Column: "a", Delta: 1}
				if _, err := r.Apply(u); err != nil {
					t.Fatal(err)
				}
			}
			size := r.CommitLog().Size()
			if !bounded {
				if st := r.Stats(); size <= 4*bound || st.LogSpaceFlushes != 0 || st.Flushes != 0 {
					t.Fatalf("without a bound: log of %d bytes, %d log space flushes, %d flushes; want a log past %d bytes and no flush", size, st.LogSpaceFlushes, st.Flushes, 4*bound)
				}
			} else {
				// The last check may have queued a flush: wait for it.
				for deadline := time.Now().Add(20 * time.Second); size > bound+4*segSize && time.Now().Before(deadline); size = r.CommitLog().Size() {
					time.Sleep(10 * time.Millisecond)
				}
				if st := r.Stats(); size > bound+4*segSize || st.LogSpaceFlushes == 0 {
					t.Fatalf("with a %d-byte bound: log of %d bytes, %d log space flushes; want at most %d bytes (the bound, the segments of one check interval and the active one)",
						bound, size, st.LogSpaceFlushes, bound+4*segSize)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			r = mustOpen(t, cfg)
			defer r.Close()
			for k := range keys {
				if v := value(t, r, counterTable.ID, fmt.Sprintf("k%d", k), "a"); v != updates/keys {
					t.Fatalf("k%d reads %d after a reopen, want %d", k, v, updates/keys)
				}
			}
		})
	}
}

// TestCommitLogSpaceRetained: segments kept for their op ids (an FBF
// column's window) count towards the bound, but no flush frees them, so
// none is asked for however far the log is past it; the replica says how
// much is kept (Stats.LogRetainedBytes) and warns, once, that it is past
// the bound.
func TestCommitLogSpaceRetained(t *testing.T) {
	cfg := testConfig(t.TempDir())
	var logs logRecorder
	cfg.Logger = logs.logger()
	cfg.CommitLog = commitlog.Options{Sync: commitlog.SyncPeriodic, SegmentSize: 64 << 10}
	cfg.MemtableSpaceBytes = -1
	cfg.CommitLogSpaceBytes = 256 << 10
	r := mustOpen(t, cfg)
	defer r.Close()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		if _, err := r.Apply(fbfUpdate(fmt.Sprintf("k%d", i%10), 1, op(1, uint64(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Stats(); r.CommitLog().Size() <= cfg.CommitLogSpaceBytes || st.LogSpaceFlushes != 0 || st.Flushes != 0 {
		t.Fatalf("log of %d bytes (bound %d), %d log space flushes, %d flushes: want the log past the bound, every segment kept for its op ids, and no flush",
			r.CommitLog().Size(), cfg.CommitLogSpaceBytes, st.LogSpaceFlushes, st.Flushes)
	}
	if st := r.Stats(); st.LogRetainedBytes <= cfg.CommitLogSpaceBytes {
		t.Errorf("%d bytes of segments said kept for op ids, want more than the bound %d (every sealed segment is)", st.LogRetainedBytes, cfg.CommitLogSpaceBytes)
	}
	if n := len(logs.records(t, "exceed commitlog_total_space_in_mb")); n != 1 {
		t.Errorf("%d warnings that the kept segments exceed the bound, want 1", n)
	}
}
