// Package handoff implements Handoff Counters (Almeida & Baquero, "Scalable
// Eventually Consistent Counters over Unreliable Networks", arXiv:1307.3207;
// see docs/references.md): a state-based CRDT counter in which clients
// are replicas too, so that a retry is only a re-sent state, while the
// per-client entries that make a naive G-counter grow with every client that
// ever incremented are temporary and garbage-collected.
//
// It is pure: no I/O, no clock, no goroutines, no randomness.
//
// # The algorithm
//
// Every node has a globally unique ID and a tier. Tier-0 nodes (a counter
// cell's replicas) keep a version vector of tier-0 entries, merged by
// pointwise max as in a G-counter. Every other node accounts its own
// increments in a single self entry and hands them off to a smaller-tier node
// by a four-way handshake carried by ordinary state exchanges (Figure 2):
//
//  1. the client's state reaches the server, which opens a slot for the
//     client stamped (client's sck, server's dck) and bumps its dck;
//  2. the server's state reaches the client, which sees its slot, moves its
//     self entry into a token for that slot and bumps its sck;
//  3. the client's state reaches the server, which acquires the token (adds
//     its value to its self entry) and removes the slot;
//  4. the server's state reaches the client, which sees the slot gone (or a
//     later dck) and drops the token.
//
// The clocks make each slot and each token be created at most once and a
// token be acquired at most once, whatever is lost, duplicated, reordered or
// replayed (§6, Lemmas 6.1–6.3). A node reports val, the best lower bound it
// knows: at tier 0 the sum of the vector, elsewhere below (what a smaller
// tier reported) plus what it accounts itself.
//
// # Mapping to the paper
//
//	Figure 3 (state)             State: id, tier, val, below, vals, sck, dck,
//	                             slots (src → Clock), tokens (Pair → Token)
//	Figure 4 init, fetch, incr   Init / NewCounter, Fetch, Incr (Inflate for §8)
//	Figure 4 merge               State.Merge, in the paper's order:
//	Figure 5 fillslots           (*State).fillslots (unexported, each tested)
//	         discardslot         (*State).discardslot
//	         createslot          (*State).createslot
//	         mergevectors        (*State).mergevectors
//	         aggregate           (*State).aggregate (one term differs, below)
//	         discardtokens       (*State).discardtokens
//	         createtoken         (*State).createtoken
//	         cachetokens         (*State).cachetokens
//	§7.3 view                    State.View (restricts tokens and vals too)
//	§7.4 retirement              State.Handed (the normal condition);
//	                             State.Retire, Notice, State.Collect (a
//	                             retirement notice, below)
//	exchanges in a deployment    Message, HeldNotice (state + notices)
//	§8 generalisation            Value: Count, Counts (§8.1), PN (§8.2);
//	                             Counter, Map, PNCounter
//
// Merge modifies the receiver in place, which is the paper's C_i :=
// merge(C_i, C_j); each step reads the result of the previous steps for C_i
// and the received C_j as it arrived, exactly as the composition of Figure 4.
//
// # Using it (a server holding one cell, clients)
//
// A tier-0 replica keeps one State per counter cell, stored with
// MarshalBinary and loaded with UnmarshalBinary. It merges what clients and
// other tier-0 replicas send (Merge), and answers a peer with
// View(peer, peerTier) encoded, never with its full state to a client. A
// client (tier 1) keeps its own State, Incr's locally, and exchanges
// View(server, 0) for the server's view of it until Handed reports true; any
// exchange may be retried, lost or duplicated. Per §7.2 a node must persist
// its state before anything derived from it leaves the node (a message, or
// a fetch answered to a caller): a node that crashes must resume from a state
// no older than anything it sent. The randomized checker shows what breaks
// otherwise.
//
// # One departure from Figure 5: aggregate between nodes of the same tier
//
// For two nodes of the same tier above 0, Figure 5 sets val_i to
// max(val_i, val_j, b + vals_i(i) + vals_j(j)). That over-counts when C_j is
// an old state, which the system model allows (§3.1; the proof of
// Proposition 6.2 says "M can be any message from node j, arbitrarily from
// the past" but does not carry that through for this term): a's state with 5
// accounted is delayed on its way to b; meanwhile a hands the 5 off to tier 0
// and b learns them as below; when the old state arrives, b + vals_b(b) +
// vals_a(a) counts them twice, and b's fetch exceeds the increments issued
// (TestAggregateSameTierOldState; the randomized checker found it, and
// catches the paper's formula within a few thousand steps, see
// TestRandomCatchesBrokenRules). The reference implementation
// (pssalmeida/clj-crdt) has the same term. This package uses
// max(val_i, val_j, b + vals_i(i)): every term is then bounded by
// CTV(tier_i) whatever the age of C_j, and little is lost, since val_j ≥
// below_j + vals_j(j) already holds for a node above tier 0. Eventual
// accounting does not use the dropped term (it flows up from tier 0 through
// below).
//
// # Where the paper is ambiguous, and what this package chose
//
//   - Merging a state carrying the receiver's own id is the identity. The
//     paper never sends a node its own state (Algorithm 1 picks a neighbour);
//     with Figure 5's aggregate such a merge would count a node's self entry
//     twice (b + vals_i(i) + vals_j(j) with i = j), and nothing in it is
//     useful to the node, so it is ignored, as the reference implementation
//     does.
//   - "vals_j(j) > 0" in createslot is "vals_j(j) ≠ 𝟎" over a general Value;
//     for a Counts or PN value that is "some entry is non-zero".
//   - createtoken creates a token even when vals_i(i) is 𝟎, as Figure 5 says;
//     such a zero token is what lets a server fill (and so drop) a slot
//     opened by a stale or duplicate message once the client has nothing
//     left to hand off. Likewise it overwrites an existing (i, j) token, which
//     Proposition 6.1 shows is never an unacquired one.
//   - cachetokens keeps the local token on a tie of source clocks (f picks
//     its first argument when fst(ck) ≥ fst(ck')).
//   - fillslots matches a token to a slot on both clocks (src, (sck, dck)) ∈
//     slots_i, i.e. slots_i(src) = ck.
//   - View (§7.3) restricts slots as the paper does, and also tokens (to
//     those addressed to the peer, plus the sender's own when the peer's tier
//     is smaller, the only ones the peer's merge reads) and vals (to the self
//     entry unless both are tier 0). Merging a view is then the same as
//     merging the full state, except in one case the paper's view already
//     has: a peer that caches a token from a third node addressed to the
//     sender, when the view leaves out the sender's slot for that third node,
//     may drop its cached copy before the token is acquired (discardtokens
//     takes the "no slot" branch). The token's source (or its retirement
//     notice) still holds it, so no increment is lost; this only arises
//     when a client hands off to servers of different tiers, which §7.3
//     assumes away. It is also why this package does not let a node retire
//     on the strength of copies of its tokens cached elsewhere (§7.4's first
//     rule): with views, a cache at another tier than the destination can
//     drop its copy early. A retirement notice holds the tokens instead.
//   - PN is the §8.2 map {p, n} with its two keys as struct fields; Fetch is
//     P − N wrapped into int64.
//   - Tiers are limited to [0, MaxTier].
//
// # Retirement (§7.4)
//
// A node that wants to stop for good while a token of its own is not yet
// known to be acquired (its destination is partitioned away, say), or that
// may have left slots at servers it no longer talks to (an exchange whose
// answer was lost, then a failover), retires with a Notice: Retire freezes
// its state and returns its id, its final source clock and a copy of every
// token of its own. Once one server holds the notice durably, the node may
// stop: the notice, passed from server to server and applied with Collect
// after every merge, delivers each token to its destination (the slot is
// filled from the notice exactly as fillslots would) and then drops every
// slot left for the node, none of which can ever be filled. This is the
// paper's sketch of slot garbage collection on retirement, made to carry
// all the tokens rather than the last, which is what also makes it a safe
// way to retire without waiting for the destinations. The randomized
// checker retires clients this way and counts the tokens notices hold in
// Proposition 6.3 (random_test.go). A frozen node must never send or merge
// again: a resumed node could open a slot that a notice it already issued
// would drop.
//
// # Encoding
//
// See State.AppendBinary: a version byte, a value-domain byte, then the
// fields in a canonical order with uvarints, so that a decoded state encodes
// to the same bytes. UnmarshalBinary rejects anything else with an error.
package handoff
