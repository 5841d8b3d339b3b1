package coordinator

import (
	"context"
	"errors"
	"maps"
	"math"
	"sync"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/transport"
)

// TypeScan asks a replica for the partitions of a token range; TypeDelete
// is not a separate verb: deletions travel as tombstone TypeMutations.
const TypeScan transport.Type = 19

// Store additions used by scans; the replica implements them.
type scanner interface {
	Scan(table uint64, after *row.Key, startToken, endToken int64, limit int) ([]row.Row, error)
}

type scanRequest struct {
	table                uint64
	after                *row.Key
	startToken, endToken int64
	limit                int
}

func encodeScan(r scanRequest) []byte {
	e := newEnc()
	e.u64(r.table)
	e.boolean(r.after != nil)
	if r.after != nil {
		e.i64(r.after.Token)
		e.bytes(r.after.Partition)
	}
	e.i64(r.startToken)
	e.i64(r.endToken)
	e.u32(uint32(r.limit))
	return e.b
}

func decodeScan(b []byte) (scanRequest, error) {
	d := newDec(b)
	r := scanRequest{table: d.u64()}
	if d.boolean() {
		r.after = &row.Key{Token: d.i64(), Partition: d.bytes()}
	}
	r.startToken, r.endToken, r.limit = d.i64(), d.i64(), int(d.u32())
	if r.limit > 1<<20 {
		d.fail("scan limit %d", r.limit)
	}
	return r, d.end()
}

func encodeRows(rows []row.Row) []byte {
	e := newEnc()
	e.u32(uint32(len(rows)))
	for _, r := range rows {
		e.i64(r.Key.Token)
		e.bytes(r.Key.Partition)
		e.u32(uint32(len(r.Cells)))
		for _, c := range r.Cells {
			e.cell(c)
		}
	}
	return e.b
}

func decodeRows(b []byte) ([]row.Row, error) {
	d := newDec(b)
	n := d.u32()
	if n > 1<<20 {
		d.fail("%d rows", n)
	}
	var out []row.Row
	for i := uint32(0); i < n && d.err == nil; i++ {
		r := row.Row{Key: row.Key{Token: d.i64(), Partition: d.bytes()}}
		nc := d.u32()
		if nc > maxCells {
			d.fail("%d cells", nc)
		}
		for j := uint32(0); j < nc && d.err == nil; j++ {
			r.Cells = append(r.Cells, d.cell())
		}
		if len(out) > 0 && row.Compare(out[len(out)-1].Key, r.Key) >= 0 {
			d.fail("rows out of order")
		}
		out = append(out, r)
	}
	return out, d.end()
}

// Scan returns up to limit partitions of a table in token order, after the
// key after (exclusive; nil for the first page), read at a consistency
// level. It walks the ring's token ranges from after's token, asking enough
// live replicas of each range for its partitions and merging their answers,
// until limit partitions are gathered or the ring is done. Partitions are
// returned as the replicas hold them, tombstoned cells included.
func (c *Coordinator) Scan(ctx context.Context, table uint64, after *row.Key, limit int, cl ConsistencyLevel) ([]row.Row, error) {
	return c.ScanRange(ctx, table, after, math.MaxInt64, limit, cl)
}

// ScanRange is Scan that stops at the token end (inclusive): the
// partitions after the key after whose token is at most end. CQL's
// token() restrictions read a token range with it.
func (c *Coordinator) ScanRange(ctx context.Context, table uint64, after *row.Key, end int64, limit int, cl ConsistencyLevel) ([]row.Row, error) {
	c.stats.reads.Add(1)
	if err := validateRead(cl); err != nil {
		return nil, err
	}
	s, err := c.cfg.Tables.Strategy(table)
	if err != nil {
		return nil, &InvalidError{Msg: err.Error()}
	}
	if limit <= 0 {
		return nil, nil
	}
	ctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	m := c.cfg.Cluster.Metadata()
	start := int64(math.MinInt64)
	if after != nil {
		start = after.Token - 1 // the range holding after's token, from just below it
		if after.Token == math.MinInt64 {
			start = math.MinInt64
		}
	}
	if start >= end {
		return nil, nil
	}
	// Range ends in token order from start: every ring token above start
	// and below end, then end (for MaxToken, the wrap-around range, owned
	// like the first token).
	var ends []int64
	for _, to := range m.Ring() {
		if to.Token > start && to.Token < end {
			ends = append(ends, to.Token)
		}
	}
	ends = append(ends, end)
	var out []row.Row
	lo := start
	for _, hi := range ends {
		rows, err := c.scanRange(ctx, s, m, table, after, lo, hi, limit-len(out), cl)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		if len(out) >= limit {
			return out[:limit], nil
		}
		lo = hi
	}
	return out, nil
}

