package coordinator

import (
	"context"
	"fmt"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/transport"
)

// Two leaders counting one op, both alive (see replica/conflict.go): a
// replica that receives a leader's replication of an op it led and counts
// itself compares counter ids, and the leader with the higher one takes
// its application back, the receiver at once, or the sender when the
// receiver's answer asks it to (answerTakeBack). A leader's replication
// reaches the other leader directly, or as a hint once a partition heals,
// so the first of the two to arrive settles the op.

// answerTakeBack is the answer to a mutation whose receiver counts the same
// op under a lower counter id: the sender takes its application back.
const answerTakeBack = 1

// conflictStore is implemented by stores that know which ops they led and
// count (replica.CountsLedOp, replica.TakeBackLedOp).
type conflictStore interface {
	CountsLedOp(table uint64, key []byte, column string, opID [16]byte) (counters.ID, bool)
	ApplyCounted(m coltype.Mutation) (counters.ID, bool, error)
	TakeBackLedOp(op coltype.InDoubtOp) (coltype.Mutation, bool, error)
}

// handleMutation applies a replicated mutation, and settles a conflict
// with the sender when both counted its op.
func (c *Coordinator) handleMutation(ctx context.Context, body []byte) (transport.Message, error) {
	mu, err := DecodeMutation(body)
	if err != nil {
		return transport.Message{}, err
	}
	mine, theirs, conflict, err := c.applyCounted(mu)
	if err != nil {
		return transport.Message{}, err
	}
	c.stats.mutations.Add(1)
	if !conflict {
		return transport.Message{Type: TypeMutation}, nil
	}
	if mine.Compare(theirs) > 0 {
		c.takeBack(ctx, mu, fmt.Sprintf("leader %s counts it too, with the lower counter id", theirs))
		return transport.Message{Type: TypeMutation}, nil
	}
	c.logger.Info("an FBF update counted by two leaders: the other takes its application back", "table", mu.Table,
		"column", mu.Cell.Column, "op", fmt.Sprintf("%x", mu.OpID), "counter_id", mine.String(), "other", theirs.String())
	return transport.Message{Type: TypeMutation, Body: []byte{answerTakeBack}}, nil
}

// applyCounted applies a mutation and reports whether it is another
// leader's application of an op this node led and counts, with both
// counter ids.
func (c *Coordinator) applyCounted(m coltype.Mutation) (mine, theirs counters.ID, conflict bool, err error) {
	cs, ok := c.cfg.Store.(conflictStore)
	if !ok || !counted(m) {
		return mine, theirs, false, c.applyMutation(m)
	}
	if c.refused(m.Table) {
		return mine, theirs, false, errWritesRefused
	}
	mine, counts, err := cs.ApplyCounted(m)
	if err != nil || !counts {
		return mine, theirs, false, err
	}
	theirs, ok = coltype.ReplicatedLeader(m.Cell)
	return mine, theirs, ok && mine != theirs, nil
}

// stillCounted reports whether this node still counts the op of a
// replication of its own it hinted: one it took back since (here, or after
// settling it in doubt) must not make a replica take its own back.
func (c *Coordinator) stillCounted(m coltype.Mutation) bool {
	cs, ok := c.cfg.Store.(conflictStore)
	if !ok {
		return false
	}
	_, counts := cs.CountsLedOp(m.Table, m.Key, m.Cell.Column, m.OpID)
	return counts
}

// mutationAnswered reads a replica's answer to a mutation this node sent,
// a leader's replication or a delivered hint.
func (c *Coordinator) mutationAnswered(ctx context.Context, m coltype.Mutation, answer []byte) {
	if len(answer) == 0 || !counted(m) {
		return
	}
	if answer[0] != answerTakeBack {
		c.logger.Warn("unknown answer to a mutation", "answer", fmt.Sprintf("%x", answer))
		return
	}
	c.takeBack(ctx, m, "a replica counts it too, with the lower counter id")
}

// takeBack takes back this node's application of a counted op (m is its
// replication) and sends the result to the other natural replicas, one at
// a time (a rare path; a stepped test replays the order).
func (c *Coordinator) takeBack(ctx context.Context, m coltype.Mutation, why string) {
	cs, ok := c.cfg.Store.(conflictStore)
	if !ok {
		return
	}
	op := coltype.InDoubtOp{Table: m.Table, Key: m.Key, Column: m.Cell.Column, OpID: m.OpID, OpTime: m.OpTime, Delta: m.Log.Delta}
	mu, ok, err := cs.TakeBackLedOp(op)
	if err != nil {
		c.logger.Error("taking back an FBF update another leader counted failed", "table", m.Table, "op", fmt.Sprintf("%x", m.OpID), "err", err)
		return
	}
	if !ok {
		return // taken back already, or no longer known
	}
	c.stats.conflictsTakenBack.Add(1)
	c.logger.Warn("an FBF update counted by two leaders: this node's application taken back", "table", m.Table,
		"column", m.Cell.Column, "op", fmt.Sprintf("%x", m.OpID), "delta", m.Log.Delta, "why", why)
	natural, _, _, err := c.placement(m.Table, m.Key, One)
	if err != nil {
		c.logger.Error("replicating a take-back failed", "table", m.Table, "err", err)
		return
	}
	self := c.cfg.Cluster.Self().ID
	acks := make(chan string, 1)
	rctx, cancel := c.cfg.WithTimeout(context.WithoutCancel(ctx), c.cfg.CounterWriteTimeout)
	defer cancel()
	for _, e := range natural {
		if e.ID != self {
			c.replicate(rctx, e, mu, acks)
			<-acks
		}
	}
}
