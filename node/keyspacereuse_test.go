package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/schema"
)

// TestKeyspaceDroppedAndCreatedAgain: counters in ks.t, DROP KEYSPACE ks,
// CREATE KEYSPACE ks and CREATE TABLE ks.t again while node 3 is down: the
// new ks.t starts empty on every node, counts exactly, and node 3, back,
// catches up with the schema, drops the old table's data and counts the
// new table's writes (hinted while it was down) exactly.
func TestKeyspaceDroppedAndCreatedAgain(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	old := c.createTable(3)
	write := func(via int, table uint64, key string, delta int64, cl coordinator.ConsistencyLevel) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.node(via).Coordinator().CounterWrite(ctx, coltype.Update{Table: table, Key: []byte(key), Column: "c", Delta: delta}, cl); err != nil {
			t.Fatalf("write via node %d: %v", via, err)
		}
	}
	read := func(via int, table uint64, key string, cl coordinator.ConsistencyLevel) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, found, err := c.node(via).Coordinator().Read(ctx, table, []byte(key), cl)
		if err != nil {
			t.Fatalf("read via node %d: %v", via, err)
		}
		if !found {
			return 0
		}
		cell, ok := r.Cell("c")
		if !ok {
			return 0
		}
		v, err := c.node(via).Replica().CellValue(table, cell)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i := 1; i <= 3; i++ {
		write(i, old.ID, "k", 5, coordinator.All)
	}
	if v := read(1, old.ID, "k", coordinator.All); v != 15 {
		t.Fatalf("old table reads %d, want 15", v)
	}

	c.stop(3)
	c.seenDown(1, 3)
	c.seenDown(2, 3)
	if err := c.node(1).Schema().DropKeyspace("ks", false); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the drop on node 2", func() bool {
		_, ok := c.node(2).Schema().Visible().Keyspaces["ks"]
		return !ok
	})
	// Created again through node 2, the table through node 1.
	if err := c.node(2).Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "3"}}, false); err != nil {
		t.Fatalf("CREATE KEYSPACE of a dropped name: %v", err)
	}
	c.waitFor("the new keyspace on node 1", func() bool {
		_, ok := c.node(1).Schema().Visible().Keyspaces["ks"]
		return ok
	})
	def := coltype.TableDef{ID: 43, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
	if err := c.node(1).Schema().CreateTable(def, false); err != nil {
		t.Fatalf("CREATE TABLE in the re-created keyspace: %v", err)
	}
	tableOn := func(i int) bool {
		d, ok := c.node(i).Schema().Table("ks", "t")
		return ok && d.ID == def.ID
	}
	c.waitFor("the new table on node 2", func() bool { return tableOn(2) })
	for i := 1; i <= 2; i++ {
		if v := read(i, def.ID, "k", coordinator.Quorum); v != 0 {
			t.Fatalf("node %d: the re-created ks.t reads %d, want 0", i, v)
		}
		for _, d := range c.node(i).Replica().Tables() {
			if d.ID == old.ID {
				t.Fatalf("node %d keeps the dropped table", i)
			}
		}
	}
	write(1, def.ID, "k", 7, coordinator.Quorum)
	write(2, def.ID, "k", 2, coordinator.Quorum)
	for i := 1; i <= 2; i++ {
		if v := read(i, def.ID, "k", coordinator.Quorum); v != 9 {
			t.Fatalf("node %d reads %d, want 9", i, v)
		}
	}

	// Node 3 comes back with the old schema and the old table's data.
	c.start(3)
	c.waitUp(3)
	c.waitFor("node 3 catches up with the schema", func() bool {
		if !tableOn(3) {
			return false
		}
		for _, d := range c.node(3).Replica().Tables() {
			if d.ID == old.ID {
				return false
			}
		}
		return true
	})
	for i := 1; i <= 3; i++ {
		v := c.node(i).Schema().Version()
		c.waitFor(fmt.Sprintf("node %d's schema version everywhere", i), func() bool {
			for j := 1; j <= 3; j++ {
				if c.node(j).Schema().Version() != v {
					return false
				}
			}
			return true
		})
	}
	c.waitFor("hints replayed to node 3", func() bool {
		v, _, err := c.node(3).Replica().Value(def.ID, []byte("k"), "c")
		return err == nil && v == 9
	})
	for i := 1; i <= 3; i++ {
		write(i, def.ID, "k", 1, coordinator.All)
	}
	for i := 1; i <= 3; i++ {
		if v := read(i, def.ID, "k", coordinator.All); v != 12 {
			t.Fatalf("node %d reads %d at ALL, want 12", i, v)
		}
		if v, _, err := c.node(i).Replica().Value(def.ID, []byte("k"), "c"); err != nil || v != 12 {
			t.Fatalf("node %d's replica holds %d (%v), want 12", i, v, err)
		}
	}
}
