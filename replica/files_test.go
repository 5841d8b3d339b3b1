package replica

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/sstable"
	"github.com/idemkv/idemkv/vfs"
)

// logRecorder keeps a replica's log records, for tests that check what was
// logged.
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logRecorder) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// records returns the log records whose message contains msg.
func (l *logRecorder) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(l.buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

func tableDir(dir string, d coltype.TableDef) string {
	return filepath.Join(dir, "data", fmt.Sprintf("%s-%s-%d", d.Keyspace, d.Name, d.ID))
}

// flushedReplica creates counterTable in dir, increments k/a n times in
// n separate flushes (no compaction), and closes the replica.
func flushedReplica(t *testing.T, dir string, flushes int) {
	t.Helper()
	cfg := testConfig(dir)
	cfg.Compaction.Disabled = true
	r := mustOpen(t, cfg)
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	for range flushes {
		if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 1}); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(7); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// TestListedGenerationMissingRefusesToStart removes the TOC, then a
// component, of a live generation: Open fails naming the file and deletes
// nothing.
func TestListedGenerationMissingRefusesToStart(t *testing.T) {
	for _, comp := range []string{"TOC.txt", "Data.db", "Filter.db"} {
		t.Run(comp, func(t *testing.T) {
			dir := t.TempDir()
			flushedReplica(t, dir, 2)
			td := tableDir(dir, counterTable)
			gens, err := sstable.ReadManifest(nil, td)
			if err != nil || !slices.Equal(gens, []uint64{1, 2}) {
				t.Fatalf("manifest after two flushes = %v, %v; want [1 2]", gens, err)
			}
			victim := filepath.Join(td, "ik-1-big-"+comp)
			if err := os.Remove(victim); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadDir(td)
			r, err := Open(testConfig(dir))
			if err == nil {
				r.Close()
				t.Fatalf("Open succeeded with %s missing", victim)
			}
			if !strings.Contains(err.Error(), "ik-1-big-"+comp) || !strings.Contains(err.Error(), sstable.ManifestName) {
				t.Fatalf("Open error %q does not name the missing file and the manifest", err)
			}
			after, _ := os.ReadDir(td)
			if len(after) != len(before) {
				t.Fatalf("a refused Open changed the table directory: %d entries, then %d", len(before), len(after))
			}
		})
	}
}

// TestCorruptManifestRefusesToStart damages the manifest itself.
func TestCorruptManifestRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	flushedReplica(t, dir, 1)
	name := filepath.Join(tableDir(dir, counterTable), sstable.ManifestName)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-6] ^= 1
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := Open(testConfig(dir)); err == nil || !errors.Is(err, sstable.ErrCorrupt) {
		if r != nil {
			r.Close()
		}
		t.Fatalf("Open with a corrupt manifest: err = %v, want ErrCorrupt", err)
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	// A version 2 schema promises a manifest in every table directory.
	if r, err := Open(testConfig(dir)); err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "ik-1-big-TOC.txt") {
		if r != nil {
			r.Close()
		}
		t.Fatalf("Open with no manifest: err = %v, want one naming the files and wrapping fs.ErrNotExist", err)
	}
}

