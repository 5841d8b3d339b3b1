// Package memlimit says what a node takes as its heap when it sizes Cassandra's
// heap-relative defaults (the counter cache, the memtable space): Go has no
// fixed heap, so the heap is the runtime's soft memory limit (GOMEMLIMIT,
// debug.SetMemoryLimit) when one is set, as a JVM's is its -Xmx.
package memlimit

import (
	"math"
	"runtime/debug"
)

// Heap returns the soft memory limit and true when one is set, or false.
func Heap() (int64, bool) {
	limit := debug.SetMemoryLimit(-1)
	if limit <= 0 || limit == math.MaxInt64 {
		return 0, false
	}
	return limit, true
}
