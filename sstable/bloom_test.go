package sstable

import (
	"math/rand/v2"
	"testing"

	"github.com/idemkv/idemkv/row"
)

func TestBloomSize(t *testing.T) {
	for _, tc := range []struct {
		n uint64
		p float64
		m uint64
		k uint32
	}{
		{1000, 0.01, 9600, 7},        // ⌈9585.06⌉ → 9600 bits, 9.6 bits/key · ln 2 = 6.65
		{1000, 0.1, 4800, 3},         // 4792.5 → 4800, 4.8 · ln 2 = 3.33
		{0, 0.01, 64, 30},            // at least one word; k capped
		{100000, 0.001, 1437760, 10}, // ⌈1437758.8⌉ → 1437760
	} {
		m, k := bloomSize(tc.n, tc.p)
		if m != tc.m || k != tc.k {
			t.Errorf("bloomSize(%d, %g) = %d, %d; want %d, %d", tc.n, tc.p, m, k, tc.m, tc.k)
		}
	}
}

// TestBloomFalsePositiveRate checks, with a fixed seed, that the measured
// false-positive rate is within 30% of the configured chance and that there
// are no false negatives.
func TestBloomFalsePositiveRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, probes = 20000, 200000
	key := func() row.Key { return row.Key{Token: int64(rng.Uint64()), Partition: randBytes(rng, 1+rng.IntN(16))} }
	for _, p := range []float64{0.1, 0.01, 0.001} {
		keys := make([]row.Key, n)
		hashes := make([][2]uint64, n)
		seen := map[string]bool{}
		for i := range keys {
			keys[i] = key()
			hashes[i] = keyHash(keys[i])
			seen[keyID(keys[i])] = true
		}
		f, err := decodeBloom(newBloom(hashes, p).encode())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if !f.mayContain(keyHash(k)) {
				t.Fatalf("p=%g: false negative for %s", p, k)
			}
		}
		fp, tried := 0, 0
		for tried < probes {
			k := key()
			if seen[keyID(k)] {
				continue
			}
			tried++
			if f.mayContain(keyHash(k)) {
				fp++
			}
		}
		rate := float64(fp) / probes
		t.Logf("p=%g: m=%d k=%d, measured false-positive rate %.5f", p, f.m, f.k, rate)
		if rate < 0.7*p || rate > 1.3*p {
			t.Errorf("p=%g: false-positive rate %.5f outside [%.5f, %.5f]", p, rate, 0.7*p, 1.3*p)
		}
	}
}

// TestBloomInTable checks the filter of a written table: Get of absent keys
// mostly stops at the filter.
func TestBloomInTable(t *testing.T) {
	rng := testRand(t)
	dir := t.TempDir()
	rows := randRows(rng, 5000, false)
	writeTable(t, dir, 1, rows, Options{BloomFPChance: 0.05}, nil)
	r := openTable(t, dir, 1)
	if r.filter.k != 4 {
		t.Fatalf("k = %d, want 4 for p = 0.05", r.filter.k)
	}
	for _, x := range rows {
		if !r.filter.mayContain(keyHash(x.Key)) {
			t.Fatalf("filter lacks written key %s", x.Key)
		}
	}
	fp := 0
	absent := absentKeys(rng, rows, 20000)
	for _, k := range absent {
		if r.filter.mayContain(keyHash(k)) {
			fp++
		}
	}
	if rate := float64(fp) / float64(len(absent)); rate > 0.1 {
		t.Fatalf("false-positive rate %.4f for p = 0.05", rate)
	}
}
