package coordinator

import (
	"fmt"
	"strings"

	"github.com/idemkv/idemkv/ring"
)

// ConsistencyLevel is a CQL consistency level; its values are the native
// protocol's codes.
type ConsistencyLevel uint16

// The consistency levels, with the native protocol's codes.
const (
	Any         ConsistencyLevel = 0x0000
	One         ConsistencyLevel = 0x0001
	Two         ConsistencyLevel = 0x0002
	Three       ConsistencyLevel = 0x0003
	Quorum      ConsistencyLevel = 0x0004
	All         ConsistencyLevel = 0x0005
	LocalQuorum ConsistencyLevel = 0x0006
	EachQuorum  ConsistencyLevel = 0x0007
	Serial      ConsistencyLevel = 0x0008
	LocalSerial ConsistencyLevel = 0x0009
	LocalOne    ConsistencyLevel = 0x000A
)

var clNames = map[ConsistencyLevel]string{
	Any: "ANY", One: "ONE", Two: "TWO", Three: "THREE", Quorum: "QUORUM", All: "ALL",
	LocalQuorum: "LOCAL_QUORUM", EachQuorum: "EACH_QUORUM", Serial: "SERIAL",
	LocalSerial: "LOCAL_SERIAL", LocalOne: "LOCAL_ONE",
}

func (cl ConsistencyLevel) String() string {
	if n, ok := clNames[cl]; ok {
		return n
	}
	return fmt.Sprintf("CL(%d)", uint16(cl))
}

// ParseConsistencyLevel reads a level's name, case-insensitively.
func ParseConsistencyLevel(s string) (ConsistencyLevel, error) {
	for cl, n := range clNames {
		if strings.EqualFold(n, s) {
			return cl, nil
		}
	}
	return 0, fmt.Errorf("unknown consistency level %q", s)
}

// isLocal reports whether the level counts only the coordinator's data center.
func (cl ConsistencyLevel) isLocal() bool { return cl == LocalOne || cl == LocalQuorum }

// validateCounterWrite refuses the levels Cassandra refuses for counters.
func validateCounterWrite(cl ConsistencyLevel) error {
	switch cl {
	case Any:
		return &InvalidError{Msg: "Consistency level ANY is not yet supported for counter table"}
	case Serial, LocalSerial:
		return &InvalidError{Msg: "Counter operations are inherently non-serializable"}
	case One, Two, Three, Quorum, All, LocalQuorum, EachQuorum, LocalOne:
		return nil
	}
	return &InvalidError{Msg: fmt.Sprintf("unknown consistency level %d", uint16(cl))}
}

// validateRead refuses the levels Cassandra refuses for reads.
func validateRead(cl ConsistencyLevel) error {
	switch cl {
	case Any:
		return &InvalidError{Msg: "ANY ConsistencyLevel is only supported for writes"}
	case Serial, LocalSerial:
		return &InvalidError{Msg: "SERIAL reads are not supported (no lightweight transactions in idemkv)"}
	case One, Two, Three, Quorum, All, LocalQuorum, EachQuorum, LocalOne:
		return nil
	}
	return &InvalidError{Msg: fmt.Sprintf("unknown consistency level %d", uint16(cl))}
}

func quorumOf(n int) int { return n/2 + 1 }

// requirement is what a consistency level needs of a replica set: acks from
// replicas that count (all, or those of one DC), and for EACH_QUORUM a quorum
// in every data center.
type requirement struct {
	cl       ConsistencyLevel
	localDC  string
	blockFor int            // acks needed in total (for EACH_QUORUM, the sum)
	perDC    map[string]int // EACH_QUORUM only
}

func newRequirement(cl ConsistencyLevel, s ring.Strategy, localDC string) requirement {
	req := requirement{cl: cl, localDC: localDC}
	rf := s.ReplicationFactor()
	localRF := ring.DCFactor(s, localDC)
	switch cl {
	case One, LocalOne:
		req.blockFor = 1
	case Two:
		req.blockFor = 2
	case Three:
		req.blockFor = 3
	case Quorum:
		req.blockFor = quorumOf(rf)
	case All:
		req.blockFor = rf
	case LocalQuorum:
		req.blockFor = quorumOf(localRF)
	case EachQuorum:
		if isSimple(s) {
			req.blockFor = quorumOf(rf) // Cassandra treats EACH_QUORUM as QUORUM without NTS
			req.cl = Quorum
			break
		}
		req.perDC = map[string]int{}
		for dc, n := range s.DCFactors() {
			if n > 0 {
				req.perDC[dc] = quorumOf(n)
				req.blockFor += quorumOf(n)
			}
		}
	}
	return req
}

// order puts first, for EACH_QUORUM, a quorum of each data center's
// candidates (keeping their order), so that a read asking the first
// blockFor candidates asks a quorum in every data center, as Cassandra's
// EACH_QUORUM reads do (Cassandra 4.0+); other levels keep the order.
func (r requirement) order(cands []ring.Endpoint) []ring.Endpoint {
	if r.perDC == nil {
		return cands
	}
	taken := map[string]int{}
	first := make([]ring.Endpoint, 0, len(cands))
	var rest []ring.Endpoint
	for _, e := range cands {
		if taken[e.DC] < r.perDC[e.DC] {
			taken[e.DC]++
			first = append(first, e)
		} else {
			rest = append(rest, e)
		}
	}
	return append(first, rest...)
}

func isSimple(s ring.Strategy) bool {
	_, ok := s.(ring.SimpleStrategy)
	if !ok {
		_, ok = s.(*ring.SimpleStrategy)
	}
	return ok
}

// counts reports whether an ack from a replica in dc counts toward the level.
func (r requirement) counts(dc string) bool {
	if r.cl.isLocal() {
		return dc == r.localDC
	}
	return true
}

// tally accumulates acks, and for EACH_QUORUM their data centers (the
// other levels count a total only: no map to make per write).
type tally struct {
	req   requirement
	total int
	byDC  map[string]int // EACH_QUORUM only
}

func (r requirement) newTally() *tally {
	t := &tally{req: r}
	if r.perDC != nil {
		t.byDC = map[string]int{}
	}
	return t
}

func (t *tally) add(dc string) {
	if t.req.counts(dc) {
		t.total++
		if t.byDC != nil {
			t.byDC[dc]++
		}
	}
}

func (t *tally) met() bool {
	if t.req.perDC != nil {
		for dc, n := range t.req.perDC {
			if t.byDC[dc] < n {
				return false
			}
		}
		return true
	}
	return t.total >= t.req.blockFor
}

// sufficient checks that the live replicas can meet the level, and returns
// the Unavailable error Cassandra would send otherwise.
func (r requirement) sufficient(live []ring.Endpoint) error {
	t := r.newTally()
	for _, e := range live {
		t.add(e.DC)
	}
	if r.perDC != nil {
		for dc, n := range r.perDC {
			if t.byDC[dc] < n {
				return &UnavailableError{CL: r.cl, Required: n, Alive: t.byDC[dc]}
			}
		}
		return nil
	}
	if t.total < r.blockFor {
		return &UnavailableError{CL: r.cl, Required: r.blockFor, Alive: t.total}
	}
	return nil
}
