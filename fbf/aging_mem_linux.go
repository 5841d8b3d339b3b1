//go:build linux

package fbf

import (
	"syscall"
	"unsafe"
)

// hugeWords returns n zeroed words on the Go heap; from 8 MiB on, the
// words start on a 2 MiB boundary and the kernel is asked to back them
// with huge pages (MADV_HUGEPAGE, advice only): the tables of an aging
// filter are read at random, and with 4 KiB pages nearly every access of a
// table of tens of megabytes also misses the TLB. The words stay ordinary
// Go memory (the garbage collector frees them, GOMEMLIMIT counts them); the
// alignment costs at most 2 MiB more.
func hugeWords(n int) []uint64 {
	const huge = 2 << 20
	if n*8 < 4*huge { // small: a huge page would be mostly empty
		return make([]uint64, n)
	}
	raw := make([]uint64, n+huge/8)
	off := int((huge-uintptr(unsafe.Pointer(&raw[0]))%huge)%huge) / 8
	words := raw[off : off+n : off+n]
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n*8), syscall.MADV_HUGEPAGE)
	return words
}
