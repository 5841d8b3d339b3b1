package memlimit

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestLimit: no limit is none; a limit set is the heap.
func TestLimit(t *testing.T) {
	old := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(old)
	if n, ok := Heap(); ok {
		t.Fatalf("no limit set: Heap() = %d, true", n)
	}
	debug.SetMemoryLimit(256 << 20)
	if n, ok := Heap(); !ok || n != 256<<20 {
		t.Fatalf("256 MiB set: Heap() = %d, %v", n, ok)
	}
}
