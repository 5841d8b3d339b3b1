package replica

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
)

var fbfTable = coltype.TableDef{ID: 11, Keyspace: "ks", Name: "idem", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
	Options: map[string]string{counter.IdempotenceOption: `{"class": "fbf", "retry_horizon": "20s", "bits": "65536"}`}}

func op(client, seq uint64) (id [16]byte) {
	binary.BigEndian.PutUint64(id[:], client)
	binary.BigEndian.PutUint64(id[8:], seq)
	return id
}

func fbfUpdate(key string, delta int64, id [16]byte) coltype.Update {
	return coltype.Update{Table: fbfTable.ID, Key: []byte(key), Column: "c", Delta: delta, HasOp: true, OpID: id, OpTime: time.Now().UnixNano()}
}

func TestFBFDismissesRetries(t *testing.T) {
	dir := t.TempDir()
	r := mustOpen(t, testConfig(dir))
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	m, err := r.Apply(fbfUpdate("k", 5, op(1, 1)))
	if err != nil || m.Dismissed || !m.HasOp || m.OpID != op(1, 1) {
		t.Fatalf("first apply: %+v, %v", m, err)
	}
	m, err = r.Apply(fbfUpdate("k", 5, op(1, 1)))
	if err != nil || !m.Dismissed {
		t.Fatalf("retry with the same op id: %+v, %v; want dismissed", m, err)
	}
	// The same op id on another cell is another operation.
	if m, _ := r.Apply(fbfUpdate("other", 1, op(1, 1))); m.Dismissed {
		t.Fatal("the op id of one cell dismissed an update of another")
	}
	if _, err := r.Apply(coltype.Update{Table: fbfTable.ID, Key: []byte("k"), Column: "c", Delta: 2}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, r, fbfTable.ID, "k", "c"); got != 7 {
		t.Fatalf("value %d, want 7 (5 once, plus 2 without an op id)", got)
	}
	st := r.FBFStats()
	if st.Dismissed != 1 || st.NoOpID != 1 || st.Applied != 3 {
		t.Fatalf("stats %+v: want 1 dismissed, 1 without op id, 3 applied", st)
	}
	// After a restart the filter is rebuilt from the commit log.
	r.Close()
	r = mustOpen(t, testConfig(dir))
	defer r.Close()
	if m, err := r.Apply(fbfUpdate("k", 5, op(1, 1))); err != nil || !m.Dismissed {
		t.Fatalf("retry after a restart: %+v, %v; want dismissed", m, err)
	}
	if got := value(t, r, fbfTable.ID, "k", "c"); got != 7 {
		t.Fatalf("value after restart and retry %d, want 7", got)
	}
	// The log keeps the segments whose op ids are still needed, even once
	// their data is flushed.
	if err := r.Flush(fbfTable.ID); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r2 := mustOpen(t, testConfig(dir))
	defer r2.Close()
	if m, _ := r2.Apply(fbfUpdate("k", 5, op(1, 1))); !m.Dismissed {
		t.Fatal("after flush and restart, the retry was applied: the op id's segment was released")
	}
}

// TestFBFReplicaLearnsOpIDs: a replica that received the leader's shard
// with its op id dismisses the client's retry when it leads in turn.
func TestFBFReplicaLearnsOpIDs(t *testing.T) {
	leader := mustOpen(t, testConfig(t.TempDir()))
	defer leader.Close()
	follower := mustOpen(t, testConfig(t.TempDir()))
	defer follower.Close()
	for _, r := range []*Replica{leader, follower} {
		if err := r.CreateTable(fbfTable); err != nil {
			t.Fatal(err)
		}
	}
	m, err := leader.Apply(fbfUpdate("k", 3, op(9, 4)))
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.ApplyMutation(m); err != nil {
		t.Fatal(err)
	}
	if m2, _ := follower.Apply(fbfUpdate("k", 3, op(9, 4))); !m2.Dismissed {
		t.Fatal("the replica applied a retry whose op id it had received")
	}
	if got := value(t, follower, fbfTable.ID, "k", "c"); got != 3 {
		t.Fatalf("replica value %d, want 3", got)
	}
	// The follower leads a fresh operation: its own shard starts from what
	// it holds, and the old leader's shard stays.
	if _, err := follower.Apply(fbfUpdate("k", 10, op(9, 5))); err != nil {
		t.Fatal(err)
	}
	if got := value(t, follower, fbfTable.ID, "k", "c"); got != 13 {
		t.Fatalf("value %d, want 13", got)
	}
}

