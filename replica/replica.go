package replica

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/internal/memlimit"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/sstable"
	"github.com/idemkv/idemkv/vfs"
)

// DefaultMemtableSpace is the default bound of all memtables together,
// Cassandra's: a quarter of the heap, the heap being the Go runtime's soft
// memory limit (GOMEMLIMIT, debug.SetMemoryLimit) when one is set (at least
// 2 × 1 MiB); without one, 2 GiB, a quarter of Cassandra's largest default
// heap (8 GiB).
func DefaultMemtableSpace() int64 {
	limit, ok := memlimit.Heap()
	if !ok {
		return DefaultMemtableSpaceBytes
	}
	return max(2<<20, limit/4)
}

// DefaultCommitLogSpace is Cassandra's default bound of the commit log's
// segments: the smaller of 8 GiB and a quarter of the volume that holds
// dir (or its nearest existing parent); 8 GiB when the volume's size
// cannot be read.
func DefaultCommitLogSpace(dir string) int64 {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if total, ok := volumeBytes(d); ok {
			return min(DefaultCommitLogSpaceBytes, max(total/4, 1<<20))
		}
		if d == filepath.Dir(d) {
			return DefaultCommitLogSpaceBytes
		}
	}
}

// Defaults, Cassandra's where it has one.
const (
	DefaultCommitLogSpaceBytes = 8 << 30
	DefaultMemtableSpaceBytes  = 2 << 30
	DefaultMemtableFlushBytes  = 64 << 20
	DefaultLockStripes         = 32 * 1024 // concurrent_counter_writes (32) × 1024
)

// Compaction configures size-tiered compaction (Cassandra's STCS options).
type Compaction struct {
	Disabled       bool
	MinThreshold   int     // default 4
	MaxThreshold   int     // default 32
	BucketLow      float64 // default 0.5
	BucketHigh     float64 // default 1.5
	MinSSTableSize int64   // default 50 MiB
}

// Config configures a replica.
type Config struct {
	// Dir is the data directory: schema, host id, commitlog/ and one
	// directory of SSTables per table.
	Dir string
	// FS is the filesystem of the data directory: host id, schema, the
	// SSTables and the commit log (SSTable.FS and CommitLog.FS are set to
	// it); nil means vfs.Default.
	FS vfs.FS
	// CommitLog configures the log; its Dir defaults to Dir/commitlog and
	// its Logger to Logger.
	CommitLog commitlog.Options
	// MemtableFlushBytes is the memtable size that triggers a flush.
	MemtableFlushBytes int64
	// MemtableSpaceBytes bounds the memtables of all tables together,
	// those being written and those being flushed (Cassandra's
	// memtable_heap_space): when those being written reach half of it
	// (Cassandra's memtable_cleanup_threshold with one flush writer), the
	// largest of them is flushed. 0 is
	// DefaultMemtableSpace(); negative, no bound beyond MemtableFlushBytes
	// per table.
	MemtableSpaceBytes int64
	// CommitLogSpaceBytes bounds the commit log's segments on disk
	// (Cassandra's commitlog_total_space): past it, every table whose
	// memtable still holds records of the oldest segment that Release may
	// delete is flushed, so that the segment goes. Without a bound a table
	// whose memtable stays small (a few counters updated many times) is
	// never flushed, and the log grows until the disk is full. Segments
	// that CommitLog.Retain keeps (a long FBF window's op ids) count
	// towards the bound but no flush frees them. 0 is
	// DefaultCommitLogSpace; negative, no bound.
	CommitLogSpaceBytes int64
	// NoCounterCache, when set, keeps the vanilla counter's shards out of
	// the cell cache: every vanilla increment reads its shard from the
	// memtables and SSTables. Otherwise they share CellCache (and its
	// bound, counter_cache_size_in_mb) with the other designs' cell state.
	NoCounterCache bool
	// LockStripes is the number of striped cell locks.
	LockStripes int
	// SSTable configures the SSTables written by flush and compaction.
	SSTable sstable.Options
	// Compaction configures size-tiered compaction after flushes.
	Compaction Compaction
	// ReplayAll replays every commit log record, ignoring the positions
	// already flushed to SSTables: Cassandra's behaviour before
	// CASSANDRA-2419, kept to demonstrate why legacy counters over-count.
	ReplayAll bool
	// IDs is the source of new host and counter ids; default crypto/rand.
	// Tests seed it so that a run replays.
	IDs io.Reader
	// Now is the clock for cell timestamps and FBF filters; default time.Now.
	Now func() time.Time
	// CounterWriteTimeout is the cluster's counter write timeout, from which
	// the FBF options' defaults derive (default 5 s).
	CounterWriteTimeout time.Duration
	// Settings are settings of the column types by name (coltype.Env's
	// Setting), e.g. "handoff_notice_retention": "1m".
	Settings map[string]string
	// CellCache is the bounded cache of the counter designs' per-cell
	// state (the vanilla counter's own shards included), shared by every
	// column (coltype/cellcache); nil: one sized by
	// the setting cellcache.SizeSetting (counter_cache_size_in_mb), whose
	// absence is Cassandra's default.
	CellCache *cellcache.Cache
	// Logger receives flush, compaction and replay events; default slog.Default().
	Logger *slog.Logger
}

