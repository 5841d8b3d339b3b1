package borrow

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

// stepsEnv sets the number of steps of TestRandomChecker (default 100,000):
// IDEMKV_BORROW_STEPS=100000000 go test -timeout 0 -run TestRandomChecker ./counters/borrow/
const stepsEnv = "IDEMKV_BORROW_STEPS"

// The randomized checker. A run has 2–4 permanent nodes (the replicas of one
// cell, each with its own dot) and 0–8 client places, each linked to 1–3
// permanent nodes; a client that retired is reborn in its place with a fresh
// id. Steps chosen at random:
//
//   - inc at a permanent node (a plain update counted in its own dot,
//     persisted before it is acknowledged);
//   - inc at a client: Client.Add, whose write goes in flight to a linked
//     node (or is lost if the link is down); now and then a client restarts
//     from its persisted Client (an encoding round trip);
//   - resend: a client resends one of its current writes; replay: a client
//     write from the past, or an old persisted state of a permanent node,
//     goes in flight again;
//   - borrow: a client asks a linked node for a dot (first loan, or another
//     creator "after a timeout"); the creator runs Create, persists and
//     answers; the request is lost if the link is down, the answer is lost
//     one time in three;
//   - retire: a client stops counting; it asks again every creator whose
//     answer it lost (while Unknown is not empty), then sends its retirement
//     to a linked node, again and again, until a node that joined it and
//     persisted acknowledges (the acknowledgement may be lost); then it is
//     gone and its place is reborn with a fresh id;
//   - gossip: a permanent node persists its state and sends it, full, to
//     another (in flight);
//   - deliver: a message in flight, chosen at random (so reordered), is
//     lost, delivered, or delivered and kept (duplicated); one in eight sent
//     takes a slow path and is delivered only hundreds or thousands of steps
//     later;
//   - transfer: a permanent node runs TransferAll on its own state;
//   - read: a permanent node persists (an answer is output) and reads;
//   - persist (written to the operating system, not fsynced); sync (a
//     periodic fsync); crash (a permanent node resumes from its last
//     persisted state); machine crash (it resumes from its last fsynced
//     state, older: what was written since is lost); a link goes down (one
//     time in three) or comes up (a partition). A node fsyncs after every
//     change it authors (a loan, an increment of its own dot, a transfer)
//     and before acknowledging a retirement, so a machine crash takes back
//     only what others authored and still hold (periodicWindow breaks
//     that); a value read may then go back, as any periodic-mode write may,
//     but never after a process crash.
//
// After every step it checks: every permanent node's value ≤ increments
// issued; conservation (issued = the permanent nodes' own dots, each read at
// its node, + every client dot not transferred by its creator, read at the
// client); each transfer removed only frozen dots created by the
// transferring node, none already transferred; a node's value never
// decreases (across a crash, never below what it last read out). Then it
// heals: every link comes up, the network drains, every client retires, and
// the permanent nodes transfer and gossip in rounds; within a bound every
// node must read the total and hold no borrowed dot.

type clientPhase int

const (
	clActive clientPhase = iota
	clRetiring
	clGone
)

type permNode struct {
	id       ID
	ids      []ID // every id it had (freshIdentity), the current one last
	mem      *State
	disk     []byte   // written to the operating system: survives a process crash
	diskSt   *State   // decoded disk, for the checks
	synced   []byte   // fsynced: survives a machine crash
	syncedSt *State   // decoded synced, for the checks
	history  [][]byte // last states that left the node, oldest first
	lastVal  uint64   // value of mem after the previous step
	lastRead uint64   // value at the last read (persisted)
}

type simClient struct {
	cl      *Client
	links   []int // permanent nodes it talks to
	phase   clientPhase
	writes  [][]byte // past writes, for replays
	birth   int
	retired int
}

type msgKind int

const (
	msgState   msgKind = iota // a permanent node's state to another
	msgWrite                  // a client's write to a permanent node
	msgRetire                 // a client's retirement (acknowledged)
	msgRetired                // the acknowledgement of a retirement
)

type message struct {
	kind     msgKind
	from, to int // permanent index; for client messages, from or to is the client place
	client   *simClient
	data     []byte
	due      int // for the slow path: the step it becomes deliverable
}

