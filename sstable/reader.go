package sstable

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"sort"

	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/vfs"
)

// maxMetaFile bounds the size of a Summary, Filter or Statistics component
// that Open reads into memory.
const maxMetaFile = 1 << 31

// Reader reads one complete table. Get, All, Range and Meta may be called
// concurrently; Close must follow all of them.
type Reader struct {
	fsys    vfs.FS
	dir     string
	gen     uint64
	data    vfs.File
	index   vfs.File
	stats   stats
	summary []indexEntry // first key, offset and length of every index block
	filter  *bloom
}

// Open opens complete generation gen of dir. It checks the TOC, the
// Statistics footer (magic, version, checksum), the sizes of all components
// and the whole-file checksums of Summary and Filter, which it loads into
// memory. Data and Index blocks are verified by their own checksums when read.
func Open(dir string, gen uint64) (*Reader, error) { return OpenFS(nil, dir, gen) }

// OpenFS is Open on fsys (nil: vfs.Default).
func OpenFS(fsys vfs.FS, dir string, gen uint64) (*Reader, error) {
	r := &Reader{fsys: vfs.Or(fsys), dir: dir, gen: gen}
	if err := r.open(); err != nil {
		r.Close()
		return nil, fmt.Errorf("sstable: open %s generation %d: %w", dir, gen, err)
	}
	return r, nil
}