func (c *Config) fill(r *Replica) error {
	if c.Dir == "" {
		return errors.New("replica: Config.Dir is required")
	}
	c.FS = vfs.Or(c.FS)
	c.SSTable.FS = c.FS
	c.CommitLog.FS = c.FS
	if c.CommitLog.Dir == "" {
		c.CommitLog.Dir = filepath.Join(c.Dir, "commitlog")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CommitLog.Logger == nil {
		c.CommitLog.Logger = c.Logger
	}
	if c.MemtableFlushBytes <= 0 {
		c.MemtableFlushBytes = DefaultMemtableFlushBytes
	}
	switch {
	case c.MemtableSpaceBytes == 0:
		c.MemtableSpaceBytes = DefaultMemtableSpace()
	case c.MemtableSpaceBytes < 0:
		c.MemtableSpaceBytes = 0 // none
	}
	switch {
	case c.CommitLogSpaceBytes == 0 && c.FS == vfs.Default:
		c.CommitLogSpaceBytes = DefaultCommitLogSpace(c.CommitLog.Dir)
	case c.CommitLogSpaceBytes == 0:
		c.CommitLogSpaceBytes = DefaultCommitLogSpaceBytes
	case c.CommitLogSpaceBytes < 0:
		c.CommitLogSpaceBytes = 0 // none
	}
	if c.LockStripes <= 0 {
		c.LockStripes = DefaultLockStripes
	}
	cp := &c.Compaction
	if cp.MinThreshold <= 0 {
		cp.MinThreshold = 4
	}
	if cp.MaxThreshold <= 0 {
		cp.MaxThreshold = 32
	}
	if cp.BucketLow <= 0 {
		cp.BucketLow = 0.5
	}
	if cp.BucketHigh <= 0 {
		cp.BucketHigh = 1.5
	}
	if cp.MinSSTableSize <= 0 {
		cp.MinSSTableSize = 50 << 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.IDs == nil {
		c.IDs = rand.Reader
	}
	if c.CounterWriteTimeout <= 0 {
		c.CounterWriteTimeout = 5 * time.Second
	}
	if c.CellCache == nil {
		size, err := cellcache.ParseSize(c.Settings[cellcache.SizeSetting])
		if err != nil {
			return fmt.Errorf("replica: setting %s = %q: %w", cellcache.SizeSetting, c.Settings[cellcache.SizeSetting], err)
		}
		c.CellCache = cellcache.New(size)
	}
	retain := c.CommitLog.Retain
	c.CommitLog.Retain = func(s commitlog.SegmentInfo) bool {
		return (retain != nil && retain(s)) || (r != nil && r.needsOpIDs(s))
	}
	return nil
}

// Stats are a replica's running counts.
type Stats struct {
	LeaderApplies, MutationsApplied uint64
	CacheHits, CacheMisses          uint64
	Flushes, Compactions            uint64
	// SpaceFlushes counts the flushes queued because the memtables of
	// all tables together reached Config.MemtableSpaceBytes (also counted
	// in Flushes once done).
	SpaceFlushes uint64
	// LogSpaceFlushes counts the flushes queued because the commit log
	// exceeded Config.CommitLogSpaceBytes.
	LogSpaceFlushes uint64
	// LogRetainedBytes is the size of the sealed commit log segments kept
	// for the op ids of a deduplicating column's window: they count
	// towards Config.CommitLogSpaceBytes, and no flush frees them.
	LogRetainedBytes                    int64
	ReplayedRecords, SkippedFlushedRecs uint64
	// CorruptBlocks counts reads (of a partition, a scan, a compaction's
	// input) that met an SSTable block failing its checksum or not decoding;
	// each is logged at Error with the file and the block's offset.
	CorruptBlocks uint64
	// TombstonesPurged counts tombstoned cells compactions left out, being
	// older than their table's gc_grace_seconds (see table.purger).
	TombstonesPurged uint64
	// ConflictsTakenBack counts the FBF updates this node led and took back
	// because another leader counted them too (conflict.go).
	ConflictsTakenBack uint64
}

// Replica is one node's storage engine. It is safe for concurrent use.
type Replica struct {
	cfg    Config
	hostID counters.ID
	// counterIDs are the ids this node's leader shards are written under:
	// a new one after every unclean start (see counterIdentity).
	counterIDs counterIdentity
	// unclean is set when this run started after an unclean stop; led
	// holds the updates it led before (see InDoubt).
	unclean  bool
	openedAt time.Time
	led      ledOps
	ledNow   recentLed    // the ops this run led (led holds those of the runs before)
	reserved expiringOps  // ops another leader is settling (indoubt.go)
	pins     evidencePins // what answers to settling leaders showed (OpSettle)
	taken    expiringOps  // ops this run took back, for a window: another leader counts them too (conflict.go)
	log      *commitlog.Log
	logger   *slog.Logger

	schemaMu sync.Mutex                        // serializes schema changes
	dropped  map[uint64]bool                   // ids of dropped tables, under schemaMu (Open: before any other use)
	tables   atomic.Pointer[map[uint64]*table] // copy-on-write

	locks    []sync.Mutex
	lockSeed maphash.Seed

	stats struct {
		leaderApplies, mutations, cacheHits, cacheMisses atomic.Uint64
		flushes, compactions, replayed, skipped          atomic.Uint64
		spaceFlushes, logSpaceFlushes                    atomic.Uint64
		corruptBlocks, tombstonesPurged                  atomic.Uint64
		conflictsTakenBack                               atomic.Uint64
	}
	// logRetainedWarned is when the last warning that the segments kept
	// for op ids exceed the commit log's bound was logged (unix ns).
	logRetainedWarned atomic.Int64

	// spaceWrites counts writes, to check the memtables' space every
	// spaceCheckWrites of them.
	spaceWrites atomic.Uint64

	closed atomic.Bool
	bg     sync.WaitGroup
}

// ErrClosed is returned by calls on a closed replica.
var ErrClosed = errors.New("replica: closed")

// Open opens (creating if needed) the data directory, loads the schema and
// the SSTables, replays the commit log into the memtables and starts the
// background flush and compaction workers.
func Open(cfg Config) (*Replica, error) {
	r := &Replica{}
	if err := cfg.fill(r); err != nil {
		return nil, err
	}
	if err := cfg.FS.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica: create %s: %w", cfg.Dir, err)
	}
	*r = Replica{cfg: cfg, logger: cfg.Logger, locks: make([]sync.Mutex, cfg.LockStripes), lockSeed: maphash.MakeSeed()}
	doc, found, err := loadSchema(cfg.FS, cfg.Dir)
	if err != nil {
		return nil, err
	}
	if !found {
		if err := checkNoTables(cfg.FS, cfg.Dir); err != nil {
			return nil, err
		}
	}
	r.dropped = map[uint64]bool{}
	for _, id := range doc.Dropped {
		r.dropped[id] = true
	}
	// A directory holding neither a schema nor counter ids is new (a test
	// harness may have written its host id): its counter id is its host id.
	fresh := true
	for _, name := range []string{counterIDFile, schemaFile} {
		if _, err := cfg.FS.Stat(filepath.Join(cfg.Dir, name)); !errors.Is(err, fs.ErrNotExist) {
			fresh = false
		}
	}
	if r.hostID, err = loadHostID(cfg.FS, cfg.IDs, cfg.Dir, fresh); err != nil {
		return nil, err
	}
	var renewed bool
	if r.counterIDs, renewed, err = loadCounterIdentity(cfg.FS, cfg.IDs, cfg.Dir, r.hostID, fresh); err != nil {
		return nil, err
	}
	r.unclean = renewed
	r.openedAt = cfg.Now()
	if renewed {
		r.logger.Warn("unclean shutdown: this node's counter shards may have gone back; new increments count under a new counter id",
			"dir", cfg.Dir, "counter_id", r.counterIDs.current.String(), "previous", r.counterIDs.past[0].String())
	}
	// A schema older than manifests (or none: a new data directory) lets
	// the tables adopt the SSTables they find.
	legacy := !found || doc.Version == 1
	tables := map[uint64]*table{}
	for _, d := range doc.Tables {
		t, err := openTable(r, d, legacy)
		if err != nil {
			closeTables(tables)
			return nil, err
		}
		tables[d.ID] = t
	}
	r.tables.Store(&tables)
	r.warnOrphanDirs(tables)

	rs := &replayState{replayed: map[uint64]bool{}, skipped: map[uint64]uint64{}, schemaMissing: !found, legacy: legacy}
	if r.unclean {
		rs.trails = &shardTrails{id: r.counterIDs.past[0]}
	}
	r.log, err = commitlog.Open(cfg.CommitLog, func(pos commitlog.Position, rec commitlog.Record) error {
		return r.replay(pos, rec, rs)
	})
	if err != nil {
		closeTables(tables)
		return nil, fmt.Errorf("replica: open commit log: %w", err)
	}
	for _, id := range slices.Sorted(maps.Keys(rs.skipped)) {
		if r.dropped[id] {
			r.logger.Info("commit log records of a dropped table skipped", "table", id, "records", rs.skipped[id])
			continue
		}
		// A version 1 schema kept no dropped ids: the table was dropped
		// before the upgrade. Remember it from now on.
		r.logger.Warn("commit log records of a table absent from the (version 1) schema skipped as a dropped table's",
			"table", id, "records", rs.skipped[id])
		r.dropped[id] = true
	}
	if legacy {
		if err := saveSchema(cfg.FS, cfg.Dir, doc.Tables, r.dropped); err != nil {
			r.log.Close()
			closeTables(tables)
			return nil, err
		}
	}
	replayed := rs.replayed
	start := r.log.Position()
	for id, t := range tables {
		if !replayed[id] {
			t.activeStart = start
		}
	}
	doubt, haveDoubt, err := loadInDoubt(cfg.FS, cfg.Dir)
	if err != nil {
		r.log.Close()
		closeTables(tables)
		return nil, err
	}
	// Updates of a table dropped since cannot be settled, nor counted.
	doubt.ops = slices.DeleteFunc(doubt.ops, func(op coltype.InDoubtOp) bool { return tables[op.Table] == nil })
	doubt.settled = slices.DeleteFunc(doubt.settled, func(o settledOp) bool { return tables[o.op.Table] == nil })
	r.led.afterReplay(doubt, r.unclean, 2*cfg.CounterWriteTimeout, cfg.Now())
	if r.unclean {
		if err := r.takeBackUnlogged(rs.trails); err != nil {
			r.log.Close()
			closeTables(tables)
			return nil, err
		}
	}
	if haveDoubt || r.led.pending.Load() > 0 || len(r.led.covered) > 0 {
		if err := r.SaveInDoubt(); err != nil {
			r.log.Close()
			closeTables(tables)
			return nil, err
		}
	}
	if n := r.led.pending.Load(); n > 0 {
		r.logger.Warn("updates led before the unclean stop are in doubt until the other replicas answer; their cells are not served until then",
			"in_doubt", n)
	}
	r.logger.Info("replica opened", "dir", cfg.Dir, "host_id", r.hostID.String(), "tables", len(tables),
		"replayed", r.stats.replayed.Load(), "skipped_flushed", r.stats.skipped.Load())
	for _, t := range tables {
		r.startWorker(t)
		if t.view.active.Size() >= cfg.MemtableFlushBytes {
			t.requestFlush()
		}
	}
	return r, nil
}

// replayState is what Open's replay keeps across records.
type replayState struct {
	replayed      map[uint64]bool   // tables that received a record
	skipped       map[uint64]uint64 // records skipped per dropped table
	schemaMissing bool              // the data directory had no schema file
	legacy        bool              // the schema file is version 1: no dropped ids
	trails        *shardTrails      // after an unclean stop: the old shard's records (unlogged.go)
}

// replay applies one commit log record during Open.
func (r *Replica) replay(pos commitlog.Position, rec commitlog.Record, rs *replayState) error {
	replayed := rs.replayed
	t, ok := (*r.tables.Load())[rec.Table]
	if !ok {
		switch {
		case r.dropped[rec.Table] || (rs.legacy && !rs.schemaMissing):
			rs.skipped[rec.Table]++
			return nil
		case rs.schemaMissing:
			return fmt.Errorf("replica: %s is missing but the commit log holds records of table %d (segment %d offset %d); restore it or start with an empty directory",
				filepath.Join(r.cfg.Dir, schemaFile), rec.Table, pos.Segment, pos.Offset)
		default:
			return fmt.Errorf("replica: commit log record at %d:%d names table %d, which %s neither holds nor lists as dropped; restore the schema file that belongs to this data directory",
				pos.Segment, pos.Offset, rec.Table, filepath.Join(r.cfg.Dir, schemaFile))
		}
	}
	// Replayers see every record still in the log, flushed or not (an FBF
	// restores its op ids: the log keeps their segments for this), and
	// the in-doubt machinery remembers the ops this node led within the
	// window of a Deduplicator.
	if col, ok := t.col(rec.Column); ok {
		if rp, ok := col.(coltype.Replayer); ok {
			if err := rp.Replayed(rec); err != nil {
				return fmt.Errorf("replica: commit log record at %d:%d: %w", pos.Segment, pos.Offset, err)
			}
		}
		if _, ok := col.(coltype.Deduplicator); ok && rs.trails != nil {
			rs.trails.note(rec)
		}
		if d, ok := col.(coltype.Deduplicator); ok && rec.HasOp && rec.Led {
			now, window := r.cfg.Now(), d.Window()
			// A compensation is the decision on an op whatever its age: an
			// in_doubt file not rewritten since (a crash right after the
			// settlement) still lists the op in doubt, and past the window
			// the op's own record is not remembered, so without this the op
			// was settled, and taken back, a second time.
			if now.Sub(time.Unix(0, rec.OpTime)) < window || rec.Compensation {
				if err := r.led.remember(rec); err != nil {
					return fmt.Errorf("replica: commit log record at %d:%d: %w", pos.Segment, pos.Offset, err)
				}
			}
			if err := r.led.rememberCarried(rec, now, window); err != nil {
				return fmt.Errorf("replica: commit log record at %d:%d: %w", pos.Segment, pos.Offset, err)
			}
		}
	}
	if !r.cfg.ReplayAll && pos.Less(t.flushedPos) {
		r.stats.skipped.Add(1)
		return nil
	}
	col, ok := t.col(rec.Column)
	if !ok {
		return fmt.Errorf("replica: commit log record at %d:%d names column %q absent from table %s.%s",
			pos.Segment, pos.Offset, rec.Column, t.def.Keyspace, t.def.Name)
	}
	cell := row.Cell{Column: rec.Column, Value: rec.Payload, Timestamp: rec.Timestamp, Tombstone: rec.Kind == commitlog.PayloadTombstone}
	if rp, ok := col.(coltype.Replayer); ok && !cell.Tombstone {
		if err := rp.Check(rec.Payload); err != nil {
			return fmt.Errorf("replica: commit log record at %d:%d: %w", pos.Segment, pos.Offset, err)
		}
	}
	if !replayed[rec.Table] {
		replayed[rec.Table] = true
		t.activeStart = pos
	}
	r.stats.replayed.Add(1)
	return t.view.active.Apply(row.Key{Token: ring.Token(rec.Key), Partition: rec.Key}, cell, col.Merge)
}

// warnOrphanDirs logs the directories under data/ that belong to no table
// of the schema (a dropped table whose removal was interrupted, or files
// from elsewhere). They are left in place.
func (r *Replica) warnOrphanDirs(tables map[uint64]*table) {
	data := filepath.Join(r.cfg.Dir, "data")
	ents, err := r.cfg.FS.ReadDir(data)
	if err != nil {
		return // no table yet; a table's own open reports real errors
	}
	known := map[string]bool{}
	for _, t := range tables {
		known[filepath.Base(t.dir)] = true
	}
	for _, e := range ents {
		if e.IsDir() && !known[e.Name()] {
			r.logger.Warn("directory of no table in the schema left in place (a dropped table's leftover?)",
				"path", filepath.Join(data, e.Name()))
		}
	}
}

// checkNoTables fails when a data directory without a schema file holds
// tables: SSTables in a table directory (or a manifest that lists some, or
// one that cannot be read). Their records and files would be ignored, and
// served as zeros, by a replica that does not know their tables.
func checkNoTables(fsys vfs.FS, dir string) error {
	data := filepath.Join(dir, "data")
	ents, err := fsys.ReadDir(data)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replica: %s is missing and %s cannot be listed: %w", filepath.Join(dir, schemaFile), data, err)
	}
	var held []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		td := filepath.Join(data, e.Name())
		files, err := sstable.Files(fsys, td)
		gens, merr := sstable.ReadManifest(fsys, td)
		if err != nil || len(files) > 0 || len(gens) > 0 || (merr != nil && !errors.Is(merr, fs.ErrNotExist)) {
			held = append(held, e.Name())
		}
	}
	if len(held) > 0 {
		return fmt.Errorf("replica: %s is missing but the data directory holds tables (%s in %s); restore it or start with an empty directory",
			filepath.Join(dir, schemaFile), strings.Join(held, ", "), data)
	}
	return nil
}

