package fbf

import (
	"math"
	"math/bits"
)

// The tables of the aging filter are semi-sorted (Fan et al., CoNEXT 2014,
// §5.2): the 4 slots of a bucket are kept in order of their values' 4 high
// bits (the prefixes), so that the prefixes are a multiset of 4 of 16
// values; there are C(19, 4) = 3876 of them, which a 12-bit code tells
// instead of the 16 bits of 4 prefixes: 1 bit a slot saved.
const (
	// agingPrefixBits is the high bits of a slot value that the bucket's
	// code holds.
	agingPrefixBits = 4
	// agingCodeBits is the width of a bucket's code of its 4 prefixes.
	agingCodeBits = 12
	// agingCodes is the number of codes: the multisets of 4 prefixes.
	agingCodes = 3876
)

// agingDecode maps a bucket's code to its 4 sorted prefixes, packed 4 bits
// each, the least in the low bits (its 2^12 entries spare the lookups a
// bounds check; the 220 past agingCodes are never used).
var agingDecode [1 << agingCodeBits]uint16

// Binomial coefficients C(n, k) for k = 2, 3, 4 of the combinatorial number
// system that ranks the multisets.
var agingBinom [5][19]uint16

func init() {
	for n := range 19 {
		for k := 2; k <= 4; k++ {
			c := 1
			for j := range k {
				c = c * (n - j) / (j + 1)
			}
			agingBinom[k][n] = uint16(max(c, 0))
		}
	}
	for p3 := range uint16(16) {
		for p2 := range p3 + 1 {
			for p1 := range p2 + 1 {
				for p0 := range p1 + 1 {
					agingDecode[agingEncode(p0, p1, p2, p3)] = p0 | p1<<4 | p2<<8 | p3<<12
				}
			}
		}
	}
}

// agingEncode is the code of the sorted prefixes p0 ≤ p1 ≤ p2 ≤ p3: the
// rank of the strictly increasing p0 < p1+1 < p2+2 < p3+3 in 0..18 in the
// combinatorial number system, C(p3+3, 4) + C(p2+2, 3) + C(p1+1, 2) + p0,
// 0 for an empty bucket.
func agingEncode(p0, p1, p2, p3 uint16) uint16 {
	return agingBinom[4][p3+3] + agingBinom[3][p2+2] + agingBinom[2][p1+1] + p0
}

// agingTable is a cuckoo table of nb buckets of AgingBucketSlots slots in
// words, packed (see aging_packed.go) or semi-sorted, guarded by its
// shard's lock.
//
// A slot's value is v = fingerprint << AgingTagBits | epoch tag, s = f +
// AgingTagBits bits, cut into its prefix (its 4 high bits) and its
// remainder (its s − 4 low bits). A fingerprint's f − 4 low bits are never
// all 0, so a slot whose remainder is 0 is empty, whatever its prefix.
//
// A semi-sorted bucket is bb = agingCodeBits + 4·(s − agingPrefixBits) =
// 4·(f + 2) bits at bit i·bb of the little-endian words: the code of the
// prefixes of its 4 slots, then their 4 remainders, slot 0 first. The
// slots are in order of prefixes (among the slots of one prefix, any
// order: a bucket is a multiset, the position of a value in it means
// nothing); an expired slot is emptied by zeroing its remainder alone, its
// prefix left in place; an empty bucket is all zeros.
type agingTable struct {
	// 64 bytes, one cache line: a test-and-add reads its table's fields
	// before its buckets, in one of up to 1024 shards.
	words []uint64
	nb    uint64
	bb    uint64 // bucket bits
	smask uint64 // 2^s − 1: a packed slot
	live  int64  // occupied slots
	f     uint8  // fingerprint bits
	r     uint8  // remainder bits: f + AgingTagBits − agingPrefixBits
	s     uint8  // slot bits, f + AgingTagBits: a packed table's slot k is at bit k·s
	// semi: the buckets are semi-sorted, else packed (see aging_packed.go);
	// fast: semi-sorted buckets of at most 128 bits (f ≤ agingFastBits),
	// read and written whole, in registers.
	semi, fast bool
}

// agingBucketBits is bb, the bits of a bucket of fingerprints of f bits,
// semi-sorted or packed.
func agingBucketBits(f uint, semi bool) uint64 {
	if !semi {
		return AgingBucketSlots * uint64(f+AgingTagBits)
	}
	return agingCodeBits + AgingBucketSlots*uint64(f+AgingTagBits-agingPrefixBits)
}