func (c *Coordinator) scanRange(ctx context.Context, s ring.Strategy, m *ring.Metadata, table uint64, after *row.Key, lo, hi int64, limit int, cl ConsistencyLevel) ([]row.Row, error) {
	var live []ring.Endpoint
	for _, e := range s.Replicas(m, hi) {
		if c.cfg.Cluster.IsUp(e.ID) {
			live = append(live, e)
		}
	}
	req := newRequirement(cl, s, c.cfg.Cluster.Self().DC)
	if err := req.sufficient(live); err != nil {
		c.stats.unavailable.Add(1)
		return nil, err
	}
	self := c.cfg.Cluster.Self()
	var cands []ring.Endpoint
	for _, e := range live {
		if !req.counts(e.DC) {
			continue
		}
		if e.ID == self.ID {
			cands = append([]ring.Endpoint{e}, cands...)
		} else {
			cands = append(cands, e)
		}
	}
	cands = req.order(cands)
	sr := scanRequest{table: table, after: after, startToken: lo, endToken: hi, limit: limit}
	type answer struct {
		rows []row.Row
		err  error
	}
	answers := make(chan answer, len(cands))
	ask := func(e ring.Endpoint) {
		go func() {
			if e.ID == self.ID {
				sc, ok := c.cfg.Store.(scanner)
				if !ok {
					answers <- answer{err: errors.New("coordinator: the local store cannot scan")}
					return
				}
				rows, err := sc.Scan(table, after, lo, hi, limit)
				answers <- answer{rows, err}
				return
			}
			addr, ok := c.cfg.Cluster.Addr(e.ID)
			if !ok {
				answers <- answer{err: transport.ErrUnreachable}
				return
			}
			resp, err := c.cfg.Transport.Request(ctx, addr, transport.Message{Type: TypeScan, Body: encodeScan(sr)})
			if err != nil {
				answers <- answer{err: err}
				return
			}
			rows, err := decodeRows(resp.Body)
			answers <- answer{rows, err}
		}()
	}
	next := 0
	for ; next < req.blockFor && next < len(cands); next++ {
		ask(cands[next])
	}
	inflight, got := next, 0
	var merged []row.Row
	for got < req.blockFor && inflight > 0 {
		select {
		case a := <-answers:
			inflight--
			if a.err != nil {
				if next < len(cands) {
					ask(cands[next])
					next++
					inflight++
				}
				continue
			}
			got++
			var err error
			if merged, err = c.mergeRowLists(table, merged, a.rows, limit); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			c.stats.readTimeouts.Add(1)
			return nil, &ReadTimeoutError{CL: cl, Received: got, BlockFor: req.blockFor, DataPresent: got > 0}
		}
	}
	if got < req.blockFor {
		c.stats.readTimeouts.Add(1)
		return nil, &ReadTimeoutError{CL: cl, Received: got, BlockFor: req.blockFor, DataPresent: got > 0}
	}
	return merged, nil
}

// mergeRowLists merges two key-sorted row lists, keeping the first limit.
func (c *Coordinator) mergeRowLists(table uint64, a, b []row.Row, limit int) ([]row.Row, error) {
	out := make([]row.Row, 0, min(limit, len(a)+len(b)))
	i, j := 0, 0
	for (i < len(a) || j < len(b)) && len(out) < limit {
		switch {
		case j == len(b) || (i < len(a) && row.Compare(a[i].Key, b[j].Key) < 0):
			out = append(out, a[i])
			i++
		case i == len(a) || row.Compare(b[j].Key, a[i].Key) < 0:
			out = append(out, b[j])
			j++
		default:
			m, err := row.MergeRows(a[i], b[j], func(x, y row.Cell) (row.Cell, error) { return c.cfg.Store.MergeCells(table, x, y) })
			if err != nil {
				return nil, err
			}
			out = append(out, m)
			i++
			j++
		}
	}
	return out, nil
}

// handleScan serves TypeScan.
func (c *Coordinator) handleScan(body []byte) (transport.Message, error) {
	r, err := decodeScan(body)
	if err != nil {
		return transport.Message{}, err
	}
	sc, ok := c.cfg.Store.(scanner)
	if !ok {
		return transport.Message{}, errors.New("coordinator: the local store cannot scan")
	}
	rows, err := sc.Scan(r.table, r.after, r.startToken, r.endToken, r.limit)
	if err != nil {
		return transport.Message{}, err
	}
	return transport.Message{Type: TypeScan, Body: encodeRows(rows)}, nil
}

// deletePolicy is implemented by Stores that know which columns' types
// define DELETE themselves (coltype.Deleter): those are led like an update
// (coltype.Update.Delete) instead of sent as tombstones to every replica.
type deletePolicy interface {
	LedDelete(table uint64, column string) bool
}

// WriteTypeSimple is the write type of a deletion's timeout.
const WriteTypeSimple WriteType = "SIMPLE"

