package ring

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Full class names of the strategies, as Cassandra's system_schema shows them.
const (
	SimpleStrategyClass          = "org.apache.cassandra.locator.SimpleStrategy"
	NetworkTopologyStrategyClass = "org.apache.cassandra.locator.NetworkTopologyStrategy"
)

// classPrefix is the package Cassandra prepends to a short strategy name.
const classPrefix = "org.apache.cassandra.locator."

// optReplicationFactor is SimpleStrategy's option name.
const optReplicationFactor = "replication_factor"

// Strategy is a keyspace's replication strategy. Implementations are values
// that are safe for concurrent use and must not be modified once in use.
type Strategy interface {
	// Replicas returns the natural replicas of token on m, in the order the
	// ring walk accepted them (Cassandra's order; the primary owner of token
	// first whenever its data center is replicated). It never returns an
	// endpoint twice; when the strategy asks for more replicas than there are
	// endpoints, it returns all the eligible ones.
	Replicas(m *Metadata, token int64) []Endpoint
	// ReplicationFactor returns the total replication factor: the number of
	// replicas asked for, before capping by the number of endpoints.
	ReplicationFactor() int
	// DCFactors returns the replication factor of each data center. A
	// SimpleStrategy is not aware of data centers and returns the single entry
	// "" → RF; use DCFactor for the factor Cassandra applies in a given data
	// center (for SimpleStrategy, RF in every one).
	DCFactors() map[string]int
	// Class returns the strategy's full Java class name, as CQL shows it.
	Class() string
	// Options returns the strategy's replication options as CQL shows them in
	// system_schema.keyspaces.replication, without the "class" entry (see
	// Replication).
	Options() map[string]string
}

// DCFactor returns the replication factor s applies in data center dc, the
// way Cassandra's LOCAL_QUORUM and EACH_QUORUM compute it: for a strategy that
// is not data-center aware (DCFactors is the single entry ""), its total
// factor; otherwise the data center's own factor, 0 when it is not listed.
func DCFactor(s Strategy, dc string) int {
	if ss, ok := s.(SimpleStrategy); ok { // asked on every write: no map
		return max(ss.RF, 0)
	}
	f := s.DCFactors()
	if rf, ok := f[""]; ok && len(f) == 1 {
		return max(rf, 0)
	}
	return max(f[dc], 0)
}

// Replication returns the full replication map of s as
// system_schema.keyspaces shows it: Options plus "class" → Class.
func Replication(s Strategy) map[string]string {
	r := s.Options()
	r["class"] = s.Class()
	return r
}

// SimpleStrategy places the replicas of a token on the first RF distinct
// endpoints met walking the ring clockwise from the token, ignoring data
// centers and racks. An RF of 0 or less gives no replicas.
type SimpleStrategy struct{ RF int }

// Replicas implements Strategy.
func (s SimpleStrategy) Replicas(m *Metadata, token int64) []Endpoint {
	n := len(m.tokens)
	want := min(s.RF, len(m.endpoints))
	if n == 0 || want <= 0 {
		return nil
	}
	out := make([]Endpoint, 0, want)
	var buf [4]uint64
	seen := newBitset(buf[:], len(m.endpoints))
	i := m.first(token)
	// One lap of the ring meets every endpoint, so the loop always stops on
	// len(out) == want; k < n only bounds it.
	for k := 0; k < n && len(out) < want; k++ {
		ep := m.owner[i]
		if !seen.has(ep) {
			seen.set(ep)
			out = append(out, m.endpoints[ep])
		}
		if i++; i == n {
			i = 0
		}
	}
	return out
}

// ReplicationFactor implements Strategy.
func (s SimpleStrategy) ReplicationFactor() int { return max(s.RF, 0) }

// DCFactors implements Strategy: the single entry "" → RF, since a
// SimpleStrategy does not know data centers.
func (s SimpleStrategy) DCFactors() map[string]int { return map[string]int{"": max(s.RF, 0)} }

// Class implements Strategy.
func (s SimpleStrategy) Class() string { return SimpleStrategyClass }

// Options implements Strategy: {"replication_factor": "RF"}.
func (s SimpleStrategy) Options() map[string]string {
	return map[string]string{optReplicationFactor: strconv.Itoa(s.RF)}
}

// String returns the strategy as CQL would write it.
func (s SimpleStrategy) String() string { return replicationString(s) }

