package fbf

// A packed table (AgingLayoutPacked) holds slot k of bucket k/4 at bit k·s
// of its little-endian words, s = f + AgingTagBits bits: the slot's value,
// 0 when empty. It takes a bit a slot more than a semi-sorted one, and a
// test-and-add reads and writes its slots in place, without a code to
// decode and encode.

// get returns slot k of a packed table.
func (t *agingTable) get(k uint64) uint64 {
	off := k * uint64(t.s)
	w, b := off>>6, off&63
	v := t.words[w] >> b
	if b+uint64(t.s) > 64 {
		v |= t.words[w+1] << (64 - b)
	}
	return v & t.smask
}

// put writes slot k of a packed table.
func (t *agingTable) put(k, v uint64) {
	off := k * uint64(t.s)
	w, b := off>>6, off&63
	t.words[w] = t.words[w]&^(t.smask<<b) | v<<b
	if b+uint64(t.s) > 64 {
		r := 64 - b
		t.words[w+1] = t.words[w+1]&^(t.smask>>r) | v>>r
	}
}

func (t *agingTable) loadPacked(i uint64) bucket {
	k := i * AgingBucketSlots
	return bucket{t.get(k), t.get(k + 1), t.get(k + 2), t.get(k + 3)}
}

func (t *agingTable) storePacked(i uint64, b bucket) {
	for j, v := range b {
		t.put(i*AgingBucketSlots+uint64(j), v)
	}
}

func (t *agingTable) setPacked(i uint64, j uint, v uint64) (old uint64) {
	k := i*AgingBucketSlots + uint64(j)
	old = t.get(k)
	t.put(k, v)
	return old
}

func (t *agingTable) addPacked(i, v uint64) bool {
	for k := i * AgingBucketSlots; k < (i+1)*AgingBucketSlots; k++ {
		if t.get(k) == 0 {
			t.put(k, v)
			return true
		}
	}
	return false
}

func (t *agingTable) expirePacked(i, dead uint64) int64 {
	var n int64
	for k := i * AgingBucketSlots; k < (i+1)*AgingBucketSlots; k++ {
		if v := t.get(k); v != 0 && dead>>(v&AgingEpochs)&1 != 0 {
			t.put(k, 0)
			n++
		}
	}
	return n
}

// has2Packed is has2 of a packed table. It reads both buckets before
// comparing, so that their cache misses overlap.
func (t *agingTable) has2Packed(i1, i2, fp uint64) bool {
	var hit bool
	for j := range uint64(AgingBucketSlots) {
		a, b := t.get(i1*AgingBucketSlots+j), t.get(i2*AgingBucketSlots+j)
		hit = hit || a>>AgingTagBits == fp || b>>AgingTagBits == fp
	}
	return hit
}