type checkerConfig struct {
	steps int
	// naiveDeltas: permanent nodes sometimes send a delta of their own dot
	// alone instead of their full state (decision (b) broken).
	naiveDeltas bool
	// abandonUnknown: a retiring client gives up on the creators whose
	// answer it lost (Client.Abandon) instead of asking them again
	// (decision (c) broken).
	abandonUnknown bool
	// periodicWindow: a permanent node lets its state leave (an answer, an
	// acknowledgement, a state sent, a value read) once written to the
	// operating system, not fsynced, as a periodic-mode commit log
	// acknowledges; a machine crash then takes it back to an older state
	// that others have seen beyond (the durability rule broken).
	periodicWindow bool
	// freshIdentity (with periodicWindow): the proposed cure, as
	// vanilla counters do it. After a machine crash a node takes a fresh
	// id, lends and counts under it, and folds the frozen dots created
	// under any of its ids into its new own dot. Acknowledged increments a
	// machine crash takes back are then lost as in vanilla's periodic mode,
	// so conservation and exactness are not checked; values ≤ issued is,
	// and catches the double count (TestRollbackFreshIdentityUnsound).
	freshIdentity bool
}

type sim struct {
	cfg      checkerConfig
	r        *rand.Rand
	perm     []*permNode
	places   []*simClient
	all      []*simClient    // every client of the run, gone ones included (pruned)
	permDown map[[2]int]bool // (a, b), a < b → down
	linkUp   map[[2]int]bool // (place, perm) → up
	net      []message
	slow     []message
	issued   uint64
	step     int
	moved    map[Dot]int // dot → permanent node that transferred it
	trace    []string
	nextCl   int

	// report
	delivered, lost, duplicated, replayed, crashes, borrows, lostAnswers int
	retirements, transfers, healRounds, machineCrashes                   int
}

func permID(i int) ID {
	var id ID
	id[0] = 0xa0
	id[15] = byte(i)
	return id
}

func newSim(seed uint64, cfg checkerConfig) *sim {
	s := &sim{
		cfg:      cfg,
		r:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		permDown: map[[2]int]bool{},
		linkUp:   map[[2]int]bool{},
		moved:    map[Dot]int{},
	}
	np := 2 + s.r.IntN(3)
	for i := range np {
		st := New()
		st.Create(permID(i), permID(i))
		n := &permNode{id: permID(i), ids: []ID{permID(i)}, mem: st}
		s.perm = append(s.perm, n)
		s.sync(i)
	}
	for range s.r.IntN(9) {
		s.places = append(s.places, nil)
		s.reborn(len(s.places) - 1)
	}
	return s
}

func (s *sim) note(format string, args ...any) {
	if len(s.trace) == 40 {
		s.trace = s.trace[1:]
	}
	s.trace = append(s.trace, fmt.Sprintf("%d: ", s.step)+fmt.Sprintf(format, args...))
}

func (s *sim) fail(format string, args ...any) error {
	return fmt.Errorf("step %d: %s\n%d permanent nodes, %d client places, issued %d\nlast events:\n  %s",
		s.step, fmt.Sprintf(format, args...), len(s.perm), len(s.places), s.issued, strings.Join(s.trace, "\n  "))
}

// reborn puts a new client, with a fresh id, in place p.
func (s *sim) reborn(p int) {
	var id ID
	id[0] = 0xc0
	s.nextCl++
	id[13] = byte(s.nextCl >> 16)
	id[14] = byte(s.nextCl >> 8)
	id[15] = byte(s.nextCl)
	c := &simClient{cl: NewClient(id), birth: s.step}
	perm := s.r.Perm(len(s.perm))
	c.links = perm[:1+s.r.IntN(min(3, len(s.perm)))]
	slices.Sort(c.links)
	for _, l := range c.links {
		s.linkUp[[2]int{p, l}] = true
	}
	for l := range s.perm {
		if !slices.Contains(c.links, l) {
			delete(s.linkUp, [2]int{p, l})
		}
	}
	s.places[p] = c
	s.all = append(s.all, c)
	s.note("client %v born in place %d, links %v", id, p, c.links)
}

// persist writes node i's state to the operating system (the disk): a
// process crash resumes from it, a machine crash may not.
func (s *sim) persist(i int) {
	n := s.perm[i]
	b, err := n.mem.MarshalBinary()
	if err != nil {
		panic(err)
	}
	n.disk = b
	n.diskSt = n.mem.Clone()
}

