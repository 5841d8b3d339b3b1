package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/coltype/handoffcol"
	"github.com/idemkv/idemkv/counters/handoff"
)

// HandoffPayloadKey is the custom payload key of a handoff counter exchange:
// on the request the client's encoded handoff state (its view for a tier-0
// server), on the response the server replica's view for the client. It
// is the key the column type names (coltype/handoffcol).
const HandoffPayloadKey = handoffcol.PayloadKey

// HandoffCounter is a tier-1 participant of one handoff_counter cell
// (counters/handoff; the cell's replicas are tier 0). Increments are counted
// locally (Add) and handed off to a replica by exchanges (Exchange): each is
// one `UPDATE <table> SET <column> = <column> + 0 WHERE <where>` carrying the
// client's state in the custom payload `idemkv-handoff` and answered with the
// server's view in the same payload key (protocol v4 or later). Exchanges
// are idempotent, so retrying one, or sending one twice, is always safe; the
// statement is marked idempotent for gocql's retry policy. It takes a few
// exchanges to hand increments off (the four-way handshake of the paper's
// Figure 2); Flush exchanges until everything is handed off.
//
// Durability. With HandoffOptions.File the state is written to that file and
// fsynced after every change (Add, and merging a reply) and before anything
// derived from it is sent (§7.2); a client that restarts with the same file
// resumes where it was. Without a file the state is in memory only: a client
// that crashes loses the increments it has not handed off yet (those a
// replica has acquired are safe).
//
// Retire (§7.4) ends the participation: once nothing is pending it sends a
// retirement notice (counters/handoff Notice) that carries the client's
// tokens and has the replicas drop the slots it left, and stops as soon as
// one replica holds the notice, without waiting for a replica that is down.
// A retired counter refuses Add and Exchange and its file is removed.
//
// A HandoffCounter is safe for concurrent use.
type HandoffCounter struct {
	session *gocql.Session
	stmt    string
	values  []any
	cl      gocql.Consistency
	file    string

	mu        sync.Mutex
	state     *handoff.Counter
	notice    *handoff.Notice[handoff.Count] // set once retiring: the state is frozen
	added     uint64                         // increments added by this process
	accounted uint64                         // of them, known acquired by a tier-0 replica
	retired   bool

	exchanges, sent, received atomic.Uint64
}

// HandoffOptions configure a HandoffCounter.
type HandoffOptions struct {
	// File keeps the state durable: loaded from it if it exists, written and
	// fsynced after every change. Empty: in memory only.
	File string
	// ID is the client's id; zero picks a random one. It must be globally
	// unique and never reused by another participant (a file keeps it).
	ID handoff.ID
	// Consistency of the exchanges; zero uses the session's. An exchange
	// involves one replica whatever the level.
	Consistency gocql.Consistency
}

// NewHandoffCounter returns the participant of the cell of column of table
// (e.g. "ks.t") selected by where (e.g. "k = ?") with its values.
func NewHandoffCounter(session *gocql.Session, table, column, where string, o HandoffOptions, values ...any) (*HandoffCounter, error) {
	h := &HandoffCounter{
		session: session,
		stmt:    fmt.Sprintf("UPDATE %s SET %s = %s + ? WHERE %s", table, column, column, where),
		values:  values, cl: o.Consistency, file: o.File,
	}
	if o.File != "" {
		b, err := os.ReadFile(o.File)
		switch {
		case err == nil:
			m, _, err := handoff.DecodeMessage(b)
			if err != nil {
				return nil, fmt.Errorf("client: handoff state %s: %w", o.File, err)
			}
			h.state = m.State
			for _, n := range m.Notices { // it was retiring: it goes on retiring
				if n.Notice.ID == h.state.ID() {
					h.notice = n.Notice
				}
			}
			return h, nil
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("client: handoff state: %w", err)
		}
	}
	id := o.ID
	if id == (handoff.ID{}) {
		if _, err := rand.Read(id[:]); err != nil {
			return nil, err
		}
	}
	h.state = handoff.NewCounter(id, 1)
	if err := h.persist(); err != nil {
		return nil, err
	}
	return h, nil
}

