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

// SampleResult is the outcome of Sample.
type SampleResult struct {
	Issued  int64 // Σ increments issued
	Sampled int64 // Σ values the sampler read and reset
	Samples int   // resets made by the sampler
	Final   int64 // value every replica reads after healing
	Lost    uint64
	Dup     uint64
}

// Sample is sample-and-reset accounting: increments led by random replicas
// while a sampler, every `every` increments, reads the counter at a random
// replica with its reset context and resets exactly what it read (DELETE
// with the context at ALL, led by another random replica); the increments'
// mutations are lost (p = 0.1, anti-entropy resends), duplicated (p = 0.1)
// and delivered in random order; anti-entropy rounds run now and then with
// a replica missing. After healing, the samples plus the final value must
// equal what was issued.
//
// The sampler's DELETE must be acknowledged everywhere (ALL) before its
// next read, or that read must be served by the replica that led it: a
// read from a replica its last reset has not reached counts again what
// that reset cancels.
func Sample(dir string, incs, every int, seed uint64) (SampleResult, error) {
	var res SampleResult
	d, err := os.MkdirTemp(dir, "sample-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(d)
	r, err := OpenSync(d, 3, resetcol.TypeName, seed, commitlog.SyncPeriodic)
	if err != nil {
		return res, err
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(seed, 17))
	var inFlight []Msg
	flush := func(n int) error {
		rng.Shuffle(len(inFlight), func(i, j int) { inFlight[i], inFlight[j] = inFlight[j], inFlight[i] })
		n = min(n, len(inFlight))
		for _, m := range inFlight[:n] {
			switch x := rng.Float64(); {
			case x < 0.1:
				res.Lost++
			case x < 0.2:
				res.Dup++
				if err := r.Deliver(m, m); err != nil {
					return err
				}
			default:
				if err := r.Deliver(m); err != nil {
					return err
				}
			}
		}
		inFlight = inFlight[n:]
		return nil
	}
	for i := 1; i <= incs; i++ {
		d := int64(1 + rng.IntN(5))
		ms, err := r.Inc(rng.IntN(3), "k", d)
		if err != nil {
			return res, err
		}
		res.Issued += d
		inFlight = append(inFlight, ms...)
		if err := flush(rng.IntN(3)); err != nil {
			return res, err
		}
		if rng.IntN(10) == 0 {
			if _, err := r.Sync(rng.IntN(3)); err != nil {
				return res, err
			}
		}
		if i%every == 0 {
			at := rng.IntN(3)
			cell, found, err := r.Reps[at].Read(TableID, []byte("k"), "c")
			if err != nil || !found {
				continue
			}
			v, err := resetcol.Type{}.Value(cell)
			if err != nil {
				return res, err
			}
			ctx, err := resetcol.Type{}.ContextOf(cell)
			if err != nil {
				return res, err
			}
			ms, err := r.Delete(rng.IntN(3), "k", ctx)
			if err != nil {
				return res, err
			}
			res.Sampled += v
			res.Samples++
			// The DELETE is at ALL: acknowledged by every replica (one
			// holding it behind a gap does not acknowledge it until
			// anti-entropy fills the gap; the retry is a replay), so the
			// sampler's next read, wherever, includes it.
			for _, m := range ms {
				for attempt := 0; ; attempt++ {
					held := r.Held
					if err := r.Deliver(m); err != nil {
						return res, err
					}
					if r.Held == held {
						break
					}
					if attempt == 100 {
						return res, errors.New("a reset stayed held")
					}
					if _, err := r.Sync(); err != nil {
						return res, err
					}
				}
			}
		}
	}
	if err := flush(len(inFlight)); err != nil {
		return res, err
	}
	if ok, err := r.Heal(100); err != nil || !ok {
		return res, errors.Join(err, errors.New("anti-entropy did not settle"))
	}
	vals, err := r.Values("k")
	if err != nil {
		return res, err
	}
	for _, v := range vals[1:] {
		if v != vals[0] {
			return res, fmt.Errorf("replicas disagree after healing: %v", vals)
		}
	}
	res.Final = vals[0]
	return res, nil
}

// PartitionRow is the outbox state at one point of Partition.
type PartitionRow struct {
	Phase   string
	Pending int // ops in outboxes, over the replicas
	Reads   []int64
}

// Partition cuts replica 2 off (its mutations lost, its anti-entropy
// exchanges failing) while incs increments and a reset every 100 are led
// by replicas 0 and 1, then heals it; it reports the outboxes' length.
func Partition(dir string, incs int, seed uint64) ([]PartitionRow, error) {
	d, err := os.MkdirTemp(dir, "partition-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(d)
	r, err := OpenSync(d, 3, resetcol.TypeName, seed, commitlog.SyncPeriodic)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(seed, 19))
	pending := func() int {
		n := 0
		for _, rep := range r.Reps {
			n += resetcol.ReplicaStats(rep).Pending
		}
		return n
	}
	row := func(phase string) (PartitionRow, error) {
		vals, err := r.Values("k")
		return PartitionRow{Phase: phase, Pending: pending(), Reads: vals}, err
	}
	var out []PartitionRow
	for i := 1; i <= incs; i++ {
		var ms []Msg
		var err error
		if i%100 == 0 {
			ms, err = r.Delete(rng.IntN(2), "k", nil)
		} else {
			ms, err = r.Inc(rng.IntN(2), "k", 1)
		}
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if m.To != 2 {
				if err := r.Deliver(m); err != nil {
					return nil, err
				}
			}
		}
		if i%10 == 0 {
			if _, err := r.Sync(2); err != nil {
				return nil, err
			}
		}
	}
	p, err := row("partitioned")
	if err != nil {
		return nil, err
	}
	out = append(out, p)
	if ok, err := r.Heal(100); err != nil || !ok {
		return nil, errors.Join(err, errors.New("anti-entropy did not settle"))
	}
	p, err = row("healed")
	return append(out, p), err
}
