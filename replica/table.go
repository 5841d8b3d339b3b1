package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/memtable"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/sstable"
)

// table is one table's storage on this node: an active memtable taking
// writes, at most one sealed memtable being flushed, and SSTables, newest
// first.
type table struct {
	r   *Replica
	def coltype.TableDef
	dir string

	// colset is the table's column types and options; ALTER TABLE swaps it
	// while no leader update is in flight (modeMu).
	colset atomic.Pointer[columnSet]
	// modeMu is held shared by every leader update and exclusively by
	// AlterTable, so that a column never changes its write path (vanilla
	// lock-read-write or FBF compare-and-swap) under an update.
	modeMu sync.RWMutex
	// vanillaNS is the cell cache namespace of the vanilla counter
	// columns' shards (Leader.LocalShard): a new one at every ALTER, so
	// that a column that leaves the vanilla path (FBF, whose writes do not
	// update these shards) and comes back reads its shard from storage.
	vanillaNS atomic.Uint64

	// mu is the write barrier and the guard of view. Writers hold it shared
	// across the commit log append and the memtable apply, and readers across
	// a read; a memtable switch or an SSTable swap holds it exclusively, so
	// that every record logged before a switch is in the sealed memtable and
	// no reader sees a memtable and the SSTable it became at once.
	mu   sync.RWMutex
	view struct {
		active   *memtable.Memtable
		flushing *memtable.Memtable
		sstables []*sstable.Reader // newest first
	}
	activeStart   commitlog.Position // log position from which active may hold records
	flushingStart commitlog.Position
	flushedPos    commitlog.Position // every record before it is in an SSTable

	nextGen atomic.Uint64
	// manifestMu serializes manifest rewrites; live is the list of
	// generations the manifest on disk holds.
	manifestMu sync.Mutex
	live       []uint64
	flushMu    sync.Mutex // one flush at a time
	compactMu  sync.Mutex // one compaction at a time

	flushReq chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// openTable opens a table's directory, creating it if needed, and its
// SSTables: the generations its manifest lists. A listed generation that is
// missing or does not open fails the open, and nothing is deleted then.
// Files of generations the manifest does not list are the leftovers of an
// interrupted flush, compaction or removal; they are removed, each removal
// logged. adopt allows a directory without a manifest (one written before
// manifests existed, or a new table): its complete generations are adopted
// and a manifest is written; otherwise a missing manifest fails the open.
func openTable(r *Replica, d coltype.TableDef, adopt bool) (*table, error) {
	t := &table{
		r: r, def: d,
		dir:      filepath.Join(r.cfg.Dir, "data", fmt.Sprintf("%s-%s-%d", d.Keyspace, d.Name, d.ID)),
		flushReq: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	cs, err := r.newColumnSet(d, nil)
	if err != nil {
		return nil, err
	}
	t.colset.Store(cs)
	t.vanillaNS.Store(cellcache.NewNamespace())
	t.view.active = memtable.New()
	if err := r.cfg.FS.MkdirAll(t.dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica: create %s: %w", t.dir, err)
	}
	if err := t.openSSTables(adopt); err != nil {
		t.close()
		return nil, fmt.Errorf("replica: table %s.%s: %w", d.Keyspace, d.Name, err)
	}
	if t.nextGen.Load() == 0 {
		t.nextGen.Store(1)
	}
	return t, nil
}

// openSSTables loads the generations of the table's manifest (see openTable).
func (t *table) openSSTables(adopt bool) error {
	fsys := t.r.cfg.FS
	manifest := filepath.Join(t.dir, sstable.ManifestName)
	files, err := sstable.Files(fsys, t.dir)
	if err != nil {
		return err
	}
	live, err := sstable.ReadManifest(fsys, t.dir)
	adopted := false
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist) && adopt:
		for gen, names := range files {
			if sstable.IsComplete(gen, names) {
				live = append(live, gen)
			}
		}
		slices.Sort(live)
		adopted = true
		if len(live) > 0 {
			t.r.logger.Warn("table directory has no manifest: adopting its complete SSTables (one-time migration)",
				"table", t.def.Name, "dir", t.dir, "generations", live)
		}
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s is missing, so the live SSTables are unknown (files present: %s); restore it from a backup: %w",
			manifest, describeFiles(files), err)
	default:
		return fmt.Errorf("%s is unreadable: %w", manifest, err)
	}

	// Open every live generation, newest first, before touching any file.
	listed := map[uint64]bool{}
	for i := len(live) - 1; i >= 0; i-- {
		gen := live[i]
		listed[gen] = true
		rd, err := sstable.OpenFS(fsys, t.dir, gen)
		if err != nil {
			return fmt.Errorf("SSTable generation %d is listed in %s but cannot be opened (its files present: %s); refusing to start, restore the files: %w",
				gen, manifest, describeFiles(map[uint64][]string{gen: files[gen]}), err)
		}
		t.view.sstables = append(t.view.sstables, rd)
		pos, err := decodePosition(rd.Meta().User)
		if err != nil {
			return fmt.Errorf("sstable %d: %w", gen, err)
		}
		if t.flushedPos.Less(pos) {
			t.flushedPos = pos
		}
	}
	for gen := range files {
		if gen >= t.nextGen.Load() {
			t.nextGen.Store(gen + 1)
		}
	}
	for _, gen := range live {
		if gen >= t.nextGen.Load() {
			t.nextGen.Store(gen + 1)
		}
	}
	if adopted {
		if err := sstable.WriteManifest(fsys, t.dir, live); err != nil {
			return err
		}
	}
	t.live = live

	// Remove the leftovers: files of unlisted generations, and temporary
	// files of listed ones.
	removed := false
	var errs []error
	for _, gen := range slices.Sorted(maps.Keys(files)) {
		for _, name := range files[gen] {
			reason := "generation not in the manifest: leftover of an interrupted flush, compaction or removal"
			if listed[gen] {
				if !strings.HasSuffix(name, ".tmp") {
					continue
				}
				reason = "temporary file of a complete generation"
			}
			p := filepath.Join(t.dir, name)
			t.r.logger.Warn("removing SSTable leftover", "path", p, "reason", reason)
			if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove leftover %s: %w", p, err))
			}
			removed = true
		}
	}
	if removed {
		if err := fsys.SyncDir(t.dir); err != nil {
			errs = append(errs, fmt.Errorf("sync %s: %w", t.dir, err))
		}
	}
	return errors.Join(errs...)
}

