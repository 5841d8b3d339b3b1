package fbf

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// epoch is the virtual time zero of the tests.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// testSeed returns the seed of a test: IDEMKV_SEED if set, else def, else
// (def == 0) a fresh one. It is logged when the test fails.
func testSeed(t testing.TB, def uint64) uint64 {
	t.Helper()
	seed := def
	if s := os.Getenv("IDEMKV_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("IDEMKV_SEED=%q: %v", s, err)
		}
		seed = v
	} else if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: replay with IDEMKV_SEED=%d go test -run '%s' ./fbf/", seed, seed, t.Name())
		}
	})
	return seed
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// id returns a 16-byte op id (client, sequence) as docs/fbf.md specifies.
func id(client, seq uint64) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, client)
	binary.BigEndian.PutUint64(b[8:], seq)
	return b
}

func mustNew(t testing.TB, c Config) *Filter {
	t.Helper()
	if c.Start.IsZero() {
		c.Start = epoch
	}
	f, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// at returns the virtual time d after epoch.
func at(d time.Duration) time.Time { return epoch.Add(d) }

// containsElseIf is the paper's Algorithm 2 as printed (an else-if chain),
// kept to show that the window test catches its bug.
func (f *Filter) containsElseIf(h Hash) bool {
	s := f.gen.Load().slots
	pastNewest, pastOldest := 2, len(s)-1
	if f.has(s[0], h) {
		return true
	} else if f.has(s[1], h) && f.has(s[pastNewest], h) {
		return true
	} else if pastOldest > pastNewest {
		for i := pastNewest; i < pastOldest; i++ {
			if f.has(s[i], h) && f.has(s[i+1], h) {
				return true
			}
		}
	} else if f.has(s[pastOldest], h) {
		return true
	}
	return false
}
