package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql/trace"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/transport"
)

// ReadFailureError: replicas answered the read with an error (a corrupt
// SSTable block, say) and too few replicas are left to meet the consistency
// level. Cassandra's read failure (protocol error 0x1300): unlike a timeout,
// the coordinator knows the read failed.
type ReadFailureError struct {
	CL          ConsistencyLevel
	Received    int // answers received
	BlockFor    int
	Failures    int   // replicas that answered with an error
	DataPresent bool  // whether some replica answered with data
	Err         error // the first replica's error
}

func (e *ReadFailureError) Error() string {
	return fmt.Sprintf("Operation failed - received %d responses and %d failures (%s read, %d required): %v",
		e.Received, e.Failures, e.CL, e.BlockFor, e.Err)
}

// Unwrap returns the first replica's error.
func (e *ReadFailureError) Unwrap() error { return e.Err }

type readAnswer struct {
	e     ring.Endpoint
	r     row.Row
	found bool
	err   error
}

// Read returns a partition at a consistency level: it asks as many live
// replicas as the level needs (this node first when it is one), merges their
// cells, and before answering repairs every contacted replica whose cells
// differ from the merge. A replica that fails is replaced by another live
// one while any is left; once too few are left for the level, the read fails
// at once with a ReadFailureError rather than waiting for its timeout.
func (c *Coordinator) Read(ctx context.Context, table uint64, key []byte, cl ConsistencyLevel) (row.Row, bool, error) {
	c.stats.reads.Add(1)
	if err := validateRead(cl); err != nil {
		return row.Row{}, false, err
	}
	_, live, req, err := c.placement(table, key, cl)
	if err != nil {
		return row.Row{}, false, err
	}
	if err := req.sufficient(live); err != nil {
		c.stats.unavailable.Add(1)
		return row.Row{}, false, err
	}
	ctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()

	// Candidates in preference order: this node, then ring order; only the
	// replicas whose answers count toward the level.
	self := c.cfg.Cluster.Self()
	var cands []ring.Endpoint
	for _, e := range live {
		if e.ID == self.ID && req.counts(e.DC) {
			cands = append([]ring.Endpoint{e}, cands...)
		} else if req.counts(e.DC) {
			cands = append(cands, e)
		}
	}
	cands = req.order(cands)
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Read at %v: %d live replicas, %d answers needed", cl, len(live), req.blockFor)
	}
	rk := row.Key{Token: ring.Token(key), Partition: key}
	answers := make(chan readAnswer, len(cands))
	next := 0
	ask := func() {
		e := cands[next]
		next++
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadRequest, "Reading from %s", c.endpointName(e))
		}
		go func() { answers <- c.readFrom(ctx, e, table, rk) }()
	}
	for next < req.blockFor && next < len(cands) {
		ask()
	}
	var got []readAnswer
	var failures []error
	failed := func() error {
		if ctx.Err() != nil {
			c.stats.readTimeouts.Add(1)
			return &ReadTimeoutError{CL: cl, Received: len(got), BlockFor: req.blockFor, DataPresent: len(got) > 0}
		}
		return &ReadFailureError{CL: cl, Received: len(got), BlockFor: req.blockFor, Failures: len(failures),
			DataPresent: len(got) > 0, Err: failures[0]}
	}
	inflight := next
	for len(got) < req.blockFor {
		if inflight == 0 {
			break
		}
		select {
		case a := <-answers:
			inflight--
			if a.err != nil {
				if trace.On(ctx) {
					trace.Eventf(ctx, trace.ThreadRead, "Read from %s failed: %v", c.endpointName(a.e), a.err)
				}
				c.logger.Debug("read from replica failed", "replica", a.e.ID, "err", a.err)
				failures = append(failures, a.err)
				if next < len(cands) {
					ask()
					inflight++
				}
				if len(got)+inflight < req.blockFor {
					// Every candidate left is asked already: the level
					// cannot be met.
					return row.Row{}, false, failed()
				}
				continue
			}
			if trace.On(ctx) {
				trace.Eventf(ctx, trace.ThreadRead, "Read from %s: %d cells (partition found: %t)", c.endpointName(a.e), len(a.r.Cells), a.found)
			}
			got = append(got, a)
		case <-ctx.Done():
			c.stats.readTimeouts.Add(1)
			return row.Row{}, false, &ReadTimeoutError{CL: cl, Received: len(got), BlockFor: req.blockFor, DataPresent: len(got) > 0}
		}
	}
	if len(got) < req.blockFor && len(failures) > 0 {
		return row.Row{}, false, failed()
	}
	if len(got) < req.blockFor {
		c.stats.readTimeouts.Add(1)
		return row.Row{}, false, &ReadTimeoutError{CL: cl, Received: len(got), BlockFor: req.blockFor, DataPresent: len(got) > 0}
	}
	merged, found, err := c.merge(table, rk, got)
	if err != nil {
		return row.Row{}, false, err
	}
	if trace.On(ctx) {
		trace.Eventf(ctx, trace.ThreadRequest, "Merged %d answers", len(got))
	}
	if found {
		if err := c.repair(ctx, table, key, merged, got); err != nil {
			return row.Row{}, false, err
		}
	}
	return merged, found, nil
}

