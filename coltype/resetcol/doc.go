// Package resetcol is the observed-reset counter column type,
// `reset_counter` (counters/reset, Weidner & Almeida, PaPoC 2022): a
// counter that DELETE resets and that keeps counting afterwards, where a
// reset cancels exactly the increments its leader observed and an
// increment concurrent with it on another replica survives.
//
// # The cell on each replica
//
// Each replica stores, in each cell, its OWN durable blob (never another
// replica's): its reset.State of the cell (one counter, KindCounter), an
// exactly-once FIFO channel to and from every other replica of the cell —
// a reset.Outbox per peer (the ops this replica generated that the peer
// has not acknowledged) and a reset.Inbox per origin (how many of the
// origin's ops it delivered) — the number of ops it generated, and a
// version it bumps on every write (EncodeCell documents the bytes). The
// channels are per (origin, cell), as counters/reset's decision (b)
// requires: C is per cell, so each cell is its own FIFO stream.
//
// # Writes (Leading, Deleter, Replicated)
//
// UPDATE t SET c = c + w is led by one replica (the coordinator's counter
// write path): under the cell's lock it generates the op (State.Inc, one
// op of weight w), applies it, pushes it to the outbox of every other
// natural replica (coltype.Update.Replicas, which the coordinator sets;
// a write without that list, such as the replica-level Delete, goes to
// every origin the cell delivered ops from, Column.peers), writes the
// blob durably, and returns a Mutation whose cell value is the
// op with its sequence number on each peer's channel (EncodeOp). The
// coordinator sends it to the other replicas and counts their acks for
// the consistency level, or hints it; a replica's ack trims the leader's
// outbox to it (Mutation.Acked), in memory at once and in storage with the
// cell's next write. A replica receiving it
// (ApplyReplicated) feeds it to its Inbox for the origin, which restores
// FIFO order and exactly-once: a duplicate, a retry, a hint replayed
// after the direct message or a message that overtook an earlier one is
// held or ignored, never applied twice or out of order. It applies what
// is deliverable and writes the blob durably before acknowledging; an op
// held beyond a gap is not acknowledged (ErrHeld: the coordinator hints
// it, anti-entropy fills the gap, the hint's replay is then a duplicate).
// Decrements are refused (CheckDelta): the paper's counter counts up, a
// reset is the way down.
//
// DELETE c FROM t WHERE k = ? is an observed reset, led the same way: it
// cancels what the LEADER's state observes when it leads the deletion
// (State.ResetKey, or State.Reset of the context the client sent,
// coltype.Deletion.Context), not what the client read: an increment that
// reached the leader before the DELETE, even one the client never saw, is
// cancelled; one concurrent with it on another replica survives. DELETE
// FROM t WHERE k = ? resets every reset_counter of the row. The counter
// counts again at once: there is no tombstone.
//
// # Catch-up (AntiEntropy, Exchanger)
//
// A replica that was down, or whose messages were lost, catches up by the
// coordinator's anti-entropy rounds (the ones handoff counters use): every
// cell this replica changed, and every cell whose outboxes are not empty
// (Sweep puts them back each round), is exchanged with each other natural
// replica: this replica's View for the peer (its pending ops for the peer
// and its ack of the peer's stream) goes out, the peer's Exchange
// delivers the ops, trims its outbox by the ack and answers with its own
// View, which this replica takes in the same way. Outboxes shrink once
// every peer has acknowledged. Ops beyond a gap are held in memory only;
// the resend brings them back after a crash.
//
// # Reads (ReadPolicy, Merge)
//
// Replica states must not be merged entry by entry (a reset entry forgets
// its n, so an entry-wise maximum can read higher than any real state).
// The type's ReadRule is coltype.ReadDominant (no read repair), and Merge
// never combines two states: it picks one blob whole, the maximum under a
// total order (delivered sum, owner, version): the delivered sum is the
// number of ops the replica generated plus the ops it delivered from each
// other replica. For one owner a later version has a sum at least as
// large, so storage (which only ever holds this replica's own versions)
// keeps the newest; between replicas, when one replica's delivered vector
// dominates another's, its sum is larger, so a coordinator answers with
// the dominant replica's state. In every case the answer is some
// replica's real state.
//
// # The map form (map<text, reset_counter>)
//
// MapType (MapTypeName, "map<text, reset_counter>") is a map of named
// counters in one cell: one reset.State of kind reset.KindMap, whose clock
// C, outboxes, inboxes and op ids are shared by every key of the map (the
// scope of C is the cell, so the channel is per (origin, map cell), as for
// a single counter). Drivers read it as map<text, bigint> (MapValue: the
// keys whose value is not 0). Configure gives each column a *MapColumn.
// The writes are the single counter's, keyed by coltype.Update.Element and
// coltype.Deletion.Element:
//
//	UPDATE t SET m = m + {'a': 1} WHERE k = ?  one led increment per key (State.Inc(key, w))
//	DELETE m['a'] FROM t WHERE k = ?           State.ResetKey(a) at the leader, or the
//	                                           request's context narrowed to key a
//	DELETE m FROM t WHERE k = ?                State.ResetAll at the leader, or the context
//	DELETE FROM t WHERE k = ?                  the same, for every column of the row
//
// A key whose counter is fully reset reads as absent at once, and leaves
// the stored cell once the reset has met every increment it cancels
// (obliviousness, reset.State.Keys); C and the channel state stay (about
// 170 bytes for three replicas, whatever the number of keys).
//
// A map cell is stored as EncodeCell documents, under the first byte
// FormatMapCell (4) instead of FormatCell (1), the rest laid out
// identically:
//
//	1 byte   FormatMapCell (4): the format's version, and that the state is a map
//	uvarint  version, uvarint gen
//	uvarint  length, then reset.State.MarshalBinary of a KindMap state:
//	           1 byte reset.Version, 1 byte kind 2 (reset.KindMap), self id [16]
//	           uvarint n, then n × (id [16], uvarint C[id]), ascending id
//	           uvarint keys, then per key, ascending: uvarint length, key bytes,
//	             uvarint n, then n × (id [16], uvarint p, uvarint n, uvarint c), ascending id
//	uvarint  n, then n × (peer id [16], uvarint length, reset.Outbox bytes)
//	uvarint  n, then n × (origin id [16], uvarint length, reset.Inbox bytes)
//	uvarint  n, then n × (client op id [16], uvarint time)
//
// DecodeCell refuses a map state under FormatCell and a counter state under
// FormatMapCell, and a column refuses a stored cell of the other kind.
// The ops (FormatOp) and sync messages (FormatSync) are the single
// counter's: a reset.Op names its key.
//
// # Not done
//
// A client's retry (same op id) is
// dismissed only by a replica that applied the first attempt within the
// op window (OpWindowSetting), so a retry led by a replica the first
// attempt has not reached counts twice; and the ops' channel is carried
// by the mutation and anti-entropy messages rather than by the contract's
// Channel hook, which is not wired.
//
// # Joining and leaving
//
// Every outbox of a cell numbers its origin's ops by the origin's op
// count: a peer that appears after the cell's first op gets a copy of the
// outbox that holds the most ops, or an empty one numbered from the op
// count (newOutbox). A replica joining the cell's replica set (a pending
// replica, coltype.Update.Pending) adopts the snapshot a current replica
// makes for it (Column.SnapshotFor: that replica's state owned by the
// joiner, its delivered counts, no outboxes) after every current replica
// gave the cell an outbox to the joiner (Column.PrepareJoin), so that
// each origin still holds every op the snapshot lacks. The snapshot is a
// FormatCell (FormatMapCell) cell whose state's owner is the receiving
// replica; ApplyReplicated adopts it (ErrAdopt when the joiner already
// delivered ops the snapshot lacks). The argument is in
// docs/reset-counter.md, "Joining and leaving".
//
// # Op ids
//
// An increment with a client op id carries it on the channel
// (EncodeChannelOp); every replica remembers the op ids of the increments
// it applied for the op window, beside its cells (recentOps): a blob holds
// the op ids of its own write only (Blob.Recent), and its commit log record
// the newest op time, so that the log keeps it for the window
// (Column.OpIDWindow) and a start learns the window's op ids again from
// the records it replays. A leader that meets a retry
// returns a dismissed mutation; the coordinator re-sends the leader's cell
// to the other replicas, which take the ops they lack from its outbox.
//
// Importing the package registers the type (init).
package resetcol