// TestFBFHotCounterConcurrent increments one FBF counter from many
// goroutines, each operation sent twice: the total counts each once. Run
// with -race.
func TestFBFHotCounterConcurrent(t *testing.T) {
	cfg := testConfig(t.TempDir())
	r := mustOpen(t, cfg)
	defer r.Close()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	const workers, per = 8, 200
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				for attempt := 0; attempt < 2; attempt++ {
					if _, err := r.Apply(fbfUpdate("hot", 1, op(uint64(w), uint64(i)))); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	got := value(t, r, fbfTable.ID, "hot", "c")
	st := r.FBFStats()
	// A false positive could drop a fresh operation; the filter's count of
	// dismissals tells exactly how many were dropped.
	fresh := int64(workers * per)
	if got != fresh-int64(st.Dismissed-uint64(fresh)) {
		t.Fatalf("value %d with %d dismissals of %d retries", got, st.Dismissed, fresh)
	}
	if got != fresh {
		t.Logf("%d fresh operations dropped as false positives", fresh-got)
	}
	if st.Applied != uint64(got) {
		t.Fatalf("applied %d, value %d", st.Applied, got)
	}
}

func TestFBFOptionsValidated(t *testing.T) {
	for _, bad := range []string{`{"class": "lru"}`, `{"class": "fbf", "target_fpp": "2"}`, `{"class": "fbf", "bits": "x"}`,
		`{"class": "fbf", "retry_horizon": "60s", "refresh_period": "1s", "filters": "1"}`, `not json`, `{"class": "fbf", "nope": "1"}`} {
		d := fbfTable
		d.Options = map[string]string{counter.IdempotenceOption: bad}
		if err := d.Validate(); err == nil {
			t.Errorf("idempotence %s accepted", bad)
		}
	}
	o, err := counter.ParseFBFOptions(map[string]string{"class": "fbf"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if o.RetryHorizon != 20*time.Second || time.Duration(o.Filters+1)*o.RefreshPeriod < o.RetryHorizon || o.Leader != "" {
		t.Fatalf("defaults %+v: want a 20 s horizon covered by the window and the first-replica leader", o)
	}
	_ = fmt.Sprint()
}

// TestFBFAlter changes a table's FBF options under the ids it remembers:
// an op id seen before the ALTER is still dismissed after it, turning the
// FBF off and on keeps the counter's value, and a vanilla table turned FBF
// dismisses retries from then on.
func TestFBFAlter(t *testing.T) {
	r := mustOpen(t, testConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(fbfUpdate("k", 5, op(1, 1))); err != nil {
		t.Fatal(err)
	}
	d := fbfTable
	d.Options = map[string]string{counter.IdempotenceOption: `{"class": "fbf", "retry_horizon": "20s", "bits": "131072", "hashes": "5"}`}
	d.Revision = 1
	if err := r.AlterTable(d); err != nil {
		t.Fatal(err)
	}
	if m, _ := r.Apply(fbfUpdate("k", 5, op(1, 1))); !m.Dismissed {
		t.Fatal("after ALTER of the filter's size, a retry of an update seen before was applied")
	}
	if _, err := r.Apply(fbfUpdate("k", 2, op(1, 2))); err != nil {
		t.Fatal(err)
	}
	// FBF off: the column is a vanilla counter again, and its value goes on.
	off := fbfTable
	off.Options, off.Revision = nil, 2
	if err := r.AlterTable(off); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(coltype.Update{Table: fbfTable.ID, Key: []byte("k"), Column: "c", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, r, fbfTable.ID, "k", "c"); got != 8 {
		t.Fatalf("value after FBF off and a vanilla increment = %d, want 8", got)
	}
	// And on again.
	on := fbfTable
	on.Revision = 3
	if err := r.AlterTable(on); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.Apply(fbfUpdate("k", 10, op(2, 1))); err != nil {
			t.Fatal(err)
		}
	}
	if got := value(t, r, fbfTable.ID, "k", "c"); got != 18 {
		t.Fatalf("value after FBF on again and an update sent twice = %d, want 18", got)
	}
	renamed := on
	renamed.Name = "other"
	if err := r.AlterTable(renamed); err == nil {
		t.Fatal("an ALTER that renames the table was accepted")
	}
}

// TestFBFAlterUnderLoad turns the FBF on and off while goroutines
// increment one counter; every increment counts once. Run with -race.
func TestFBFAlterUnderLoad(t *testing.T) {
	r := mustOpen(t, testConfig(t.TempDir()))
	defer r.Close()
	if err := r.CreateTable(fbfTable); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	const workers, per = 4, 150
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := r.Apply(fbfUpdate("hot", 1, op(uint64(10+w), uint64(i)))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for rev := uint64(1); rev <= 20; rev++ {
		d := fbfTable
		if rev%2 == 1 {
			d.Options = nil
		}
		d.Revision = rev
		if err := r.AlterTable(d); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if got := value(t, r, fbfTable.ID, "hot", "c"); got != workers*per-int64(r.FBFStats().Dismissed) {
		t.Fatalf("value %d after %d increments and %d dismissals", got, workers*per, r.FBFStats().Dismissed)
	}
}
