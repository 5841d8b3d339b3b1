package node

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/schema"
	"github.com/idemkv/idemkv/transport"
)

// TestScenarios runs the scripts in testdata/scenarios on a cluster of
// nodes in stepped mode (Options.Stepped) on a stepped in-memory network
// (transport.NewSteppedNetwork): nothing moves between the script's steps,
// every message is delivered (or dropped) by the harness one at a time,
// with the process quiescent between deliveries (waitQuiescent), and the
// coordinators' timeouts are contexts on the network's virtual clock
// (MemNetwork.Timeouts), which is also every node's clock. Messages queued
// together are delivered in a canonical order (see ordered); the clock
// moves only when nothing is queued and an operation still waits, to the
// next timeout, one timeout at a time.
//
// Commands (node numbers are 1-based; k=v arguments):
//
//	cluster n=3 rf=3 table=vanilla|fbf [leader=first|random] [ids=ordered]
//	                                   (ids=ordered: host and counter ids
//	                                   rise with the node's number)
//	replicas key=k                     the key's replicas in ring order
//	write via=1 key=k delta=5 [op=7] [cl=QUORUM] [async]
//	read via=1 key=k [cl=ALL] [async]
//	deliver-hints node=1 [async]       the node replays its hints now
//	resolve node=1 [async]             the node settles its updates in doubt
//	                                   (prints how many remain)
//	drop [from=1] [to=2] [type=mutation] [kind=req|resp] [count=n]
//	                                   a rule: matching messages are lost
//	partition a=1 b=2,3                rules cutting a from b, both ways
//	heal                               removes every rule
//	queue                              the messages waiting
//	deliver [from=] [to=] [type=] [kind=] [n=]   delivers queued messages
//	                                   (all, or the first n), rules aside
//	drop-queued [from=] [to=] [type=] [kind=] [n=]
//	dup [from=] [to=] [type=] [kind=]  duplicates the first match
//	stabilize                          delivers until nothing is queued
//	tick d=5s                          advances the virtual clock, firing
//	                                   the timeouts that passed
//	run                                stabilize and tick until every
//	                                   started operation has finished
//	crash node=2                       stops the node without shutdown
//	convict node=2                     every other node holds it down
//	absolve node=2                     every other node sees it up again
//	restart node=2                     starts it again and gossips
//	values key=k                       each replica's local value
//	hints                              each node's pending hints
//
// A synchronous write, read or deliver-hints runs to completion (run). The
// trace lists coordinator messages only: gossip and schema traffic is
// delivered in the background of cluster and restart, never dropped, never
// printed (a partition does not cut gossip: liveness is the script's, by
// convict and restart). The ring is fixed (one token per node, evenly spaced), and the
// leader rule defaults to first, so a script's output does not depend on
// the seed, which varies (IDEMKV_SEED replays one).
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			runScript(t, f, newScenario(t, testseed.Seed(t)).do)
		})
	}
}

func newScenario(t *testing.T, seed uint64) *scenario {
	s := &scenario{t: t, seed: seed, dir: t.TempDir(), gen: map[uint64]int{}, opTimes: map[uint64]int64{}}
	t.Cleanup(s.crashAll)
	return s
}

// TestScenarioReplay runs scripts twice with one seed and compares their
// whole traces, background traffic and message bodies included: the
// harness is deterministic, not only the scripts' printed outcomes.
func TestScenarioReplay(t *testing.T) {
	seed := testseed.Seed(t)
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario scripts: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		t.Run(name, func(t *testing.T) {
			var traces [2]string
			for i := range traces {
				s := newScenario(t, seed)
				runScript(t, f, s.do)
				s.crashAll()
				traces[i] = s.trace.String()
			}
			a, b := strings.Split(traces[0], "\n"), strings.Split(traces[1], "\n")
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					t.Fatalf("the two runs diverge at step %d:\n%s\n%s", i+1, a[i], b[i])
				}
			}
			if len(a) != len(b) {
				t.Fatalf("one run has %d steps, the other %d", len(a), len(b))
			}
		})
	}
}

var scenarioStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	// scenarioTimeoutMS is the counter write and read timeout, on the
	// virtual clock: the coordinators' timeout contexts come from the
	// network's Timeouts.
	scenarioTimeoutMS = 5000
	// forever is the real-time bound of the nodes' other timers (gossip
	// exchanges, hint replays): no scenario comes near it.
	forever = time.Hour
)

