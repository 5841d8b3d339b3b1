package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/coltype/resetcol"
)

// The reset sampler (Config.ResetSampler): while the reset mode's clients
// increment bench.reset (with op ids, like every mode; a retry after a lost
// answer is dismissed by the leader), a sampler takes, every period, a few
// seeded random keys the clients touched; for each it reads the counter
// with its reset context (the custom payload resetcol.ContextPayloadKey),
// then DELETEs the column with that context at ALL, retrying the same
// DELETE (a replay changes nothing) until it is acknowledged, and only then
// books the value it read as that key's sample. An acknowledgement at ALL
// means every replica applied the reset, so the sampler's next read of the
// key, at any replica, already excludes what it cancelled
// (docs/reset-counter.md, (d)). A DELETE whose answer arrives is dropped
// with the run's lost-ack probability (seeded, as for the increments), so
// replays happen even without kills.
//
// Accounting: the reset cancels exactly the increments the sample read, so
// per key the samples plus the value read at ALL after the run must equal
// the acknowledged increments, plus at most those of unknown outcome: the
// ledger's Tally of final + samples (resetBook.combine).

// ResetSampleResult is what the reset sampler did in a run.
type ResetSampleResult struct {
	PeriodMS float64 `json:"period_ms"`
	Keys     int     `json:"keys"`    // keys sampled per period
	Ticks    int     `json:"ticks"`   // periods the sampler ran
	Samples  int64   `json:"samples"` // resets acknowledged and booked
	Sampled  int64   `json:"sampled"` // Σ values booked
	// FinalRead is Σ values read at ALL after the run (the mode's Final is
	// FinalRead + Sampled).
	FinalRead int64 `json:"final_read"`
	// DeleteAttempts counts every DELETE sent; DroppedAcks the
	// acknowledgements the sampler dropped (injected), each followed by a
	// replay of the same DELETE; Failed the attempts answered with an error.
	DeleteAttempts int64 `json:"delete_attempts"`
	DroppedAcks    int64 `json:"dropped_acks"`
	Failed         int64 `json:"failed_attempts"`
	ReadErrors     int64 `json:"read_errors"` // reads that failed (the key is skipped that period)
	// MaxResetMS is the longest from a sample's read to its reset's
	// acknowledgement.
	MaxResetMS float64 `json:"max_reset_ms"`
}

// resetStore is what the sampler needs of the ring: read a key with its
// reset context, and reset a key with a context.
type resetStore interface {
	readWithContext(ctx context.Context, key int) (v int64, rctx []byte, err error)
	resetWithContext(ctx context.Context, key int, rctx []byte) error
}

// resetBook is the sampler's accounting: per key, Σ values whose reset was
// acknowledged. It is safe for concurrent use.
type resetBook struct {
	mu      sync.Mutex
	sampled map[int]int64
	samples int64
}

func newResetBook() *resetBook { return &resetBook{sampled: map[int]int64{}} }

// book enters the sample v of key k, once its reset is acknowledged.
func (b *resetBook) book(k int, v int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sampled[k] += v
	b.samples++
}

// total returns Σ samples and their number.
func (b *resetBook) total() (sum, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, v := range b.sampled {
		sum += v
	}
	return sum, b.samples
}

// combine returns final + samples per key: what the ledger's Tally checks
// against the acknowledged increments.
func (b *resetBook) combine(final map[int]int64) map[int]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[int]int64, len(final)+len(b.sampled))
	for k, v := range final {
		out[k] = v
	}
	for k, v := range b.sampled {
		out[k] += v
	}
	return out
}

// resetSampler samples and resets keys of one store.
type resetSampler struct {
	store resetStore
	book  *resetBook
	// dropAck decides whether the sampler drops the acknowledgement of
	// attempt n of its s-th reset (an injected lost answer).
	dropAck func(s uint64, n int) bool
	// retryWait is the pause between attempts of a reset.
	retryWait time.Duration

	mu  sync.Mutex
	res ResetSampleResult
	seq uint64 // resets started
}

