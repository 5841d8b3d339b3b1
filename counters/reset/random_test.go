package reset

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// stepsEnv names the environment variable that sets the number of steps of
// TestRandomChecker (default 100,000; 10^8 on demand:
// IDEMKV_RESET_STEPS=100000000 go test -timeout 0 -run TestRandomChecker
// ./counters/reset/).
const stepsEnv = "IDEMKV_RESET_STEPS"

// The randomized checker. A run has 2–5 replicas of one cell, a map of
// several counters sharing one C (three runs in four) or a single counter,
// and takes steps chosen at random:
//
//   - inc: a replica increments a key (weight 1, or 2–5 now and then) and
//     sends the op to every other replica;
//   - reset at the origin: a replica resets a key (a key removal) or the
//     whole map, as it observes it now;
//   - observe: a replica's context of a key or of the map is kept (at most
//     6 are), to be used later;
//   - reset from an old snapshot: a replica resets with a kept context,
//     taken at any replica, maybe long ago;
//   - deliver: one op moves from a sender to a receiver;
//   - a link goes down or comes back up (a partition);
//   - crash: a replica's state is reloaded from its encoding, its inbox
//     forgets what it held beyond a gap; outboxes and channels survive.
//
// Two transports. FIFO: a queue per (sender, receiver), delivered in random
// interleavings across queues (so a reset overtakes, at a third replica, the
// increments it cancels); a partition holds a queue. Lossy: a network bag
// that loses, duplicates and reorders packets, with the package's Outbox and
// Inbox (sequence numbers, held gaps, cumulative acks, resends) in between;
// a partition loses what crosses it.
//
// After every step it checks every replica against:
//
//   - the oracle: the paper's adds/cancels definitions (proof of Theorem
//     4.1) evaluated over the ops the replica applied: for each counter and
//     sender j, the units of j received, and the cancelled prefix (every
//     unit ≤ the largest p of j in a received reset, or ≤ p − w of a
//     received start increment); the value must be the number of received
//     units above it;
//   - Section 2's constraints on each generated op, against the oracle at
//     its origin (a start increment only cancels what is cancelled there;
//     a context cancels at least what was observed and at most what was
//     known, checked when it is observed);
//   - Proposition 5.1: M[j] exists iff j has an observed unit, or a unit of
//     j is cancelled and not yet received;
//   - Proposition 4.2: Algorithm 2 run beside it generates the same ops and
//     contexts, has the same C, and the same M but for its entries with
//     p = n and c ≤ C[j];
//   - |M| ≤ replicas for every counter.
//
// Then the network heals: links come up, everything is delivered (resent
// until every outbox is empty), and every replica must hold the same state,
// read the oracle's values, and hold no entry for a counter that reads 0.

var mapKeys = []string{"a", "b", "c", "d", "e"}

type span struct{ lo, hi uint64 } // units lo … hi of one increment

// track is the oracle's account of one sender's units of one counter at one
// replica.
type track struct {
	recv     []span // received units not wholly cancelled, ascending
	head     int
	rem      uint64 // Σ sizes of recv[head:]
	x        uint64 // every unit ≤ x is cancelled
	maxRecv  uint64 // largest unit received
	maxReset uint64 // largest p of this sender in a received reset
	nrecv    int    // increments received
}

func (t *track) cancel(x uint64) {
	t.x = max(t.x, x)
	for t.head < len(t.recv) && t.recv[t.head].hi <= t.x {
		sp := t.recv[t.head]
		t.rem -= sp.hi - sp.lo + 1
		t.head++
	}
	if t.head > 64 && t.head*2 > len(t.recv) {
		t.recv = slices.Clone(t.recv[t.head:])
		t.head = 0
	}
}

func (t *track) value() uint64 {
	if t.head == len(t.recv) {
		return 0
	}
	lo := t.recv[t.head].lo
	if t.x >= lo {
		return t.rem - (t.x - lo + 1)
	}
	return t.rem
}

type simRep struct {
	id    ID
	st    *State
	shade *alg2
	orc   map[string][]*track // key → sender index → track
	out   []Outbox            // lossy transport: per destination
	in    []Inbox             // lossy transport: per sender
}