// loadHostID reads the host id, or draws and saves one in a fresh
// directory. A directory that holds data (counter ids or a schema) and has
// lost its host id does not get a new one: the node would come back as a
// second identity of the same data; Open refuses.
func loadHostID(fsys vfs.FS, ids io.Reader, dir string, fresh bool) (counters.ID, error) {
	var id counters.ID
	p := filepath.Join(dir, "host_id")
	b, err := fsys.ReadFile(p)
	if err == nil {
		raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(raw) != counters.IDLen {
			return id, fmt.Errorf("replica: %s does not hold a 16-byte hex host id", p)
		}
		copy(id[:], raw)
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return id, fmt.Errorf("replica: read host id: %w", err)
	}
	if !fresh {
		return id, fmt.Errorf("replica: %s is missing but the directory holds data (%s, %s): a new host id would give the node a second identity; restore the file (or start from an empty data directory)", p, counterIDFile, schemaFile)
	}
	if _, err := io.ReadFull(ids, id[:]); err != nil {
		return id, fmt.Errorf("replica: generate host id: %w", err)
	}
	id[6] = id[6]&0x0f | 0x40 // a version-4 UUID, as Cassandra's host ids are
	id[8] = id[8]&0x3f | 0x80
	return id, writeFileAtomic(fsys, dir, "host_id", []byte(hex.EncodeToString(id[:])+"\n"))
}