// agingFingerprints is the number of fingerprints of f bits: 16 prefixes
// times the 2^(f−4) − 1 low bits that are not all 0.
func agingFingerprints(f uint) float64 {
	return (1 << agingPrefixBits) * (math.Exp2(float64(f-agingPrefixBits)) - 1)
}

// agingFastBits is the widest fingerprint of a bucket of at most 128 bits.
const agingFastBits = (128-agingCodeBits)/AgingBucketSlots + agingPrefixBits - AgingTagBits

// tableBytes is the memory of a table of nb buckets of f-bit fingerprints:
// the buckets and two words of padding (a bucket's 128 bits are read
// through 3 words).
func tableBytes(nb uint64, f uint, semi bool) int64 {
	return int64((nb*agingBucketBits(f, semi)+63)/64+2) * 8
}

// newAgingTable returns an empty table of nb buckets of f-bit fingerprints.
func newAgingTable(nb uint64, f uint, semi bool) *agingTable {
	return newAgingTableIn(nb, f, semi, make([]uint64, tableBytes(nb, f, semi)/8))
}

// newAgingTableIn is newAgingTable on zeroed words of tableBytes(nb, f,
// semi). f is at least agingPrefixBits + 1.
func newAgingTableIn(nb uint64, f uint, semi bool, words []uint64) *agingTable {
	return &agingTable{nb: nb, f: uint8(f), r: uint8(f + AgingTagBits - agingPrefixBits), s: uint8(f + AgingTagBits),
		bb: agingBucketBits(f, semi), smask: 1<<(f+AgingTagBits) - 1, fast: semi && f <= agingFastBits, semi: semi, words: words}
}

// fpLow is 2^(f − agingPrefixBits) − 1, the mask of a fingerprint's low
// bits.
func (t *agingTable) fpLow() uint64 { return 1<<(t.f-agingPrefixBits) - 1 }

// remMax is the mask of a remainder's r bits.
func (t *agingTable) remMax() uint64 { return 1<<t.r - 1 }

// fingerprint is the table's fingerprint of an id, from the second half of
// its hash: its prefix from the 4 high bits, its f − 4 low bits in
// 1..2^(f−4)−1 from the next ones.
func (t *agingTable) fingerprint(h2 uint64) uint64 {
	low, _ := bits.Mul64(h2<<agingPrefixBits, t.fpLow())
	return h2>>(64-agingPrefixBits)<<(t.f-agingPrefixBits) | (low + 1)
}

func (t *agingTable) bytes() int64 { return int64(len(t.words)) * 8 }

// bits is the bits of the table's buckets.
func (t *agingTable) bits() uint64 { return t.nb * t.bb }

// empty reports whether slot value v is an empty slot.
func (t *agingTable) empty(v uint64) bool { return v&t.remMax() == 0 }

// read returns the n < 64 bits at bit off. It reads the next word only
// when they straddle two: a needless read may cost a cache miss.
func (t *agingTable) read(off uint64, n uint) uint64 {
	w, b := off>>6, off&63
	v := t.words[w] >> b
	if b+uint64(n) > 64 {
		v |= t.words[w+1] << (64 - b)
	}
	return v & (1<<n - 1)
}

// write writes v, of n < 64 bits, at bit off.
func (t *agingTable) write(off uint64, n uint, v uint64) {
	mask := uint64(1)<<n - 1
	w, b := off>>6, off&63
	t.words[w] = t.words[w]&^(mask<<b) | v<<b
	if b+uint64(n) > 64 {
		r := 64 - b
		t.words[w+1] = t.words[w+1]&^(mask>>r) | v>>r
	}
}

// bucket is the 4 slot values of a bucket, in the bucket's order when
// loaded (see agingTable).
type bucket [AgingBucketSlots]uint64

// window returns bits of the bucket at bit off, lo the first 64 of them
// and hi the next (those past the bucket are not zeroed). It reads the
// words the bucket spans, no more: a needless read may cost a cache miss.
func (t *agingTable) window(off uint64) (lo, hi uint64) {
	w, b := t.words[off>>6:off>>6+3], off&63
	lo = w[0] >> b
	if b+t.bb > 64 { // then b > 0
		lo |= w[1] << (64 - b)
		hi = w[1] >> b
		if b+t.bb > 128 {
			hi |= w[2] << (64 - b)
		}
	}
	return lo, hi
}

