package handoff

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

var flagSteps = flag.Int("steps", 100_000, "steps of each randomized checker run (TestRandom*); the paper ran 1e8 (850 s here: go test -timeout 0 ... -args -steps 100000000)")

// The randomized checker. A run builds a random topology obeying §5.1, then
// takes steps chosen at random:
//
//   - incr at a node (persisted before it is acknowledged);
//   - fetch at a node (persisted before it answers, as any output);
//   - send: a node persists its state (§7.2: only durable state leaves a
//     node) and puts it, or its View for the peer (§7.3), in flight to a
//     neighbour; a message over a link that is down is lost;
//   - deliver: a message in flight, chosen at random (so delayed and out of
//     order), is lost, delivered, or delivered and kept in flight (duplicated);
//     a delivered message is decoded and merged into the receiver's memory;
//   - deliver slow: one in eight messages sent takes a slow path and is
//     delivered only after hundreds or thousands of steps (64 at most are
//     held; a new one then replaces one at random, which is lost);
//   - replay: an old persisted state of a node (one of its last few) is put in
//     flight to a neighbour;
//   - persist: a node writes its state (a durable write with nothing to send);
//   - crash: a node loses its memory and resumes from its last persisted state;
//   - a link goes down or comes back up (a partition);
//   - retire (§7.4): a leaf node above tier 0 stops incrementing and drains
//     (exchanges as usual) until nothing is pending, then freezes its state
//     and makes its retirement Notice, which it sends with every message
//     until a message from another node carries the notice back (that node
//     holds it durably); then it retires for good: it never sends again,
//     and what is addressed to it is lost. Every node keeps the notices it
//     has received, sends them with every message, and applies them
//     (Collect) after every merge.
//
// After every step it checks, over the nodes' current (in-memory) states,
// the ECDC safety conditions of §3.2 (every node's val ≤ increments issued;
// each fetch ≥ the node's previous fetch plus its increments since) and the
// invariants of the proofs of §6: Proposition 6.3 (increments issued =
// CTV(max tier): self entries plus enabled tokens, so a lost or doubled
// increment is caught the step it happens) and Proposition 6.2 (below_i ≤
// CTV(tier_i − 1), val_i ≤ CTV(tier_i)). Then the network heals: in-flight
// messages are delivered and every node gossips with every neighbour in
// rounds until the run is quiescent, which must happen within a bound, and
// it checks eventual accounting (every node fetches the exact total) and
// garbage collection (no slot and no token anywhere, slots of retired
// nodes included, nothing pending above tier 0, every retiring node
// retired). Proposition 6.3 counts the tokens notices hold as held, so a
// retirement that loses or doubles an increment is caught when it happens.

const historyLen = 4 // old persisted states kept per node for replay

type phase int

const (
	active   phase = iota
	draining       // no more increments; exchanging until nothing is pending
	retiring       // frozen; sending its notice until a holder echoes it
	retired        // gone for good
)

// stored is what a node persists: its state and the notices it holds.
type stored struct {
	state   []byte
	notices [][]byte
}

type simNode struct {
	id        ID
	tier      int
	nbrs      []int
	leaf      bool // no higher-tier neighbour: may retire
	phase     phase
	gen       int // how many times a new client took this place
	mem       *State[Count]
	notices   map[ID]*Notice[Count] // held notices (its own when retiring)
	disk      stored
	history   []stored // the last historyLen persisted records, oldest first
	issued    uint64   // increments issued at this node
	lastFetch uint64   // the value of its last fetch
	issuedAt  uint64   // issued at the time of its last fetch
}

type message struct {
	from, to int
	data     []byte
	notices  [][]byte
}

type event struct {
	step       int
	kind       string
	node, peer int
	note       string
}

type checkerConfig struct {
	steps int
	// sendUnpersisted breaks §7.2: a node sends its in-memory state without
	// writing it first, so a crash can undo what others have seen.
	sendUnpersisted bool
	// noViews sends only full states.
	noViews bool
	// ecdcOnly checks only the ECDC conditions, not the proofs' invariants.
	ecdcOnly bool
}

