// Package ring places partitions on nodes the way Cassandra does. It is pure:
// no I/O, no clock, no goroutines; randomness comes only from a *rand.Rand the
// caller supplies.
//
// # Tokens
//
// Cassandra's Murmur3Partitioner maps a serialized partition key to a token, a
// signed 64-bit integer (see [Token]). The tokens form a ring: after
// [MaxToken] comes the smallest token again. [MinToken] is never the token of
// a key nor of a node.
//
// # The token ring and virtual nodes
//
// Every node (an [Endpoint]) owns a few tokens on the ring; with virtual nodes
// (Cassandra's num_tokens, [DefaultNumTokens] here as in Cassandra 4.0) each
// node picks that many random tokens when it joins ([RandomTokens]), so that
// its share of the ring is the sum of many small arcs and evens out. A token t
// owned by node N makes N the primary owner of the range (prev, t], where prev
// is the token before t on the ring; the first token's range wraps around and
// also covers every token greater than the last one. [Metadata] is an
// immutable snapshot of this map: [Metadata.Primary] finds the owner of a key's
// token by binary search, and [Metadata.Ownership] gives each node's share.
//
// # Replication strategies
//
// A keyspace's replication strategy turns the primary owner into the list of
// natural replicas, always walking the ring clockwise from the key's token:
//
//   - [SimpleStrategy] takes the first RF distinct endpoints met on the walk,
//     ignoring data centers and racks.
//   - [NetworkTopologyStrategy] takes RF endpoints in each named data center.
//     Within a data center it first takes endpoints of racks it has not used
//     yet, skipping (and remembering) endpoints of racks already used; once
//     every rack of the data center has a replica, it takes the skipped
//     endpoints in the order met, then any further endpoint of that data
//     center, until it has the data center's RF or all its endpoints. This is
//     Cassandra's NetworkTopologyStrategy.calculateNaturalEndpoints.
//
// The replicas come back in the order the walk added them, which is the order
// Cassandra reports; the primary owner comes first whenever its data center is
// replicated. [ParseStrategy] builds a strategy from a CQL replication map.
package ring