type scenario struct {
	t       *testing.T
	seed    uint64
	dir     string
	net     *transport.MemNetwork
	cfgs    []Config
	nodes   []*Node
	ids     []string // host ids, by node
	table   uint64
	rules   []dropRule
	step    int            // deliveries so far
	gen     map[uint64]int // a message's Seq → the step that first saw it queued
	ops     []*scenarioOp
	named   int              // the script's operations so far
	opTimes map[uint64]int64 // op number → its OpTime, shared by retries
	out     strings.Builder
	// trace records every delivery, drop and expiry, background traffic
	// included, with a hash of each message's body: two runs with the
	// same seed must record the same trace (TestScenarioReplay).
	trace strings.Builder
}

// scenarioOp is an operation running on its own goroutine.
type scenarioOp struct {
	name     string
	sync     bool
	done     chan string
	finished bool
}

type dropRule struct {
	from, to int             // 0: any
	types    map[string]bool // nil: any coordinator type
	kind     string          // "": any
	left     int             // drops left; -1: forever
	why      string
}

func (s *scenario) printf(format string, args ...any) { fmt.Fprintf(&s.out, format+"\n", args...) }

func (s *scenario) fatalf(c *scriptCmd, format string, args ...any) string {
	s.t.Errorf("line %d: %s: %s", c.line, c.text, fmt.Sprintf(format, args...))
	return ""
}

func (s *scenario) do(c *scriptCmd) string {
	s.out.Reset()
	if s.net == nil && c.name != "cluster" {
		return s.fatalf(c, "the first command must be cluster")
	}
	switch c.name {
	case "cluster":
		s.cluster(c)
	case "replicas":
		s.replicas(c)
	case "write", "read", "deliver-hints", "resolve":
		s.startOp(c)
	case "drop":
		r := s.rule(c)
		r.left = -1
		if c.has("count") {
			r.left = s.intArg(c, "count", 1)
		}
		s.rules = append(s.rules, r)
	case "partition":
		for _, a := range s.nodeList(c, "a") {
			for _, b := range s.nodeList(c, "b") {
				s.rules = append(s.rules, dropRule{from: a, to: b, left: -1, why: "partition"}, dropRule{from: b, to: a, left: -1, why: "partition"})
			}
		}
	case "heal":
		s.rules = nil
	case "queue":
		waitQuiescent(s.t)
		for _, m := range s.ordered(s.net.Queue()) {
			s.printf("%s", s.describe(m))
		}
	case "deliver", "drop-queued", "dup":
		s.stepQueued(c)
	case "stabilize":
		s.drain(false, true)
	case "tick":
		d, err := time.ParseDuration(c.arg("d", "1s"))
		if err != nil {
			return s.fatalf(c, "%v", err)
		}
		s.net.Advance(d)
		s.expireDue()
	case "run":
		s.drain(true, true)
	case "crash":
		s.crash(s.intArg(c, "node", 0))
	case "convict", "absolve":
		i := s.intArg(c, "node", 0)
		for j, nd := range s.nodes {
			if nd != nil && j+1 != i {
				nd.view.holdDown(s.ids[i-1], c.name == "convict")
			}
		}
	case "restart":
		s.restart(s.intArg(c, "node", 0))
	case "values":
		s.values(c.arg("key", "k"))
	case "hints":
		s.hints()
	default:
		return s.fatalf(c, "unknown command %q", c.name)
	}
	return s.out.String()
}

func (s *scenario) intArg(c *scriptCmd, key string, def int) int {
	v := c.arg(key, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		s.t.Fatalf("line %d: %s=%q: %v", c.line, key, v, err)
	}
	if key == "node" || key == "via" || key == "from" || key == "to" {
		if n < 1 || n > len(s.cfgs) {
			s.t.Fatalf("line %d: %s=%d: no such node", c.line, key, n)
		}
	}
	return n
}

func (s *scenario) nodeList(c *scriptCmd, key string) []int {
	var out []int
	for _, f := range strings.Split(c.arg(key, ""), ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > len(s.cfgs) {
			s.t.Fatalf("line %d: %s=%q: want node numbers", c.line, key, c.arg(key, ""))
		}
		out = append(out, n)
	}
	return out
}