// describeFiles lists SSTable file names for an error message.
func describeFiles(files map[uint64][]string) string {
	var names []string
	for _, n := range files {
		names = append(names, n...)
	}
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// setManifest records in the manifest the live generations after adding add
// (when not 0) and removing remove. It returns once the new list is durable;
// on error the in-memory list is unchanged and the disk holds the old or the
// new list.
func (t *table) setManifest(add uint64, remove []uint64) error {
	t.manifestMu.Lock()
	defer t.manifestMu.Unlock()
	next := make([]uint64, 0, len(t.live)+1)
	for _, g := range t.live {
		if !slices.Contains(remove, g) {
			next = append(next, g)
		}
	}
	if add != 0 {
		next = append(next, add)
	}
	slices.Sort(next)
	if err := sstable.WriteManifest(t.r.cfg.FS, t.dir, next); err != nil {
		return err
	}
	t.live = next
	return nil
}

// columnSet is a table's columns as the write path sees them.
type columnSet struct {
	def  coltype.TableDef
	cols map[string]coltype.ColumnType
	// desc are the clustering columns' orders: cell names are composite
	// (row.ClusteringPrefix) when the table has clustering columns.
	desc []bool
}

// newColumnSet builds the column types of a definition: the registered
// type of each column, configured for the table when the type is
// Configurable. prev, when the table is being altered, hands each column's
// previous instance to its type (an FBF carries its shards and filter on).
func (r *Replica) newColumnSet(d coltype.TableDef, prev *columnSet) (*columnSet, error) {
	cs := &columnSet{def: d, cols: map[string]coltype.ColumnType{}, desc: d.ClusteringDesc()}
	for _, c := range d.Columns {
		ct, ok := coltype.TypeOf(c)
		if !ok {
			return nil, fmt.Errorf("replica: table %s.%s: column %q has unknown type %q", d.Keyspace, d.Name, c.Name, c.Type)
		}
		if cf, ok := ct.(coltype.Configurable); ok {
			var old coltype.ColumnType
			if prev != nil {
				old = prev.cols[c.Name]
			}
			var err error
			if ct, err = cf.Configure(env{r}, d, c.Name, old); err != nil {
				return nil, fmt.Errorf("replica: table %s.%s column %s: %w", d.Keyspace, d.Name, c.Name, err)
			}
		}
		cs.cols[c.Name] = ct
	}
	for _, c := range d.Dropped {
		// A dropped column's cells still merge, until compaction drops them.
		if _, live := cs.cols[c.Name]; live {
			continue
		}
		ct, ok := coltype.TypeOf(c.ColumnDef)
		if !ok {
			return nil, fmt.Errorf("replica: table %s.%s: dropped column %q has unknown type %q", d.Keyspace, d.Name, c.Name, c.Type)
		}
		if prev != nil && prev.cols[c.Name] != nil {
			ct = prev.cols[c.Name] // the instance its cells were written by
		}
		cs.cols[c.Name] = ct
	}
	if d.HasRegularColumns() {
		// The CQL row marker of a regular table (row.AppendComponent).
		cs.cols[""] = coltype.Regular{}
	}
	return cs, nil
}

// col is the column type of a cell name: a column's name, or a composite
// name of a table with clustering columns (the type of its column).
func (t *table) col(name string) (coltype.ColumnType, bool) {
	cs := t.colset.Load()
	if c, ok := cs.cols[name]; ok {
		return c, ok
	}
	column, err := row.ColumnOf(name, cs.desc)
	if err != nil {
		return nil, false
	}
	c, ok := cs.cols[column]
	return c, ok
}

// dedups are the table's op-id-deduplicating columns.
func (t *table) dedups() []coltype.Deduplicator {
	var out []coltype.Deduplicator
	for _, c := range t.colset.Load().cols {
		if d, ok := c.(coltype.Deduplicator); ok {
			out = append(out, d)
		}
	}
	return out
}

// dedup returns a column's type when it deduplicates op ids.
func (t *table) dedup(column string) (coltype.Deduplicator, bool) {
	c, ok := t.col(column)
	if !ok {
		return nil, false
	}
	d, ok := c.(coltype.Deduplicator)
	return d, ok
}

// alter swaps in a new definition of the table's options.
func (t *table) alter(d coltype.TableDef) error {
	t.modeMu.Lock()
	defer t.modeMu.Unlock()
	cs, err := t.r.newColumnSet(d, t.colset.Load())
	if err != nil {
		return err
	}
	t.colset.Store(cs)
	// A column whose type changed (vanilla → FBF → vanilla) must not
	// trust a vanilla shard cached before the FBF wrote its updates: the
	// vanilla shards of the new definition start in a new namespace.
	t.r.cfg.CellCache.DropNamespace(t.vanillaNS.Swap(cellcache.NewNamespace()))
	return nil
}

// merge reconciles two versions of a cell by the column's type.
func (t *table) merge(a, b row.Cell) (row.Cell, error) {
	col, ok := t.col(a.Column)
	if !ok {
		return row.Cell{}, fmt.Errorf("table %s.%s has no column %q", t.def.Keyspace, t.def.Name, a.Column)
	}
	return col.Merge(a, b)
}

// write logs a cell and applies it to the active memtable, flushing in the
// background when the memtable is full.
func (t *table) write(key row.Key, m coltype.Mutation, kind commitlog.PayloadKind) error {
	rec := commitlog.Record{
		Table: t.def.ID, Key: key.Partition, Column: m.Cell.Column, Kind: kind,
		Payload: m.Cell.Value, Timestamp: m.Cell.Timestamp,
		HasOp: m.HasOp, OpID: m.OpID, OpTime: m.OpTime,
		Led: m.Log.Led && m.HasOp, Delta: m.Log.Delta, Compensation: m.Log.Compensation && m.Log.Led && m.HasOp,
	}
	if rec.Led {
		rec.Carried = m.Log.Carried
	}
	t.mu.RLock()
	if _, err := t.r.log.AppendPlaced(&rec, m.Log.Placed); err != nil {
		t.mu.RUnlock()
		return fmt.Errorf("commit log: %w", err)
	}
	active := t.view.active
	// A mutation that supersedes a stored value (coltype.Mutation.Supersedes)
	// replaces a memtable cell holding it instead of decoding and joining
	// both.
	err := active.ApplyOver(key, m.Cell, m.Supersedes, t.merge)
	t.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("memtable: %w", err)
	}
	if active.Size() >= t.r.cfg.MemtableFlushBytes {
		t.requestFlush()
	} else if (t.r.cfg.MemtableSpaceBytes > 0 || t.r.cfg.CommitLogSpaceBytes > 0) && t.r.spaceWrites.Add(1)%spaceCheckWrites == 0 {
		if t.r.cfg.MemtableSpaceBytes > 0 {
			t.r.checkMemtableSpace()
		}
		if t.r.cfg.CommitLogSpaceBytes > 0 {
			t.r.checkCommitLogSpace()
		}
	}
	return nil
}

