// Package gossip keeps cluster membership the way Cassandra's Gossiper does,
// in miniature: every node announces its own state (address, data center
// and rack, tokens, status, schema version, load), learns everyone else's
// from its peers, and decides for itself which peers are up.
//
// # State
//
// A node's state is one NodeState, ordered by (Generation, Version).
// Generation is set when the process starts (unix nanoseconds), Version is
// bumped on every change (UpdateSelf) and on every heartbeat (each Round).
// Only the node itself writes its state; everyone else copies the newest
// one it hears of.
//
// # Protocol
//
// Each Round, a node bumps its heartbeat and exchanges states with one
// random live peer; with probability unreachable/(live+1) with one random
// unreachable peer as well; and with a seed when it knows no live peer, or
// else (unless the live peer was a seed and live peers are at least as many
// as seeds) with probability seeds/(live+unreachable) — Cassandra's rules.
// An exchange is three messages carried by two transport requests:
//
//	SYN  (TypeSyn, request)    digests (hostID, generation, version) of every state the initiator knows
//	ACK  (TypeAck, response)   states the initiator lacks: newer than its digests, or missing from them;
//	                           and digests of the states the answerer wants (its own older version, or 0/0)
//	ACK2 (TypeAck2, request)   the states the ACK asked for, when newer than asked (omitted if none)
//
// so that one exchange leaves both sides with the newer of every state
// either knew. (Cassandra's ACK carries only the states newer than the
// digests; sending the ones missing from them too lets a joining node learn
// the whole cluster in its first exchange with a seed.) All messages are
// transport requests, so that a round has finished its exchanges when it
// returns; an exchange waits at most Interval. A stopping node sends SHUTDOWN (TypeShutdown), carrying its
// own state with status shutdown, to every live peer.
//
// Bodies are binary: a version byte (1), then lists prefixed by their
// uvarint length. A digest is the host id as 16 raw bytes and two varints;
// a state adds a status code, six length-prefixed strings, the load and
// the tokens (8 bytes each, big-endian). Lists hold at most 4096 entries,
// strings 255 bytes, bodies 16 MiB; the decoder checks every length
// against these bounds and against the bytes left, rejects unknown
// versions, status codes and trailing bytes, and never panics (FuzzDecode).
// The grammar is written out in wire.go.
//
// # Failure detection
//
// Each node runs a phi-accrual failure detector per peer, as Cassandra's
// PhiAccrualFailureDetector does. A heartbeat is a fresh state of the peer
// (a higher version), whether it came from the peer or through a third
// node. The detector keeps the last 1000 inter-arrival times: the first
// heartbeat records an initial 2×Interval, and gaps longer than 2×Interval
// are not recorded (an outage is not a sample). With inter-arrival times
// taken as exponentially distributed of the window's mean,
//
//	phi(t) = -log10(P(no heartbeat for t)) = -log10(e^(-t/mean)) = t / (mean · ln 10)
//
// where t is the time since the last heartbeat. After each Round, every
// up peer with phi > PhiConvictThreshold (default 8) is marked Down; a down
// peer is marked Up again at its next fresh heartbeat. A peer whose state
// says shutdown or left is marked Down at once. If the node itself did not
// run the detector for 5 intervals (a local pause), it convicts nobody for
// the next 5 intervals.
//
// # Restarts
//
// A restarted node has a higher Generation. A peer that hears of it
// replaces the old state whatever its version (tokens included), resets the
// node's failure detector, emits EventRestarted and marks it Up (unless
// the new state is shutdown or left). A generation more than a year ahead
// of the known one is ignored as corrupt. A node never adopts a state of
// its own host id from a peer.
//
// # Remembered peers
//
// A node may start knowing peers from an earlier run (Config.Known, which
// a node fills from its persisted peers, as Cassandra's system.peers
// does): they are Down until heard from, their tokens are known, and each
// round contacts them as unreachable peers, so that a restarted node finds
// its live peers even when every seed is down. The first fresh state of
// such a peer replaces the remembered one however far its generation has
// moved (the one-year rule applies only to states heard by gossip).
//
// # Events
//
// Subscribers receive Joined, Up, Down, Restarted, Changed and Left events
// about other nodes, in order, outside the gossiper's lock. When one
// received state changes several things, Restarted or Changed comes first,
// then Left, Down or Up.
//
// Nodes that left stay known (Down, status left) and are never gossiped to;
// they are not yet evicted after a quarantine as Cassandra does.
package gossip