// rule reads a message filter's arguments.
func (s *scenario) rule(c *scriptCmd) dropRule {
	r := dropRule{from: s.intArg(c, "from", 0), to: s.intArg(c, "to", 0), kind: c.arg("kind", ""), why: "rule"}
	if t := c.arg("type", ""); t != "" {
		r.types = map[string]bool{}
		for _, x := range strings.Split(t, ",") {
			r.types[x] = true
		}
	}
	return r
}

func (r dropRule) matches(s *scenario, m transport.Queued) bool {
	return (r.from == 0 || r.from == s.nodeOf(m.From)) && (r.to == 0 || r.to == s.nodeOf(m.To)) &&
		(r.types == nil || r.types[typeName(m.Type)]) && (r.kind == "" || r.kind == kindName(m.Kind))
}

func typeName(t transport.Type) string {
	switch t {
	case coordinator.TypeCounterWrite:
		return "counterwrite"
	case coordinator.TypeMutation:
		return "mutation"
	case coordinator.TypeRead:
		return "read"
	case coordinator.TypeScan:
		return "scan"
	case coordinator.TypeExchange:
		return "handoff"
	case TypeSchemaPush, TypeSchemaPull:
		return "schema"
	}
	if gossip.IsGossipType(t) {
		return "gossip"
	}
	return fmt.Sprintf("type%d", t)
}

func kindName(k transport.Kind) string {
	if k == transport.KindRequest || k == transport.KindOneWay {
		return "req"
	}
	return "resp"
}

// background reports whether a message is gossip or schema traffic,
// which the harness delivers without rules or trace.
func background(m transport.Queued) bool { return !coordinator.IsCoordinatorType(m.Type) }

func (s *scenario) addr(i int) transport.Addr {
	d, err := s.cfgs[i-1].withDefaults()
	if err != nil {
		s.t.Fatal(err)
	}
	return transport.Addr(d.PeerAddr())
}

func (s *scenario) nodeOf(a transport.Addr) int {
	for i, c := range s.cfgs {
		if d, err := c.withDefaults(); err == nil && string(a) == d.PeerAddr() {
			return i + 1
		}
	}
	return 0
}

func (s *scenario) describe(m transport.Queued) string {
	d := fmt.Sprintf("%d->%d %s", s.nodeOf(m.From), s.nodeOf(m.To), typeName(m.Type))
	switch m.Kind {
	case transport.KindResponse:
		d += " ack"
	case transport.KindError:
		d += " error"
	}
	return d
}

// ordered sorts queued messages canonically: by the step at which each
// was first seen, then link, kind and type, then send order. Messages
// first seen together were sent concurrently (the harness waits for
// quiescence between steps), so their send order is the scheduler's: the
// canonical order makes delivery independent of it, except between
// concurrent messages of the same link, kind and type.
func (s *scenario) ordered(q []transport.Queued) []transport.Queued {
	for _, m := range q {
		if _, ok := s.gen[m.Seq]; !ok {
			s.gen[m.Seq] = s.step
		}
	}
	slices.SortFunc(q, func(a, b transport.Queued) int {
		return cmp.Or(
			cmp.Compare(s.gen[a.Seq], s.gen[b.Seq]),
			cmp.Compare(s.nodeOf(a.From), s.nodeOf(b.From)),
			cmp.Compare(s.nodeOf(a.To), s.nodeOf(b.To)),
			cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Type, b.Type),
			cmp.Compare(a.Seq, b.Seq),
		)
	})
	return q
}

func (s *scenario) traceMsg(what string, m transport.Queued) {
	h := fnv.New64a()
	h.Write(m.Body)
	fmt.Fprintf(&s.trace, "%s %s %s %s %x\n", s.clock(), what, s.describe(m), typeName(m.Type), h.Sum64())
}

// dispatch delivers a message, or drops it if a rule says so.
func (s *scenario) dispatch(m transport.Queued, rules, print bool) {
	s.step++
	if rules && !background(m) {
		for i := range s.rules {
			r := &s.rules[i]
			if r.left != 0 && r.matches(s, m) {
				if r.left > 0 {
					r.left--
				}
				s.net.Drop(m.Seq)
				s.traceMsg("drop", m)
				if print {
					s.printf("%s DROPPED (%s)", s.describe(m), r.why)
				}
				return
			}
		}
	}
	s.net.Deliver(m.Seq)
	s.traceMsg("deliver", m)
	if print && !background(m) {
		s.printf("%s", s.describe(m))
	}
}

