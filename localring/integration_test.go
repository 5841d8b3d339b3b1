package localring

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/node"
	"github.com/idemkv/idemkv/schema"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// buildBinary compiles the idemkv command for the real-process tests, once
// per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "idemkv-localring-test")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "idemkv")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/idemkv/idemkv/cmd/idemkv").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build idemkv: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestRingSurvivesSIGKILL runs a 3-node ring of real processes over TCP,
// writes at QUORUM from several clients while one node is killed with
// SIGKILL and restarted, and checks that every counter holds every
// acknowledged increment, plus at most the increments whose outcome the
// client could not know (timeouts).
func TestRingSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real node processes")
	}
	rng := testseed.Rand(t)
	port := 20000 + rng.IntN(20000)
	r := Ring{Dir: t.TempDir(), Binary: buildBinary(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := r.Up(ctx, UpOptions{Nodes: 3, NumTokens: 8, CommitLogSync: "batch", Extra: func(i int, c *node.Config) {
		c.StoragePort = port
		c.NativeTransportPort = port + 1
		c.Seeds = []string{fmt.Sprintf("127.0.0.1:%d", port)}
		c.GossipIntervalMS = 100
		c.CounterWriteTimeoutMS = 2000
	}})
	t.Cleanup(func() {
		if _, err := r.Stop(5 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.%d:%d", i, port) }
	client, err := node.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	table := coltype.TableDef{ID: 77, Keyspace: "ks", Name: "hits", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
	if err := client.CreateKeyspace(ctx, addr(1), schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "3"}}); err != nil {
		t.Fatal(err)
	}
	if err := client.CreateTable(ctx, addr(1), table); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "schema agreement", func() bool {
		st, err := client.Status(ctx, addr(1))
		if err != nil || len(st) != 3 {
			return false
		}
		for _, p := range st {
			if p.SchemaVersion != st[0].SchemaVersion {
				return false
			}
		}
		return true
	})

	const keys = 8
	var acked, unknown [keys]atomic.Int64
	var nAcked, nUnknown, nRefused atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		seed := rng.Uint64()
		go func() {
			defer wg.Done()
			wr := rand.New(rand.NewPCG(seed, 1))
			for !stop.Load() {
				k := wr.IntN(keys)
				delta := int64(1 + wr.IntN(3))
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := client.Write(wctx, addr(1+wr.IntN(3)), coordinator.Quorum,
					coltype.Update{Table: table.ID, Key: []byte("key" + strconv.Itoa(k)), Column: "c", Delta: delta})
				cancel()
				var un *coordinator.UnavailableError
				switch {
				case err == nil:
					acked[k].Add(delta)
					nAcked.Add(1)
				case errors.As(err, &un):
					nRefused.Add(1) // refused before anything was applied
				default:
					// A timeout, or the coordinator died mid-request: the
					// increment may or may not have been applied.
					unknown[k].Add(delta)
					nUnknown.Add(1)
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
	if _, err := r.Kill(2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
	if _, err := r.StartNode(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	t.Logf("writes: %d acknowledged, %d unknown outcome, %d refused as unavailable", nAcked.Load(), nUnknown.Load(), nRefused.Load())
	if nAcked.Load() == 0 {
		t.Fatal("no write was acknowledged")
	}
	for k := 0; k < keys; k++ {
		key := []byte("key" + strconv.Itoa(k))
		for via := 1; via <= 3; via++ {
			var rw struct {
				v   int64
				err error
			}
			waitFor(t, "a read at ALL", func() bool {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				row, found, err := client.Read(rctx, addr(via), coordinator.All, table.ID, key)
				rw.err = err
				if err != nil {
					return false
				}
				rw.v = 0
				if found {
					if c, ok := row.Cell("c"); ok && !c.Tombstone {
						rw.v = counterValue(t, c.Value)
					}
				}
				return true
			})
			if lo, hi := acked[k].Load(), acked[k].Load()+unknown[k].Load(); rw.v < lo || rw.v > hi {
				t.Errorf("key%d via node %d = %d; acknowledged %d, unknown outcome %d", k, via, rw.v, lo, hi-lo)
			}
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