func (c *Coordinator) readFrom(ctx context.Context, e ring.Endpoint, table uint64, key row.Key) readAnswer {
	if e.ID == c.cfg.Cluster.Self().ID {
		r, found, err := c.readLocal(ctx, table, key.Partition)
		return readAnswer{e: e, r: r, found: found, err: err}
	}
	addr, ok := c.cfg.Cluster.Addr(e.ID)
	if !ok {
		return readAnswer{e: e, err: transport.ErrUnreachable}
	}
	resp, err := c.cfg.Transport.Request(ctx, addr, transport.Message{Type: TypeRead, Body: encodeRead(table, key.Partition)})
	if err != nil {
		return readAnswer{e: e, err: err}
	}
	r, found, err := decodeRow(key, resp.Body)
	return readAnswer{e: e, r: r, found: found, err: err}
}

// readLocal reads the local replica's row; a row that holds an update in
// doubt (coltype.ErrInDoubt) is read once that update is settled, which
// takes one exchange with the other replicas when they are up, or fails
// when ctx ends first.
func (c *Coordinator) readLocal(ctx context.Context, table uint64, key []byte) (row.Row, bool, error) {
	for {
		r, found, err := c.cfg.Store.ReadRow(table, key)
		if !errors.Is(err, coltype.ErrInDoubt) {
			return r, found, err
		}
		select {
		case <-ctx.Done():
			return r, found, err
		case <-time.After(inDoubtPoll):
		}
	}
}

func (c *Coordinator) merge(table uint64, key row.Key, answers []readAnswer) (row.Row, bool, error) {
	merged, found := row.Row{Key: key}, false
	for _, a := range answers {
		if !a.found {
			continue
		}
		if !found {
			merged, found = a.r, true
			continue
		}
		var err error
		merged, err = row.MergeRows(merged, a.r, func(x, y row.Cell) (row.Cell, error) { return c.cfg.Store.MergeCells(table, x, y) })
		if err != nil {
			return row.Row{}, false, err
		}
	}
	return merged, found, nil
}

// repair sends the merged cells to every answering replica that lacks them
// or holds an older version, and waits for their acknowledgements (blocking
// read repair: a later read at the same level sees at least this state).
func (c *Coordinator) repair(ctx context.Context, table uint64, key []byte, merged row.Row, answers []readAnswer) error {
	type job struct {
		e ring.Endpoint
		m coltype.Mutation
	}
	var jobs []job
	rp, _ := c.cfg.Store.(repairPolicy)
	for _, a := range answers {
		for _, mc := range merged.Cells {
			if rp != nil && !rp.Repairs(table, mc.Column) {
				continue
			}
			have, ok := a.r.Cell(mc.Column)
			if ok && have.Tombstone == mc.Tombstone && bytes.Equal(have.Value, mc.Value) {
				continue
			}
			jobs = append(jobs, job{a.e, coltype.Mutation{Table: table, Key: key, Cell: mc}})
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	for _, j := range jobs {
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadRead, "Read repair: sending the merged cell %s to %s", j.m.Cell.Column, c.endpointName(j.e))
		}
	}
	errs := make(chan error, len(jobs))
	for _, j := range jobs {
		go func() {
			c.stats.repairs.Add(1)
			if j.e.ID == c.cfg.Cluster.Self().ID {
				errs <- c.applyMutation(j.m)
				return
			}
			addr, ok := c.cfg.Cluster.Addr(j.e.ID)
			if !ok {
				errs <- transport.ErrUnreachable
				return
			}
			_, err := c.cfg.Transport.Request(ctx, addr, transport.Message{Type: TypeMutation, Body: EncodeMutation(j.m)})
			errs <- err
		}()
	}
	var all []error
	for range jobs {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		// The answer is still right; the replica will converge through
		// later repairs or hints. Cassandra times the read out here.
		c.logger.Debug("read repair incomplete", "err", err)
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadRead, "Read repair incomplete: %v", err)
		}
	} else {
		if trace.On(ctx) {
			trace.Eventf(ctx, trace.ThreadRead, "Read repair acknowledged by %d replicas", len(jobs))
		}
	}
	return nil
}

// repairPolicy is implemented by Stores with columns that must not be read
// repaired (coltype.ReadPolicy: handoff counters, whose replicas each hold
// their own state).
type repairPolicy interface {
	Repairs(table uint64, column string) bool
}
