package coltype

import (
	"errors"
	"fmt"
	"slices"

	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/row"
)

// The vocabulary of the in-doubt protocol (see package replica): what a
// leader that restarted after an unclean stop asks the other replicas about
// the updates of a Deduplicator column it led just before, and how it
// decides. The replica and the coordinator share it.

// ErrInDoubt is returned by reads and leader updates of a cell that holds
// an update this node led before an unclean stop and has not resolved yet.
var ErrInDoubt = errors.New("replica: the cell holds an update in doubt since this node's unclean restart")

// ErrOpInDoubt is returned by a leader update that is a retry of an
// update this node holds in doubt: it is dismissed once the update is
// settled, and until then no other leader should count it either.
var ErrOpInDoubt = fmt.Errorf("%w: the update is a retry of it", ErrInDoubt)

// OpStatus is what a replica knows of an op it may have led.
type OpStatus uint8

const (
	// OpNotLed: this replica did not lead the op within its recent log.
	OpNotLed OpStatus = iota
	// OpPending: it led the op before an unclean stop and has not resolved it.
	OpPending
	// OpKept: it led the op and counts it.
	OpKept
	// OpDropped: it led the op and took it back, since another leader counted it.
	OpDropped
)

// String names the status.
func (s OpStatus) String() string {
	switch s {
	case OpNotLed:
		return "not-led"
	case OpPending:
		return "pending"
	case OpKept:
		return "kept"
	case OpDropped:
		return "dropped"
	}
	return fmt.Sprintf("OpStatus(%d)", uint8(s))
}

// InDoubtOp is an update a replica led: the cell, the op id, the shard it
// was counted in and the delta it added.
type InDoubtOp struct {
	Table     uint64
	Key       []byte
	Column    string
	OpID      [16]byte
	OpTime    int64 // unix nanoseconds
	CounterID counters.ID
	Clock     int64
	Delta     int64
	// CountedBy are the other leaders (their counter ids) whose counted
	// replication of the same op reached this replica while it held the op
	// in doubt: each of them counted a retry of it (see Decide's third
	// rule). Kept with the doubt, not sent in questions.
	CountedBy []counters.ID
}

// OpAnswer is a replica's answer about one op on one cell.
type OpAnswer struct {
	// Seen: the op id is in this replica's filter (it led the op or
	// received it with replicated state).
	Seen bool
	// Status, CounterID and Clock: whether this replica led the op, and if
	// so the shard and clock it counted it at.
	Status    OpStatus
	CounterID counters.ID
	Clock     int64
	// Cell is this replica's copy of the cell (Found false: none).
	Cell  row.Cell
	Found bool
}

// String is the answer in brief, for logs: the status, with the counter
// id's first bytes and the clock when the replica led the op, and whether
// its filter has the op id.
func (a OpAnswer) String() string {
	out := a.Status.String()
	if a.Status != OpNotLed {
		out += fmt.Sprintf(" %s@%d", a.CounterID.String()[:8], a.Clock)
	}
	if a.Seen {
		out += " seen"
	}
	return out
}

// Decide says whether a leader keeps an update it holds in doubt, given
// the answers of every other natural replica of the cell. It drops the
// update (keep false) when another leader counted the same op:
//
//  1. a replica led the op and kept it;
//  2. a replica holds the op in doubt too and its counter id is lower;
//  3. another leader's counted replication of the op reached this replica
//     while it held the op in doubt (self.CountedBy), and no answer shows
//     that leader took it back or holds it in doubt too (rule 2 decides
//     then): the other leader counts it, though it may have forgotten
//     leading it by now (its record of the ops it led lasts one filter
//     window, and a settlement can come later: a replica down, restarts);
//  4. a replica's filter has the op id and its cell holds no shard, of
//     this leader or of a replica that led the op, at or past the clock
//     that counted it: the op reached it from a leader that did not answer
//     as one (it never restarted), so that leader counts it.
//
// Otherwise the update is kept.
func Decide(self InDoubtOp, answers []OpAnswer) (keep bool, reason string) {
	if drop, reason := DecideEarly(self, answers); drop {
		return false, reason
	}
	for _, id := range self.CountedBy {
		if !slices.ContainsFunc(answers, func(a OpAnswer) bool {
			return a.CounterID == id && (a.Status == OpDropped || a.Status == OpPending)
		}) {
			return false, fmt.Sprintf("leader %s replicated it counted while it was in doubt here", id)
		}
	}
	type counted struct {
		id    counters.ID
		clock int64
	}
	leaders := []counted{{self.CounterID, self.Clock}}
	for _, a := range answers {
		if a.Status != OpNotLed {
			leaders = append(leaders, counted{a.CounterID, a.Clock})
		}
	}
	for _, a := range answers {
		if !a.Seen || !a.Found || a.Cell.Tombstone {
			continue
		}
		ctx, err := counters.Decode(a.Cell.Value)
		if err != nil {
			continue
		}
		explained := false
		for _, l := range leaders {
			if s, ok := ctx.Shard(l.id); ok && s.Clock >= l.clock {
				explained = true
				break
			}
		}
		if !explained {
			return false, "a replica holds the op id from another leader"
		}
	}
	return true, "no other leader counted it"
}

// DecideEarly applies the rules of Decide that one answer settles alone,
// whatever the replicas that have not answered would say: another leader
// counts the op (rule 1), or holds it in doubt too with the lower counter
// id (rule 2, which that leader, asking in turn, resolves the other way).
// It reports drop true when one of them takes the update back. A leader
// that cannot reach every natural replica of a cell settles such updates
// at once instead of waiting, so that the evidence (the other leader's
// record of the ops it led, its filter) is read while it lasts: it is
// kept for one filter window. Keeping an update, and rule 3, need every
// answer: an unanswered replica may be the leader whose shard explains
// the op id a replica holds, or one that counted the op.
func DecideEarly(self InDoubtOp, answers []OpAnswer) (drop bool, reason string) {
	for _, a := range answers {
		switch a.Status {
		case OpKept:
			return true, fmt.Sprintf("leader %s counts it", a.CounterID)
		case OpPending:
			if a.CounterID.Compare(self.CounterID) < 0 {
				return true, fmt.Sprintf("leader %s holds it in doubt too and has the lower id", a.CounterID)
			}
		}
	}
	return false, ""
}

// ReplicatedLeader returns the counter id of the shard a leader's counted
// replication carries: such a mutation's cell holds the leader's shard
// alone. It reports false for any other cell.
func ReplicatedLeader(cell row.Cell) (counters.ID, bool) {
	if cell.Tombstone {
		return counters.ID{}, false
	}
	ctx, err := counters.Decode(cell.Value)
	if err != nil {
		return counters.ID{}, false
	}
	shards := ctx.Shards()
	if len(shards) != 1 {
		return counters.ID{}, false
	}
	return shards[0].ID, true
}
