package resetexp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/commitlog"
)

// ClientStateRow is one cell's stored size after some distinct clients
// each incremented it once with an op id.
type ClientStateRow struct {
	Type    string // resetcol.TypeName or resetcol.MapTypeName
	Keys    int    // map keys the clients increment (1 for a counter)
	Clients int
	// Within is the cell's bytes per replica (the mean of the 3) once
	// every op is delivered and acknowledged, still within the op window;
	// After is the same once the window has passed and one more increment
	// (a fresh client's, with its op id) was delivered everywhere, which
	// prunes the expired op ids at every replica.
	Within, After float64
	// RecentWithin and RecentAfter are the op ids a replica keeps in
	// memory beside the cell (the mean; resetcol.Stats.Recent); Entries
	// the counter entries (M) of one replica's cell.
	RecentWithin, RecentAfter float64
	Entries                   float64
}

// fakeClock is a settable clock for the replicas.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ClientState measures the state of one cell against the number of
// clients: for each n in clients, n distinct clients each increment the
// cell once with their own op id (as client.Client sends it), led by a
// random replica of 3 and delivered to the others, then healed; the cell
// is measured within the op window (resetcol.DefaultOpWindow, the
// replicas' clock advancing 1 ms per increment) and again after the clock
// moved past it and one more increment was delivered. keys > 1 measures
// the map form with that many keys (each client increments a random one).
func ClientState(dir string, keys int, clients []int, seed uint64) ([]ClientStateRow, error) {
	var out []ClientStateRow
	for _, n := range clients {
		row, err := clientState(dir, keys, n, seed)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

func clientState(dir string, keys, n int, seed uint64) (ClientStateRow, error) {
	typ := resetcol.TypeName
	if keys > 1 {
		typ = resetcol.MapTypeName
	}
	row := ClientStateRow{Type: typ, Keys: keys, Clients: n}
	d, err := os.MkdirTemp(dir, "clients-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(d)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	r, err := OpenClock(d, 3, typ, seed, commitlog.SyncPeriodic, clock.now)
	if err != nil {
		return row, err
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	var issued int64
	inc := func(client uint64) error {
		var id [16]byte
		binary.BigEndian.PutUint64(id[:], client)
		binary.BigEndian.PutUint64(id[8:], 1) // each client's first op
		d := int64(1 + rng.IntN(5))
		at := rng.IntN(len(r.Reps))
		var ms []Msg
		var err error
		if keys > 1 {
			ms, err = r.IncElemOp(at, "cell", fmt.Sprintf("k%d", rng.IntN(keys)), d, id, clock.now().UnixNano())
		} else {
			ms, err = r.IncOp(at, "cell", d, id, clock.now().UnixNano())
		}
		if err != nil {
			return err
		}
		issued += d
		clock.add(time.Millisecond)
		return r.Deliver(ms...)
	}
	measure := func() (bytes, recent, entries float64, err error) {
		if ok, err := r.Heal(50); err != nil || !ok {
			return 0, 0, 0, errors.Join(err, errors.New("anti-entropy did not settle"))
		}
		for i, rep := range r.Reps {
			st := resetcol.ReplicaStats(rep)
			if st.Cells != 1 || st.Pending != 0 {
				return 0, 0, 0, fmt.Errorf("replica %d: %d cells, %d ops pending; want 1 and 0", i, st.Cells, st.Pending)
			}
			bytes += float64(st.Bytes)
			recent += float64(st.Recent)
			entries += float64(st.Entries)
		}
		k := float64(len(r.Reps))
		return bytes / k, recent / k, entries / k, nil
	}
	for c := range n {
		if err := inc(uint64(c + 1)); err != nil {
			return row, err
		}
	}
	if row.Within, row.RecentWithin, row.Entries, err = measure(); err != nil {
		return row, err
	}
	clock.add(resetcol.DefaultOpWindow + time.Second)
	if err := inc(uint64(n + 1)); err != nil {
		return row, err
	}
	if row.After, row.RecentAfter, _, err = measure(); err != nil {
		return row, err
	}
	for i := range r.Reps {
		if v, err := r.sum(i, "cell"); err != nil || v != issued {
			return row, fmt.Errorf("replica %d reads %d, issued %d (%v)", i, v, issued, err)
		}
	}
	return row, nil
}

// Blob decodes replica i's stored cell of key.
func (r *Ring) Blob(i int, key string) (*resetcol.Blob, error) {
	c, found, err := r.Reps[i].Read(TableID, []byte(key), "c")
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("replica %d holds no cell %q", i, key)
	}
	return resetcol.DecodeCell(c.Value)
}

// sum reads key's counter on replica i, or the sum of its map's values.
func (r *Ring) sum(i int, key string) (int64, error) {
	if r.typ != resetcol.MapTypeName {
		return r.Value(i, key)
	}
	c, found, err := r.Reps[i].Read(TableID, []byte(key), "c")
	if err != nil || !found {
		return 0, err
	}
	m, err := resetcol.MapType{}.MapValue(c)
	var n int64
	for _, v := range m {
		n += v
	}
	return n, err
}
