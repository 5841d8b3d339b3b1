// Package borrow implements the Borrow-Counter (Enes, Almeida, Baquero,
// Leitão, "Borrowing an Identity for a Distributed Counter", PaPoC 2017,
// papers/borrow-counter.txt): a causal CRDT counter in which a permanent
// node (a replica of the cell) lends a transient node (a client) a dot to
// count into; the client retires by freezing its dots and the node that
// created them folds them into its own, so the state stays linear in the
// nodes that are active, not in every client that ever incremented.
//
// It is pure: no I/O, no clock, no goroutines, no randomness.
package borrow
