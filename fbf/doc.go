// Package fbf implements the Forgetful Bloom Filter (FBF) of Subramanyam,
// Gupta, Leslie and Wang, "Idempotent Distributed Counters Using a Forgetful
// Bloom Filter": a set of recently seen operation ids that forgets ids after a
// bounded time, used by idemkv's FBF counters to dismiss retried increments.
//
// # Structure
//
// An N-FBF is a list of N+2 Bloom filters of m bits and k hash functions
// each: index 0 is the future filter, index 1 the present filter and indexes
// 2..N+1 the past filters, newest to oldest. The bits of each filter live in a
// github.com/bits-and-blooms/bitset. An id is hashed once per operation with
// the 128-bit murmur3 hash; the k bit positions, shared by every constituent
// filter, come from double hashing of the two 64-bit halves (see [Hash]).
//
// [Filter.TestAndAdd] is Algorithm 1 of the paper made atomic: it checks the
// id with the optimized membership test and, if absent, inserts it into the
// future and present filters, as one linearizable step. Concurrent calls do
// not share a lock: bits are set with atomic OR on the uint64 words of the
// bitsets, the list of filters is an immutable generation published through
// an atomic pointer, and calls on the same id are serialized by a small
// striped lock so that a retry racing its original cannot both be "fresh".
// An insert that raced a refresh is repeated in the new generation, so that
// no id lands in a filter one period older than its insertion time.
//
// Every t (the refresh period) the filter refreshes: the oldest filter is
// dropped, every other filter moves one place older and a new empty future
// filter is added. Time is injected: the caller drives refreshes with
// [Filter.Advance] (virtual time, used by tests and experiments), or starts
// the optional background refresher with [Filter.Start], or sets
// Config.AutoAdvance so that operations advance the filter from the clock.
//
// # Membership and the window guarantee
//
// An id inserted during a period sits, as it ages, in two consecutive
// filters (its "future copy" and "present copy"), and finally in the oldest
// filter alone. The optimized check ([Filter.Contains], Algorithm 2) therefore
// answers true if the id is in the future filter alone, in some pair of
// consecutive filters (i, i+1) with i ≥ 1, or in the oldest filter alone. The
// paper writes Algorithm 2 as an else-if chain whose "oldest alone" branch is
// unreachable when N ≥ 2 (and the paper's prototype forgets one period
// early because of it); here the oldest filter alone is always checked, for
// every N. [Filter.ContainsSimple] is the simple check (any filter), kept for
// comparison.
//
// With a fixed configuration an id inserted at time s is reported present at
// every time before s+(N+1)·t and forgotten by s+(N+2)·t: it is remembered for
// a window in ((N+1)·t, (N+2)·t]. Beyond that, a filter is never dropped
// before RetryHorizon has passed since it stopped receiving new ids, so every
// id is remembered for more than RetryHorizon whatever the adaptation does.
//
// # Analysis
//
// The false-positive probability of one Bloom filter of m bits, k hashes and
// l ids is Equation (1) of the paper in its intended form (the printed
// equation has a typo):
//
//	p(l) = (1 − e^(−k·l/m))^k
//
// The FBF's false-positive probability for the optimized check, assuming the
// constituent filters behave independently, is Equation (3):
//
//	P = 1 − (1 − p₀) · Π_{i=1}^{N} (1 − pᵢ·pᵢ₊₁) · (1 − p_{N+1})
//
// with p₀ the future filter, p₁ the present filter and p_{N+1} the oldest.
// [Filter.EstimatedFPP] evaluates it from the number of ids inserted into each
// filter (counted exactly), or, with Config.EstimateFromBits, from the number
// of set bits (pᵢ = (setᵢ/m)^k). [FilterFPP], [FBFFPP] and [SimpleFPP] expose
// the formulas. [Stats] reports the bits in use and compares the bits per
// remembered id with the optimum of a static Bloom filter, 1.44·log₂(1/p).
//
// # Adaptation
//
// With a TargetFPP the filter adapts as in Algorithm 3, evaluated every
// AdaptEvery (default one second) of filter time and right after every
// refresh: when the estimate reaches UpperFraction (0.9) × target it doubles
// the number of filters (N+2 → 2·(N+2), the new filters appended empty at the
// old end, so every remembered id is kept longer) and shortens t by
// PeriodStep; when the estimate falls to LowerFraction (0.1) × target or
// below it removes one past filter and lengthens t by PeriodStep.
//
// It differs from the paper in four ways.
//
//  1. The guaranteed window (N+1)·t never falls below RetryHorizon: a new
//     (N', t') is accepted only if (N'+1)·t' ≥ RetryHorizon, and N and t stay
//     within configured bounds (MinPast..MaxPast, MinPeriod..MaxPeriod).
//  2. Removing a filter never forgets an id early: the oldest filter is
//     dropped only once RetryHorizon has passed since it stopped being the
//     future filter; otherwise the removal waits for a later refresh.
//  3. Scaling up does not forget anything. The paper appends empty filters at
//     the old end, after which the filter that was the oldest is no longer
//     "alone" and the ids only it holds would be missed; here appended
//     filters are placeholders (no memory, never probed) that only delay the
//     dropping of real filters, and the oldest real filter is checked alone.
//  4. A capacity guard ends a period early when the present filter holds
//     the number of ids at which one filter's FPP reaches
//     CapacityFraction × TargetFPP (default 0.45), as long as the window and
//     MaxPast allow another filter. Without it a burst fills the present
//     filter, which later sits alone at the old end for the whole window and
//     keeps the FPP above target however the adaptation moves N and t.
//
// # A second structure: the aging filter, for long windows
//
// The FBF inserts every id into two Bloom filters, so it spends at least
// twice the bits of a static Bloom filter per remembered id; for a window
// of minutes at tens of thousands of ids per second that is tens of
// megabytes more than needed. [AgingFilter] remembers each id for a fixed
// window W in 1.2 to 1.5 times the Bloom filter's optimum (1.32 at p =
// 0.001, 1.49 at 0.01). It is a cuckoo filter (Fan, Andersen, Kaminsky
// and Mitzenmacher, "Cuckoo Filter: Practically Better Than Bloom",
// CoNEXT 2014): an id is an f-bit fingerprint stored in one of two
// buckets of 4 slots, the second bucket derived from the first and the
// fingerprint, so that a stored fingerprint can be moved ("kicked") to its
// other bucket to make room.
// Like the sliding-window variants of the cuckoo filter (timestamps or
// generation tags kept with each fingerprint), each slot also holds a 3-bit
// epoch tag: time is cut into epochs of W/7, an id is remembered while the
// current epoch minus its own is at most 7, and a shard is swept (its
// expired slots emptied) before any other access in a new epoch, so that
// the 3-bit tag (the epoch modulo 8) always tells the age. An id is
// therefore remembered for at least W and forgotten within W plus one
// epoch.
//
// A slot's value is the fingerprint and the tag, fingerprint << 3 | epoch
// mod 8, f + 3 bits. A fingerprint's f − 4 low bits are never all 0 (its 4
// high bits, the prefix, may be), so a slot whose f − 1 low bits are 0 is
// empty. The tables take one of two layouts (AgingConfig.Layout). Packed:
// slot k at bit k·(f + 3) of the table's little-endian 64-bit words, 0
// when empty. Semi-sorted, as in Fan et al.'s §5.2: a bucket keeps its 4
// slots in order of their prefixes and stores the 4 prefixes as one
// 12-bit code of their multiset (C(19, 4) = 3876 ≤ 2^12, where 4 prefixes
// would take 16 bits; the code of p0 ≤ p1 ≤ p2 ≤ p3 is C(p3+3, 4) +
// C(p2+2, 3) + C(p1+1, 2) + p0), then the f − 1 low bits of each slot,
// slot 0 first: 4·(f + 2) bits a bucket, bucket i at bit i·4·(f + 2); a
// slot is emptied by zeroing its low bits, its prefix left in the code.
// Semi-sorting saves a bit a slot for more CPU a test-and-add (a bucket's
// code is decoded and encoded); AgingLayoutAuto uses it only where packed
// slots would take more than 1.5 times the Bloom optimum per id (p = 0.01
// at the default load).
//
// The filter is cut into shards by hash, each with its own lock: both
// buckets of an id, in every table of its shard, belong to the shard, so a
// test-and-add (lookup, then insert with kicks) is one critical section and
// two concurrent calls on the same id cannot both see it absent. It is
// sized from the expected rate × (W + one epoch) at a peak load of 90 %
// (AgingConfig.Load) and from the target false-positive probability p: f =
// 4 + ⌈log₂(8·0.90/(16p) + 1)⌉ (a query meets 8 slots, of 16·(2^(f−4) − 1)
// fingerprints). Beyond the sized rate a
// full shard grows by tables with 2 more fingerprint bits, within MaxBytes;
// a grown table left empty is dropped. When it may not grow, it forgets an
// id older than RetryHorizon (counted in EvictedEarly), and if it holds
// none, it reports the fresh id present (counted in Saturated): it never
// forgets an id younger than the horizon. See [AgingConfig], [AgingStats]
// and docs/fbf.md.
package fbf
