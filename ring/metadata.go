package ring

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// DefaultNumTokens is the number of tokens (virtual nodes) a node takes when
// it joins: Cassandra 4.0's default num_tokens.
const DefaultNumTokens = 16

// Endpoint is a node of the ring. ID is the node's host id (hex); the package
// treats it as opaque but requires it to be non-empty and unique. DC and Rack
// are the node's data center and rack, as a snitch would report them.
type Endpoint struct {
	ID       string
	DC, Rack string
}

// TokenOwner is one token of the ring and the endpoint that owns it.
type TokenOwner struct {
	Token    int64
	Endpoint Endpoint
}

// RandomTokens returns n distinct random tokens in ascending order, none of
// them MinToken, as Cassandra assigns num_tokens tokens to a joining node
// without allocate_tokens_for_keyspace: uniform 64-bit values, with MinToken
// normalized to MaxToken, drawn until n are distinct. It returns nil when
// n <= 0. The tokens may still collide with other nodes' tokens (with
// probability about n·T/2^64 for T tokens already on the ring); NewMetadata
// reports such a collision.
func RandomTokens(rng *rand.Rand, n int) []int64 {
	if n <= 0 {
		return nil
	}
	tokens := make([]int64, 0, n)
	for len(tokens) < n {
		t := int64(rng.Uint64())
		if t == MinToken {
			t = MaxToken
		}
		if !slices.Contains(tokens, t) {
			tokens = append(tokens, t)
		}
	}
	slices.Sort(tokens)
	return tokens
}

// Metadata is an immutable token map: the endpoints of a ring with their
// tokens, sorted by token. It is safe for concurrent use. The zero Metadata
// is not valid; use NewMetadata.
type Metadata struct {
	// tokens is the sorted ring; owner[i] is the index in endpoints of the
	// owner of tokens[i].
	tokens []int64
	owner  []int32

	// endpoints is sorted by ID; epDC and epRack give each endpoint's data
	// center index and global rack index; epTokens its sorted tokens.
	endpoints []Endpoint
	epDC      []int32
	epRack    []int32
	epTokens  [][]int64

	// dcIndex maps a data center name to its index; dcEndpoints and dcRacks
	// count the endpoints and distinct racks of each data center.
	dcIndex     map[string]int
	dcNames     []string
	dcEndpoints []int
	dcRacks     []int
	numRacks    int
}

// NewMetadata builds the token map of the given endpoints. It fails when a
// token is owned twice (by two endpoints, or listed twice for one), when a
// token is MinToken, when an endpoint has no token or an empty ID, or when two
// endpoints share an ID (with different DC or Rack). An empty map gives an
// empty ring, whose Primary is the zero Endpoint and whose replicas are none.
func NewMetadata(tokens map[Endpoint][]int64) (*Metadata, error) {
	m := &Metadata{dcIndex: make(map[string]int)}
	for e := range tokens {
		m.endpoints = append(m.endpoints, e)
	}
	slices.SortFunc(m.endpoints, func(a, b Endpoint) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.DC, b.DC), cmp.Compare(a.Rack, b.Rack))
	})
	if len(m.endpoints) > math.MaxInt32 {
		return nil, fmt.Errorf("ring: %d endpoints is too many", len(m.endpoints))
	}

	type rackKey struct{ dc, rack string }
	rackIndex := make(map[rackKey]int)
	var ring []TokenOwner
	m.epDC = make([]int32, len(m.endpoints))
	m.epRack = make([]int32, len(m.endpoints))
	m.epTokens = make([][]int64, len(m.endpoints))
	for i, e := range m.endpoints {
		if e.ID == "" {
			return nil, fmt.Errorf("ring: endpoint %+v has an empty ID", e)
		}
		if i > 0 && m.endpoints[i-1].ID == e.ID {
			return nil, fmt.Errorf("ring: endpoint ID %q appears twice (%+v and %+v)", e.ID, m.endpoints[i-1], e)
		}
		ts := tokens[e]
		if len(ts) == 0 {
			return nil, fmt.Errorf("ring: endpoint %q has no tokens", e.ID)
		}
		d, ok := m.dcIndex[e.DC]
		if !ok {
			d = len(m.dcNames)
			m.dcIndex[e.DC] = d
			m.dcNames = append(m.dcNames, e.DC)
			m.dcEndpoints = append(m.dcEndpoints, 0)
			m.dcRacks = append(m.dcRacks, 0)
		}
		m.dcEndpoints[d]++
		r, ok := rackIndex[rackKey{e.DC, e.Rack}]
		if !ok {
			r = len(rackIndex)
			rackIndex[rackKey{e.DC, e.Rack}] = r
			m.dcRacks[d]++
		}
		m.epDC[i] = int32(d)
		m.epRack[i] = int32(r)
		own := slices.Clone(ts)
		slices.Sort(own)
		m.epTokens[i] = own
		for _, t := range own {
			if t == MinToken {
				return nil, fmt.Errorf("ring: endpoint %q has MinToken, which no node may own", e.ID)
			}
			ring = append(ring, TokenOwner{t, e})
		}
	}
	m.numRacks = len(rackIndex)

	slices.SortFunc(ring, func(a, b TokenOwner) int { return cmp.Compare(a.Token, b.Token) })
	m.tokens = make([]int64, len(ring))
	m.owner = make([]int32, len(ring))
	for i, to := range ring {
		if i > 0 && ring[i-1].Token == to.Token {
			return nil, fmt.Errorf("ring: token %d is owned twice (by %q and %q)", to.Token, ring[i-1].Endpoint.ID, to.Endpoint.ID)
		}
		m.tokens[i] = to.Token
		m.owner[i] = int32(m.indexOf(to.Endpoint.ID))
	}
	return m, nil
}

