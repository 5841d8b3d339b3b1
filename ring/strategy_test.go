package ring

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

func ids(es []Endpoint) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.ID
	}
	return strings.Join(s, " ")
}

func TestSimpleStrategyReplicas(t *testing.T) {
	a, b, c, d := ep("a"), ep("b"), ep("c"), ep("d")
	// Ring: 0:a 10:b 15:a 20:c 30:d — a has two vnodes.
	m := mustMetadata(t, map[Endpoint][]int64{a: {0, 15}, b: {10}, c: {20}, d: {30}})
	cases := []struct {
		token int64
		rf    int
		want  string
	}{
		{5, 3, "b a c"},  // from 10: b, a (15), c
		{10, 2, "b a"},   // 10 itself is b's
		{12, 3, "a c d"}, // from 15
		{31, 3, "a b c"}, // wraps to 0: a, b, a again (skipped), c
		{MaxToken, 1, "a"},
		{MinToken, 4, "a b c d"},
		{20, 9, "c d a b"}, // RF > endpoints: all, in walk order
		{20, 0, ""},
		{20, -1, ""},
	}
	for _, tc := range cases {
		got := SimpleStrategy{RF: tc.rf}.Replicas(m, tc.token)
		if ids(got) != tc.want {
			t.Errorf("SimpleStrategy{%d}.Replicas(%d) = [%s], want [%s]", tc.rf, tc.token, ids(got), tc.want)
		}
	}
	if got := (SimpleStrategy{RF: 3}).Replicas(mustMetadata(t, nil), 0); got != nil {
		t.Errorf("empty ring: %v, want nil", got)
	}
}

// twoDCRing: dc1 has racks r1 (a1, a2), r2 (b1), r3 (c1); dc2 has racks r1
// (x1, x2), r2 (y1). Ring: 10:a1 20:a2 30:x1 40:x2 50:b1 60:y1 70:c1.
func twoDCRing(t testing.TB) *Metadata {
	return mustMetadata(t, map[Endpoint][]int64{
		ep("a1", "dc1", "r1"): {10},
		ep("a2", "dc1", "r1"): {20},
		ep("b1", "dc1", "r2"): {50},
		ep("c1", "dc1", "r3"): {70},
		ep("x1", "dc2", "r1"): {30},
		ep("x2", "dc2", "r1"): {40},
		ep("y1", "dc2", "r2"): {60},
	})
}

func TestNTSReplicasHandBuilt(t *testing.T) {
	m := twoDCRing(t)
	cases := []struct {
		name  string
		dcs   map[string]int
		token int64
		want  string
	}{
		// Rack diversity: a2 and x2 share a rack with a replica already
		// taken, and each DC has as many racks as its RF: both are skipped.
		{"one replica per rack", map[string]int{"dc1": 3, "dc2": 2}, 5, "a1 x1 b1 y1 c1"},
		{"start mid-ring", map[string]int{"dc1": 3, "dc2": 2}, 45, "b1 y1 c1 a1 x1"},
		// dc1 with RF 2 of 3 racks: the first two racks met.
		{"fewer replicas than racks", map[string]int{"dc1": 2}, 55, "c1 a1"},
		// dc2 has 2 racks for RF 3: one rack repeat allowed, taken as met.
		{"fewer racks than RF", map[string]int{"dc2": 3}, 5, "x1 x2 y1"},
		{"fewer racks than RF, wrapping", map[string]int{"dc2": 3}, 35, "x2 y1 x1"},
		// dc2 has 3 endpoints for RF 5: all of them, nothing more.
		{"fewer nodes than RF", map[string]int{"dc1": 1, "dc2": 5}, 5, "a1 x1 x2 y1"},
		{"RF above a DC's nodes, both DCs", map[string]int{"dc1": 9, "dc2": 9}, 65, "c1 a1 a2 x1 x2 b1 y1"},
		// The primary (a1) is in dc1, which is not replicated.
		{"primary's DC not replicated", map[string]int{"dc2": 1}, 5, "x1"},
		{"unknown DC ignored", map[string]int{"dc1": 1, "dc9": 3}, 5, "a1"},
		{"zero and negative factors", map[string]int{"dc1": 0, "dc2": -1}, 5, ""},
		{"no DCs", nil, 5, ""},
	}
	for _, tc := range cases {
		got := NetworkTopologyStrategy{DCs: tc.dcs}.Replicas(m, tc.token)
		if ids(got) != tc.want {
			t.Errorf("%s: NTS%v.Replicas(%d) = [%s], want [%s]", tc.name, tc.dcs, tc.token, ids(got), tc.want)
		}
	}
	if got := (NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3}}).Replicas(mustMetadata(t, nil), 0); got != nil {
		t.Errorf("empty ring: %v, want nil", got)
	}
}

