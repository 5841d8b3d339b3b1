package replica

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/internal/testseed"
)

// The crash child: the test binary re-executed with crashChildEnv set runs
// crashChild instead of the tests. It applies increments in batch sync mode
// from several goroutines and prints "try" before and "ack" after each one,
// until it is killed.
const crashChildEnv = "IDEMKV_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		if err := crashChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var crashTable = coltype.TableDef{ID: 3, Keyspace: "ks", Name: "crash", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}

func crashConfig(dir string) Config {
	return Config{
		Dir:                dir,
		CommitLog:          commitlog.Options{Sync: commitlog.SyncBatch, SegmentSize: 32 << 10},
		MemtableFlushBytes: 16 << 10, // flushes and compactions happen while the child is killed
		Compaction:         Compaction{MinThreshold: 2, MinSSTableSize: 1},
		Logger:             quietLogger(),
	}
}

func crashChild(dir string) error {
	seed, err := strconv.ParseUint(os.Getenv("IDEMKV_CRASH_SEED"), 10, 64)
	if err != nil {
		return err
	}
	r, err := Open(crashConfig(dir))
	if err != nil {
		return err
	}
	if len(r.Tables()) == 0 {
		if err := r.CreateTable(crashTable); err != nil {
			return err
		}
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Fprintf(os.Stdout, format, args...)
		out.Unlock()
	}
	say("ready\n")
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, w))
			for i := 0; ; i++ {
				key := fmt.Sprintf("k%d", rng.IntN(20))
				delta := 1 + rng.Int64N(3)
				id := fmt.Sprintf("%d.%d", w, i)
				say("try %s %s %d\n", id, key, delta)
				if _, err := r.Apply(coltype.Update{Table: crashTable.ID, Key: []byte(key), Column: "c", Delta: delta}); err != nil {
					say("error %v\n", err)
					return
				}
				say("ack %s\n", id)
			}
		}(uint64(w))
	}
	wg.Wait()
	return errors.New("writers stopped")
}

// TestCrashRecovery kills a real writer process with SIGKILL at a seeded
// moment, several times on the same data directory, and checks after each
// crash that every acknowledged increment is present and nothing beyond what
// was attempted.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	rng := testseed.Rand(t)
	dir := t.TempDir()
	acked := map[string]int64{}
	attempted := map[string]int64{}
	for round := 0; round < 5; round++ {
		killAfter := 50 + rng.IntN(1500)
		childSeed := rng.Uint64()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "IDEMKV_CRASH_SEED="+strconv.FormatUint(childSeed, 10))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tries := map[string]struct {
			key   string
			delta int64
		}{}
		sc := bufio.NewScanner(stdout)
		acks, killed := 0, false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch f[0] {
			case "try":
				d, _ := strconv.ParseInt(f[3], 10, 64)
				tries[f[1]] = struct {
					key   string
					delta int64
				}{f[2], d}
				attempted[f[2]] += d
			case "ack":
				tr, ok := tries[f[1]]
				if !ok {
					t.Fatalf("round %d: ack for %s without a try", round, f[1])
				}
				acked[tr.key] += tr.delta
				acks++
			case "error":
				t.Fatalf("round %d: child: %s", round, sc.Text())
			}
			if acks == killAfter && !killed {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: child exited before %d acknowledgements", round, killAfter)
		}

		r, err := Open(crashConfig(dir))
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		keys := make([]string, 0, len(attempted))
		for k := range attempted {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, _, err := r.Value(crashTable.ID, []byte(k), "c")
			if err != nil {
				t.Fatalf("round %d: read %s: %v", round, k, err)
			}
			if v < acked[k] || v > attempted[k] {
				t.Fatalf("round %d (killed after %d acks): %s = %d, acknowledged %d, attempted %d", round, killAfter, k, v, acked[k], attempted[k])
			}
			// What survived is now the floor and the ceiling: unacknowledged
			// increments that did not survive must not appear later.
			acked[k], attempted[k] = v, v
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "commitlog", "*.log"))
	t.Logf("after 5 crashes: %d commit log segments, %d keys", len(segs), len(acked))
}
