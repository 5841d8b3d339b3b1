package node

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemkv/idemkv/coordinator"
)

// TestCorruptBlockFailsOverAndFailsFast corrupts the only data block of a
// partition on one of three replicas: reads that can do without it fail over
// (ONE, QUORUM), a read at ALL fails with a read failure, not a timeout,
// and the replica counts the corrupt block.
func TestCorruptBlockFailsOverAndFailsFast(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.createTable(3)
	if err := c.write(1, "k", 5, coordinator.All); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if err := c.node(i).Replica().FlushAll(); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(c.cfgs[1].DataDirectory, "data", "ks-t-42", "ik-1-big-Data.db")
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-6] ^= 0x10
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// Node 2 asks itself first at ONE and QUORUM, then the others.
	for _, cl := range []coordinator.ConsistencyLevel{coordinator.One, coordinator.Quorum} {
		v, err := c.read(2, "k", cl)
		if err != nil || v != 5 {
			t.Fatalf("read at %s via the corrupt replica = %d, %v; want 5 from the others", cl, v, err)
		}
	}
	_, err = c.read(1, "k", coordinator.All)
	var rf *coordinator.ReadFailureError
	if !errors.As(err, &rf) {
		t.Fatalf("read at ALL with a corrupt replica: err = %v (%T), want a ReadFailureError", err, err)
	}
	if rf.Failures != 1 || rf.BlockFor != 3 {
		t.Fatalf("read failure %+v, want 1 failure of 3 required", rf)
	}
	if n := c.node(2).Replica().Stats().CorruptBlocks; n < 3 {
		t.Fatalf("node 2 counted %d corrupt blocks, want at least 3 (one per failed read)", n)
	}
	for _, i := range []int{1, 3} {
		if n := c.node(i).Replica().Stats().CorruptBlocks; n != 0 {
			t.Fatalf("healthy node %d counted %d corrupt blocks", i, n)
		}
	}
}