// HostID is this node's host id, its identity in the ring.
func (r *Replica) HostID() counters.ID { return r.hostID }

// CounterID is the id this node's leader shards are written under now: the
// host id until the first unclean start, a fresh id after each.
func (r *Replica) CounterID() counters.ID { return r.counterIDs.current }

// Stats returns the replica's running counts.
func (r *Replica) Stats() Stats {
	s := &r.stats
	st := Stats{
		LeaderApplies: s.leaderApplies.Load(), MutationsApplied: s.mutations.Load(),
		CacheHits: s.cacheHits.Load(), CacheMisses: s.cacheMisses.Load(),
		Flushes: s.flushes.Load(), Compactions: s.compactions.Load(), SpaceFlushes: s.spaceFlushes.Load(), LogSpaceFlushes: s.logSpaceFlushes.Load(),
		ReplayedRecords: s.replayed.Load(), SkippedFlushedRecs: s.skipped.Load(),
		CorruptBlocks: s.corruptBlocks.Load(), TombstonesPurged: s.tombstonesPurged.Load(),
		ConflictsTakenBack: s.conflictsTakenBack.Load(),
	}
	st.LogRetainedBytes, _, _ = r.logRetention(r.log.Segments())
	return st
}

// CommitLog exposes the log, for its segment listing and durability position.
func (r *Replica) CommitLog() *commitlog.Log { return r.log }

// Tables returns the table definitions.
func (r *Replica) Tables() []coltype.TableDef {
	var out []coltype.TableDef
	for _, t := range *r.tables.Load() {
		out = append(out, t.colset.Load().def)
	}
	return out
}

// CreateTable adds a table and records it in the schema file.
func (r *Replica) CreateTable(d coltype.TableDef) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	r.schemaMu.Lock()
	defer r.schemaMu.Unlock()
	old := *r.tables.Load()
	if _, dup := old[d.ID]; dup {
		return fmt.Errorf("replica: table id %d exists", d.ID)
	}
	defs := []coltype.TableDef{d}
	for _, t := range old {
		if t.def.Keyspace == d.Keyspace && t.def.Name == d.Name {
			return fmt.Errorf("replica: table %s.%s exists", d.Keyspace, d.Name)
		}
		defs = append(defs, t.colset.Load().def)
	}
	t, err := openTable(r, d, true)
	if err != nil {
		return err
	}
	t.activeStart = r.log.Position()
	// A re-created id is no longer a dropped one.
	dropped := maps.Clone(r.dropped)
	delete(dropped, d.ID)
	if err := saveSchema(r.cfg.FS, r.cfg.Dir, defs, dropped); err != nil {
		t.close()
		return err
	}
	r.dropped = dropped
	next := make(map[uint64]*table, len(old)+1)
	for id, t := range old {
		next[id] = t
	}
	next[d.ID] = t
	r.tables.Store(&next)
	r.startWorker(t)
	return nil
}

// AlterTable changes a table's options (its id, names and columns stay):
// the FBF option takes effect at once, waiting for leader updates in flight.
func (r *Replica) AlterTable(d coltype.TableDef) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	r.schemaMu.Lock()
	defer r.schemaMu.Unlock()
	t, ok := (*r.tables.Load())[d.ID]
	if !ok {
		return fmt.Errorf("replica: no table %d", d.ID)
	}
	cur := t.colset.Load().def
	if cur.Keyspace != d.Keyspace || cur.Name != d.Name || !compatibleColumns(cur, d) {
		return fmt.Errorf("replica: ALTER of %s.%s changes its name or a column's type; only options may change, and columns be added or dropped", cur.Keyspace, cur.Name)
	}
	if err := t.alter(d); err != nil {
		return err
	}
	var defs []coltype.TableDef
	for _, x := range *r.tables.Load() {
		defs = append(defs, x.colset.Load().def)
	}
	return saveSchema(r.cfg.FS, r.cfg.Dir, defs, r.dropped)
}

// compatibleColumns reports whether next keeps cur's key and every
// column of cur with its type, or records it dropped: ALTER TABLE adds and
// drops columns, it does not change them.
func compatibleColumns(cur, next coltype.TableDef) bool {
	if len(cur.PartitionKey) != len(next.PartitionKey) || len(cur.Clustering) != len(next.Clustering) {
		return false
	}
	types := map[string]coltype.ColumnDef{}
	for _, c := range next.Columns {
		types[c.Name] = c
	}
	for _, c := range next.Dropped {
		if _, live := types[c.Name]; !live {
			types[c.Name] = c.ColumnDef
		}
	}
	for _, c := range cur.Columns {
		n, ok := types[c.Name]
		if !ok || n.Type != c.Type {
			return false
		}
	}
	return true
}

// DropTable removes a table, its SSTables and its cached shards. Its commit
// log records are skipped by later replays.
func (r *Replica) DropTable(id uint64) error {
	r.schemaMu.Lock()
	defer r.schemaMu.Unlock()
	old := *r.tables.Load()
	t, ok := old[id]
	if !ok {
		return fmt.Errorf("replica: no table %d", id)
	}
	next := make(map[uint64]*table, len(old))
	var defs []coltype.TableDef
	for tid, x := range old {
		if tid != id {
			next[tid] = x
			defs = append(defs, x.colset.Load().def)
		}
	}
	dropped := maps.Clone(r.dropped)
	dropped[id] = true
	if err := saveSchema(r.cfg.FS, r.cfg.Dir, defs, dropped); err != nil {
		return err
	}
	r.dropped = dropped
	r.tables.Store(&next)
	t.stopWorker()
	t.close()
	r.cfg.CellCache.DropNamespace(t.vanillaNS.Load())
	if err := r.cfg.FS.RemoveAll(t.dir); err != nil {
		return fmt.Errorf("replica: remove %s: %w", t.dir, err)
	}
	return r.releaseLog()
}

