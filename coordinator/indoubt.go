package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/transport"
)

// TypeOpStatus asks a replica what it knows of an op on one cell, for a
// leader resolving an update it holds in doubt since an unclean restart
// (see coltype.Decide). Request: table (uint64), key, column (length-
// prefixed), op id (16 bytes), then optionally a mode (uint8; 0 or absent:
// reserve the op for the asker; 1, peek: do not, see learnOp; 2, settle:
// reserve it and keep the evidence the answer shows until the asker's
// decision arrives, replica.OpSettle). Answer: seen (bool),
// status (uint8), counter id (16 bytes), clock (int64), found (bool), then
// the cell when found.
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
	InDoubt() []coltype.InDoubtOp
	OpStatus(table uint64, key []byte, column string, opID [16]byte) (coltype.OpAnswer, error)
	ResolveInDoubt(op coltype.InDoubtOp, keep bool) (coltype.Mutation, error)
}

// ResolveInDoubt tries once to settle every update the local replica
// holds in doubt, one cell at a time: it asks every other natural replica
// of the cell it can reach what it knows of each op, decides each with
// coltype.Decide, and once every update of the cell is settled sends the
// cell (once per op id, so that every filter learns every op) to the other
// replicas. A cell's updates are sent together because the cell carries
// all of them: sending it after settling one would show the others to the
// replicas before they are asked. An update can be taken back before
// every natural replica has answered, when one answer settles it
// (coltype.DecideEarly: another leader counts the op); keeping one needs
// every answer, so a cell some natural replica of which is down or does
// not answer stays in doubt until it does. It returns how many updates
// remain.
func (c *Coordinator) ResolveInDoubt(ctx context.Context) int {
	st, ok := c.cfg.Store.(inDoubtStore)
	if !ok {
		return 0
	}
	c.resolverStart.CompareAndSwap(nil, c.cfg.Now())
	cells := map[inDoubtCell][]coltype.InDoubtOp{}
	var order []inDoubtCell
	for _, op := range st.InDoubt() {
		k := inDoubtCell{op.Table, string(op.Key)}
		if _, ok := cells[k]; !ok {
			order = append(order, k)
		}
		cells[k] = append(cells[k], op)
	}
	var (
		mu        sync.Mutex
		remaining int
		wg        sync.WaitGroup
		sem       = make(chan struct{}, inDoubtParallel)
	)
	sv, saves := st.(inDoubtSaver)
	if saves && len(order) > inDoubtParallel {
		// A long round saves what it settled as it goes: a node killed in
		// the middle of one would ask about all of it again.
		done := make(chan struct{})
		defer close(done)
		go func() {
			t := time.NewTicker(inDoubtSaveEvery)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					c.saveInDoubt(sv)
				}
			}
		}()
	}
	for _, k := range order {
		ops := cells[k]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if left, err := c.resolveCell(ctx, st, k, ops); err != nil {
				c.logger.Debug("updates in doubt not settled yet", "table", ops[0].Table, "updates", left, "err", err)
				mu.Lock()
				remaining += left
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if saves {
		// What is left, so that a restart neither forgets it (its led
		// records leave the log a window later) nor asks again about what
		// was settled.
		c.saveInDoubt(sv)
	}
	return remaining
}

// inDoubtSaveEvery is how often a long round of settlements saves the
// updates still in doubt.
const inDoubtSaveEvery = 250 * time.Millisecond

func (c *Coordinator) saveInDoubt(sv inDoubtSaver) {
	if err := sv.SaveInDoubt(); err != nil {
		c.logger.Error("writing the updates in doubt left failed; a restart may ask about settled ones again", "err", err)
	}
}

// inDoubtSaver is implemented by stores that keep their updates in doubt
// in a file (replica.SaveInDoubt).
type inDoubtSaver interface{ SaveInDoubt() error }

// inDoubtCell names a partition holding updates in doubt.
type inDoubtCell struct {
	table uint64
	key   string
}

// settledUnsent are the mutations of updates in doubt settled before the
// rest of their cell's (coltype.DecideEarly), sent with the cell once its
// last update is settled.
type settledUnsent struct {
	mu    sync.Mutex
	cells map[inDoubtCell][]coltype.Mutation
}

func (u *settledUnsent) add(k inDoubtCell, ms []coltype.Mutation) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cells == nil {
		u.cells = map[inDoubtCell][]coltype.Mutation{}
	}
	u.cells[k] = append(u.cells[k], ms...)
}