// TestNTSRackRepeatOrder pins the order of rack repeats: Cassandra's current
// algorithm takes a repeat when the walk meets it (n2 before n4), the older
// one after the last new rack (n4 before n2); both choose the same set.
func TestNTSRackRepeatOrder(t *testing.T) {
	m := mustMetadata(t, map[Endpoint][]int64{
		ep("n1", "dc1", "r1"): {10},
		ep("n2", "dc1", "r1"): {20},
		ep("n3", "dc1", "r1"): {30},
		ep("n4", "dc1", "r2"): {40},
	})
	dcs := map[string]int{"dc1": 3}
	if got := ids(NetworkTopologyStrategy{DCs: dcs}.Replicas(m, 5)); got != "n1 n2 n4" {
		t.Errorf("Replicas = [%s], want [n1 n2 n4]", got)
	}
	if got := ids(ntsSkipModel(m, 5, dcs)); got != "n1 n4 n2" {
		t.Errorf("older algorithm = [%s], want [n1 n4 n2]", got)
	}
}

// TestNTSManyDCs exercises the path for more data centers than Replicas
// keeps on the stack.
func TestNTSManyDCs(t *testing.T) {
	rng := testseed.Rand(t)
	m := randomRing(t, rng, maxStackDCs+3, 2, 3, 4)
	dcs := map[string]int{}
	for dc := range m.DataCenters() {
		dcs[dc] = 2
	}
	for _, tok := range probeTokens(rng, m, 50) {
		got := NetworkTopologyStrategy{DCs: dcs}.Replicas(m, tok)
		if want := ntsModel(m, tok, dcs); !slices.Equal(got, want) {
			t.Fatalf("Replicas(%d) = [%s], model [%s]", tok, ids(got), ids(want))
		}
		if len(got) != 2*(maxStackDCs+3) {
			t.Fatalf("Replicas(%d) has %d endpoints, want %d", tok, len(got), 2*(maxStackDCs+3))
		}
	}
}

// TestReplicasProperties checks both strategies on random rings of 1–3 data
// centers, 1–4 racks, 1–12 nodes per data center and 1–16 vnodes, against
// the reference models and the invariants: no endpoint twice, the count is
// min(RF, endpoints) (per data center for NTS), the primary comes first
// (for NTS when its data center is replicated), NTS uses min(count, racks)
// distinct racks in each data center, and the older NTS algorithm picks the
// same set.
func TestReplicasProperties(t *testing.T) {
	rng := testseed.Rand(t)
	for iter := 0; iter < 300; iter++ {
		ndc, nracks, nodes, vnodes := 1+rng.IntN(3), 1+rng.IntN(4), 1+rng.IntN(12), 1+rng.IntN(16)
		m := randomRing(t, rng, ndc, nracks, nodes, vnodes)
		nodesIn, racksIn := topology(m)
		rf := rng.IntN(6)
		dcs := map[string]int{}
		for dc := range nodesIn {
			if rng.IntN(4) > 0 {
				dcs[dc] = rng.IntN(6)
			}
		}
		if rng.IntN(5) == 0 {
			dcs["nowhere"] = 2
		}
		simple, nts := SimpleStrategy{RF: rf}, NetworkTopologyStrategy{DCs: dcs}
		for _, tok := range probeTokens(rng, m, 20) {
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("ring %d DCs × %d racks × %d nodes × %d vnodes, token %d: "+format,
					append([]any{ndc, nracks, nodes, vnodes, tok}, args...)...)
			}
			primary := m.Primary(tok)

			got := simple.Replicas(m, tok)
			if want := simpleModel(m, tok, rf); !slices.Equal(got, want) {
				fail("SimpleStrategy{%d} = [%s], model [%s]", rf, ids(got), ids(want))
			}
			if n := min(rf, len(m.Endpoints())); len(got) != n || !distinct(got) {
				fail("SimpleStrategy{%d} = [%s]: want %d distinct endpoints", rf, ids(got), n)
			}
			if rf > 0 && got[0] != primary {
				fail("SimpleStrategy{%d} = [%s]: primary %s not first", rf, ids(got), primary.ID)
			}

			got = nts.Replicas(m, tok)
			if want := ntsModel(m, tok, dcs); !slices.Equal(got, want) {
				fail("NTS%v = [%s], model [%s]", dcs, ids(got), ids(want))
			}
			if !distinct(got) {
				fail("NTS%v = [%s]: an endpoint twice", dcs, ids(got))
			}
			if old := ntsSkipModel(m, tok, dcs); !sameSet(got, old) {
				fail("NTS%v = [%s], older algorithm [%s]: different sets", dcs, ids(got), ids(old))
			}
			perDC, racksUsed := map[string]int{}, map[string]map[string]bool{}
			for _, e := range got {
				perDC[e.DC]++
				if racksUsed[e.DC] == nil {
					racksUsed[e.DC] = map[string]bool{}
				}
				racksUsed[e.DC][e.Rack] = true
			}
			for dc, n := range nodesIn {
				want := min(max(dcs[dc], 0), n)
				if perDC[dc] != want {
					fail("NTS%v = [%s]: %d replicas in %s, want %d", dcs, ids(got), perDC[dc], dc, want)
				}
				if r := min(want, len(racksIn[dc])); len(racksUsed[dc]) != r {
					fail("NTS%v = [%s]: %d racks used in %s, want %d", dcs, ids(got), len(racksUsed[dc]), dc, r)
				}
			}
			if dcs[primary.DC] > 0 && got[0] != primary {
				fail("NTS%v = [%s]: primary %s not first", dcs, ids(got), primary.ID)
			}
		}
	}
}