// drain delivers queued messages, one at a time with the process quiescent
// between, until none is left; with advance, it then also moves the
// virtual clock to the next request deadline and expires that request,
// until every started operation has finished.
func (s *scenario) drain(advance, print bool) {
	for range 100_000 {
		waitQuiescent(s.t)
		s.collect()
		if q := s.net.Queue(); len(q) > 0 {
			s.dispatch(s.ordered(q)[0], true, print)
			continue
		}
		if !advance || s.allFinished() {
			return
		}
		// Moving the clock is the one step that cannot be undone by a
		// late message: settle longer first.
		settle(s.t, 3, 2*time.Millisecond)
		if len(s.net.Queue()) > 0 || s.allFinishedNow() {
			continue
		}
		p := s.net.PendingRequests()
		if len(p) == 0 {
			s.t.Fatalf("operations wait for nothing the network holds: %s", s.running())
		}
		if now := s.net.Now(); p[0].Deadline.After(now) {
			s.net.Advance(p[0].Deadline.Sub(now))
		}
		s.expireNext(print)
	}
	s.t.Fatalf("the scenario does not settle: %d deliveries", s.step)
}

func (s *scenario) expireNext(print bool) bool {
	p, ok := s.net.ExpireNext()
	if !ok {
		return false
	}
	var what string
	switch {
	case p.Timer > 0:
		what = fmt.Sprintf("n%d: a %s timeout fires at %s", s.nodeOf(p.From), p.Timer, s.clock())
	case coordinator.IsCoordinatorType(p.Type):
		what = fmt.Sprintf("%d->%d %s TIMEOUT at %s", s.nodeOf(p.From), s.nodeOf(p.To), typeName(p.Type), s.clock())
	}
	fmt.Fprintf(&s.trace, "%s expire %d->%d %s %s\n", s.clock(), s.nodeOf(p.From), s.nodeOf(p.To), typeName(p.Type), p.Timer)
	if print && what != "" {
		s.printf("%s", what)
	}
	return true
}

// expireDue expires every request whose deadline passed, one at a time.
func (s *scenario) expireDue() {
	for {
		waitQuiescent(s.t)
		s.collect()
		if !s.expireNext(true) {
			return
		}
	}
}

func (s *scenario) clock() string { return "+" + s.net.Now().Sub(scenarioStart).String() }

// collect prints the operations that finished, in the order they started.
func (s *scenario) collect() {
	for _, op := range s.ops {
		if op.finished {
			continue
		}
		select {
		case r := <-op.done:
			op.finished = true
			if op.name == "" {
				continue
			}
			if op.sync {
				s.printf("%s", r)
			} else {
				s.printf("%s: %s", op.name, r)
			}
		default:
		}
	}
}

// allFinishedNow collects the operations that finished and reports
// whether all have.
func (s *scenario) allFinishedNow() bool {
	s.collect()
	return s.allFinished()
}

func (s *scenario) allFinished() bool {
	for _, op := range s.ops {
		if !op.finished {
			return false
		}
	}
	return true
}

func (s *scenario) running() string {
	var names []string
	for _, op := range s.ops {
		if !op.finished {
			names = append(names, op.name)
		}
	}
	return strings.Join(names, ", ")
}

