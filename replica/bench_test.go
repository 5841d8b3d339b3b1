package replica

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/commitlog"
)

// BenchmarkApply measures the vanilla leader path (striped lock, counter
// cache or storage read, commit log append, memtable apply) on one hot key
// and on uniform keys, with all GOMAXPROCS goroutines writing. In periodic
// mode the log does not wait for fsync, so this is the CPU cost of the path;
// batch mode adds the fsync wait the lock is held across, as in Cassandra.
func BenchmarkApply(b *testing.B) {
	for _, mode := range []commitlog.SyncMode{commitlog.SyncPeriodic, commitlog.SyncBatch} {
		for _, keys := range []int{1, 100_000} {
			b.Run(fmt.Sprintf("sync=%s/keys=%d", mode, keys), func(b *testing.B) {
				cfg := testConfig(b.TempDir())
				cfg.CommitLog = commitlog.Options{Sync: mode}
				r, err := Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				if err := r.CreateTable(counterTable); err != nil {
					b.Fatal(err)
				}
				names := make([][]byte, keys)
				for i := range names {
					names[i] = []byte("key-" + strconv.Itoa(i))
				}
				b.ReportAllocs()
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						i += 7919
						if _, err := r.Apply(coltype.Update{Table: 7, Key: names[i%keys], Column: "a", Delta: 1}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkApplyFBF is BenchmarkApply's FBF twin: every update has a fresh
// op id, and the leader's shard is updated by compare-and-swap.
func BenchmarkApplyFBF(b *testing.B) {
	for _, mode := range []commitlog.SyncMode{commitlog.SyncPeriodic, commitlog.SyncBatch} {
		for _, keys := range []int{1, 100_000} {
			b.Run(fmt.Sprintf("sync=%s/keys=%d", mode, keys), func(b *testing.B) {
				cfg := testConfig(b.TempDir())
				cfg.CommitLog = commitlog.Options{Sync: mode}
				r, err := Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				// A filter sized for this rate: millions of updates a second for
				// a one-second horizon. An undersized filter saturates and
				// dismisses fresh updates (see the dismissed metric).
				def := fbfTable
				def.Options = map[string]string{counter.IdempotenceOption: `{"class": "fbf", "retry_horizon": "1s", "bits": "67108864", "adaptive": "false"}`}
				if err := r.CreateTable(def); err != nil {
					b.Fatal(err)
				}
				names := make([][]byte, keys)
				for i := range names {
					names[i] = []byte("key-" + strconv.Itoa(i))
				}
				var client atomic.Uint64
				b.ReportAllocs()
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					me := client.Add(1)
					var seq uint64
					i := 0
					for pb.Next() {
						i += 7919
						seq++
						u := coltype.Update{Table: fbfTable.ID, Key: names[i%keys], Column: "c", Delta: 1, HasOp: true, OpID: op(me, seq)}
						if _, err := r.Apply(u); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(r.FBFStats().Dismissed), "dismissed")
			})
		}
	}
}
