package borrow

import (
	"errors"
	"fmt"
	"slices"
)

// Loan is one borrow request of a client and what it knows of its answer:
// the creator asked, the dot lent (Seq 0 while the answer is unknown) and
// the client's cumulative count in it.
type Loan struct {
	Creator ID
	Dot     Dot // Seq 0: asked, answer not (yet) received
	Count   uint64
}

// Known reports whether the client knows the dot lent.
func (l Loan) Known() bool { return l.Dot.Seq != 0 }

// Client is what a transient node keeps for one counter cell: the loans it
// asked for (one per creator, since Create is idempotent per (creator,
// client)), its cumulative count in each, which loan it counts into, and
// whether it retired. It never holds a State: every write it makes is a
// Write of one dot with the dot's cumulative count, so resending any write
// to any replica, any number of times, is harmless.
//
// A client persists its Client (MarshalBinary) before anything derived from
// it leaves: before a borrow request (Ask), before a write (Add) and before
// the retirement (Retire). One that loses it must not reuse its id: it
// starts again as a new client, and what it counted and did not write
// durably is lost (an under-count, never an over-count).
type Client struct {
	id      ID
	loans   []Loan // ascending creator
	current int    // index of the loan counted into; -1 before any is known
	retired bool
}

// NewClient returns a client with a fresh id and no loan.
func NewClient(id ID) *Client { return &Client{id: id, current: -1} }

// ID returns the client's id.
func (c *Client) ID() ID { return c.id }

// Retired reports whether Retire succeeded.
func (c *Client) Retired() bool { return c.retired }

// Loans returns a copy of the client's loans in creator order.
func (c *Client) Loans() []Loan { return slices.Clone(c.loans) }

// Count returns the client's total count over all its dots.
func (c *Client) Count() uint64 {
	var n uint64
	for _, l := range c.loans {
		n += l.Count
	}
	return n
}

// ErrRetired is returned by a Client that retired.
var ErrRetired = errors.New("borrow: client retired")

// ErrNoLoan is returned by Add before the client knows any dot.
var ErrNoLoan = errors.New("borrow: no dot borrowed yet")

func (c *Client) find(creator ID) (int, bool) {
	return slices.BinarySearchFunc(c.loans, creator, func(l Loan, id ID) int { return l.Creator.Compare(id) })
}

// Ask records that a borrow request is about to be sent to creator (the
// creator answers with State.Create(creator, c.ID())). Asking the same
// creator again, after a lost answer, is the same request: Create is
// idempotent per (creator, client).
func (c *Client) Ask(creator ID) error {
	if c.retired {
		return ErrRetired
	}
	i, ok := c.find(creator)
	if !ok {
		c.loans = slices.Insert(c.loans, i, Loan{Creator: creator})
		if c.current >= i {
			c.current++
		}
	}
	return nil
}

// Lent records the answer of a borrow request: the dot d lent by
// d.Creator. An answer for a creator that was not asked, or a different dot
// from the one already known from that creator, is an error (a creator that
// lost its state and lent again); a duplicate answer changes nothing.
func (c *Client) Lent(d Dot) error {
	i, ok := c.find(d.Creator)
	if !ok {
		return fmt.Errorf("borrow: answer from %v, which was not asked", d.Creator)
	}
	if d.Seq == 0 {
		return errors.New("borrow: answer with dot sequence 0")
	}
	l := &c.loans[i]
	switch {
	case l.Dot == d:
	case l.Known():
		return fmt.Errorf("borrow: %v lent %v, then %v", d.Creator, l.Dot, d)
	default:
		l.Dot = d
	}
	if c.current < 0 {
		c.current = i
	}
	return nil
}

// Add counts n into the current dot and returns the write that carries the
// dot's new cumulative count. Writing it to any replica, or writing it again
// after a timeout, is idempotent.
func (c *Client) Add(n uint64) (*State, error) {
	if c.retired {
		return nil, ErrRetired
	}
	if c.current < 0 {
		return nil, ErrNoLoan
	}
	l := &c.loans[c.current]
	l.Count += n
	return Write(c.id, l.Dot, Cell{Count: l.Count}), nil
}

// Writes returns one write per known dot with its cumulative count (frozen
// after Retire): what a client resends when it does not know which of its
// writes arrived. After Retire it is the retirement, dot by dot.
func (c *Client) Writes() []*State {
	var out []*State
	for _, l := range c.loans {
		if l.Known() {
			out = append(out, Write(c.id, l.Dot, Cell{Frozen: c.retired, Count: l.Count}))
		}
	}
	return out
}

// Unknown returns the creators asked whose answer the client does not know:
// each may hold a dot lent to the client that nobody would ever freeze. The
// client asks them again (the answer is the same dot) before it retires.
func (c *Client) Unknown() []ID {
	var out []ID
	for _, l := range c.loans {
		if !l.Known() {
			out = append(out, l.Creator)
		}
	}
	return out
}

// ErrUnknownLoans is returned by Retire while Unknown is not empty.
var ErrUnknownLoans = errors.New("borrow: a borrow answer is unknown; ask that creator again before retiring")

// Retire freezes every dot of the client and returns the retirement: one
// state holding all of them, frozen, with their final counts. It fails while
// an answer is unknown (see Unknown; Abandon gives up on one). Calling it
// again returns the same retirement. The client may leave once one replica
// has acknowledged the retirement after making it durable: from then on the
// replicas carry it to each creator, which transfers its dot.
func (c *Client) Retire() (*State, error) {
	if u := c.Unknown(); len(u) > 0 {
		return nil, fmt.Errorf("%w (%d creators)", ErrUnknownLoans, len(u))
	}
	c.retired = true
	return c.Retirement(), nil
}

// Retirement returns the retirement write of a retired client (every known
// dot frozen with its final count in one state); nil before Retire.
func (c *Client) Retirement() *State {
	if !c.retired {
		return nil
	}
	s := New()
	for _, l := range c.loans {
		if l.Known() {
			s.Join(Write(c.id, l.Dot, Cell{Frozen: true, Count: l.Count}))
		}
	}
	return s
}

// Abandon gives up on the unknown answer of creator (a creator down for
// good, say), so that Retire can proceed. If the creator did lend a dot,
// that dot (count 0) stays active in the cell: it is never counted wrong,
// but it is never collected either (see the package comment).
func (c *Client) Abandon(creator ID) {
	i, ok := c.find(creator)
	if !ok || c.loans[i].Known() {
		return
	}
	c.loans = slices.Delete(c.loans, i, i+1)
	if c.current > i {
		c.current--
	}
}
