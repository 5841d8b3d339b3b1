package sstable

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/bits-and-blooms/bitset"
	"github.com/spaolacci/murmur3"

	"github.com/idemkv/idemkv/row"
)

// maxBloomHashes bounds the number of hash functions a filter may use (and
// that a Filter component may declare).
const maxBloomHashes = 30

// bloom is a Bloom filter over partition keys with Kirsch–Mitzenmacher double
// hashing, as Cassandra's BloomFilter: bit i of a key is
// (h1 + i·h2) mod m, where h1, h2 are the two halves of the key's murmur3
// x64_128 hash.
type bloom struct {
	k    uint32
	m    uint64 // bits; a multiple of 64
	bits *bitset.BitSet
}

// keyHash hashes a key's token (big-endian) and partition bytes.
func keyHash(k row.Key) [2]uint64 {
	var buf [64]byte
	b := binary.BigEndian.AppendUint64(buf[:0], uint64(k.Token))
	b = append(b, k.Partition...)
	h1, h2 := murmur3.Sum128(b)
	return [2]uint64{h1, h2}
}

// bloomSize returns the number of bits and hash functions of the optimal
// filter for n keys at false-positive chance p: m = −n·ln p / (ln 2)², rounded
// up to whole 64-bit words, and k = round(m/n · ln 2).
func bloomSize(n uint64, p float64) (m uint64, k uint32) {
	nf := float64(max(n, 1))
	bits := math.Ceil(-nf * math.Log(p) / (math.Ln2 * math.Ln2))
	m = (uint64(bits) + 63) / 64 * 64
	m = max(m, 64)
	kf := math.Round(float64(m) / nf * math.Ln2)
	k = uint32(min(max(kf, 1), maxBloomHashes))
	return m, k
}

func newBloom(hashes [][2]uint64, p float64) *bloom {
	m, k := bloomSize(uint64(len(hashes)), p)
	f := &bloom{k: k, m: m, bits: bitset.New(uint(m))}
	for _, h := range hashes {
		f.add(h)
	}
	return f
}

func (f *bloom) add(h [2]uint64) {
	for i := uint64(0); i < uint64(f.k); i++ {
		f.bits.Set(uint((h[0] + i*h[1]) % f.m))
	}
}

// mayContain reports false only if the key was never added.
func (f *bloom) mayContain(h [2]uint64) bool {
	for i := uint64(0); i < uint64(f.k); i++ {
		if !f.bits.Test(uint((h[0] + i*h[1]) % f.m)) {
			return false
		}
	}
	return true
}

// encode serializes the filter: u32 k, u64 m, then m/64 big-endian words.
func (f *bloom) encode() []byte {
	words := f.bits.Words()
	b := make([]byte, 0, 12+8*len(words))
	b = appendU32(b, f.k)
	b = appendU64(b, f.m)
	for i := uint64(0); i < f.m/64; i++ {
		var w uint64
		if i < uint64(len(words)) {
			w = words[i]
		}
		b = appendU64(b, w)
	}
	return b
}

func decodeBloom(b []byte) (*bloom, error) {
	d := decoder{b: b}
	k := d.u32("filter hash count")
	m := d.u64("filter bits")
	if d.err != nil {
		return nil, d.err
	}
	if k < 1 || k > maxBloomHashes || m == 0 || m%64 != 0 || m/64 != uint64(len(d.b))/8 || len(d.b)%8 != 0 {
		return nil, fmt.Errorf("%w: filter k=%d m=%d with %d word bytes", ErrCorrupt, k, m, len(d.b))
	}
	words := make([]uint64, m/64)
	for i := range words {
		words[i] = binary.BigEndian.Uint64(d.b[8*i:])
	}
	return &bloom{k: k, m: m, bits: bitset.From(words)}, nil
}