func (u *settledUnsent) take(k inDoubtCell) []coltype.Mutation {
	u.mu.Lock()
	defer u.mu.Unlock()
	ms := u.cells[k]
	delete(u.cells, k)
	return ms
}

// resolveCell settles what it can of one cell's updates in doubt and
// returns how many are left, with the reason when some are.
func (c *Coordinator) resolveCell(ctx context.Context, st inDoubtStore, k inDoubtCell, ops []coltype.InDoubtOp) (int, error) {
	first := ops[0]
	natural, _, _, err := c.placement(first.Table, first.Key, One)
	if err != nil {
		return len(ops), err
	}
	// A node that has just restarted may not know the whole ring yet: the
	// natural replicas it sees are then too few, and one that counted the
	// op could be missing. It waits until it sees the replication factor,
	// or, past a grace period, every endpoint it knows (a ring smaller than
	// its replication factor).
	s, err := c.cfg.Tables.Strategy(first.Table)
	if err != nil {
		return len(ops), err
	}
	want := s.ReplicationFactor()
	if c.cfg.Now().Sub(c.resolverStart.Load().(time.Time)) > InDoubtGrace {
		want = min(want, len(c.cfg.Cluster.Metadata().Endpoints()))
	}
	// missing says why some natural replica's answers are missing: only
	// updates that one answer settles (coltype.DecideEarly) are settled then.
	var missing error
	if len(natural) < want {
		missing = fmt.Errorf("%d natural replicas known of %d", len(natural), want)
	}
	self := c.cfg.Cluster.Self().ID
	answers := make([][]coltype.OpAnswer, len(ops))
	others := 0
	for _, e := range natural {
		if e.ID == self {
			continue
		}
		others++
		if !c.cfg.Cluster.IsUp(e.ID) {
			missing = cmp.Or(missing, fmt.Errorf("replica %s is down", e.ID))
			continue
		}
		addr, ok := c.cfg.Cluster.Addr(e.ID)
		if !ok {
			missing = cmp.Or(missing, fmt.Errorf("replica %s has no address", e.ID))
			continue
		}
		for i, op := range ops {
			a, err := c.askOpStatus(ctx, addr, op)
			if err != nil {
				missing = cmp.Or(missing, fmt.Errorf("ask %s: %w", e.ID, err))
				break
			}
			answers[i] = append(answers[i], a)
		}
	}
	var ms []coltype.Mutation
	left := 0
	for i, op := range ops {
		var keep bool
		var reason string
		switch drop, why := coltype.DecideEarly(op, answers[i]); {
		case missing == nil && len(answers[i]) == others:
			keep, reason = coltype.Decide(op, answers[i])
		case drop:
			reason = why + ", before every replica answered"
		default:
			left++
			c.logger.Debug("update in doubt not settled yet", "table", op.Table, "column", op.Column, "op", fmt.Sprintf("%x", op.OpID),
				"counter_id", op.CounterID.String(), "clock", op.Clock, "answers", fmt.Sprint(answers[i]), "missing", missing)
			continue
		}
		m, err := st.ResolveInDoubt(op, keep)
		if err != nil {
			return len(ops) - len(ms), err
		}
		ms = append(ms, m)
		c.logger.Info("update in doubt settled", "table", op.Table, "column", op.Column, "op", fmt.Sprintf("%x", op.OpID),
			"delta", op.Delta, "kept", keep, "why", reason, "counter_id", op.CounterID.String(), "clock", op.Clock,
			"answers", fmt.Sprint(answers[i]), "counted_by", fmt.Sprint(op.CountedBy))
		c.stats.inDoubtResolved.Add(1)
		if !keep {
			c.stats.inDoubtDropped.Add(1)
		}
	}
	if left > 0 {
		// The cell still holds updates in doubt: it is sent once they are
		// settled too.
		c.unsent.add(k, ms)
		return left, missing
	}
	// Every other replica gets the settled cell with each op id (a hint if
	// it cannot be reached), so that no filter can miss the ops any more.
	ms = append(c.unsent.take(k), ms...)
	latest := map[string]row.Cell{}
	for _, m := range ms {
		latest[m.Cell.Column] = m.Cell
	}
	acks := make(chan string, 1)
	rctx, rcancel := c.cfg.WithTimeout(context.WithoutCancel(ctx), c.cfg.CounterWriteTimeout)
	defer rcancel()
	// One at a time: this is a rare path, and a deterministic order lets a
	// stepped test replay it.
	for _, m := range ms {
		m.Cell = latest[m.Cell.Column]
		for _, e := range natural {
			if e.ID != self {
				c.replicate(rctx, e, m, acks)
				<-acks
			}
		}
	}
	return 0, nil
}