// TestNTSOneRackIsSimple: in one data center with one rack, NTS places
// replicas exactly like SimpleStrategy.
func TestNTSOneRackIsSimple(t *testing.T) {
	rng := testseed.Rand(t)
	for iter := 0; iter < 50; iter++ {
		m := randomRing(t, rng, 1, 1, 1+rng.IntN(10), 1+rng.IntN(16))
		rf := 1 + rng.IntN(5)
		for _, tok := range probeTokens(rng, m, 20) {
			s := SimpleStrategy{RF: rf}.Replicas(m, tok)
			n := NetworkTopologyStrategy{DCs: map[string]int{"dc1": rf}}.Replicas(m, tok)
			if !slices.Equal(s, n) {
				t.Fatalf("RF %d token %d: Simple [%s], NTS [%s]", rf, tok, ids(s), ids(n))
			}
		}
	}
}

func distinct(es []Endpoint) bool {
	seen := map[Endpoint]bool{}
	for _, e := range es {
		if seen[e] {
			return false
		}
		seen[e] = true
	}
	return true
}

func sameSet(a, b []Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[Endpoint]bool{}
	for _, e := range a {
		in[e] = true
	}
	for _, e := range b {
		if !in[e] {
			return false
		}
	}
	return true
}

func TestStrategyDescriptions(t *testing.T) {
	s := SimpleStrategy{RF: 3}
	if s.Class() != "org.apache.cassandra.locator.SimpleStrategy" || s.ReplicationFactor() != 3 {
		t.Errorf("SimpleStrategy: class %q, RF %d", s.Class(), s.ReplicationFactor())
	}
	if o := s.Options(); !maps.Equal(o, map[string]string{"replication_factor": "3"}) {
		t.Errorf("SimpleStrategy options %v", o)
	}
	if f := s.DCFactors(); !maps.Equal(f, map[string]int{"": 3}) {
		t.Errorf("SimpleStrategy DCFactors %v", f)
	}
	if got := s.String(); got != "{'class': 'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': '3'}" {
		t.Errorf("String = %s", got)
	}

	n := NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3, "dc2": 2, "dc3": 0}}
	if n.Class() != "org.apache.cassandra.locator.NetworkTopologyStrategy" || n.ReplicationFactor() != 5 {
		t.Errorf("NTS: class %q, RF %d", n.Class(), n.ReplicationFactor())
	}
	if o := n.Options(); !maps.Equal(o, map[string]string{"dc1": "3", "dc2": "2", "dc3": "0"}) {
		t.Errorf("NTS options %v", o)
	}
	f := n.DCFactors()
	f["dc1"] = 99 // a copy
	if n.DCs["dc1"] != 3 {
		t.Errorf("DCFactors aliases the strategy's map")
	}
	if r := Replication(n); r["class"] != NetworkTopologyStrategyClass || r["dc2"] != "2" || len(r) != 4 {
		t.Errorf("Replication(NTS) = %v", r)
	}

	for _, c := range []struct {
		s    Strategy
		dc   string
		want int
	}{
		{s, "dc1", 3}, {s, "anything", 3},
		{n, "dc1", 3}, {n, "dc2", 2}, {n, "dc3", 0}, {n, "dc9", 0},
		{&n, "dc2", 2},
	} {
		if got := DCFactor(c.s, c.dc); got != c.want {
			t.Errorf("DCFactor(%v, %q) = %d, want %d", c.s, c.dc, got, c.want)
		}
	}
}

