// Package borrowcol is the Borrow-Counter column type, `borrow_counter`
// (counters/borrow, docs/borrow-counter.md): the natural replicas of a key
// are the counter's permanent nodes, identified by their host ids;
// clients (client.BorrowCounter) are transient nodes that borrow a dot from
// one replica, count into it and retire.
//
// A replica's id in the counter is its host id, stable across restarts,
// so that after any restart it transfers the dots it lent before. This
// relies on the durability rules of counters/borrow: a replica writes
// every change through the commit log before anything derived from it
// leaves, and fsyncs what it authored (a loan, its own dot's count, a
// transfer, a closed loan) and a retirement before it returns, whatever the
// log's sync mode (coltype.LogSyncer; in batch and group modes the write
// already waited for it, in periodic mode it costs an fsync on those
// paths, not on a client's plain write). A machine crash therefore never
// brings a creator back to an older state of what it authored: it could
// otherwise lend a dot twice, or fork its own dot (the join keeps one
// branch's count and loses the other's). Vanilla counters cover that
// window with a new counter id after an unclean start; for a Borrow-Counter
// a new id is not enough, because the dots lent under the old one must
// still be transferred and neither place to fold them is safe
// (counters/borrow's TestRollbackFreshIdentityUnsound).
//
// The cell is the replica's joined borrow.State, encoded as
// borrow.State.MarshalBinary (version byte 1, kind byte 1). It is a
// join-semilattice, so Merge is the join: memtables, flush, compaction,
// commit-log replay, hints, read repair and merged QUORUM reads need
// nothing else (the default ReadMerge).
//
// Three paths change a cell:
//
//   - A plain driver `UPDATE t SET c = c + n` is led (coltype.Leading): the
//     leader adds n to its own dot (creating it first) and replicates its
//     full state at the statement's consistency level, at least once like a
//     vanilla counter.
//   - A client's exchange (coltype.Exchanger, custom payload
//     `idemkv-borrow`, forwarded unchanged: see coltype.DirectExchanger) is
//     a borrow request, sent to one live natural replica and answered with
//     the dot the replica lent (Create, idempotent per (creator, client),
//     made durable before the answer leaves), or a client's write (one dot
//     with its cumulative count, or its retirement), sent to every live
//     natural replica (ExchangeEverywhere), joined and made durable by each
//     before it answers, and acknowledged at the statement's consistency
//     level. The payload format is documented on EncodeBorrow.
//   - Replicas exchange full states (decision (b) of counters/borrow) in the
//     coordinator's anti-entropy rounds (coltype.AntiEntropy): a cell is
//     marked for the next round when this replica changes it by a borrow, a
//     retirement, a peer's state or a transfer (a client's plain write
//     reached every live replica; one that missed it gets the retirement,
//     which carries the final count, or a read repair).
//
// After every join (a lead, an exchange, a replicated mutation seen by
// Observe) the replica folds the frozen dots it created into its own dot
// (borrow.State.TransferAll) and writes the result before it leaves the
// node.
//
// One rule is added to the pure package's (see closeUnlearnt): a dot this
// replica lent to a client that has retired elsewhere (the client has a
// frozen dot in the state) and that is still active with count 0 was never
// learnt by the client (its retirement freezes every dot it knows, in one
// state), so the creator freezes it and transfers it (0). A client does
// not name its creator (the coordinator picks the first live replica), so
// a client whose borrow answer was lost while that replica went down
// retries at another one and never learns the first loan; the rule
// collects that loan when its creator sees the retirement before the
// client's other dots are transferred away. Otherwise the loan (count 0)
// stays: the value is right, the dot is not collected (a known gap, see
// docs/borrow-counter.md).
//
// A borrow request from a client that has retired is a late copy (a
// client asks for every loan before it retires): it is refused with
// borrow.ErrLateBorrow when the state shows the client retired or the
// replica saw one of its frozen dots in the cell less than
// RetiredRetention ago, instead of lending a dot nobody would retire. That
// memory is kept in the replica's counter cache (cellcache, sized by
// counter_cache_size_in_mb) beside the other designs' cell states, so it
// is bounded by the cache's size: under more retirements than the cache
// holds, the least recently seen are forgotten first.
//
// Importing the package registers the type (init).
package borrowcol
