package bench

import (
	"fmt"
	"math/rand/v2"
)

// Key distributions of a Workload.
const (
	DistUniform = "uniform" // every key equally likely
	DistZipf    = "zipf"    // key i with probability ∝ 1/(1+i)^s (seeded)
	DistHot     = "hot"     // one hot key: every update goes to key 0
)

// Workload is what the operations of a run look like: which keys they
// touch, how many updates an operation carries and by how much each one
// increments its counter. The same workload and seed give every counter
// mode the same stream of operations.
type Workload struct {
	Keys     int     // distinct keys (ignored by DistHot)
	Dist     string  // DistUniform (default), DistZipf or DistHot
	ZipfS    float64 // Zipf exponent s > 1 (default 1.1)
	Batch    int     // updates per operation: 1 is a single UPDATE, more a COUNTER BATCH
	DeltaMax int64   // each update adds a delta drawn uniformly in [1, DeltaMax] (default 1)
}

func (w Workload) withDefaults() Workload {
	if w.Keys < 1 {
		w.Keys = 1
	}
	if w.Dist == "" {
		w.Dist = DistUniform
	}
	if w.ZipfS <= 1 {
		w.ZipfS = 1.1
	}
	if w.Batch < 1 {
		w.Batch = 1
	}
	if w.DeltaMax < 1 {
		w.DeltaMax = 1
	}
	return w
}

// Validate reports a workload the generator cannot run.
func (w Workload) Validate() error {
	switch w.Dist {
	case "", DistUniform, DistZipf, DistHot:
	default:
		return fmt.Errorf("bench: key distribution %q: want %s, %s or %s", w.Dist, DistUniform, DistZipf, DistHot)
	}
	if w.Keys < 0 || w.Batch < 0 || w.DeltaMax < 0 {
		return fmt.Errorf("bench: keys, batch and delta must not be negative")
	}
	return nil
}

// Update is one counter increment: key index and delta.
type Update struct {
	Key   int
	Delta int64
}

// Op is one operation of the stream: a single update or a batch. Every
// attempt of an op carries the same op id.
type Op struct {
	Updates []Update
}

// Stream is one client's deterministic sequence of operations: the i-th
// op of client c under seed s is the same in every mode and every run.
type Stream struct {
	w    Workload
	rng  *rand.Rand
	zipf *rand.Zipf
}

// NewStream returns client's stream of operations under seed.
func NewStream(seed uint64, client int, w Workload) *Stream {
	w = w.withDefaults()
	s := &Stream{w: w, rng: rand.New(rand.NewPCG(seed, 0x5712ea<<20|uint64(client)))}
	if w.Dist == DistZipf {
		s.zipf = rand.NewZipf(s.rng, w.ZipfS, 1, uint64(w.Keys-1))
	}
	return s
}

// Next returns the stream's next operation.
func (s *Stream) Next() Op {
	op := Op{Updates: make([]Update, s.w.Batch)}
	for i := range op.Updates {
		var k int
		switch s.w.Dist {
		case DistZipf:
			k = int(s.zipf.Uint64())
		case DistHot:
			k = 0
		default:
			k = s.rng.IntN(s.w.Keys)
		}
		op.Updates[i] = Update{Key: k, Delta: 1 + s.rng.Int64N(s.w.DeltaMax)}
	}
	return op
}
