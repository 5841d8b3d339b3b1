package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/client"
)

// The handoff mode: table bench.handoff (k text PRIMARY KEY, c
// handoff_counter). Each client keeps one client.HandoffCounter per key it
// touches; an op adds its deltas to the keys' counters (locally) and then
// exchanges each touched counter once (Config.HandoffExchanges times), with the op's id attached so that the
// injected faults hit the same op as in the other modes; the op is
// acknowledged when its exchanges return, and retried (the same exchange
// again: always safe) otherwise. Every delta added is in a client's state,
// so it must be counted exactly once whatever the op's outcome: the ledger
// expects it (Ledger.RecordHeld). At the end of the run every client
// flushes its counters (exchanges until handed off) before the final read,
// which waits for the replicas' anti-entropy to converge.

// handoffRun is the handoff mode's state during a run.
type handoffRun struct {
	mu       sync.Mutex
	counters []map[int]*handoffKey // per client, by key
	acct     *hdrhistogram.Histogram
	updates  atomic.Int64 // Add calls (updates issued)
}

// handoffKey is one client's counter of one key, with the increments not yet
// known accounted at tier 0: (cumulative added, when).
type handoffKey struct {
	mu    sync.Mutex
	h     *client.HandoffCounter
	added uint64
	marks []handoffMark
}

type handoffMark struct {
	cum uint64
	at  time.Time
}

func newHandoffRun(clients int) *handoffRun {
	hr := &handoffRun{acct: hdrhistogram.New(1, 600_000_000, 3)}
	for range clients {
		hr.counters = append(hr.counters, map[int]*handoffKey{})
	}
	return hr
}

// counter returns client c's counter of key k.
func (r *runner) handoffCounter(hr *handoffRun, c, k int) (*handoffKey, error) {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	if hk, ok := hr.counters[c][k]; ok {
		return hk, nil
	}
	h, err := client.NewHandoffCounter(r.session, "bench."+ModeHandoff, "c", "k = ?",
		client.HandoffOptions{Consistency: r.cfg.Consistency}, r.key(k))
	if err != nil {
		return nil, err
	}
	hk := &handoffKey{h: h}
	hr.counters[c][k] = hk
	return hk, nil
}

// accounted records the accounting delay of the increments the counter now
// knows acquired.
func (hk *handoffKey) accounted(hr *handoffRun) {
	st := hk.h.Stats()
	now := time.Now()
	hk.mu.Lock()
	var done []time.Duration
	i := 0
	for ; i < len(hk.marks) && hk.marks[i].cum <= st.Accounted; i++ {
		done = append(done, now.Sub(hk.marks[i].at))
	}
	hk.marks = hk.marks[i:]
	hk.mu.Unlock()
	if len(done) > 0 {
		hr.mu.Lock()
		for _, d := range done {
			_ = hr.acct.RecordValue(max(1, d.Microseconds()))
		}
		hr.mu.Unlock()
	}
}

// doHandoff runs one op of the handoff mode.
func (r *runner) doHandoff(ctx context.Context, cli *client.Client, mr *modeRun, c int, op Op) (Outcome, error) {
	hr := mr.handoff
	var keys []*handoffKey
	seen := map[int]bool{}
	for _, u := range op.Updates {
		hk, err := r.handoffCounter(hr, c, u.Key)
		if err != nil {
			return 0, err
		}
		if err := hk.h.Add(uint64(u.Delta)); err != nil {
			return 0, err
		}
		hk.mu.Lock()
		hk.added += uint64(u.Delta)
		hk.marks = append(hk.marks, handoffMark{cum: hk.added, at: time.Now()})
		hk.mu.Unlock()
		hr.updates.Add(1)
		if !seen[u.Key] {
			seen[u.Key] = true
			keys = append(keys, hk)
		}
	}
	id := cli.NextOpID(1)
	exec := func(ctx context.Context, n int) error {
		for _, hk := range keys {
			for range r.cfg.HandoffExchanges {
				if err := hk.h.ExchangeTagged(ctx, id); err != nil {
					return err
				}
				hk.accounted(hr)
			}
		}
		return nil
	}
	return r.attempts(ctx, mr, op, &id, exec)
}

// flushHandoff flushes every client's counters and retires them (§7.4: each
// retirement sends a notice that collects the slots the client left).
func (r *runner) flushHandoff(ctx context.Context, mr *modeRun) error {
	hr := mr.handoff
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(hr.counters))
	for _, m := range hr.counters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, hk := range m {
				if err := hk.h.Flush(ctx); err != nil {
					errs <- err
					return
				}
				hk.accounted(hr)
				if err := hk.h.Retire(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("bench: handoff flush: %w", err)
	}
	return nil
}