func (r *Replica) table(id uint64) (*table, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	t, ok := (*r.tables.Load())[id]
	if !ok {
		return nil, fmt.Errorf("replica: no table %d", id)
	}
	return t, nil
}

func (r *Replica) column(u *coltype.Update) (*table, coltype.ColumnType, error) {
	t, err := r.table(u.Table)
	if err != nil {
		return nil, nil, err
	}
	col, ok := t.col(u.Column)
	if !ok {
		return nil, nil, fmt.Errorf("replica: table %s.%s has no column %q", t.def.Keyspace, t.def.Name, u.Column)
	}
	return t, col, nil
}

// Apply applies a client's update as the leader replica, by the column's
// type, and returns the mutation to replicate to the other replicas.
func (r *Replica) Apply(u coltype.Update) (coltype.Mutation, error) {
	t, _, err := r.column(&u)
	if err != nil {
		return coltype.Mutation{}, err
	}
	if u.Timestamp == 0 {
		u.Timestamp = r.cfg.Now().UnixMicro()
	}
	if r.led.inDoubt(u.Table, u.Key) {
		if u.HasOp && r.led.pendingOp(u.Table, u.Key, u.Column, u.OpID) {
			return coltype.Mutation{}, coltype.ErrOpInDoubt
		}
		return coltype.Mutation{}, coltype.ErrInDoubt
	}
	if u.HasOp && r.reserved.n.Load() > 0 && r.reserved.has(ledKey{u.Table, u.Column, string(u.Key), u.OpID}, r.cfg.Now().UnixNano()) {
		return coltype.Mutation{}, coltype.ErrOpInDoubt
	}
	t.modeMu.RLock()
	col, _ := t.col(u.Column) // the column type in force under the mode lock
	var m coltype.Mutation
	if u.Delete {
		m, err = r.leadDelete(t, col, u)
	} else if lc, ok := col.(coltype.Leading); ok {
		m, err = lc.Lead(leader{r: r, t: t}, u)
	} else {
		err = fmt.Errorf("column %s: %w", u.Column, coltype.ErrNotLed)
	}
	t.modeMu.RUnlock()
	if err != nil {
		return coltype.Mutation{}, fmt.Errorf("replica: apply to %s.%s: %w", t.def.Keyspace, t.def.Name, err)
	}
	if m.Log.Led && !m.Dismissed {
		if d, ok := col.(coltype.Deduplicator); ok {
			r.ledNow.add(u, d.Window(), r.cfg.Now().UnixNano())
		}
	}
	if m.Dismissed {
		// The retry is acknowledged only once the first attempt is on as
		// many replicas as its consistency level asks: the coordinator
		// re-sends this replica's copy of the cell, which holds the first
		// attempt since the op id is in this replica's filter.
		c, found, err := r.Read(u.Table, u.Key, u.Column)
		if err != nil {
			return coltype.Mutation{}, fmt.Errorf("replica: dismissed retry on %s.%s: read the cell: %w", t.def.Keyspace, t.def.Name, err)
		}
		if found {
			m.Cell = c
		}
		m.Cell.Column = u.Column
	}
	r.stats.leaderApplies.Add(1)
	return m, nil
}

// leadDelete leads a DELETE of one cell (Update.Delete): the type's own
// Delete when it is a Deleter, else Cassandra's final tombstone.
func (r *Replica) leadDelete(t *table, col coltype.ColumnType, u coltype.Update) (coltype.Mutation, error) {
	l := leader{r: r, t: t}
	if d, ok := col.(coltype.Deleter); ok {
		if err := d.CheckDelete(u.Column); err != nil {
			return coltype.Mutation{}, err
		}
		return d.Delete(l, coltype.Deletion{Table: u.Table, Key: u.Key, Column: u.Column, Timestamp: u.Timestamp, Context: u.Context, Replicas: u.Replicas, Pending: u.Pending, Element: u.Element})
	}
	rk := u.RowKey()
	m := coltype.Mutation{Table: u.Table, Key: u.Key, Cell: row.Cell{Column: u.Column, Timestamp: u.Timestamp, Tombstone: true}}
	unlock := l.Lock(rk, u.Column)
	defer unlock()
	if err := t.write(rk, m, commitlog.PayloadTombstone); err != nil {
		return coltype.Mutation{}, err
	}
	l.ForgetLocalShard(rk, u.Column)
	return m, nil
}

// LedDelete reports whether a DELETE of a table's column is led like an
// update (Update.Delete) because its type defines DELETE (coltype.Deleter),
// rather than sent as a tombstone to every replica.
func (r *Replica) LedDelete(tableID uint64, column string) bool {
	t, err := r.table(tableID)
	if err != nil {
		return false
	}
	col, ok := t.col(column)
	if !ok {
		return false
	}
	_, ok = col.(coltype.Deleter)
	return ok
}

// ApplyMutation merges state received from another replica (a leader's
// shard, a hint, a read repair). It takes no cell lock: merging shards is
// idempotent and commutative.
func (r *Replica) ApplyMutation(m coltype.Mutation) error {
	_, err := r.applyMutation(m)
	return err
}

// applyMutation is ApplyMutation, reporting whether the mutation's op id
// was in the column's filter before (coltype.SeenObserver).
func (r *Replica) applyMutation(m coltype.Mutation) (seen bool, err error) {
	// Another node led it: what its leader logs (the delta a replication
	// carries for conflict.go included) is not this replica's record.
	m.Log = coltype.LeaderLog{}
	t, err := r.table(m.Table)
	if err != nil {
		return false, err
	}
	col, ok := t.col(m.Cell.Column)
	if !ok {
		return false, fmt.Errorf("replica: table %s.%s has no column %q", t.def.Keyspace, t.def.Name, m.Cell.Column)
	}
	l := leader{r: r, t: t}
	if rc, ok := col.(coltype.Replicated); ok {
		if err := rc.ApplyReplicated(l, m); err != nil {
			return false, fmt.Errorf("replica: mutation for %s.%s: %w", t.def.Keyspace, t.def.Name, err)
		}
		r.stats.mutations.Add(1)
		return false, nil
	}
	// An FBF's op id joins this replica's filter before the ack, so that a
	// retry that reaches this replica as leader is recognised.
	if o, ok := col.(coltype.SeenObserver); ok {
		if seen, err = o.ObserveSeen(l, m); err != nil {
			return false, fmt.Errorf("replica: mutation for %s.%s: %w", t.def.Keyspace, t.def.Name, err)
		}
	} else if o, ok := col.(coltype.Observer); ok {
		if err := o.Observe(l, m); err != nil {
			return false, fmt.Errorf("replica: mutation for %s.%s: %w", t.def.Keyspace, t.def.Name, err)
		}
	}
	if _, ok := col.(coltype.Deduplicator); ok && m.HasOp && r.reserved.n.Load()+r.pins.n.Load() > 0 {
		k := ledKey{m.Table, m.Cell.Column, string(m.Key), m.OpID}
		r.reserved.remove(k)
		r.pins.release(k)
	}
	kind := commitlog.PayloadShard
	if m.Cell.Tombstone {
		kind = commitlog.PayloadTombstone
		l.ForgetLocalShard(m.RowKey(), m.Cell.Column)
	}
	key := row.Key{Token: ring.Token(m.Key), Partition: m.Key}
	if err := t.write(key, m, kind); err != nil {
		return seen, err
	}
	r.stats.mutations.Add(1)
	return seen, nil
}