// ErrRetired is returned by a retired HandoffCounter, and by one that has
// started to retire (its state is frozen).
var ErrRetired = errors.New("client: handoff counter retired")

// ID is the client's id in the counter.
func (h *HandoffCounter) ID() handoff.ID {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state.ID()
}

// Add counts n increments locally (durably, with a file); they reach the
// servers with the next exchanges.
func (h *HandoffCounter) Add(n uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.retired || h.notice != nil {
		return ErrRetired
	}
	if n == 0 {
		return nil
	}
	h.state.Add(n)
	h.added += n
	return h.persist()
}

// Exchange runs one exchange with a replica of the cell: sends the client's
// state and merges the server's answer. An error leaves the state as it
// was: retry at will.
func (h *HandoffCounter) Exchange(ctx context.Context) error { return h.exchange(ctx, nil) }

// ExchangeTagged is Exchange with an op id attached (the `idemkv-op`
// payload): handoff counters ignore it; it lets tools trace the exchanges
// of one operation, or inject faults into them.
func (h *HandoffCounter) ExchangeTagged(ctx context.Context, op OpID) error {
	return h.exchange(ctx, op.Bytes())
}

func (h *HandoffCounter) exchange(ctx context.Context, op []byte) error {
	h.mu.Lock()
	if h.retired || h.notice != nil {
		h.mu.Unlock()
		return ErrRetired
	}
	view, err := h.state.View(handoff.ID{}, 0).MarshalBinary()
	h.mu.Unlock()
	if err != nil {
		return err
	}
	reply, err := h.roundTrip(ctx, view, op)
	if err != nil {
		return err
	}
	r := handoff.NewCounter(handoff.ID{}, 0)
	if err := r.UnmarshalBinary(reply); err != nil {
		return fmt.Errorf("client: server's handoff view: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.notice != nil { // Retire froze the state meanwhile
		return ErrRetired
	}
	h.state.Merge(r)
	if len(h.state.TokenDestinations()) == 0 {
		// No token outstanding: everything not pending was acquired.
		h.accounted = max(h.accounted, h.added-min(h.added, uint64(h.state.Pending())))
	}
	return h.persist()
}

// roundTrip sends one exchange (the handoff payload out, the replica's
// answer back).
func (h *HandoffCounter) roundTrip(ctx context.Context, out, op []byte) ([]byte, error) {
	q := h.session.Query(h.stmt, append([]any{int64(0)}, h.values...)...).Idempotent(true)
	if h.cl != 0 {
		q.Consistency(h.cl)
	}
	payload := map[string][]byte{HandoffPayloadKey: out}
	if op != nil {
		payload[PayloadKey] = op
	}
	q.CustomPayload(payload)
	h.exchanges.Add(1)
	h.sent.Add(uint64(len(out)))
	iter := q.WithContext(ctx).Iter()
	answer := iter.GetCustomPayload()
	if err := iter.Close(); err != nil {
		return nil, err
	}
	reply, ok := answer[HandoffPayloadKey]
	if !ok {
		return nil, fmt.Errorf("client: the answer carries no %s payload (a server without handoff counters, or protocol v3)", HandoffPayloadKey)
	}
	h.received.Add(uint64(len(reply)))
	return reply, nil
}

// Flush exchanges until every increment is handed off (Handed), retrying
// failed exchanges after a short pause, until ctx ends.
func (h *HandoffCounter) Flush(ctx context.Context) error {
	pause := 10 * time.Millisecond
	for !h.Handed() {
		if err := h.Exchange(ctx); err != nil {
			if errors.Is(err, ErrRetired) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("client: handoff flush: %w (last error: %v)", ctx.Err(), err)
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
		}
	}
	return nil
}

// Handed reports whether every increment is handed off: nothing pending and
// no token held (§7.4's normal condition).
func (h *HandoffCounter) Handed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state.Handed()
}