// TestLeftoversRemovedAndLogged plants the files of an interrupted flush (an
// unlisted generation, complete or not) and a temporary file of a live
// generation: Open removes each, logging it at Warn with path and reason.
func TestLeftoversRemovedAndLogged(t *testing.T) {
	dir := t.TempDir()
	flushedReplica(t, dir, 1)
	td := tableDir(dir, counterTable)
	planted := []string{"ik-5-big-Data.db.tmp", "ik-5-big-Index.db", "ik-6-big-Data.db", "ik-6-big-TOC.txt", "ik-1-big-Summary.db.tmp"}
	for _, n := range planted {
		if err := os.WriteFile(filepath.Join(td, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	orphan := filepath.Join(dir, "data", "ks-old-99")
	if err := os.MkdirAll(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs logRecorder
	cfg := testConfig(dir)
	cfg.Logger = logs.logger()
	r := mustOpen(t, cfg)
	if recs := logs.records(t, "directory of no table"); len(recs) != 1 || recs[0]["path"] != orphan || !fileExists(orphan) {
		t.Fatalf("orphan directory logged as %v (still there: %v), want one Warn naming %s, left in place", recs, fileExists(orphan), orphan)
	}
	if got := value(t, r, 7, "k", "a"); got != 1 {
		t.Fatalf("value %d, want 1", got)
	}
	// New generations do not reuse the leftovers' numbers.
	if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(7); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if gens, err := sstable.ReadManifest(nil, td); err != nil || !slices.Equal(gens, []uint64{1, 7}) {
		t.Fatalf("manifest = %v, %v; want [1 7]", gens, err)
	}
	warned := map[string]bool{}
	for _, m := range logs.records(t, "removing SSTable leftover") {
		if m["level"] != "WARN" || m["reason"] == "" {
			t.Fatalf("leftover removal logged as %v", m)
		}
		warned[m["path"].(string)] = true
	}
	for _, n := range planted {
		p := filepath.Join(td, n)
		if fileExists(p) {
			t.Errorf("leftover %s not removed", n)
		}
		if !warned[p] {
			t.Errorf("removal of %s not logged", n)
		}
	}
	if len(warned) != len(planted) {
		t.Errorf("%d removals logged, %d files planted", len(warned), len(planted))
	}
	if !fileExists(filepath.Join(td, "ik-1-big-Data.db")) {
		t.Error("a live generation's file was removed")
	}
}

// rewriteSchema edits the schema file of dir.
func rewriteSchema(t *testing.T, dir string, edit func(*schemaDoc)) {
	t.Helper()
	name := filepath.Join(dir, schemaFile)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc schemaDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(&doc)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationAdoptsCompleteGenerations opens a directory written before
// manifests (version 1 schema, no MANIFEST): its complete generations are
// adopted, the migration is logged, and the schema becomes version 2.
func TestMigrationAdoptsCompleteGenerations(t *testing.T) {
	dir := t.TempDir()
	flushedReplica(t, dir, 3)
	td := tableDir(dir, counterTable)
	if err := os.Remove(filepath.Join(td, sstable.ManifestName)); err != nil {
		t.Fatal(err)
	}
	rewriteSchema(t, dir, func(d *schemaDoc) { d.Version = 1 })
	var logs logRecorder
	cfg := testConfig(dir)
	cfg.Logger = logs.logger()
	r := mustOpen(t, cfg)
	if got := value(t, r, 7, "k", "a"); got != 3 {
		t.Fatalf("value after migration %d, want 3", got)
	}
	r.Close()
	if gens, err := sstable.ReadManifest(nil, td); err != nil || !slices.Equal(gens, []uint64{1, 2, 3}) {
		t.Fatalf("manifest after migration = %v, %v; want [1 2 3]", gens, err)
	}
	if n := len(logs.records(t, "adopting")); n != 1 {
		t.Fatalf("migration logged %d times, want 1", n)
	}
	if doc, _, err := loadSchema(vfs.Default, dir); err != nil || doc.Version != schemaVersion {
		t.Fatalf("schema after migration: version %d, %v; want %d", doc.Version, err, schemaVersion)
	}
}

// TestManifestFollowsFlushAndCompaction checks that the manifest lists
// exactly the live SSTables after flushes and compactions.
func TestManifestFollowsFlushAndCompaction(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Compaction = Compaction{MinThreshold: 2, MinSSTableSize: 1}
	r := mustOpen(t, cfg)
	defer r.Close()
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	td := tableDir(dir, counterTable)
	for i := range 7 {
		if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte{byte(i)}, Column: "a", Delta: 1}); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(7); err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			if err := r.Compact(7, true); err != nil {
				t.Fatal(err)
			}
		}
		tb, _ := r.table(7)
		tb.mu.RLock()
		var live []uint64
		for _, s := range tb.view.sstables {
			live = append(live, s.Meta().Generation)
		}
		tb.mu.RUnlock()
		slices.Sort(live)
		gens, err := sstable.ReadManifest(nil, td)
		if err != nil || !slices.Equal(gens, live) {
			t.Fatalf("after flush %d: manifest %v (%v), live SSTables %v", i, gens, err, live)
		}
		onDisk, err := sstable.ListFS(nil, td)
		if err != nil || !slices.Equal(onDisk, live) {
			t.Fatalf("after flush %d: complete generations on disk %v (%v), live %v", i, onDisk, err, live)
		}
	}
	if st := r.Stats(); st.Compactions == 0 {
		t.Fatal("no compaction ran")
	}
}

// TestSchemaMissingRefusesToStart deletes schema.json from a directory whose
// tables hold SSTables, then from one whose commit log holds records.
func TestSchemaMissingRefusesToStart(t *testing.T) {
	t.Run("sstables", func(t *testing.T) {
		dir := t.TempDir()
		flushedReplica(t, dir, 1)
		if err := os.Remove(filepath.Join(dir, schemaFile)); err != nil {
			t.Fatal(err)
		}
		r, err := Open(testConfig(dir))
		if err == nil {
			r.Close()
			t.Fatal("Open succeeded without the schema of a directory holding tables")
		}
		if !strings.Contains(err.Error(), "schema.json is missing") || !strings.Contains(err.Error(), "ks-hits-7") {
			t.Fatalf("error %q does not explain the missing schema and name the table", err)
		}
		if !fileExists(filepath.Join(tableDir(dir, counterTable), "ik-1-big-Data.db")) {
			t.Fatal("refused Open removed files")
		}
	})
	t.Run("commitlog", func(t *testing.T) {
		dir := t.TempDir()
		r := mustOpen(t, testConfig(dir))
		if err := r.CreateTable(counterTable); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 1}); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if err := os.Remove(filepath.Join(dir, schemaFile)); err != nil {
			t.Fatal(err)
		}
		r, err := Open(testConfig(dir))
		if err == nil {
			r.Close()
			t.Fatal("Open succeeded without the schema of a commit log holding records")
		}
		if !strings.Contains(err.Error(), "schema.json is missing") || !strings.Contains(err.Error(), "table 7") {
			t.Fatalf("error %q does not explain the missing schema and name the table", err)
		}
	})
	t.Run("fresh", func(t *testing.T) {
		// A node that never had a table starts with or without its schema.
		dir := t.TempDir()
		r := mustOpen(t, testConfig(dir))
		r.Close()
		if err := os.Remove(filepath.Join(dir, schemaFile)); err != nil {
			t.Fatalf("a fresh replica wrote no schema: %v", err)
		}
		r = mustOpen(t, testConfig(dir))
		r.Close()
	})
}

