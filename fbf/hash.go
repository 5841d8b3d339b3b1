package fbf

import (
	"math/bits"

	"github.com/spaolacci/murmur3"
)

// Hash is the 128-bit murmur3 hash of an id. Compute it once with HashID and
// reuse it for several operations (and for several filters with the same
// hashing): the k bit positions of filter j are derived from it by double
// hashing, gᵢ = h1 + i·h2 (i = 0..k−1), reduced to [0, m) by a multiply-shift.
type Hash struct {
	H1, H2 uint64
}

// HashID hashes an id.
func HashID(id []byte) Hash {
	h1, h2 := murmur3.Sum128(id)
	// An even h2 would visit fewer distinct positions for some m; keep it odd.
	return Hash{H1: h1, H2: h2 | 1}
}

// position returns the i-th bit position in [0, m).
func (h Hash) position(i uint64, m uint64) uint64 {
	hi, _ := bits.Mul64(h.H1+i*h.H2, m)
	return hi
}
