package resetcol

import (
	"fmt"
	"maps"
	"slices"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/reset"
	"github.com/idemkv/idemkv/row"
)

// A replica joining a cell's replica set adopts a snapshot of one current
// replica's cell (docs/reset-counter.md, "Joining and leaving"). Every
// outbox of a cell numbers its origin's ops the same way, by the origin's
// op count (an outbox is created empty at the origin's op count, or as a
// copy of the cell's outbox that holds the most, newOutbox), so that a
// delivered count means the same ops on every channel from one origin: the
// joiner J takes the snapshot's delivered counts as its own, and each
// origin's outbox to J, prepared before the snapshot was taken, still holds
// every op after them.

// ErrAdopt is returned when a joining replica cannot adopt a snapshot:
// it already delivered ops the snapshot lacks (the snapshot's replica is
// behind it), or it generated ops in the cell. Streaming takes a new
// snapshot and tries again.
var ErrAdopt = fmt.Errorf("resetcol: %w", coltype.ErrStaleSnapshot)

// newOutbox returns the outbox to a new peer of the cell: a copy of the
// cell's outbox that holds the most ops (the smallest acknowledgement).
// When the cell has none, every op this replica generated in it went to
// nobody, the cell knowing no other replica (a replica set of one, or a
// write outside the coordinator on a cell that had delivered no peer's
// op; see peers):
// gen says whether the new peer adopts a snapshot counting them (an empty
// outbox numbered from the op count, for PrepareJoin and SnapshotFor) or
// not (numbered from 0, as a natural replica's first outbox always was).
// c.mu is held.
func (col *Column) newOutbox(c *cell, gen bool) *reset.Outbox {
	var from *reset.Outbox
	for _, o := range c.b.Out {
		if from == nil || o.Acked() < from.Acked() {
			from = o
		}
	}
	switch {
	case from != nil:
		return from.Fork()
	case gen:
		return reset.OutboxAt(c.b.Gen)
	}
	return &reset.Outbox{}
}

// PrepareJoin implements coltype.Joinable: the cell gets an outbox to the
// joiner holding every op some peer has not acknowledged, so that every op
// after what a later snapshot of any replica delivered from this one
// reaches the joiner. A cell where this replica generated nothing needs
// none yet (the first op creates it, numbered from 0).
func (col *Column) PrepareJoin(l coltype.Leader, key []byte, name string, joiner counters.ID) error {
	j := reset.ID(joiner)
	if j == col.self {
		return nil
	}
	c, unlock, err := col.lock(l, key, name)
	if err != nil {
		return err
	}
	defer unlock()
	if c.b.Out[j] != nil || (c.b.Gen == 0 && len(c.b.Out) == 0) {
		return nil
	}
	c.b.Out[j] = col.newOutbox(c, true)
	if err := col.write(l, key, name, c, 0); err != nil {
		return fmt.Errorf("%s: prepare join: %w", TypeName, err)
	}
	col.MarkDirty(col.id.CellRef(key, name))
	return nil
}

// SnapshotFor implements coltype.Joinable: the cell the joiner adopts, this
// replica's state owned by the joiner, with this replica's delivered counts
// (its own op count as the count delivered from it) and op ids, and no
// outboxes. This replica's outbox to the joiner is created first if the
// cell has none, empty and numbered from its op count.
func (col *Column) SnapshotFor(l coltype.Leader, key []byte, name string, joiner counters.ID) (row.Cell, bool, error) {
	j := reset.ID(joiner)
	if j == col.self {
		return row.Cell{}, false, nil
	}
	c, unlock, err := col.lock(l, key, name)
	if err != nil {
		return row.Cell{}, false, err
	}
	defer unlock()
	b := c.b
	if b.Delivered() == 0 && len(b.Out) == 0 {
		return row.Cell{}, false, nil
	}
	if in := b.In[j]; in != nil && in.Delivered() > 0 {
		return row.Cell{}, false, fmt.Errorf("%s: %s already generated ops in this cell; it cannot join it again", TypeName, j)
	}
	if b.Out[j] == nil {
		b.Out[j] = col.newOutbox(c, true)
		if err := col.write(l, key, name, c, 0); err != nil {
			return row.Cell{}, false, fmt.Errorf("%s: snapshot: %w", TypeName, err)
		}
		col.MarkDirty(col.id.CellRef(key, name))
	}
	snap := &Blob{State: b.State.CloneAs(j), Out: map[reset.ID]*reset.Outbox{}, In: map[reset.ID]*reset.Inbox{}, Recent: col.recent.list(col.id.CellKey(key, name), col.horizon())}
	for k, in := range b.In {
		if k != j {
			snap.In[k] = reset.InboxAt(in.Delivered())
		}
	}
	snap.In[col.self] = reset.InboxAt(b.Gen)
	enc, err := EncodeCell(snap)
	if err != nil {
		return row.Cell{}, false, err
	}
	return row.Cell{Column: col.id.CellName(name), Value: enc, Timestamp: col.env.Now().UnixMicro()}, true, nil
}

// adopt takes a snapshot made for this replica (SnapshotFor) as its cell:
// the ops it already delivered from any origin must be among the
// snapshot's, and it must have generated none; ops it holds beyond a gap
// are kept and delivered if the snapshot fills the gap. A snapshot this
// replica's cell already covers (streamed again) changes nothing.
func (col *Column) adopt(l coltype.Leader, key []byte, name string, snap *Blob) error {
	if snap.State.Kind() != col.newState().Kind() {
		return fmt.Errorf("%w: column %s: the snapshot's kind is not the column's", ErrCorrupt, col.id.Column)
	}
	c, unlock, err := col.lock(l, key, name)
	if err != nil {
		return err
	}
	defer unlock()
	cur := c.b
	delivered := func(in map[reset.ID]*reset.Inbox, k reset.ID) uint64 {
		if x := in[k]; x != nil {
			return x.Delivered()
		}
		return 0
	}
	covered, ahead := true, cur.Gen > 0
	for k, in := range snap.In {
		if in.Delivered() > delivered(cur.In, k) {
			covered = false
		}
	}
	for k, in := range cur.In {
		if in.Delivered() > delivered(snap.In, k) {
			ahead = true
		}
	}
	switch {
	case covered:
		return nil
	case ahead:
		return fmt.Errorf("%w: column %s: this replica delivered ops the snapshot lacks (or generated some)", ErrAdopt, col.id.Column)
	}
	c.b.State = snap.State
	for k, in := range snap.In {
		if x := cur.In[k]; x != nil {
			x.Skip(in.Delivered())
		} else {
			c.b.In[k] = reset.InboxAt(in.Delivered())
		}
	}
	for _, r := range snap.Recent {
		remember(c.b, r)
	}
	for _, k := range slices.SortedFunc(maps.Keys(c.b.In), reset.ID.Compare) {
		if err := col.receive(l, key, name, c, k, nil, false); err != nil {
			return err
		}
	}
	return col.write(l, key, name, c, 0)
}