type sim struct {
	cfg    checkerConfig
	r      *rand.Rand
	nodes  []*simNode
	byID   map[ID]int
	down   map[[2]int]bool
	net    []message
	slow   []message // messages held back for long (up to thousands of steps)
	total  uint64
	trace  []event // ring of the last events
	tpos   int
	step   int
	maxTie int

	// counters for the report
	healRounds, tier0AtHeal                               int
	incrRate                                              int // incr steps that increment, in 20ths
	delivered, lost, duplicated, replayed, crashes, views int
	retirements, collected                                int
}

func newSim(seed uint64, cfg checkerConfig) *sim {
	s := &sim{
		cfg:   cfg,
		r:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		byID:  map[ID]int{},
		down:  map[[2]int]bool{},
		trace: make([]event, 40),
	}
	s.topology()
	return s
}

func simID(n int) ID {
	var id ID
	id[0] = 0xc0
	id[15] = byte(n)
	id[14] = byte(n >> 8)
	return id
}

// topology builds a random network obeying §5.1: 2–4 tier-0 nodes forming
// a connected graph; 0–5 tier-1 nodes, each linked to 1–2 tier-0 nodes and
// maybe to other tier-1 nodes; 0–8 tier-2 nodes, each linked to 1–2 smaller
// tier nodes and maybe to other tier-2 nodes; then links are added until
// any two smaller-tier neighbours of a node are linked.
func (s *sim) topology() {
	r := s.r
	counts := []int{2 + r.IntN(3), r.IntN(6), r.IntN(9)}
	adj := map[[2]int]bool{}
	link := func(a, b int) {
		if a != b {
			adj[[2]int{min(a, b), max(a, b)}] = true
		}
	}
	var byTier [3][]int
	for t, c := range counts {
		for range c {
			n := len(s.nodes)
			s.nodes = append(s.nodes, &simNode{id: simID(n), tier: t})
			byTier[t] = append(byTier[t], n)
		}
	}
	t0 := byTier[0]
	for k := 1; k < len(t0); k++ { // random spanning tree, then extra links
		link(t0[k], t0[r.IntN(k)])
	}
	for range r.IntN(3) {
		link(t0[r.IntN(len(t0))], t0[r.IntN(len(t0))])
	}
	for t := 1; t <= 2; t++ {
		for _, n := range byTier[t] {
			var lower []int
			for u := 0; u < t; u++ {
				lower = append(lower, byTier[u]...)
			}
			if t == 2 && len(byTier[1]) > 0 && r.IntN(4) != 0 {
				lower = byTier[1] // mostly to the tier just below
			}
			for range 1 + r.IntN(2) {
				link(n, lower[r.IntN(len(lower))])
			}
		}
		same := byTier[t]
		for range r.IntN(2*len(same) + 1) {
			link(same[r.IntN(len(same))], same[r.IntN(len(same))])
		}
	}
	// §5.1: smaller-tier neighbours of a node are linked; repeat to a fixed point.
	for changed := true; changed; {
		changed = false
		for u := range s.nodes {
			var lower []int
			for v := range s.nodes {
				if adj[[2]int{min(u, v), max(u, v)}] && s.nodes[v].tier < s.nodes[u].tier {
					lower = append(lower, v)
				}
			}
			for i, v := range lower {
				for _, w := range lower[i+1:] {
					if !adj[[2]int{min(v, w), max(v, w)}] {
						link(v, w)
						changed = true
					}
				}
			}
		}
	}
	for e := range adj {
		s.nodes[e[0]].nbrs = append(s.nodes[e[0]].nbrs, e[1])
		s.nodes[e[1]].nbrs = append(s.nodes[e[1]].nbrs, e[0])
	}
	for i, n := range s.nodes {
		slices.Sort(n.nbrs)
		n.leaf = n.tier > 0
		for _, v := range n.nbrs {
			if s.nodes[v].tier > n.tier {
				n.leaf = false
			}
		}
		n.mem = Init[Count](n.id, n.tier)
		n.notices = map[ID]*Notice[Count]{}
		s.byID[n.id] = i
		s.persist(i)
		s.maxTie = max(s.maxTie, n.tier)
	}
}

