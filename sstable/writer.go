package sstable

import (
	"bufio"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io/fs"
	"math"
	"os"

	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/vfs"
)

// Defaults of Options.
const (
	DefaultBlockSize     = 4096
	DefaultBloomFPChance = 0.01
	DefaultIndexInterval = 128
)

// Options tune the layout of the tables a Writer produces. Zero values take
// the defaults; they are recorded in Statistics but readers need none of them.
type Options struct {
	BlockSize     int     // target uncompressed data block size, default 4096
	BloomFPChance float64 // false-positive chance of the partition filter, in (0, 1); default 0.01 (Cassandra's bloom_filter_fp_chance)
	IndexInterval int     // index entries per index block, so the summary samples every Nth index entry; default 128 (Cassandra's min_index_interval)
	// FS is the filesystem the files are written to; nil means vfs.Default.
	// It is not recorded in Statistics.
	FS vfs.FS
}

func (o Options) withDefaults() Options {
	if o.BlockSize <= 0 {
		o.BlockSize = DefaultBlockSize
	}
	o.BlockSize = min(o.BlockSize, maxBlockLen/2)
	if !(o.BloomFPChance > 0 && o.BloomFPChance < 1) {
		o.BloomFPChance = DefaultBloomFPChance
	}
	if o.IndexInterval <= 0 {
		o.IndexInterval = DefaultIndexInterval
	}
	o.IndexInterval = min(o.IndexInterval, 1<<20)
	o.FS = vfs.Or(o.FS)
	return o
}

// Meta describes a complete table; it is stored in its Statistics component.
type Meta struct {
	Generation   uint64
	Rows         uint64  // partitions, including those with no cells
	MinKey       row.Key // first key; zero when Rows == 0
	MaxKey       row.Key // last key; zero when Rows == 0
	MaxTimestamp int64   // largest cell timestamp; math.MinInt64 when the table holds no cell
	DataSize     int64   // bytes of the Data component (for size-tiered compaction)
	User         []byte  // opaque caller metadata (the engine's commit-log replay position)
}

// countingWriter feeds a file through a buffer and a running CRC32C and
// counts the bytes written.
type countingWriter struct {
	f   vfs.File
	buf *bufio.Writer
	sum hash.Hash32
	n   int64
}

func newCountingWriter(f vfs.File) *countingWriter {
	return &countingWriter{f: f, buf: bufio.NewWriterSize(f, 256<<10), sum: crc32.New(castagnoli)}
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.sum.Write(p)
	n, err := c.buf.Write(p)
	c.n += int64(n)
	return n, err
}

