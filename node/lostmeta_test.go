package node

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/transport"
)

// TestLostIdentityRefusesToStart loses a file that gives a node holding
// data its place in the ring — its host id or its tokens — and expects the
// node to refuse to start with an error naming the file, as it does for a
// lost commit log segment or SSTable (TestRandomCluster's disk faults).
// It used to start silently: a new host id (a second identity for the same
// data, the old one left Down in the ring) or new random tokens (the ranges
// it held move away from its data). A first start that crashed between
// writing its files still starts: its directory holds no counter ids or
// schema (host id) or no tables (tokens).
func TestLostIdentityRefusesToStart(t *testing.T) {
	for _, victim := range []string{"host_id", "tokens.json"} {
		t.Run(victim, func(t *testing.T) {
			seed := testseed.Seed(t)
			c := &rtCluster{t: t, net: transport.NewMemNetwork(seed), seed: seed, rng: rand.New(rand.NewPCG(seed, 1))}
			c.setup(3, func(cfg *Config) { cfg.CommitLogSync = "batch" })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			u := coltype.Update{Table: rtVanilla, Key: []byte("k"), Column: "c", Delta: 5}
			if err := c.nodes[0].nd.Coordinator().CounterWrite(ctx, u, coordinator.All); err != nil {
				t.Fatal(err)
			}
			if err := c.nodes[1].nd.Replica().FlushAll(); err != nil {
				t.Fatal(err)
			}
			c.stopClean(1)
			r := c.nodes[1]
			if err := r.fs.Lose(filepath.Join(r.cfg.DataDirectory, victim)); err != nil {
				t.Fatal(err)
			}
			err := c.start(1)
			if err == nil {
				t.Fatalf("node started with its %s lost (host id now %s)", victim, r.nd.HostID())
			}
			if !strings.Contains(err.Error(), victim) {
				t.Fatalf("start refused, but the error does not name %s: %v", victim, err)
			}
		})
	}
}
