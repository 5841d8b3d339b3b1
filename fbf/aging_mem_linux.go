//go:build linux

package fbf

import (
	"syscall"
	"unsafe"
)

// hugeWords returns n zeroed words outside the Go heap, in memory the
// kernel is asked to back with huge pages (MADV_HUGEPAGE): the tables of an
// aging filter are read at random, and with 4 KiB pages nearly every
// access of a table of tens of megabytes also misses the TLB. free unmaps
// them; nil when the words are an ordinary slice (fewer than 8 MiB, or
// mmap failed).
func hugeWords(n int) (words []uint64, free func()) {
	const huge = 2 << 20
	if n*8 < 4*huge { // small: a huge page would be mostly empty
		return make([]uint64, n), nil
	}
	size := (n*8 + huge - 1) &^ (huge - 1)
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]uint64, n), nil
	}
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // advice only
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), n), func() { _ = syscall.Munmap(b) }
}
