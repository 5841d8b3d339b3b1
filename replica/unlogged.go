package replica

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// Unlogged deltas.
//
// An FBF leader adds an update to its in-memory shard with a compare-and-
// swap and logs the new shard afterwards, holding no lock across the
// append: two updates of one cell, op A at clock c and op B at c+1, can
// reach the commit log in the other order. If the node stops (a kill, a
// power cut) after B's record and before A's, B's record, the whole shard,
// holds A's delta while no record holds A's op id: after the restart A is
// not in doubt and no filter has its id, and the client's retry of A (it
// had no answer: A's record was never written, so A was neither
// acknowledged nor replicated) is counted again, here or at another
// leader. A leader's record therefore carries the ops of the updates
// before it that were not logged yet (coltype/counter's shardState,
// commitlog.Record.Carried), and the replay takes them as led ops of their
// own: in the filter, in doubt after an unclean stop, settled as any other.
// For a log written without them, or an update without an op id, an
// unclean start in batch or group mode takes back such a delta: in the
// records of the shard the node led under before the start, a clock
// missing between two present ones, and carried by none, is an update
// whose record was lost, and its delta is the later record's count less
// its own delta, the carried deltas between them and the earlier record's
// count. The take-back is a compensation
// under the new counter id, as for an update in doubt that another leader
// counted; the retry, if any, counts the update once. In periodic mode a
// record can also be lost after its update was acknowledged (its append
// returned before the fsync) and taking it back would lose it: nothing is
// done there.

// shardTrails collects, during replay, the clocks of the FBF shards the
// node led under the counter id it had before this start.
type shardTrails struct {
	id    counters.ID
	cells map[trailCell][]trailStep
	// carried are, per cell, the deltas of the ops led records carried
	// (commitlog.Record.Carried) by the clock each gave the shard: a
	// record names them, so a gap they fill is not unlogged.
	carried map[trailCell]map[int64]int64
}

type trailCell struct {
	table  uint64
	column string
	key    string
}

type trailStep struct {
	clock, count int64
	delta        int64
	hasDelta     bool // the record says which delta it added (an op id's led record)
}

// note records one replayed record of a deduplicating column.
func (st *shardTrails) note(rec commitlog.Record) {
	c := trailCell{rec.Table, rec.Column, string(rec.Key)}
	switch rec.Kind {
	case commitlog.PayloadTombstone:
		delete(st.cells, c) // the shard starts again from nothing
		delete(st.carried, c)
		return
	case commitlog.PayloadShard:
	default:
		return
	}
	ctx, err := counters.Decode(rec.Payload)
	if err != nil {
		return
	}
	shards := ctx.Shards()
	if len(shards) != 1 || shards[0].ID != st.id {
		return
	}
	s := trailStep{clock: shards[0].Clock, count: shards[0].Count}
	if rec.Led {
		s.delta, s.hasDelta = rec.Delta, true
		if rec.Compensation {
			s.delta = -rec.Delta
		}
	}
	if st.cells == nil {
		st.cells = map[trailCell][]trailStep{}
	}
	st.cells[c] = append(st.cells[c], s)
	for _, o := range rec.Carried {
		if st.carried == nil {
			st.carried = map[trailCell]map[int64]int64{}
		}
		if st.carried[c] == nil {
			st.carried[c] = map[int64]int64{}
		}
		d := o.Delta
		if o.Compensation {
			d = -d
		}
		st.carried[c][o.Clock] = d
	}
}

// unlogged is a delta a recorded shard holds without its record.
type unlogged struct {
	cell           trailCell
	after, through int64 // the clocks of the records on either side
	delta          int64
}

// gaps lists the deltas the records hold without their own records.
func (st *shardTrails) gaps() []unlogged {
	var out []unlogged
	for c, steps := range st.cells {
		slices.SortFunc(steps, func(a, b trailStep) int { return cmp.Compare(a.clock, b.clock) })
		for i := 1; i < len(steps); i++ {
			prev, next := steps[i-1], steps[i]
			if next.clock <= prev.clock+1 || !next.hasDelta {
				continue
			}
			d := next.count - next.delta - prev.count
			for clock, cd := range st.carried[c] {
				if clock > prev.clock && clock < next.clock {
					d -= cd // named by a later record: not unlogged
				}
			}
			if d != 0 {
				out = append(out, unlogged{cell: c, after: prev.clock, through: next.clock, delta: d})
			}
		}
	}
	slices.SortFunc(out, func(a, b unlogged) int {
		return cmp.Or(cmp.Compare(a.cell.table, b.cell.table), cmp.Compare(a.cell.column, b.cell.column),
			cmp.Compare(a.cell.key, b.cell.key), cmp.Compare(a.after, b.after))
	})
	return out
}

// takeBackUnlogged compensates, after an unclean replay in batch or group
// mode, every delta the old shard's records hold without their own
// records (see above).
func (r *Replica) takeBackUnlogged(st *shardTrails) error {
	if r.cfg.CommitLog.Sync == commitlog.SyncPeriodic {
		return nil
	}
	for _, g := range st.gaps() {
		t, err := r.table(g.cell.table)
		if err != nil {
			continue // dropped since
		}
		d, ok := t.dedup(g.cell.column)
		if !ok {
			continue
		}
		// A record of the gap may be gone with a segment the log released
		// (its op ids older than the window): it was flushed first, and an
		// SSTable holds the shard at its clock or past it.
		flushed, err := t.flushedClock([]byte(g.cell.key), g.cell.column, st.id)
		if err != nil {
			return err
		}
		if flushed > g.after {
			continue
		}
		u := coltype.Update{Table: g.cell.table, Key: []byte(g.cell.key), Column: g.cell.column, Delta: g.delta, Timestamp: r.cfg.Now().UnixMicro()}
		t.modeMu.RLock()
		err = d.Compensate(leader{r: r, t: t}, u)
		t.modeMu.RUnlock()
		if err != nil {
			return fmt.Errorf("replica: take back an unlogged update of %s.%s: %w", t.def.Keyspace, t.def.Name, err)
		}
		r.logger.Warn("an FBF update counted in a later record of this node's shard had no record of its own (the node stopped before writing it): taken back; its retry, if any, counts it",
			"table", t.def.Keyspace+"."+t.def.Name, "column", g.cell.column, "counter_id", st.id.String(),
			"clocks", fmt.Sprintf("%d..%d", g.after, g.through), "delta", g.delta)
	}
	return nil
}

// flushedClock is the clock of a counter id's shard of a cell in the
// table's SSTables alone (0: none).
func (t *table) flushedClock(key []byte, column string, id counters.ID) (int64, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var clock int64
	for _, s := range t.view.sstables {
		r, ok, err := s.Get(row.Key{Token: ring.Token(key), Partition: key})
		if err != nil {
			return 0, fmt.Errorf("table %s.%s: %w", t.def.Keyspace, t.def.Name, err)
		}
		if !ok {
			continue
		}
		c, ok := r.Cell(column)
		if !ok || c.Tombstone {
			continue
		}
		ctx, err := counters.Decode(c.Value)
		if err != nil {
			continue
		}
		if sh, ok := ctx.Shard(id); ok {
			clock = max(clock, sh.Clock)
		}
	}
	return clock, nil
}