// Delete writes tombstones for the named counter cells of a partition to
// every replica and waits until the consistency level has acknowledged
// them; replicas that are down or do not answer get hints. The timeout is
// the read timeout (idemkv has no separate write_request_timeout).
func (c *Coordinator) Delete(ctx context.Context, table uint64, key []byte, columns []string, cl ConsistencyLevel) error {
	switch cl {
	case Any, Serial, LocalSerial:
		return &InvalidError{Msg: "consistency level " + cl.String() + " is not supported for deletions"}
	}
	if len(columns) == 0 {
		return &InvalidError{Msg: "a deletion names no column"}
	}
	if dp, ok := c.cfg.Store.(deletePolicy); ok {
		// Columns whose type defines DELETE (coltype.Deleter) are deleted
		// through a leader, like an update; the others get tombstones.
		var plain []string
		for _, col := range columns {
			if !dp.LedDelete(table, col) {
				plain = append(plain, col)
				continue
			}
			u := coltype.Update{Table: table, Key: key, Column: col, Timestamp: c.cfg.Now().UnixMicro(), Delete: true}
			if err := c.CounterWrite(ctx, u, cl); err != nil {
				return err
			}
		}
		if len(plain) == 0 {
			return nil
		}
		columns = plain
	}
	ts := c.cfg.Now().UnixMicro()
	cells := make([]row.Cell, 0, len(columns))
	for _, col := range columns {
		cells = append(cells, row.Cell{Column: col, Timestamp: ts, Tombstone: true})
	}
	return c.WriteCells(ctx, table, key, cells, cl)
}

// WriteCells writes cells of one partition, as they are, to every replica
// (and the pending ones) and waits until the consistency level has
// acknowledged them: the write path of tombstones and of regular
// (last-write-wins) columns, which need no leader. Replicas that are down
// or do not answer get hints. The timeout is the read timeout (idemkv has
// no separate write_request_timeout).
func (c *Coordinator) WriteCells(ctx context.Context, table uint64, key []byte, cells []row.Cell, cl ConsistencyLevel) error {
	switch cl {
	case Any, Serial, LocalSerial:
		return &InvalidError{Msg: "consistency level " + cl.String() + " is not supported for this write"}
	}
	natural, pending, live, req, err := c.placementPending(table, key, cl)
	if err != nil {
		return err
	}
	if err := req.sufficient(live); err != nil {
		c.stats.unavailable.Add(1)
		return err
	}
	muts := make([]coltype.Mutation, 0, len(cells))
	for _, cell := range cells {
		muts = append(muts, coltype.Mutation{Table: table, Key: key, Cell: cell})
	}
	ctx, cancel := c.cfg.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	// The tombstones reach every replica (or become hints) even after the
	// level is met and the caller has its answer.
	rctx, rcancel := c.cfg.WithTimeout(context.WithoutCancel(ctx), c.cfg.ReadTimeout)
	var wg sync.WaitGroup
	self := c.cfg.Cluster.Self()
	type answer struct {
		e   ring.Endpoint
		out mutationOutcome
	}
	answers := make(chan answer, len(natural))
	defer func() {
		go func() {
			wg.Wait()
			rcancel()
		}()
	}()
	for _, e := range natural {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e.ID == self.ID {
				for _, m := range muts {
					if err := c.applyMutation(m); err != nil {
						out := mutationRefused // the replica answers with an error
						if !errors.Is(err, errWritesRefused) {
							c.logger.Error("local write failed", "err", err)
						}
						answers <- answer{e, out}
						return
					}
				}
				answers <- answer{e, mutationAcked}
				return
			}
			out := mutationAcked
			for _, m := range muts {
				if o := c.sendMutation(rctx, e, m); o > out {
					out = o
				}
			}
			answers <- answer{e, out}
		}()
	}
	for _, e := range pending {
		if e.ID == self.ID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range muts {
				c.sendMutation(rctx, e, m) // not counted toward the level
			}
		}()
	}
	// A replica that answers with an error (one that refuses the write) is
	// a failure: as soon as the replicas that have not failed cannot meet
	// the level any more, the write fails (WRITE_FAILURE), as Cassandra's
	// AbstractWriteResponseHandler.onFailure, without waiting for a timeout.
	t := req.newTally()
	outstanding := make(map[string]string, len(natural)) // host id: dc
	for _, e := range natural {
		outstanding[e.ID] = e.DC
	}
	var failed []string
	failure := func() error {
		return &WriteFailureError{CL: cl, Received: t.total, BlockFor: req.blockFor, Failures: len(failed),
			FailedReplicas: failed, WriteType: WriteTypeSimple}
	}
	for received := 0; received < len(natural); {
		select {
		case a := <-answers:
			received++
			delete(outstanding, a.e.ID)
			switch a.out {
			case mutationAcked:
				t.add(a.e.DC)
				if t.met() {
					return nil
				}
			case mutationRefused:
				failed = append(failed, c.endpointName(a.e))
				possible := req.newTally()
				possible.total, possible.byDC = t.total, maps.Clone(t.byDC)
				for _, dc := range outstanding {
					possible.add(dc)
				}
				if !possible.met() {
					return failure()
				}
			}
		case <-ctx.Done():
			return &WriteTimeoutError{CL: cl, Received: t.total, BlockFor: req.blockFor, WriteType: WriteTypeSimple}
		}
	}
	if len(failed) > 0 {
		return failure()
	}
	return &WriteTimeoutError{CL: cl, Received: t.total, BlockFor: req.blockFor, WriteType: WriteTypeSimple}
}
