package fbf

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestAgingSemiSortCodes: every multiset of 4 prefixes (each of the 16^4
// tuples, sorted) has a code below agingCodes, distinct multisets have
// distinct codes, the empty bucket's is 0, and agingDecode inverts it.
func TestAgingSemiSortCodes(t *testing.T) {
	owner := map[uint16][4]uint16{}
	for x := range 1 << 16 {
		p := []uint16{uint16(x) & 15, uint16(x) >> 4 & 15, uint16(x) >> 8 & 15, uint16(x) >> 12}
		slices.Sort(p)
		c := agingEncode(p[0], p[1], p[2], p[3])
		if c >= agingCodes {
			t.Fatalf("%v: code %d ≥ %d", p, c, agingCodes)
		}
		if o, ok := owner[c]; ok && o != [4]uint16(p) {
			t.Fatalf("%v and %v share code %d", o, p, c)
		}
		owner[c] = [4]uint16(p)
		if d := agingDecode[c]; d != p[0]|p[1]<<4|p[2]<<8|p[3]<<12 {
			t.Fatalf("%v: code %d decodes to %#04x", p, c, d)
		}
	}
	if len(owner) != agingCodes {
		t.Fatalf("%d multisets, want %d", len(owner), agingCodes)
	}
	if c := agingEncode(0, 0, 0, 0); c != 0 {
		t.Fatalf("the empty bucket's code is %d", c)
	}
	if agingCodes > 1<<agingCodeBits {
		t.Fatalf("%d codes in %d bits", agingCodes, agingCodeBits)
	}
}

// agingValue returns a random slot value of a table of f-bit
// fingerprints: an empty one one time in four (0 if packed, else a random
// prefix and remainder 0), else a fingerprint (half of them of prefix 0 to
// 2, so that prefixes tie) and a tag.
func agingValue(r *rand.Rand, f uint, semi bool) uint64 {
	lowBits := f - agingPrefixBits
	if r.IntN(4) == 0 {
		if !semi {
			return 0
		}
		return r.Uint64N(1<<agingPrefixBits) << (lowBits + AgingTagBits)
	}
	prefix := r.Uint64N(1 << agingPrefixBits)
	if r.IntN(2) == 0 {
		prefix %= 3
	}
	fp := prefix<<lowBits | 1 + r.Uint64N(1<<lowBits-1)
	return fp<<AgingTagBits | r.Uint64N(1<<AgingTagBits)
}

// agingContent is what a bucket holds: its values that are not empty,
// sorted, and how many of its slots are empty.
func agingContent(tb *agingTable, b bucket) (full []uint64, empty int) {
	for _, v := range b {
		if tb.empty(v) {
			empty++
		} else {
			full = append(full, v)
		}
	}
	slices.Sort(full)
	return full, empty
}

// agingHasEmpty reports whether bucket i of tb has an empty slot.
func agingHasEmpty(tb *agingTable, i uint64) bool {
	b := tb.load(i)
	return slices.ContainsFunc(b[:], tb.empty)
}

// TestAgingFingerprint: a fingerprint has f bits, its prefix is the hash's
// 4 high bits and its low bits are never all 0, for hashes at the edges
// and random ones.
func TestAgingFingerprint(t *testing.T) {
	r := testseed.Rand(t)
	for f := uint(agingPrefixBits + 1); f <= MaxAgingFingerprintBits+AgingGrowthBits; f++ {
		tb := newAgingTable(4, f, true)
		for n := range 1000 {
			h2 := r.Uint64()
			switch n {
			case 0:
				h2 = 0
			case 1:
				h2 = ^uint64(0)
			case 2:
				h2 = 1<<60 - 1
			}
			fp := tb.fingerprint(h2)
			if fp>>f != 0 || fp&tb.fpLow() == 0 || fp>>(f-agingPrefixBits) != h2>>60 {
				t.Fatalf("f=%d: fingerprint(%#x) = %#x", f, h2, fp)
			}
		}
	}
}

// TestAgingBucketRoundTrip: for fingerprints of 5 to 58 bits, semi-sorted
// and packed, a table's
// buckets, written in random order with random values sorted (empty slots
// among them) and rewritten at random, load back as written, each store
// leaving every other bucket as it was; a table emptied again is all
// zeros; and has2 answers as the model does, for fingerprints stored,
// fingerprints sharing a stored one's prefix, and random ones.
func TestAgingBucketRoundTrip(t *testing.T) {
	r := testseed.Rand(t)
	for _, f := range []uint{5, 6, 9, 10, 11, 13, 15, 17, 19, 29, 30, 31, 33, 56, 58} {
		for _, semi := range []bool{true, false} {
			agingRoundTrip(t, r, f, semi)
		}
	}
}

func agingRoundTrip(t *testing.T, r *rand.Rand, f uint, semi bool) {
	{
		const nb = 37
		tb := newAgingTable(nb, f, semi)
		if uint64(len(tb.words)*64) < nb*tb.bb+128 {
			t.Fatalf("f=%d semi=%v: %d words for %d bits", f, semi, len(tb.words), nb*tb.bb)
		}
		model := make([]bucket, nb)
		check := func(step int) {
			for i := range uint64(nb) {
				if got := tb.load(i); got != model[i] {
					t.Fatalf("f=%d semi=%v step %d: bucket %d loads %x, want %x", f, semi, step, i, got, model[i])
				}
			}
		}
		for step := range 400 {
			i := r.Uint64N(nb)
			var b bucket
			for j := range b {
				b[j] = agingValue(r, f, semi)
				if b[j]>>(f+AgingTagBits) != 0 {
					t.Fatalf("value %x wider than %d bits", b[j], f+AgingTagBits)
				}
			}
			slices.Sort(b[:])
			tb.store(i, b)
			model[i] = b
			if step%20 == 0 {
				check(step)
			}
		}
		check(400)
		lowBits := f - agingPrefixBits
		for range 2000 {
			i1, i2 := r.Uint64N(nb), r.Uint64N(nb)
			src := model[[2]uint64{i1, i2}[r.IntN(2)]][r.IntN(AgingBucketSlots)]
			fp := tb.fingerprint(r.Uint64())
			switch {
			case tb.empty(src):
			case r.IntN(2) == 0:
				fp = src >> AgingTagBits
			default: // the same prefix, other low bits
				fp = src>>AgingTagBits&^(1<<lowBits-1) | 1 + r.Uint64N(1<<lowBits-1)
			}
			want := false
			for _, v := range append(model[i1][:], model[i2][:]...) {
				want = want || !tb.empty(v) && v>>AgingTagBits == fp
			}
			if got := tb.has2(i1, i2, fp); got != want {
				t.Fatalf("f=%d semi=%v: has2(%d, %d, %x) = %v, want %v (buckets %x, %x)", f, semi, i1, i2, fp, got, want, model[i1], model[i2])
			}
		}
		for i := range uint64(nb) {
			tb.store(i, bucket{})
		}
		for w, x := range tb.words {
			if x != 0 {
				t.Fatalf("f=%d semi=%v: emptied table has word %d = %x", f, semi, w, x)
			}
		}
	}
}

// TestAgingBucketPut: put replaces any slot of an ascending bucket with any
// value and leaves it ascending, holding the values the replacement leaves
// (all buckets of values 0..4 and all replacements).
func TestAgingBucketPut(t *testing.T) {
	for x := range 5 * 5 * 5 * 5 {
		b := bucket{uint64(x % 5), uint64(x / 5 % 5), uint64(x / 25 % 5), uint64(x / 125)}
		slices.Sort(b[:])
		for j := range b {
			for v := range uint64(6) {
				want := b
				want[j] = v
				slices.Sort(want[:])
				got := b
				got.put(j, v)
				if got != want {
					t.Fatalf("%v.put(%d, %d) = %v, want %v", b, j, v, got, want)
				}
			}
		}
	}
}

// TestAgingBucketSet: set, add and expire keep each bucket holding the
// model's values (the values that are not empty, a multiset, and a count
// of empty slots), semi-sorted buckets in an order the code allows
// (prefixes ascending; they work on a bucket's bits without sorting it),
// and packed ones. Random sets, adds and
// expiries of random tags (with values of few prefixes, so that prefixes
// tie), for fingerprints of 5 to 58 bits; set returns the value load
// showed at the slot, add fills an empty slot if there is one, expire
// empties the slots of its tags (expireAll those of every bucket); the
// other buckets are left as they were.
func TestAgingBucketSet(t *testing.T) {
	r := testseed.Rand(t)
	for _, f := range []uint{5, 6, 10, 13, 17, 19, 29, 30, 31, 58} {
		for _, semi := range []bool{true, false} {
			agingSet(t, r, f, semi)
		}
	}
}

func agingSet(t *testing.T, r *rand.Rand, f uint, semi bool) {
	{
		const nb = 23
		tb := newAgingTable(nb, f, semi)
		rr := f + AgingTagBits - agingPrefixBits
		full := make([][]uint64, nb) // sorted
		empty := make([]int, nb)
		for i := range empty {
			empty[i] = AgingBucketSlots
		}
		fill := func() uint64 {
			for {
				if v := agingValue(r, f, semi); !tb.empty(v) {
					return v
				}
			}
		}
		check := func(step int, i uint64) {
			b := tb.load(i)
			for j := 1; semi && j < len(b); j++ {
				if b[j]>>rr < b[j-1]>>rr {
					t.Fatalf("f=%d semi=%v step %d: bucket %d out of order: %x", f, semi, step, i, b)
				}
			}
			gotFull, gotEmpty := agingContent(tb, b)
			if !slices.Equal(gotFull, full[i]) || gotEmpty != empty[i] {
				t.Fatalf("f=%d semi=%v step %d: bucket %d holds %x (%x, %d empty), want %x, %d empty", f, semi, step, i, b, gotFull, gotEmpty, full[i], empty[i])
			}
			if agingHasEmpty(tb, i) != (empty[i] > 0) {
				t.Fatalf("f=%d semi=%v step %d: bucket %d %x: hasEmpty = %v", f, semi, step, i, b, agingHasEmpty(tb, i))
			}
		}
		for step := range 4000 {
			i := r.Uint64N(nb)
			if r.IntN(200) == 0 { // the whole table, as a sweep does
				dead := r.Uint64N(1 << (AgingEpochs + 1))
				var want int64
				for i := range full {
					kept := full[i][:0:0]
					for _, v := range full[i] {
						if dead>>(v&AgingEpochs)&1 == 0 {
							kept = append(kept, v)
						}
					}
					want += int64(len(full[i]) - len(kept))
					empty[i] += len(full[i]) - len(kept)
					full[i] = kept
				}
				if got := tb.expireAll(dead); got != want {
					t.Fatalf("f=%d semi=%v step %d: expireAll(%08b) = %d, want %d", f, semi, step, dead, got, want)
				}
				for i := range uint64(nb) {
					check(step, i)
				}
				continue
			}
			switch r.IntN(4) {
			case 0:
				dead := r.Uint64N(1 << (AgingEpochs + 1))
				kept := full[i][:0:0]
				for _, v := range full[i] {
					if dead>>(v&AgingEpochs)&1 == 0 {
						kept = append(kept, v)
					}
				}
				n := int64(len(full[i]) - len(kept))
				full[i], empty[i] = kept, empty[i]+int(n)
				if got := tb.expire(i, dead); got != n {
					t.Fatalf("f=%d semi=%v step %d: expire(%d, %08b) = %d, want %d", f, semi, step, i, dead, got, n)
				}
			case 1:
				v := fill()
				if got := tb.add(i, v); got != (empty[i] > 0) {
					t.Fatalf("f=%d semi=%v step %d: add to bucket %d (%d empty) = %v", f, semi, step, i, empty[i], got)
				}
				if empty[i] > 0 {
					empty[i]--
					full[i] = append(full[i], v)
					slices.Sort(full[i])
				}
			default:
				j := r.IntN(AgingBucketSlots)
				v := fill()
				before := tb.load(i)
				if old := tb.set(i, uint(j), v); old != before[j] {
					t.Fatalf("f=%d semi=%v step %d: set(%d, %d) returned %x, load had %x", f, semi, step, i, j, old, before)
				}
				if tb.empty(before[j]) {
					empty[i]--
				} else {
					k := slices.Index(full[i], before[j])
					full[i] = slices.Delete(full[i], k, k+1)
				}
				full[i] = append(full[i], v)
				slices.Sort(full[i])
			}
			check(step, i)
			if step%100 == 0 {
				for i := range uint64(nb) {
					check(step, i)
				}
			}
		}
	}
}