// sync persists node i's state and fsyncs it: a machine crash resumes
// from it.
func (s *sim) sync(i int) {
	s.persist(i)
	n := s.perm[i]
	n.synced, n.syncedSt = n.disk, n.diskSt // diskSt is never modified
}

// authored is what node i does after a change it authored (a loan, an
// increment of its own dot, a transfer) and before acknowledging a
// retirement: persist and fsync (with periodicWindow, persist only), so
// that a machine crash never takes back what it authored once anything
// derived from it may have left (as coltype/borrowcol does).
func (s *sim) authored(i int) {
	if s.cfg.periodicWindow {
		s.persist(i)
	} else {
		s.sync(i)
	}
}

// leave persists node i's state, which then leaves it (gossip), and
// records it in its history (for replays). It does not fsync: whatever of
// it a machine crash takes back was authored by others (authored fsyncs
// the rest), who still hold it.
func (s *sim) leave(i int) {
	s.persist(i)
	n := s.perm[i]
	n.history = append(n.history, n.disk)
	if len(n.history) > 4 {
		n.history = n.history[1:]
	}
}

func (s *sim) permLink(a, b int) bool { return !s.permDown[[2]int{min(a, b), max(a, b)}] }

func (s *sim) send(m message) {
	if m.kind == msgState && !s.permLink(m.from, m.to) {
		s.lost++
		return
	}
	if s.r.IntN(8) == 0 {
		m.due = s.step + 100 + s.r.IntN(3000)
		if len(s.slow) >= 64 {
			k := s.r.IntN(len(s.slow))
			s.slow[k] = s.slow[len(s.slow)-1]
			s.slow = s.slow[:len(s.slow)-1]
			s.lost++
		}
		s.slow = append(s.slow, m)
		return
	}
	s.net = append(s.net, m)
}

// clientLink reports whether client place p can talk to permanent node l.
func (s *sim) clientLink(p, l int) bool { return s.linkUp[[2]int{p, l}] }

func (s *sim) placeOf(c *simClient) int { return slices.Index(s.places, c) }

func (s *sim) deliver(m message) error {
	switch m.kind {
	case msgState, msgWrite, msgRetire:
		n := s.perm[m.to]
		var st State
		if err := st.UnmarshalBinary(m.data); err != nil {
			return s.fail("decode: %v", err)
		}
		n.mem.Join(&st)
		s.delivered++
		if m.kind == msgRetire {
			s.authored(m.to)
			s.note("node %d holds the retirement of %v", m.to, m.client.cl.ID())
			s.send(message{kind: msgRetired, to: m.to, client: m.client})
		}
	case msgRetired:
		c := m.client
		s.delivered++
		if c.phase == clRetiring {
			c.phase = clGone
			c.retired = s.step
			s.retirements++
			s.note("client %v gone", c.cl.ID())
		}
	}
	return nil
}

// ask is a borrow request from client c to permanent node l; it reports
// whether the client got the answer.
func (s *sim) ask(c *simClient, l int, loseAnswers bool) error {
	n := s.perm[l]
	target := n.id // with freshIdentity, an old id whose answer is unknown
	for _, id := range c.cl.Unknown() {
		if slices.Contains(n.ids, id) {
			target = id
		}
	}
	if err := c.cl.Ask(target); err != nil {
		return s.fail("Ask: %v", err)
	}
	if p := s.placeOf(c); p < 0 || !s.clientLink(p, l) {
		s.lost++
		return nil
	}
	d, ok := n.mem.Lent(target, c.cl.ID())
	switch {
	case ok && target != n.id:
	case target != n.id: // lent under an old id, taken back by a machine crash
		c.cl.Abandon(target)
		return nil
	default:
		var err error
		if d, err = n.mem.Lend(n.id, c.cl.ID()); err != nil {
			return s.fail("node %d refused %v's borrow request: %v", l, c.cl.ID(), err)
		}
		s.authored(l)
	}
	s.borrows++
	if loseAnswers && s.r.IntN(3) == 0 {
		s.lostAnswers++
		s.note("node %d lent %v to %v, answer lost", l, d, c.cl.ID())
		return nil
	}
	s.note("node %d lent %v to %v", l, d, c.cl.ID())
	if err := c.cl.Lent(d); err != nil {
		return s.fail("Lent: %v", err)
	}
	return nil
}

