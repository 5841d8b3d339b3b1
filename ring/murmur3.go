package ring

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// MinToken is the token no key maps to: Cassandra's Murmur3Partitioner.MINIMUM.
const MinToken = math.MinInt64

// MaxToken is the largest token.
const MaxToken = math.MaxInt64

// Token returns the token Cassandra's Murmur3Partitioner gives a serialized
// partition key: the first 64-bit half of Cassandra's MurmurHash3 x64_128
// variant with seed 0, with MinToken mapped to MaxToken. The empty key has
// MinToken.
func Token(key []byte) int64 {
	if len(key) == 0 {
		return MinToken
	}
	h1, _ := cassandraMurmur3(key)
	t := int64(h1)
	if t == math.MinInt64 {
		return math.MaxInt64
	}
	return t
}

const (
	c1 = 0x87c37b91114253d5
	c2 = 0x4cf5ad432745937f
)

// cassandraMurmur3 is MurmurHash3 x64_128 with seed 0 as Cassandra computes
// it: body blocks are read as unsigned little-endian words like the standard,
// but tail bytes are sign-extended before they are shifted into place (Java's
// byte is signed and Cassandra's code has no & 0xff there). The result differs
// from the standard hash only for keys with a byte ≥ 0x80 in the tail.
func cassandraMurmur3(key []byte) (h1, h2 uint64) {
	n := len(key)
	nblocks := n / 16
	for i := 0; i < nblocks; i++ {
		k1 := binary.LittleEndian.Uint64(key[i*16:])
		k2 := binary.LittleEndian.Uint64(key[i*16+8:])

		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
		h1 = bits.RotateLeft64(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729

		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
		h2 = bits.RotateLeft64(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}

	tail := key[nblocks*16:]
	// signed widens a byte the way Java's (long) cast of a byte does.
	signed := func(b byte) uint64 { return uint64(int64(int8(b))) }
	var k1, k2 uint64
	for i := len(tail) - 1; i >= 8; i-- {
		k2 ^= signed(tail[i]) << (8 * uint(i-8))
	}
	if len(tail) > 8 {
		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
	}
	for i := min(len(tail), 8) - 1; i >= 0; i-- {
		k1 ^= signed(tail[i]) << (8 * uint(i))
	}
	if len(tail) > 0 {
		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
	}

	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