// NetworkTopologyStrategy places DCs[dc] replicas in each data center dc. It
// walks the ring clockwise from the token and, within each data center, takes
// the first endpoint of every rack not used yet; an endpoint of a rack already
// used is taken only while the data center still has rack repeats to give
// (its RF minus its number of racks), so replicas spread over as many racks as
// possible. A data center stops at its RF or at all its endpoints. This is
// Cassandra's calculateNaturalEndpoints as rewritten around
// DatacenterEndpoints (3.x, kept in 4.x and 5.0). The older algorithm, which
// skips rack repeats until every rack has a replica and then takes the skipped
// endpoints, chooses the same set of replicas; only the position of the rack
// repeats in the list differs (here they come in ring-walk order).
//
// Data centers absent from the ring, or with a factor of 0 or less, get no
// replicas. The DCs map must not be modified once the strategy is in use.
type NetworkTopologyStrategy struct{ DCs map[string]int }

// maxStackDCs is the number of data centers Replicas keeps on the stack.
const maxStackDCs = 8

// Replicas implements Strategy.
func (s NetworkTopologyStrategy) Replicas(m *Metadata, token int64) []Endpoint {
	n := len(m.tokens)
	if n == 0 {
		return nil
	}
	// left[d] is the number of replicas data center d still needs, repeats[d]
	// the number of rack repeats it may still take.
	var leftBuf, repeatsBuf [maxStackDCs]int
	var left, repeats []int
	if nd := len(m.dcNames); nd <= maxStackDCs {
		left, repeats = leftBuf[:nd], repeatsBuf[:nd]
	} else {
		left, repeats = make([]int, nd), make([]int, nd)
	}
	total, dcsToFill := 0, 0
	// Look the ring's data centers up in DCs rather than range over DCs: a
	// map range costs more than a few lookups.
	for d, dc := range m.dcNames {
		rf := s.DCs[dc]
		if rf <= 0 {
			continue
		}
		left[d] = min(rf, m.dcEndpoints[d])
		repeats[d] = rf - m.dcRacks[d]
		total += left[d]
		dcsToFill++
	}
	if dcsToFill == 0 {
		return nil
	}
	out := make([]Endpoint, 0, total)
	var epBuf, rackBuf [4]uint64
	isReplica := newBitset(epBuf[:], len(m.endpoints))
	rackUsed := newBitset(rackBuf[:], m.numRacks)
	i := m.first(token)
	// One lap meets every endpoint, hence every rack, so every data center is
	// filled by then: each takes its racks' first endpoints and then enough
	// repeats (repeats >= left - racks); k < n only bounds the loop.
	for k := 0; k < n && dcsToFill > 0; k++ {
		ep := m.owner[i]
		if i++; i == n {
			i = 0
		}
		d := m.epDC[ep]
		if left[d] == 0 {
			continue // not replicated here, or already filled
		}
		if r := m.epRack[ep]; !rackUsed.has(r) {
			rackUsed.set(r) // a new rack: its endpoint cannot be a replica yet
		} else if repeats[d] <= 0 || isReplica.has(ep) {
			continue
		} else {
			repeats[d]--
		}
		isReplica.set(ep)
		out = append(out, m.endpoints[ep])
		if left[d]--; left[d] == 0 {
			dcsToFill--
		}
	}
	return out
}

// ReplicationFactor implements Strategy: the sum of the positive per-DC
// factors.
func (s NetworkTopologyStrategy) ReplicationFactor() int {
	total := 0
	for _, rf := range s.DCs {
		total += max(rf, 0)
	}
	return total
}

// DCFactors implements Strategy: a copy of DCs.
func (s NetworkTopologyStrategy) DCFactors() map[string]int { return maps.Clone(s.DCs) }

// Class implements Strategy.
func (s NetworkTopologyStrategy) Class() string { return NetworkTopologyStrategyClass }

// Options implements Strategy: each data center with its factor.
func (s NetworkTopologyStrategy) Options() map[string]string {
	o := make(map[string]string, len(s.DCs))
	for dc, rf := range s.DCs {
		o[dc] = strconv.Itoa(rf)
	}
	return o
}

// String returns the strategy as CQL would write it.
func (s NetworkTopologyStrategy) String() string { return replicationString(s) }

// replicationString writes s's replication map in CQL syntax, keys sorted
// with "class" first.
func replicationString(s Strategy) string {
	o := s.Options()
	var b strings.Builder
	b.WriteString("{'class': '")
	b.WriteString(s.Class())
	b.WriteByte('\'')
	for _, k := range slices.Sorted(maps.Keys(o)) {
		fmt.Fprintf(&b, ", '%s': '%s'", k, o[k])
	}
	b.WriteByte('}')
	return b.String()
}

// ErrStrategy is wrapped by every error ParseStrategy returns.
var ErrStrategy = errors.New("ring: bad replication")