func (s *sim) clientWrite(c *simClient, w *State, kind msgKind) {
	b, err := w.MarshalBinary()
	if err != nil {
		panic(err)
	}
	if kind == msgWrite {
		c.writes = append(c.writes, b)
		if len(c.writes) > 8 {
			c.writes = c.writes[1:]
		}
	}
	p := s.placeOf(c)
	l := c.links[s.r.IntN(len(c.links))]
	if !s.clientLink(p, l) {
		s.lost++
		return
	}
	s.send(message{kind: kind, to: l, client: c, data: b})
}

func (s *sim) transfer(i int) error {
	n := s.perm[i]
	before := n.mem.Dots()
	var moved uint64
	if s.cfg.freshIdentity {
		moved = transferAnyID(n.mem, n.ids)
	} else {
		moved = n.mem.TransferAll(n.id)
	}
	if moved == 0 && len(before) == len(n.mem.Dots()) {
		return nil
	}
	after := map[Dot]bool{}
	for _, o := range n.mem.Dots() {
		after[o.Dot] = true
	}
	for _, o := range before {
		if after[o.Dot] {
			continue
		}
		if !slices.Contains(n.ids, o.Dot.Creator) {
			return s.fail("node %d transferred %v, created by another node", i, o.Dot)
		}
		if !o.Cell.Frozen {
			return s.fail("node %d transferred the active dot %v", i, o.Dot)
		}
		if by, ok := s.moved[o.Dot]; ok {
			return s.fail("node %d transferred %v, already transferred by node %d", i, o.Dot, by)
		}
		s.moved[o.Dot] = i
		s.transfers++
		s.note("node %d transferred %v (%d)", i, o.Dot, o.Cell.Count)
	}
	s.authored(i)
	return nil
}

// crash restarts node i from what it persisted (a process crash) or, for
// a machine crash, from what it fsynced.
func (s *sim) crash(i int, machine bool) error {
	n := s.perm[i]
	if machine {
		n.disk, n.diskSt = n.synced, n.syncedSt
	}
	var st State
	if err := st.UnmarshalBinary(n.disk); err != nil {
		return s.fail("recover: %v", err)
	}
	n.mem = &st
	s.crashes++
	if machine && s.cfg.freshIdentity {
		n.id = permID(i)
		n.id[14] = byte(len(n.ids))
		n.ids = append(n.ids, n.id)
		n.mem.Create(n.id, n.id)
		s.authored(i)
	}
	// A transfer that was not persisted is undone: the dot is back.
	for d, by := range s.moved {
		if by == i && !dotMoved(&st, d) {
			delete(s.moved, d)
		}
	}
	v := st.Value()
	what := "crashed"
	if machine {
		what = "machine crashed"
		s.machineCrashes++
	}
	// What a machine crash takes back was authored by others, who hold
	// it: a value read may go back there (as any periodic-mode write may),
	// never after a process crash.
	if v < n.lastRead && !machine {
		return s.fail("node %d %s, resumed at value %d below its last read %d", i, what, v, n.lastRead)
	}
	n.lastVal, n.lastRead = v, min(n.lastRead, v)
	s.note("node %d %s, resumed at value %d", i, what, v)
	return nil
}

// transferAnyID is the freshIdentity transfer: the frozen dots of every
// other owner created under any of ids fold into the own dot of the last
// (current) id.
func transferAnyID(st *State, ids []ID) uint64 {
	cur := ids[len(ids)-1]
	var n uint64
	st.dots = slices.DeleteFunc(st.dots, func(o Owned) bool {
		if slices.Contains(ids, o.Owner) || !o.Cell.Frozen || !slices.Contains(ids, o.Dot.Creator) {
			return false
		}
		n += o.Cell.Count
		return true
	})
	if n > 0 {
		if _, ok := st.activeDot(cur); !ok {
			st.Create(cur, cur)
		}
		_ = st.Inc(cur, n)
	}
	return n
}

// dotMoved reports whether d is transferred in the creator's state st.
func dotMoved(st *State, d Dot) bool {
	if !st.Seen(d) {
		return false
	}
	return !slices.ContainsFunc(st.dots, func(o Owned) bool { return o.Dot == d })
}

func (s *sim) byID(id ID) int {
	for i, n := range s.perm {
		if slices.Contains(n.ids, id) {
			return i
		}
	}
	return -1
}