// TestReplayOfDroppedAndUnknownTables: records of a dropped table are
// skipped and logged once with their count; records of a table the schema
// neither holds nor lists as dropped fail the open, unless the schema is
// version 1 (which kept no dropped ids).
func TestReplayOfDroppedAndUnknownTables(t *testing.T) {
	const n = 25
	write := func(t *testing.T, drop bool) string {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.CommitLog.Retain = keepAllSegments
		r := mustOpen(t, cfg)
		if err := r.CreateTable(counterTable); err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if drop {
			if err := r.DropTable(7); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
		return dir
	}
	t.Run("dropped", func(t *testing.T) {
		dir := write(t, true)
		var logs logRecorder
		cfg := testConfig(dir)
		cfg.Logger = logs.logger()
		r := mustOpen(t, cfg)
		r.Close()
		recs := logs.records(t, "dropped table")
		if len(recs) != 1 || recs[0]["table"] != float64(7) || recs[0]["records"] != float64(n) {
			t.Fatalf("skipped records logged as %v, want one record for table 7 with %d records", recs, n)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		dir := write(t, false)
		rewriteSchema(t, dir, func(d *schemaDoc) { d.Tables = nil })
		r, err := Open(testConfig(dir))
		if err == nil {
			r.Close()
			t.Fatal("Open replayed records of a table the schema does not know")
		}
		if !strings.Contains(err.Error(), "table 7") || !strings.Contains(err.Error(), "dropped") {
			t.Fatalf("error %q does not name the unknown table", err)
		}
	})
	t.Run("legacy", func(t *testing.T) {
		dir := write(t, false)
		rewriteSchema(t, dir, func(d *schemaDoc) { d.Tables, d.Version, d.Dropped = nil, 1, nil })
		var logs logRecorder
		cfg := testConfig(dir)
		cfg.Logger = logs.logger()
		r := mustOpen(t, cfg)
		r.Close()
		if recs := logs.records(t, "skipped"); len(recs) != 1 || recs[0]["records"] != float64(n) {
			t.Fatalf("skipped records logged as %v, want once with %d records", recs, n)
		}
		doc, _, err := loadSchema(vfs.Default, dir)
		if err != nil || doc.Version != schemaVersion || !slices.Equal(doc.Dropped, []uint64{7}) {
			t.Fatalf("schema after a version 1 open: %+v, %v; want version %d, dropped [7]", doc, err, schemaVersion)
		}
		// From now on the id is a dropped table's.
		r = mustOpen(t, testConfig(dir))
		r.Close()
	})
}

// TestCorruptBlockIsLoggedAndCounted flips a byte inside the first data
// block of a live SSTable: reads of it fail with an error naming the file,
// are logged at Error with file and offset, and counted in Stats.
func TestCorruptBlockIsLoggedAndCounted(t *testing.T) {
	dir := t.TempDir()
	var logs logRecorder
	cfg := testConfig(dir)
	cfg.Logger = logs.logger()
	cfg.NoCounterCache = true
	r := mustOpen(t, cfg)
	defer r.Close()
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 5}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(7); err != nil {
		t.Fatal(err)
	}
	if got := value(t, r, 7, "k", "a"); got != 5 {
		t.Fatalf("value %d before damage, want 5", got)
	}
	if st := r.Stats(); st.CorruptBlocks != 0 {
		t.Fatalf("CorruptBlocks = %d before damage", st.CorruptBlocks)
	}
	data := filepath.Join(tableDir(dir, counterTable), "ik-1-big-Data.db")
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-6] ^= 0x08 // inside the only block's payload
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.Value(7, []byte("k"), "a")
	if !errors.Is(err, sstable.ErrCorrupt) || !strings.Contains(err.Error(), data) {
		t.Fatalf("read of a corrupt block: err = %v, want ErrCorrupt naming %s", err, data)
	}
	if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 1}); !errors.Is(err, sstable.ErrCorrupt) {
		t.Fatalf("leader update over a corrupt block: err = %v, want ErrCorrupt", err)
	}
	if _, err := r.Scan(7, nil, math.MinInt64, math.MaxInt64, 10); !errors.Is(err, sstable.ErrCorrupt) {
		t.Fatalf("scan over a corrupt block: err = %v, want ErrCorrupt", err)
	}
	if st := r.Stats(); st.CorruptBlocks != 3 {
		t.Fatalf("CorruptBlocks = %d after three failed reads, want 3", st.CorruptBlocks)
	}
	recs := logs.records(t, "corrupt SSTable block")
	if len(recs) != 3 {
		t.Fatalf("%d corrupt-block log records, want 3", len(recs))
	}
	for _, m := range recs {
		if m["level"] != "ERROR" || m["file"] != data || m["offset"] != float64(0) {
			t.Fatalf("corrupt block logged as %v, want ERROR with file %s offset 0", m, data)
		}
	}
}