// stepQueued delivers, drops or duplicates the queued messages a filter
// matches (all of them, or the first n).
func (s *scenario) stepQueued(c *scriptCmd) {
	waitQuiescent(s.t)
	r := s.rule(c)
	n := s.intArg(c, "n", math.MaxInt)
	if c.name == "dup" {
		n = 1
	}
	var todo []transport.Queued
	for _, m := range s.ordered(s.net.Queue()) {
		if len(todo) < n && !background(m) && r.matches(s, m) {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		s.printf("no such message")
	}
	for _, m := range todo {
		switch c.name {
		case "deliver":
			s.dispatch(m, false, true)
			waitQuiescent(s.t)
			s.collect()
		case "drop-queued":
			s.net.Drop(m.Seq)
			s.traceMsg("drop", m)
			s.printf("%s DROPPED", s.describe(m))
		case "dup":
			s.net.Duplicate(m.Seq)
			s.traceMsg("dup", m)
			s.printf("%s DUPLICATED", s.describe(m))
		}
	}
}

// ---- the cluster ----

func (s *scenario) cluster(c *scriptCmd) {
	n, rf := s.intArg(c, "n", 3), s.intArg(c, "rf", 3)
	s.net = transport.NewSteppedNetwork(s.seed, scenarioStart, 0)
	for i := 1; i <= n; i++ {
		s.cfgs = append(s.cfgs, Config{
			DataDirectory:         filepath.Join(s.dir, fmt.Sprintf("node%d", i)),
			ListenAddress:         fmt.Sprintf("127.0.0.%d", i),
			Seeds:                 []string{"127.0.0.1"},
			NumTokens:             1,
			GossipIntervalMS:      int(forever / time.Millisecond),
			PhiConvictThreshold:   1e9, // the scenarios convict nodes themselves
			CounterWriteTimeoutMS: scenarioTimeoutMS,
			ReadTimeoutMS:         scenarioTimeoutMS,
			CommitLogSync:         "batch",
			CounterLeader:         c.arg("leader", "first"),
			StartNativeTransport:  new(bool),
		})
		// One token per node, evenly spaced: the ring is the same for every seed.
		step := uint64(math.MaxUint64) / uint64(n)
		tok := int64(uint64(1)<<63 + uint64(i-1)*step + step/2)
		if err := os.MkdirAll(s.cfgs[i-1].DataDirectory, 0o755); err != nil {
			s.t.Fatal(err)
		}
		b, _ := json.Marshal([]int64{tok})
		if err := os.WriteFile(filepath.Join(s.cfgs[i-1].DataDirectory, "tokens.json"), b, 0o644); err != nil {
			s.t.Fatal(err)
		}
		// A host id from the seed (the replica keeps the one it finds):
		// gossip orders its peers by host id.
		var id [16]byte
		binary.BigEndian.PutUint64(id[:], s.seed)
		binary.BigEndian.PutUint64(id[8:], uint64(i)*0x9e3779b97f4a7c15)
		h := fnv.New128a()
		h.Write(id[:])
		h.Sum(id[:0])
		if c.arg("ids", "seed") == "ordered" {
			// Host ids, hence first counter ids, rising with the node's
			// number, for scripts whose outcome depends on their order.
			id = [16]byte{}
			id[15] = byte(i)
		}
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if err := os.WriteFile(filepath.Join(s.cfgs[i-1].DataDirectory, "host_id"), []byte(hex.EncodeToString(id[:])+"\n"), 0o644); err != nil {
			s.t.Fatal(err)
		}
		s.nodes = append(s.nodes, nil)
		s.ids = append(s.ids, "")
		s.start(i)
	}
	s.gossipUntil("every node up everywhere", func() bool {
		for _, nd := range s.nodes {
			if up := countUp(nd); up != n {
				return false
			}
		}
		return true
	})
	n1 := s.nodes[0]
	if err := n1.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": strconv.Itoa(rf)}}, false); err != nil {
		s.t.Fatal(err)
	}
	def := coltype.TableDef{ID: 42, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
	switch kind := c.arg("table", "vanilla"); kind {
	case "vanilla":
	case "fbf":
		def = coltype.TableDef{ID: 43, Keyspace: "ks", Name: "f", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
			Options: map[string]string{counter.IdempotenceOption: `{"class": "fbf"}`}}
	default:
		s.t.Fatalf("line %d: table=%q: want vanilla or fbf", c.line, kind)
	}
	s.table = def.ID
	if err := n1.Schema().CreateTable(def, false); err != nil {
		s.t.Fatal(err)
	}
	s.gossipUntil("the table on every node", func() bool {
		for _, nd := range s.nodes {
			if _, ok := nd.Schema().Table(def.Keyspace, def.Name); !ok {
				return false
			}
		}
		return true
	})
	s.printf("%d nodes, rf=%d, table %s, leader %s", n, rf, c.arg("table", "vanilla"), c.arg("leader", "first"))
}

func countUp(nd *Node) int {
	up := 0
	for _, p := range nd.Gossip().Nodes() {
		if p.Up {
			up++
		}
	}
	return up
}

func (s *scenario) start(i int) {
	nd, err := Start(s.cfgs[i-1], Options{
		Listen: s.net.Listen, Logger: quiet(), Seed: s.seed + uint64(i),
		Clock: s.net.Now, WithTimeout: s.net.Timeouts(s.addr(i)), Stepped: true,
	})
	if err != nil {
		s.t.Fatalf("start node %d: %v", i, err)
	}
	s.nodes[i-1] = nd
	s.ids[i-1] = nd.HostID()
}

// gossipUntil runs gossip rounds on every running node, delivering their
// messages, until cond holds.
func (s *scenario) gossipUntil(what string, cond func() bool) {
	for range 50 {
		s.drain(false, false)
		if cond() {
			return
		}
		var rounds []*scenarioOp
		for _, nd := range s.nodes {
			if nd != nil {
				rounds = append(rounds, s.goOp("", false, func(ctx context.Context) string {
					nd.Gossip().Round(ctx)
					return ""
				}))
			}
		}
		s.drain(false, false)
		for _, op := range rounds {
			if !op.finished {
				s.t.Fatalf("a gossip round did not finish once its messages were delivered; pending %v, queue %v, busy:\n%s",
					s.net.PendingRequests(), s.net.Queue(), busyGoroutine())
			}
		}
	}
	s.t.Fatalf("gossip did not bring %s", what)
}

// goOp starts an operation on its own goroutine; one without a name
// (gossip rounds) prints nothing when it finishes.
func (s *scenario) goOp(name string, sync bool, f func(ctx context.Context) string) *scenarioOp {
	op := &scenarioOp{name: name, sync: sync, done: make(chan string, 1)}
	s.ops = append(s.ops, op)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), forever)
		defer cancel()
		op.done <- f(ctx)
	}()
	return op
}

