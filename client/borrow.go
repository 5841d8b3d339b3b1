package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/coltype/borrowcol"
	"github.com/idemkv/idemkv/counters/borrow"
)

// BorrowPayloadKey is the custom payload key of a Borrow-Counter exchange
// (coltype/borrowcol documents the payloads).
const BorrowPayloadKey = borrowcol.PayloadKey

// BorrowCounter is a transient node of one borrow_counter cell
// (counters/borrow, coltype/borrowcol): it borrows a dot from a replica of
// the cell once, then every Add is one write carrying the dot's cumulative
// count, and Retire freezes the dot and hands it back. Each exchange is
// one `UPDATE <table> SET <column> = <column> + 0 WHERE <where>` carrying
// the payload `idemkv-borrow` (protocol v4 or later), answered in the same
// payload key; the coordinator forwards a borrow request to the first live
// replica of the key, and a write to every live replica, acknowledged at
// the statement's consistency level (BorrowOptions.Consistency, else the
// session's). Every exchange is idempotent — a borrow request returns the
// same dot (Create is idempotent per (creator, client)), a write carries a
// cumulative count that the replicas join (the maximum) — so retrying one,
// at any coordinator, or sending one twice, is always safe; the statement
// is marked idempotent for gocql's retry policy.
//
// Round trips per client per cell: one borrow (more only after a lost
// answer), one write per Add, one retirement; no handshake.
//
// Durability. With BorrowOptions.File the client's state (borrow.Client:
// its id, the dot it borrowed, its cumulative count, whether it retired)
// is written to that file and fsynced before anything derived from it is
// sent; a client that restarts with the same file resumes where it was,
// and a retiring one goes on retiring. Without a file the state is in
// memory only: a client that crashes loses what it counted since its last
// acknowledged write (an under-count, never an over-count), and the dot it
// borrowed stays active (counted, never collected) since nobody will
// retire it.
//
// An Add whose write fails keeps its increments: they are in the
// cumulative count that the next Add, Flush or Retire sends.
//
// A BorrowCounter is safe for concurrent use.
type BorrowCounter struct {
	session *gocql.Session
	stmt    string
	values  []any
	cl      gocql.Consistency
	file    string

	mu      sync.Mutex
	c       *borrow.Client
	done    bool   // the retirement was acknowledged by a replica
	written uint64 // the cumulative count last acknowledged

	exchanges, borrows, writes, sent, received atomic.Uint64
}

// BorrowOptions configure a BorrowCounter.
type BorrowOptions struct {
	// File keeps the state durable: loaded from it if it exists, written and
	// fsynced after every change. Empty: in memory only.
	File string
	// ID is the client's id; zero picks a random one. It must be globally
	// unique and never reused (a file keeps it).
	ID borrow.ID
	// Consistency of the writes; zero uses the session's. A write is
	// acknowledged once that many replicas joined it; a borrow request
	// involves one replica whatever the level.
	Consistency gocql.Consistency
}

// ErrBorrowRetired is returned by a BorrowCounter that retired (or started
// to).
var ErrBorrowRetired = errors.New("client: borrow counter retired")

// NewBorrowCounter returns the transient node of the cell of column of
// table (e.g. "ks.t") selected by where (e.g. "k = ?") with its values.
func NewBorrowCounter(session *gocql.Session, table, column, where string, o BorrowOptions, values ...any) (*BorrowCounter, error) {
	b := &BorrowCounter{
		session: session,
		stmt:    fmt.Sprintf("UPDATE %s SET %s = %s + ? WHERE %s", table, column, column, where),
		values:  values, cl: o.Consistency, file: o.File,
	}
	if o.File != "" {
		data, err := os.ReadFile(o.File)
		switch {
		case err == nil:
			b.c = borrow.NewClient(borrow.ID{})
			if err := b.c.UnmarshalBinary(data); err != nil {
				return nil, fmt.Errorf("client: borrow state %s: %w", o.File, err)
			}
			return b, nil
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("client: borrow state: %w", err)
		}
	}
	id := o.ID
	if id == (borrow.ID{}) {
		if _, err := rand.Read(id[:]); err != nil {
			return nil, fmt.Errorf("client: borrow id: %w", err)
		}
	}
	b.c = borrow.NewClient(id)
	if err := b.persist(); err != nil {
		return nil, err
	}
	return b, nil
}

