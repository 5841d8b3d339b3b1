package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/coordinator"
)

// createResetMapTable makes ks.rm (k, m map<text, reset_counter>) at RF 3
// through node 1, table id 44.
func (c *testCluster) createResetMapTable() {
	c.t.Helper()
	c.createTableRF3(coltype.TableDef{ID: 44, Keyspace: "ks", Name: "rm", Columns: []coltype.ColumnDef{{Name: "m", Type: resetcol.MapTypeName}}})
}

// resetMaps renders key's map on every node's own replica, as
// "a=1,b=3 | ... | ...".
func (c *testCluster) resetMaps(key string) string {
	var out []string
	for i := range c.nodes {
		cell, found, err := c.node(i+1).Replica().Read(44, []byte(key), "m")
		if err != nil {
			c.t.Fatalf("node %d local read: %v", i+1, err)
		}
		var vals map[string]int64
		if found {
			if vals, err = (resetcol.MapType{}).MapValue(cell); err != nil {
				c.t.Fatalf("node %d: %v", i+1, err)
			}
		}
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(vals)) {
			kv = append(kv, fmt.Sprintf("%s=%d", k, vals[k]))
		}
		out = append(out, strings.Join(kv, ","))
	}
	return strings.Join(out, " | ")
}

// TestResetCounterMapConcurrentIncrementAndReset is issue 13's case for
// the map form through the real coordinators: after a += 5 and b += 3,
// node 3 is isolated and leads a += 1 at ONE while the majority side
// leads DELETE m['a'] at QUORUM; after the partition heals every replica
// reads a=1 (the concurrent increment survives) and b=3 (another key is
// untouched); then DELETE m resets every key and the map counts on.
func TestResetCounterMapConcurrentIncrementAndReset(t *testing.T) {
	c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.HandoffSyncMS = 50 })
	c.createResetMapTable()
	write := func(via int, u coltype.Update, cl coordinator.ConsistencyLevel) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		u.Table, u.Key, u.Column = 44, []byte("k"), "m"
		if err := c.node(via).Coordinator().CounterWrite(ctx, u, cl); err != nil {
			t.Fatalf("write %+v via node %d: %v", u, via, err)
		}
	}
	for range 5 {
		write(1, coltype.Update{Element: "a", Delta: 1}, coordinator.All)
	}
	write(2, coltype.Update{Element: "b", Delta: 3}, coordinator.All)
	c.net.Isolate("127.0.0.3:7000")
	c.seenDown(1, 3)
	c.seenDown(2, 3)
	c.seenDown(3, 1)
	c.seenDown(3, 2)
	write(3, coltype.Update{Element: "a", Delta: 1}, coordinator.One)
	write(1, coltype.Update{Element: "a", Delete: true}, coordinator.Quorum)
	if got := c.resetMaps("k"); got != "b=3 | b=3 | a=6,b=3" {
		t.Fatalf("during the partition, replicas read %s, want b=3 | b=3 | a=6,b=3", got)
	}
	c.net.Heal()
	c.waitUp(3)
	c.waitFor("every replica reads a=1,b=3", func() bool { return c.resetMaps("k") == "a=1,b=3 | a=1,b=3 | a=1,b=3" })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := c.node(2).Coordinator().Delete(ctx, 44, []byte("k"), []string{"m"}, coordinator.All)
	cancel()
	if err != nil {
		t.Fatalf("DELETE m: %v", err)
	}
	if got := c.resetMaps("k"); got != " |  | " {
		t.Fatalf("after DELETE m at ALL: %s, want every map empty", got)
	}
	write(3, coltype.Update{Element: "b", Delta: 2}, coordinator.All)
	if got := c.resetMaps("k"); got != "b=2 | b=2 | b=2" {
		t.Fatalf("counting on: %s, want b=2 everywhere", got)
	}
}