// sampleKey reads key k with its context and resets exactly that, retrying
// the reset until it is acknowledged; the value is booked only then. It
// gives up (booking nothing) only when ctx ends; the reset's outcome is
// then unknown, and an error says so.
func (s *resetSampler) sampleKey(ctx context.Context, k int) error {
	v, rctx, err := s.store.readWithContext(ctx, k)
	if err != nil {
		s.mu.Lock()
		s.res.ReadErrors++
		s.mu.Unlock()
		return nil // nothing read, nothing to reset: the next period tries again
	}
	if v == 0 {
		return nil
	}
	if len(rctx) == 0 {
		return fmt.Errorf("bench: key %d read %d without a reset context", k, v)
	}
	start := time.Now()
	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()
	for n := 1; ; n++ {
		err := s.store.resetWithContext(ctx, k, rctx)
		s.mu.Lock()
		s.res.DeleteAttempts++
		switch {
		case err != nil:
			s.res.Failed++
		case s.dropAck != nil && s.dropAck(seq, n):
			s.res.DroppedAcks++
			err = errDroppedAck
		}
		s.mu.Unlock()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: reset of key %d (sample %d) never acknowledged: %w (last error: %w)", k, v, ctx.Err(), err)
		case <-time.After(s.retryWait):
		}
	}
	s.book.book(k, v)
	s.mu.Lock()
	s.res.MaxResetMS = max(s.res.MaxResetMS, ms(time.Since(start)))
	s.mu.Unlock()
	return nil
}

// result returns the sampler's counts, with the book's totals.
func (s *resetSampler) result() ResetSampleResult {
	s.mu.Lock()
	res := s.res
	s.mu.Unlock()
	res.Sampled, res.Samples = s.book.total()
	return res
}

// cqlResetStore is bench.reset on a ring through gocql.
type cqlResetStore struct {
	session *gocql.Session
	prefix  string
	read    gocql.Consistency
}

func (c cqlResetStore) readWithContext(ctx context.Context, key int) (int64, []byte, error) {
	q := c.session.Query("SELECT c FROM bench."+ModeReset+" WHERE k = ?", c.prefix+fmt.Sprint(key)).
		Consistency(c.read).RetryPolicy(nil).WithContext(ctx)
	q.CustomPayload(map[string][]byte{resetcol.ContextPayloadKey: {}})
	iter := q.Iter()
	var v int64
	found := iter.Scan(&v)
	payload := iter.GetCustomPayload()
	if err := iter.Close(); err != nil {
		return 0, nil, fmt.Errorf("bench: sampler read of key %d: %w", key, err)
	}
	if !found {
		return 0, nil, nil
	}
	return v, payload[resetcol.ContextPayloadKey], nil
}

func (c cqlResetStore) resetWithContext(ctx context.Context, key int, rctx []byte) error {
	q := c.session.Query("DELETE c FROM bench."+ModeReset+" WHERE k = ?", c.prefix+fmt.Sprint(key)).
		Consistency(gocql.All).RetryPolicy(nil).Idempotent(true).WithContext(ctx)
	q.CustomPayload(map[string][]byte{resetcol.ContextPayloadKey: rctx})
	if err := q.Exec(); err != nil {
		return fmt.Errorf("bench: sampler reset of key %d: %w", key, err)
	}
	return nil
}

// resetSamplerSeq is the op-id client index of the sampler's fault draws
// (the clients use 0 … Clients−1).
const resetSamplerSeq = MaxClients - 1

