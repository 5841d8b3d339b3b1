package commitlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkv/idemkv/vfs"
)

// SyncMode says when an append counts as durable.
type SyncMode int

const (
	// SyncPeriodic acknowledges an append once it is written to the OS and
	// fsyncs every SyncPeriod; writers block while the last sync is older
	// than 1.5×SyncPeriod. A machine crash may lose up to a period.
	SyncPeriodic SyncMode = iota
	// SyncBatch acknowledges an append after the fsync covering it; the
	// syncer fsyncs as soon as anything is pending, so concurrent writers
	// share fsyncs without any added wait.
	SyncBatch
	// SyncGroup acknowledges an append after the fsync covering it; when
	// appends come faster than fsyncs, the syncer lets them gather for up
	// to four average fsyncs (at most GroupWindow) after the first pending
	// append, less when enough has gathered, so that one fsync covers many
	// appends; otherwise it syncs at once, so that a lone writer waits for
	// its own fsync only.
	SyncGroup
)

// String returns "periodic", "batch" or "group".
func (m SyncMode) String() string {
	switch m {
	case SyncPeriodic:
		return "periodic"
	case SyncBatch:
		return "batch"
	case SyncGroup:
		return "group"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// ParseSyncMode parses "periodic", "batch" or "group".
func ParseSyncMode(s string) (SyncMode, error) {
	switch s {
	case "periodic":
		return SyncPeriodic, nil
	case "batch":
		return SyncBatch, nil
	case "group":
		return SyncGroup, nil
	}
	return 0, fmt.Errorf("commitlog: unknown sync mode %q (want periodic, batch or group)", s)
}

// AccessMode says how appends reach a segment file.
type AccessMode int

const (
	// AccessAuto is AccessMmap where the filesystem can map files, else
	// AccessStandard.
	AccessAuto AccessMode = iota
	// AccessMmap preallocates each segment to SegmentSize and maps it:
	// appends are copied into the mapping, without a system call (what
	// Cassandra does with an uncompressed commit log). A segment is cut to
	// its written length when it is sealed and when the log closes. Where
	// the filesystem cannot map, Open falls back to AccessStandard with a
	// warning.
	AccessMmap
	// AccessStandard writes appends with write(2).
	AccessStandard
)

// String returns "auto", "mmap" or "standard".
func (m AccessMode) String() string {
	switch m {
	case AccessAuto:
		return "auto"
	case AccessMmap:
		return "mmap"
	case AccessStandard:
		return "standard"
	}
	return fmt.Sprintf("AccessMode(%d)", int(m))
}

// ParseAccessMode parses "auto", "mmap" or "standard" (and "legacy", which
// Cassandra 5 spells for its default, as "auto").
func ParseAccessMode(s string) (AccessMode, error) {
	switch s {
	case "auto", "legacy":
		return AccessAuto, nil
	case "mmap":
		return AccessMmap, nil
	case "standard":
		return AccessStandard, nil
	}
	return 0, fmt.Errorf("commitlog: unknown disk access mode %q (want auto, mmap or standard)", s)
}

// Defaults for Options.
const (
	DefaultSegmentSize = 32 << 20
	DefaultSyncPeriod  = 10 * time.Second
	DefaultGroupWindow = 2 * time.Millisecond
	// MinSegmentSize is the smallest SegmentSize Open accepts.
	MinSegmentSize = 256
	// groupBytes ends a group-commit window early once this much is pending.
	groupBytes = 1 << 20
	// maxSpareBuffer is the largest write buffer kept for reuse.
	maxSpareBuffer = 4 << 20
)

// Options configure a Log. The zero value of every field but Dir selects the
// default.
type Options struct {
	Dir string // directory holding the segment files; created if missing
	// SegmentSize is the size at which a segment is rolled (default 32 MiB).
	// A record whose frame is larger than SegmentSize/2 is refused.
	SegmentSize int64
	Sync        SyncMode      // default SyncPeriodic
	Access      AccessMode    // default AccessAuto
	SyncPeriod  time.Duration // periodic: fsync interval (default 10s)
	GroupWindow time.Duration // group: the longest a group gathers before its fsync (default 2ms)
	// SkipCorrupt makes Open skip (and log) corrupt records and segments
	// instead of failing. It is the operator's explicit choice.
	SkipCorrupt bool
	Logger      *slog.Logger // default slog.Default()
	// Retain, if set, is asked before Release deletes a segment; returning
	// true keeps it (e.g. its FBF op ids are still needed). A kept segment
	// is offered again on every later Release.
	Retain func(SegmentInfo) bool
	// FS is the filesystem the log's files live on (default vfs.Default,
	// the operating system's).
	FS vfs.FS
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	ID   uint64
	Path string
	// Size is the segment's length in bytes including appends not yet
	// written to the file.
	Size int64
	// Records and OpRecords count the records and those with an op id.
	Records, OpRecords int
	// MinOpTime and MaxOpTime bound the OpTime of the records with an op id
	// (both 0 when OpRecords is 0).
	MinOpTime, MaxOpTime int64
}

var (
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("commitlog: log is closed")
	// ErrTooLarge is wrapped by the error for a record larger than half a
	// segment.
	ErrTooLarge = errors.New("commitlog: record too large")
)

// segment is one segment file. Fields other than f are guarded by Log.mu;
// f is set and used under Log.ioMu (and closed under Log.syncMu).
type segment struct {
	id   uint64
	path string
	f    vfs.File
	size int64 // logical size, including bytes still buffered

	// m maps the file (AccessMmap); written is the file offset the next
	// write goes to. Both are used under Log.ioMu.
	m       vfs.Mapping
	written int64

	records, opRecords int
	minOp, maxOp       int64

	sealed bool // no more appends go here
	synced bool // sealed and every byte is written and fsynced
}

func (s *segment) count(r *Record) {
	s.records++
	if r.HasOp {
		if s.opRecords == 0 || r.OpTime < s.minOp {
			s.minOp = r.OpTime
		}
		if s.opRecords == 0 || r.OpTime > s.maxOp {
			s.maxOp = r.OpTime
		}
		s.opRecords++
	}
}

func (s *segment) info() SegmentInfo {
	return SegmentInfo{ID: s.id, Path: s.path, Size: s.size, Records: s.records,
		OpRecords: s.opRecords, MinOpTime: s.minOp, MaxOpTime: s.maxOp}
}

// chunk is buffered data of a sealed segment awaiting its write.
type chunk struct {
	seg  *segment
	data []byte
}

// syncGen is one sync generation: every append attached to it is acknowledged
// together when the fsync covering them completes.
type syncGen struct {
	done chan struct{}
	err  error
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Pending is the future of an AppendAsync: Done is closed once the record is
// durable (or failed), after which Err reports the outcome.
type Pending struct {
	Position Position // where the record was placed (zero on immediate failure)
	gen      *syncGen
	err      error
}

// Done returns a channel closed when the record is durable or has failed.
func (p *Pending) Done() <-chan struct{} {
	if p.gen == nil {
		return closedChan
	}
	return p.gen.done
}

// Err returns nil before Done is closed; afterwards the error, if any, that
// prevented the record from becoming durable.
func (p *Pending) Err() error {
	if p.gen == nil {
		return p.err
	}
	select {
	case <-p.gen.done:
		return p.gen.err
	default:
		return nil
	}
}

// Wait blocks until Done and returns Err.
func (p *Pending) Wait() error {
	<-p.Done()
	return p.Err()
}

// Log is a segmented, append-only commit log. All methods are safe for
// concurrent use.
type Log struct {
	opts      Options
	logger    *slog.Logger
	segSize   int64
	maxRecord int64
	mapped    bool          // segments are preallocated and mapped (AccessMmap)
	lag       time.Duration // periodic: writers block while the last sync is older

	// mu guards the in-memory state below; it is held only briefly.
	mu           sync.Mutex
	synced       *sync.Cond // broadcast after every sync (periodic lag waits)
	segs         []*segment // every segment, oldest first; the last is active
	active       *segment
	buf          []byte  // pending bytes of the active segment
	spare        []byte  // a spent buffer for reuse
	sealed       []chunk // pending bytes of segments rolled since the last write
	gen          *syncGen
	pendingRecs  int
	pendingBytes int
	groupTarget  int         // group: pending records that end the window early
	firstPending time.Time   // group: when the first pending record was appended
	window       groupWindow // group: how long a group gathers
	written      Position    // everything before is written to the OS
	durable      Position    // everything before is fsynced
	lastSync     time.Time
	err          error // sticky write/fsync error
	closed       bool

	// ioMu serialises writes to the files.
	ioMu     sync.Mutex
	lastSeg  *segment   // the segment written last
	unsynced []*syncGen // generations written but not yet fsynced
	toClose  []vfs.File // sealed, fsynced files to close
	shut     bool       // files are closed

	// syncMu serialises syncs (write + fsync + acknowledgement).
	syncMu sync.Mutex

	kick     chan struct{} // first pending append (batch, group)
	full     chan struct{} // group window may end early
	quit     chan struct{}
	loopDone chan struct{}

	closeOnce sync.Once
	closeErr  error
	releaseMu sync.Mutex

	// manMu serialises manifest writes; live is the manifest's content.
	manMu sync.Mutex
	live  []uint64
}

// Open scans opts.Dir, validates every segment, calls replay (if not nil) for
// each complete, checksummed record in order (segments by id, records by
// offset), truncates a torn tail of the newest segment, and starts a new
// segment for appends. See the package documentation for the rules on
// corruption. An error from replay stops Open and is returned wrapped.
func Open(opts Options, replay func(Position, Record) error) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("commitlog: Options.Dir is empty")
	}
	if opts.SegmentSize == 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.SegmentSize < MinSegmentSize {
		return nil, fmt.Errorf("commitlog: SegmentSize %d is below the minimum %d", opts.SegmentSize, MinSegmentSize)
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.GroupWindow <= 0 {
		opts.GroupWindow = DefaultGroupWindow
	}
	switch opts.Sync {
	case SyncPeriodic, SyncBatch, SyncGroup:
	default:
		return nil, fmt.Errorf("commitlog: unknown sync mode %d", int(opts.Sync))
	}
	switch opts.Access {
	case AccessAuto, AccessMmap, AccessStandard:
	default:
		return nil, fmt.Errorf("commitlog: unknown disk access mode %d", int(opts.Access))
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.FS = vfs.Or(opts.FS)
	if replay == nil {
		replay = func(Position, Record) error { return nil }
	}
	if err := opts.FS.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("commitlog: create directory: %w", err)
	}
	entries, err := opts.FS.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("commitlog: list directory: %w", err)
	}
	var ids []uint64
	for _, e := range entries {
		v, id, ok := parseSegmentName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if v != FormatVersion {
			return nil, fmt.Errorf("commitlog: segment %s has unsupported format version %d (this build reads %d)",
				filepath.Join(opts.Dir, e.Name()), v, FormatVersion)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)

	l := &Log{
		opts:        opts,
		logger:      opts.Logger,
		segSize:     opts.SegmentSize,
		maxRecord:   opts.SegmentSize / 2,
		mapped:      opts.Access != AccessStandard,
		lag:         opts.SyncPeriod * 3 / 2,
		groupTarget: 2,
		window:      groupWindow{cap: opts.GroupWindow},
		kick:        make(chan struct{}, 1),
		full:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		loopDone:    make(chan struct{}),
	}
	l.synced = sync.NewCond(&l.mu)
	ids, listed, err := l.checkSegmentSet(ids)
	if err != nil {
		return nil, err
	}
	sc := &scanner{fs: opts.FS, skipCorrupt: opts.SkipCorrupt, segSize: opts.SegmentSize, logger: opts.Logger, replay: replay}
	for i, id := range ids {
		path := filepath.Join(opts.Dir, SegmentName(id))
		seg, err := sc.scanSegment(path, id, i == len(ids)-1, listed[id])
		if err != nil {
			return nil, err
		}
		if seg != nil {
			l.segs = append(l.segs, seg)
		}
	}
	next := uint64(1)
	if len(ids) > 0 {
		next = ids[len(ids)-1] + 1
	}
	for id := range listed {
		next = max(next, id+1)
	}
	for _, s := range l.segs {
		l.live = append(l.live, s.id)
	}
	active := &segment{id: next, path: filepath.Join(opts.Dir, SegmentName(next)), size: HeaderSize}
	if err := l.createSegment(active); err != nil {
		return nil, err
	}
	l.segs = append(l.segs, active)
	l.active, l.lastSeg = active, active
	l.written = Position{active.id, HeaderSize}
	l.durable = l.written
	l.lastSync = time.Now()
	if opts.Sync == SyncPeriodic {
		go l.periodicLoop()
	} else {
		go l.syncLoop()
	}
	return l, nil
}

// createSegment creates seg's file, writes its header (and, with mmap
// access, preallocates and maps the file), fsyncs it, syncs the directory
// and only then adds seg to the manifest: a segment the manifest lists
// always had a durable header, and no record is written to a segment before
// the manifest lists it. l.ioMu is held, or Open is running.
func (l *Log) createSegment(seg *segment) (err error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if l.mapped {
		flag = os.O_RDWR | os.O_CREATE | os.O_EXCL // mmap needs read access
	}
	f, err := l.opts.FS.OpenFile(seg.path, flag, 0o644)
	if err != nil {
		return fmt.Errorf("commitlog: create segment: %w", err)
	}
	var m vfs.Mapping
	defer func() {
		if err != nil {
			if m != nil {
				m.Close()
			}
			f.Close()
		}
	}()
	if l.mapped {
		m, err = vfs.Map(f, l.segSize)
		if errors.Is(err, vfs.ErrMapUnsupported) {
			level := slog.LevelInfo
			if l.opts.Access == AccessMmap {
				level = slog.LevelWarn
			}
			l.logger.Log(context.Background(), level, "commitlog: segments cannot be mapped here; appends are written with write(2)",
				"file", seg.path, "err", err)
			l.mapped, m, err = false, nil, nil
		} else if err != nil {
			return fmt.Errorf("commitlog: preallocate %s: %w", seg.path, err)
		}
	}
	if m != nil {
		_, err = m.WriteAt(appendHeader(nil, seg.id), 0)
	} else {
		_, err = f.Write(appendHeader(nil, seg.id))
	}
	if err != nil {
		return fmt.Errorf("commitlog: write header of %s: %w", seg.path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync %s: %w", seg.path, err)
	}
	if err := syncDir(l.opts.FS, l.opts.Dir); err != nil {
		return err
	}
	l.manMu.Lock()
	err = l.writeManifest(append(slices.Clone(l.live), seg.id))
	if err == nil {
		l.live = append(l.live, seg.id)
	}
	l.manMu.Unlock()
	if err != nil {
		return err
	}
	seg.f, seg.m, seg.written = f, m, HeaderSize
	return nil
}

// unmap ends seg's mapping and cuts the file to the bytes written, so that
// a sealed segment (or the last one, at Close) has no preallocated tail;
// l.ioMu is held. The caller fsyncs the file afterwards.
func (l *Log) unmap(seg *segment) error {
	if seg.m == nil {
		return nil
	}
	err := seg.m.Close()
	seg.m = nil
	if err == nil {
		err = seg.f.Truncate(seg.written)
	}
	if err != nil {
		return fmt.Errorf("commitlog: cut %s to its %d written bytes: %w", seg.path, seg.written, err)
	}
	return nil
}

// checkSegmentSet compares the segment ids found in the directory with the
// manifest (see the package documentation). It returns the ids to scan, in
// order, and the set the manifest lists (empty without a manifest). Missing
// segments fail Open unless SkipCorrupt; released segments that reappeared
// are deleted.
func (l *Log) checkSegmentSet(found []uint64) (scan []uint64, listed map[uint64]bool, err error) {
	dir, fsys := l.opts.Dir, l.opts.FS
	manPath := filepath.Join(dir, ManifestName)
	want, ok, err := readManifest(fsys, dir)
	if err != nil {
		var ce *CorruptionError
		if !l.opts.SkipCorrupt || !errors.As(err, &ce) {
			return nil, nil, err
		}
		l.logger.Error("commitlog: ignoring corrupt manifest; segment ids are checked for gaps only",
			"file", manPath, "reason", ce.Reason)
	}
	listed = map[uint64]bool{}
	var missing []uint64
	if ok {
		for _, id := range want {
			listed[id] = true
		}
		have := map[uint64]bool{}
		for _, id := range found {
			have[id] = true
		}
		for _, id := range want {
			if !have[id] {
				missing = append(missing, id)
			}
		}
		top := uint64(0)
		if len(want) > 0 {
			top = want[len(want)-1]
		}
		var stale []uint64
		for _, id := range found {
			if !listed[id] && id < top {
				stale = append(stale, id)
				continue
			}
			scan = append(scan, id)
		}
		for _, id := range stale {
			path := filepath.Join(dir, SegmentName(id))
			l.logger.Warn("commitlog: deleting segment that the manifest says was released (its deletion did not survive a crash)",
				"file", path)
			if err := fsys.Remove(path); err != nil {
				return nil, nil, fmt.Errorf("commitlog: delete released segment %s: %w", path, err)
			}
		}
		if len(stale) > 0 {
			if err := syncDir(fsys, dir); err != nil {
				return nil, nil, err
			}
		}
	} else {
		scan = found
		if len(found) > 0 {
			if err == nil {
				l.logger.Warn("commitlog: no manifest (log written by an older build, or the manifest was lost); segment ids are checked for gaps only",
					"file", manPath)
			}
			for id := found[0] + 1; id < found[len(found)-1]; id++ {
				if _, hit := slices.BinarySearch(found, id); !hit {
					missing = append(missing, id)
				}
			}
		}
	}
	if len(missing) == 0 {
		return scan, listed, nil
	}
	var paths []string
	for _, id := range missing {
		paths = append(paths, filepath.Join(dir, SegmentName(id)))
	}
	why := "listed in the manifest " + manPath
	if !ok {
		why = "a gap in the segment ids"
	}
	cerr := &CorruptionError{Path: paths[0],
		Reason: fmt.Sprintf("%d segment file(s) missing (%s): %s", len(paths), why, strings.Join(paths, ", ")),
		Err:    ErrMissingSegment}
	if !l.opts.SkipCorrupt {
		return nil, nil, cerr
	}
	for _, p := range paths {
		l.logger.Error("commitlog: segment missing; its records are lost", "file", p, "reason", why)
	}
	return scan, listed, nil
}

// enqueue encodes r into the buffer and returns its position and end. With
// wantGen it also returns the sync generation that will acknowledge it.
func (l *Log) enqueue(r *Record, wantGen bool) (pos, end Position, gen *syncGen, err error) {
	if err := r.Validate(); err != nil {
		return pos, end, nil, err
	}
	frameLen := int64(r.EncodedSize() + FrameOverhead)
	if frameLen > l.maxRecord {
		return pos, end, nil, fmt.Errorf("%w: frame of %d bytes exceeds half the segment size (%d)", ErrTooLarge, frameLen, l.maxRecord)
	}
	l.mu.Lock()
	if l.opts.Sync == SyncPeriodic {
		for !l.closed && l.err == nil && time.Since(l.lastSync) > l.lag {
			l.synced.Wait()
		}
	}
	if l.closed {
		l.mu.Unlock()
		return pos, end, nil, ErrClosed
	}
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return pos, end, nil, err
	}
	seg := l.active
	if seg.size+frameLen > l.segSize && seg.records > 0 {
		seg = l.roll()
	}
	pos = Position{seg.id, seg.size}
	l.buf = appendFrame(l.buf, r)
	seg.size += frameLen
	seg.count(r)
	end = Position{seg.id, seg.size}
	if wantGen {
		if l.gen == nil {
			l.gen = &syncGen{done: make(chan struct{})}
		}
		gen = l.gen
	}
	l.pendingRecs++
	l.pendingBytes += int(frameLen)
	if l.opts.Sync != SyncPeriodic {
		if l.opts.Sync == SyncGroup {
			now := time.Now()
			l.window.appended(now)
			if l.pendingRecs == 1 {
				l.firstPending = now
			}
		}
		if l.pendingRecs == 1 {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		} else if l.opts.Sync == SyncGroup && (l.pendingRecs == l.groupTarget ||
			(l.pendingBytes >= groupBytes && l.pendingBytes-int(frameLen) < groupBytes)) {
			select {
			case l.full <- struct{}{}:
			default:
			}
		}
	}
	l.mu.Unlock()
	return pos, end, gen, nil
}

// roll seals the active segment and starts the next one; l.mu is held. The
// new file is created by the next write.
func (l *Log) roll() *segment {
	old := l.active
	old.sealed = true
	l.sealed = append(l.sealed, chunk{seg: old, data: l.buf})
	l.buf = l.spare[:0]
	l.spare = nil
	// The header is written by createSegment.
	next := &segment{id: old.id + 1, path: filepath.Join(l.opts.Dir, SegmentName(old.id+1)), size: HeaderSize}
	l.segs = append(l.segs, next)
	l.active = next
	return next
}

// Append adds r to the log and returns its position once it is durable per
// the sync mode: for batch and group after the fsync covering it; for
// periodic once it is written to the OS.
func (l *Log) Append(r *Record) (Position, error) { return l.AppendPlaced(r, nil) }

// AppendPlaced is Append that also sets placed (unless nil) once r has its
// place in the log, before it waits for the write or the fsync: every
// record appended after that follows r in the log, so that whatever of the
// log survives a crash and holds a later record holds r too.
func (l *Log) AppendPlaced(r *Record, placed *atomic.Bool) (Position, error) {
	periodic := l.opts.Sync == SyncPeriodic
	pos, end, gen, err := l.enqueue(r, !periodic)
	if err != nil {
		return Position{}, err
	}
	if placed != nil {
		placed.Store(true)
	}
	if periodic {
		return pos, l.writeThrough(end)
	}
	<-gen.done
	return pos, gen.err
}

// AppendAsync adds r to the log and returns at once (for periodic mode, once
// the record is written to the OS). The Pending's Done channel closes when
// the record is fsynced, or when it has failed.
func (l *Log) AppendAsync(r *Record) *Pending {
	pos, end, gen, err := l.enqueue(r, true)
	if err != nil {
		return &Pending{err: err}
	}
	if l.opts.Sync == SyncPeriodic {
		if err := l.writeThrough(end); err != nil {
			return &Pending{Position: pos, err: err}
		}
	}
	return &Pending{Position: pos, gen: gen}
}

// writeThrough makes sure everything up to end is written to the OS.
func (l *Log) writeThrough(end Position) error {
	l.ioMu.Lock()
	l.mu.Lock()
	done := !l.written.Less(end)
	l.mu.Unlock()
	if !done {
		l.writePending()
	}
	l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.written.Less(end) {
		return nil
	}
	if l.err != nil {
		return l.err
	}
	return ErrClosed
}

// writePending writes every buffered byte to the files; l.ioMu is held.
// Sealed segments are fsynced as they are finished.
func (l *Log) writePending() error {
	l.mu.Lock()
	sealed := l.sealed
	l.sealed = nil
	active := l.active
	data := l.buf
	l.buf, l.spare = l.spare[:0], nil
	end := Position{active.id, active.size}
	if l.gen != nil {
		l.unsynced = append(l.unsynced, l.gen)
		l.gen = nil
	}
	if l.opts.Sync == SyncGroup {
		l.groupTarget = max(l.pendingRecs, 2)
		if l.pendingRecs > 0 {
			l.window.grouped(l.pendingRecs)
		}
	}
	l.pendingRecs, l.pendingBytes = 0, 0
	err := l.err
	if err == nil && l.shut {
		err = ErrClosed
	}
	l.mu.Unlock()

	var done []*segment
	if err == nil {
		for _, c := range sealed {
			if err = l.writeSeg(c.seg, c.data); err != nil {
				break
			}
			if err = l.unmap(c.seg); err != nil {
				break
			}
			if err = c.seg.f.Sync(); err != nil {
				err = fmt.Errorf("commitlog: sync %s: %w", c.seg.path, err)
				break
			}
			l.toClose = append(l.toClose, c.seg.f)
			done = append(done, c.seg)
		}
	}
	if err == nil && len(data) > 0 {
		err = l.writeSeg(active, data)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range done {
		s.synced = true
	}
	if err != nil {
		l.fail(err)
		return l.err
	}
	l.written = end
	if cap(data) <= maxSpareBuffer {
		l.spare = data[:0]
	}
	return nil
}

// writeSeg writes data to seg, creating its file first if needed.
func (l *Log) writeSeg(seg *segment, data []byte) error {
	if seg.f == nil {
		if err := l.createSegment(seg); err != nil {
			return err
		}
	}
	l.lastSeg = seg
	var err error
	if seg.m != nil {
		_, err = seg.m.WriteAt(data, seg.written)
	} else {
		_, err = seg.f.Write(data)
	}
	if err != nil {
		return fmt.Errorf("commitlog: write %s: %w", seg.path, err)
	}
	seg.written += int64(len(data))
	return nil
}

// fail records a sticky error; l.mu is held.
func (l *Log) fail(err error) {
	if l.err == nil && !errors.Is(err, ErrClosed) {
		l.err = err
		l.logger.Error("commitlog: write failed; the log refuses further appends", "err", err)
	}
}

// syncNow writes everything pending, fsyncs it and acknowledges every
// generation it covered.
func (l *Log) syncNow() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()

	l.ioMu.Lock()
	err := l.writePending()
	gens := l.unsynced
	l.unsynced = nil
	seg := l.lastSeg
	toClose := l.toClose
	l.toClose = nil
	// Read end while ioMu still excludes other writers: every byte before
	// it is in seg (fsynced below) or in a sealed segment already fsynced.
	l.mu.Lock()
	end := l.written
	need := l.durable.Less(end)
	l.mu.Unlock()
	l.ioMu.Unlock()
	var took time.Duration
	if err == nil && need {
		start := time.Now()
		if serr := seg.f.Sync(); serr != nil {
			err = fmt.Errorf("commitlog: sync %s: %w", seg.path, serr)
		}
		// At least 1ns, so that a clock too coarse to see the fsync
		// still counts it as timed.
		took = max(time.Since(start), time.Nanosecond)
	}
	for _, f := range toClose {
		if cerr := f.Close(); cerr != nil {
			l.logger.Warn("commitlog: close sealed segment", "file", f.Name(), "err", cerr)
		}
	}

	l.mu.Lock()
	if err != nil {
		l.fail(err)
		if l.err != nil {
			err = l.err
		}
	} else if l.err != nil {
		err = l.err
	} else if l.durable.Less(end) {
		l.durable = end
	}
	l.lastSync = time.Now()
	l.window.synced(took)
	l.synced.Broadcast()
	l.mu.Unlock()

	for _, g := range gens {
		g.err = err
		close(g.done)
	}
	return err
}

// syncLoop is the syncer of batch and group modes.
func (l *Log) syncLoop() {
	defer close(l.loopDone)
	var timer *time.Timer
	for {
		select {
		case <-l.kick:
		case <-l.quit:
			return
		}
		if l.opts.Sync == SyncGroup {
			select {
			case <-l.full:
			default:
			}
			l.mu.Lock()
			ready := l.pendingRecs >= l.groupTarget || l.pendingBytes >= groupBytes
			empty := l.pendingRecs == 0
			wait := l.window.wait(l.firstPending, time.Now())
			l.mu.Unlock()
			if empty {
				continue
			}
			if !ready && wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-timer.C:
				case <-l.full:
					timer.Stop()
				case <-l.quit:
					timer.Stop()
					return
				}
			}
		}
		l.syncNow()
	}
}

