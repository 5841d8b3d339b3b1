// Package reset implements the observed-reset counter of Weidner and
// Almeida ("An Oblivious Observed-Reset Embeddable Replicated Counter",
// PaPoC 2022, papers/observed-reset-counter.txt): an op-based counter whose
// reset cancels exactly the increments its issuer observed (an increment
// concurrent with it survives) and whose per-counter state disappears once
// the reset has reached every replica, needing only exactly-once FIFO
// delivery per sender.
//
// It is pure: no I/O, no clock, no goroutines, no randomness.
package reset