// TestAllFilesOnConfigFS runs a replica on MemFS: its host id, schema, commit
// log and SSTables are there, and DropTable removes the table's directory
// there.
func TestAllFilesOnConfigFS(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/node")
	cfg.FS = mem
	r := mustOpen(t, cfg)
	if err := r.CreateTable(counterTable); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(coltype.Update{Table: 7, Key: []byte("k"), Column: "a", Delta: 2}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(7); err != nil {
		t.Fatal(err)
	}
	td := tableDir("/node", counterTable)
	for _, name := range []string{"/node/host_id", "/node/" + schemaFile, td + "/" + sstable.ManifestName, td + "/ik-1-big-TOC.txt"} {
		if _, err := mem.Stat(name); err != nil {
			t.Errorf("%s not on the configured FS: %v", name, err)
		}
	}
	if ents, err := mem.ReadDir("/node/commitlog"); err != nil || len(ents) == 0 {
		t.Errorf("no commit log segment on the configured FS: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, cfg)
	defer r.Close()
	if got := value(t, r, 7, "k", "a"); got != 2 {
		t.Fatalf("value after reopen on MemFS %d, want 2", got)
	}
	if err := r.DropTable(7); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(td); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("dropped table's directory still on the FS: %v", err)
	}
	if fileExists("/node") {
		t.Fatal("the replica wrote to the operating system's filesystem")
	}
}