// ID is the client's id in the counter.
func (b *BorrowCounter) ID() borrow.ID { return b.c.ID() }

// known reports whether the client knows a dot; b.mu is held.
func (b *BorrowCounter) known() bool {
	for _, l := range b.c.Loans() {
		if l.Known() {
			return true
		}
	}
	return false
}

// Borrow borrows a dot if the client knows none yet (Add does it first
// when needed). Repeating it is harmless.
func (b *BorrowCounter) Borrow(ctx context.Context) error {
	b.mu.Lock()
	if b.c.Retired() {
		b.mu.Unlock()
		return ErrBorrowRetired
	}
	if b.known() {
		b.mu.Unlock()
		return nil
	}
	id := b.c.ID()
	b.mu.Unlock()
	b.borrows.Add(1)
	reply, err := b.roundTrip(ctx, borrowcol.EncodeBorrow(id), nil)
	if err != nil {
		return err
	}
	s := borrow.New()
	if err := s.UnmarshalBinary(reply); err != nil {
		return fmt.Errorf("client: borrow answer: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	got := 0
	for _, o := range s.Dots() {
		if o.Owner != id || o.Cell.Frozen {
			continue
		}
		if err := b.c.Ask(o.Dot.Creator); err != nil {
			return fmt.Errorf("client: borrow: %w", err)
		}
		if err := b.c.Lent(o.Dot); err != nil {
			return fmt.Errorf("client: borrow: %w", err)
		}
		got++
	}
	if got == 0 {
		return errors.New("client: the borrow answer lends no active dot")
	}
	return b.persist()
}

// ErrNotBorrowed is returned by Incr before the client knows a dot.
var ErrNotBorrowed = errors.New("client: no dot borrowed yet (call Borrow)")

// Add counts n into the borrowed dot (borrowing one first if needed) and
// sends the dot's new cumulative count in one write. The count is made
// durable (with a file) before the write leaves; if the write fails, the
// increments stay counted and the next Add, Send, Flush or Retire carries
// them.
func (b *BorrowCounter) Add(ctx context.Context, n uint64) error {
	if err := b.Borrow(ctx); err != nil {
		return err
	}
	if err := b.Incr(n); err != nil {
		return err
	}
	return b.Send(ctx)
}

// Incr counts n into the borrowed dot locally (durably, with a file),
// without sending anything: the next Send, Flush or Retire carries it. It
// fails with ErrNotBorrowed before Borrow.
func (b *BorrowCounter) Incr(n uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c.Retired() {
		return ErrBorrowRetired
	}
	if _, err := b.c.Add(n); err != nil {
		if errors.Is(err, borrow.ErrNoLoan) {
			return ErrNotBorrowed
		}
		return fmt.Errorf("client: borrow incr: %w", err)
	}
	return b.persist()
}

// Send sends one write of the current dot's cumulative count (one round
// trip, no retry; resending is always safe).
func (b *BorrowCounter) Send(ctx context.Context) error { return b.send(ctx, nil) }

// SendTagged is Send with an op id attached (the `idemkv-op` payload):
// Borrow-Counters ignore it; it lets tools trace the writes of one
// operation, or inject faults into them.
func (b *BorrowCounter) SendTagged(ctx context.Context, op OpID) error {
	return b.send(ctx, op.Bytes())
}

func (b *BorrowCounter) send(ctx context.Context, op []byte) error {
	b.mu.Lock()
	if b.c.Retired() {
		b.mu.Unlock()
		return ErrBorrowRetired
	}
	w, err := b.c.Add(0)
	count := b.c.Count()
	b.mu.Unlock()
	if errors.Is(err, borrow.ErrNoLoan) {
		return ErrNotBorrowed
	}
	if err != nil {
		return fmt.Errorf("client: borrow send: %w", err)
	}
	return b.write(ctx, w, count, op)
}

// write sends a client write; count is the cumulative count it carries.
func (b *BorrowCounter) write(ctx context.Context, w *borrow.State, count uint64, op []byte) error {
	p, err := borrowcol.EncodeWrite(w)
	if err != nil {
		return err
	}
	b.writes.Add(1)
	if _, err := b.roundTrip(ctx, p, op); err != nil {
		return err
	}
	b.mu.Lock()
	b.written = max(b.written, count)
	b.mu.Unlock()
	return nil
}

// Flush sends the cumulative count of every dot once more (even if it was
// acknowledged: a replica that crashed before syncing its commit log may
// have lost it) until it is acknowledged, with a pause between
// failed attempts, until ctx ends.
func (b *BorrowCounter) Flush(ctx context.Context) error {
	return retry(ctx, func() error {
		b.mu.Lock()
		if b.c.Retired() {
			b.mu.Unlock()
			return ErrBorrowRetired
		}
		ws := b.c.Writes()
		count := b.c.Count()
		b.mu.Unlock()
		for _, w := range ws {
			if err := b.write(ctx, w, count, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// Retire freezes the client's dots (durably, with a file: a client that
// restarts goes on retiring and never counts again with this id) and sends
// the retirement — every dot with its final count, frozen, in one write —
// until it is acknowledged (at the consistency level, each replica having
// made it durable first); the replicas carry it to each creator, which
// transfers the dot. Then the file is removed. Failed attempts are retried after a
// pause until ctx ends; Retire may then be called again. A client that
// never borrowed retires at once.
func (b *BorrowCounter) Retire(ctx context.Context) error {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return nil
	}
	if !b.known() {
		b.mu.Unlock()
		return b.retireDone()
	}
	ret, err := b.c.Retire()
	if err == nil {
		err = b.persist()
	}
	count := b.c.Count()
	b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("client: borrow retire: %w", err)
	}
	if err := retry(ctx, func() error { return b.write(ctx, ret, count, nil) }); err != nil {
		return err
	}
	return b.retireDone()
}

func (b *BorrowCounter) retireDone() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.file != "" {
		if err := os.Remove(b.file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("client: borrow retire: %w", err)
		}
	}
	b.done = true
	if !b.c.Retired() {
		_, _ = b.c.Retire() // no dot: nothing to send
	}
	return nil
}

// retry runs f until it succeeds, returns ErrBorrowRetired, or ctx ends.
func retry(ctx context.Context, f func() error) error {
	pause := 10 * time.Millisecond
	for {
		err := f()
		if err == nil || errors.Is(err, ErrBorrowRetired) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("client: borrow counter: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// roundTrip sends one exchange and returns the replica's answer.
func (b *BorrowCounter) roundTrip(ctx context.Context, out, op []byte) ([]byte, error) {
	q := b.session.Query(b.stmt, append([]any{int64(0)}, b.values...)...).Idempotent(true)
	if b.cl != 0 {
		q.Consistency(b.cl)
	}
	payload := map[string][]byte{BorrowPayloadKey: out}
	if op != nil {
		payload[PayloadKey] = op
	}
	q.CustomPayload(payload)
	b.exchanges.Add(1)
	b.sent.Add(uint64(len(out)))
	iter := q.WithContext(ctx).Iter()
	answer := iter.GetCustomPayload()
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("client: borrow exchange: %w", err)
	}
	reply, ok := answer[BorrowPayloadKey]
	if !ok {
		return nil, fmt.Errorf("client: the answer carries no %s payload (a server without borrow counters, or protocol v3)", BorrowPayloadKey)
	}
	b.received.Add(uint64(len(reply)))
	return reply, nil
}

// Count is the client's cumulative count over its dots.
func (b *BorrowCounter) Count() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c.Count()
}

// Retired reports whether the retirement was acknowledged.
func (b *BorrowCounter) Retired() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// BorrowStats are a BorrowCounter's counts since it was created (or
// reopened).
type BorrowStats struct {
	Exchanges uint64 // round trips sent (failed ones included)
	Borrows   uint64 // borrow requests sent
	Writes    uint64 // writes sent (the retirement included)
	BytesSent uint64 // payload bytes sent
	BytesRecv uint64 // payload bytes received
}

// Stats returns the counts.
func (b *BorrowCounter) Stats() BorrowStats {
	return BorrowStats{Exchanges: b.exchanges.Load(), Borrows: b.borrows.Load(), Writes: b.writes.Load(),
		BytesSent: b.sent.Load(), BytesRecv: b.received.Load()}
}

// persist writes the state to the file (temp file, fsync, rename, fsync of
// the directory); b.mu is held.
func (b *BorrowCounter) persist() error {
	if b.file == "" {
		return nil
	}
	data, err := b.c.MarshalBinary()
	if err != nil {
		return err
	}
	if err := writeFileSync(b.file, data); err != nil {
		return fmt.Errorf("client: persist borrow state: %w", err)
	}
	return nil
}

// writeFileSync replaces path with data durably.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