// Retire ends the participation (§7.4). It exchanges until nothing is
// pending (every increment is in a token or acquired), then freezes the
// state and makes its retirement notice, which carries the tokens and has
// the replicas drop any slot the client left (an exchange whose answer was
// lost, say). The frozen state and the notice are written to the file
// before anything is sent, so a client that restarts goes on retiring and
// never counts again with this id. The notice goes with one more exchange,
// repeated until a replica answers with it (it holds it durably); then the
// counter is retired and the file removed. Tokens for a replica that is
// down do not hold retirement up: the notice delivers them. Failed
// exchanges are retried after a pause until ctx ends; Retire may then be
// called again.
func (h *HandoffCounter) Retire(ctx context.Context) error {
	pause := 10 * time.Millisecond
	wait := func(err error) error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("client: handoff retire: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
		return nil
	}
	for {
		h.mu.Lock()
		retired, frozen, pending := h.retired, h.notice != nil, h.state.Pending()
		h.mu.Unlock()
		if retired {
			return nil
		}
		if frozen || pending == 0 {
			break
		}
		if err := h.Exchange(ctx); err != nil && !errors.Is(err, ErrRetired) {
			if werr := wait(err); werr != nil {
				return werr
			}
		}
	}
	h.mu.Lock()
	if h.notice == nil && h.state.Unused() { // no server ever had a slot for it
		h.mu.Unlock()
		return h.retireDone()
	}
	if h.notice == nil {
		h.notice = h.state.State.Retire()
		if err := h.persist(); err != nil {
			h.notice = nil // not frozen on disk: nothing sent yet, so not frozen at all
			h.mu.Unlock()
			return err
		}
	}
	out, err := (&handoff.Message{State: h.state.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{{Notice: h.notice}}}).MarshalBinary()
	id := h.state.ID()
	h.mu.Unlock()
	if err != nil {
		return err
	}
	for {
		reply, err := h.roundTrip(ctx, out, nil)
		if err == nil {
			var m *handoff.Message
			if m, _, err = handoff.DecodeMessage(reply); err == nil {
				if slices.ContainsFunc(m.Notices, func(n *handoff.HeldNotice) bool { return n.Notice.ID == id }) {
					break
				}
				err = errors.New("client: the replica's answer does not carry the retirement notice")
			}
		}
		if werr := wait(err); werr != nil {
			return werr
		}
	}
	return h.retireDone()
}

// retireDone removes the file and marks the counter retired.
func (h *HandoffCounter) retireDone() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.file != "" {
		if err := os.Remove(h.file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	h.retired = true
	return nil
}

// Value is the client's local fetch: a lower bound of the counter (what a
// server last reported, plus what the client has not handed off).
func (h *HandoffCounter) Value() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state.Fetch()
}

// HandoffStats are a HandoffCounter's counts since it was created.
type HandoffStats struct {
	Added     uint64 // increments added
	Accounted uint64 // of them, known to be acquired by a tier-0 replica
	Exchanges uint64 // exchanges sent (failed ones included)
	BytesSent uint64 // state bytes sent in payloads
	BytesRecv uint64 // view bytes received in payloads
	Slots     int    // slots the client state holds (always 0 at tier 1)
	Tokens    int    // tokens held
}

// Stats returns the counts.
func (h *HandoffCounter) Stats() HandoffStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HandoffStats{Added: h.added, Accounted: h.accounted, Exchanges: h.exchanges.Load(),
		BytesSent: h.sent.Load(), BytesRecv: h.received.Load(), Slots: h.state.Slots(), Tokens: h.state.Tokens()}
}

// persist writes the state to the file (temp file, fsync, rename, fsync of
// the directory); h.mu is held.
func (h *HandoffCounter) persist() error {
	if h.file == "" {
		return nil
	}
	b, err := h.state.MarshalBinary()
	if h.notice != nil {
		b, err = (&handoff.Message{State: h.state, Notices: []*handoff.HeldNotice{{Notice: h.notice}}}).MarshalBinary()
	}
	if err != nil {
		return err
	}
	tmp := h.file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("client: persist handoff state: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("client: persist handoff state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("client: persist handoff state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("client: persist handoff state: %w", err)
	}
	if err := os.Rename(tmp, h.file); err != nil {
		return fmt.Errorf("client: persist handoff state: %w", err)
	}
	if d, err := os.Open(filepath.Dir(h.file)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("client: persist handoff state: %w", err)
		}
	}
	return nil
}
