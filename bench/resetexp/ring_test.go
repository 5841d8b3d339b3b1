package resetexp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/internal/testseed"
)

func open(t *testing.T, typ string) *Ring {
	t.Helper()
	r, err := Open(t.TempDir(), 3, typ, testseed.Seed(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// must returns v, failing the test (by a panic, which the test reports)
// on an error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func heal(t *testing.T, r *Ring) {
	t.Helper()
	if ok, err := r.Heal(50); err != nil || !ok {
		t.Fatalf("anti-entropy did not settle: %v", err)
	}
}

func wantAll(t *testing.T, r *Ring, key string, want int64) {
	t.Helper()
	vs := must(r.Values(key))
	for i, v := range vs {
		if v != want {
			t.Fatalf("%s: replica %d reads %d, want %d (all: %v)", key, i, v, want, vs)
		}
	}
}

// TestConcurrentIncrementSurvivesReset is issue 13's case: after 5
// increments, one more increment led on replica A concurrent with a reset
// led on replica B (each held from the other until both are done); after
// healing every replica reads 1, whatever order the held messages arrive
// in, hints replayed twice included.
func TestConcurrentIncrementSurvivesReset(t *testing.T) {
	for _, order := range []string{"inc first", "reset first", "duplicated"} {
		t.Run(order, func(t *testing.T) {
			r := open(t, resetcol.TypeName)
			for range 5 {
				if err := r.Deliver(must(r.Inc(0, "k", 1))...); err != nil {
					t.Fatal(err)
				}
			}
			heal(t, r)
			wantAll(t, r, "k", 5)
			inc := must(r.Inc(0, "k", 1))
			del := must(r.Delete(1, "k", nil))
			if v := must(r.Value(1, "k")); v != 0 {
				t.Fatalf("the resetting replica reads %d, want 0", v)
			}
			if v := must(r.Value(0, "k")); v != 6 {
				t.Fatalf("the incrementing replica reads %d, want 6", v)
			}
			var all []Msg
			switch order {
			case "inc first":
				all = append(inc, del...)
			case "reset first":
				all = append(del, inc...)
			default:
				all = append(append(append(del, inc...), del...), inc...)
			}
			if err := r.Deliver(all...); err != nil {
				t.Fatal(err)
			}
			heal(t, r)
			wantAll(t, r, "k", 1)
			if err := r.Deliver(must(r.Inc(2, "k", 2))...); err != nil {
				t.Fatal(err)
			}
			wantAll(t, r, "k", 3)
			// c = c + 0 and a DELETE of a counter never written change nothing.
			if err := r.Deliver(must(r.Inc(1, "k", 0))...); err != nil {
				t.Fatal(err)
			}
			if err := r.Deliver(must(r.Delete(1, "never", nil))...); err != nil {
				t.Fatal(err)
			}
			wantAll(t, r, "k", 3)
			wantAll(t, r, "never", 0)
		})
	}
}

// TestVanillaCounterStaysDeleted shows what Cassandra's counter does
// (CASSANDRA-7346), as idemkv's vanilla counter reproduces it: after a
// DELETE, the counter never counts again.
func TestVanillaCounterStaysDeleted(t *testing.T) {
	r := open(t, "counter")
	for range 5 {
		if err := r.Deliver(must(r.Inc(0, "k", 1))...); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Deliver(must(r.Delete(1, "k", nil))...); err != nil {
		t.Fatal(err)
	}
	if err := r.Deliver(must(r.Inc(0, "k", 1))...); err != nil {
		t.Fatal(err)
	}
	wantAll(t, r, "k", 0)
}

// TestExactlyOnceUnderChaos: increments and resets led at random replicas,
// their mutations lost, duplicated and delivered in random order (as hints,
// retries and direct messages may arrive), anti-entropy rounds with a
// replica down now and then, and crashes with commit-log replay. Each
// phase ends healed, where every replica must read what was issued since
// the last reset (resets are led only in a healed ring, so that the value
// is known).
func TestExactlyOnceUnderChaos(t *testing.T) {
	r := open(t, resetcol.TypeName)
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 13))
	keys := []string{"a", "b", "c"}
	want := map[string]int64{}
	for phase := range 8 {
		var inFlight []Msg
		for range 60 {
			k := keys[rng.IntN(len(keys))]
			switch x := rng.IntN(10); {
			case x < 7:
				d := int64(1 + rng.IntN(5))
				inFlight = append(inFlight, must(r.Inc(rng.IntN(3), k, d))...)
				want[k] += d
			case x < 9 && len(inFlight) > 0:
				// Deliver some: maybe lose, maybe duplicate.
				rng.Shuffle(len(inFlight), func(i, j int) { inFlight[i], inFlight[j] = inFlight[j], inFlight[i] })
				n := 1 + rng.IntN(len(inFlight))
				for _, m := range inFlight[:n] {
					switch y := rng.IntN(10); {
					case y == 0: // lost
					case y == 1:
						if err := r.Deliver(m, m); err != nil {
							t.Fatal(err)
						}
					default:
						if err := r.Deliver(m); err != nil {
							t.Fatal(err)
						}
					}
				}
				// A hint may come back later: keep some delivered ones.
				if rng.IntN(2) == 0 {
					inFlight = slices.Clone(inFlight[n/2:])
				} else {
					inFlight = slices.Clone(inFlight[n:])
				}
			default:
				if _, err := r.Sync(rng.IntN(3)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if phase%3 == 2 {
			if err := r.Restart(rng.IntN(3), true); err != nil {
				t.Fatal(err)
			}
		}
		if phase%2 == 1 {
			// Storage merges the versions of a replica's own cell
			// (flush, compaction): the newest must win.
			i := rng.IntN(3)
			if err := r.Reps[i].FlushAll(); err != nil {
				t.Fatal(err)
			}
			if err := r.Reps[i].Compact(TableID, true); err != nil {
				t.Fatal(err)
			}
		}
		rng.Shuffle(len(inFlight), func(i, j int) { inFlight[i], inFlight[j] = inFlight[j], inFlight[i] })
		if err := r.Deliver(inFlight...); err != nil {
			t.Fatal(err)
		}
		heal(t, r)
		for _, k := range keys {
			wantAll(t, r, k, want[k])
		}
		// A reset of one key, led anywhere, in the healed ring.
		k := keys[rng.IntN(len(keys))]
		if err := r.Deliver(must(r.Delete(rng.IntN(3), k, nil))...); err != nil {
			t.Fatal(err)
		}
		want[k] = 0
		heal(t, r)
		wantAll(t, r, k, 0)
	}
	for i, rep := range r.Reps {
		if p := resetcol.ReplicaStats(rep).Pending; p != 0 {
			t.Errorf("replica %d: %d ops still pending after healing", i, p)
		}
	}
}

// TestDominantRead: a coordinator merging the answers of replicas that
// have not all received the same ops answers with one replica's real
// state, the one whose delivered vector dominates.
func TestDominantRead(t *testing.T) {
	r := open(t, resetcol.TypeName)
	for range 4 {
		if err := r.Deliver(must(r.Inc(0, "k", 1))...); err != nil {
			t.Fatal(err)
		}
	}
	heal(t, r)
	// Replica 1 resets; only replica 2 hears of it. Replica 0 then counts
	// 3 more that nobody hears of.
	del := must(r.Delete(1, "k", nil))
	for _, m := range del {
		if m.To == 2 {
			if err := r.Deliver(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 {
		must(r.Inc(0, "k", 1))
	}
	vals := must(r.Values("k"))
	if fmt.Sprint(vals) != "[7 0 0]" {
		t.Fatalf("replicas read %v, want [7 0 0]", vals)
	}
	var got []int64
	for _, pair := range [][2]int{{0, 1}, {1, 2}, {0, 2}, {2, 0}} {
		a, _ := must2(r.Reps[pair[0]].Read(TableID, []byte("k"), "c"))
		b, _ := must2(r.Reps[pair[1]].Read(TableID, []byte("k"), "c"))
		m := must(resetcol.Type{}.Merge(a, b))
		got = append(got, must(resetcol.Type{}.Value(m)))
	}
	// Replica 0 delivered 4 + generated 3 = 7 ops... of its own 7, and
	// none of 1's; replica 2 has 4 of 0's and 1 of 1's. The sums are 7, 5
	// (replica 1: 4 + its reset) and 5: replica 0 dominates 1 and 2 by the
	// order, replica 2 beats replica 1 on the owner tie-break or version.
	if got[0] != 7 || got[2] != 7 || got[3] != 7 {
		t.Fatalf("merged answers %v: want replica 0's 7 wherever it answers", got)
	}
	if got[1] != 0 {
		t.Fatalf("merge of replicas 1 and 2 reads %d, want 0 (both real states read 0)", got[1])
	}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// TestExperiments runs the experiment's parts small and checks their
// claims: 1 on every replica for reset_counter, 0 for the counter, no
// counter entry left after every counter is reset, two mutations per op.
func TestExperiments(t *testing.T) {
	seed := testseed.Seed(t)
	rows := must(Concurrent(t.TempDir(), seed))
	if fmt.Sprint(rows[0].Reads, rows[0].After) != "[1 1 1] [2 2 2]" || fmt.Sprint(rows[1].Reads, rows[1].After) != "[0 0 0] [0 0 0]" {
		t.Fatalf("concurrent: %+v", rows[:2])
	}
	sizes := must(Oblivious(t.TempDir(), 50, seed))
	if sizes[0].Entries != 3*3*50 || sizes[1].Entries != 0 || sizes[1].Bytes >= sizes[0].Bytes {
		t.Fatalf("oblivious: %+v", sizes)
	}
	for _, r := range must(Messages(t.TempDir(), 40, seed)) {
		if m, _, _, _ := r.PerOp(); m != 2 {
			t.Fatalf("messages: %+v", r)
		}
	}
}

// TestSampleAndReset: the samples plus the final value equal what was
// issued, under loss, duplication and reordering.
func TestSampleAndReset(t *testing.T) {
	res := must(Sample(t.TempDir(), 400, 20, testseed.Seed(t)))
	if res.Samples == 0 || res.Lost == 0 || res.Dup == 0 {
		t.Fatalf("the run did not exercise its faults: %+v", res)
	}
	t.Logf("%+v", res)
	if res.Sampled+res.Final != res.Issued {
		t.Fatalf("sampled %d + final %d != issued %d (%+v)", res.Sampled, res.Final, res.Issued, res)
	}
}

// TestPartitionOutbox: ops for a cut-off replica wait in outboxes, and
// drain when it heals.
func TestPartitionOutbox(t *testing.T) {
	rows := must(Partition(t.TempDir(), 250, testseed.Seed(t)))
	if rows[0].Pending == 0 || rows[1].Pending != 0 {
		t.Fatalf("outboxes: %+v", rows)
	}
	if r := rows[1].Reads; r[0] != r[1] || r[1] != r[2] || r[0] != 50 {
		t.Fatalf("after healing: %v, want 50 everywhere", r)
	}
}

// TestRetryWithOpID: a client's retry (same op id) is dismissed by a
// leader that applied the first attempt, whether it led it or received
// it; a dismissed retry re-sends the leader's cell, from which the other
// replicas take the ops they lack. A retry reaching a replica that has
// not received the first attempt counts it again (the limit of the op
// window: no replica knows the op).
func TestRetryWithOpID(t *testing.T) {
	r := open(t, resetcol.TypeName)
	id := [16]byte{1, 2, 3}
	now := time.Now().UnixNano() // an op time within the window
	first := must(r.IncOp(0, "k", 5, id, now))
	// The answer is lost, and so is the replication: the retry meets the
	// same leader, which dismisses it and re-sends its cell.
	retry := must(r.IncOp(0, "k", 5, id, now))
	if r.Dismissed != 1 {
		t.Fatalf("the retry at the first leader was not dismissed")
	}
	if err := r.Deliver(retry...); err != nil {
		t.Fatal(err)
	}
	wantAll(t, r, "k", 5)
	if err := r.Deliver(first...); err != nil { // the first attempt arrives late
		t.Fatal(err)
	}
	wantAll(t, r, "k", 5)
	// A retry led by a replica that received the first attempt.
	if err := r.Deliver(must(r.IncOp(1, "k", 5, id, now))...); err != nil {
		t.Fatal(err)
	}
	if r.Dismissed != 2 {
		t.Fatalf("the retry at a replica that delivered the op was not dismissed")
	}
	heal(t, r)
	wantAll(t, r, "k", 5)
}

// TestOutboxTrimmedByAck: a replica's answer to the replication of an op
// (Mutation.Acked, which the coordinator calls) trims the leader's outbox
// to it without an anti-entropy round, in memory at once and in storage
// with the cell's next write; an op a replica holds beyond a gap is not
// answered, so its outbox keeps it.
func TestOutboxTrimmedByAck(t *testing.T) {
	r := open(t, resetcol.TypeName)
	pending := func() int { return resetcol.ReplicaStats(r.Reps[0]).Pending }
	deliverAcked := func(ms []Msg) {
		t.Helper()
		for _, m := range ms {
			if err := r.Reps[m.To].ApplyMutation(m.M); err != nil {
				t.Fatal(err)
			}
			m.M.Acked(r.IDs[m.To])
		}
	}
	deliverAcked(must(r.Inc(0, "k", 1)))
	if n := pending(); n != 0 {
		t.Fatalf("%d ops in the leader's outboxes after both replicas answered, want 0", n)
	}
	storedPending := func() int {
		t.Helper()
		b, err := r.Blob(0, "k")
		if err != nil {
			t.Fatal(err)
		}
		return b.Pending()
	}
	// In storage the next anti-entropy exchange writes the trimmed cell.
	if n := storedPending(); n != 2 {
		t.Fatalf("the stored cell's outboxes hold %d ops before a write, want 2", n)
	}
	if _, err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := storedPending(); n != 0 {
		t.Fatalf("the stored cell's outboxes hold %d ops after an anti-entropy round, want 0", n)
	}
	// Replica 2 misses op 2, so op 3 is held there: not answered.
	op2 := must(r.Inc(0, "k", 1))
	op3 := must(r.Inc(0, "k", 1))
	deliverAcked(op2[:1])
	deliverAcked(op3[:1])
	if err := r.Reps[2].ApplyMutation(op3[1].M); !errors.Is(err, resetcol.ErrHeld) {
		t.Fatalf("op 3 before op 2 at replica 2: %v, want ErrHeld", err)
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d ops in the leader's outboxes, want replica 2's two", n)
	}
	// The cell's next write (op 4, which replica 2 holds too) stores the
	// trimmed outboxes: op 4 to replica 1, ops 2-4 to replica 2. Untrimmed
	// they held all four ops each.
	deliverAcked(must(r.Inc(0, "k", 1))[:1])
	if err := r.Restart(0, true); err != nil {
		t.Fatal(err)
	}
	b, err := r.Blob(0, "k")
	if err != nil {
		t.Fatal(err)
	}
	if n := b.Pending(); n != 4 {
		t.Fatalf("after a restart, the stored cell's outboxes hold %d ops, want 4", n)
	}
	heal(t, r)
	wantAll(t, r, "k", 4)
}
