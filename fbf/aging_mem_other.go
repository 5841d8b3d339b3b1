//go:build !linux

package fbf

// hugeWords returns n zeroed words (see the linux version).
func hugeWords(n int) (words []uint64, free func()) { return make([]uint64, n), nil }
