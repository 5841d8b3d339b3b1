// Package bench holds idemkv's workloads and measurements: load generators,
// latency histograms and the reports the idemkv bench command prints.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/replica"
)

// EngineConfig is one run of the single-node engine benchmark: closed-loop
// writers applying vanilla counter increments through the leader path.
type EngineConfig struct {
	Dir          string             // data directory; a fresh temporary one when empty
	Sync         commitlog.SyncMode // commit log sync mode
	GroupWindow  time.Duration      // group mode window (0: the log's default)
	Writers      int                // concurrent writers
	Keys         int                // distinct partition keys; 1 is a hot key
	Duration     time.Duration      // measured time, after Warmup
	Warmup       time.Duration
	Seed         uint64
	MemtableSize int64 // flush threshold (0: replica default)
}

// EngineResult is what one run measured.
type EngineResult struct {
	Config     EngineConfig
	Ops        int64
	Elapsed    time.Duration
	Latency    *hdrhistogram.Histogram // microseconds
	Flushes    uint64
	CacheHits  uint64
	CacheMiss  uint64
	Mismatched int64 // counters whose final value differs from the acknowledged sum (must be 0)
}

// Throughput returns acknowledged increments per second.
func (r EngineResult) Throughput() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// RunEngine runs the benchmark and checks, at the end, that every counter
// holds exactly the sum of its acknowledged increments.
func RunEngine(ctx context.Context, cfg EngineConfig) (EngineResult, error) {
	if cfg.Writers <= 0 || cfg.Keys <= 0 || cfg.Duration <= 0 {
		return EngineResult{}, fmt.Errorf("bench: writers, keys and duration must be positive")
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "idemkv-bench-")
		if err != nil {
			return EngineResult{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	r, err := replica.Open(replica.Config{
		Dir:                dir,
		CommitLog:          commitlog.Options{Sync: cfg.Sync, GroupWindow: cfg.GroupWindow},
		MemtableFlushBytes: cfg.MemtableSize,
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return EngineResult{}, err
	}
	defer r.Close()
	const table = 1
	if err := r.CreateTable(coltype.TableDef{ID: table, Keyspace: "bench", Name: "counters",
		Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}); err != nil {
		return EngineResult{}, err
	}
	keys := make([][]byte, cfg.Keys)
	for i := range keys {
		keys[i] = []byte("key-" + strconv.Itoa(i))
	}
	acked := make([]atomic.Int64, cfg.Keys)

	var measuring atomic.Bool
	var ops atomic.Int64
	hists := make([]*hdrhistogram.Histogram, cfg.Writers)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for w := 0; w < cfg.Writers; w++ {
		hists[w] = hdrhistogram.New(1, 60_000_000, 3)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
			h := hists[w]
			for runCtx.Err() == nil {
				k := rng.IntN(cfg.Keys)
				start := time.Now()
				_, err := r.Apply(coltype.Update{Table: table, Key: keys[k], Column: "c", Delta: 1})
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				acked[k].Add(1)
				if measuring.Load() {
					_ = h.RecordValue(max(1, time.Since(start).Microseconds()))
					ops.Add(1)
				}
			}
		}(w)
	}
	select {
	case <-time.After(cfg.Warmup):
	case <-runCtx.Done():
	}
	measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(cfg.Duration):
	case <-runCtx.Done():
	}
	measuring.Store(false)
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	if firstErr != nil {
		return EngineResult{}, firstErr
	}
	res := EngineResult{Config: cfg, Ops: ops.Load(), Elapsed: elapsed, Latency: hdrhistogram.New(1, 60_000_000, 3)}
	for _, h := range hists {
		res.Latency.Merge(h)
	}
	for i := range keys {
		v, _, err := r.Value(table, keys[i], "c")
		if err != nil {
			return res, err
		}
		if v != acked[i].Load() {
			res.Mismatched++
		}
	}
	st := r.Stats()
	res.Flushes, res.CacheHits, res.CacheMiss = st.Flushes, st.CacheHits, st.CacheMisses
	return res, nil
}

// WriteEngineTable prints results side by side.
func WriteEngineTable(w io.Writer, results []EngineResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sync\twriters\tkeys\tops\tops/s\tp50 µs\tp99 µs\tp99.9 µs\tmax µs\tflushes\twrong\t")
	for _, r := range results {
		h := r.Latency
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
			r.Config.Sync, r.Config.Writers, r.Config.Keys, r.Ops, r.Throughput(),
			h.ValueAtQuantile(50), h.ValueAtQuantile(99), h.ValueAtQuantile(99.9), h.Max(), r.Flushes, r.Mismatched)
	}
	return tw.Flush()
}
