package resetexp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/commitlog"
)

// ConcurrentRow is one design's outcome of the concurrent reset +
// increment case.
type ConcurrentRow struct {
	Design string
	// Reads are the replicas' values after healing (nil: not run, the
	// design is described by its rule).
	Reads []int64
	// Want is what the design reads by its rule.
	Want int64
	// After is what the replicas read after one more +1 (counting again).
	After []int64
	Note  string
}

// Concurrent runs issue 13's case on a 3-replica ring in dir: 5 increments
// led by replica A, all delivered; then one more increment led by A
// concurrent with DELETE led by replica B (each's mutations held from the
// other until both are done); then every message delivered and anti-
// entropy healed; then +1. reset_counter and the vanilla counter run;
// reset-wins and reset-ignored are stated by their rules.
func Concurrent(dir string, seed uint64) ([]ConcurrentRow, error) {
	var rows []ConcurrentRow
	for _, typ := range []string{resetcol.TypeName, "counter"} {
		reads, after, err := concurrent(dir, typ, seed)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		row := ConcurrentRow{Design: typ, Reads: reads, After: after}
		if typ == resetcol.TypeName {
			row.Want = 1
			row.Note = "the reset cancels the 5 increments B observed; A's concurrent one survives"
		} else {
			row.Design = "counter (Cassandra's)"
			row.Note = "the DELETE's tombstone is final (CASSANDRA-7346): the counter never counts again"
		}
		rows = append(rows, row)
	}
	rows = append(rows,
		ConcurrentRow{Design: "reset-wins (rule)", Want: 0, Note: "a reset drops every increment not after it in its order (e.g. epoch counters): A's concurrent +1 is lost"},
		ConcurrentRow{Design: "reset-ignored (rule)", Want: 6, Note: "a reset concurrent with an increment is dropped (add-wins on the counter): the 5 counts come back"},
	)
	return rows, nil
}