type packet struct {
	from, to int
	ack      bool
	env      Envelope
	upTo     uint64
}

type snapshot struct {
	ctx  Context
	at   int
	step int
}

type simConfig struct {
	steps int
	lossy bool
	// oracleOnly leaves out the checks of Propositions 4.2 and 5.1: only
	// the oracle's values, Section 2's constraints and the healing checks.
	oracleOnly bool
	// notFIFO breaks the transport: a queue delivers any of its ops.
	notFIFO bool
	// duplicates breaks the transport: a queue delivers its head again
	// now and then.
	duplicates bool
}

type sim struct {
	cfg   simConfig
	r     *rand.Rand
	reps  []*simRep
	byID  map[ID]int
	ch    [][][][]byte // FIFO transport: ch[from][to] queue of encoded ops
	down  [][]bool     // down[a][b]: link a→b held or lossy
	net   []packet
	sent  []map[string][]span // per sender and key: its increments, in order
	snaps []snapshot
	keys  []string // the cell's keys
	step  int
	rate  int // ops generated per 20 steps of the current phase
	trace []string
	tpos  int

	incs, resets, oldResets, delivered, crashes, lost, dups, resends, maxPending, pendingSeen int
}

func simID(n int) ID {
	var id ID
	id[0] = 0x5e
	id[15] = byte(n)
	return id
}

func newSim(seed uint64, cfg simConfig) *sim {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := 2 + r.IntN(4)
	s := &sim{cfg: cfg, r: r, byID: map[ID]int{}, trace: make([]string, 30), keys: mapKeys}
	newState := NewMap
	if r.IntN(4) == 0 { // a one-counter cell
		newState, s.keys = NewCounter, []string{""}
	}
	s.ch = make([][][][]byte, n)
	s.down = make([][]bool, n)
	for i := range n {
		id := simID(i)
		rep := &simRep{id: id, st: newState(id), shade: newAlg2(id), orc: map[string][]*track{},
			out: make([]Outbox, n), in: make([]Inbox, n)}
		for _, k := range s.keys {
			rep.orc[k] = make([]*track, n)
			for j := range n {
				rep.orc[k][j] = &track{}
			}
		}
		s.reps = append(s.reps, rep)
		s.byID[id] = i
		s.ch[i] = make([][][]byte, n)
		s.down[i] = make([]bool, n)
		s.sent = append(s.sent, map[string][]span{})
	}
	return s
}

func (s *sim) note(format string, args ...any) {
	s.trace[s.tpos%len(s.trace)] = fmt.Sprintf("%d ", s.step) + fmt.Sprintf(format, args...)
	s.tpos++
}

func (s *sim) fail(format string, args ...any) error {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d (%d replicas, lossy=%v): %s\nlast events:\n", s.step, len(s.reps), s.cfg.lossy, fmt.Sprintf(format, args...))
	for k := max(0, s.tpos-len(s.trace)); k < s.tpos; k++ {
		fmt.Fprintf(&b, "  %s\n", s.trace[k%len(s.trace)])
	}
	return errors.New(b.String())
}

// record applies an op to replica i's shadow and oracle (the state itself
// has applied it already).
func (s *sim) record(i int, op Op) {
	rep := s.reps[i]
	rep.shade.apply(op)
	j := s.byID[op.From]
	if op.Kind == OpInc {
		t := rep.orc[op.Key][j]
		lo := op.P - op.W + 1
		t.recv = append(t.recv, span{lo, op.P})
		t.rem += op.W
		t.maxRecv = op.P
		t.nrecv++
		if op.Start {
			t.cancel(lo - 1) // cancels(I): every earlier unit of j
		} else {
			t.cancel(0)
		}
		return
	}
	for _, kc := range op.Reset.Keys {
		for _, o := range kc.Entries {
			t := rep.orc[kc.Key][s.byID[o.ID]]
			t.maxReset = max(t.maxReset, o.P)
			t.cancel(o.P) // cancels(R) = adds(R): every unit of j ≤ p
		}
	}
}

