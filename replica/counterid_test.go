package replica

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
)

// copyDir copies a closed replica's data directory: the image a power cut
// would leave if it came right after the directory was copied.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLeaderShardGoneBackLosesNothing is the leader whose own shard goes
// back (a power cut in periodic mode, a segment cut by a disk fault): it led
// 10 increments that the other replica holds, comes back holding only the
// first 5, and leads 3 more. Written under its old counter id, the 3 new
// shards would reuse clocks 6–8 that the other replica holds with higher
// counts and the merge would drop them (10 read back for 13
// acknowledged). After an unclean start the node writes under a new
// counter id, and every increment is kept.
func TestLeaderShardGoneBackLosesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table coltype.TableDef
		op    bool
	}{
		{"vanilla", counterTable, false},
		{"fbf", fbfTable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			leaderDir, otherDir, imageDir := filepath.Join(root, "leader"), filepath.Join(root, "other"), filepath.Join(root, "image")
			leader, other := mustOpen(t, testConfig(leaderDir)), mustOpen(t, testConfig(otherDir))
			defer func() { other.Close() }()
			col := tc.table.Columns[0].Name
			for _, r := range []*Replica{leader, other} {
				if err := r.CreateTable(tc.table); err != nil {
					t.Fatal(err)
				}
			}
			seq := uint64(0)
			lead := func(r *Replica, n int) {
				t.Helper()
				for i := 0; i < n; i++ {
					seq++
					u := coltype.Update{Table: tc.table.ID, Key: []byte("k"), Column: col, Delta: 1}
					if tc.op {
						u = fbfUpdate("k", 1, op(1, seq))
					}
					m, err := r.Apply(u)
					if err != nil {
						t.Fatal(err)
					}
					if err := other.ApplyMutation(m); err != nil {
						t.Fatal(err)
					}
				}
			}
			lead(leader, 5)
			if err := leader.Close(); err != nil {
				t.Fatal(err)
			}
			copyDir(t, leaderDir, imageDir)
			// A power cut leaves no clean-shutdown marker.
			if err := os.Remove(filepath.Join(imageDir, cleanShutdownFile)); err != nil {
				t.Fatal(err)
			}
			leader = mustOpen(t, testConfig(leaderDir))
			if leader.CounterID() != leader.HostID() {
				t.Fatalf("a clean restart renewed the counter id")
			}
			lead(leader, 5)
			if err := leader.Close(); err != nil {
				t.Fatal(err)
			}
			// The leader comes back from the image: the last 5 increments
			// are gone from its own storage, not from the other replica.
			leader = mustOpen(t, testConfig(imageDir))
			defer func() { leader.Close() }()
			if leader.CounterID() == leader.HostID() {
				t.Fatalf("an unclean start kept the counter id %s", leader.CounterID())
			}
			// FBF updates led before the unclean stop are in doubt until
			// the other replicas answer (see TestInDoubtResolution); here no other
			// leader counted them.
			inDoubt := leader.InDoubt()
			if tc.op != (len(inDoubt) == 5) {
				t.Fatalf("%d updates in doubt after the unclean start", len(inDoubt))
			}
			for _, op := range inDoubt {
				if _, err := leader.ResolveInDoubt(op, true); err != nil {
					t.Fatal(err)
				}
			}
			lead(leader, 3)
			a, _, err := leader.Read(tc.table.ID, []byte("k"), col)
			if err != nil {
				t.Fatal(err)
			}
			b, _, err := other.Read(tc.table.ID, []byte("k"), col)
			if err != nil {
				t.Fatal(err)
			}
			merged, err := leader.MergeCells(tc.table.ID, a, b)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := leader.CellValue(tc.table.ID, merged); err != nil || v != 13 {
				t.Fatalf("replicas merge to %d (%v) after 13 acknowledged increments", v, err)
			}
			// The new id survives a clean restart, and the old one is kept.
			id := leader.CounterID()
			leader.Close()
			leader = mustOpen(t, testConfig(imageDir))
			if leader.CounterID() != id || !leader.counterIDs.owns(leader.HostID()) {
				t.Fatalf("after a clean restart: counter id %s (want %s), past %v", leader.CounterID(), id, leader.counterIDs.past)
			}
		})
	}
}

func TestCounterIDsFileRejectsBadBytes(t *testing.T) {
	for _, b := range []string{"", "\n", "zz\n", "0011\n", "00112233445566778899aabbccddeeff\n00112233445566778899aabbccddeeff\n"} {
		if _, err := parseCounterIDs([]byte(b)); err == nil {
			t.Errorf("parseCounterIDs(%q) accepted", b)
		}
	}
	ci := counterIdentity{current: counters.ID{1}, past: []counters.ID{{2}, {3}}}
	ids, err := parseCounterIDs(formatCounterIDs(ci))
	if err != nil || len(ids) != 3 || ids[0] != ci.current || ids[2] != ci.past[1] {
		t.Fatalf("round trip: %v %v", ids, err)
	}
}

func FuzzParseCounterIDs(f *testing.F) {
	f.Add([]byte("00112233445566778899aabbccddeeff\n"))
	f.Add([]byte("00112233445566778899aabbccddeeff\nffeeddccbbaa99887766554433221100\n"))
	f.Add([]byte("zz"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := parseCounterIDs(b)
		if err != nil {
			return
		}
		again, err := parseCounterIDs(formatCounterIDs(counterIdentity{current: ids[0], past: ids[1:]}))
		if err != nil || len(again) != len(ids) {
			t.Fatalf("ids %v do not round-trip: %v %v", ids, again, err)
		}
		for i := range ids {
			if again[i] != ids[i] {
				t.Fatalf("id %d: %s became %s", i, ids[i], again[i])
			}
		}
	})
}