// finish flushes, fsyncs and closes the file.
func (c *countingWriter) finish() error {
	err := c.buf.Flush()
	if err == nil {
		err = c.f.Sync()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Writer builds one table. Rows are added in strictly increasing key order;
// Finish makes the table complete and durable, Abort discards it. A Writer is
// not safe for concurrent use.
type Writer struct {
	dir  string
	gen  uint64
	opts Options

	data, index *countingWriter

	block     []byte    // data block under construction: 4 reserved bytes, u32 row count, rows
	blockRows int       // rows in block
	pending   []row.Key // keys of the rows in block, waiting for the block's offset and length

	iblock   []byte  // index block under construction, same shape
	iEntries int     // entries in iblock
	iFirst   row.Key // first key of iblock
	summary  []byte  // encoded summary entries, one per index block
	nSummary int

	hashes [][2]uint64 // bloom hashes of every key, for sizing the filter at Finish
	meta   Meta
	last   row.Key

	err      error // sticky: the first failure; the writer must then be aborted
	finished bool
	aborted  bool
}

// NewWriter creates the Data and Index files of generation gen in dir, under
// temporary names. It fails if generation gen is already complete in dir;
// leftovers of an incomplete one are overwritten.
func NewWriter(dir string, gen uint64, opts Options) (*Writer, error) {
	opts = opts.withDefaults()
	if _, err := opts.FS.Stat(path(dir, gen, tocComponent)); err == nil {
		return nil, fmt.Errorf("sstable: new writer %s generation %d: %w", dir, gen, fs.ErrExist)
	}
	w := &Writer{dir: dir, gen: gen, opts: opts}
	w.meta.Generation = gen
	w.meta.MaxTimestamp = math.MinInt64
	open := func(comp string) (*countingWriter, error) {
		f, err := opts.FS.OpenFile(path(dir, gen, comp+tmpSuffix), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("sstable: new writer generation %d: %w", gen, err)
		}
		return newCountingWriter(f), nil
	}
	var err error
	if w.data, err = open(dataComponent); err != nil {
		return nil, err
	}
	if w.index, err = open(indexComponent); err != nil {
		w.Abort()
		return nil, err
	}
	w.block = make([]byte, 8, 16+w.opts.BlockSize+w.opts.BlockSize/4)
	w.iblock = make([]byte, 8, 16+64*min(w.opts.IndexInterval, 1<<12))
	return w, nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

// Add appends r. Its key must be strictly greater than the previous row's,
// and its cells strictly sorted by column. A row with no cells is kept: Get
// returns it, and it takes part in compaction like any other row. Add copies
// what it keeps; the caller may reuse r afterwards.
func (w *Writer) Add(r row.Row) error {
	if w.err != nil {
		return fmt.Errorf("sstable: add to generation %d after failure: %w", w.gen, w.err)
	}
	if w.finished || w.aborted {
		return fmt.Errorf("sstable: add to generation %d: writer closed", w.gen)
	}
	if w.meta.Rows > 0 && row.Compare(w.last, r.Key) >= 0 {
		return fmt.Errorf("sstable: add to generation %d: key %s not after %s", w.gen, r.Key, w.last)
	}
	if len(r.Key.Partition) > math.MaxUint32/2 {
		return fmt.Errorf("sstable: add to generation %d: key %s: partition too long", w.gen, r.Key)
	}
	for i, c := range r.Cells {
		if i > 0 && r.Cells[i-1].Column >= c.Column {
			return fmt.Errorf("sstable: add to generation %d: key %s: cells not strictly sorted at %q", w.gen, r.Key, c.Column)
		}
		if len(c.Value) > maxBlockLen/4 || len(c.Column) > maxBlockLen/4 {
			return fmt.Errorf("sstable: add to generation %d: key %s column %q: cell too large", w.gen, r.Key, c.Column)
		}
		w.meta.MaxTimestamp = max(w.meta.MaxTimestamp, c.Timestamp)
	}
	before := len(w.block)
	w.block = appendRow(w.block, r)
	if len(w.block)+4 > maxBlockLen {
		// Only reachable when one row alone is too large for a block.
		w.block = w.block[:before]
		return fmt.Errorf("sstable: add to generation %d: key %s: row too large", w.gen, r.Key)
	}
	key := r.Key.Clone()
	w.blockRows++
	w.pending = append(w.pending, key)
	w.hashes = append(w.hashes, keyHash(key))
	if w.meta.Rows == 0 {
		w.meta.MinKey = key
	}
	w.meta.Rows++
	w.last = key
	if len(w.block) >= w.opts.BlockSize {
		return w.flushBlock()
	}
	return nil
}

// flushBlock writes the data block under construction and indexes its rows.
func (w *Writer) flushBlock() error {
	if w.blockRows == 0 {
		return nil
	}
	w.block[4], w.block[5], w.block[6], w.block[7] = byte(w.blockRows>>24), byte(w.blockRows>>16), byte(w.blockRows>>8), byte(w.blockRows)
	w.block = frameBlock(w.block)
	off := w.data.n
	if _, err := w.data.Write(w.block); err != nil {
		return w.fail(fmt.Errorf("sstable: write %s at offset %d: %w", fileName(w.gen, dataComponent), off, err))
	}
	for _, k := range w.pending {
		if err := w.addIndexEntry(indexEntry{key: k, offset: uint64(off), length: uint32(len(w.block))}); err != nil {
			return err
		}
	}
	w.pending = w.pending[:0]
	w.block = w.block[:8]
	w.blockRows = 0
	return nil
}

func (w *Writer) addIndexEntry(e indexEntry) error {
	if w.iEntries == 0 {
		w.iFirst = e.key
	}
	w.iblock = appendIndexEntry(w.iblock, e)
	w.iEntries++
	if w.iEntries >= w.opts.IndexInterval {
		return w.flushIndexBlock()
	}
	return nil
}

// flushIndexBlock writes the index block under construction and samples its
// first key into the summary.
func (w *Writer) flushIndexBlock() error {
	if w.iEntries == 0 {
		return nil
	}
	n := w.iEntries
	w.iblock[4], w.iblock[5], w.iblock[6], w.iblock[7] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	w.iblock = frameBlock(w.iblock)
	off := w.index.n
	if _, err := w.index.Write(w.iblock); err != nil {
		return w.fail(fmt.Errorf("sstable: write %s at offset %d: %w", fileName(w.gen, indexComponent), off, err))
	}
	w.summary = appendIndexEntry(w.summary, indexEntry{key: w.iFirst, offset: uint64(off), length: uint32(len(w.iblock))})
	w.nSummary++
	w.iblock = w.iblock[:8]
	w.iEntries = 0
	return nil
}

// writeWhole writes b to a temporary component file and fsyncs it.
func (w *Writer) writeWhole(comp string, b []byte) error {
	name := path(w.dir, w.gen, comp+tmpSuffix)
	f, err := w.opts.FS.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("sstable: write %s: %w", name, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sstable: write %s: %w", name, err)
	}
	return nil
}

// Finish writes the remaining blocks and the Summary, Filter and Statistics
// components, fsyncs every file, renames them to their final names, writes
// the TOC last (its presence marks the table complete) and fsyncs dir.
// user is stored as Meta.User. On failure the partial files are removed.
func (w *Writer) Finish(user []byte) (Meta, error) {
	if w.finished || w.aborted {
		return Meta{}, fmt.Errorf("sstable: finish generation %d: writer closed", w.gen)
	}
	meta, err := w.finish(user)
	if err != nil {
		w.fail(err)
		w.Abort()
		return Meta{}, err
	}
	w.finished = true
	return meta, nil
}

func (w *Writer) finish(user []byte) (Meta, error) {
	if w.err != nil {
		return Meta{}, fmt.Errorf("sstable: finish generation %d after failure: %w", w.gen, w.err)
	}
	if err := w.flushBlock(); err != nil {
		return Meta{}, err
	}
	if err := w.flushIndexBlock(); err != nil {
		return Meta{}, err
	}
	if w.meta.Rows > 0 {
		w.meta.MaxKey = w.last
	}
	w.meta.DataSize = w.data.n
	w.meta.User = append([]byte(nil), user...)

	s := stats{
		meta:          w.meta,
		blockSize:     uint32(w.opts.BlockSize),
		indexInterval: uint32(w.opts.IndexInterval),
		fpChance:      w.opts.BloomFPChance,
	}
	s.digests[compData] = digest{size: uint64(w.data.n), crc: w.data.sum.Sum32()}
	s.digests[compIndex] = digest{size: uint64(w.index.n), crc: w.index.sum.Sum32()}
	for _, c := range []struct {
		w    *countingWriter
		comp string
	}{{w.data, dataComponent}, {w.index, indexComponent}} {
		if err := c.w.finish(); err != nil {
			return Meta{}, fmt.Errorf("sstable: finish %s: %w", fileName(w.gen, c.comp), err)
		}
	}

	summary := appendU32(make([]byte, 0, 4+len(w.summary)), uint32(w.nSummary))
	summary = append(summary, w.summary...)
	filter := newBloom(w.hashes, w.opts.BloomFPChance).encode()
	s.digests[compSummary] = digest{size: uint64(len(summary)), crc: crc(summary)}
	s.digests[compFilter] = digest{size: uint64(len(filter)), crc: crc(filter)}
	for _, c := range []struct {
		comp string
		b    []byte
	}{{summaryComponent, summary}, {filterComponent, filter}, {statisticsComponent, encodeStats(s)}} {
		if err := w.writeWhole(c.comp, c.b); err != nil {
			return Meta{}, err
		}
	}
	for _, comp := range components {
		if err := w.opts.FS.Rename(path(w.dir, w.gen, comp+tmpSuffix), path(w.dir, w.gen, comp)); err != nil {
			return Meta{}, fmt.Errorf("sstable: finish generation %d: %w", w.gen, err)
		}
	}
	// Make the renamed components durable before the TOC can exist.
	if err := syncDir(w.opts.FS, w.dir); err != nil {
		return Meta{}, err
	}
	if err := w.writeWhole(tocComponent, []byte(tocContents)); err != nil {
		return Meta{}, err
	}
	if err := w.opts.FS.Rename(path(w.dir, w.gen, tocComponent+tmpSuffix), path(w.dir, w.gen, tocComponent)); err != nil {
		return Meta{}, fmt.Errorf("sstable: finish generation %d: %w", w.gen, err)
	}
	if err := syncDir(w.opts.FS, w.dir); err != nil {
		return Meta{}, err
	}
	w.hashes = nil
	return w.meta, nil
}

// Abort closes and removes the files of an unfinished table. After a
// successful Finish it does nothing, so it may be deferred.
func (w *Writer) Abort() error {
	if w.finished || w.aborted {
		return nil
	}
	w.aborted = true
	for _, c := range []*countingWriter{w.data, w.index} {
		if c != nil {
			c.f.Close() // may already be closed by finish
		}
	}
	// The TOC goes first: Finish may have failed after writing it.
	var errs []error
	for _, comp := range append([]string{tocComponent}, components...) {
		for _, name := range []string{comp + tmpSuffix, comp} {
			if err := w.opts.FS.Remove(path(w.dir, w.gen, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("sstable: abort generation %d: %w", w.gen, err))
			}
		}
	}
	return errors.Join(errs...)
}