// broadcast sends replica i's op to every other replica.
func (s *sim) broadcast(i int, op Op) {
	b, err := op.MarshalBinary()
	if err != nil {
		panic(err)
	}
	for to := range s.reps {
		if to == i {
			continue
		}
		if !s.cfg.lossy {
			s.ch[i][to] = append(s.ch[i][to], b)
			continue
		}
		env := s.reps[i].out[to].Push(b)
		s.transmit(packet{from: i, to: to, env: env})
	}
}

func (s *sim) transmit(p packet) {
	if s.down[p.from][p.to] {
		s.lost++
		return
	}
	s.net = append(s.net, p)
}

// receive applies an encoded op from replica from at replica to.
func (s *sim) receive(from, to int, b []byte) error {
	var op Op
	if err := op.UnmarshalBinary(b); err != nil {
		return s.fail("decoding an op from %d at %d: %v", from, to, err)
	}
	if err := s.reps[to].st.Apply(op); err != nil {
		return s.fail("applying an op from %d at %d: %v", from, to, err)
	}
	s.record(to, op)
	s.delivered++
	s.note("deliver %d→%d %s", from, to, opString(op))
	return nil
}

func opString(op Op) string {
	if op.Kind == OpInc {
		return fmt.Sprintf("inc %q p=%d w=%d start=%v", op.Key, op.P, op.W, op.Start)
	}
	var b strings.Builder
	b.WriteString("reset")
	for _, kc := range op.Reset.Keys {
		fmt.Fprintf(&b, " %q:", kc.Key)
		for _, o := range kc.Entries {
			fmt.Fprintf(&b, "(%x,%d,%d)", o.ID[15], o.P, o.C)
		}
	}
	return b.String()
}

func (s *sim) inc(i int) error {
	rep := s.reps[i]
	key := s.keys[s.r.IntN(len(s.keys))]
	w := uint64(1)
	if s.r.IntN(4) == 0 {
		w = 2 + s.r.Uint64N(4)
	}
	wantP, wantStart := rep.shade.genInc(key, w)
	op, err := rep.st.Inc(key, int64(w))
	if err != nil {
		return s.fail("inc at %d: %v", i, err)
	}
	s.note("inc at %d: %s", i, opString(op))
	if !s.cfg.oracleOnly && (op.P != wantP || op.Start != wantStart) {
		return s.fail("Proposition 4.2: inc at %d generated p=%d start=%v, Algorithm 2 p=%d start=%v", i, op.P, op.Start, wantP, wantStart)
	}
	// Section 2: the units are new, and a start cancels only what the
	// origin has cancelled; a non-start continues the previous increment.
	prev := uint64(0)
	if l := s.sent[i][key]; len(l) > 0 {
		prev = l[len(l)-1].hi
	}
	t := rep.orc[key][i]
	if op.Start && prev > t.x || !op.Start && op.P-op.W != prev {
		return s.fail("Section 2: inc at %d: %s after unit %d (cancelled up to %d)", i, opString(op), prev, t.x)
	}
	s.sent[i][key] = append(s.sent[i][key], span{op.P - op.W + 1, op.P})
	s.record(i, op)
	s.broadcast(i, op)
	s.incs++
	return nil
}

// observe returns replica i's context of one key or of every key, checked
// against Algorithm 2's reset generator and Section 2's constraints.
func (s *sim) observe(i int, all bool) (Context, error) {
	rep := s.reps[i]
	var ctx Context
	if all {
		ctx = rep.st.ObserveAll()
	} else {
		ctx = rep.st.Observe(s.keys[s.r.IntN(len(s.keys))])
	}
	for _, kc := range ctx.Keys {
		if want := rep.shade.observe(kc.Key); !s.cfg.oracleOnly && !slices.Equal(want, kc.Entries) {
			return ctx, s.fail("Proposition 4.2: context of %q at %d is %v, Algorithm 2's %v", kc.Key, i, kc.Entries, want)
		}
	}
	keys := s.keys
	if !all && len(ctx.Keys) == 1 {
		keys = []string{ctx.Keys[0].Key}
	} else if !all {
		return ctx, nil
	}
	for _, k := range keys {
		var obs []Observed
		for _, kc := range ctx.Keys {
			if kc.Key == k {
				obs = kc.Entries
			}
		}
		for j, t := range rep.orc[k] {
			p := uint64(0)
			for _, o := range obs {
				if o.ID == s.reps[j].id {
					p = o.P
				}
			}
			// observed(S) ⊆ cancels(R) ⊆ increments(S)
			if t.value() > 0 && p < t.maxRecv {
				return ctx, s.fail("Section 2: context of %q at %d cancels %d's units up to %d, but it observed up to %d", k, i, j, p, t.maxRecv)
			}
			if p > max(t.maxRecv, t.maxReset) {
				return ctx, s.fail("Section 2: context of %q at %d cancels %d's units up to %d, it knows of %d", k, i, j, p, max(t.maxRecv, t.maxReset))
			}
		}
	}
	return ctx, nil
}

