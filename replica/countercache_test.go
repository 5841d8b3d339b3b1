package replica

import (
	"fmt"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
)

// TestVanillaCacheAlterFBF: a counter table whose idempotence option goes
// vanilla → FBF → vanilla (ALTER TABLE), several times, with increments in
// every phase: the vanilla leader must not read a shard it cached before
// the FBF phase (FBF writes do not go through the vanilla path), or the
// FBF phase's increments are lost. Run with an unbounded cell cache and
// with one of two entries (cells evicted between every update).
func TestVanillaCacheAlterFBF(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache func() *cellcache.Cache
	}{
		{"unbounded", func() *cellcache.Cache { return cellcache.New(0) }},
		{"evicted", func() *cellcache.Cache { return cellcache.NewEntries(tinyCache) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := tc.cache()
			r := mustOpen(t, cacheConfig(t.TempDir(), cache))
			defer r.Close()
			vanilla := fbfTable
			vanilla.Options = nil
			if err := r.CreateTable(vanilla); err != nil {
				t.Fatal(err)
			}
			keys := 3
			if cache.Bound() > 0 {
				keys = 8
			}
			want := map[string]int64{}
			seq := uint64(0)
			incr := func(phase string, fbf bool, round int) {
				t.Helper()
				for i := range 3 * keys {
					key := fmt.Sprintf("k%d", i%keys)
					d := int64(i%5 + 1)
					u := coltype.Update{Table: vanilla.ID, Key: []byte(key), Column: "c", Delta: d}
					if fbf {
						seq++
						u = fbfUpdate(key, d, op(99, seq))
					}
					m, err := r.Apply(u)
					if err != nil || m.Dismissed {
						t.Fatalf("round %d, %s update of %s: %+v, %v", round, phase, key, m, err)
					}
					want[key] += d
				}
				for key, w := range want {
					if got := value(t, r, vanilla.ID, key, "c"); got != w {
						t.Fatalf("round %d, after the %s increments: %s = %d, want %d", round, phase, key, got, w)
					}
				}
			}
			rev := uint64(0)
			alter := func(d coltype.TableDef) {
				t.Helper()
				rev++
				d.Revision = rev
				if err := r.AlterTable(d); err != nil {
					t.Fatal(err)
				}
			}
			for round := range 3 {
				incr("vanilla", false, round)
				alter(fbfTable)
				incr("FBF", true, round)
				if round == 1 {
					if err := r.Flush(vanilla.ID); err != nil {
						t.Fatal(err)
					}
				}
				alter(vanilla)
			}
			incr("vanilla", false, 3)
			if cache.Bound() > 0 {
				checkBound(t, cache, "at the end")
				if cache.Stats().Evictions == 0 {
					t.Fatal("no cell was evicted: the test does not test eviction")
				}
			}
		})
	}
}