// HandoffResult is the handoff mode's costs in a run.
type HandoffResult struct {
	Updates int64 `json:"updates"` // updates issued (Add calls)
	// Client exchanges (UPDATEs with the payload, retries and the final
	// flush included) and their payload bytes, both ways, per update.
	ExchangesPerUpdate float64 `json:"exchanges_per_update"`
	BytesPerUpdate     float64 `json:"bytes_per_update"`
	// Cells is the client counters (one client's counter of one key), and
	// RoundTripsPerCell the client exchanges per cell.
	Cells             int     `json:"cells"`
	RoundTripsPerCell float64 `json:"round_trips_per_cell"`
	// Tier-0 anti-entropy exchanges between replicas (each a request and
	// its answer) and their payload bytes, per update (embedded ring only).
	SyncPerUpdate      float64 `json:"sync_per_update"`
	SyncBytesPerUpdate float64 `json:"sync_bytes_per_update"`
	// The accounting delay: time from an increment's Add until its client
	// knew that a tier-0 replica had acquired it, i.e. that the servers'
	// value includes it (an exchange answered with no token of the client
	// outstanding), in milliseconds. Increments not yet known acquired when
	// the load ends are counted when the final flush returns. The client
	// can learn it an exchange or more after the replica acquired it, so
	// this is an upper bound. The ops' own latency (ModeResult.P50MS...)
	// is that of the exchanges, which return before their increments are
	// acquired.
	AccountP50MS float64 `json:"account_p50_ms"`
	AccountP99MS float64 `json:"account_p99_ms"`
	AccountMaxMS float64 `json:"account_max_ms"`
	// Slots held by the servers: the most seen while the load ran (sampled
	// every 100 ms), and after the clients flushed and retired, once the
	// replicas converged and their retirement notices had up to 10 s more
	// to collect what clients left (embedded ring only); and the notices
	// still held then (kept for the retention after they are processed).
	SlotsPeak    int `json:"slots_peak"`
	SlotsAfter   int `json:"slots_after"`
	NoticesAfter int `json:"notices_after"`
	// ReadExactMS: from the end of the flush until every key read at ALL
	// (the largest of the replicas' fetches) held its expected value.
	ReadExactMS float64 `json:"read_exact_ms"`
	// ConvergeMS: from the end of the flush until every replica's own state
	// held every key's final value (anti-entropy; embedded ring only, within
	// 60 s: Converged).
	ConvergeMS float64 `json:"converge_ms"`
	Converged  bool    `json:"converged"`
	// FlushMS: how long the final flush and retirement of every client's
	// counters took. SettledMS: from the end of the mode's load (its last
	// op) until every key read at ALL held its expected value, i.e. until
	// the final accounting settled: the wait for the other modes' final
	// reads (which run first), the flush and retirement, and ReadExactMS.
	FlushMS   float64 `json:"flush_ms"`
	SettledMS float64 `json:"settled_ms"`

	acct *hdrhistogram.Histogram // the Account* delays, microseconds
}

// Accounting is the histogram of the delays from an increment's Add until
// its client knew a tier-0 replica had acquired it (AccountP50MS...), in
// microseconds; nil when unknown.
func (h *HandoffResult) Accounting() *hdrhistogram.Histogram {
	if h == nil {
		return nil
	}
	return h.acct
}

func (hr *handoffRun) result() *HandoffResult {
	out := &HandoffResult{Updates: hr.updates.Load()}
	var ex, bytes uint64
	hr.mu.Lock()
	for _, m := range hr.counters {
		for _, hk := range m {
			st := hk.h.Stats()
			ex += st.Exchanges
			bytes += st.BytesSent + st.BytesRecv
			out.Cells++
		}
	}
	q := func(p float64) float64 { return float64(hr.acct.ValueAtQuantile(p)) / 1000 }
	out.AccountP50MS, out.AccountP99MS, out.AccountMaxMS = q(50), q(99), float64(hr.acct.Max())/1000
	out.acct = hdrhistogram.Import(hr.acct.Export())
	hr.mu.Unlock()
	if out.Updates > 0 {
		out.ExchangesPerUpdate = float64(ex) / float64(out.Updates)
		out.BytesPerUpdate = float64(bytes) / float64(out.Updates)
	}
	if out.Cells > 0 {
		out.RoundTripsPerCell = float64(ex) / float64(out.Cells)
	}
	return out
}

// sampleSlots records the most slots the embedded ring's replicas hold,
// until the returned function is called.
func (r *runner) sampleSlots(peak *atomic.Int64) func() {
	c := r.target.Cluster
	if c == nil {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			n := int64(c.HandoffStats().Slots)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
}

// finishHandoff flushes the handoff mode's clients, then reads every key at
// ALL until the values match the ledger (the replicas' anti-entropy) or 30 s
// pass, and returns the final values and the mode's costs.
func (r *runner) finishHandoff(ctx context.Context, s *gocql.Session, mr *modeRun, syncBefore ClusterHandoffStats, slotsPeak int) (map[int]int64, *HandoffResult, error) {
	flushStart := time.Now()
	if err := r.flushHandoff(ctx, mr); err != nil {
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
	res := mr.handoff.result()
	res.ReadExactMS = ms(time.Since(flushed))
	res.FlushMS = ms(flushed.Sub(flushStart))
	if end := mr.end.Load(); end > 0 {
		res.SettledMS = ms(time.Since(time.Unix(0, end)))
	}
	if c := r.target.Cluster; c != nil {
		// Every replica's own state, not only the largest: anti-entropy.
		keys := mr.ledger.Keys()
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = r.key(k)
		}
		for {
			vals, err := c.LocalValues("bench", ModeHandoff, "c", names)
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
	}
	res.SlotsPeak = slotsPeak
	if c := r.target.Cluster; c != nil && res.Updates > 0 {
		st := c.HandoffStats()
		res.SyncPerUpdate = float64(st.SyncMessages-syncBefore.SyncMessages) / float64(res.Updates)
		res.SyncBytesPerUpdate = float64(st.SyncBytes-syncBefore.SyncBytes) / float64(res.Updates)
		for deadline := time.Now().Add(10 * time.Second); st.Slots > 0 && time.Now().Before(deadline) && ctx.Err() == nil; st = c.HandoffStats() {
			time.Sleep(20 * time.Millisecond)
		}
		res.SlotsAfter, res.NoticesAfter = st.Slots, st.Notices
	}
	return final, res, nil
}