func TestParseStrategy(t *testing.T) {
	ok := []struct {
		class string
		opts  map[string]string
		want  Strategy
	}{
		{"SimpleStrategy", map[string]string{"replication_factor": "3"}, SimpleStrategy{RF: 3}},
		{SimpleStrategyClass, map[string]string{"replication_factor": "1"}, SimpleStrategy{RF: 1}},
		{"SimpleStrategy", map[string]string{"class": SimpleStrategyClass, "replication_factor": "2"}, SimpleStrategy{RF: 2}},
		{"NetworkTopologyStrategy", map[string]string{"dc1": "3", "dc2": "0"}, NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3, "dc2": 0}}},
		{NetworkTopologyStrategyClass, map[string]string{"class": "NetworkTopologyStrategy", "DC1": "2"}, NetworkTopologyStrategy{DCs: map[string]int{"DC1": 2}}},
	}
	for _, c := range ok {
		got, err := ParseStrategy(c.class, c.opts)
		if err != nil {
			t.Errorf("ParseStrategy(%q, %v): %v", c.class, c.opts, err)
			continue
		}
		if !equalStrategy(got, c.want) {
			t.Errorf("ParseStrategy(%q, %v) = %v, want %v", c.class, c.opts, got, c.want)
		}
		// Round trip through what CQL shows.
		again, err := ParseStrategy(got.Class(), Replication(got))
		if err != nil || !equalStrategy(again, got) {
			t.Errorf("round trip of %v: %v, %v", got, again, err)
		}
	}

	bad := []struct {
		class string
		opts  map[string]string
		want  string
	}{
		{"", map[string]string{"replication_factor": "3"}, "missing replication class"},
		{"FancyStrategy", nil, `unknown replication class "FancyStrategy"`},
		{"simplestrategy", map[string]string{"replication_factor": "3"}, "unknown replication class"},
		{"org.apache.cassandra.locator.LocalStrategy", nil, "not supported"},
		{"SimpleStrategy", nil, "requires a replication_factor"},
		{"SimpleStrategy", map[string]string{"dc1": "3"}, "requires a replication_factor"},
		{"SimpleStrategy", map[string]string{"replication_factor": "three"}, `"three", not an integer`},
		{"SimpleStrategy", map[string]string{"replication_factor": " 3"}, "not an integer"},
		{"SimpleStrategy", map[string]string{"replication_factor": "3/1"}, "transient replication is not supported"},
		{"SimpleStrategy", map[string]string{"replication_factor": "0"}, "at least 1, got 0"},
		{"SimpleStrategy", map[string]string{"replication_factor": "-2"}, "non-negative, got -2"},
		{"SimpleStrategy", map[string]string{"replication_factor": "99999999999"}, "too large"},
		{"SimpleStrategy", map[string]string{"replication_factor": "3", "dc1": "2"}, `unrecognized option "dc1"`},
		{"SimpleStrategy", map[string]string{"class": "NetworkTopologyStrategy", "replication_factor": "3"}, "disagree"},
		{"NetworkTopologyStrategy", nil, "needs a data center"},
		{"NetworkTopologyStrategy", map[string]string{"dc1": "0"}, "needs a data center"},
		{"NetworkTopologyStrategy", map[string]string{"replication_factor": "3"}, "factor per data center"},
		{"NetworkTopologyStrategy", map[string]string{"Replication_Factor": "3", "dc1": "1"}, "factor per data center"},
		{"NetworkTopologyStrategy", map[string]string{"dc1": "x"}, `data center "dc1" is "x", not an integer`},
		{"NetworkTopologyStrategy", map[string]string{"dc1": "-1"}, "non-negative"},
		{"NetworkTopologyStrategy", map[string]string{"": "1"}, "empty data center name"},
		{"NetworkTopologyStrategy", map[string]string{"class": "Bogus", "dc1": "1"}, "unknown replication class"},
	}
	for _, c := range bad {
		s, err := ParseStrategy(c.class, c.opts)
		if err == nil {
			t.Errorf("ParseStrategy(%q, %v) = %v, want an error containing %q", c.class, c.opts, s, c.want)
			continue
		}
		if !errors.Is(err, ErrStrategy) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseStrategy(%q, %v): %q, want ErrStrategy containing %q", c.class, c.opts, err, c.want)
		}
	}
}

func equalStrategy(a, b Strategy) bool {
	return a.Class() == b.Class() && maps.Equal(a.Options(), b.Options())
}

// TestReplicasSmallAllocation: one allocation per call (the result) on
// rings up to 256 endpoints and 8 data centers.
func TestReplicasSmallAllocation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := randomRing(t, rng, 2, 3, 5, DefaultNumTokens)
	tokens := RandomTokens(rng, 64)
	for _, s := range []Strategy{SimpleStrategy{RF: 3}, NetworkTopologyStrategy{DCs: map[string]int{"dc1": 3, "dc2": 2}}} {
		i := 0
		allocs := testing.AllocsPerRun(200, func() {
			s.Replicas(m, tokens[i%len(tokens)])
			i++
		})
		if allocs > 1 {
			t.Errorf("%v: %.1f allocations per Replicas, want 1", s, allocs)
		}
	}
}