// writeWindow writes the bucket at bit off from the bits lo, hi (those
// past the bucket's bb ignored). Only the words the bucket spans are
// written: a needless write may cost a cache miss.
func (t *agingTable) writeWindow(off, lo, hi uint64) {
	// The bucket's bits as a 128-bit mask.
	mlo, mhi := ^uint64(0), ^uint64(0)
	switch {
	case t.bb < 64:
		mlo, mhi = uint64(1)<<t.bb-1, 0
	case t.bb < 128:
		mhi = uint64(1)<<(t.bb-64) - 1
	}
	lo, hi = lo&mlo, hi&mhi
	w, s := t.words[off>>6:off>>6+3], off&63
	w[0] = w[0]&^(mlo<<s) | lo<<s
	if s+t.bb > 64 { // then s > 0
		r := 64 - s
		w[1] = w[1]&^(mlo>>r|mhi<<s) | lo>>r | hi<<s
		if s+t.bb > 128 {
			w[2] = w[2]&^(mhi>>r) | hi>>r
		}
	}
}

// unpack cuts the bits lo, hi of a bucket into its prefixes (4 nibbles,
// packed as in agingDecode) and its remainders.
func (t *agingTable) unpack(lo, hi uint64) (p uint64, x [AgingBucketSlots]uint64) {
	return uint64(agingDecode[lo&(1<<agingCodeBits-1)]), t.remainders(lo, hi)
}

// remainders returns the remainders of the bucket of bits lo, hi.
func (t *agingTable) remainders(lo, hi uint64) (x [AgingBucketSlots]uint64) {
	lo, hi = lo>>agingCodeBits|hi<<(64-agingCodeBits), hi>>agingCodeBits
	// Shift counts masked to 63, so that they compile to bare shifts.
	r, rc, m := t.r&63, (64-t.r)&63, t.remMax()
	x[0] = lo & m
	lo, hi = lo>>r|hi<<rc, hi>>r
	x[1] = lo & m
	lo, hi = lo>>r|hi<<rc, hi>>r
	x[2] = lo & m
	x[3] = (lo>>r | hi<<rc) & m
	return x
}

// pack is the bits of the bucket of prefixes p, in order, and remainders
// x: the inverse of unpack.
func (t *agingTable) pack(p uint64, x [AgingBucketSlots]uint64) (lo, hi uint64) {
	r, rc := t.r&63, (64-t.r)&63
	lo = x[3]
	lo, hi = lo<<r|x[2], lo>>rc
	lo, hi = lo<<r|x[1], hi<<r|lo>>rc
	lo, hi = lo<<r|x[0], hi<<r|lo>>rc
	code := uint64(agingEncode(uint16(p&15), uint16(p>>4&15), uint16(p>>8&15), uint16(p>>12)))
	return lo<<agingCodeBits | code, hi<<agingCodeBits | lo>>(64-agingCodeBits)
}

// load returns the values of bucket i, in its order (prefixes ascending).
func (t *agingTable) load(i uint64) bucket {
	if !t.semi {
		return t.loadPacked(i)
	}
	if !t.fast {
		return t.loadSlow(i)
	}
	p, x := t.unpack(t.window(i * t.bb))
	r := t.r & 63
	return bucket{p&15<<r | x[0], p>>4&15<<r | x[1], p>>8&15<<r | x[2], p>>12<<r | x[3]}
}

// loadSlow is load for buckets wider than 128 bits, a field at a time.
func (t *agingTable) loadSlow(i uint64) bucket {
	off := i * t.bb
	p := uint64(agingDecode[t.read(off, agingCodeBits)])
	off += agingCodeBits
	var b bucket
	for j := range b {
		b[j] = p>>(4*j)&15<<t.r | t.read(off, uint(t.r))
		off += uint64(t.r)
	}
	return b
}

// store writes the values b to bucket i, in an order of prefixes (see
// agingTable): ascending will do.
func (t *agingTable) store(i uint64, b bucket) {
	if !t.semi {
		t.storePacked(i, b)
		return
	}
	if !t.fast {
		t.storeSlow(i, b)
		return
	}
	r, m := t.r&63, t.remMax()
	p := b[0]>>r | b[1]>>r<<4 | b[2]>>r<<8 | b[3]>>r<<12
	lo, hi := t.pack(p, [AgingBucketSlots]uint64{b[0] & m, b[1] & m, b[2] & m, b[3] & m})
	t.writeWindow(i*t.bb, lo, hi)
}

