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
//   - [NetworkTopologyStrategy] takes RF endpoints in each named data center,
//     spread over as many racks as possible. Within a data center it takes the
//     first endpoint met of every rack; a further endpoint of a rack already
//     used is taken, as met, only when the data center has fewer racks than
//     its RF, and at most RF minus racks of them. It stops at the data
//     center's RF or at all its endpoints. This is Cassandra's
//     calculateNaturalEndpoints (the DatacenterEndpoints version of 3.x, kept
//     in 4.x and 5.0); the older version, which skipped same-rack endpoints
//     until every rack had a replica and then took the skipped ones, picks the
//     same set in a different order.
//
// The replicas come back in the order the walk added them, which is the order
// Cassandra reports; the primary owner comes first whenever its data center is
// replicated. [ParseStrategy] builds a strategy from a CQL replication map.
package ring
