package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
)

// TestMemtableSpace: with a per-table flush size far above what is written,
// the bound on all memtables together (memtable_heap_space) still flushes:
// the largest table's memtable, not the small one's. Without the bound
// (negative) nothing is flushed.
func TestMemtableSpace(t *testing.T) {
	small := coltype.TableDef{ID: 9, Keyspace: "ks", Name: "small", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
	for _, bounded := range []bool{true, false} {
		t.Run(fmt.Sprintf("bounded=%v", bounded), func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.CommitLog = commitlog.Options{Sync: commitlog.SyncPeriodic, SegmentSize: 1 << 20}
			cfg.MemtableFlushBytes = 64 << 20
			cfg.MemtableSpaceBytes = 512 << 10
			if !bounded {
				cfg.MemtableSpaceBytes = -1
			}
			r := mustOpen(t, cfg)
			defer r.Close()
			for _, d := range []coltype.TableDef{counterTable, small} {
				if err := r.CreateTable(d); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 8000 {
				u := coltype.Update{Table: counterTable.ID, Key: []byte(fmt.Sprintf("big%05d", i)), Column: "a", Delta: 1}
				if i%10 == 0 {
					u = coltype.Update{Table: small.ID, Key: []byte(fmt.Sprintf("small%05d", i)), Column: "c", Delta: 1}
				}
				if _, err := r.Apply(u); err != nil {
					t.Fatal(err)
				}
			}
			sstables := func(id uint64) int {
				tb, err := r.table(id)
				if err != nil {
					t.Fatal(err)
				}
				tb.mu.RLock()
				defer tb.mu.RUnlock()
				return len(tb.view.sstables)
			}
			if !bounded {
				if st := r.Stats(); st.SpaceFlushes != 0 || st.Flushes != 0 || sstables(counterTable.ID) != 0 {
					t.Fatalf("without a bound: %d space flushes, %d flushes, %d SSTables; want none", st.SpaceFlushes, st.Flushes, sstables(counterTable.ID))
				}
				return
			}
			deadline := time.Now().Add(20 * time.Second)
			for sstables(counterTable.ID) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			st := r.Stats()
			if st.SpaceFlushes == 0 || sstables(counterTable.ID) == 0 {
				t.Fatalf("with a 512 KiB bound: %d space flushes, %d SSTables of the big table; want some", st.SpaceFlushes, sstables(counterTable.ID))
			}
			if n := sstables(small.ID); n != 0 {
				t.Fatalf("the small table was flushed (%d SSTables); the largest memtable should be", n)
			}
			for _, k := range []string{"big00001", "big07999"} {
				if v := value(t, r, counterTable.ID, k, "a"); v != 1 {
					t.Fatalf("%s reads %d, want 1", k, v)
				}
			}
		})
	}
}