func (s *sim) reset(i int, ctx Context, old bool) error {
	op, err := s.reps[i].st.Reset(ctx)
	if err != nil {
		return s.fail("reset at %d: %v", i, err)
	}
	s.note("reset at %d (old=%v): %s", i, old, opString(op))
	s.record(i, op)
	s.broadcast(i, op)
	s.resets++
	if old {
		s.oldResets++
	}
	return nil
}

func (s *sim) crash(i int) error {
	rep := s.reps[i]
	b, err := rep.st.MarshalBinary()
	if err != nil {
		return s.fail("encoding %d: %v", i, err)
	}
	var st State
	if err := st.UnmarshalBinary(b); err != nil {
		return s.fail("recovering %d: %v", i, err)
	}
	rep.st = &st
	for k := range rep.out {
		ob, _ := rep.out[k].MarshalBinary()
		var o Outbox
		if err := o.UnmarshalBinary(ob); err != nil {
			return s.fail("recovering %d's outbox: %v", i, err)
		}
		rep.out[k] = o
		ib, _ := rep.in[k].MarshalBinary()
		var in Inbox
		if err := in.UnmarshalBinary(ib); err != nil {
			return s.fail("recovering %d's inbox: %v", i, err)
		}
		rep.in[k] = in
	}
	s.crashes++
	s.note("crash %d", i)
	return nil
}

// deliverFIFO delivers the head of a random open queue.
func (s *sim) deliverFIFO() error {
	n := len(s.reps)
	start := s.r.IntN(n * n)
	for k := range n * n {
		c := (start + k) % (n * n)
		from, to := c/n, c%n
		if len(s.ch[from][to]) == 0 || s.down[from][to] {
			continue
		}
		q := s.ch[from][to]
		x := 0
		if s.cfg.notFIFO {
			x = s.r.IntN(len(q))
		}
		b := q[x]
		if !s.cfg.duplicates || s.r.IntN(8) != 0 {
			s.ch[from][to] = append(q[:x:x], q[x+1:]...)
		}
		return s.receive(from, to, b)
	}
	return nil
}

// deliverPacket takes a random packet off the lossy network.
func (s *sim) deliverPacket(lossy bool) error {
	if len(s.net) == 0 {
		return nil
	}
	k := s.r.IntN(len(s.net))
	p := s.net[k]
	dup := false
	if lossy {
		switch x := s.r.IntN(10); {
		case x == 0 || s.down[p.from][p.to]:
			s.net[k] = s.net[len(s.net)-1]
			s.net = s.net[:len(s.net)-1]
			s.lost++
			return nil
		case x == 1:
			dup = true
			s.dups++
		}
	}
	if !dup {
		s.net[k] = s.net[len(s.net)-1]
		s.net = s.net[:len(s.net)-1]
	}
	if p.ack {
		s.reps[p.to].out[p.from].Ack(p.upTo)
		return nil
	}
	in := &s.reps[p.to].in[p.from]
	in.Receive(p.env)
	for {
		b, ok := in.Next()
		if !ok {
			break
		}
		if err := s.receive(p.from, p.to, b); err != nil {
			return err
		}
	}
	s.transmit(packet{from: p.to, to: p.from, ack: true, upTo: in.Delivered()})
	return nil
}

