package node

import (
	"fmt"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/coordinator"
)

// leadersOf writes n updates with fresh op ids to one key of table 43
// through node 1 and returns how many nodes led at least one.
func (c *testCluster) leadersOf(n int) int {
	c.t.Helper()
	for i := 0; i < n; i++ {
		if err := c.writeOpAt(1, "hot", 1, uint64(100+i), coordinator.Quorum); err != nil {
			c.t.Fatal(err)
		}
	}
	led := 0
	for i := range c.nodes {
		if c.nodes[i].Replica().FBFStats().Applied > 0 {
			led++
		}
	}
	return led
}

// TestLeaderRulePrecedence: a table's own leader option wins; else the
// node's counter_leader when the operator set it; else the design's default
// (first for FBF tables).
func TestLeaderRulePrecedence(t *testing.T) {
	for _, tc := range []struct {
		node, table string
		random      bool
	}{
		{"", "", false},
		{"random", "", true},
		{"random", "first", false},
		{"first", "random", true},
	} {
		t.Run(fmt.Sprintf("node=%q,table=%q", tc.node, tc.table), func(t *testing.T) {
			c := newTestCluster(t, 3, func(i int, cfg *Config) { cfg.CounterLeader = tc.node })
			c.createTable(3)
			opts := `{"class": "fbf"}`
			if tc.table != "" {
				opts = fmt.Sprintf(`{"class": "fbf", "leader": %q}`, tc.table)
			}
			def := coltype.TableDef{ID: 43, Keyspace: "ks", Name: "f", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
				Options: map[string]string{counter.IdempotenceOption: opts}}
			if err := c.node(1).Schema().CreateTable(def, false); err != nil {
				t.Fatal(err)
			}
			c.waitFor("FBF table everywhere", func() bool {
				for _, nd := range c.nodes {
					if _, ok := nd.Schema().Table("ks", "f"); !ok {
						return false
					}
				}
				return true
			})
			// 40 updates: all on one leader under "first"; under "random"
			// all on one of three has probability 3^-39.
			if led := c.leadersOf(40); (led > 1) != tc.random {
				t.Fatalf("%d nodes led; want random=%v", led, tc.random)
			}
		})
	}
}