func (s *sim) describe() string {
	var b strings.Builder
	for i, n := range s.nodes {
		fmt.Fprintf(&b, "  node %d tier %d nbrs %v\n", i, n.tier, n.nbrs)
	}
	return b.String()
}

func (s *sim) note(kind string, node, peer int, note string) {
	s.trace[s.tpos%len(s.trace)] = event{s.step, kind, node, peer, note}
	s.tpos++
}

func (s *sim) fail(format string, args ...any) error {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d: %s\ntopology:\n%slast events:\n", s.step, fmt.Sprintf(format, args...), s.describe())
	for k := max(0, s.tpos-len(s.trace)); k < s.tpos; k++ {
		e := s.trace[k%len(s.trace)]
		fmt.Fprintf(&b, "  %d %s %d→%d %s\n", e.step, e.kind, e.node, e.peer, e.note)
	}
	return errors.New(b.String())
}

func (s *sim) persist(i int) {
	n := s.nodes[i]
	b, err := n.mem.MarshalBinary()
	if err != nil {
		panic(err)
	}
	n.disk = stored{b, encodeNotices(n.notices)}
	if len(n.history) == historyLen {
		copy(n.history, n.history[1:])
		n.history = n.history[:historyLen-1]
	}
	n.history = append(n.history, n.disk)
}