func concurrent(dir, typ string, seed uint64) (reads, after []int64, err error) {
	d, err := os.MkdirTemp(dir, "concurrent-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(d)
	r, err := Open(d, 3, typ, seed)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	for range 5 {
		ms, err := r.Inc(0, "k", 1)
		if err != nil {
			return nil, nil, err
		}
		if err := r.Deliver(ms...); err != nil {
			return nil, nil, err
		}
	}
	if _, err := r.Heal(50); err != nil {
		return nil, nil, err
	}
	inc, err := r.Inc(0, "k", 1)
	if err != nil {
		return nil, nil, err
	}
	del, err := r.Delete(1, "k", nil)
	if err != nil {
		return nil, nil, err
	}
	if err := r.Deliver(append(del, inc...)...); err != nil {
		return nil, nil, err
	}
	if _, err := r.Heal(50); err != nil {
		return nil, nil, err
	}
	if reads, err = r.Values("k"); err != nil {
		return nil, nil, err
	}
	ms, err := r.Inc(2, "k", 1)
	if err != nil {
		return nil, nil, err
	}
	if err := r.Deliver(ms...); err != nil {
		return nil, nil, err
	}
	if _, err := r.Heal(50); err != nil {
		return nil, nil, err
	}
	after, err = r.Values("k")
	return reads, after, err
}

// StateSize is what a table of reset counters holds, summed over the
// replicas.
type StateSize struct {
	Phase   string
	Cells   int // cells held, over all replicas
	Bytes   int // bytes of the stored cells (blobs), over all replicas
	Entries int // counter entries (M), over all replicas
	Pending int // ops in outboxes
}

// Oblivious fills a table of keys reset counters (each incremented once by
// each of the 3 replicas), heals, then resets every counter (DELETE led
// by a random replica), heals, and reports the state before and after.
func Oblivious(dir string, keys int, seed uint64) ([]StateSize, error) {
	d, err := os.MkdirTemp(dir, "oblivious-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(d)
	r, err := OpenSync(d, 3, resetcol.TypeName, seed, commitlog.SyncPeriodic)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(seed, 7))
	size := func(phase string) StateSize {
		s := StateSize{Phase: phase}
		for _, rep := range r.Reps {
			st := resetcol.ReplicaStats(rep)
			s.Cells += st.Cells
			s.Bytes += st.Bytes
			s.Entries += st.Entries
			s.Pending += st.Pending
		}
		return s
	}
	for k := range keys {
		key := "key-" + strconv.Itoa(k)
		for i := range r.Reps {
			ms, err := r.Inc(i, key, int64(1+rng.IntN(9)))
			if err != nil {
				return nil, err
			}
			if err := r.Deliver(ms...); err != nil {
				return nil, err
			}
		}
	}
	if ok, err := r.Heal(50); err != nil || !ok {
		return nil, errors.Join(err, errors.New("anti-entropy did not settle"))
	}
	out := []StateSize{size("counted, healed")}
	for k := range keys {
		ms, err := r.Delete(rng.IntN(len(r.Reps)), "key-"+strconv.Itoa(k), nil)
		if err != nil {
			return nil, err
		}
		if err := r.Deliver(ms...); err != nil {
			return nil, err
		}
	}
	if ok, err := r.Heal(50); err != nil || !ok {
		return nil, errors.Join(err, errors.New("anti-entropy did not settle"))
	}
	out = append(out, size("every counter reset, healed"))
	for k := range keys {
		if v, err := r.Value(0, "key-"+strconv.Itoa(k)); err != nil || v != 0 {
			return nil, fmt.Errorf("key-%d reads %d after its reset (%v)", k, v, err)
		}
	}
	return out, nil
}

// TrafficRow is the cost of one kind of op.
type TrafficRow struct {
	Op      string
	Regime  string // when anti-entropy runs
	Ops     int
	Traffic Traffic
}

// PerOp is what one op costs, on average.
func (t TrafficRow) PerOp() (mutations, mutationBytes, syncs, syncBytes float64) {
	n := float64(t.Ops)
	return float64(t.Traffic.Mutations) / n, float64(t.Traffic.MutationBytes) / n, float64(t.Traffic.Syncs) / n, float64(t.Traffic.SyncBytes) / n
}

// Messages measures messages and bytes per increment and per reset on a
// 3-replica ring. Increments: ops of them, led by random replicas, on
// ops/10 counters (keys chosen at random). Resets: ops counters, each first
// incremented by every replica (not counted) and healed, then each reset
// once by a random replica. Anti-entropy runs either after every op (the
// worst case: one round per op) or once after all the ops of a kind (a
// round batches every op of a cell since the last).
func Messages(dir string, ops int, seed uint64) ([]TrafficRow, error) {
	var out []TrafficRow
	for _, every := range []bool{true, false} {
		d, err := os.MkdirTemp(dir, "messages-")
		if err != nil {
			return nil, err
		}
		rows, err := messages(d, ops, seed, every)
		os.RemoveAll(d)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

func messages(dir string, ops int, seed uint64, every bool) ([]TrafficRow, error) {
	r, err := OpenSync(dir, 3, resetcol.TypeName, seed, commitlog.SyncPeriodic)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(seed, 11))
	regime := "one anti-entropy round after all ops"
	if every {
		regime = "one anti-entropy round after each op"
	}
	var rows []TrafficRow
	for _, kind := range []string{"increment", "reset"} {
		if kind == "reset" {
			for k := range ops {
				for i := range r.Reps {
					ms, err := r.Inc(i, "rkey-"+strconv.Itoa(k), 1)
					if err != nil {
						return nil, err
					}
					if err := r.Deliver(ms...); err != nil {
						return nil, err
					}
				}
			}
			if _, err := r.Heal(50); err != nil {
				return nil, err
			}
		}
		r.Traffic = Traffic{}
		for k := range ops {
			var ms []Msg
			if kind == "increment" {
				ms, err = r.Inc(rng.IntN(3), "key-"+strconv.Itoa(rng.IntN(max(1, ops/10))), 1)
			} else {
				ms, err = r.Delete(rng.IntN(3), "rkey-"+strconv.Itoa(k), nil)
			}
			if err != nil {
				return nil, err
			}
			if err := r.Deliver(ms...); err != nil {
				return nil, err
			}
			if every {
				if _, err := r.Heal(50); err != nil {
					return nil, err
				}
			}
		}
		if _, err := r.Heal(50); err != nil {
			return nil, err
		}
		rows = append(rows, TrafficRow{Op: kind, Regime: regime, Ops: ops, Traffic: r.Traffic})
	}
	return rows, nil
}
