package replica

import (
	"io/fs"
	"sync"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/vfs"
)

// crashPointFS is a MemFS that takes the crash image (CrashClone) just
// before its at-th mutating operation (create, write, sync, rename,
// removal, directory sync, truncate): a crash at every point of the code
// under test can be tried in turn.
type crashPointFS struct {
	*vfs.MemFS
	mu    sync.Mutex
	ops   int
	at    int
	image *vfs.MemFS
	hook  func() // called with mu held when the image is taken
}

func (c *crashPointFS) op() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops++
	if c.ops == c.at {
		c.image = c.MemFS.CrashClone(vfs.CrashOptions{})
		if c.hook != nil {
			c.hook()
		}
	}
}

func (c *crashPointFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag&(0x1|0x2|0x40|0x200) != 0 { // O_WRONLY, O_RDWR, O_CREATE, O_TRUNC
		c.op()
	}
	f, err := c.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return crashPointFile{f, c}, nil
}

func (c *crashPointFS) Remove(name string) error               { c.op(); return c.MemFS.Remove(name) }
func (c *crashPointFS) RemoveAll(name string) error            { c.op(); return c.MemFS.RemoveAll(name) }
func (c *crashPointFS) Rename(from, to string) error           { c.op(); return c.MemFS.Rename(from, to) }
func (c *crashPointFS) SyncDir(dir string) error               { c.op(); return c.MemFS.SyncDir(dir) }
func (c *crashPointFS) MkdirAll(d string, p fs.FileMode) error { c.op(); return c.MemFS.MkdirAll(d, p) }

type crashPointFile struct {
	vfs.File
	c *crashPointFS
}

func (f crashPointFile) Write(p []byte) (int, error) { f.c.op(); return f.File.Write(p) }
func (f crashPointFile) Sync() error                 { f.c.op(); return f.File.Sync() }
func (f crashPointFile) Truncate(n int64) error      { f.c.op(); return f.File.Truncate(n) }

// crashPointWorkload creates a table and, one at a time, applies updates,
// flushes (with compaction after every second flush) and drops a second
// table, calling ack after every update that returned nil. It stops at the
// first error.
func crashPointWorkload(fsys vfs.FS, ack func(key int)) int {
	cfg := Config{Dir: "/db", FS: fsys, Logger: quietLogger(),
		CommitLog:  commitlog.Options{Sync: commitlog.SyncBatch, SegmentSize: 4 << 10},
		Compaction: Compaction{MinThreshold: 2, MinSSTableSize: 1}}
	r, err := Open(cfg)
	if err != nil {
		return 0
	}
	defer r.Close()
	if r.CreateTable(counterTable) != nil {
		return 0
	}
	other := coltype.TableDef{ID: 8, Keyspace: "ks", Name: "gone", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
	if r.CreateTable(other) != nil {
		return 0
	}
	n, dropped := 0, false
	for round := range 4 {
		for k := range 3 {
			if _, err := r.Apply(coltype.Update{Table: 7, Key: memCrashKey(k), Column: "a", Delta: 1}); err != nil {
				return n
			}
			ack(k)
			n++
			if dropped {
				continue
			}
			if _, err := r.Apply(coltype.Update{Table: 8, Key: memCrashKey(k), Column: "c", Delta: 1}); err != nil {
				return n
			}
		}
		if r.Flush(7) != nil || (!dropped && r.Flush(8) != nil) {
			return n
		}
		if round == 2 {
			if r.DropTable(8) != nil {
				return n
			}
			dropped = true
		}
	}
	return n
}

// TestCrashAtEveryPoint crashes a replica before each filesystem operation
// of a workload of updates, flushes, compactions and a DROP TABLE, in turn,
// and checks that the crashed filesystem always reopens with every
// acknowledged update (batch mode) and nothing more than was attempted.
func TestCrashAtEveryPoint(t *testing.T) {
	// A run without a crash counts the operations.
	probe := &crashPointFS{MemFS: vfs.NewMem()}
	total := 0
	if n := crashPointWorkload(probe, func(int) { total++ }); n != 12 {
		t.Fatalf("workload without a crash acknowledged %d updates, want 12", n)
	}
	ops := probe.ops
	t.Logf("%d filesystem operations", ops)
	for at := 1; at <= ops; at++ {
		var acked, ackedAtCrash [3]int64
		c := &crashPointFS{MemFS: vfs.NewMem(), at: at}
		var mu sync.Mutex
		c.hook = func() { mu.Lock(); ackedAtCrash = acked; mu.Unlock() }
		crashPointWorkload(c, func(k int) { mu.Lock(); acked[k]++; mu.Unlock() })
		if c.image == nil {
			t.Fatalf("crash point %d of %d not reached", at, ops)
		}
		cfg := Config{Dir: "/db", FS: c.image, Logger: quietLogger(),
			CommitLog: commitlog.Options{Sync: commitlog.SyncBatch, SegmentSize: 4 << 10}}
		r, err := Open(cfg)
		if err != nil {
			t.Fatalf("crash before operation %d of %d: reopen: %v", at, ops, err)
		}
		for k := range 3 {
			v, _, err := r.Value(7, memCrashKey(k), "a")
			if err != nil && ackedAtCrash[k] > 0 {
				r.Close()
				t.Fatalf("crash before operation %d: read %s: %v", at, memCrashKey(k), err)
			}
			// The update in flight at the crash may or may not be there.
			if v < ackedAtCrash[k] || v > acked[k]+1 {
				r.Close()
				t.Fatalf("crash before operation %d of %d: %s = %d, acknowledged %d before the crash, %d in all",
					at, ops, memCrashKey(k), v, ackedAtCrash[k], acked[k])
			}
		}
		r.Close()
	}
}