// storeSlow is store for buckets wider than 128 bits, a field at a time.
func (t *agingTable) storeSlow(i uint64, b bucket) {
	off := i * t.bb
	t.write(off, agingCodeBits, uint64(agingEncode(uint16(b[0]>>t.r), uint16(b[1]>>t.r), uint16(b[2]>>t.r), uint16(b[3]>>t.r))))
	off += agingCodeBits
	for _, v := range b {
		t.write(off, uint(t.r), v&t.remMax())
		off += uint64(t.r)
	}
}

// put replaces b[j] with v and sorts b ascending (an order store takes).
func (b *bucket) put(j int, v uint64) {
	b[j] = v
	b.sort()
}

// sort sorts b ascending: a sorting network of 4 (min and max compile to
// conditional moves, no branch to mispredict).
func (b *bucket) sort() {
	b[0], b[1] = min(b[0], b[1]), max(b[0], b[1])
	b[2], b[3] = min(b[2], b[3]), max(b[2], b[3])
	b[0], b[2] = min(b[0], b[2]), max(b[0], b[2])
	b[1], b[3] = min(b[1], b[3]), max(b[1], b[3])
	b[1], b[2] = min(b[1], b[2]), max(b[1], b[2])
}

// splice takes slot j out of a bucket of prefixes p (packed as in
// agingDecode) and remainders x, and puts v in after the slots of a prefix
// at most its own, which keeps the bucket in order of prefixes without
// sorting its values.
func (t *agingTable) splice(p uint64, x *[AgingBucketSlots]uint64, j uint, v uint64) uint64 {
	// Out: the slots after j move down one.
	mj := uint64(1)<<(4*j) - 1
	q := p&mj | p>>4&^mj
	for n := j; n < AgingBucketSlots-1; n++ {
		x[n] = x[n+1]
	}
	// In, at k: the slots from k move up one.
	pv := v >> (t.r & 63)
	k := uint(b2u(q&15 <= pv) + b2u(q>>4&15 <= pv) + b2u(q>>8&15 <= pv))
	mk := uint64(1)<<(4*k) - 1
	for n := uint(AgingBucketSlots - 1); n > k; n-- {
		x[n] = x[n-1]
	}
	x[k&3] = v & t.remMax()
	return q&mk | pv<<(4*k) | (q&^mk)<<4
}

// b2u is 1 for true, 0 for false.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// set puts v (not empty) in slot j of bucket i, in the order load gives,
// and returns the value it held.
func (t *agingTable) set(i uint64, j uint, v uint64) (old uint64) {
	if !t.semi {
		return t.setPacked(i, j, v)
	}
	if !t.fast {
		b := t.load(i)
		old = b[j]
		b.put(int(j), v)
		t.store(i, b)
		return old
	}
	off := i * t.bb
	p, x := t.unpack(t.window(off))
	old = p>>(4*j)&15<<(t.r&63) | x[j&3]
	lo, hi := t.pack(t.splice(p, &x, j, v), x)
	t.writeWindow(off, lo, hi)
	return old
}

// add puts v (not empty) in an empty slot of bucket i, if it has one, and
// reports whether it had.
func (t *agingTable) add(i, v uint64) bool {
	if !t.semi {
		return t.addPacked(i, v)
	}
	return t.addSemi(i, v)
}

// addSemi is add to a semi-sorted table.
func (t *agingTable) addSemi(i, v uint64) bool {
	if !t.fast {
		b := t.load(i)
		for j, old := range b {
			if t.empty(old) {
				b.put(j, v)
				t.store(i, b)
				return true
			}
		}
		return false
	}
	off := i * t.bb
	lo, hi := t.window(off)
	p, x := t.unpack(lo, hi)
	j := uint(AgingBucketSlots)
	for n := range uint(AgingBucketSlots) {
		if x[n] == 0 {
			j = n
			break
		}
	}
	if j == AgingBucketSlots {
		return false
	}
	lo, hi = t.pack(t.splice(p, &x, j, v), x)
	t.writeWindow(off, lo, hi)
	return true
}