// spaceCheckWrites is how many writes pass between two checks of the
// memtables' and the commit log's space (a few hundred KiB of cells, and
// of log records, at most).
const spaceCheckWrites = 1024

// checkCommitLogSpace requests a flush of every table whose memtable holds
// records of the oldest segment Release may delete, when the commit log's
// segments exceed Config.CommitLogSpaceBytes (Cassandra's
// commitlog_total_space). A table already flushing is left to finish: its
// flush releases what it covers.
func (r *Replica) checkCommitLogSpace() {
	if r.log.Size() <= r.cfg.CommitLogSpaceBytes {
		return
	}
	retained, oldest, found := r.logRetention(r.log.Segments())
	if retained > r.cfg.CommitLogSpaceBytes {
		r.warnLogRetained(retained)
	}
	if !found {
		return // every sealed segment is kept for its op ids: no flush frees one
	}
	for _, t := range *r.tables.Load() {
		t.mu.RLock()
		idle := t.view.flushing == nil && t.view.active.Len() > 0
		start := t.activeStart
		t.mu.RUnlock()
		if idle && start.Segment <= oldest && t.requestFlush() {
			r.stats.logSpaceFlushes.Add(1)
		}
	}
}

// logRetention looks at the sealed segments of segs (the last is the
// active one): retained sums those the log keeps for their op ids
// (Options.Retain), which no flush frees before the windows of their ops
// have passed, and oldest is the oldest of the others (found false: none).
func (r *Replica) logRetention(segs []commitlog.SegmentInfo) (retained int64, oldest uint64, found bool) {
	if len(segs) == 0 {
		return 0, 0, false
	}
	for _, s := range segs[:len(segs)-1] {
		switch {
		case r.cfg.CommitLog.Retain != nil && r.cfg.CommitLog.Retain(s):
			retained += s.Size
		case !found:
			oldest, found = s.ID, true
		}
	}
	return retained, oldest, found
}

