package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/coltype/borrowcol"
	"github.com/idemkv/idemkv/node"
)

// The borrow mode: table bench.borrow (k text PRIMARY KEY, c
// borrow_counter). Each client keeps one client.BorrowCounter per key it
// touches and borrows its dot on first use (untagged, retried until it
// succeeds). An op counts its deltas into the keys' dots locally and
// durably (BorrowCounter.Incr), then sends each touched dot's cumulative
// count once (SendTagged, with the op's id attached so that the injected
// faults hit the same op as in the other modes); a failed attempt is
// retried (the same cumulative write again: always safe). Every delta is
// in a client's state, so it must be counted exactly once whatever the
// op's outcome (Ledger.RecordHeld). At the end every client retires its
// counters (the retirement carries the final counts) before the final read, which waits for the
// replicas' anti-entropy to converge; the client dots left on the replicas
// after the retirements are then counted.

// borrowRun is the borrow mode's state during a run.
type borrowRun struct {
	mu       sync.Mutex
	counters []map[int]*client.BorrowCounter // per client, by key
	updates  atomic.Int64
}

func newBorrowRun(clients int) *borrowRun {
	br := &borrowRun{}
	for range clients {
		br.counters = append(br.counters, map[int]*client.BorrowCounter{})
	}
	return br
}

