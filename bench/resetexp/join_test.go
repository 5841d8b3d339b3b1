package resetexp

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/counters"
)

// joinScenario runs a join of replica 2 (J) into the replica set {0, 1} of
// one reset_counter cell (docs/reset-counter.md, "Joining and leaving"):
// 0 leads +5 (delivered to 1) and +3 (in flight to 1); the current
// replicas prepare the cell for J (unless prepare is false); 1 makes J's
// snapshot, which lacks the +3; the +3 reaches 1 and 1 acknowledges it to
// 0; J adopts the snapshot; 0 leads +1 addressed to J as a pending
// replica; then everything is delivered and healed. It returns the three
// replicas' values.
func joinScenario(t *testing.T, prepare bool) []int64 {
	t.Helper()
	r, err := Open(t.TempDir(), 3, resetcol.TypeName, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const key = "k"
	cur, joiner := []counters.ID{r.IDs[0], r.IDs[1]}, r.IDs[2]
	lead := func(i int, u coltype.Update, pending ...counters.ID) coltype.Mutation {
		t.Helper()
		u.Table, u.Key, u.Column, u.Replicas, u.Pending = TableID, []byte(key), "c", cur, pending
		m, err := r.Reps[i].Apply(u)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	deliver := func(to int, m coltype.Mutation) {
		t.Helper()
		if err := r.Reps[to].ApplyMutation(m); err != nil && !errors.Is(err, resetcol.ErrHeld) {
			t.Fatal(err)
		}
	}
	syncPair := func(a, b int) {
		t.Helper()
		view, err := r.Reps[a].SyncView(TableID, []byte(key), "c", r.IDs[b])
		if err != nil {
			t.Fatal(err)
		}
		reply, err := r.Reps[b].Exchange(TableID, []byte(key), "c", view)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reps[a].Exchange(TableID, []byte(key), "c", reply); err != nil {
			t.Fatal(err)
		}
	}
	deliver(1, lead(0, coltype.Update{Delta: 5}))
	inFlight := lead(0, coltype.Update{Delta: 3})
	if prepare {
		for i := range 2 {
			if err := r.Reps[i].PrepareJoin(TableID, []byte(key), "c", joiner); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, ok, err := r.Reps[1].SnapshotFor(TableID, []byte(key), "c", joiner)
	if err != nil || !ok {
		t.Fatalf("snapshot: %v %v", ok, err)
	}
	deliver(1, inFlight)
	syncPair(0, 1) // 1 acknowledges the +3: 0 drops it from its outbox to 1
	if err := r.Reps[2].ApplyMutation(coltype.Mutation{Table: TableID, Key: []byte(key), Cell: snap}); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if v, _ := r.Value(2, key); v != 5 {
		t.Fatalf("J after adopting reads %d, want 5 (the snapshot's)", v)
	}
	m := lead(0, coltype.Update{Delta: 1}, joiner)
	deliver(1, m)
	deliver(2, m)
	// Heal exchanges among all three (J is normal now); a joiner stuck on
	// a gap never settles, so only errors count here.
	if _, err := r.Heal(20); err != nil {
		t.Fatal(err)
	}
	vs, err := r.Values(key)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestJoinAdoptsSnapshot: with the prepare step, the joiner gets the op
// its snapshot lacked from the origin's outbox and reads what the others
// read; without it, the origin's outbox to the joiner, made at its next
// op from the outbox to the snapshot's source that was already trimmed,
// starts after that op, and the joiner waits for it for ever (the prepare
// step is what makes the join sound).
func TestJoinAdoptsSnapshot(t *testing.T) {
	if got := fmt.Sprint(joinScenario(t, true)); got != "[9 9 9]" {
		t.Fatalf("with prepare, replicas read %s, want [9 9 9]", got)
	}
	if got := fmt.Sprint(joinScenario(t, false)); got == "[9 9 9]" {
		t.Fatalf("without prepare, replicas read %s: the scenario does not exercise the prepare step", got)
	}
}

// TestJoinRefusesStaleSnapshot: a joiner that already delivered an op a
// snapshot lacks refuses it (coltype.ErrStaleSnapshot) and adopts a newer
// one; a snapshot it covers changes nothing.
func TestJoinRefusesStaleSnapshot(t *testing.T) {
	r, err := Open(t.TempDir(), 3, resetcol.TypeName, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	key := []byte("k")
	cur, joiner := []counters.ID{r.IDs[0], r.IDs[1]}, r.IDs[2]
	m, err := r.Reps[0].Apply(coltype.Update{Table: TableID, Key: key, Column: "c", Delta: 4, Replicas: cur})
	if err != nil {
		t.Fatal(err)
	}
	own, err := r.Reps[1].Apply(coltype.Update{Table: TableID, Key: key, Column: "c", Delta: 10, Replicas: cur})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reps[0].ApplyMutation(coltype.Mutation{Table: TableID, Key: key, Cell: own.Cell}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := r.Reps[i].PrepareJoin(TableID, key, "c", joiner); err != nil {
			t.Fatal(err)
		}
	}
	// 1 has not received the +4 yet; J gets it from 0's prepared outbox.
	if err := r.Reps[1].ApplyMutation(coltype.Mutation{Table: TableID, Key: key, Cell: m.Cell}); err != nil {
		t.Fatal(err)
	}
	view, err := r.Reps[0].SyncView(TableID, key, "c", joiner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reps[2].Exchange(TableID, key, "c", view); err != nil {
		t.Fatal(err)
	}
	m2, err := r.Reps[0].Apply(coltype.Update{Table: TableID, Key: key, Column: "c", Delta: 1, Replicas: cur, Pending: []counters.ID{joiner}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reps[2].ApplyMutation(coltype.Mutation{Table: TableID, Key: key, Cell: m2.Cell}); err != nil {
		t.Fatal(err)
	}
	// 1's snapshot now holds the +4 and its own +10, but not the +1,
	// which J delivered (and J lacks the +10).
	stale, ok, err := r.Reps[1].SnapshotFor(TableID, key, "c", joiner)
	if err != nil || !ok {
		t.Fatalf("snapshot: %v %v", ok, err)
	}
	if err := r.Reps[2].ApplyMutation(coltype.Mutation{Table: TableID, Key: key, Cell: stale}); !errors.Is(err, coltype.ErrStaleSnapshot) {
		t.Fatalf("adopting a snapshot behind the joiner: %v, want ErrStaleSnapshot", err)
	}
	if err := r.Reps[1].ApplyMutation(coltype.Mutation{Table: TableID, Key: key, Cell: m2.Cell}); err != nil {
		t.Fatal(err)
	}
	fresh, _, err := r.Reps[1].SnapshotFor(TableID, key, "c", joiner)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is covered: nothing changes
		if err := r.Reps[2].ApplyMutation(coltype.Mutation{Table: TableID, Key: key, Cell: fresh}); err != nil {
			t.Fatalf("adopting a current snapshot: %v", err)
		}
	}
	if ok, err := r.Heal(20); err != nil || !ok {
		t.Fatalf("heal: %v %v", ok, err)
	}
	if vs, _ := r.Values("k"); fmt.Sprint(vs) != "[15 15 15]" {
		t.Fatalf("replicas read %v, want [15 15 15]", vs)
	}
}