// logRetainedWarnEvery is how often, at most, a replica warns that the
// segments kept for op ids alone exceed the commit log's bound.
const logRetainedWarnEvery = 10 * time.Minute

// warnLogRetained warns, at most once every logRetainedWarnEvery, that the
// segments kept for op ids (retained bytes) exceed the commit log's bound,
// which no flush can then bring it back under.
func (r *Replica) warnLogRetained(retained int64) {
	now := r.cfg.Now().UnixNano()
	last := r.logRetainedWarned.Load()
	if last != 0 && now-last < int64(logRetainedWarnEvery) || !r.logRetainedWarned.CompareAndSwap(last, now) {
		return
	}
	r.logger.Warn("the commit log segments kept for the op ids of deduplicating columns' windows exceed commitlog_total_space_in_mb; no flush frees them before their windows pass: shorten the longest window, lower its column's update rate or raise the bound",
		"retained_mib", retained>>20, "commitlog_total_space_mib", r.cfg.CommitLogSpaceBytes>>20, "log_mib", r.log.Size()>>20)
}

// checkMemtableSpace requests a flush of the largest memtable being
// written (queued behind its table's flush under way, if any) when the
// memtables being written, of all tables together, have reached half of
// Config.MemtableSpaceBytes (Cassandra's memtable_cleanup_threshold with
// one flush writer). The memtables being flushed, whose memory is on its
// way back, are not counted, so that with them all memtables stay within
// about the space while flushes keep up.
func (r *Replica) checkMemtableSpace() {
	var total, largestSize int64
	var largest *table
	for _, t := range *r.tables.Load() {
		t.mu.RLock()
		active := t.view.active
		t.mu.RUnlock()
		n := active.Size()
		total += n
		if n > largestSize {
			largest, largestSize = t, n
		}
	}
	if total >= r.cfg.MemtableSpaceBytes/2 && largest != nil && largest.requestFlush() {
		r.stats.spaceFlushes.Add(1)
	}
}