// Delete writes tombstones for the named counter columns of a row (all of
// them when columns is empty), or what DELETE means for a column's type
// (coltype.Deleter). Without a Deleter, a deleted counter stays deleted:
// its tombstone wins over later increments, as in Cassandra. A Deleter
// that refuses (CheckDelete) stops the whole delete before anything is
// written.
func (r *Replica) Delete(tableID uint64, key []byte, timestamp int64, columns ...string) ([]coltype.Mutation, error) {
	t, err := r.table(tableID)
	if err != nil {
		return nil, err
	}
	if len(columns) == 0 {
		for _, c := range t.def.Columns {
			columns = append(columns, c.Name)
		}
	}
	if timestamp == 0 {
		timestamp = r.cfg.Now().UnixMicro()
	}
	designs := make([]coltype.ColumnType, len(columns))
	for i, c := range columns {
		col, ok := t.col(c)
		if !ok {
			return nil, fmt.Errorf("replica: table %s.%s has no column %q", t.def.Keyspace, t.def.Name, c)
		}
		if d, ok := col.(coltype.Deleter); ok {
			if err := d.CheckDelete(c); err != nil {
				return nil, fmt.Errorf("replica: column %s.%s.%s: %w", t.def.Keyspace, t.def.Name, c, err)
			}
		}
		designs[i] = col
	}
	rk := row.Key{Token: ring.Token(key), Partition: key}
	l := leader{r: r, t: t}
	var out []coltype.Mutation
	for i, c := range columns {
		if d, ok := designs[i].(coltype.Deleter); ok {
			m, err := d.Delete(l, coltype.Deletion{Table: tableID, Key: key, Column: c, Timestamp: timestamp})
			if err != nil {
				return out, fmt.Errorf("replica: delete %s.%s.%s: %w", t.def.Keyspace, t.def.Name, c, err)
			}
			out = append(out, m)
			continue
		}
		m := coltype.Mutation{Table: tableID, Key: key, Cell: row.Cell{Column: c, Timestamp: timestamp, Tombstone: true}}
		unlock := r.lock(rk, tableID, c)
		err := t.write(rk, m, commitlog.PayloadTombstone)
		l.ForgetLocalShard(rk, c)
		unlock()
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Read returns the merged cell of one column (memtables and SSTables).
// found is false when the cell was never written or is deleted.
func (r *Replica) Read(tableID uint64, key []byte, column string) (cell row.Cell, found bool, err error) {
	t, err := r.table(tableID)
	if err != nil {
		return row.Cell{}, false, err
	}
	if r.led.inDoubt(tableID, key) {
		return row.Cell{}, false, coltype.ErrInDoubt
	}
	rw, ok, err := t.read(row.Key{Token: ring.Token(key), Partition: key})
	if err != nil || !ok {
		return row.Cell{}, false, err
	}
	c, ok := rw.Cell(column)
	if !ok || c.Tombstone {
		return row.Cell{}, false, nil
	}
	return c, true, nil
}

// Value reads a counter's value: the sum of its merged shards.
func (r *Replica) Value(tableID uint64, key []byte, column string) (int64, bool, error) {
	t, err := r.table(tableID)
	if err != nil {
		return 0, false, err
	}
	col, ok := t.col(column)
	if !ok {
		return 0, false, fmt.Errorf("replica: table %s.%s has no column %q", t.def.Keyspace, t.def.Name, column)
	}
	c, found, err := r.Read(tableID, key, column)
	if err != nil || !found {
		return 0, false, err
	}
	v, err := col.Value(c)
	return v, err == nil, err
}

// ReadRow returns the merged row (tombstoned cells included, so that a
// caller repairing replicas sees deletions).
func (r *Replica) ReadRow(tableID uint64, key []byte) (row.Row, bool, error) {
	t, err := r.table(tableID)
	if err != nil {
		return row.Row{}, false, err
	}
	if r.led.inDoubt(tableID, key) {
		return row.Row{}, false, coltype.ErrInDoubt
	}
	return t.read(row.Key{Token: ring.Token(key), Partition: key})
}

// Flush writes a table's memtable to an SSTable and waits for it.
func (r *Replica) Flush(tableID uint64) error {
	t, err := r.table(tableID)
	if err != nil {
		return err
	}
	return t.flush()
}

// FlushAll flushes every table (Cassandra's drain, without stopping).
func (r *Replica) FlushAll() error {
	var errs []error
	for _, t := range *r.tables.Load() {
		errs = append(errs, t.flush())
	}
	return errors.Join(errs...)
}

// Compact runs one size-tiered compaction round on a table; with major it
// merges all of the table's SSTables into one.
func (r *Replica) Compact(tableID uint64, major bool) error {
	t, err := r.table(tableID)
	if err != nil {
		return err
	}
	return t.compact(major)
}

// SSTableCount returns how many SSTables a table has.
func (r *Replica) SSTableCount(tableID uint64) (int, error) {
	t, err := r.table(tableID)
	if err != nil {
		return 0, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.view.sstables), nil
}

// Close stops the background workers and closes the log and the SSTables.
// Unflushed data stays in the commit log and is replayed by the next Open.
// The stop is marked clean unless updates are still in doubt (see InDoubt).
func (r *Replica) Close() error { return r.close(true) }

// Crash closes the replica as a crashed process leaves it: everything
// appended is written and the files are closed, but the stop is not marked
// clean, so the next Open renews the counter id and holds the FBF updates
// this node led in doubt. (Losing what was not synced, as a power cut
// does, needs an in-memory filesystem: vfs.MemFS.CrashClone.)
func (r *Replica) Crash() error { return r.close(false) }

func (r *Replica) close(clean bool) error {
	if r.closed.Swap(true) {
		return nil
	}
	tables := *r.tables.Load()
	for _, t := range tables {
		t.stopWorker()
	}
	r.bg.Wait()
	var err error
	if clean {
		err = r.SaveInDoubt()
	}
	err = errors.Join(err, r.log.Close())
	closeTables(tables)
	// A stop with updates still in doubt is not clean: the next start must
	// settle them again.
	if err == nil && clean && r.led.pending.Load() == 0 {
		err = markCleanShutdown(r.cfg.FS, r.cfg.Dir)
	}
	return err
}

func closeTables(tables map[uint64]*table) {
	for _, t := range tables {
		t.close()
	}
}

// releaseLog lets the commit log delete the segments whose records are all
// in SSTables: everything before the oldest position any table still needs.
func (r *Replica) releaseLog() error {
	upTo := r.log.Position()
	for _, t := range *r.tables.Load() {
		if p, ok := t.needsLogFrom(); ok && p.Less(upTo) {
			upTo = p
		}
	}
	return r.log.Release(upTo)
}

// shardKey is the cell cache key of a vanilla counter cell's shard in its
// table's namespace (table.vanillaNS).
func shardKey(column string, key []byte) string {
	var b strings.Builder
	b.Grow(len(column) + 1 + len(key))
	b.WriteString(column)
	b.WriteByte(0)
	b.Write(key)
	return b.String()
}

// vanillaShardBytes is the estimated bytes of a cached vanilla shard
// besides the cell cache's overhead (cellcache.EntryOverhead): its boxed
// [2]int64.
const vanillaShardBytes = 16

func (r *Replica) lock(key row.Key, table uint64, column string) (unlock func()) {
	var h maphash.Hash
	h.SetSeed(r.lockSeed)
	var tb [8]byte
	binary.BigEndian.PutUint64(tb[:], table)
	h.Write(tb[:])
	h.WriteString(column)
	h.Write(key.Partition)
	m := &r.locks[h.Sum64()%uint64(len(r.locks))]
	m.Lock()
	return m.Unlock
}

// leader gives column types the replica's write-path primitives for one table.
type leader struct {
	r *Replica
	t *table
}

var _ coltype.LogSyncer = leader{}

func (l leader) CounterID() counters.ID { return l.r.counterIDs.current }

func (l leader) Now() time.Time { return l.r.cfg.Now() }

func (l leader) Cell(key row.Key, column string) (row.Cell, bool, error) {
	rw, ok, err := l.t.read(key)
	if err != nil || !ok {
		return row.Cell{}, false, err
	}
	c, ok := rw.Cell(column)
	return c, ok, nil
}

func (l leader) ForgetLocalShard(key row.Key, column string) {
	if !l.r.cfg.NoCounterCache {
		l.r.cfg.CellCache.Remove(l.t.vanillaNS.Load(), shardKey(column, key.Partition))
	}
}

func (l leader) Lock(key row.Key, column string) func() { return l.r.lock(key, l.t.def.ID, column) }

func (l leader) LocalShard(key row.Key, column string) (int64, int64, error) {
	if !l.r.cfg.NoCounterCache {
		if v, ok := l.r.cfg.CellCache.Get(l.t.vanillaNS.Load(), shardKey(column, key.Partition)); ok {
			l.r.stats.cacheHits.Add(1)
			cc := v.([2]int64)
			return cc[0], cc[1], nil
		}
		l.r.stats.cacheMisses.Add(1)
	}
	rw, ok, err := l.t.read(key)
	if err != nil || !ok {
		return 0, 0, err
	}
	c, ok := rw.Cell(column)
	if !ok || c.Tombstone {
		return 0, 0, nil
	}
	ctx, err := counters.Decode(c.Value)
	if err != nil {
		return 0, 0, err
	}
	clock, count := ctx.ClockAndCount(l.r.counterIDs.current)
	return clock, count, nil
}

// leaderWriteHook, set by tests only, runs before a column type's leader
// write reaches the commit log.
var leaderWriteHook func(m coltype.Mutation)

func (l leader) Write(key row.Key, m coltype.Mutation, kind commitlog.PayloadKind) error {
	if leaderWriteHook != nil {
		leaderWriteHook(m)
	}
	return l.t.write(key, m, kind)
}

// SyncLog implements coltype.LogSyncer: it fsyncs the commit log in
// periodic mode; in batch and group modes every Write has already waited
// for its fsync, and a Sync would only queue behind the next one.
func (l leader) SyncLog() error {
	if l.r.cfg.CommitLog.Sync != commitlog.SyncPeriodic {
		return nil
	}
	return l.r.log.Sync()
}

func (l leader) CacheLocalShard(key row.Key, column string, clock, count int64) {
	if !l.r.cfg.NoCounterCache {
		l.r.cfg.CellCache.Put(l.t.vanillaNS.Load(), shardKey(column, key.Partition), [2]int64{clock, count}, vanillaShardBytes)
	}
}

// MergeCells reconciles two versions of a cell of a table by its column's
// type, as a coordinator merging replicas' answers needs.
func (r *Replica) MergeCells(tableID uint64, a, b row.Cell) (row.Cell, error) {
	t, err := r.table(tableID)
	if err != nil {
		return row.Cell{}, err
	}
	return t.merge(a, b)
}

// CellValue reads the value of a live cell of a table by its column's type.
func (r *Replica) CellValue(tableID uint64, c row.Cell) (int64, error) {
	t, err := r.table(tableID)
	if err != nil {
		return 0, err
	}
	col, ok := t.col(c.Column)
	if !ok {
		return 0, fmt.Errorf("replica: table %s.%s has no column %q", t.def.Keyspace, t.def.Name, c.Column)
	}
	return col.Value(c)
}

// Scan returns up to limit partitions of a table in key order (token, then
// partition bytes) whose token lies in (startToken, endToken] and whose key
// is after the key after (exclusive; nil: no such bound), merged from the
// memtables and SSTables. Tombstoned cells are included, as ReadRow includes
// them.
func (r *Replica) Scan(tableID uint64, after *row.Key, startToken, endToken int64, limit int) ([]row.Row, error) {
	t, err := r.table(tableID)
	if err != nil {
		return nil, err
	}
	rows, err := t.scan(after, startToken, endToken, limit)
	if err == nil && r.led.pending.Load() > 0 {
		for _, rw := range rows {
			if r.led.inDoubt(tableID, rw.Key.Partition) {
				return nil, coltype.ErrInDoubt
			}
		}
	}
	return rows, err
}

// needsOpIDs is the commit log's retention hook: a segment holding op ids
// of deduplicating columns (FBF) or of columns that keep their op ids
// beside the cells (opIDKeeper: reset_counter) younger than the longest
// window is kept, so that a restart can rebuild the filters and the op id
// sets from it.
func (r *Replica) needsOpIDs(s commitlog.SegmentInfo) bool {
	if s.OpRecords == 0 {
		return false
	}
	tables := r.tables.Load()
	if tables == nil {
		return true
	}
	var longest time.Duration
	for _, t := range *tables {
		for _, c := range t.colset.Load().cols {
			switch c := c.(type) {
			case coltype.Deduplicator:
				longest = max(longest, c.Window())
			case opIDKeeper:
				longest = max(longest, c.OpIDWindow())
			}
		}
	}
	return longest > 0 && r.cfg.Now().Sub(time.Unix(0, s.MaxOpTime)) < longest
}

// FBFStats sums the counts of every op-id-deduplicating column (the FBF
// counters); the FPP is the largest of their estimates.
func (r *Replica) FBFStats() FBFStats {
	var out FBFStats
	if r.tables.Load() == nil {
		return out
	}
	for _, t := range *r.tables.Load() {
		for _, d := range t.dedups() {
			st := d.DedupStats()
			out.Dismissed += st.Dismissed
			out.Applied += st.Applied
			out.NoOpID += st.NoOpID
			out.BitsInUse += st.BitsInUse
			out.EstimatedFPP = max(out.EstimatedFPP, st.EstimatedFPP)
		}
	}
	return out
}

// env is what Configurable column types keep of their replica.
type env struct{ r *Replica }

func (e env) Now() time.Time                     { return e.r.cfg.Now() }
func (e env) CounterID() counters.ID             { return e.r.counterIDs.current }
func (e env) CounterWriteTimeout() time.Duration { return e.r.cfg.CounterWriteTimeout }
func (e env) HostID() counters.ID                { return e.r.hostID }
func (e env) Setting(name string) string         { return e.r.cfg.Settings[name] }

// Logger is the replica's logger, for the warnings of column types (an
// optional capability of coltype.Env).
func (e env) Logger() *slog.Logger { return e.r.logger }

// CellCache is the replica's cache of the designs' per-cell state, shared
// by every column (cellcache.Provider, an optional capability of
// coltype.Env).
func (e env) CellCache() *cellcache.Cache { return e.r.cfg.CellCache }

// CellCache is the cache of the counter designs' per-cell state (FBF
// leader shards, handoff and observed-reset cells), bounded by
// counter_cache_size_in_mb.
func (r *Replica) CellCache() *cellcache.Cache { return r.cfg.CellCache }

// designColumn resolves a table's column and its type's instance.
func (r *Replica) designColumn(tableID uint64, column string) (*table, coltype.ColumnType, error) {
	t, err := r.table(tableID)
	if err != nil {
		return nil, nil, err
	}
	col, ok := t.col(column)
	if !ok {
		return nil, nil, fmt.Errorf("replica: table %s.%s has no column %q", t.def.Keyspace, t.def.Name, column)
	}
	return t, col, nil
}

// Exchange is a client's (or a peer's) exchange with this replica for one
// cell of a type updated by exchange (coltype.Exchanger: handoff
// counters); it returns the answer for the sender.
func (r *Replica) Exchange(tableID uint64, key []byte, column string, incoming []byte) ([]byte, error) {
	t, col, err := r.designColumn(tableID, column)
	if err != nil {
		return nil, err
	}
	x, ok := col.(coltype.Exchanger)
	if !ok {
		return nil, fmt.Errorf("replica: column %s.%s.%s (%s) is not updated by exchange", t.def.Keyspace, t.def.Name, column, col.Name())
	}
	out, err := x.Exchange(leader{r: r, t: t}, tableID, key, column, incoming)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	return out, nil
}

// SyncView is this replica's anti-entropy payload of one cell for a peer
// (coltype.AntiEntropy.View).
func (r *Replica) SyncView(tableID uint64, key []byte, column string, peer counters.ID) ([]byte, error) {
	t, col, err := r.designColumn(tableID, column)
	if err != nil {
		return nil, err
	}
	ae, ok := col.(coltype.AntiEntropy)
	if !ok {
		return nil, fmt.Errorf("replica: column %s.%s.%s (%s) has no anti-entropy", t.def.Keyspace, t.def.Name, column, col.Name())
	}
	return ae.View(leader{r: r, t: t}, key, column, peer)
}

// antiEntropy calls f with every column instance that has anti-entropy.
func (r *Replica) antiEntropy(f func(t *table, ae coltype.AntiEntropy)) {
	if r.closed.Load() {
		return
	}
	for _, t := range *r.tables.Load() {
		for _, col := range t.colset.Load().cols {
			if ae, ok := col.(coltype.AntiEntropy); ok {
				f(t, ae)
			}
		}
	}
}

// TakeDirty returns the cells changed since the last call, of every column
// with anti-entropy, and forgets them.
func (r *Replica) TakeDirty() []coltype.CellRef {
	var out []coltype.CellRef
	r.antiEntropy(func(_ *table, ae coltype.AntiEntropy) { out = append(out, ae.TakeDirty()...) })
	return out
}

// MarkDirty puts a cell back in the set to synchronise (an anti-entropy
// exchange with a peer failed).
func (r *Replica) MarkDirty(c coltype.CellRef) {
	if _, col, err := r.designColumn(c.Table, c.Column); err == nil {
		if ae, ok := col.(coltype.AntiEntropy); ok {
			ae.MarkDirty(c)
		}
	}
}

// Sweep runs the housekeeping of every column with anti-entropy (handoff
// counters drop expired retirement notices) and returns how many items
// they still hold.
func (r *Replica) Sweep() (held int, err error) {
	r.antiEntropy(func(t *table, ae coltype.AntiEntropy) {
		n, e := ae.Sweep(leader{r: r, t: t})
		held += n
		err = errors.Join(err, e)
	})
	return held, err
}

// ColumnTypes returns the column type instances of every table (for the
// designs' own statistics, e.g. handoffcol.ReplicaStats).
func (r *Replica) ColumnTypes() []coltype.ColumnType {
	var out []coltype.ColumnType
	for _, t := range *r.tables.Load() {
		for _, col := range t.colset.Load().cols {
			out = append(out, col)
		}
	}
	return out
}

// Repairs reports whether a coordinator's read repair should send a merged
// cell of the column back to replicas: false for the types whose ReadPolicy
// says so (handoff counters: every replica holds its own state, and
// replicas converge by anti-entropy instead).
func (r *Replica) Repairs(tableID uint64, column string) bool {
	t, err := r.table(tableID)
	if err != nil {
		return true
	}
	col, ok := t.col(column)
	return !ok || coltype.ReadRuleOf(col) == coltype.ReadMerge
}

// Joinable reports whether a column's type is coltype.Joinable: a new
// replica adopts a current replica's cell instead of merging a streamed
// copy, and anti-entropy exchanges its cells with pending replicas too.
func (r *Replica) Joinable(tableID uint64, column string) bool {
	_, col, err := r.designColumn(tableID, column)
	if err != nil {
		return false
	}
	_, ok := col.(coltype.Joinable)
	return ok
}

// PrepareJoin and SnapshotFor call a coltype.Joinable column's methods for
// one cell (streaming to a joining replica, see coltype.Joinable).
func (r *Replica) PrepareJoin(tableID uint64, key []byte, column string, joiner counters.ID) error {
	t, col, err := r.designColumn(tableID, column)
	if err != nil {
		return err
	}
	j, ok := col.(coltype.Joinable)
	if !ok {
		return nil
	}
	return j.PrepareJoin(leader{r: r, t: t}, key, column, joiner)
}

// SnapshotFor is the cell a joining replica adopts (coltype.Joinable).
func (r *Replica) SnapshotFor(tableID uint64, key []byte, column string, joiner counters.ID) (row.Cell, bool, error) {
	t, col, err := r.designColumn(tableID, column)
	if err != nil {
		return row.Cell{}, false, err
	}
	j, ok := col.(coltype.Joinable)
	if !ok {
		return row.Cell{}, false, fmt.Errorf("replica: column %s.%s.%s (%s) is not joinable", t.def.Keyspace, t.def.Name, column, col.Name())
	}
	return j.SnapshotFor(leader{r: r, t: t}, key, column, joiner)
}

// JoinablePending is what the Joinable columns' cells still hold for
// the given peers (an observed-reset cell's ops in its outboxes to them):
// a leaving node waits for 0.
func (r *Replica) JoinablePending(peers []counters.ID) (held int, err error) {
	type pendingTo interface {
		PendingTo(l coltype.Leader, peers []counters.ID) (int, error)
	}
	r.antiEntropy(func(t *table, ae coltype.AntiEntropy) {
		p, ok := ae.(pendingTo)
		if !ok {
			return
		}
		n, e := p.PendingTo(leader{r: r, t: t}, peers)
		held += n
		err = errors.Join(err, e)
	})
	return held, err
}

// opIDKeeper is implemented by column types that remember the op ids of
// the writes they applied in memory and learn them again at a start from
// the records the commit log replays (coltype.Replayer): the log must keep
// a record that carries an op id (commitlog.Record.HasOp, its OpTime) for
// OpIDWindow.
type opIDKeeper interface {
	OpIDWindow() time.Duration
}
