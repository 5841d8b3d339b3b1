package replica

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
)

// keepAllSegments retains every commit log segment, as an operator's backup
// or an FBF column needing its op ids would, so that flushed records are
// still in the log at the next replay.
func keepAllSegments(commitlog.SegmentInfo) bool { return true }

// TestReplayAfterFlush shows why Cassandra 2.1 logs shards: with every
// flushed record replayed again (ReplayAll, the pre-CASSANDRA-2419 bug), the
// vanilla counter stays exact while the 2.0 legacy counter counts the
// replayed deltas twice.
func TestReplayAfterFlush(t *testing.T) {
	for _, tc := range []struct {
		typ       string
		replayAll bool
		want      int64
	}{
		{"counter", true, 10},
		{"legacy_counter", false, 10},
		{"legacy_counter", true, 20},
	} {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.CommitLog.Retain = keepAllSegments
		cfg.ReplayAll = tc.replayAll
		r := mustOpen(t, cfg)
		d := coltype.TableDef{ID: 1, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: tc.typ}}}
		if err := r.CreateTable(d); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			if _, err := r.Apply(coltype.Update{Table: 1, Key: []byte("k"), Column: "c", Delta: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Flush(1); err != nil {
			t.Fatal(err)
		}
		r.Close()
		r = mustOpen(t, cfg)
		if got := value(t, r, 1, "k", "c"); got != tc.want {
			t.Errorf("%s, replay all %v: value after replay %d, want %d", tc.typ, tc.replayAll, got, tc.want)
		}
		r.Close()
	}
}

// TestCorruptLogRefusesToOpen flips a byte inside an early record: the
// replica refuses to open, naming the file and offset, unless the operator
// asks to skip corrupt records; then the rest is recovered and nothing
// corrupt is applied.
func TestCorruptLogRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	r := mustOpen(t, cfg)
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "commitlog", "*.log"))
	sort.Strings(segs)
	var seg string
	for _, s := range segs {
		if fi, _ := os.Stat(s); fi.Size() > 1000 {
			seg = s
		}
	}
	if seg == "" {
		t.Fatalf("no segment with records among %v", segs)
	}
	b, _ := os.ReadFile(seg)
	b[200] ^= 0x40 // inside an early record, well before the tail
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(cfg)
	var ce *commitlog.CorruptionError
	if !errors.As(err, &ce) || ce.Path != seg {
		t.Fatalf("open with a corrupt record: %v, want a CorruptionError naming %s", err, seg)
	}
	cfg.CommitLog.SkipCorrupt = true
	r = mustOpen(t, cfg)
	defer r.Close()
	// Each record holds the whole shard, so losing one early record loses no
	// later increment: the value is the last intact shard's.
	if got := value(t, r, 7, "k", "a"); got != 20 {
		t.Fatalf("value after skipping the corrupt record %d, want 20", got)
	}
}