// read merges a partition from the memtables and the SSTables.
func (t *table) read(key row.Key) (row.Row, bool, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out row.Row
	found := false
	add := func(r row.Row) error {
		if !found {
			out, found = r, true
			return nil
		}
		var err error
		out, err = row.MergeRows(out, r, t.merge)
		return err
	}
	for _, m := range []*memtable.Memtable{t.view.active, t.view.flushing} {
		if m == nil {
			continue
		}
		if r, ok := m.Get(key); ok {
			if err := add(r); err != nil {
				return row.Row{}, false, err
			}
		}
	}
	for _, s := range t.view.sstables {
		r, ok, err := s.Get(key)
		if err != nil {
			t.noteCorrupt("read", err)
			return row.Row{}, false, fmt.Errorf("table %s.%s: %w", t.def.Keyspace, t.def.Name, err)
		}
		if ok {
			if err := add(r); err != nil {
				return row.Row{}, false, err
			}
		}
	}
	return out, found, nil
}

// needsLogFrom returns the oldest log position whose records the table does
// not yet have in an SSTable, and false when it needs none.
func (t *table) needsLogFrom() (commitlog.Position, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	switch {
	case t.view.flushing != nil:
		return t.flushingStart, true
	case t.view.active.Len() > 0:
		return t.activeStart, true
	}
	return commitlog.Position{}, false
}

