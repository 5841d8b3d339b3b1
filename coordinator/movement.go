package coordinator

import (
	"slices"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/ring"
)

// A range movement (a node bootstrapped, or one was decommissioned) changes
// the natural replicas of the keys whose ranges moved. A replica that
// gained a range got its cells streamed, not the op ids its FBF filters
// would need to recognise a retry: it remembers only the ops it received
// since it became a pending replica. A retry of an update acknowledged
// before the movement that it now leads (under either leader rule: the
// first live replica, or the op's rendezvous draw among the live ones)
// would be counted again. So for one filter window after a movement, the
// leader of an op on a moved key asks the key's replicas before the
// movement as well as its current ones (learnOp's peek): those have the op
// id if the update was acknowledged before, and a replica that has seen it
// sends its cell, which the leader merges with the op id, so that its own
// filter dismisses the retry. The same covers a replica that was one
// before too and now leads an op another replica led (its replication to
// this one may still be a hint).
//
// Streaming the op ids instead would mean exporting every FBF filter's
// younger ids per range (the filters hash op id and key together and
// cannot be split by range; the commit-log segments hold the ids, but
// mixed with every other table and range), and a new wire format; the
// ask reuses the peek issue 19 added and costs one round trip per op led
// on a moved key for a window.

// maxMovements bounds the movements remembered (older ones beyond it are
// forgotten even within their window: one movement at a time is assumed).
const maxMovements = 8

// movement is a range movement this node saw complete: when, and the
// token map before it.
type movement struct {
	at     time.Time
	before *ring.Metadata
}

// NoteRangeMovement tells the coordinator that a range movement completed
// in this node's view: a joining node became normal (this node itself,
// after its bootstrap, included) or a leaving one left; before is the token
// map before it. For one filter window after it, this node asks the
// replicas a key had before the movement, as well as its current ones,
// about an op on a key whose replicas changed before it leads the op (see
// learnOp).
func (c *Coordinator) NoteRangeMovement(before *ring.Metadata) {
	if before == nil {
		return
	}
	c.movesMu.Lock()
	defer c.movesMu.Unlock()
	var moves []movement
	if p := c.moves.Load(); p != nil {
		moves = slices.Clone(*p)
	}
	moves = append(moves, movement{at: c.cfg.Now(), before: before})
	if len(moves) > maxMovements {
		moves = moves[len(moves)-maxMovements:]
	}
	c.moves.Store(&moves)
}

// movedWithin returns the token maps before the range movements this node
// saw within the column's filter window (nil: none).
func (c *Coordinator) movedWithin(fr filterRecovery, u coltype.Update) []*ring.Metadata {
	p := c.moves.Load()
	if p == nil {
		return nil
	}
	w, ok := fr.DedupWindow(u.Table, u.Column)
	if !ok {
		return nil
	}
	now := c.cfg.Now()
	var out []*ring.Metadata
	for _, m := range *p {
		if now.Sub(m.at) < w {
			out = append(out, m.before)
		}
	}
	return out
}

// replicasBefore returns the replicas to ask about an op on a key: its
// natural ones with those it had in the token maps before that are not
// natural now appended, and whether its replicas changed in one of those
// movements (false: natural, unchanged).
func (c *Coordinator) replicasBefore(u coltype.Update, natural []ring.Endpoint, before []*ring.Metadata) (ask []ring.Endpoint, moved bool) {
	s, err := c.cfg.Tables.Strategy(u.Table)
	if err != nil {
		return natural, false
	}
	token := ring.Token(u.Key)
	ask = natural
	cloned := false
	for _, m := range before {
		was := s.Replicas(m, token)
		for _, e := range natural {
			if !hasID(was, e.ID) {
				moved = true // a replica gained the key
			}
		}
		for _, e := range was {
			if !hasID(ask, e.ID) {
				if !cloned {
					ask, cloned = slices.Clone(natural), true
				}
				ask = append(ask, e)
				moved = true // a replica lost the key
			}
		}
	}
	return ask, moved
}

func hasID(es []ring.Endpoint, id string) bool {
	return slices.ContainsFunc(es, func(e ring.Endpoint) bool { return e.ID == id })
}
