//go:build !linux

package fbf

// hugeWords returns n zeroed words (see the linux version).
func hugeWords(n int) []uint64 { return make([]uint64, n) }