func encodeNotices(ns map[ID]*Notice[Count]) [][]byte {
	var out [][]byte
	for _, k := range slices.SortedFunc(maps.Keys(ns), ID.Compare) {
		b, err := ns[k].MarshalBinary()
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

func decodeNotices(bs [][]byte) (map[ID]*Notice[Count], error) {
	out := map[ID]*Notice[Count]{}
	for _, b := range bs {
		var n Notice[Count]
		if err := n.UnmarshalBinary(b); err != nil {
			return nil, err
		}
		out[n.ID] = &n
	}
	return out, nil
}

// recover replaces node i's memory by what it last persisted.
func (s *sim) recover(i int) error {
	n := s.nodes[i]
	d, err := decode[Count](n.disk.state)
	if err != nil {
		return s.fail("decoding node %d's disk: %v", i, err)
	}
	ns, err := decodeNotices(n.disk.notices)
	if err != nil {
		return s.fail("decoding node %d's notices: %v", i, err)
	}
	n.mem, n.notices = d, ns
	if n.phase == retiring && ns[n.id] == nil {
		n.phase = draining // it had not persisted its notice: nothing sent it
	}
	return nil
}

// maybeFreeze moves a draining node with nothing pending to retiring: it
// freezes its state and makes its notice, persisted before it is sent.
func (s *sim) maybeFreeze(i int) {
	n := s.nodes[i]
	if n.phase != draining || !n.mem.Pending().isZero() {
		return
	}
	n.phase = retiring
	n.notices[n.id] = n.mem.Retire()
	s.persist(i)
	s.note("freeze", i, i, fmt.Sprintf("%d tokens in the notice", len(n.notices[n.id].Tokens)))
}

func (s *sim) linkUp(a, b int) bool { return !s.down[[2]int{min(a, b), max(a, b)}] }

// encodeFor encodes the state (full or, at random, its view) for a peer.
func (s *sim) encodeFor(st *State[Count], to int) []byte {
	if !s.cfg.noViews && s.r.IntN(2) == 0 {
		s.views++
		st = st.View(s.nodes[to].id, s.nodes[to].tier)
	}
	b, err := st.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return b
}

// outgoing is what node i sends to: its state (or view) and its notices,
// persisted first.
func (s *sim) outgoing(i, to int) message {
	if !s.cfg.sendUnpersisted {
		s.persist(i) // §7.2: what leaves the node is durable
	}
	return message{i, to, s.encodeFor(s.nodes[i].mem, to), encodeNotices(s.nodes[i].notices)}
}

func (s *sim) send(i, to int) {
	m := s.outgoing(i, to)
	if !s.linkUp(i, to) {
		s.lost++
		s.note("send-lost", i, to, "")
		return
	}
	if s.r.IntN(8) == 0 { // a slow path: delivered much later, if ever
		s.note("send-slow", i, to, "")
		if len(s.slow) < 64 {
			s.slow = append(s.slow, m)
		} else {
			s.slow[s.r.IntN(len(s.slow))] = m
			s.lost++
		}
		return
	}
	s.net = append(s.net, m)
	s.note("send", i, to, "")
	if len(s.net) > 256 { // a bounded network loses messages
		k := s.r.IntN(len(s.net))
		s.net[k] = s.net[len(s.net)-1]
		s.net = s.net[:len(s.net)-1]
		s.lost++
	}
}

func (s *sim) deliver(m message) error {
	n := s.nodes[m.to]
	o, err := decode[Count](m.data)
	if err != nil {
		return s.fail("decoding a message from %d: %v", m.from, err)
	}
	ns, err := decodeNotices(m.notices)
	if err != nil {
		return s.fail("decoding the notices of a message from %d: %v", m.from, err)
	}
	switch n.phase {
	case retired:
		s.lost++
		return nil
	case retiring: // frozen: only looks for its notice echoed by a holder
		if _, ok := ns[n.id]; ok && m.from != m.to {
			n.phase = retired
			s.retirements++
			s.note("retired", m.to, m.from, "")
		}
		return nil
	}
	n.mem.Merge(o)
	s.delivered++
	for id, x := range ns {
		if _, ok := n.notices[id]; !ok && id != n.id {
			n.notices[id] = x
		}
	}
	if mut != mutSkipCollect {
		for _, x := range n.notices {
			if n.mem.Collect(x) {
				s.collected++
			}
		}
	}
	s.maybeFreeze(m.to)
	return nil
}

func (s *sim) fetch(i int) error {
	n := s.nodes[i]
	if n.phase == retired {
		return nil
	}
	s.persist(i)
	f := uint64(n.mem.Fetch())
	if f > s.total {
		return s.fail("fetch at node %d = %d > %d increments issued", i, f, s.total)
	}
	if f < n.lastFetch+(n.issued-n.issuedAt) {
		return s.fail("local monotonicity at node %d: fetch %d < previous fetch %d + %d increments since",
			i, f, n.lastFetch, n.issued-n.issuedAt)
	}
	n.lastFetch, n.issuedAt = f, n.issued
	return nil
}

// check verifies the safety conditions and the proofs' invariants over the
// nodes' current states.
func (s *sim) check() error {
	if s.cfg.ecdcOnly {
		for i, n := range s.nodes {
			if n.phase != retired && uint64(n.mem.val) > s.total {
				return s.fail("node %d val %d > %d increments issued", i, n.mem.val, s.total)
			}
		}
		return nil
	}
	ctv := make([]uint64, s.maxTie+1) // contribution of each tier, summed below
	var live []*simNode
	for _, n := range s.nodes {
		if n.phase != retired {
			live = append(live, n)
			ctv[n.tier] += uint64(n.mem.vals[n.id])
		}
	}
	seen := map[tokenID]Count{}
	for _, n := range live {
		for p, t := range n.mem.tokens {
			if err := s.countToken(seen, ctv, p, t); err != nil {
				return err
			}
		}
		for _, x := range n.notices { // tokens held in notices are held too
			for dst, t := range x.Tokens {
				if err := s.countToken(seen, ctv, Pair{x.ID, dst}, t); err != nil {
					return err
				}
			}
		}
	}
	for k := 1; k < len(ctv); k++ {
		ctv[k] += ctv[k-1]
	}
	if ctv[len(ctv)-1] != s.total {
		return s.fail("Proposition 6.3: CTV(max tier) = %d, increments issued = %d", ctv[len(ctv)-1], s.total)
	}
	for i, n := range s.nodes {
		if n.phase == retired {
			continue
		}
		val, below := uint64(n.mem.val), uint64(n.mem.below)
		if val > s.total {
			return s.fail("node %d val %d > %d increments issued", i, val, s.total)
		}
		if val > ctv[n.tier] {
			return s.fail("Proposition 6.2: node %d val %d > CTV(%d) = %d", i, val, n.tier, ctv[n.tier])
		}
		if n.tier == 0 && below != 0 || n.tier > 0 && below > ctv[n.tier-1] {
			return s.fail("Proposition 6.2: node %d below %d exceeds the smaller tiers' CTV", i, below)
		}
	}
	return nil
}

type tokenID struct {
	p  Pair
	ck Clock
}

// countToken adds a held token to the contribution of its source's tier if
// it is enabled (its destination has the matching slot), once per token
// however many nodes hold it.
func (s *sim) countToken(seen map[tokenID]Count, ctv []uint64, p Pair, t Token[Count]) error {
	k := tokenID{p, t.Clock}
	if v, ok := seen[k]; ok {
		if v != t.N {
			return s.fail("token %v held with values %d and %d", k, v, t.N)
		}
		return nil
	}
	seen[k] = t.N
	d, ok := s.byID[p.Dst]
	if !ok {
		return s.fail("token for unknown destination %v", p.Dst)
	}
	if ck, ok := s.nodes[d].mem.slots[p.Src]; ok && ck == t.Clock { // enabled
		ctv[s.nodes[s.byID[p.Src]].tier] += uint64(t.N)
	}
	return nil
}

func (s *sim) randomStep() error {
	r := s.r
	i := r.IntN(len(s.nodes))
	n := s.nodes[i]
	if s.step%1500 == 0 { // traffic comes in bursts with lulls between
		s.incrRate = [...]int{20, 20, 5, 0}[r.IntN(4)]
	}
	if n.phase == retired {
		if r.IntN(16) == 0 {
			s.rebirth(i)
		}
		return nil
	}
	switch w := r.IntN(100); {
	case w < 20: // incr (at this phase's rate), else a fetch
		if r.IntN(20) >= s.incrRate || n.phase != active {
			s.note("fetch", i, i, "")
			return s.fetch(i)
		}
		n.mem.Inflate(1)
		n.issued++
		s.total++
		s.persist(i)
		s.note("incr", i, i, "")
	case w < 30:
		s.note("fetch", i, i, "")
		return s.fetch(i)
	case w < 55:
		s.send(i, n.nbrs[r.IntN(len(n.nbrs))])
	case w < 85:
		if len(s.net) == 0 {
			return nil
		}
		k := r.IntN(len(s.net))
		m := s.net[k]
		switch x := r.IntN(10); {
		case x == 0: // lost
			s.net[k] = s.net[len(s.net)-1]
			s.net = s.net[:len(s.net)-1]
			s.lost++
			s.note("lose", m.from, m.to, "")
			return nil
		case x == 1: // duplicated: delivered and kept in flight
			s.duplicated++
			s.note("deliver-dup", m.from, m.to, "")
		default:
			s.net[k] = s.net[len(s.net)-1]
			s.net = s.net[:len(s.net)-1]
			s.note("deliver", m.from, m.to, "")
		}
		return s.deliver(m)
	case w < 87: // deliver a message held back for long
		if len(s.slow) == 0 {
			return nil
		}
		k := r.IntN(len(s.slow))
		m := s.slow[k]
		s.slow[k] = s.slow[len(s.slow)-1]
		s.slow = s.slow[:len(s.slow)-1]
		s.note("deliver-slow", m.from, m.to, "")
		return s.deliver(m)
	case w < 92: // replay an old state
		old := n.history[r.IntN(len(n.history))]
		to := n.nbrs[r.IntN(len(n.nbrs))]
		d, err := decode[Count](old.state)
		if err != nil {
			panic(err)
		}
		s.net = append(s.net, message{i, to, s.encodeFor(d, to), old.notices})
		s.replayed++
		s.note("replay", i, to, "")
	case w < 94:
		s.persist(i)
		s.note("persist", i, i, "")
	case w < 95: // now and then a leaf above tier 0 starts to retire
		if n.leaf && n.phase == active && r.IntN(8) == 0 {
			n.phase = draining
			s.note("drain", i, i, "")
			s.maybeFreeze(i)
		}
	case w < 97:
		if err := s.recover(i); err != nil {
			return err
		}
		s.crashes++
		s.note("crash", i, i, "")
	default:
		to := n.nbrs[r.IntN(len(n.nbrs))]
		e := [2]int{min(i, to), max(i, to)}
		if s.down[e] || r.IntN(3) == 0 { // links are down about a quarter of the time
			s.down[e] = !s.down[e]
		}
		s.note("link", i, to, fmt.Sprintf("down=%v", s.down[e]))
	}
	return nil
}

// rebirth puts a new client, with a fresh id, where a retired one was (the
// client churn that makes a naive G-counter grow).
func (s *sim) rebirth(i int) {
	n := s.nodes[i]
	n.gen++
	n.id = simID(i)
	n.id[13] = byte(n.gen)
	n.id[12] = byte(n.gen >> 8)
	s.byID[n.id] = i
	n.phase = active
	n.mem = Init[Count](n.id, n.tier)
	n.notices = map[ID]*Notice[Count]{}
	n.history = nil
	n.lastFetch, n.issuedAt = 0, n.issued
	s.persist(i)
	s.note("rebirth", i, i, n.id.String())
}

func (s *sim) quiescent() (bool, string) {
	for i, n := range s.nodes {
		if n.phase == retired {
			continue
		}
		switch {
		case n.phase != active:
			return false, fmt.Sprintf("node %d still retiring (phase %d)", i, n.phase)
		case uint64(n.mem.val) != s.total:
			return false, fmt.Sprintf("node %d fetches %d, want %d", i, n.mem.val, s.total)
		case len(n.mem.slots) != 0:
			return false, fmt.Sprintf("node %d holds %d slots", i, len(n.mem.slots))
		case len(n.mem.tokens) != 0:
			return false, fmt.Sprintf("node %d holds %d tokens", i, len(n.mem.tokens))
		case n.tier > 0 && n.mem.vals[n.id] != 0:
			return false, fmt.Sprintf("node %d (tier %d) still holds %d", i, n.tier, n.mem.vals[n.id])
		}
	}
	return true, ""
}

// heal brings every link up, delivers what is in flight, then has every node
// gossip with every neighbour, in random order, round after round.
func (s *sim) heal() error {
	for _, n := range s.nodes {
		if n.tier == 0 {
			s.tier0AtHeal = max(s.tier0AtHeal, int(n.mem.val))
		}
	}
	clear(s.down)
	s.net = append(s.net, s.slow...)
	s.slow = nil
	s.r.Shuffle(len(s.net), func(a, b int) { s.net[a], s.net[b] = s.net[b], s.net[a] })
	for _, m := range s.net {
		s.step++
		s.note("deliver-heal", m.from, m.to, "")
		if err := s.deliver(m); err != nil {
			return err
		}
		if err := s.check(); err != nil {
			return err
		}
	}
	s.net = nil
	const maxRounds = 40
	order := make([]int, len(s.nodes))
	for round := range maxRounds {
		if ok, _ := s.quiescent(); ok {
			s.healRounds = round
			for i := range s.nodes {
				if err := s.fetch(i); err != nil {
					return err
				}
			}
			return nil
		}
		for i := range order {
			order[i] = i
		}
		s.r.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, i := range order {
			for _, to := range s.nodes[i].nbrs {
				if s.nodes[i].phase == retired {
					break
				}
				s.step++
				s.note("gossip", i, to, "")
				if err := s.deliver(s.outgoing(i, to)); err != nil {
					return err
				}
				if err := s.check(); err != nil {
					return err
				}
			}
		}
	}
	_, why := s.quiescent()
	return s.fail("not quiescent after %d rounds of gossip on a healed network: %s", maxRounds, why)
}

func (s *sim) run() error {
	for s.step = 0; s.step < s.cfg.steps; s.step++ {
		if err := s.randomStep(); err != nil {
			return err
		}
		if err := s.check(); err != nil {
			return err
		}
	}
	return s.heal()
}

func (s *sim) stats() string {
	tiers := make([]int, s.maxTie+1)
	for _, n := range s.nodes {
		tiers[n.tier]++
	}
	return fmt.Sprintf("nodes per tier %v, %d increments (%d at tier 0 before healing, %d rounds to quiescence), %d delivered, %d lost, %d duplicated, %d old states replayed, %d views, %d crashes, %d retirements (%d slots collected by notices)",
		tiers, s.total, s.tier0AtHeal, s.healRounds, s.delivered, s.lost, s.duplicated, s.replayed, s.views, s.crashes, s.retirements, s.collected)
}

// TestRandomChecker runs the randomized checker: -steps steps in runs of at
// most 20,000 steps, each on a fresh random topology, all derived from one
// seed (IDEMKV_SEED replays).
func TestRandomChecker(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	const perRun = 20_000
	start := time.Now()
	var runs, maxRounds int
	for left := *flagSteps; left > 0; left -= perRun {
		cfg := checkerConfig{steps: min(left, perRun)}
		s := newSim(r.Uint64(), cfg)
		if err := s.run(); err != nil {
			t.Fatalf("run %d: %v", runs, err)
		}
		maxRounds = max(maxRounds, s.healRounds)
		if runs < 3 || testing.Verbose() && runs%500 == 0 {
			t.Logf("run %d: %s", runs, s.stats())
		}
		runs++
	}
	t.Logf("%d steps in %d runs (at most %d gossip rounds to quiescence), %v", *flagSteps, runs, maxRounds, time.Since(start).Round(time.Millisecond))
}

// TestRandomCatchesBrokenRules breaks one rule of the algorithm at a time
// and requires the checker to fail, so that a passing checker means
// something. Each break gets runs of 5,000 steps on fresh topologies until
// the checker fails, at most 40 runs.
func TestRandomCatchesBrokenRules(t *testing.T) {
	seed := testseed.Seed(t)
	cases := []struct {
		name string
		mut  mutation
		cfg  checkerConfig
	}{
		{"skip discardslot", mutSkipDiscardSlot, checkerConfig{}},
		{"fillslots keeps the slot", mutFillKeepsSlot, checkerConfig{}},
		{"createslot without bumping dck", mutSlotTwice, checkerConfig{}},
		{"createtoken without bumping sck", mutTokenTwice, checkerConfig{}},
		{"mergevectors sums", mutSumVectors, checkerConfig{}},
		{"discardtokens on an equal dck", mutDiscardTokensEarly, checkerConfig{}},
		{"aggregate adds a smaller tier's vals_j(j)", mutAggregateAddsPeer, checkerConfig{}},
		{"aggregate as Figure 5 (adds a same-tier vals_j(j))", mutPaperSameTierSum, checkerConfig{}},
		{"send before persisting (§7.2)", mutNone, checkerConfig{sendUnpersisted: true}},
		{"Collect drops a slot without filling it from the notice", mutCollectWithoutFill, checkerConfig{}},
		{"notices carry no tokens", mutNoticeWithoutTokens, checkerConfig{}},
		{"notices never applied", mutSkipCollect, checkerConfig{}},
	}
	for _, c := range cases {
		for _, ecdcOnly := range []bool{false, true} {
			name := c.name
			if ecdcOnly {
				name += " (ECDC checks only)"
			}
			t.Run(name, func(t *testing.T) {
				mut = c.mut
				defer func() { mut = mutNone }()
				r := rand.New(rand.NewPCG(seed, uint64(c.mut)+100))
				for run := range 40 {
					cfg := c.cfg
					cfg.steps = 5_000
					cfg.ecdcOnly = ecdcOnly
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