// indexOf returns the index of the endpoint with the given ID, or -1.
func (m *Metadata) indexOf(id string) int {
	i := sort.Search(len(m.endpoints), func(i int) bool { return m.endpoints[i].ID >= id })
	if i < len(m.endpoints) && m.endpoints[i].ID == id {
		return i
	}
	return -1
}

// Endpoints returns the endpoints of the ring, sorted by ID.
func (m *Metadata) Endpoints() []Endpoint {
	return slices.Clone(m.endpoints)
}

// Tokens returns the tokens of e in ascending order, or nil when e is not on
// the ring (all of e's fields must match).
func (m *Metadata) Tokens(e Endpoint) []int64 {
	i := m.indexOf(e.ID)
	if i < 0 || m.endpoints[i] != e {
		return nil
	}
	return slices.Clone(m.epTokens[i])
}

// Len returns the number of tokens on the ring.
func (m *Metadata) Len() int { return len(m.tokens) }

// first returns the index of the first token >= token, wrapping to 0 past
// the last one. The ring must not be empty.
func (m *Metadata) first(token int64) int {
	// A hand-written binary search: sort.Search's closure costs more here.
	lo, hi := 0, len(m.tokens)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if m.tokens[h] < token {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo == len(m.tokens) {
		return 0
	}
	return lo
}

// Primary returns the endpoint that primarily owns token: the owner of the
// first ring token >= token, wrapping to the smallest ring token past the
// largest (Cassandra gives the range (prev, t] to t's owner). It returns the
// zero Endpoint on an empty ring.
func (m *Metadata) Primary(token int64) Endpoint {
	if len(m.tokens) == 0 {
		return Endpoint{}
	}
	return m.endpoints[m.owner[m.first(token)]]
}

// Ownership returns, for each endpoint ID, the fraction of the token space
// it primarily owns: the sum of the sizes of its ranges (prev, t] divided by
// 2^64. The fractions sum to 1 (up to float rounding) on a non-empty ring. As
// in Cassandra, a lone token owns the whole ring. Replication is not taken
// into account (this is nodetool's "Owns" without a keyspace).
func (m *Metadata) Ownership() map[string]float64 {
	own := make(map[string]float64, len(m.endpoints))
	for _, e := range m.endpoints {
		own[e.ID] = 0
	}
	n := len(m.tokens)
	if n == 0 {
		return own
	}
	if n == 1 {
		own[m.endpoints[m.owner[0]].ID] = 1
		return own
	}
	const space = 1 << 64
	for i, t := range m.tokens {
		prev := m.tokens[(i+n-1)%n]
		// The arc (prev, t] modulo 2^64; for i == 0 it wraps past MaxToken.
		size := uint64(t) - uint64(prev)
		own[m.endpoints[m.owner[i]].ID] += float64(size) / space
	}
	return own
}

// Ring returns every token of the ring with its owner, sorted by token.
func (m *Metadata) Ring() []TokenOwner {
	r := make([]TokenOwner, len(m.tokens))
	for i, t := range m.tokens {
		r[i] = TokenOwner{t, m.endpoints[m.owner[i]]}
	}
	return r
}

// DataCenters returns the data centers of the ring's endpoints with the
// number of endpoints in each.
func (m *Metadata) DataCenters() map[string]int {
	dcs := make(map[string]int, len(m.dcNames))
	for i, dc := range m.dcNames {
		dcs[dc] = m.dcEndpoints[i]
	}
	return dcs
}
