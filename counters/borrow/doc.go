// Package borrow implements the Borrow-Counter (Enes, Almeida, Baquero,
// Leitão, "Borrowing an Identity for a Distributed Counter", PaPoC 2017,
// papers/borrow-counter.txt): a causal CRDT counter in which a permanent
// node (a replica of the cell) lends a transient node (a client) a dot to
// count into; the client retires by freezing its dots and the node that
// created them folds them into its own, so the state stays linear in the
// nodes active now, not in every client that ever incremented.
//
// It is pure: no I/O, no clock, no goroutines, no randomness. The paper is
// a work-in-progress report without proofs; this package fills three gaps
// (below), each with a test, and the randomized checker (random_test.go)
// shows that breaking any of them is caught.
//
// # The state (§3.2)
//
// A State is Causal⟨DotMap⟨I, DotFun⟨B × N⟩⟩⟩: for each owner id, the dots
// it counts into, each mapped to a Cell (Frozen, Count) ordered as a product
// lattice (an active dot has Frozen false), and a causal context holding
// every dot ever created or learnt. The context is kept compact: per creator
// a contiguous prefix 1..base and the dots beyond it (a "cloud"), so its
// size grows with the creators (the permanent nodes), not with the clients.
//
//	Figure 1 join (DotMap of DotFun)   State.Join
//	create_i((m, c), j)                State.Create(i, j), idempotent (c);
//	                                   State.Lend refuses retired clients
//	inc_i((m, c), n)                   State.Inc(i, n); a client: Client.Add
//	retire_i((m, c))                   State.Retire(i); a client: Client.Retire
//	transfer_i((m, c), j)              State.Transfer(i, j), restricted (a)
//	value((m, c))                      State.Value
//	Figure 2                           TestFigure2
//
// Inc picks the smallest active dot the node created itself (the paper picks
// one at random), so a permanent node always counts into its own dot; a
// plain update counted by the leader goes there too.
//
// # Decision (a): a node transfers only the dots it created
//
// transfer_i((m, c), j) as written takes every inactive dot of j, whoever
// created it, while the text says a dot returns to its creator. If a and c
// both hold b's frozen dot (created by a), both would fold its count into
// their own dot, and once their states meet every replica counts it twice
// (TestTransferOnlyOwnCreations; the checker catches the formula as written
// within its first runs of 5,000 steps). Transfer(i, j) therefore moves
// only the frozen dots of j whose creator is i. Since every dot has exactly
// one creator, it is transferred at most once, by one node, which is also
// what makes the frozen count it folds final: only the owner writes a dot's
// count, and it never writes again after freezing.
//
// # Decision (b): full states travel between permanent nodes
//
// After a transfers b's dot a2 into its own dot a1, a replica that still
// holds a2 must learn, in the same join that raises a1, that a2 is gone. A
// delta carrying a1 alone (context {a1}) raises a1 while a2 stays, and the
// replica over-counts until a's full state arrives (TestDeltaAfterTransfer;
// the checker catches such deltas). A correct delta of a1 would carry in its
// context every dot ever folded into a1, which the creator would have to
// remember per dot, for ever or until every replica has seen it. This
// package takes the other road: a permanent node sends its full state (it
// is small: one dot per permanent node and per client active now, and a
// context of one entry per creator, see TestStateSize). A client's dot has
// nothing folded into it, so a client sends only a Write of its one dot,
// and so may a node relaying it.
//
// # Decision (c): idempotent creates, and retirement closes the client's loans
//
// A borrow request whose answer is lost leaves a dot the client never
// learns; if the client retries at another replica, the first dot would stay
// active for ever, since only its owner freezes a dot. Create is therefore
// idempotent per (creator, client): asking the same creator again returns
// the same dot, active or frozen (TestCreateIdempotent). A Client remembers
// every creator it asked (Ask) and refuses to Retire while an answer is
// unknown (Unknown, ErrUnknownLoans): it asks those creators again, which is
// harmless, learns the dot and freezes it with the others. Its retirement is
// then one state holding every dot lent to it, frozen with its final count
// (TestClientLostAnswer; the checker catches clients that give up instead).
//
// When a client may leave: once one replica has acknowledged its
// retirement after making it durable (the "durable holder", as counters/
// handoff requires of retirement notices). The client need not reach the
// creators: the holder's full state carries the frozen dots to them, and
// each creator transfers its own. Until then the frozen dots are counted
// like any other, so the value is right throughout; they only occupy space.
//
// While a creator is down: its frozen dots stay in every replica's state
// (counted, not collected), and no new client can borrow from it, so what is
// left is bounded by the clients that held its dots when it went down
// (TestStateSize, "down" columns); it transfers them when it returns. A
// client that cannot learn the answer of a creator that is down either waits
// or gives up on it (Client.Abandon): the dot that creator may have lent
// (count 0) then stays active in the cell for ever, never counted wrong,
// never collected. A creator gone for good leaves its frozen dots behind the
// same way; collecting them needs one successor per gone node, decided once
// and for ever (two folders over-count, decision (a)), starting from the
// gone node's last state (else it redoes a fold the gone node made), which
// this package does not implement.
//
// A borrow request delayed in the network past the client's retirement
// would make a new dot for the gone client, active for ever. Lend (Create
// for a client's request) refuses it (ErrLateBorrow) while the state shows
// the client retired; once its frozen dots are transferred the state cannot
// tell, so whoever serves borrow requests must remember retired clients for
// as long as a request may be late (TestLateBorrowRequest). The checker
// models borrow requests as request/response calls (the answer may be lost,
// the request is not replayed late) and requires Lend never to refuse one.
//
// # Durability (what the caller must do)
//
// A creator persists its state after Create and before the dot leaves the
// node: one that resumed from an older state could lend the same dot to a
// second client. A permanent node persists before anything derived from its
// state leaves it (a state sent, a value read out), so that a crash never
// undoes what others saw. A client persists its Client before a borrow
// request, before a write and before retiring. The checker crashes
// permanent nodes, which resume from what they persisted.
//
// Persisting means surviving the crashes that may happen: where a machine
// crash can take back what was written but not fsynced (a periodic-mode
// commit log), a node fsyncs after every change it authors (a loan, its own
// dot's count, a transfer) and before acknowledging a retirement; what a
// crash then takes back was authored by others, who still hold it, and the
// join restores it. The checker's machine crashes resume from the last
// fsync; a node that skips those fsyncs is caught (periodicWindow). A fresh identity after a crash, as
// vanilla counters take, is not a substitute: the dots lent under the old
// identity must still be transferred, and folding them into the old own
// dot loses increments while folding them into the new one counts some
// twice (TestRollbackFreshIdentityUnsound).
//
// # Encoding
//
// Every encoding starts with the version byte (Version = 1) and a kind
// byte; integers are minimal uvarints (encoding/binary), ids 16 raw bytes.
// Encodings are canonical: equal values encode to equal bytes, and decoding
// rejects anything else (UnmarshalBinary returns an error, never panics).
//
// A State (kind 1), which is also the form of a client's write and of a
// retirement:
//
//	01 01
//	context: n uvarint, then n × (creator [16], base uvarint, k uvarint,
//	         k × gap uvarint), ascending creator; the creator's dots are
//	         1..base and k more: the first is base + 2 + gap, each next one
//	         the previous + 1 + gap; no entry has base 0 and k 0
//	store:   n uvarint, then n × (owner [16], k uvarint ≥ 1, k × (creator
//	         index uvarint, seq uvarint, frozen byte 0 or 1, count uvarint)),
//	         ascending owner, dots ascending (creator index, seq); the
//	         creator index points into the context's list of creators, and
//	         every dot is in the context
//
// A client's write of one dot is 44 bytes (TestWriteSize).
//
// A Client (kind 2), what a client keeps durably:
//
//	01 02 | id [16] | flags byte (bit 0: retired; other bits 0)
//	current uvarint: 0 before any dot is known, else 1 + the index of the
//	         loan counted into (which must be known)
//	loans:   n uvarint, then n × (creator [16], seq uvarint (0: answer
//	         unknown, then count 0 and not retired), count uvarint),
//	         ascending creator
package borrow
