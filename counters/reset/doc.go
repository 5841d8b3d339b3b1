// Package reset implements the observed-reset counter of Weidner and
// Almeida ("An Oblivious Observed-Reset Embeddable Replicated Counter",
// PaPoC 2022, papers/observed-reset-counter.txt): an op-based counter whose
// reset cancels exactly the increments its issuer observed (an increment
// concurrent with it survives) and whose per-counter state disappears once
// the reset has reached every replica and every increment it cancels has
// arrived (obliviousness), needing only exactly-once FIFO delivery per
// sender.
//
// It is pure: no I/O, no clock, no goroutines, no randomness.
//
// # The algorithm
//
// A replica keeps, per cell, a clock C (C[j]: the total weight of the
// increments of the cell it applied from replica j, its own included) and,
// per counter, a map M from replica id to an entry (p, n, c): p is the last
// unit of j's increments known here, every unit of j up to n is cancelled,
// and c is the value C[j] had at j once the increment carrying p was
// applied there. The value is Σ (p − n). An increment of j is sent as
// (inc, j, p, start) with its weight w; a reset as (reset, R), R the set of
// (j, p, c) of the entries its issuer observed. The effectors are Algorithm
// 1's:
//
//	inc from j:   c := C[j] + w
//	              M[j] := max(M[j], (p, p − w, c)) if start or M[j] absent,
//	                      max(M[j], (p, 0, c))     otherwise   (entry-wise)
//	              delete M[j] if p = n and its c = c;  C[j] := c
//	reset R:      for (j, p, c) in R:
//	                M[j] absent:  M[j] := (p, p, c) only if c > C[j]
//	                otherwise:    M[j] := max(M[j], (p, p, c)),
//	                              deleted if p = n and c ≤ C[j]
//
// The inc generator at i sends p = M[i].p + w, start = false when i has an
// entry, else p = C[i] + w, start = true (a new generation: every earlier
// unit of i on this counter is cancelled, which is why n = p − w is right).
// An entry that reads p = n but whose c is beyond C[j] is a reset that
// overtook some of the increments it cancels; it stays until they arrive
// (§3 step 4), then goes.
//
// # Mapping to the paper
//
//	global replica state C           State.c, one per cell (see below)
//	per-instance state M             State.m[key], one map per counter
//	value                            State.Value, State.Values
//	inc generator + local effector   State.Inc (weighted, see below)
//	reset generator                  State.Observe, State.ObserveAll (a Context)
//	reset + local effector           State.Reset (of any Context),
//	                                 State.ResetKey, State.ResetAll
//	effectors at the other replicas  State.Apply
//	(inc, j, p, start), (reset, R)   Op (OpInc, OpReset)
//	exactly-once FIFO per sender     Outbox, Inbox (below)
//	Algorithm 2, Theorem 4.1's       alg2_test.go and the oracle of
//	adds/cancels, Props 4.2 and 5.1  random_test.go (the randomized checker)
//
// # Decisions
//
// (a) j, not i, in the inc effector. Algorithm 1 writes its last two lines
// as M.remove(i) and C[i] ← c, i being the receiver; Algorithm 2, the proof
// of Proposition 4.2 and the text of §3 all mean j, the sender. Read with i,
// a receiver never advances C[j], so every later reset entry for j waits for
// increments that arrived long ago and a fully reset counter is never
// forgotten (TestLiteralIReadingBreaksObliviousness); and the receiver's
// own C[i] is overwritten with a count of j's increments, so its next
// generation can reuse unit numbers (the checker catches the literal
// reading within a run, TestRandomCatchesBrokenRules). This package reads
// j.
//
// (b) C is scoped per cell. c = C[j] + w at a receiver equals c at j only
// if the receiver applies exactly j's stream of increments that C[j] counts
// at j. With vnodes, different partitions have different replica sets, so
// one C per node would count, at j, increments of cells some receivers never
// see: a reset's c then stays above the receiver's C[j] for ever and the
// counter is never forgotten (TestSharedClockAcrossReplicaSetsLeaks; Apply
// notices the mismatch at the first start increment, ErrOrder). So
// every State is one cell: a single counter (KindCounter), or a map of named
// counters sharing one C (KindMap, the embedded form), and each (sender,
// cell) is one FIFO stream. The cost: a cell keeps one C entry (16-byte id
// and a varint) per replica that ever incremented it, even when every
// counter in it is reset: obliviousness holds for the counters of a map,
// not for the cell. A one-counter cell therefore never shrinks to nothing;
// with RF = 3 a fully reset counter still holds about 3 × 20 bytes. Dropping
// C entries would need agreement that no entry anywhere waits for them
// (left for later). And the exactly-once FIFO channels, sequence numbers and
// outboxes are per (sender, cell), not per node pair.
//
// (c) Weighted increments. c = c + w is one op of weight w standing for the
// units p − w + 1 … p, generated and applied atomically: the start case sets
// n = p − w and C[j] advances by w. It is the composition of the w unit
// effectors: in Algorithm 2 entry-wise max commutes and the w unit messages
// fold into max(M'[j], (p, p − w or 0, C'[j] + w)); in Algorithm 1 the only
// other case, an absent entry, leaves n = p − w because the entry was
// deleted only if every earlier unit of j was cancelled and received, and
// the pairs (p, c) of one sender only grow together. The randomized checker
// proves it against the unit-level oracle (it issues weights 1–5). A delta
// of 0 is ErrZeroDelta; a negative delta is ErrDecrement: the paper's
// counter only counts up, and a reset is the way down. The sum of a
// replica's weights in a cell is limited to 2^64 − 1 (ErrOverflow).
//
// # Resetting what was observed
//
// Observe returns a Context, the reset message's R: what a read at some
// replica saw. Reset(ctx) may be called at any replica of the same cell,
// later: it cancels exactly those increments, at most the increments the
// observer knew and at least those it observed (Section 2's constraints
// hold for the observer's state), whatever has been counted since, and a
// replayed reset changes nothing. A replica that has not yet received some
// of the increments the context names keeps a waiting entry for them. A
// context must come from a replica of this cell (a made-up one can cancel
// increments nobody observed): the ring has to treat it as opaque and
// trusted, or authenticate it.
//
// # What the caller must provide: exactly-once FIFO per sender
//
// Apply must see every op of a cell from a given replica exactly once, in
// the order that replica generated them, across all the cell's counters.
// Resets need no causal order: one may overtake the increments it cancels.
// Outbox and Inbox give exactly-once FIFO over a network that loses,
// duplicates and reorders: the sender numbers each op (Outbox.Push), keeps
// it until a cumulative ack covers it (Outbox.Ack) and resends Pending now
// and then; the receiver holds ops beyond a gap (Inbox.Receive) and hands
// them over in order (Inbox.Next). Durability: generating an op, applying
// it locally and pushing it to every destination's Outbox is one durable
// write; applying an op from Next and storing the Inbox's Delivered count is
// one durable write. A crashed replica reloads both and forgets what its
// inboxes held beyond a gap. An op is never applied by its own generator
// twice (Apply refuses ops from self: Inc and Reset already applied them).
// Apply detects some violations of the order (ErrOrder: a start increment
// must have p = C[j] + w, any increment p ≤ C[j] + w), not all: a
// duplicated increment that does not start a generation, for one, goes
// unnoticed and miscounts. The checker shows that queues that reorder or
// duplicate are caught (TestRandomCatchesBrokenRules).
//
// # Storage
//
// A counter's entries are at most one per replica (|M| ≤ replicas), and by
// Proposition 5.1 M[j] exists exactly when j has an increment observed here
// or an increment of j is cancelled but not yet received. A counter whose
// value is 0 and whose cancelled increments have all arrived holds no entry
// and its key is gone from the map. Keys, Entries and ClockIDs show what is
// stored.
//
// # Encodings
//
// Every encoding starts with the version byte (1) and a type byte; integers
// are unsigned varints (encoding/binary, minimal), ids are 16 raw bytes,
// strings a uvarint length then the bytes. Decoding rejects anything that
// does not re-encode to the same bytes, and states no execution can reach.
//
//	state      01 | 01 (one counter) or 02 (map) | self id [16]
//	           C:    n, n × (id [16], C[id] ≥ 1)          ascending id
//	           keys: k, k × (key, m ≥ 1, m × (id [16], p, n, c))
//	                                       ascending key, then ascending id
//	           (a one-counter cell has at most the key ""; an entry has
//	           1 ≤ p, n ≤ p ≤ c, and p = n exactly when c > C[id])
//	inc op     01 | 11 | from [16] | key | p | w | start (00 or 01)
//	                                                  (w ≥ 1, p ≥ w)
//	reset op   01 | 12 | from [16] | context body
//	context    01 | 13 | context body
//	body       k, k × (key, m ≥ 1, m × (id [16], p, c))
//	                     ascending key, then ascending id (1 ≤ p ≤ c)
//	outbox     01 | 21 | acked | n, n × (length, payload)
//	inbox      01 | 22 | delivered
//
// An outbox's payloads are encoded ops; its i-th payload has sequence
// number acked + i. An inbox stores only its delivered count: what it held
// beyond a gap is not durable.
package reset