// resend puts up to window of i's oldest unacknowledged ops for to back on
// the network (0: all of them).
func (s *sim) resend(i, to, window int) {
	p := s.reps[i].out[to].Pending()
	if window > 0 && len(p) > window {
		p = p[:window]
	}
	for _, e := range p {
		s.transmit(packet{from: i, to: to, env: e})
		s.resends++
	}
}

func (s *sim) randomStep() error {
	r := s.r
	i := r.IntN(len(s.reps))
	if s.step%500 == 0 { // traffic comes in bursts with lulls between
		s.rate = [...]int{20, 12, 4, 0}[r.IntN(4)]
	}
	w := r.IntN(100)
	if w < 45 && r.IntN(20) >= s.rate {
		w = 45 + r.IntN(45) // no op generated: deliver instead
	}
	switch {
	case w < 30:
		return s.inc(i)
	case w < 36:
		ctx, err := s.observe(i, false)
		if err != nil {
			return err
		}
		return s.reset(i, ctx, false)
	case w < 38:
		ctx, err := s.observe(i, true)
		if err != nil {
			return err
		}
		return s.reset(i, ctx, false)
	case w < 42:
		ctx, err := s.observe(i, r.IntN(3) == 0)
		if err != nil {
			return err
		}
		if len(s.snaps) == 6 {
			s.snaps = slices.Delete(s.snaps, 0, 1)
		}
		s.snaps = append(s.snaps, snapshot{ctx, i, s.step})
		s.note("observe at %d", i)
	case w < 45:
		if len(s.snaps) == 0 {
			return nil
		}
		sn := s.snaps[r.IntN(len(s.snaps))]
		s.note("old context from %d at step %d", sn.at, sn.step)
		return s.reset(i, sn.ctx, true)
	case w < 90:
		if s.cfg.lossy && r.IntN(6) == 0 {
			if to := r.IntN(len(s.reps)); to != i {
				s.resend(i, to, 4)
			}
			return nil
		}
		for range 1 + r.IntN(4) {
			var err error
			if s.cfg.lossy {
				err = s.deliverPacket(true)
			} else {
				err = s.deliverFIFO()
			}
			if err != nil {
				return err
			}
		}
	case w < 92:
		return s.crash(i)
	case w < 95:
		to := r.IntN(len(s.reps))
		if to != i && (s.down[i][to] || r.IntN(3) == 0) {
			s.down[i][to] = !s.down[i][to]
			s.down[to][i] = s.down[i][to]
			s.note("link %d–%d down=%v", i, to, s.down[i][to])
		}
	}
	return nil
}

// check verifies every replica against the oracle, Propositions 5.1 and
// 4.2, and |M| ≤ replicas.
func (s *sim) check() error {
	n := len(s.reps)
	if s.cfg.oracleOnly {
		return s.checkOracle()
	}
	for i, rep := range s.reps {
		st, sh := rep.st, rep.shade
		for j, o := range s.reps {
			if st.c[o.id] != sh.c[o.id] {
				return s.fail("Proposition 4.2: C[%d] at %d is %d, Algorithm 2's %d", j, i, st.c[o.id], sh.c[o.id])
			}
		}
		if len(st.c) > n {
			return s.fail("C at %d has %d entries", i, len(st.c))
		}
		for key, m := range st.m {
			if len(m) > n {
				return s.fail("|M| = %d > %d replicas for %q at %d", len(m), n, key, i)
			}
			if len(m) == 0 {
				return s.fail("an empty map stored for %q at %d", key, i)
			}
			if _, ok := rep.orc[key]; !ok {
				return s.fail("unknown key %q at %d", key, i)
			}
		}
		for _, key := range s.keys {
			m, m2 := st.m[key], sh.m[key]
			var v uint64
			for j, t := range rep.orc[key] {
				id := s.reps[j].id
				tv := t.value()
				v += tv
				e, ok := m[id]
				// Proposition 5.1
				sent := s.sent[j][key]
				pending := t.nrecv < len(sent) && sent[t.nrecv].lo <= t.maxReset
				if ok != (tv > 0 || pending) {
					return s.fail("Proposition 5.1: %q at %d: entry for %d is %v (%v) but observed=%d, cancelled-not-received=%v", key, i, j, ok, e, tv, pending)
				}
				// Proposition 4.2
				e2, ok2 := m2[id]
				drop := ok2 && e2.p == e2.n && e2.c <= sh.c[id]
				if ok != (ok2 && !drop) || ok && e != e2 {
					return s.fail("Proposition 4.2: %q at %d: entry for %d is %v (%v), Algorithm 2's %v (%v)", key, i, j, e, ok, e2, ok2)
				}
			}
			if got := st.Value(key); got != v {
				return s.fail("value of %q at %d is %d, the oracle says %d", key, i, got, v)
			}
			if sh.value(key) != v {
				return s.fail("Algorithm 2's value of %q at %d is %d, the oracle says %d", key, i, sh.value(key), v)
			}
		}
	}
	return nil
}

