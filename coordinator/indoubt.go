package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/replica"
	"github.com/idemkv/idemkv/transport"
)

// TypeOpStatus asks a replica what it knows of an op on one cell, for a
// leader resolving an update it holds in doubt since an unclean restart
// (see replica.Decide). Request: table (uint64), key, column (length-
// prefixed), op id (16 bytes). Answer: seen (bool), status (uint8),
// counter id (16 bytes), clock (int64), found (bool), then the cell when
// found.
const TypeOpStatus transport.Type = 21

// InDoubtGrace is how long a restarted node waits to see as many natural
// replicas of a cell as its replication factor asks before it settles the
// cell's updates in doubt with the replicas it knows.
const InDoubtGrace = 30 * time.Second

// inDoubtParallel bounds the updates in doubt settled at once.
const inDoubtParallel = 16

// inDoubtStore is implemented by stores whose column types can leave
// updates in doubt after an unclean restart (FBF counters).
type inDoubtStore interface {
	InDoubt() []replica.InDoubtOp
	OpStatus(table uint64, key []byte, column string, opID [16]byte) (replica.OpAnswer, error)
	ResolveInDoubt(op replica.InDoubtOp, keep bool) (replica.Mutation, error)
}

// ResolveInDoubt tries once to resolve every update the local replica
// holds in doubt: it asks every other natural replica of the update's cell
// what it knows of the op, decides with replica.Decide, settles the update
// and sends the cell (with the op id) to the other replicas. An update
// some natural replica of which is down or does not answer stays in doubt.
// It returns how many remain.
func (c *Coordinator) ResolveInDoubt(ctx context.Context) int {
	st, ok := c.cfg.Store.(inDoubtStore)
	if !ok {
		return 0
	}
	c.resolverStart.CompareAndSwap(nil, c.cfg.Now())
	var (
		mu        sync.Mutex
		remaining int
		wg        sync.WaitGroup
		sem       = make(chan struct{}, inDoubtParallel)
	)
	for _, op := range st.InDoubt() {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.resolveOne(ctx, st, op); err != nil {
				c.logger.Debug("update in doubt not resolved yet", "table", op.Table, "op", fmt.Sprintf("%x", op.OpID), "err", err)
				mu.Lock()
				remaining++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return remaining
}

func (c *Coordinator) resolveOne(ctx context.Context, st inDoubtStore, op replica.InDoubtOp) error {
	natural, _, _, err := c.placement(op.Table, op.Key, One)
	if err != nil {
		return err
	}
	// A node that has just restarted may not know the whole ring yet: the
	// natural replicas it sees are then too few, and one that counted the
	// op could be missing. It waits until it sees the replication factor,
	// or, past a grace period, every endpoint it knows (a ring smaller than
	// its replication factor).
	s, err := c.cfg.Tables.Strategy(op.Table)
	if err != nil {
		return err
	}
	want := s.ReplicationFactor()
	if c.cfg.Now().Sub(c.resolverStart.Load().(time.Time)) > InDoubtGrace {
		want = min(want, len(c.cfg.Cluster.Metadata().Endpoints()))
	}
	if len(natural) < want {
		return fmt.Errorf("%d natural replicas known of %d", len(natural), want)
	}
	self := c.cfg.Cluster.Self().ID
	answers := make([]replica.OpAnswer, 0, len(natural))
	for _, e := range natural {
		if e.ID == self {
			continue
		}
		if !c.cfg.Cluster.IsUp(e.ID) {
			return fmt.Errorf("replica %s is down", e.ID)
		}
		addr, ok := c.cfg.Cluster.Addr(e.ID)
		if !ok {
			return fmt.Errorf("replica %s has no address", e.ID)
		}
		rctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.ReadTimeout)
		resp, err := c.cfg.Transport.Request(rctx, addr, transport.Message{Type: TypeOpStatus, Body: encodeOpStatusRequest(op)})
		cancel()
		if err != nil {
			return fmt.Errorf("ask %s: %w", e.ID, err)
		}
		a, err := decodeOpAnswer(resp.Body)
		if err != nil {
			return fmt.Errorf("answer of %s: %w", e.ID, err)
		}
		answers = append(answers, a)
	}
	keep, reason := replica.Decide(op, answers)
	m, err := st.ResolveInDoubt(op, keep)
	if err != nil {
		return err
	}
	c.logger.Info("update in doubt resolved", "table", op.Table, "column", op.Column, "op", fmt.Sprintf("%x", op.OpID),
		"delta", op.Delta, "kept", keep, "why", reason)
	c.stats.inDoubtResolved.Add(1)
	if !keep {
		c.stats.inDoubtDropped.Add(1)
	}
	// Every other replica gets the decision and the op id (a hint if it
	// cannot be reached), so that no filter can miss the op any more.
	acks := make(chan string, len(natural))
	rctx, rcancel := c.cfg.WithTimeout(context.WithoutCancel(ctx), c.cfg.CounterWriteTimeout)
	defer rcancel()
	var wg sync.WaitGroup
	for _, e := range natural {
		if e.ID == self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.replicate(rctx, e, m, acks)
		}()
	}
	wg.Wait()
	return nil
}

// RunInDoubtResolver resolves the local replica's updates in doubt every
// interval until none remains or ctx ends; it returns when done.
func (c *Coordinator) RunInDoubtResolver(ctx context.Context, interval time.Duration) {
	st, ok := c.cfg.Store.(inDoubtStore)
	if !ok || len(st.InDoubt()) == 0 {
		return
	}
	c.resolverStart.Store(c.cfg.Now())
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if c.ResolveInDoubt(ctx) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *Coordinator) handleOpStatus(body []byte) (transport.Message, error) {
	st, ok := c.cfg.Store.(inDoubtStore)
	if !ok {
		return transport.Message{}, errors.New("coordinator: this node's store keeps no op status")
	}
	d := newDec(body)
	table, key, column := d.u64(), d.bytes(), d.str()
	var op [16]byte
	copy(op[:], d.take(16))
	if err := d.end(); err != nil {
		return transport.Message{}, err
	}
	a, err := st.OpStatus(table, key, column, op)
	if err != nil {
		return transport.Message{}, err
	}
	return transport.Message{Type: TypeOpStatus, Body: encodeOpAnswer(a)}, nil
}

func encodeOpStatusRequest(op replica.InDoubtOp) []byte {
	e := newEnc()
	e.u64(op.Table)
	e.bytes(op.Key)
	e.str(op.Column)
	e.b = append(e.b, op.OpID[:]...)
	return e.b
}

func encodeOpAnswer(a replica.OpAnswer) []byte {
	e := newEnc()
	e.boolean(a.Seen)
	e.u8(uint8(a.Status))
	e.b = append(e.b, a.CounterID[:]...)
	e.i64(a.Clock)
	e.boolean(a.Found)
	if a.Found {
		e.cell(a.Cell)
	}
	return e.b
}

func decodeOpAnswer(b []byte) (replica.OpAnswer, error) {
	d := newDec(b)
	var a replica.OpAnswer
	a.Seen = d.boolean()
	a.Status = replica.OpStatus(d.u8())
	if a.Status > replica.OpDropped {
		d.fail("op status %d", a.Status)
	}
	copy(a.CounterID[:], d.take(counters.IDLen))
	a.Clock = d.i64()
	a.Found = d.boolean()
	if a.Found {
		a.Cell = d.cell()
	}
	return a, d.end()
}