// expireAll empties the slots of the table whose epoch tag is in dead (see
// expire), and returns how many it emptied.
func (t *agingTable) expireAll(dead uint64) int64 {
	var n int64
	if !t.semi {
		for k := range t.nb * AgingBucketSlots {
			if v := t.get(k); v != 0 && dead>>(v&AgingEpochs)&1 != 0 {
				t.put(k, 0)
				n++
			}
		}
		return n
	}
	for i := range t.nb {
		n += t.expire(i, dead)
	}
	return n
}

// expire empties the slots of bucket i whose epoch tag is in dead (bit k
// set: tag k), and returns how many it emptied. It zeroes their
// remainders, in place: their prefixes, and the bucket's code, stay.
func (t *agingTable) expire(i, dead uint64) int64 {
	if !t.semi {
		return t.expirePacked(i, dead)
	}
	off := i*t.bb + agingCodeBits
	var n int64
	if !t.fast {
		for j := range uint64(AgingBucketSlots) {
			x := t.read(off+j*uint64(t.r), uint(t.r))
			if x != 0 && dead>>(x&AgingEpochs)&1 != 0 {
				t.write(off+j*uint64(t.r), uint(t.r), 0)
				n++
			}
		}
		return n
	}
	for j, v := range t.remainders(t.window(i * t.bb)) {
		if v != 0 && dead>>(v&AgingEpochs)&1 != 0 {
			t.write(off+uint64(j)*uint64(t.r), uint(t.r), 0)
			n++
		}
	}
	return n
}

// index is the first bucket of a key: a multiply-shift of its high bits.
func (t *agingTable) index(key uint64) uint64 {
	hi, _ := bits.Mul64(key, t.nb)
	return hi
}

// alt is the other bucket of a fingerprint in bucket i: (g(fp) − i) mod nb,
// an involution for any nb (partial-key cuckoo hashing without the power
// of two that fp XOR needs).
func (t *agingTable) alt(i, fp uint64) uint64 {
	g, _ := bits.Mul64(fp*0x9e3779b97f4a7c15, t.nb)
	if g >= i {
		return g - i
	}
	return g + t.nb - i
}

// has2 reports whether bucket i1 or i2 holds fp. It reads both buckets
// before comparing, so that their cache misses overlap, and compares a
// slot's remainder only when its prefix is fp's.
func (t *agingTable) has2(i1, i2, fp uint64) bool {
	if !t.semi {
		return t.has2Packed(i1, i2, fp)
	}
	return t.has2Semi(i1, i2, fp)
}

// has2Semi is has2 of a semi-sorted table.
func (t *agingTable) has2Semi(i1, i2, fp uint64) bool {
	if !t.fast {
		o1, o2 := i1*t.bb, i2*t.bb
		c1, c2 := t.read(o1, agingCodeBits), t.read(o2, agingCodeBits)
		return t.matchSlow(o1+agingCodeBits, uint64(agingDecode[c1]), fp) || t.matchSlow(o2+agingCodeBits, uint64(agingDecode[c2]), fp)
	}
	lo1, hi1 := t.window(i1 * t.bb)
	lo2, hi2 := t.window(i2 * t.bb)
	q := fp >> (t.f - agingPrefixBits) * 0x1111
	low := fp & t.fpLow()
	return t.match(lo1, hi1, q, low) || t.match(lo2, hi2, q, low)
}

// match reports whether the bucket of bits lo, hi holds the fingerprint of
// prefix q (repeated in 4 nibbles) and low bits low.
func (t *agingTable) match(lo, hi, q, low uint64) bool {
	d := uint64(agingDecode[lo&(1<<agingCodeBits-1)]) ^ q // a zero nibble: a slot of q's prefix
	if (d-0x1111)&^d&0x8888 == 0 {
		return false
	}
	x := t.remainders(lo, hi)
	for _, v := range x {
		if d&15 == 0 && v>>AgingTagBits == low {
			return true
		}
		d >>= 4
	}
	return false
}

// matchSlow is match for buckets wider than 128 bits: p is the bucket's
// prefixes (packed as in agingDecode), its remainders start at bit off.
func (t *agingTable) matchSlow(off, p, fp uint64) bool {
	q := fp >> (t.f - agingPrefixBits)
	low := fp & t.fpLow()
	for j := range uint64(AgingBucketSlots) {
		if p>>(4*j)&15 == q && t.read(off+j*uint64(t.r), uint(t.r))>>AgingTagBits == low {
			return true
		}
	}
	return false
}