// flush seals the active memtable, switches writes to a fresh one, and
// writes the sealed one to a new SSTable whose metadata records the log
// position it covers.
func (t *table) flush() error {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()

	t.mu.Lock()
	old := t.view.active
	if old.Len() == 0 {
		t.mu.Unlock()
		return nil
	}
	upTo := t.r.log.Position() // every record of old lies before it
	old.Seal()
	t.view.flushing, t.flushingStart = old, t.activeStart
	t.view.active, t.activeStart = memtable.New(), upTo
	t.mu.Unlock()

	gen := t.nextGen.Add(1) - 1
	rd, err := t.writeSSTable(gen, encodePosition(upTo), func(w *sstable.Writer) error {
		for r := range old.All() {
			if err := w.Add(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		// The new generation is live once the manifest says so; the log
		// is released only after that.
		if err = t.setManifest(gen, nil); err != nil {
			// Its files stay: the manifest on disk may list it. If it does
			// not, the next start removes them as leftovers.
			rd.Close()
		}
	}
	if err != nil {
		// The sealed memtable stays readable and its records stay in the
		// log; the next flush retries by merging it back into the write path.
		t.mu.Lock()
		t.restoreFlushing()
		t.mu.Unlock()
		return fmt.Errorf("replica: flush %s.%s: %w", t.def.Keyspace, t.def.Name, err)
	}
	t.mu.Lock()
	t.view.sstables = append([]*sstable.Reader{rd}, t.view.sstables...)
	t.view.flushing = nil
	if t.flushedPos.Less(upTo) {
		t.flushedPos = upTo
	}
	t.mu.Unlock()
	t.r.stats.flushes.Add(1)
	t.r.logger.Debug("flushed memtable", "table", t.def.Name, "generation", gen, "rows", rd.Meta().Rows, "bytes", rd.Meta().DataSize)
	if err := t.r.releaseLog(); err != nil {
		return fmt.Errorf("replica: release commit log: %w", err)
	}
	if !t.r.cfg.Compaction.Disabled {
		if err := t.compact(false); err != nil {
			return err
		}
	}
	return nil
}

// restoreFlushing puts a memtable whose flush failed back in front of the
// write path: its rows are merged into the active memtable (which then also
// inherits its older log start). Called with mu held.
func (t *table) restoreFlushing() {
	old := t.view.flushing
	if old == nil {
		return
	}
	fresh := memtable.New()
	for r := range old.All() {
		for _, c := range r.Cells {
			_ = fresh.Apply(r.Key, c, t.merge)
		}
	}
	for r := range t.view.active.All() {
		for _, c := range r.Cells {
			_ = fresh.Apply(r.Key, c, t.merge)
		}
	}
	t.view.active, t.activeStart = fresh, t.flushingStart
	t.view.flushing = nil
}

func (t *table) writeSSTable(gen uint64, user []byte, fill func(*sstable.Writer) error) (*sstable.Reader, error) {
	w, err := sstable.NewWriter(t.dir, gen, t.r.cfg.SSTable)
	if err != nil {
		return nil, err
	}
	if err := fill(w); err != nil {
		return nil, errors.Join(err, w.Abort())
	}
	if _, err := w.Finish(user); err != nil {
		return nil, errors.Join(err, w.Abort())
	}
	return sstable.OpenFS(t.r.cfg.FS, t.dir, gen)
}

// compact runs one size-tiered round (or merges everything, for major).
func (t *table) compact(major bool) error {
	t.compactMu.Lock()
	defer t.compactMu.Unlock()
	t.mu.RLock()
	byGen := map[uint64]*sstable.Reader{}
	var infos []sstable.TableInfo
	for _, s := range t.view.sstables {
		byGen[s.Meta().Generation] = s
		infos = append(infos, sstable.TableInfo{Generation: s.Meta().Generation, Size: s.Meta().DataSize})
	}
	t.mu.RUnlock()

	var gens []uint64
	if major {
		for _, in := range infos {
			gens = append(gens, in.Generation)
		}
	} else {
		c := t.r.cfg.Compaction
		gens = sstable.PickSizeTiered(infos, c.MinThreshold, c.MaxThreshold, c.BucketLow, c.BucketHigh, c.MinSSTableSize)
	}
	// A major compaction rewrites even a single table, so that nodetool
	// compact purges its expired tombstones as Cassandra's does.
	if len(gens) < 2 && !(major && len(gens) == 1) {
		return nil
	}
	inputs := make([]*sstable.Reader, len(gens))
	var maxPos commitlog.Position
	for i, g := range gens {
		inputs[i] = byGen[g]
		p, err := decodePosition(inputs[i].Meta().User)
		if err != nil {
			return fmt.Errorf("replica: compact %s.%s: %w", t.def.Keyspace, t.def.Name, err)
		}
		if maxPos.Less(p) {
			maxPos = p
		}
	}
	gen := t.nextGen.Add(1) - 1
	purged := 0
	purge := t.purger(gens, &purged)
	if _, err := sstable.Compact(t.dir, inputs, gen, t.merge, t.r.cfg.SSTable, encodePosition(maxPos), purge); err != nil {
		t.noteCorrupt("compaction", err)
		return fmt.Errorf("replica: compact %s.%s: %w", t.def.Keyspace, t.def.Name, err)
	}
	out, err := sstable.OpenFS(t.r.cfg.FS, t.dir, gen)
	if err != nil {
		return fmt.Errorf("replica: compact %s.%s: open output: %w", t.def.Keyspace, t.def.Name, err)
	}
	// The output replaces its inputs in the manifest before any input is
	// removed. On failure the inputs stay live and the output's files
	// stay for the next start to sort out (leftover or live).
	if err := t.setManifest(gen, gens); err != nil {
		out.Close()
		return fmt.Errorf("replica: compact %s.%s: %w", t.def.Keyspace, t.def.Name, err)
	}
	replaced := map[uint64]bool{}
	for _, g := range gens {
		replaced[g] = true
	}
	t.mu.Lock()
	kept := []*sstable.Reader{}
	inserted := false
	for _, s := range t.view.sstables {
		if replaced[s.Meta().Generation] {
			if !inserted { // the output takes the place of its newest input
				kept = append(kept, out)
				inserted = true
			}
			continue
		}
		kept = append(kept, s)
	}
	t.view.sstables = kept
	t.mu.Unlock()
	var errs []error
	for _, in := range inputs {
		errs = append(errs, in.Close(), sstable.RemoveFS(t.r.cfg.FS, t.dir, in.Meta().Generation))
	}
	t.r.stats.compactions.Add(1)
	t.r.stats.tombstonesPurged.Add(uint64(purged))
	t.r.logger.Debug("compacted", "table", t.def.Name, "inputs", gens, "output", gen, "tombstones_purged", purged)
	return errors.Join(errs...)
}

// DefaultGCGraceSeconds is gc_grace_seconds for a table that does not set
// it: ten days, Cassandra's default.
const DefaultGCGraceSeconds = 864000

// gcGrace returns the table's gc_grace_seconds as it is now (ALTER TABLE
// may change it).
func (t *table) gcGrace() time.Duration {
	secs := int64(DefaultGCGraceSeconds)
	if v, ok := t.colset.Load().def.Options["gc_grace_seconds"]; ok {
		// CQL validated it (an int ≥ 0); a value that does not parse keeps
		// the default rather than purging early.
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n >= 0 {
			secs = n
		}
	}
	return time.Duration(secs) * time.Second
}

// GCGrace returns a table's gc_grace_seconds, or false for a table this
// replica does not have.
func (r *Replica) GCGrace(tableID uint64) (time.Duration, bool) {
	t, err := r.table(tableID)
	if err != nil {
		return 0, false
	}
	return t.gcGrace(), true
}

// purger returns the rule a compaction of the SSTables gens applies, as
// Cassandra's: a tombstoned cell whose timestamp is gc_grace_seconds old is
// dropped, unless the partition may still have data this node holds outside
// the compaction (an SSTable not among gens, by its bloom filter and index,
// or a memtable), which the tombstone would stop shadowing. It counts what
// it drops in *n. Only tombstones go: a tombstone wins over every live
// version of its cell (CASSANDRA-7346), so the merged cell of a purgeable
// partition column is the tombstone alone and nothing it shadowed is left in
// the compaction's inputs.
//
// What purging cannot know is what other replicas hold: a replica that
// missed the deletion and is repaired, hinted or streamed from after the
// tombstone is gone brings the deleted value back, as in Cassandra; repairs
// must run within gc_grace_seconds (docs/operations.md).
func (t *table) purger(gens []uint64, n *int) sstable.Purger {
	grace := t.gcGrace()
	cutoff := t.r.cfg.Now().Add(-grace).UnixMicro()
	in := make(map[uint64]bool, len(gens))
	for _, g := range gens {
		in[g] = true
	}
	l := leader{r: t.r, t: t}
	graceCutoff := t.r.cfg.Now().Add(-grace)
	return func(k row.Key, c row.Cell) bool {
		if !c.Tombstone {
			// A regular cell written with a TTL goes gc_grace_seconds
			// after it expired, as Cassandra's expired cells do.
			col, ok := t.col(c.Column)
			if !ok {
				return false
			}
			ex, ok := col.(coltype.Expiring)
			if !ok {
				return false
			}
			at, ok := ex.Expires(c)
			if !ok || at.After(graceCutoff) {
				return false
			}
			if t.heldOutside(k, in) {
				return false
			}
			*n++
			return true
		}
		if c.Timestamp > cutoff {
			return false
		}
		// Under the cell's lock, so that no vanilla leader update reads
		// this node's cached shard between the check and the forgetting.
		unlock := t.r.lock(k, t.def.ID, c.Column)
		defer unlock()
		if t.heldOutside(k, in) {
			return false
		}
		// The counter starts again from nothing, here as in storage: a
		// leader's cached shard of the cell (vanilla's, FBF's) must not
		// carry counts the tombstone shadowed into the next update. The
		// designs forget their cached state when a tombstone arrives
		// (coltype.Observer), so its departure is told the same way.
		l.ForgetLocalShard(k, c.Column)
		if col, ok := t.col(c.Column); ok {
			if ob, ok := col.(coltype.Observer); ok {
				_ = ob.Observe(l, coltype.Mutation{Table: t.def.ID, Key: k.Partition, Cell: c})
			}
		}
		*n++
		return true
	}
}

// heldOutside reports whether partition k is in a memtable or in an SSTable
// that is not in the compaction (in), or whether that cannot be told (a read
// error: the tombstone is kept).
func (t *table) heldOutside(k row.Key, in map[uint64]bool) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range []*memtable.Memtable{t.view.active, t.view.flushing} {
		if m == nil {
			continue
		}
		if _, ok := m.Get(k); ok {
			return true
		}
	}
	for _, s := range t.view.sstables {
		if in[s.Meta().Generation] {
			continue
		}
		if _, ok, err := s.Get(k); ok || err != nil {
			return true
		}
	}
	return false
}

// noteCorrupt logs and counts an SSTable read error that reports corrupt
// bytes (sstable.ErrCorrupt); other errors (I/O) are left to the caller.
func (t *table) noteCorrupt(op string, err error) {
	if !errors.Is(err, sstable.ErrCorrupt) {
		return
	}
	t.r.stats.corruptBlocks.Add(1)
	var be *sstable.BlockError
	if errors.As(err, &be) {
		t.r.logger.Error("corrupt SSTable block", "op", op, "table", t.def.Keyspace+"."+t.def.Name,
			"file", be.Path, "block", be.Kind, "offset", be.Offset, "err", err)
		return
	}
	t.r.logger.Error("corrupt SSTable", "op", op, "table", t.def.Keyspace+"."+t.def.Name, "err", err)
}

func (t *table) requestFlush() (queued bool) {
	select {
	case t.flushReq <- struct{}{}:
		return true
	default:
		return false // one is already waiting
	}
}

// startWorker runs the table's background flusher.
func (r *Replica) startWorker(t *table) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		defer close(t.done)
		for {
			select {
			case <-t.stop:
				return
			case <-t.flushReq:
				if err := t.flush(); err != nil {
					r.logger.Error("background flush failed", "table", t.def.Name, "err", err)
				}
			}
		}
	}()
}