// borrowCounter returns client c's counter of key k, with its dot borrowed.
func (r *runner) borrowCounter(ctx context.Context, br *borrowRun, c, k int) (*client.BorrowCounter, error) {
	br.mu.Lock()
	b, ok := br.counters[c][k]
	if !ok {
		var err error
		b, err = client.NewBorrowCounter(r.session, "bench."+ModeBorrow, "c", "k = ?",
			client.BorrowOptions{Consistency: r.cfg.Consistency}, r.key(k))
		if err != nil {
			br.mu.Unlock()
			return nil, err
		}
		br.counters[c][k] = b
	}
	br.mu.Unlock()
	pause := 20 * time.Millisecond
	for {
		err := b.Borrow(ctx)
		if err == nil {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bench: borrow: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// doBorrow runs one op of the borrow mode.
func (r *runner) doBorrow(ctx context.Context, cli *client.Client, mr *modeRun, c int, op Op) (Outcome, error) {
	br := mr.borrow
	var keys []*client.BorrowCounter
	seen := map[int]bool{}
	for _, u := range op.Updates {
		b, err := r.borrowCounter(ctx, br, c, u.Key)
		if err != nil {
			return 0, err
		}
		if err := b.Incr(uint64(u.Delta)); err != nil {
			return 0, err
		}
		br.updates.Add(1)
		if !seen[u.Key] {
			seen[u.Key] = true
			keys = append(keys, b)
		}
	}
	id := cli.NextOpID(1)
	exec := func(ctx context.Context, n int) error {
		for _, b := range keys {
			if err := b.SendTagged(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}
	return r.attempts(ctx, mr, op, &id, exec)
}

// flushBorrow retires every client's counters (each retirement carries its
// dots' final counts, so it is also the flush).
func (r *runner) flushBorrow(ctx context.Context, mr *modeRun) error {
	br := mr.borrow
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(br.counters))
	for _, m := range br.counters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range m {
				// The retirement carries every dot's final count: no flush.
				if err := b.Retire(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("bench: borrow flush: %w", err)
	}
	return nil
}

// BorrowResult is the borrow mode's costs in a run.
type BorrowResult struct {
	Updates int64 `json:"updates"` // updates issued (Incr calls)
	// Client round trips (borrows, writes with their retries, and the
	// retirements) and their payload bytes, both ways, per
	// update; and round trips per client per cell (a cell: one client's
	// counter of one key).
	ExchangesPerUpdate float64 `json:"exchanges_per_update"`
	BytesPerUpdate     float64 `json:"bytes_per_update"`
	// ReplicaExchangesPerUpdate: the exchanges the replicas served (borrow
	// requests and client writes; a write goes to every live replica) per
	// update (embedded ring only; counts of nodes killed are lost).
	ReplicaExchangesPerUpdate float64 `json:"replica_exchanges_per_update"`
	Cells                     int     `json:"cells"`
	RoundTripsPerCell         float64 `json:"round_trips_per_cell"`
	BorrowsPerCell            float64 `json:"borrows_per_cell"`
	// Anti-entropy full-state exchanges between replicas (each a request
	// and its answer) and their bytes, per update (embedded ring only;
	// counts of nodes killed during the run are lost with them).
	SyncPerUpdate      float64 `json:"sync_per_update"`
	SyncBytesPerUpdate float64 `json:"sync_bytes_per_update"`
	// BorrowedAfter: client dots left on the replicas (summed over the
	// replicas and keys) once the clients retired and the replicas
	// converged, waiting up to 10 s more for the creators' transfers
	// (embedded ring only). Transferred and Closed are the replicas'
	// counts (borrowcol.Stats).
	BorrowedAfter int `json:"borrowed_after"`
	// MaxCellBytes: the largest cell a replica wrote (while clients were
	// active in it); CellBytesAfter: the keys' cells on the replicas once
	// the clients retired, bytes on average (embedded ring only).
	MaxCellBytes   uint64  `json:"max_cell_bytes"`
	CellBytesAfter float64 `json:"cell_bytes_after"`
	Transferred    uint64  `json:"transferred"`
	Closed         uint64  `json:"closed"`
	// ReadExactMS: from the end of the flush until every key read at the
	// run's level held its expected value; ConvergeMS: until every
	// replica's own cell did (embedded ring only, within 60 s: Converged).
	ReadExactMS float64 `json:"read_exact_ms"`
	ConvergeMS  float64 `json:"converge_ms"`
	Converged   bool    `json:"converged"`
}

// handoffSync is a node's coordinator count of anti-entropy exchanges and
// bytes less its borrow columns' (the coordinator's sync rounds serve every
// coltype.AntiEntropy column, and count them together).
func handoffSync(nd *node.Node) (msgs, bytes uint64) {
	st := nd.Coordinator().Stats()
	b := borrowcol.ReplicaStats(nd.Replica())
	return st.AntiEntropyMessages - min(st.AntiEntropyMessages, b.Views), st.AntiEntropyBytes - min(st.AntiEntropyBytes, b.SyncBytes)
}

// borrowStats sums the embedded ring's borrowcol counts.
func (c *Cluster) borrowStats() borrowcol.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out borrowcol.Stats
	for _, nd := range c.nodes {
		if nd == nil {
			continue
		}
		s := borrowcol.ReplicaStats(nd.Replica())
		out.Borrows += s.Borrows
		out.Writes += s.Writes
		out.Views += s.Views
		out.SyncBytes += s.SyncBytes
		out.MaxCellBytes = max(out.MaxCellBytes, s.MaxCellBytes)
		out.Transferred += s.Transferred
		out.Closed += s.Closed
	}
	return out
}

// borrowedLeft counts the client dots the live nodes hold in the keys, and
// the cells they hold and their bytes (size).
func (c *Cluster) borrowedLeft(ks, table, column string, keys []string) (n, cells, size int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, nd := range c.nodes {
		if nd == nil {
			continue
		}
		def, ok := nd.Schema().Table(ks, table)
		if !ok {
			return 0, 0, 0, fmt.Errorf("bench: node %d has no table %s.%s", i+1, ks, table)
		}
		for _, k := range keys {
			cell, found, err := nd.Replica().Read(def.ID, []byte(k), column)
			if err != nil {
				return 0, 0, 0, err
			}
			if !found {
				continue
			}
			s, err := borrowcol.DecodeCell(cell.Value)
			if err != nil {
				return 0, 0, 0, err
			}
			n += s.Borrowed()
			cells++
			size += len(cell.Value)
		}
	}
	return n, cells, size, nil
}

// finishBorrow flushes and retires the borrow mode's clients, then reads
// every key until the values match the ledger or 30 s pass, and returns
// the final values and the mode's costs.
func (r *runner) finishBorrow(ctx context.Context, s *gocql.Session, mr *modeRun, before borrowcol.Stats) (map[int]int64, *BorrowResult, error) {
	if err := r.flushBorrow(ctx, mr); err != nil {
		return nil, nil, err
	}
	flushed := time.Now()
	var final map[int]int64
	var err error
	for {
		final, err = r.readFinal(ctx, s, mr)
		if err == nil {
			if t := mr.ledger.Tally(final); t.Over == 0 && t.Under == 0 {
				break
			}
		}
		if time.Since(flushed) > 30*time.Second || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return nil, nil, err
	}
	br := mr.borrow
	res := &BorrowResult{Updates: br.updates.Load(), ReadExactMS: ms(time.Since(flushed))}
	var ex, bytes, borrows uint64
	br.mu.Lock()
	for _, m := range br.counters {
		for _, b := range m {
			st := b.Stats()
			ex += st.Exchanges
			bytes += st.BytesSent + st.BytesRecv
			borrows += st.Borrows
			res.Cells++
		}
	}
	br.mu.Unlock()
	if res.Updates > 0 {
		res.ExchangesPerUpdate = float64(ex) / float64(res.Updates)
		res.BytesPerUpdate = float64(bytes) / float64(res.Updates)
	}
	if res.Cells > 0 {
		res.RoundTripsPerCell = float64(ex) / float64(res.Cells)
		res.BorrowsPerCell = float64(borrows) / float64(res.Cells)
	}
	c := r.target.Cluster
	if c == nil {
		return final, res, nil
	}
	keys := mr.ledger.Keys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = r.key(k)
	}
	for {
		vals, err := c.LocalValues("bench", ModeBorrow, "c", names)
		if err != nil {
			return nil, nil, err
		}
		ok := true
		for _, m := range vals {
			for i, k := range keys {
				if m != nil && m[names[i]] != final[k] {
					ok = false
				}
			}
		}
		if ok || time.Since(flushed) > 60*time.Second || ctx.Err() != nil {
			res.Converged = ok
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.ConvergeMS = ms(time.Since(flushed))
	for deadline := time.Now().Add(10 * time.Second); ; {
		left, cells, size, err := c.borrowedLeft("bench", ModeBorrow, "c", names)
		if err != nil {
			return nil, nil, err
		}
		res.BorrowedAfter = left
		if cells > 0 {
			res.CellBytesAfter = float64(size) / float64(cells)
		}
		if left == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := c.borrowStats()
	// A node killed during the run took its counts with it.
	since := func(now, then uint64) uint64 { return now - min(now, then) }
	res.Transferred, res.Closed = since(st.Transferred, before.Transferred), since(st.Closed, before.Closed)
	res.MaxCellBytes = st.MaxCellBytes
	if res.Updates > 0 {
		res.SyncPerUpdate = float64(since(st.Views, before.Views)) / float64(res.Updates)
		res.ReplicaExchangesPerUpdate = float64(since(st.Borrows+st.Writes, before.Borrows+before.Writes)) / float64(res.Updates)
		res.SyncBytesPerUpdate = float64(since(st.SyncBytes, before.SyncBytes)) / float64(res.Updates)
	}
	return final, res, nil
}
