// Package counter holds the counter designs whose cells are Cassandra
// counter contexts (package counters): the vanilla counter (`counter`,
// Cassandra ≥ 2.1), the legacy counter (`legacy_counter`, Cassandra ≤ 2.0,
// kept to show why it was replaced), and the FBF counter, which is the
// `counter` type of a table that sets the idempotence option (fbf.go): a
// Configurable type whose column instance keeps a Forgetful Bloom Filter
// of recent op ids (or, with 'filter': 'aging', an aging cuckoo filter
// for long windows: aging.go) and is a coltype.Deduplicator, so that the replica's
// and the coordinator's generic in-doubt machinery serve it.
//
// Importing the package registers the types and the option (init).
package counter
