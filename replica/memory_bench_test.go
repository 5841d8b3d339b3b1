package replica

import (
	"encoding/binary"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/handoff"
)

// BenchmarkCellStateMemory writes b.N distinct counters of each design
// that keeps per-cell state (vanilla, FBF, handoff, observed reset) to one
// replica,
// one update each, flushes, and reports the heap in use after a GC before
// and after (the anti-entropy dirty sets taken, as a node's rounds take
// them), with the cell cache at counter_cache_size_in_mb's default (50
// MB), at 1 MiB, and unbounded (-1). The figures of docs/limits.md come from
//
//	go test -run '^$' -bench CellStateMemory -benchtime 1000000x ./replica
//
// No test asserts them.
func BenchmarkCellStateMemory(b *testing.B) {
	for _, design := range []string{"vanilla", "fbf", "handoff", "reset"} {
		for _, size := range []string{"0", "-1", "1"} {
			name := "cache=default"
			if size == "1" {
				name = "cache=1MiB"
			} else if size == "-1" {
				name = "cache=unbounded"
			}
			b.Run(design+"/"+name, func(b *testing.B) { benchCellMemory(b, design, size) })
		}
	}
}

// rss is the process's resident set in MiB (Linux; 0 elsewhere), after
// the runtime has returned its free memory to the system.
func rss() float64 {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// heap returns the live heap (HeapAlloc) and the heap in use (HeapInuse:
// the spans holding live objects) after a GC.
func heap() (alloc, inuse float64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20), float64(ms.HeapInuse) / (1 << 20)
}

func benchCellMemory(b *testing.B, design, size string) {
	cfg := testConfig(b.TempDir())
	cfg.CommitLog = commitlog.Options{Sync: commitlog.SyncPeriodic}
	cfg.Settings = map[string]string{cellcache.SizeSetting: size}
	r, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	write, table := cellWriter(b, r, design)
	before, _ := heap()
	b.ResetTimer()
	for i := range b.N {
		if err := write(i, []byte("counter-"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Flush(table); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	r.TakeDirty() // as the node's anti-entropy rounds do every second
	after, inuse := heap()
	resident := rss()
	st := r.CellCache().Stats()
	b.ReportMetric(before, "live-MB-before")
	b.ReportMetric(after, "live-MB-after")
	b.ReportMetric(inuse, "inuse-MB-after")
	b.ReportMetric(resident, "rss-MB-after")
	b.ReportMetric((after-before)*(1<<20)/float64(b.N), "live-B/counter")
	b.ReportMetric(float64(st.Entries), "cached-cells")
	b.ReportMetric(float64(st.Cost)/(1<<20), "cache-est-MB")
}

// cellWriter creates the table of a design in r and returns a function
// that writes counter i of it, one update, and the table's id.
func cellWriter(b testing.TB, r *Replica, design string) (func(i int, key []byte) error, uint64) {
	var write func(i int, key []byte) error
	var table uint64
	switch design {
	case "vanilla":
		if err := r.CreateTable(counterTable); err != nil {
			b.Fatal(err)
		}
		table = counterTable.ID
		write = func(i int, key []byte) error {
			_, err := r.Apply(coltype.Update{Table: counterTable.ID, Key: key, Column: "a", Delta: 1})
			return err
		}
	case "fbf":
		def := fbfTable
		// A filter of fixed size (no adaptation): its memory is
		// allocated before the first write.
		def.Options = map[string]string{counter.IdempotenceOption: `{"class": "fbf", "bits": "16777216", "adaptive": "false"}`}
		if err := r.CreateTable(def); err != nil {
			b.Fatal(err)
		}
		table = def.ID
		write = func(i int, key []byte) error {
			_, err := r.Apply(coltype.Update{Table: def.ID, Key: key, Column: "c", Delta: 1, HasOp: true, OpID: op(1, uint64(i))})
			return err
		}
	case "handoff":
		if err := r.CreateTable(handoffTable); err != nil {
			b.Fatal(err)
		}
		table = handoffTable.ID
		write = func(i int, key []byte) error {
			var id handoff.ID
			binary.BigEndian.PutUint64(id[:], uint64(i)+1)
			cl := handoff.NewCounter(id, 1)
			cl.Add(1)
			v, err := cl.View(handoff.ID{}, 0).MarshalBinary()
			if err == nil {
				_, err = r.Exchange(handoffTable.ID, key, "h", v)
			}
			return err
		}
	case "reset":
		if err := r.CreateTable(resetTable); err != nil {
			b.Fatal(err)
		}
		table = resetTable.ID
		self := []counters.ID{r.HostID()}
		write = func(i int, key []byte) error {
			_, err := r.Apply(coltype.Update{Table: resetTable.ID, Key: key, Column: "r", Delta: 1, HasOp: true, OpID: op(1, uint64(i)), Replicas: self})
			return err
		}
	}
	return write, table
}

// TestCellStateSoak writes IDEMKV_SOAK_COUNTERS distinct counters of each
// design (IDEMKV_SOAK_DESIGNS, default all four) to one replica with the
// default cell cache and prints, every tenth of the way and once the load
// has stopped and been flushed, the heap in use and the RSS (after a GC and
// returning free memory to the system), so that one can see whether memory
// stays flat while the key space grows (issue 20's 10 million counters):
//
//	IDEMKV_SOAK_COUNTERS=10000000 go test -run TestCellStateSoak -v -timeout 0 ./replica
//
// Skipped without the variable. It reports; it asserts only that the
// writes succeed.
func TestCellStateSoak(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("IDEMKV_SOAK_COUNTERS"))
	if n <= 0 {
		t.Skip("set IDEMKV_SOAK_COUNTERS to run")
	}
	designs := []string{"vanilla", "fbf", "handoff", "reset"}
	if d := os.Getenv("IDEMKV_SOAK_DESIGNS"); d != "" {
		designs = strings.Split(d, ",")
	}
	for _, design := range designs {
		t.Run(design, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.CommitLog = commitlog.Options{Sync: commitlog.SyncPeriodic}
			r, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			write, table := cellWriter(t, r, design)
			_, base := heap()
			t.Logf("%s: %12s %14s %10s %14s", design, "counters", "heap in use MB", "RSS MB", "cached cells")
			t.Logf("%s: %12d %14.1f %10.1f %14d", design, 0, base, rss(), r.CellCache().Stats().Entries)
			step := max(1, n/10)
			for i := range n {
				if err := write(i, []byte("counter-"+strconv.Itoa(i))); err != nil {
					t.Fatal(err)
				}
				if (i+1)%step == 0 {
					r.TakeDirty() // as the node's anti-entropy rounds do every second
					_, inuse := heap()
					t.Logf("%s: %12d %14.1f %10.1f %14d", design, i+1, inuse, rss(), r.CellCache().Stats().Entries)
				}
			}
			if err := r.Flush(table); err != nil {
				t.Fatal(err)
			}
			r.TakeDirty()
			_, inuse := heap()
			t.Logf("%s: %12s %14.1f %10.1f %14d  (load stopped, flushed)", design, "after", inuse, rss(), r.CellCache().Stats().Entries)
		})
	}
}
