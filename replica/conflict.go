package replica

import (
	"fmt"
	"slices"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
)

// Two leaders counting one op, both alive.
//
// An FBF update whose leader stays up can still be counted by a second
// leader: the first leader's replication is lost or delayed (a partition,
// message loss), the client's retry reaches another replica as leader
// (the first looks down to its coordinator), and that replica's filter has
// never seen the op id. Nothing restarted, so nothing is in doubt
// (indoubt.go); each leader's replication reaches the other sooner or
// later, directly or as a hint. A leader's replication of an op it counted
// carries the op's delta (package coordinator's TypeMutation), and the
// replica that receives it asks CountsLedOp whether it led the same op
// and counts it. If so, the leader with the higher counter id takes its
// application back (TakeBackLedOp), as coltype.Decide's second rule has
// two restarted leaders do: the receiver itself, or the sender when the
// receiver answers that it counts the op under the lower id. Whichever of
// the two replications arrives first settles it; the other finds the op
// taken back. The evidence is this node's record of the ops it led: for a
// filter window in this run (recentLed), or in its commit log since its
// last start.

// CountsLedOp reports whether this replica led an op on a cell and still
// counts it, and the counter id it counted it under: led by this run
// within the filter window, or before its last start as its commit log
// shows (an op still in doubt is not: the in-doubt protocol settles it).
func (r *Replica) CountsLedOp(table uint64, key []byte, column string, opID [16]byte) (counters.ID, bool) {
	if !r.OpSeen(table, key, column, opID) {
		// An op this node led is in its filter for as long as it is in
		// the records countsLed reads.
		return counters.ID{}, false
	}
	return r.countsLed(table, key, column, opID)
}

// ApplyCounted applies a leader's replication of an op it counted (the
// mark of package coordinator's TypeMutation) as ApplyMutation does, and
// reports, as CountsLedOp, whether this replica led the same op itself and
// counts it: from the filter's own test-and-add of the op id (a fresh op's
// replication, the common case, reads nothing more), and before applying.
//
// A replication of an op this replica holds in doubt is evidence for its
// settlement: the sender counted a retry of it (coltype.Decide's third
// rule). It is kept with the doubt, and the in_doubt file is written before
// the answer: the sender will not send it again, and by the time the doubt
// is settled the sender may have forgotten leading the op.
func (r *Replica) ApplyCounted(m coltype.Mutation) (counters.ID, bool, error) {
	seen, err := r.applyMutation(m)
	if err != nil {
		return counters.ID{}, false, err
	}
	if r.led.pending.Load() > 0 && r.led.countedElsewhere(m) {
		if err := r.SaveInDoubt(); err != nil {
			return counters.ID{}, false, err
		}
		return counters.ID{}, false, nil
	}
	if !seen {
		return counters.ID{}, false, nil
	}
	id, counts := r.countsLed(m.Table, m.Key, m.Cell.Column, m.OpID)
	return id, counts, nil
}

// countsLed is CountsLedOp once the op is known to be in the filter.
func (r *Replica) countsLed(table uint64, key []byte, column string, opID [16]byte) (counters.ID, bool) {
	k := ledKey{table, column, string(key), opID}
	if r.taken.has(k, r.cfg.Now().UnixNano()) {
		return counters.ID{}, false
	}
	r.led.mu.Lock()
	op, ok := r.led.ops[k]
	r.led.mu.Unlock()
	if ok {
		return op.CounterID, op.status == coltype.OpKept && op.CounterID != counters.ID{}
	}
	if r.ledNow.find(table, column, key, opID, r.cfg.Now().UnixNano()) {
		return r.counterIDs.current, true
	}
	return counters.ID{}, false
}

// TakeBackLedOp takes back an update this replica led and counts, because
// another leader with a lower counter id counts the same op: its delta
// comes off this node's current shard with a compensation record, as for an
// update in doubt (ResolveInDoubt). It returns this replica's copy of the
// cell with the op id, for the other replicas, and false (and does nothing)
// when the replica no longer counts the op.
func (r *Replica) TakeBackLedOp(op coltype.InDoubtOp) (coltype.Mutation, bool, error) {
	t, err := r.table(op.Table)
	if err != nil {
		return coltype.Mutation{}, false, err
	}
	d, ok := t.dedup(op.Column)
	if !ok {
		return coltype.Mutation{}, false, fmt.Errorf("replica: column %s.%s.%s deduplicates no op ids", t.def.Keyspace, t.def.Name, op.Column)
	}
	if _, counts := r.CountsLedOp(op.Table, op.Key, op.Column, op.OpID); !counts {
		return coltype.Mutation{}, false, nil
	}
	k := ledKey{op.Table, op.Column, string(op.Key), op.OpID}
	now := r.cfg.Now()
	if !r.taken.claim(k, now.UnixNano(), now.Add(d.Window()+time.Minute).UnixNano()) {
		return coltype.Mutation{}, false, nil
	}
	if op.OpTime == 0 {
		// The compensation record must be replayed as the decision while the
		// op's own record is: within the window of its time.
		op.OpTime = now.UnixNano()
	}
	u := coltype.Update{Table: op.Table, Key: op.Key, Column: op.Column, Delta: op.Delta, Timestamp: now.UnixMicro(),
		HasOp: true, OpID: op.OpID, OpTime: op.OpTime}
	t.modeMu.RLock()
	err = d.Compensate(leader{r: r, t: t}, u)
	t.modeMu.RUnlock()
	if err != nil {
		r.taken.remove(k)
		return coltype.Mutation{}, false, fmt.Errorf("replica: take back op %x on %s.%s: %w", op.OpID, t.def.Keyspace, t.def.Name, err)
	}
	r.led.mu.Lock()
	if e, ok := r.led.ops[k]; ok && e.status == coltype.OpKept {
		e.status = coltype.OpDropped
	}
	r.led.mu.Unlock()
	r.stats.conflictsTakenBack.Add(1)
	m := coltype.Mutation{Table: op.Table, Key: op.Key, HasOp: true, OpID: op.OpID, OpTime: op.OpTime}
	m.Cell.Column = op.Column
	rw, found, err := t.read(row.Key{Token: ring.Token(op.Key), Partition: op.Key})
	if err != nil {
		return coltype.Mutation{}, true, err
	}
	if found {
		if c, ok := rw.Cell(op.Column); ok {
			m.Cell = c
		}
	}
	return m, true, nil
}

// countedElsewhere records a counted replication from another leader of an
// op this replica holds in doubt (see ApplyCounted), and reports whether
// the op is in doubt here.
func (l *ledOps) countedElsewhere(m coltype.Mutation) bool {
	id, ok := coltype.ReplicatedLeader(m.Cell)
	l.mu.Lock()
	defer l.mu.Unlock()
	op, found := l.ops[ledKey{m.Table, m.Cell.Column, string(m.Key), m.OpID}]
	if !found || op.status != coltype.OpPending {
		return false
	}
	if ok && id != op.CounterID && !slices.Contains(op.CountedBy, id) {
		op.CountedBy = append(op.CountedBy, id)
		l.dirty = true
	}
	return true
}