func (s *sim) check() error {
	var sum uint64
	for i, n := range s.perm {
		v := n.mem.Value()
		if v > s.issued {
			return s.fail("node %d reads %d > %d issued", i, v, s.issued)
		}
		if v < n.lastVal {
			return s.fail("node %d value went down from %d to %d", i, n.lastVal, v)
		}
		n.lastVal = v
		if s.cfg.freshIdentity {
			continue
		}
		for o := range n.mem.All() {
			if o.Owner != n.id {
				continue
			}
			if o.Dot.Creator != n.id {
				return s.fail("node %d counts in %v, not its own", i, o.Dot)
			}
			sum += o.Cell.Count
		}
	}
	keep := s.all[:0]
	for _, c := range s.all {
		left := false
		for _, l := range c.cl.Loans() {
			if !l.Known() {
				continue
			}
			creator := s.perm[s.byID(l.Creator)]
			if !dotMoved(creator.mem, l.Dot) {
				sum += l.Count
				left = true
			} else if !dotMoved(creator.syncedSt, l.Dot) {
				left = true
			}
		}
		if left || c.phase != clGone {
			keep = append(keep, c)
		}
	}
	s.all = keep
	if sum != s.issued && !s.cfg.freshIdentity {
		return s.fail("conservation: own dots + untransferred client dots = %d, issued %d", sum, s.issued)
	}
	return nil
}

func (s *sim) randomStep() error {
	r := s.r
	np := len(s.perm)
	i := r.IntN(np)
	var c *simClient
	var p int
	if len(s.places) > 0 {
		p = r.IntN(len(s.places))
		c = s.places[p]
	}
	switch x := r.IntN(100); {
	case x < 6: // inc at a permanent node
		k := uint64(1 + r.IntN(3))
		if err := s.perm[i].mem.Inc(s.perm[i].id, k); err != nil {
			return s.fail("Inc at node %d: %v", i, err)
		}
		s.authored(i)
		s.issued += k
	case x < 22: // client step
		if c == nil {
			return nil
		}
		if r.IntN(16) == 0 { // the client restarts from what it persisted
			b, err := c.cl.MarshalBinary()
			if err != nil {
				return s.fail("client encode: %v", err)
			}
			var d Client
			if err := d.UnmarshalBinary(b); err != nil {
				return s.fail("client decode: %v", err)
			}
			c.cl = &d
		}
		switch c.phase {
		case clActive:
			if len(c.cl.Unknown()) > 0 || len(c.cl.Loans()) == 0 || r.IntN(10) == 0 {
				return s.ask(c, c.links[r.IntN(len(c.links))], true)
			}
			if r.IntN(25) == 0 {
				c.phase = clRetiring
				s.note("client %v retiring", c.cl.ID())
				return nil
			}
			k := uint64(1 + r.IntN(4))
			w, err := c.cl.Add(k)
			if errors.Is(err, ErrNoLoan) {
				return s.ask(c, c.links[r.IntN(len(c.links))], true)
			} else if err != nil {
				return s.fail("Add: %v", err)
			}
			s.issued += k
			s.clientWrite(c, w, msgWrite)
		case clRetiring:
			if u := c.cl.Unknown(); len(u) > 0 {
				if s.cfg.abandonUnknown {
					for _, id := range u {
						c.cl.Abandon(id)
					}
					return nil
				}
				return s.ask(c, s.byID(u[r.IntN(len(u))]), true)
			}
			ret, err := c.cl.Retire()
			if err != nil {
				return s.fail("Retire: %v", err)
			}
			s.clientWrite(c, ret, msgRetire)
		case clGone:
			if s.step-c.retired > r.IntN(200) {
				s.reborn(p)
			}
		}
	case x < 26: // resend or replay a client write
		if c == nil || c.phase == clGone {
			return nil
		}
		if r.IntN(2) == 0 || len(c.writes) == 0 {
			if ws := c.cl.Writes(); len(ws) > 0 {
				s.clientWrite(c, ws[r.IntN(len(ws))], msgWrite)
			}
			return nil
		}
		l := c.links[r.IntN(len(c.links))]
		if s.clientLink(p, l) {
			s.replayed++
			s.send(message{kind: msgWrite, to: l, client: c, data: c.writes[r.IntN(len(c.writes))]})
		}
	case x < 38: // gossip
		j := r.IntN(np)
		if j == i {
			return nil
		}
		s.leave(i)
		n := s.perm[i]
		data := n.disk
		if s.cfg.naiveDeltas && r.IntN(2) == 0 {
			if k, ok := n.mem.activeDot(n.id); ok {
				o := n.mem.dots[k]
				data, _ = Write(n.id, o.Dot, o.Cell).MarshalBinary()
			}
		}
		s.send(message{kind: msgState, from: i, to: j, data: data})
	case x < 40: // replay an old state
		j := r.IntN(np)
		h := s.perm[i].history
		if j != i && len(h) > 0 {
			s.replayed++
			s.send(message{kind: msgState, from: i, to: j, data: h[r.IntN(len(h))]})
		}
	case x < 75: // deliver
		if len(s.net) == 0 {
			return nil
		}
		k := r.IntN(len(s.net))
		m := s.net[k]
		switch y := r.IntN(10); {
		case y == 0:
			s.lost++
		case y == 1:
			s.duplicated++
			return s.deliver(m)
		default:
			if err := s.deliver(m); err != nil {
				return err
			}
		}
		s.net[k] = s.net[len(s.net)-1]
		s.net = s.net[:len(s.net)-1]
	case x < 77: // slow messages
		for k := 0; k < len(s.slow); k++ {
			if s.slow[k].due <= s.step {
				m := s.slow[k]
				s.slow[k] = s.slow[len(s.slow)-1]
				s.slow = s.slow[:len(s.slow)-1]
				return s.deliver(m)
			}
		}
	case x < 86:
		return s.transfer(i)
	case x < 89: // read
		s.persist(i)
		n := s.perm[i]
		v := n.mem.Value()
		if v < n.lastRead {
			return s.fail("node %d read %d after %d", i, v, n.lastRead)
		}
		n.lastRead = v
	case x < 90: // the state written, not fsynced (a periodic log's write)
		s.persist(i)
	case x < 91: // a periodic fsync
		s.sync(i)
	case x < 92:
		return s.crash(i, false)
	case x < 93:
		return s.crash(i, true)
	case x < 96: // permanent link
		j := r.IntN(np)
		if j != i {
			k := [2]int{min(i, j), max(i, j)}
			s.permDown[k] = !s.permDown[k] && r.IntN(3) == 0 // down one time in three, else up
		}
	default: // client link
		if c != nil {
			l := c.links[r.IntN(len(c.links))]
			k := [2]int{p, l}
			s.linkUp[k] = !s.linkUp[k] || r.IntN(3) != 0 // down one time in three, else up
		}
	}
	return nil
}