// periodicLoop fsyncs every SyncPeriod.
func (l *Log) periodicLoop() {
	defer close(l.loopDone)
	t := time.NewTicker(l.opts.SyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.syncNow()
		case <-l.quit:
			return
		}
	}
}

// Sync writes and fsyncs everything appended so far.
func (l *Log) Sync() error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return l.syncNow()
}

// Access returns the access mode the log's appends use now: AccessMmap,
// or AccessStandard (asked for, or fallen back to where segments cannot be
// mapped).
func (l *Log) Access() AccessMode {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	if l.mapped {
		return AccessMmap
	}
	return AccessStandard
}

// Durable returns a position such that every record strictly before it is
// fsynced.
func (l *Log) Durable() Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// Position returns the end of the log: the position the next append gets
// unless it rolls to a new segment.
func (l *Log) Position() Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Position{l.active.id, l.active.size}
}

// Size returns the bytes of every segment, the active one included, with
// the appends not yet written to its file.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments describes every segment, oldest first; the last is the active one.
func (l *Log) Segments() []SegmentInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.info()
	}
	return out
}

// Release declares that every record before upTo is in a flushed SSTable. It
// deletes each segment that lies entirely before upTo, is not the active
// segment, is fully written and fsynced, and that Options.Retain does not
// keep. Segments kept or not yet eligible are considered again next time.
func (l *Log) Release(upTo Position) error {
	l.releaseMu.Lock()
	defer l.releaseMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	var cands []*segment
	var infos []SegmentInfo
	for _, s := range l.segs {
		if s == l.active || !s.synced {
			continue
		}
		if s.id < upTo.Segment || (s.id == upTo.Segment && s.size <= upTo.Offset) {
			cands = append(cands, s)
			infos = append(infos, s.info())
		}
	}
	l.mu.Unlock()

	var victims []*segment
	for i, s := range cands {
		if l.opts.Retain != nil && l.opts.Retain(infos[i]) {
			continue
		}
		victims = append(victims, s)
	}
	if len(victims) == 0 {
		return nil
	}
	// The manifest stops listing the victims before any is deleted, so
	// that Open can tell a released segment from a lost one.
	gone := map[uint64]bool{}
	for _, s := range victims {
		gone[s.id] = true
	}
	l.manMu.Lock()
	live := slices.DeleteFunc(slices.Clone(l.live), func(id uint64) bool { return gone[id] })
	err := l.writeManifest(live)
	if err == nil {
		l.live = live
	}
	l.manMu.Unlock()
	if err != nil {
		return fmt.Errorf("commitlog: release: %w", err)
	}
	var errs []error
	for _, s := range victims {
		l.logger.Info("commitlog: deleting released segment", "file", s.path, "records", s.records)
		if err := l.opts.FS.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			// The manifest no longer lists it: Open deletes it.
			l.logger.Error("commitlog: could not delete released segment; the next Open deletes it",
				"file", s.path, "err", err)
			errs = append(errs, fmt.Errorf("commitlog: release segment: %w", err))
		}
	}
	if err := syncDir(l.opts.FS, l.opts.Dir); err != nil {
		errs = append(errs, err)
	}
	l.mu.Lock()
	l.segs = slices.DeleteFunc(l.segs, func(s *segment) bool { return gone[s.id] })
	l.mu.Unlock()
	return errors.Join(errs...)
}

// Close syncs everything appended, stops the syncer and closes the files.
// Appends after Close fail with ErrClosed. Close is idempotent; later calls
// return the first call's result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.synced.Broadcast()
		l.mu.Unlock()
		close(l.quit)
		<-l.loopDone
		err := l.syncNow()

		l.syncMu.Lock()
		l.ioMu.Lock()
		l.mu.Lock()
		l.shut = true
		segs := slices.Clone(l.segs)
		l.mu.Unlock()
		for _, s := range segs {
			if s.m == nil {
				continue
			}
			uerr := l.unmap(s)
			if uerr == nil {
				if serr := s.f.Sync(); serr != nil {
					uerr = fmt.Errorf("commitlog: sync %s: %w", s.path, serr)
				}
			}
			if uerr != nil && err == nil {
				err = uerr
			}
		}
		for _, s := range segs {
			if s.f != nil {
				if cerr := s.f.Close(); cerr != nil && !errors.Is(cerr, os.ErrClosed) && err == nil {
					err = fmt.Errorf("commitlog: close %s: %w", s.path, cerr)
				}
			}
		}
		l.ioMu.Unlock()
		l.syncMu.Unlock()
		l.closeErr = err
	})
	return l.closeErr
}
