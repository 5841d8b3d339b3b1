package resetcol

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestRecentOps runs a cell's op ids through seeded adds (op times around
// the clock, some repeated with a later time), clock moves and sweeps, and
// checks every answer against a model: an op id is held while its latest
// time is within the window, never after; a cell's list is the model's
// ids within the window; what is held never drops below the model.
func TestRecentOps(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	const window = 10 * time.Second
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var r recentOps
	model := map[string]map[[16]byte]int64{}
	cells := []string{"a", "b", "c"}
	for step := range 5000 {
		horizon := now.Add(-window).UnixNano()
		switch x := rng.IntN(10); {
		case x < 6:
			cell := cells[rng.IntN(len(cells))]
			var recs []OpRecord
			for range 1 + rng.IntN(3) {
				var id [16]byte
				id[0] = byte(rng.IntN(40))
				// Clients' op times: mostly now, some older, some a little ahead.
				at := now.Add(time.Duration(rng.IntN(int(3*time.Second))) - 2*time.Second).UnixNano()
				recs = append(recs, OpRecord{ID: id, Time: at})
			}
			r.add(cell, recs, horizon)
			if model[cell] == nil {
				model[cell] = map[[16]byte]int64{}
			}
			for _, rec := range recs {
				if rec.Time >= horizon && rec.Time > model[cell][rec.ID] {
					model[cell][rec.ID] = rec.Time
				}
			}
		case x < 8:
			now = now.Add(time.Duration(rng.IntN(int(2 * time.Second))))
		case x < 9:
			r.sweep(now, window)
		default:
			now = now.Add(time.Duration(rng.IntN(int(window))))
		}
		horizon = now.Add(-window).UnixNano()
		want := 0
		for _, cell := range cells {
			var ids []OpRecord
			for i := range 40 {
				var id [16]byte
				id[0] = byte(i)
				at, ok := model[cell][id]
				in := ok && at >= horizon
				if got := r.has(cell, id, horizon); got != in {
					t.Fatalf("step %d (seed %d): cell %s op %d: has %v, want %v (time %d, horizon %d)", step, seed, cell, i, got, in, at, horizon)
				}
				if in {
					ids = append(ids, OpRecord{ID: id, Time: at})
					want++
				}
			}
			if got := r.list(cell, horizon); fmt.Sprint(got) != fmt.Sprint(ids) && !(len(got) == 0 && len(ids) == 0) {
				t.Fatalf("step %d (seed %d): cell %s lists %v, want %v", step, seed, cell, got, ids)
			}
		}
		if n := r.len(); n < want {
			t.Fatalf("step %d (seed %d): %d op ids held, %d within the window", step, seed, n, want)
		}
	}
	// Past the window and swept, nothing is held.
	now = now.Add(window + 2*time.Second)
	r.lastSweep = 0
	r.sweep(now, window)
	if n := r.len(); n != 0 || len(r.cells) != 0 {
		t.Fatalf("after the window and a sweep: %d op ids in %d cells", n, len(r.cells))
	}
}