func (s *sim) heal() error {
	s.permDown = map[[2]int]bool{}
	for p, c := range s.places {
		for _, l := range c.links {
			s.linkUp[[2]int{p, l}] = true
		}
	}
	for _, m := range append(s.net, s.slow...) {
		if err := s.deliver(m); err != nil {
			return err
		}
	}
	s.net, s.slow = nil, nil
	for _, c := range s.places {
		if c.phase == clGone {
			continue
		}
		c.phase = clRetiring
		for _, id := range c.cl.Unknown() {
			if s.cfg.abandonUnknown {
				c.cl.Abandon(id)
				continue
			}
			if err := s.ask(c, s.byID(id), false); err != nil {
				return err
			}
		}
		ret, err := c.cl.Retire()
		if err != nil {
			return s.fail("heal: Retire: %v", err)
		}
		l := c.links[0]
		s.perm[l].mem.Join(ret)
		s.authored(l)
		c.phase = clGone
		s.retirements++
	}
	for round := 1; round <= 6; round++ {
		s.healRounds = round
		for i := range s.perm {
			if err := s.transfer(i); err != nil {
				return err
			}
			s.leave(i)
		}
		for i := range s.perm {
			for j := range s.perm {
				if i != j {
					if err := s.deliver(message{kind: msgState, from: i, to: j, data: s.perm[i].disk}); err != nil {
						return err
					}
				}
			}
		}
		if err := s.check(); err != nil {
			return err
		}
		done := true
		for _, n := range s.perm {
			if n.mem.Borrowed() != 0 || n.mem.Value() != s.issued {
				done = false
			}
		}
		if done {
			for i, n := range s.perm {
				if !n.mem.Equal(s.perm[0].mem) {
					return s.fail("after healing node %d's state differs from node 0's: %v / %v", i, n.mem.Dots(), s.perm[0].mem.Dots())
				}
			}
			return nil
		}
	}
	for i, n := range s.perm {
		if (n.mem.Borrowed() != 0 || n.mem.Value() != s.issued) && !s.cfg.freshIdentity {
			return s.fail("after healing node %d reads %d of %d with %d borrowed dots left: %v", i, n.mem.Value(), s.issued, n.mem.Borrowed(), n.mem.Dots())
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
	}
	return s.heal()
}

func (s *sim) stats() string {
	return fmt.Sprintf("%d permanent, %d client places, %d clients, %d increments, %d borrows (%d answers lost), %d retirements, %d dots transferred, %d delivered, %d lost, %d duplicated, %d replayed, %d crashes (%d of the machine), %d heal rounds",
		len(s.perm), len(s.places), s.nextCl, s.issued, s.borrows, s.lostAnswers, s.retirements, s.transfers, s.delivered, s.lost, s.duplicated, s.replayed, s.crashes, s.machineCrashes, s.healRounds)
}

func checkerSteps(t *testing.T) int {
	v := os.Getenv(stepsEnv)
	if v == "" {
		return 100_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q is not a positive integer", stepsEnv, v)
	}
	return n
}

// TestRandomChecker runs the randomized checker: IDEMKV_BORROW_STEPS steps
// (100,000 by default) in runs of at most 20,000, each on a fresh random
// topology, all derived from one seed (IDEMKV_SEED replays).
func TestRandomChecker(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	const perRun = 20_000
	total := checkerSteps(t)
	start := time.Now()
	runs := 0
	for left := total; left > 0; left -= perRun {
		s := newSim(r.Uint64(), checkerConfig{steps: min(left, perRun)})
		if err := s.run(); err != nil {
			t.Fatalf("run %d: %v", runs, err)
		}
		if runs < 3 || testing.Verbose() && runs%500 == 0 {
			t.Logf("run %d: %s", runs, s.stats())
		}
		runs++
	}
	el := time.Since(start)
	t.Logf("%d steps in %d runs, %v (%.0f steps/s)", total, runs, el.Round(time.Millisecond), float64(total)/el.Seconds())
}

// TestRandomCatchesBrokenRules breaks one rule at a time and requires the
// checker to fail, so that a passing checker means something. Each break
// gets runs of 5,000 steps on fresh topologies until the checker fails, at
// most 40 runs.
func TestRandomCatchesBrokenRules(t *testing.T) {
	seed := testseed.Seed(t)
	cases := []struct {
		name string
		mut  mutation
		cfg  checkerConfig
		want string // the failure must say this (default: any failure)
	}{
		{"transfer of any creator's dots (the paper's formula)", mutUnrestrictedTransfer, checkerConfig{}, ""},
		{"join ignores contexts", mutJoinIgnoresContext, checkerConfig{}, ""},
		{"transfer of active dots", mutTransferActive, checkerConfig{}, ""},
		{"create not idempotent", mutCreateNotIdempotent, checkerConfig{}, ""},
		{"deltas of a permanent node's own dot alone", mutNone, checkerConfig{naiveDeltas: true}, ""},
		{"clients retire without learning every dot lent", mutNone, checkerConfig{abandonUnknown: true}, ""},
		{"answers before the fsync (periodic window), machine crashes", mutNone, checkerConfig{periodicWindow: true}, ""},
		{"periodic window with a fresh identity after a machine crash (over-count)", mutNone, checkerConfig{periodicWindow: true, freshIdentity: true}, " issued"},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mut = c.mut
			defer func() { mut = mutNone }()
			r := rand.New(rand.NewPCG(seed, uint64(k)+100))
			for run := range 40 {
				cfg := c.cfg
				cfg.steps = 5_000
				s := newSim(r.Uint64(), cfg)
				if err := s.run(); err != nil {
					msg := err.Error()
					first := msg[:strings.IndexByte(msg, '\n')]
					if !strings.Contains(first, c.want) {
						t.Fatalf("run %d failed without saying %q: %s", run, c.want, msg)
					}
					t.Logf("caught in run %d: %s", run, first)
					return
				}
			}
			t.Errorf("the checker did not catch %q in 40 runs", c.name)
		})
	}
}
