package replica

import (
	"maps"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/row"
)

// TestTombstonePurge: compaction drops a counter's tombstone once it is
// gc_grace_seconds old and nothing this node holds outside the compaction
// could come back from under it; a younger tombstone, or one whose
// partition has a newer write in the memtable, stays. After the purge the
// counter counts again from zero on every design that caches a leader
// shard (vanilla's counter cache, FBF's shards).
func TestTombstonePurge(t *testing.T) {
	for _, design := range []string{"vanilla", "fbf"} {
		t.Run(design, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
			cfg := testConfig(t.TempDir())
			cfg.Now = clk.Now
			r := mustOpen(t, cfg)
			defer r.Close()
			def := counterTable
			def.Options = map[string]string{"gc_grace_seconds": "3600"}
			if design == "fbf" {
				def.Options[counter.IdempotenceOption] = `{"class": "fbf", "retry_horizon": "20s", "bits": "65536"}`
			}
			if err := r.CreateTable(def); err != nil {
				t.Fatal(err)
			}
			ops := uint64(0)
			inc := func(key string, d int64) {
				t.Helper()
				ops++
				u := coltype.Update{Table: 7, Key: []byte(key), Column: "a", Delta: d, Timestamp: clk.Now().UnixMicro()}
				if design == "fbf" {
					u.HasOp, u.OpID, u.OpTime = true, op(9, ops), clk.Now().UnixNano()
				}
				if _, err := r.Apply(u); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range []string{"gone", "held", "live"} {
				inc(k, 5)
			}
			for _, k := range []string{"gone", "held"} {
				if _, err := r.Delete(7, []byte(k), 0, "a"); err != nil {
					t.Fatal(err)
				}
			}
			inc("gone", 7) // shadowed by the tombstone, as in Cassandra
			if err := r.Flush(7); err != nil {
				t.Fatal(err)
			}
			tombstone := func(key string) bool {
				t.Helper()
				c, found, err := r.Read(7, []byte(key), "a")
				if err != nil {
					t.Fatal(err)
				}
				if found {
					t.Fatalf("%s reads %+v: a deleted counter is live", key, c)
				}
				rw, ok, err := r.ReadRow(7, []byte(key))
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					return false
				}
				cell, ok := rw.Cell("a")
				return ok && cell.Tombstone
			}

			// Within gc_grace: nothing goes.
			clk.Add(30 * time.Minute)
			if err := r.Compact(7, true); err != nil {
				t.Fatal(err)
			}
			if !tombstone("gone") || !tombstone("held") || r.Stats().TombstonesPurged != 0 {
				t.Fatalf("a tombstone younger than gc_grace_seconds was purged (stats %+v)", r.Stats())
			}

			// Past it: "held" has a write in the memtable, which the
			// tombstone shadows; it stays. "gone" goes.
			clk.Add(31 * time.Minute)
			inc("held", 1)
			if err := r.Compact(7, true); err != nil {
				t.Fatal(err)
			}
			if tombstone("gone") {
				t.Fatal("a tombstone past gc_grace_seconds with nothing outside the compaction was kept")
			}
			if _, ok, _ := r.ReadRow(7, []byte("gone")); ok {
				t.Fatal("the purged partition is still stored")
			}
			if !tombstone("held") {
				t.Fatal("a tombstone whose partition has a memtable write was purged: the write would come back")
			}
			if got := r.Stats().TombstonesPurged; got != 1 {
				t.Fatalf("TombstonesPurged = %d, want 1", got)
			}
			if got := value(t, r, 7, "live", "a"); got != 5 {
				t.Fatalf("a live counter reads %d after the purge, want 5", got)
			}
			// The purged counter counts from zero: neither the 5 before the
			// delete nor the shadowed 7 comes back through a cached shard.
			inc("gone", 2)
			if got := value(t, r, 7, "gone", "a"); got != 2 {
				t.Fatalf("the purged counter reads %d after +2, want 2", got)
			}

			// ALTER TABLE's gc_grace_seconds is the one compaction uses.
			if _, err := r.Delete(7, []byte("live"), 0, "a"); err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(7); err != nil {
				t.Fatal(err)
			}
			alt := def
			alt.Options = maps.Clone(def.Options)
			alt.Options["gc_grace_seconds"] = "0"
			if err := r.AlterTable(alt); err != nil {
				t.Fatal(err)
			}
			clk.Add(time.Second)
			if err := r.Compact(7, true); err != nil {
				t.Fatal(err)
			}
			if tombstone("live") {
				t.Fatal("gc_grace_seconds = 0 (ALTER TABLE) kept a tombstone a second old")
			}
		})
	}
}

// TestExpiredRegularCellPurge: compaction drops a regular cell written with
// a TTL once it has been expired for gc_grace_seconds, and keeps it
// before; a cell without a TTL stays.
func TestExpiredRegularCellPurge(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	cfg := testConfig(t.TempDir())
	cfg.Now = clk.Now
	r := mustOpen(t, cfg)
	defer r.Close()
	def := coltype.TableDef{ID: 8, Keyspace: "ks", Name: "reg", PartitionKey: []coltype.ColumnDef{{Name: "k", Type: "text"}},
		Columns: []coltype.ColumnDef{{Name: "v", Type: coltype.RegularType, CQL: "text"}}, Options: map[string]string{"gc_grace_seconds": "60"}}
	if err := r.CreateTable(def); err != nil {
		t.Fatal(err)
	}
	exp := clk.Now().Unix() + 10
	for _, c := range []struct {
		key string
		exp int64
	}{{"ttl", exp}, {"forever", 0}} {
		cell := row.Cell{Column: "v", Value: coltype.EncodeRegular([]byte("x"), c.exp), Timestamp: clk.Now().UnixMicro()}
		if err := r.ApplyMutation(coltype.Mutation{Table: 8, Key: []byte(c.key), Cell: cell}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(8); err != nil {
		t.Fatal(err)
	}
	held := func(key string) bool {
		t.Helper()
		_, ok, err := r.ReadRow(8, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	clk.Add(30 * time.Second) // expired, not for gc_grace yet
	if err := r.Compact(8, true); err != nil {
		t.Fatal(err)
	}
	if !held("ttl") || !held("forever") {
		t.Fatalf("before gc_grace after expiry: ttl held %v, forever held %v", held("ttl"), held("forever"))
	}
	clk.Add(60 * time.Second)
	if err := r.Compact(8, true); err != nil {
		t.Fatal(err)
	}
	if held("ttl") || !held("forever") {
		t.Fatalf("after gc_grace: ttl held %v (want dropped), forever held %v", held("ttl"), held("forever"))
	}
}