// askOpStatus asks one replica what it knows of an op in doubt here.
func (c *Coordinator) askOpStatus(ctx context.Context, addr transport.Addr, op coltype.InDoubtOp) (coltype.OpAnswer, error) {
	rctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	resp, err := c.cfg.Transport.Request(rctx, addr, transport.Message{Type: TypeOpStatus, Body: encodeOpSettleRequest(op)})
	if err != nil {
		return coltype.OpAnswer{}, err
	}
	a, err := decodeOpAnswer(resp.Body)
	if err != nil {
		return coltype.OpAnswer{}, fmt.Errorf("answer: %w", err)
	}
	return a, nil
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
	op, mode, err := decodeOpStatusRequest(body)
	if err != nil {
		return transport.Message{}, err
	}
	status := st.OpStatus
	switch mode {
	case opPeek:
		if p, ok := st.(opPeeker); ok {
			status = p.OpPeek
		}
	case opSettle:
		if p, ok := st.(opSettler); ok {
			status = p.OpSettle
		}
	}
	a, err := status(op.Table, op.Key, op.Column, op.OpID)
	if err != nil {
		return transport.Message{}, err
	}
	return transport.Message{Type: TypeOpStatus, Body: encodeOpAnswer(a)}, nil
}

// decodeOpStatusRequest decodes a TypeOpStatus request: the op (its table,
// key, column and id) and the mode (opAsk when absent).
func decodeOpStatusRequest(body []byte) (coltype.InDoubtOp, uint8, error) {
	d := newDec(body)
	var op coltype.InDoubtOp
	op.Table, op.Key, op.Column = d.u64(), d.bytes(), d.str()
	copy(op.OpID[:], d.take(16))
	mode := opAsk
	if d.err == nil && len(d.b) > 0 {
		if mode = d.u8(); mode > opSettle {
			d.fail("op status mode %d", mode)
		}
	}
	return op, mode, d.end()
}

func encodeOpStatusRequest(op coltype.InDoubtOp) []byte {
	e := newEnc()
	e.u64(op.Table)
	e.bytes(op.Key)
	e.str(op.Column)
	e.b = append(e.b, op.OpID[:]...)
	return e.b
}

// The modes of a TypeOpStatus request.
const (
	opAsk    uint8 = 0
	opPeek   uint8 = 1
	opSettle uint8 = 2
)

// encodeOpPeekRequest is TypeOpStatus's request in peek mode.
func encodeOpPeekRequest(op coltype.InDoubtOp) []byte {
	e := &enc{b: encodeOpStatusRequest(op)}
	e.u8(opPeek)
	return e.b
}

// encodeOpSettleRequest is TypeOpStatus's request in settle mode.
func encodeOpSettleRequest(op coltype.InDoubtOp) []byte {
	e := &enc{b: encodeOpStatusRequest(op)}
	e.u8(opSettle)
	return e.b
}

// opSettler is implemented by stores that keep the evidence of their
// answers to a settling leader (replica.OpSettle).
type opSettler interface {
	OpSettle(table uint64, key []byte, column string, opID [16]byte) (coltype.OpAnswer, error)
}

// opPeeker is implemented by stores that answer TypeOpStatus without
// reserving the op (replica.OpPeek).
type opPeeker interface {
	OpPeek(table uint64, key []byte, column string, opID [16]byte) (coltype.OpAnswer, error)
}