// ParseStrategy builds a strategy from a CQL replication map: class is
// "SimpleStrategy" or "NetworkTopologyStrategy", short or with Cassandra's
// package (org.apache.cassandra.locator.), and options holds the other
// entries. An options entry "class", as the full CQL map has, is accepted when
// it names the same strategy.
//
// SimpleStrategy requires "replication_factor", an integer >= 1, and no other
// option. NetworkTopologyStrategy takes data center names to integers >= 0,
// at least one of them >= 1; Cassandra 4's "replication_factor" shorthand for
// every data center is refused, since the data centers are not known here.
// Transient replication ("3/1") is not supported. Errors wrap ErrStrategy.
func ParseStrategy(class string, options map[string]string) (Strategy, error) {
	name, err := strategyName(class)
	if err != nil {
		return nil, err
	}
	if c, ok := options["class"]; ok {
		other, err := strategyName(c)
		if err != nil {
			return nil, err
		}
		if other != name {
			return nil, fmt.Errorf("%w: class %q and options class %q disagree", ErrStrategy, class, c)
		}
	}
	switch name {
	case "SimpleStrategy":
		v, ok := options[optReplicationFactor]
		if !ok {
			return nil, fmt.Errorf("%w: SimpleStrategy requires a replication_factor option", ErrStrategy)
		}
		for k := range options {
			if k != optReplicationFactor && k != "class" {
				return nil, fmt.Errorf("%w: unrecognized option %q for SimpleStrategy (only replication_factor)", ErrStrategy, k)
			}
		}
		rf, err := parseRF("SimpleStrategy replication_factor", v)
		if err != nil {
			return nil, err
		}
		if rf == 0 {
			return nil, fmt.Errorf("%w: SimpleStrategy replication_factor must be at least 1, got 0", ErrStrategy)
		}
		return SimpleStrategy{RF: rf}, nil
	default: // NetworkTopologyStrategy
		dcs := make(map[string]int, len(options))
		total := 0
		for k, v := range options {
			switch {
			case k == "class":
				continue
			case strings.EqualFold(k, optReplicationFactor):
				return nil, fmt.Errorf("%w: NetworkTopologyStrategy takes a factor per data center ('dc1': '3'), not %s", ErrStrategy, k)
			case k == "":
				return nil, fmt.Errorf("%w: NetworkTopologyStrategy option with an empty data center name", ErrStrategy)
			}
			rf, err := parseRF(fmt.Sprintf("NetworkTopologyStrategy factor of data center %q", k), v)
			if err != nil {
				return nil, err
			}
			dcs[k] = rf
			total += rf
		}
		if total == 0 {
			return nil, fmt.Errorf("%w: NetworkTopologyStrategy needs a data center with a replication factor of at least 1", ErrStrategy)
		}
		return NetworkTopologyStrategy{DCs: dcs}, nil
	}
}

// strategyName returns the short name of a supported class.
func strategyName(class string) (string, error) {
	short := strings.TrimPrefix(class, classPrefix)
	switch short {
	case "SimpleStrategy", "NetworkTopologyStrategy":
		return short, nil
	case "":
		return "", fmt.Errorf("%w: missing replication class", ErrStrategy)
	case "LocalStrategy", "EverywhereStrategy", "OldNetworkTopologyStrategy":
		return "", fmt.Errorf("%w: replication class %q is not supported (SimpleStrategy or NetworkTopologyStrategy)", ErrStrategy, class)
	}
	return "", fmt.Errorf("%w: unknown replication class %q (SimpleStrategy or NetworkTopologyStrategy)", ErrStrategy, class)
}

// parseRF parses a replication factor: a decimal integer in [0, MaxInt32].
func parseRF(what, v string) (int, error) {
	rf, err := strconv.Atoi(v)
	if err != nil {
		if strings.Contains(v, "/") {
			return 0, fmt.Errorf("%w: %s is %q: transient replication is not supported", ErrStrategy, what, v)
		}
		return 0, fmt.Errorf("%w: %s is %q, not an integer", ErrStrategy, what, v)
	}
	if rf < 0 {
		return 0, fmt.Errorf("%w: %s must be non-negative, got %d", ErrStrategy, what, rf)
	}
	if rf > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s is too large: %d", ErrStrategy, what, rf)
	}
	return rf, nil
}

// bitset is a set of small non-negative integers.
type bitset []uint64

// newBitset returns an empty set for [0, n), in buf when it is large enough.
func newBitset(buf []uint64, n int) bitset {
	w := (n + 63) / 64
	if w <= len(buf) {
		b := buf[:w]
		clear(b)
		return b
	}
	return make(bitset, w)
}

func (b bitset) has(i int32) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b bitset) set(i int32)      { b[i>>6] |= 1 << (uint(i) & 63) }