func (t *table) stopWorker() {
	t.stopOnce.Do(func() { close(t.stop) })
	<-t.done
}

func (t *table) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.view.sstables {
		s.Close()
	}
	t.view.sstables = nil
}

// The replay position kept in each SSTable's metadata: segment id and
// offset, 16 bytes big-endian.
func encodePosition(p commitlog.Position) []byte {
	b := binary.BigEndian.AppendUint64(nil, p.Segment)
	return binary.BigEndian.AppendUint64(b, uint64(p.Offset))
}

func decodePosition(b []byte) (commitlog.Position, error) {
	if len(b) != 16 {
		return commitlog.Position{}, fmt.Errorf("replay position metadata is %d bytes, want 16", len(b))
	}
	return commitlog.Position{Segment: binary.BigEndian.Uint64(b), Offset: int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// scan merges up to limit rows after after (exclusive) and up to endToken
// from every source: each source contributes at most limit rows, so the
// first limit keys of the union are exact.
func (t *table) scan(after *row.Key, startToken, endToken int64, limit int) ([]row.Row, error) {
	if limit <= 0 {
		return nil, nil
	}
	from := row.Key{Token: startToken}
	if after != nil && row.Compare(*after, from) > 0 {
		from = *after
	}
	inRange := func(k row.Key) (skip, stop bool) {
		if k.Token <= startToken || (after != nil && row.Compare(k, *after) <= 0) {
			return true, false
		}
		return false, k.Token > endToken
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	var merged []row.Row
	add := func(rows []row.Row) error {
		out := make([]row.Row, 0, len(merged)+len(rows))
		i, j := 0, 0
		for i < len(merged) || j < len(rows) {
			switch {
			case j == len(rows) || (i < len(merged) && row.Compare(merged[i].Key, rows[j].Key) < 0):
				out = append(out, merged[i])
				i++
			case i == len(merged) || row.Compare(rows[j].Key, merged[i].Key) < 0:
				out = append(out, rows[j])
				j++
			default:
				m, err := row.MergeRows(merged[i], rows[j], t.merge)
				if err != nil {
					return err
				}
				out = append(out, m)
				i++
				j++
			}
		}
		if len(out) > limit {
			out = out[:limit]
		}
		merged = out
		return nil
	}
	for _, m := range []*memtable.Memtable{t.view.active, t.view.flushing} {
		if m == nil {
			continue
		}
		var rows []row.Row
		for r := range m.Range(from) {
			skip, stop := inRange(r.Key)
			if stop || len(rows) == limit {
				break
			}
			if !skip {
				rows = append(rows, r)
			}
		}
		if err := add(rows); err != nil {
			return nil, err
		}
	}
	for _, s := range t.view.sstables {
		var rows []row.Row
		for r, err := range s.Range(from) {
			if err != nil {
				t.noteCorrupt("scan", err)
				return nil, fmt.Errorf("table %s.%s: %w", t.def.Keyspace, t.def.Name, err)
			}
			skip, stop := inRange(r.Key)
			if stop || len(rows) == limit {
				break
			}
			if !skip {
				rows = append(rows, r)
			}
		}
		if err := add(rows); err != nil {
			return nil, err
		}
	}
	return merged, nil
}
