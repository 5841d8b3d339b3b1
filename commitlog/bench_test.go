package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// benchDir is where benchmarks put their files: IDEMKV_BENCH_DIR if set (to
// measure a particular disk), else a temporary directory.
func benchDir(b *testing.B) string {
	if d := os.Getenv("IDEMKV_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "commitlog-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// BenchmarkAppend measures Append throughput with concurrent writers, a
// record carrying a 100-byte payload. For batch and group every counted
// record is durable (fsynced) when its Append returns.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range allModes {
		for _, access := range []AccessMode{AccessStandard, AccessMmap} {
			for _, writers := range []int{1, 8, 64} {
				b.Run(fmt.Sprintf("mode=%s/access=%s/writers=%d", mode, access, writers), func(b *testing.B) {
					l, err := Open(Options{Dir: benchDir(b), Sync: mode, Access: access, Logger: quietLogger()}, nil)
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					rec := Record{Table: 1, Key: []byte("partition-key"), Column: "c", Kind: PayloadShard,
						Payload: make([]byte, 100), Timestamp: 1, HasOp: true, OpTime: 1}
					b.SetBytes(frameSize(&rec))
					b.ReportAllocs()
					var next atomic.Int64
					var wg sync.WaitGroup
					b.ResetTimer()
					for w := 0; w < writers; w++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							r := rec
							for next.Add(1) <= int64(b.N) {
								if _, err := l.Append(&r); err != nil {
									b.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					unit := "records/s"
					if mode != SyncPeriodic {
						unit = "durable-records/s"
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
				})
			}
		}
	}
}

// BenchmarkRawFsync writes 100 bytes and fsyncs, on the same file system:
// the cost one group commit amortises.
func BenchmarkRawFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(benchDir(b), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}