func encodeOpAnswer(a coltype.OpAnswer) []byte {
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

func decodeOpAnswer(b []byte) (coltype.OpAnswer, error) {
	d := newDec(b)
	var a coltype.OpAnswer
	a.Seen = d.boolean()
	a.Status = coltype.OpStatus(d.u8())
	if a.Status > coltype.OpDropped {
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

// filterRecovery is implemented by stores whose FBF filters may lack op
// ids after an unclean start (replica.FilterIncomplete), and that know how
// long a column's filter remembers an op (replica.DedupWindow).
type filterRecovery interface {
	FilterIncomplete(table uint64, column string) bool
	DedupWindow(table uint64, column string) (time.Duration, bool)
	OpSeen(table uint64, key []byte, column string, opID [16]byte) bool
	ApplyMutation(m coltype.Mutation) error
}

// NoteLivenessChange tells the coordinator that a replica went down, came
// up, restarted or left in this node's view. For one filter window
// after it, this node asks the other replicas about an op before it leads
// it (learnOp): an earlier attempt of the op may have been led by another
// replica while the live set was different, and that leader's replication
// may not have reached this node yet.
func (c *Coordinator) NoteLivenessChange() { c.churned.Store(c.cfg.Now().UnixNano()) }

// churnedWithin reports whether the live replicas changed in this node's
// view within the column's filter window, when an earlier attempt of an
// op may have been led elsewhere.
func (c *Coordinator) churnedWithin(fr filterRecovery, u coltype.Update) bool {
	at := c.churned.Load()
	if at == 0 {
		return false
	}
	w, ok := fr.DedupWindow(u.Table, u.Column)
	return ok && c.cfg.Now().Sub(time.Unix(0, at)) < w
}

// learnOp asks the other live natural replicas about an op before this
// node, whose filter may lack it (after an unclean start that may have
// lost ids, FilterIncomplete, or a change in the live replicas within the
// filter window, churnedWithin), leads it; within the window of a range
// movement that changed the key's replicas (movedWithin), it asks the
// replicas the key had before the movement too. A replica that has
// seen it sends its cell, which this node merges with the op id, so that
// its filter dismisses the op as the retry it is. The replicas are asked
// at once and the first that has seen the op is used. The asked ones
// reserve the op until this node's mutation arrives (coltype.OpStatus),
// so none of them leads it meanwhile (only when the filter may have lost
// ids: see the peek below). When the filter may have lost ids and some
// replica did not answer, it returns errLeaderInDoubt: that replica may
// hold the op from this node's application the power cut erased from its
// log (a periodic-mode commit log), and the coordinator tries another
// leader, whose filter has seen whatever reached it. After a mere change
// in the live replicas, replicas that do not answer cannot help, and the
// op is led here.
func (c *Coordinator) learnOp(ctx context.Context, u coltype.Update, natural []ring.Endpoint) error {
	fr, ok := c.cfg.Store.(filterRecovery)
	if !ok {
		return nil
	}
	// The cheap questions first: most updates lead with neither, and the
	// column's own test-and-add follows anyway.
	incomplete := fr.FilterIncomplete(u.Table, u.Column)
	churned := incomplete || c.churnedWithin(fr, u)
	before := c.movedWithin(fr, u)
	if !churned && before == nil || fr.OpSeen(u.Table, u.Key, u.Column, u.OpID) {
		return nil
	}
	ask := natural
	if before != nil {
		// After a range movement the replicas the key had before are asked
		// too: this node may have gained the key without its op ids
		// (movement.go).
		var moved bool
		if ask, moved = c.replicasBefore(u, natural, before); !moved && !churned {
			return nil
		}
	}
	// A filter that may have lost ids reserves the op at the replicas
	// asked; after a mere change in the live replicas the ask is a peek,
	// so that a leader that dies after asking blocks no other.
	encode := encodeOpStatusRequest
	if !incomplete {
		encode = encodeOpPeekRequest
	}
	op := coltype.InDoubtOp{Table: u.Table, Key: u.Key, Column: u.Column, OpID: u.OpID}
	self := c.cfg.Cluster.Self().ID
	rctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	type answer struct {
		coltype.OpAnswer
		ok bool
	}
	answers := make(chan answer, len(ask))
	asked, others, answered := 0, 0, 0
	for _, e := range ask {
		if e.ID == self {
			continue
		}
		others++
		if !c.cfg.Cluster.IsUp(e.ID) {
			continue
		}
		addr, ok := c.cfg.Cluster.Addr(e.ID)
		if !ok {
			continue
		}
		asked++
		go func() {
			resp, err := c.cfg.Transport.Request(rctx, addr, transport.Message{Type: TypeOpStatus, Body: encode(op)})
			if err != nil {
				answers <- answer{}
				return
			}
			a, err := decodeOpAnswer(resp.Body)
			if err != nil {
				answers <- answer{}
				return
			}
			answers <- answer{a, true}
		}()
	}
	c.stats.opsAsked.Add(1)
	for ; asked > 0; asked-- {
		a := <-answers
		if a.ok {
			answered++
		}
		if !a.Seen || !a.Found {
			continue
		}
		m := coltype.Mutation{Table: u.Table, Key: u.Key, Cell: a.Cell, HasOp: true, OpID: u.OpID, OpTime: u.OpTime}
		if err := fr.ApplyMutation(m); err != nil {
			c.logger.Warn("merging a replica's copy of a cell failed", "table", u.Table, "err", err)
			continue
		}
		c.stats.opsLearned.Add(1)
		return nil
	}
	if incomplete && answered < others {
		return errLeaderInDoubt
	}
	return nil
}