// checkOracle checks only the values against the oracle.
func (s *sim) checkOracle() error {
	for i, rep := range s.reps {
		for _, key := range s.keys {
			var v uint64
			for _, t := range rep.orc[key] {
				v += t.value()
			}
			if got := rep.st.Value(key); got != v {
				return s.fail("value of %q at %d is %d, the oracle says %d", key, i, got, v)
			}
		}
	}
	return nil
}

func (s *sim) inFlight() int {
	t := len(s.net)
	for _, row := range s.ch {
		for _, q := range row {
			t += len(q)
		}
	}
	for _, rep := range s.reps {
		for k := range rep.out {
			t += rep.out[k].Len()
		}
	}
	return t
}

// heal brings every link up and delivers everything, then checks
// convergence and obliviousness.
func (s *sim) heal() error {
	for a := range s.down {
		for b := range s.down[a] {
			s.down[a][b] = false
		}
	}
	for round := 0; ; round++ {
		if round > 1000 {
			return s.fail("not quiescent after %d rounds", round)
		}
		if s.cfg.lossy {
			for i := range s.reps {
				for to := range s.reps {
					if to != i {
						s.resend(i, to, 0)
					}
				}
			}
			for len(s.net) > 0 {
				if err := s.deliverPacket(false); err != nil {
					return err
				}
			}
		} else {
			for s.inFlight() > 0 {
				if err := s.deliverFIFO(); err != nil {
					return err
				}
			}
		}
		if err := s.check(); err != nil {
			return err
		}
		if s.inFlight() == 0 {
			break
		}
	}
	ref, _ := s.reps[0].st.MarshalBinary()
	for i, rep := range s.reps {
		b, _ := rep.st.MarshalBinary()
		if string(b[2+IDLen:]) != string(ref[2+IDLen:]) {
			return s.fail("after healing %d's state differs from 0's:\n%x\n%x", i, b, ref)
		}
		for _, k := range s.keys {
			if rep.st.Value(k) == 0 && len(rep.st.m[k]) != 0 {
				return s.fail("after healing %q reads 0 at %d but holds %v", k, i, rep.st.Entries(k))
			}
		}
	}
	return nil
}

func (s *sim) run() error {
	for s.step = 0; s.step < s.cfg.steps; s.step++ {
		if err := s.randomStep(); err != nil {
			return err
		}
		if err := s.check(); err != nil {
			return err
		}
		if f := s.inFlight(); f > s.maxPending {
			s.maxPending = f
		}
		for _, rep := range s.reps {
			for _, m := range rep.st.m {
				for id, e := range m {
					if e.c > rep.st.c[id] {
						s.pendingSeen++
					}
				}
			}
		}
	}
	s.step = s.cfg.steps
	return s.heal()
}

func (s *sim) stats() string {
	return fmt.Sprintf("%d replicas, %d keys, lossy=%v: %d incs, %d resets (%d from old contexts), %d delivered, %d crashes, %d lost, %d duplicated, %d resent, at most %d in flight, %d step·entries waiting for cancelled increments",
		len(s.reps), len(s.keys), s.cfg.lossy, s.incs, s.resets, s.oldResets, s.delivered, s.crashes, s.lost, s.dups, s.resends, s.maxPending, s.pendingSeen)
}