func readSmall(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxMetaFile {
		return nil, fmt.Errorf("%w: %s: %d bytes is too large", ErrCorrupt, name, fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

func (r *Reader) open() error {
	toc, err := readSmall(r.fsys, path(r.dir, r.gen, tocComponent))
	if err != nil {
		return err
	}
	if string(toc) != tocContents {
		return fmt.Errorf("%w: %s: unexpected contents %q", ErrCorrupt, fileName(r.gen, tocComponent), toc)
	}
	b, err := readSmall(r.fsys, path(r.dir, r.gen, statisticsComponent))
	if err != nil {
		return err
	}
	if r.stats, err = decodeStats(b); err != nil {
		return fmt.Errorf("%s: %w", fileName(r.gen, statisticsComponent), err)
	}
	if r.stats.meta.Generation != r.gen {
		return fmt.Errorf("%w: %s: records generation %d", ErrCorrupt, fileName(r.gen, statisticsComponent), r.stats.meta.Generation)
	}
	if r.data, err = r.openSized(dataComponent, compData); err != nil {
		return err
	}
	if r.index, err = r.openSized(indexComponent, compIndex); err != nil {
		return err
	}
	sum, err := r.readDigested(summaryComponent, compSummary)
	if err != nil {
		return err
	}
	if r.summary, err = decodeEntries(sum, "summary entry"); err != nil {
		return fmt.Errorf("%s: %w", fileName(r.gen, summaryComponent), err)
	}
	if err := r.checkSummary(); err != nil {
		return fmt.Errorf("%s: %w", fileName(r.gen, summaryComponent), err)
	}
	fb, err := r.readDigested(filterComponent, compFilter)
	if err != nil {
		return err
	}
	if r.filter, err = decodeBloom(fb); err != nil {
		return fmt.Errorf("%s: %w", fileName(r.gen, filterComponent), err)
	}
	return nil
}

// openSized opens a component and checks its size against Statistics.
func (r *Reader) openSized(comp string, id int) (vfs.File, error) {
	f, err := r.fsys.Open(path(r.dir, r.gen, comp))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if want := r.stats.digests[id].size; uint64(fi.Size()) != want {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %d bytes, statistics records %d", ErrCorrupt, comp, fi.Size(), want)
	}
	return f, nil
}

// readDigested reads a whole component and checks its size and checksum
// against Statistics.
func (r *Reader) readDigested(comp string, id int) ([]byte, error) {
	b, err := readSmall(r.fsys, path(r.dir, r.gen, comp))
	if err != nil {
		return nil, err
	}
	dg := r.stats.digests[id]
	if uint64(len(b)) != dg.size {
		return nil, fmt.Errorf("%w: %s: %d bytes, statistics records %d", ErrCorrupt, fileName(r.gen, comp), len(b), dg.size)
	}
	if got := crc(b); got != dg.crc {
		return nil, fmt.Errorf("%w: %s: checksum %08x, statistics records %08x", ErrCorrupt, fileName(r.gen, comp), got, dg.crc)
	}
	return b, nil
}

// checkSummary checks that the summary's index blocks tile the Index
// component exactly and that its keys lie within the table's key range.
func (r *Reader) checkSummary() error {
	m := r.stats.meta
	var off uint64
	for i, e := range r.summary {
		if e.offset != off || e.length < blockOverhead || uint64(e.length) > maxBlockLen {
			return fmt.Errorf("%w: summary entry %d: index block at %d+%d, expected offset %d", ErrCorrupt, i, e.offset, e.length, off)
		}
		off += uint64(e.length)
		if row.Compare(e.key, m.MinKey) < 0 || row.Compare(e.key, m.MaxKey) > 0 {
			return fmt.Errorf("%w: summary entry %d: key %s outside table range", ErrCorrupt, i, e.key)
		}
	}
	if off != r.stats.digests[compIndex].size {
		return fmt.Errorf("%w: summary covers %d index bytes of %d", ErrCorrupt, off, r.stats.digests[compIndex].size)
	}
	if (m.Rows == 0) != (len(r.summary) == 0) {
		return fmt.Errorf("%w: %d rows, %d summary entries", ErrCorrupt, m.Rows, len(r.summary))
	}
	return nil
}

// Meta returns the table's metadata. Its byte slices must not be modified.
func (r *Reader) Meta() Meta { return r.stats.meta }

// Close closes the table's files.
func (r *Reader) Close() error {
	var errs []error
	for _, f := range []vfs.File{r.data, r.index} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// readBlock reads the framed block at off+length of f, bounded by size.
func (r *Reader) readBlock(f vfs.File, comp string, size, off uint64, length uint32) ([]byte, error) {
	if length < blockOverhead || length > maxBlockLen || off > size || uint64(length) > size-off {
		return nil, fmt.Errorf("sstable: %s: block at offset %d length %d outside %d bytes: %w", r.name(comp), off, length, size, ErrCorrupt)
	}
	b := make([]byte, length)
	if _, err := f.ReadAt(b, int64(off)); err != nil {
		return nil, fmt.Errorf("sstable: %s: read block at offset %d: %w", r.name(comp), off, err)
	}
	return b, nil
}

// BlockError reports a data or index block that does not match its
// checksum or does not decode. It wraps ErrCorrupt.
type BlockError struct {
	Path   string // the component file
	Kind   string // "data" or "index"
	Offset uint64 // byte offset of the framed block in the file
	Err    error
}

func (e *BlockError) Error() string {
	return fmt.Sprintf("sstable: %s: %s block at offset %d: %v", e.Path, e.Kind, e.Offset, e.Err)
}

// Unwrap returns the cause, which wraps ErrCorrupt.
func (e *BlockError) Unwrap() error { return e.Err }

func (r *Reader) blockError(comp, kind string, off uint64, err error) error {
	return &BlockError{Path: r.name(comp), Kind: kind, Offset: off, Err: err}
}

func (r *Reader) name(comp string) string {
	return fmt.Sprintf("%s/%s", r.dir, fileName(r.gen, comp))
}

// indexBlock reads and decodes the index block of summary entry i.
func (r *Reader) indexBlock(i int) ([]indexEntry, error) {
	s := r.summary[i]
	b, err := r.readBlock(r.index, indexComponent, r.stats.digests[compIndex].size, s.offset, s.length)
	if err != nil {
		return nil, err
	}
	es, err := decodeIndexBlock(b)
	if err != nil {
		return nil, r.blockError(indexComponent, "index", s.offset, err)
	}
	if len(es) == 0 || row.Compare(es[0].key, s.key) != 0 {
		return nil, fmt.Errorf("sstable: %s: index block at offset %d does not start at its summary key %s: %w", r.name(indexComponent), s.offset, s.key, ErrCorrupt)
	}
	return es, nil
}

// summaryFloor returns the index of the last summary entry whose key is <= k,
// or -1.
func (r *Reader) summaryFloor(k row.Key) int {
	i := sort.Search(len(r.summary), func(i int) bool { return row.Compare(r.summary[i].key, k) > 0 })
	return i - 1
}

// Get returns the row with key k. It consults the bloom filter, then the
// in-memory summary, reads one index block and exactly one data block, each
// verified by its checksum. A checksum mismatch is an error, never a wrong
// row. The returned row shares no memory with the Reader or the block it
// was read from: its key and values are copied into one buffer of their
// own size, so a caller that keeps a value (a cache) keeps its bytes, not
// the block's.
func (r *Reader) Get(k row.Key) (row.Row, bool, error) {
	m := &r.stats.meta
	if m.Rows == 0 || row.Compare(k, m.MinKey) < 0 || row.Compare(k, m.MaxKey) > 0 {
		return row.Row{}, false, nil
	}
	if !r.filter.mayContain(keyHash(k)) {
		return row.Row{}, false, nil
	}
	si := r.summaryFloor(k)
	if si < 0 {
		return row.Row{}, false, nil
	}
	s := r.summary[si]
	ib, err := r.readBlock(r.index, indexComponent, r.stats.digests[compIndex].size, s.offset, s.length)
	if err != nil {
		return row.Row{}, false, err
	}
	e, ok, err := findInIndexBlock(ib, s.key, k)
	if err != nil {
		return row.Row{}, false, r.blockError(indexComponent, "index", s.offset, err)
	}
	if !ok {
		return row.Row{}, false, nil
	}
	b, err := r.readBlock(r.data, dataComponent, uint64(m.DataSize), e.offset, e.length)
	if err != nil {
		return row.Row{}, false, err
	}
	got, ok, err := findInBlock(b, k)
	if err != nil {
		return row.Row{}, false, r.blockError(dataComponent, "data", e.offset, err)
	}
	if !ok {
		return row.Row{}, false, r.blockError(dataComponent, "data", e.offset, fmt.Errorf("lacks indexed key %s: %w", k, ErrCorrupt))
	}
	return detach(got), true, nil
}

// detach copies a row's partition key and cell values, which alias their
// block, into one buffer of their total size.
func detach(r row.Row) row.Row {
	n := len(r.Key.Partition)
	for _, c := range r.Cells {
		n += len(c.Value)
	}
	buf := make([]byte, 0, n)
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	r.Key.Partition = take(r.Key.Partition)
	for i := range r.Cells {
		r.Cells[i].Value = take(r.Cells[i].Value)
	}
	return r
}

// All returns every row in key order, verifying each data block's checksum,
// that keys strictly increase, and that the blocks add up to the Data
// component and the row count and key range of Statistics. After an error it
// yields nothing more. Rows share no memory with the Reader; a row may share
// its block's buffer with the other rows of that block, which is never reused.
func (r *Reader) All() iter.Seq2[row.Row, error] {
	return func(yield func(row.Row, error) bool) {
		r.scan(0, nil, yield)
	}
}

// Range returns the rows with key >= from, in key order, verified as in All.
func (r *Reader) Range(from row.Key) iter.Seq2[row.Row, error] {
	return func(yield func(row.Row, error) bool) {
		m := &r.stats.meta
		if m.Rows == 0 || row.Compare(from, m.MinKey) <= 0 {
			r.scan(0, nil, yield)
			return
		}
		if row.Compare(from, m.MaxKey) > 0 {
			return
		}
		si := max(r.summaryFloor(from), 0)
		for ; si < len(r.summary); si++ {
			es, err := r.indexBlock(si)
			if err != nil {
				yield(row.Row{}, err)
				return
			}
			j := sort.Search(len(es), func(j int) bool { return row.Compare(es[j].key, from) >= 0 })
			if j < len(es) {
				r.scan(es[j].offset, &from, yield)
				return
			}
		}
	}
}

// scan yields the rows of the data blocks from offset off to the end of the
// Data component, skipping those below from when it is not nil.
func (r *Reader) scan(off uint64, from *row.Key, yield func(row.Row, error) bool) {
	m := &r.stats.meta
	size := uint64(m.DataSize)
	fail := func(err error) { yield(row.Row{}, err) }
	if off > size {
		fail(fmt.Errorf("sstable: %s: scan from offset %d beyond %d bytes: %w", r.name(dataComponent), off, size, ErrCorrupt))
		return
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r.data, int64(off), int64(size-off)), 256<<10)
	var (
		last    row.Key
		hasLast bool
		rows    uint64
	)
	for off < size {
		var hdr [4]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			fail(fmt.Errorf("sstable: %s: read block header at offset %d: %w", r.name(dataComponent), off, err))
			return
		}
		n := uint64(binary.BigEndian.Uint32(hdr[:]))
		if n+blockOverhead > size-off || n+blockOverhead > maxBlockLen {
			fail(fmt.Errorf("sstable: %s: block at offset %d: payload length %d exceeds the file: %w", r.name(dataComponent), off, n, ErrCorrupt))
			return
		}
		b := make([]byte, n+blockOverhead)
		copy(b, hdr[:])
		if _, err := io.ReadFull(br, b[4:]); err != nil {
			fail(fmt.Errorf("sstable: %s: read block at offset %d: %w", r.name(dataComponent), off, err))
			return
		}
		rs, err := decodeBlock(b)
		if err != nil {
			fail(r.blockError(dataComponent, "data", off, err))
			return
		}
		for _, x := range rs {
			if hasLast && row.Compare(last, x.Key) >= 0 {
				fail(fmt.Errorf("sstable: %s: data block at offset %d: key %s not after %s: %w", r.name(dataComponent), off, x.Key, last, ErrCorrupt))
				return
			}
			if !hasLast && from == nil && row.Compare(x.Key, m.MinKey) != 0 {
				fail(fmt.Errorf("sstable: %s: first key %s, statistics records %s: %w", r.name(dataComponent), x.Key, m.MinKey, ErrCorrupt))
				return
			}
			last, hasLast = x.Key, true
			rows++
			if from != nil && row.Compare(x.Key, *from) < 0 {
				continue
			}
			if !yield(x, nil) {
				return
			}
		}
		off += uint64(len(b))
	}
	if from == nil && rows != m.Rows {
		fail(fmt.Errorf("sstable: %s: %d rows, statistics records %d: %w", r.name(dataComponent), rows, m.Rows, ErrCorrupt))
		return
	}
	if hasLast && row.Compare(last, m.MaxKey) != 0 {
		fail(fmt.Errorf("sstable: %s: last key %s, statistics records %s: %w", r.name(dataComponent), last, m.MaxKey, ErrCorrupt))
	}
}

// Verify checks the whole-file checksums of the Data and Index components
// against Statistics, as nodetool verify does; Open checks only their sizes.
func (r *Reader) Verify() error {
	for _, c := range []struct {
		f    vfs.File
		comp string
		id   int
	}{{r.data, dataComponent, compData}, {r.index, indexComponent, compIndex}} {
		h := crc32.New(castagnoli)
		dg := r.stats.digests[c.id]
		if _, err := io.Copy(h, io.NewSectionReader(c.f, 0, int64(dg.size))); err != nil {
			return fmt.Errorf("sstable: verify %s: %w", r.name(c.comp), err)
		}
		if got := h.Sum32(); got != dg.crc {
			return fmt.Errorf("sstable: verify %s: checksum %08x, statistics records %08x: %w", r.name(c.comp), got, dg.crc, ErrCorrupt)
		}
	}
	return nil
}