func (s *scenario) node(c *scriptCmd, key string) *Node {
	i := s.intArg(c, key, 1)
	if s.nodes[i-1] == nil {
		s.t.Fatalf("line %d: node %d is down", c.line, i)
	}
	return s.nodes[i-1]
}

func (s *scenario) startOp(c *scriptCmd) {
	async := c.has("async")
	s.named++
	var name string
	var f func(ctx context.Context) string
	switch c.name {
	case "write":
		nd := s.node(c, "via")
		cl := s.level(c, "QUORUM")
		u := coltype.Update{Table: s.table, Key: []byte(c.arg("key", "k")), Column: "c", Delta: int64(s.intArg(c, "delta", 1))}
		if c.has("op") {
			op := uint64(s.intArg(c, "op", 0))
			u.HasOp = true
			u.OpID[7] = 1
			binary.BigEndian.PutUint64(u.OpID[8:], op)
			if _, ok := s.opTimes[op]; !ok {
				s.opTimes[op] = s.net.Now().UnixNano()
			}
			u.OpTime = s.opTimes[op]
		}
		name = fmt.Sprintf("w%d", s.named)
		f = func(ctx context.Context) string { return outcome(nd.Coordinator().CounterWrite(ctx, u, cl)) }
	case "read":
		nd := s.node(c, "via")
		cl := s.level(c, "ALL")
		key := []byte(c.arg("key", "k"))
		name = fmt.Sprintf("r%d", s.named)
		f = func(ctx context.Context) string {
			r, found, err := nd.Coordinator().Read(ctx, s.table, key, cl)
			if err != nil {
				return outcome(err)
			}
			if !found {
				return "not found"
			}
			cell, ok := r.Cell("c")
			if !ok {
				return "not found"
			}
			v, err := nd.Replica().CellValue(s.table, cell)
			if err != nil {
				return outcome(err)
			}
			return fmt.Sprintf("value=%d", v)
		}
	case "deliver-hints":
		nd := s.node(c, "node")
		name = fmt.Sprintf("h%d", s.named)
		f = func(ctx context.Context) string { return outcome(nd.Hints().Deliver(ctx, nd.view, nd.tr)) }
	case "resolve":
		nd := s.node(c, "node")
		name = fmt.Sprintf("s%d", s.named)
		f = func(ctx context.Context) string {
			left := nd.Coordinator().ResolveInDoubt(ctx)
			if left == 0 {
				nd.Hints().Resume() // as the node's resolver loop does
			}
			return fmt.Sprintf("%d in doubt", left)
		}
	}
	s.goOp(name, !async, f)
	if async {
		s.printf("%s started", name)
		waitQuiescent(s.t)
		s.collect()
		return
	}
	s.drain(true, true)
}

func (s *scenario) level(c *scriptCmd, def string) coordinator.ConsistencyLevel {
	cl, err := coordinator.ParseConsistencyLevel(c.arg("cl", def))
	if err != nil {
		s.t.Fatalf("line %d: %v", c.line, err)
	}
	return cl
}

