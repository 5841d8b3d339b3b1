package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/schema"
)

// rcName is the composite cell name of column c in the row of clustering
// value d (an int) of a table with one ascending clustering column.
func rcName(d int32) string {
	k := binary.BigEndian.AppendUint32(nil, uint32(d)^0x80000000)
	return string(row.AppendComponent(nil, k, false)) + "c"
}

// TestResetClusteringBootstrap: reset_counter cells of a table with a
// clustering column (many cells per partition) go through a bootstrap:
// every cell is prepared and adopted by the new node under its own name,
// and once anti-entropy settles every natural replica of every row, the
// new node included, reads the row's increments, before and during the
// join alike.
func TestResetClusteringBootstrap(t *testing.T) {
	r := newTCPRingWith(t, 3, func(c *Config) { c.HandoffSyncMS = 50 })
	n1 := r.node(1)
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "2"}}, false); err != nil {
		t.Fatal(err)
	}
	const table = uint64(46)
	def := coltype.TableDef{ID: table, Keyspace: "ks", Name: "rc", PartitionKey: []coltype.ColumnDef{{Name: "k", Type: "text"}},
		Clustering: []coltype.ColumnDef{{Name: "d", Type: "int"}}, Columns: []coltype.ColumnDef{{Name: "c", Type: resetcol.TypeName}}}
	if err := n1.Schema().CreateTable(def, false); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the table on every node", func() bool {
		for _, nd := range r.nodes {
			if nd != nil {
				if _, ok := nd.Schema().Table("ks", "rc"); !ok {
					return false
				}
			}
		}
		return true
	})
	want := map[string]map[int32]int64{}
	inc := func(via int, key string, d int32, delta int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		u := coltype.Update{Table: table, Key: []byte(key), Column: rcName(d), Delta: delta}
		if err := r.node(via).Coordinator().CounterWrite(ctx, u, coordinator.Quorum); err != nil {
			t.Fatalf("increment %s/%d: %v", key, d, err)
		}
		if want[key] == nil {
			want[key] = map[int32]int64{}
		}
		want[key][d] += delta
	}
	for k := range 12 {
		for d := int32(-2); d <= 2; d++ {
			inc(1+k%3, fmt.Sprint("k", k), d, int64(k+int(d)+3))
		}
	}
	i := r.add(func(c *Config) { c.HandoffSyncMS = 50 })
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.start(i)
	}()
	for k := range 12 { // during the join
		inc(1+k%3, fmt.Sprint("k", k), 0, 1)
	}
	<-done
	r.waitUp(4)
	for k := range 12 { // after it
		inc(1+k%3, fmt.Sprint("k", k), 1, 2)
	}
	if st := r.node(i).StreamStats(); st.RowsIn == 0 {
		t.Fatal("nothing streamed to the new node")
	}
	var bad []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		bad = bad[:0]
		for key, rows := range want {
			for _, n := range r.rjReplicas(1, key) {
				for d, w := range rows {
					c, found, err := r.node(n).Replica().Read(table, []byte(key), rcName(d))
					var v int64
					if err == nil && found {
						v, err = resetcol.Type{}.Value(c)
					}
					if err != nil || v != w {
						bad = append(bad, fmt.Sprintf("node %d %s/%d = %d (%v), want %d", n, key, d, v, err, w))
					}
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(bad) > 0 {
		t.Fatalf("seed %d: %d cells wrong after the join, e.g. %v", r.seed, len(bad), bad[:min(5, len(bad))])
	}
}
