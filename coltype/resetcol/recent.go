package resetcol

import (
	"bytes"
	"slices"
	"sync"
	"time"
)

// recentOps are the client op ids of the increments a replica applied (led
// or delivered) within the op window, per cell: what dismisses a retry.
//
// They live beside the cells, not in their blobs. A blob is rewritten whole
// on every write of its cell, and on a hot cell the op ids of one window
// were most of it (about 8,000 ids, 200 KB, at 800 updates/s with the
// default 10 s window): every update paid for all of them, in the encoding,
// the commit log and the memtable's merges. Now a blob written for an
// update holds only the op ids that write applied (Blob.Recent), the
// commit log record carries the newest op time (so that the log keeps its
// segment for the window, Column.OpIDWindow), and a start learns the op ids
// again from the records it replays (Column.Replayed) and from the blobs it
// loads.
//
// Per cell, a set for lookups and a queue in arrival order for expiry. An
// op id is answered only while its time is within the window; the queue
// drops ids from its front once they are past it, so an id behind a newer
// one (clients' op times are theirs) may be held a little longer than
// needed, never answered past the window.
type recentOps struct {
	mu        sync.Mutex
	cells     map[string]*cellOps
	n         int   // op ids held, all cells
	lastSweep int64 // unix nanoseconds
}

type cellOps struct {
	ids   map[[16]byte]int64 // op id → its time
	order []OpRecord         // arrival order, from head
	head  int
}

// has reports whether a cell's op id is held with a time at or after
// horizon (unix nanoseconds).
func (r *recentOps) has(cell string, id [16]byte, horizon int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cells[cell]
	if c == nil {
		return false
	}
	t, ok := c.ids[id]
	return ok && t >= horizon
}

// add records op ids of a cell (they are durable: a write carried them),
// dropping the cell's expired ones first.
func (r *recentOps) add(cell string, recs []OpRecord, horizon int64) {
	if len(recs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cells == nil {
		r.cells = map[string]*cellOps{}
	}
	c := r.cells[cell]
	if c != nil {
		r.expireCell(cell, c, horizon)
	}
	if c = r.cells[cell]; c == nil {
		c = &cellOps{ids: map[[16]byte]int64{}}
		r.cells[cell] = c
	}
	for _, rec := range recs {
		if rec.Time < horizon {
			continue
		}
		if t, ok := c.ids[rec.ID]; ok {
			if rec.Time > t {
				// Queued again at its new time: the old entry no longer
				// matches and expires nothing.
				c.ids[rec.ID] = rec.Time
				c.order = append(c.order, rec)
			}
			continue
		}
		c.ids[rec.ID] = rec.Time
		c.order = append(c.order, rec)
		r.n++
	}
	if len(c.ids) == 0 {
		delete(r.cells, cell)
	}
}

// list returns a cell's op ids within the window, ascending id (a
// joining replica's snapshot carries them).
func (r *recentOps) list(cell string, horizon int64) []OpRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cells[cell]
	if c == nil {
		return nil
	}
	var out []OpRecord
	for id, t := range c.ids {
		if t >= horizon {
			out = append(out, OpRecord{ID: id, Time: t})
		}
	}
	slices.SortFunc(out, func(a, b OpRecord) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// sweep drops every cell's expired op ids, at most once a second (the
// cells that see no more writes are not expired otherwise).
func (r *recentOps) sweep(now time.Time, window time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ns := now.UnixNano()
	if ns-r.lastSweep < int64(time.Second) {
		return
	}
	r.lastSweep = ns
	horizon := now.Add(-window).UnixNano()
	for k, c := range r.cells {
		r.expireCell(k, c, horizon)
	}
}

// expireCell drops a cell's op ids past the window from the front of its
// queue, and the cell once it holds none; r.mu is held.
func (r *recentOps) expireCell(cell string, c *cellOps, horizon int64) {
	for c.head < len(c.order) && c.order[c.head].Time < horizon {
		rec := c.order[c.head]
		if t, ok := c.ids[rec.ID]; ok && t == rec.Time {
			delete(c.ids, rec.ID)
			r.n--
		}
		c.head++
	}
	if c.head > 64 && c.head > len(c.order)/2 {
		// Compact once the expired front is half the queue: amortised O(1)
		// per op id.
		c.order = slices.Clone(c.order[c.head:])
		c.head = 0
	}
	if len(c.ids) == 0 {
		delete(r.cells, cell)
	}
}

// len returns the op ids held, all cells.
func (r *recentOps) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
