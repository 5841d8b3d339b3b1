// Package testseed gives randomized tests a seed that is printed on failure
// and can be replayed: IDEMKV_SEED=<n> go test -run <Test> ./pkg/.
package testseed

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Env is the environment variable that fixes the seed of every seeded test.
const Env = "IDEMKV_SEED"

// Seed returns the test's seed: IDEMKV_SEED when set, else a fresh one. When
// the test fails, the seed and the command that replays it are logged.
func Seed(t testing.TB) uint64 {
	t.Helper()
	var seed uint64
	if s := os.Getenv(Env); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("testseed: %s=%q is not an unsigned integer: %v", Env, s, err)
		}
		seed = v
	} else {
		seed = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: replay with %s=%d go test -run '^%s$'", seed, Env, seed, t.Name())
		}
	})
	return seed
}

// Rand returns a generator seeded by Seed.
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	s := Seed(t)
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}