func outcome(err error) string {
	var wt *coordinator.WriteTimeoutError
	var rt *coordinator.ReadTimeoutError
	var un *coordinator.UnavailableError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &wt), errors.As(err, &rt):
		return "timeout"
	case errors.As(err, &un):
		return "unavailable"
	}
	return "error: " + err.Error()
}

// crash stops a node without a shutdown: no gossip announcement, the
// transport closes (requests waiting on it or made by it fail at once), the
// storage closes without flushing its memtables (the commit log, synced
// before every acknowledgement, replays them at restart).
func (s *scenario) crash(i int) {
	nd := s.nodes[i-1]
	if nd == nil {
		s.t.Fatalf("crash: node %d is down", i)
	}
	s.nodes[i-1] = nil
	nd.ready.Store(false)
	if err := nd.closeAll(false); err != nil {
		s.t.Fatalf("crash node %d: %v", i, err)
	}
	// Messages in flight stay queued (those to the node are lost when
	// delivered); the operations the crash ended are reported.
	waitQuiescent(s.t)
	s.collect()
}

func (s *scenario) crashAll() {
	for i, nd := range s.nodes {
		if nd != nil {
			nd.ready.Store(false)
			_ = nd.closeAll(false)
			s.nodes[i] = nil
		}
	}
}

// restart starts a crashed node one virtual second later (a new gossip
// generation) and gossips until it and every running node know each other
// again; the others stop holding it down. Hints the others deliver on
// seeing it back are delivered, untraced.
func (s *scenario) restart(i int) {
	if s.nodes[i-1] != nil {
		s.t.Fatalf("restart: node %d is running", i)
	}
	s.net.Advance(time.Second)
	s.start(i)
	nd := s.nodes[i-1]
	for _, o := range s.nodes {
		if o != nil {
			o.view.holdDown(s.ids[i-1], false)
		}
	}
	running := 0
	for _, o := range s.nodes {
		if o != nil {
			running++
		}
	}
	gen := nd.Gossip().Self().Generation
	s.gossipUntil(fmt.Sprintf("node %d back", i), func() bool {
		if countUp(nd) < running {
			return false
		}
		for _, o := range s.nodes {
			if p, ok := o.gossipNode(s.ids[i-1]); o != nil && o != nd && (!ok || p.Generation != gen || !p.Up) {
				return false
			}
		}
		return true
	})
	s.printf("node %d restarted", i)
}

func (n *Node) gossipNode(id string) (gossip.Node, bool) {
	if n == nil {
		return gossip.Node{}, false
	}
	return n.Gossip().Node(id)
}

func (s *scenario) replicas(c *scriptCmd) {
	var nd *Node
	for _, o := range s.nodes {
		if o != nil {
			nd = o
			break
		}
	}
	key := c.arg("key", "k")
	st, err := nd.Schema().Strategy(s.table)
	if err != nil {
		s.t.Fatal(err)
	}
	var ns []string
	for _, e := range st.Replicas(nd.ClusterMetadata(), ring.Token([]byte(key))) {
		ns = append(ns, strconv.Itoa(slices.Index(s.ids, e.ID)+1))
	}
	s.printf("%s: %s", key, strings.Join(ns, " "))
}

func (s *scenario) values(key string) {
	var vs []string
	for i, nd := range s.nodes {
		if nd == nil {
			vs = append(vs, fmt.Sprintf("n%d=down", i+1))
			continue
		}
		v, _, err := nd.Replica().Value(s.table, []byte(key), "c")
		if err != nil {
			s.t.Fatalf("node %d local read: %v", i+1, err)
		}
		vs = append(vs, fmt.Sprintf("n%d=%d", i+1, v))
	}
	s.printf("%s", strings.Join(vs, " "))
}

func (s *scenario) hints() {
	for i, nd := range s.nodes {
		if nd == nil {
			s.printf("n%d: down", i+1)
			continue
		}
		p := nd.Hints().Pending()
		var ts []string
		for j, id := range s.ids {
			if p[id] > 0 {
				ts = append(ts, fmt.Sprintf("for n%d: %d", j+1, p[id]))
			}
		}
		if len(ts) == 0 {
			ts = []string{"none"}
		}
		s.printf("n%d: %s", i+1, strings.Join(ts, ", "))
	}
}
