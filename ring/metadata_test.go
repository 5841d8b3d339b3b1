package ring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// ep returns an endpoint in dc1/r1 unless dc and rack are given.
func ep(id string, dcRack ...string) Endpoint {
	e := Endpoint{ID: id, DC: "dc1", Rack: "r1"}
	if len(dcRack) > 0 {
		e.DC = dcRack[0]
	}
	if len(dcRack) > 1 {
		e.Rack = dcRack[1]
	}
	return e
}

func mustMetadata(t testing.TB, tokens map[Endpoint][]int64) *Metadata {
	t.Helper()
	m, err := NewMetadata(tokens)
	if err != nil {
		t.Fatalf("NewMetadata: %v", err)
	}
	return m
}

func TestNewMetadataErrors(t *testing.T) {
	a, b := ep("a"), ep("b")
	cases := []struct {
		name   string
		tokens map[Endpoint][]int64
		want   string
	}{
		{"token owned by two endpoints", map[Endpoint][]int64{a: {1, 2}, b: {3, 2}}, "token 2 is owned twice"},
		{"token listed twice", map[Endpoint][]int64{a: {5, 5}}, "token 5 is owned twice"},
		{"MinToken", map[Endpoint][]int64{a: {1}, b: {MinToken}}, "MinToken"},
		{"no tokens", map[Endpoint][]int64{a: {1}, b: nil}, `"b" has no tokens`},
		{"empty ID", map[Endpoint][]int64{{DC: "dc1"}: {1}}, "empty ID"},
		{"ID twice", map[Endpoint][]int64{a: {1}, ep("a", "dc2"): {2}}, `ID "a" appears twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := NewMetadata(c.tokens)
			if err == nil {
				t.Fatalf("NewMetadata = %v, want error containing %q", m.Ring(), c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestMetadataAccessors(t *testing.T) {
	a, b, c := ep("a", "dc1", "r1"), ep("b", "dc2", "r1"), ep("c", "dc1", "r2")
	in := map[Endpoint][]int64{c: {30, -5}, a: {MaxToken, 10}, b: {0}}
	m := mustMetadata(t, in)

	if got, want := m.Endpoints(), []Endpoint{a, b, c}; !slices.Equal(got, want) {
		t.Errorf("Endpoints = %v, want %v (sorted by ID)", got, want)
	}
	if got, want := m.Tokens(a), []int64{10, MaxToken}; !slices.Equal(got, want) {
		t.Errorf("Tokens(a) = %v, want %v", got, want)
	}
	if got := m.Tokens(ep("a", "dc1", "r9")); got != nil {
		t.Errorf("Tokens of a with another rack = %v, want nil", got)
	}
	if got := m.Tokens(ep("zz")); got != nil {
		t.Errorf("Tokens of an unknown endpoint = %v, want nil", got)
	}
	wantRing := []TokenOwner{{-5, c}, {0, b}, {10, a}, {30, c}, {MaxToken, a}}
	if got := m.Ring(); !slices.Equal(got, wantRing) {
		t.Errorf("Ring = %v, want %v", got, wantRing)
	}
	if got := m.Len(); got != 5 {
		t.Errorf("Len = %d, want 5", got)
	}
	if got := m.DataCenters(); len(got) != 2 || got["dc1"] != 2 || got["dc2"] != 1 {
		t.Errorf("DataCenters = %v, want dc1:2 dc2:1", got)
	}

	// Immutable: neither the input nor the returned slices alias the map.
	in[a][0] = 11
	m.Endpoints()[0].ID = "x"
	m.Tokens(c)[0] = 99
	m.Ring()[0].Token = 1
	if got := m.Ring(); !slices.Equal(got, wantRing) {
		t.Errorf("Ring after mutating inputs and results = %v, want %v", got, wantRing)
	}
	if got, want := m.Endpoints(), []Endpoint{a, b, c}; !slices.Equal(got, want) {
		t.Errorf("Endpoints after mutation = %v, want %v", got, want)
	}
}

// TestPrimary checks that a token belongs to the owner of the first ring
// token >= it: the range (prev, t] is t's, and the ring wraps.
func TestPrimary(t *testing.T) {
	a, b, c := ep("a"), ep("b"), ep("c")
	m := mustMetadata(t, map[Endpoint][]int64{a: {-100, 200}, b: {0}, c: {100}})
	cases := []struct {
		token int64
		want  Endpoint
	}{
		{MinToken, a},
		{-101, a},
		{-100, a}, // a range's end token is in the range
		{-99, b},
		{0, b},
		{1, c},
		{100, c},
		{101, a}, // a's second vnode
		{200, a},
		{201, a}, // past the last token: wraps to -100
		{MaxToken, a},
	}
	for _, tc := range cases {
		if got := m.Primary(tc.token); got != tc.want {
			t.Errorf("Primary(%d) = %s, want %s", tc.token, got.ID, tc.want.ID)
		}
	}

	one := mustMetadata(t, map[Endpoint][]int64{b: {7}})
	for _, tok := range []int64{MinToken, 6, 7, 8, MaxToken} {
		if got := one.Primary(tok); got != b {
			t.Errorf("one-token ring: Primary(%d) = %v, want b", tok, got)
		}
	}
	empty := mustMetadata(t, nil)
	if got := empty.Primary(0); got != (Endpoint{}) {
		t.Errorf("empty ring: Primary = %v, want zero Endpoint", got)
	}
}

// TestPrimaryRandom compares Primary with a linear scan on random rings.
func TestPrimaryRandom(t *testing.T) {
	rng := testseed.Rand(t)
	for iter := 0; iter < 200; iter++ {
		m := randomRing(t, rng, 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(10), 1+rng.IntN(16))
		for _, tok := range probeTokens(rng, m, 30) {
			if got, want := m.Primary(tok), walk(m, tok)[0]; got != want {
				t.Fatalf("Primary(%d) = %v, linear scan says %v; ring %v", tok, got, want, m.Ring())
			}
		}
	}
}

func TestRandomTokens(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, n := range []int{1, 2, DefaultNumTokens, 256} {
		ts := RandomTokens(rng, n)
		if len(ts) != n {
			t.Fatalf("RandomTokens(%d) gave %d tokens", n, len(ts))
		}
		if !slices.IsSorted(ts) {
			t.Errorf("RandomTokens(%d) not sorted: %v", n, ts)
		}
		for i, tok := range ts {
			if tok == MinToken {
				t.Errorf("RandomTokens(%d) returned MinToken", n)
			}
			if i > 0 && ts[i-1] == tok {
				t.Errorf("RandomTokens(%d) returned %d twice", n, tok)
			}
		}
	}
	if got := RandomTokens(rng, 0); got != nil {
		t.Errorf("RandomTokens(0) = %v, want nil", got)
	}
	// Same seed, same tokens: a node's tokens replay from its seed.
	x := RandomTokens(rand.New(rand.NewPCG(seed, 2)), 16)
	y := RandomTokens(rand.New(rand.NewPCG(seed, 2)), 16)
	if !slices.Equal(x, y) {
		t.Errorf("same seed, different tokens: %v vs %v", x, y)
	}
	// The tokens cover the whole signed range, not just non-negative values.
	neg := 0
	for _, tok := range RandomTokens(rng, 256) {
		if tok < 0 {
			neg++
		}
	}
	if neg < 64 || neg > 192 { // Binomial(256, 1/2): ±8 sigma
		t.Errorf("%d of 256 random tokens are negative, want about half", neg)
	}
}

// fixedSource replays values, to drive RandomTokens into its corner cases.
type fixedSource []uint64

func (s *fixedSource) Uint64() uint64 {
	v := (*s)[0]
	*s = (*s)[1:]
	return v
}

func TestRandomTokensNormalizesAndDedups(t *testing.T) {
	minTok := MinToken
	src := fixedSource{uint64(minTok), 5, 5, uint64(MaxToken), 7}
	got := RandomTokens(rand.New(&src), 3)
	// MinToken becomes MaxToken (Cassandra's normalize); the duplicate 5 and
	// the MaxToken that now collides with it are drawn again.
	if want := []int64{5, 7, MaxToken}; !slices.Equal(got, want) {
		t.Errorf("RandomTokens = %v, want %v", got, want)
	}
}

func TestOwnershipHandBuilt(t *testing.T) {
	a, b := ep("a"), ep("b")
	// a owns (2^62, 0] wrapping: 3/4 of the ring; b owns (0, 2^62]: 1/4.
	m := mustMetadata(t, map[Endpoint][]int64{a: {0}, b: {1 << 62}})
	if got := m.Ownership(); got["a"] != 0.75 || got["b"] != 0.25 {
		t.Errorf("Ownership = %v, want a:0.75 b:0.25", got)
	}
	m = mustMetadata(t, map[Endpoint][]int64{a: {MinToken + 1, -1 << 62}, b: {0, 1 << 62}})
	// a owns (2^62, MinToken+1], wrapping: 2^62+1 tokens, and
	// (MinToken+1, -2^62]: 2^62-1 tokens; b owns two arcs of 2^62.
	got := m.Ownership()
	if math.Abs(got["a"]-0.5) > 1e-15 || math.Abs(got["b"]-0.5) > 1e-15 {
		t.Errorf("Ownership = %v, want a:0.5 b:0.5", got)
	}
	if got := mustMetadata(t, map[Endpoint][]int64{a: {42}}).Ownership(); got["a"] != 1 {
		t.Errorf("one token: Ownership = %v, want a:1", got)
	}
	if got := mustMetadata(t, nil).Ownership(); len(got) != 0 {
		t.Errorf("empty ring: Ownership = %v, want empty", got)
	}
}

// TestOwnershipMatchesPrimary samples random tokens and checks that each
// endpoint's share of them agrees with Ownership within 6 sigma.
func TestOwnershipMatchesPrimary(t *testing.T) {
	rng := testseed.Rand(t)
	m := randomRing(t, rng, 1, 1, 5, 4)
	own := m.Ownership()
	const samples = 100_000
	hits := map[string]int{}
	for range samples {
		hits[m.Primary(int64(rng.Uint64())).ID]++
	}
	for id, p := range own {
		got := float64(hits[id]) / samples
		sigma := math.Sqrt(p * (1 - p) / samples)
		if math.Abs(got-p) > 6*sigma+1e-9 {
			t.Errorf("%s: Ownership %.5f, sampled %.5f (sigma %.5f)", id, p, got, sigma)
		}
	}
}

// TestOwnershipEvenWithVnodes: with n nodes of k random tokens each, a node's
// share is about Gamma(k, 1/(k·n)), coefficient of variation 1/sqrt(k) = 0.25
// for k = 16. For 200 nodes the observed CV has a standard deviation of about
// 0.012, so it must fall in [0.18, 0.32] (±5.7 sigma); every node must own
// between 0.15 and 3.2 times the mean share (each bound fails with
// probability < 2e-6 per run). With one token per node the CV is about 1,
// so vnodes must be far more even (single-token CV > 0.6).
func TestOwnershipEvenWithVnodes(t *testing.T) {
	rng := testseed.Rand(t)
	const nodes = 200
	cv := func(tokensPerNode int) (cv, lo, hi float64) {
		m := randomRing(t, rng, 1, 1, nodes, tokensPerNode)
		own := m.Ownership()
		if len(own) != nodes {
			t.Fatalf("Ownership has %d entries, want %d", len(own), nodes)
		}
		sum, sq := 0.0, 0.0
		lo, hi = math.Inf(1), 0
		for _, p := range own {
			sum += p
			sq += p * p
			lo, hi = min(lo, p), max(hi, p)
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%d tokens/node: ownership sums to %.15f, want 1", tokensPerNode, sum)
		}
		mean := sum / nodes
		sd := math.Sqrt(sq/nodes - mean*mean)
		return sd / mean, lo / mean, hi / mean
	}
	c, lo, hi := cv(DefaultNumTokens)
	t.Logf("16 vnodes × %d nodes: CV %.3f, min %.2f×, max %.2f× the mean share", nodes, c, lo, hi)
	if c < 0.18 || c > 0.32 {
		t.Errorf("16 vnodes: CV of ownership %.3f, want in [0.18, 0.32]", c)
	}
	if lo < 0.15 || hi > 3.2 {
		t.Errorf("16 vnodes: shares span %.2f..%.2f× the mean, want within [0.15, 3.2]", lo, hi)
	}
	if c1, _, _ := cv(1); c1 < 0.6 {
		t.Errorf("1 token per node: CV %.3f, want > 0.6 (vnodes should be what evens the ring)", c1)
	}
}

// randomRing builds a ring of dcs data centers × racks racks, with nodes
// endpoints per data center spread over the racks at random (every rack gets
// at least one when nodes >= racks), each with vnodes random tokens.
func randomRing(t testing.TB, rng *rand.Rand, dcs, racks, nodes, vnodes int) *Metadata {
	t.Helper()
	tokens := map[Endpoint][]int64{}
	used := map[int64]bool{}
	for d := range dcs {
		for i := range nodes {
			r := i
			if i >= racks {
				r = rng.IntN(racks)
			}
			e := Endpoint{ID: fmt.Sprintf("%02x%02x", d, i), DC: fmt.Sprintf("dc%d", d+1), Rack: fmt.Sprintf("r%d", r+1)}
			for {
				ts := RandomTokens(rng, vnodes)
				clash := false
				for _, tok := range ts {
					clash = clash || used[tok]
				}
				if !clash {
					for _, tok := range ts {
						used[tok] = true
					}
					tokens[e] = ts
					break
				}
			}
		}
	}
	return mustMetadata(t, tokens)
}

// probeTokens returns n tokens to look up on m: ring tokens and their
// neighbours, the extremes, and random ones.
func probeTokens(rng *rand.Rand, m *Metadata, n int) []int64 {
	ring := m.Ring()
	out := []int64{MinToken, MinToken + 1, MaxToken}
	for len(out) < n {
		switch rng.IntN(4) {
		case 0:
			out = append(out, int64(rng.Uint64()))
		default:
			tok := ring[rng.IntN(len(ring))].Token
			out = append(out, tok+int64(rng.IntN(3))-1) // may wrap at MaxToken: fine
		}
	}
	return out
}