func stepsFromEnv(t *testing.T, def int) int {
	v := os.Getenv(stepsEnv)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q is not a positive integer", stepsEnv, v)
	}
	return n
}

// TestRandomChecker runs the randomized checker: IDEMKV_RESET_STEPS steps
// (default 100,000) in runs of at most 10,000 steps, alternating the FIFO
// and lossy transports, each on fresh replicas, all derived from one seed
// (IDEMKV_SEED replays).
func TestRandomChecker(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	const perRun = 10_000
	total := stepsFromEnv(t, 100_000)
	began := time.Now()
	runs := 0
	for left := total; left > 0; left -= perRun {
		s := newSim(r.Uint64(), simConfig{steps: min(left, perRun), lossy: runs%2 == 1})
		if err := s.run(); err != nil {
			t.Fatalf("run %d: %v", runs, err)
		}
		if runs < 2 || testing.Verbose() && runs%1000 == 0 {
			t.Logf("run %d: %s", runs, s.stats())
		}
		runs++
	}
	el := time.Since(began)
	t.Logf("%d steps in %d runs, %v (%.0f steps/s)", total, runs, el.Round(time.Millisecond), float64(total)/el.Seconds())
}

// TestRandomCatchesBrokenRules breaks one rule at a time and requires the
// checker to fail: runs of 3,000 steps on fresh replicas, both transports,
// at most 40 runs.
func TestRandomCatchesBrokenRules(t *testing.T) {
	seed := testseed.Seed(t)
	cases := []struct {
		name string
		mut  mutation
		cfg  simConfig
	}{
		{"start-of-generation fix left out (n = 0 always)", mutNoGenerationFix, simConfig{}},
		{"no n = p − w for an increment after its entry was deleted", mutNoAbsentFix, simConfig{}},
		{"start flag ignored where the entry exists", mutNoStartFix, simConfig{}},
		{"delete on p = n without waiting for c ≤ C[j]", mutDeleteEager, simConfig{}},
		{"the inc effector's last lines read with i", mutLiteralI, simConfig{}},
		{"a reset for a missing entry drops increments not yet received", mutResetDropsPending, simConfig{}},
		{"a reset for a missing entry is kept when c ≤ C[j]", mutResetKeepsAll, simConfig{}},
		{"queues deliver out of order", mutNone, simConfig{notFIFO: true}},
		{"queues deliver duplicates", mutNone, simConfig{duplicates: true}},
	}
	for _, c := range cases {
		for _, oracleOnly := range []bool{false, true} {
			name := c.name
			if oracleOnly {
				name += " (oracle and healing checks only)"
			}
			t.Run(name, func(t *testing.T) {
				mut = c.mut
				defer func() { mut = mutNone }()
				r := rand.New(rand.NewPCG(seed, uint64(c.mut)+100))
				for run := range 40 {
					cfg := c.cfg
					cfg.steps, cfg.oracleOnly = 3_000, oracleOnly
					cfg.lossy = run%2 == 1 && !cfg.notFIFO && !cfg.duplicates
					s := newSim(r.Uint64(), cfg)
					if err := s.run(); err != nil {
						msg := err.Error()
						t.Logf("caught in run %d: %s", run, msg[:strings.IndexByte(msg, '\n')])
						return
					}
				}
				t.Errorf("the checker did not catch %q in 40 runs", name)
			})
		}
	}
}

// reachable returns the encodings of states and ops met in a checker run.
func reachable(t testing.TB, seed uint64, steps int) (states, ops [][]byte) {
	s := newSim(seed, simConfig{steps: steps})
	for s.step = 0; s.step < steps; s.step++ {
		if err := s.randomStep(); err != nil {
			t.Fatal(err)
		}
		if s.step%300 == 0 {
			for _, rep := range s.reps {
				b, _ := rep.st.MarshalBinary()
				states = append(states, b)
			}
		}
	}
	for _, row := range s.ch {
		for _, q := range row {
			if len(q) > 0 {
				ops = append(ops, q[0], q[len(q)-1])
			}
		}
	}
	return states, ops
}