// startResetSampler runs the sampler over mr's keys every
// cfg.ResetSampler until the returned function is called; that function
// waits for the reset in progress to be acknowledged (up to two minutes,
// once killed nodes are back) and returns the sampler's result.
func (r *runner) startResetSampler(ctx context.Context, mr *modeRun) func() (*ResetSampleResult, error) {
	cfg := r.cfg
	id := ClientID(r.nonce, ModeReset, resetSamplerSeq)
	s := &resetSampler{
		store: cqlResetStore{session: r.session, prefix: r.prefix, read: gocql.One},
		book:  newResetBook(), retryWait: 50 * time.Millisecond,
	}
	if p := cfg.Faults.LostAck; p > 0 {
		s.dropAck = func(seq uint64, n int) bool {
			return decide(cfg.Seed, saltLost, client.OpID{Client: id, Sequence: seq}, n) < p
		}
	}
	mr.resetBook = s.book
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5a3b1e))
	stop := make(chan struct{})
	// The sampler's resets outlive the run's stop by up to two minutes:
	// a reset in flight must end acknowledged.
	sctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	ticks := 0
	go func() {
		t := time.NewTicker(cfg.ResetSampler)
		defer t.Stop()
		for {
			select {
			case <-stop:
				errc <- nil
				return
			case <-t.C:
			}
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			ticks++
			keys := mr.ledger.Keys()
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			for _, k := range keys[:min(len(keys), cfg.ResetSampleKeys)] {
				if err := s.sampleKey(sctx, k); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	return func() (*ResetSampleResult, error) {
		close(stop)
		timer := time.AfterFunc(2*time.Minute, cancel)
		defer timer.Stop()
		defer cancel()
		if err := <-errc; err != nil {
			return nil, err
		}
		res := s.result()
		res.PeriodMS, res.Keys, res.Ticks = ms(cfg.ResetSampler), cfg.ResetSampleKeys, ticks
		return &res, nil
	}
}

// errNoResetMode: the sampler resets bench.reset.
var errNoResetMode = errors.New("bench: the reset sampler needs the reset mode (--modes ...,reset)")

// ResetOutboxResult is what the reset_counter outboxes of an embedded
// ring's running nodes held during a run: the ops their peers had not
// acknowledged (resetcol.Stats.Pending), sampled every 250 ms.
type ResetOutboxResult struct {
	PeakPending int     `json:"peak_pending"`
	PeakAtS     float64 `json:"peak_at_s"` // seconds after the load started
	// EndPending is what they held when the load ended; DrainedS how long
	// after that until they held nothing (Drained false: not within a
	// minute).
	EndPending int     `json:"end_pending"`
	DrainedS   float64 `json:"drained_s"`
	Drained    bool    `json:"drained"`
	// Series is (seconds after the start, ops pending) at every sample.
	Series [][2]float64 `json:"series,omitempty"`
}

// ResetPending sums the ops in the reset_counter outboxes of the running
// nodes (the cells they have in memory).
func (c *Cluster) ResetPending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, nd := range c.nodes {
		if nd != nil {
			n += resetcol.ReplicaStats(nd.Replica()).Pending
		}
	}
	return n
}

// watchResetOutboxes samples c's reset outboxes from start: EndPending
// is the first sample after stopped reports true (the load's end); the
// returned function stops sampling, waits (up to a minute from the load's
// end) until the outboxes are empty and returns the result.
func watchResetOutboxes(c *Cluster, start time.Time, stopped func() bool) (finish func() *ResetOutboxResult) {
	res := &ResetOutboxResult{}
	var ended time.Time
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			end := stopped()
			p, at := c.ResetPending(), time.Since(start).Seconds()
			res.Series = append(res.Series, [2]float64{at, float64(p)})
			if p > res.PeakPending {
				res.PeakPending, res.PeakAtS = p, at
			}
			if end {
				ended, res.EndPending = time.Now(), p
				return
			}
		}
	}()
	return func() *ResetOutboxResult {
		close(stop)
		<-done
		if ended.IsZero() {
			ended, res.EndPending = time.Now(), c.ResetPending()
		}
		for time.Since(ended) < time.Minute {
			if c.ResetPending() == 0 {
				res.Drained, res.DrainedS = true, time.Since(ended).Seconds()
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return res
	}
}
