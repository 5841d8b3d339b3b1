// Package handoff implements Handoff Counters (Almeida & Baquero, "Scalable
// Eventually Consistent Counters over Unreliable Networks"): a state-based
// CRDT counter in which clients are replicas too, so a retry is a re-sent
// state, while the per-client entries that make a naive G-counter grow with
// every client that ever incremented are temporary and garbage-collected.
//
// It is pure: no I/O, no clock, no goroutines.
package handoff
