package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/idemkv/idemkv/row"
)

// ErrCorrupt is wrapped by every error that reports bytes on disk that do not
// decode or do not match their checksum.
var ErrCorrupt = errors.New("sstable: corrupt")

// castagnoli is the CRC32C table used for every checksum of the format.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

const (
	// formatMagic ends the Statistics component: "idemkvSS".
	formatMagic uint64 = 0x69_64_65_6d_6b_76_53_53
	// formatVersion is the version of the layout described in doc.go.
	formatVersion uint32 = 1

	// blockOverhead is the framing of a data or index block: the u32
	// payload length before it and the u32 CRC32C after it.
	blockOverhead = 8
	// maxBlockLen bounds the framed length of one block read from disk, so a
	// corrupt length cannot make a reader allocate without limit.
	maxBlockLen = 1 << 30

	minKeyLen   = 8 + 4         // token, partition length
	minCellLen  = 4 + 1 + 8 + 4 // column length, flags, timestamp, value length
	minRowLen   = minKeyLen + 4 // key, cell count
	minEntryLen = minKeyLen + 8 + 4

	flagTombstone = 1
)

// appendU32 and friends write big-endian integers.
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendBytes(b, v []byte) []byte {
	b = appendU32(b, uint32(len(v)))
	return append(b, v...)
}

func appendKey(b []byte, k row.Key) []byte {
	b = appendU64(b, uint64(k.Token))
	return appendBytes(b, k.Partition)
}

// appendRow encodes r as it is stored inside a data block.
func appendRow(b []byte, r row.Row) []byte {
	b = appendKey(b, r.Key)
	b = appendU32(b, uint32(len(r.Cells)))
	for _, c := range r.Cells {
		b = appendBytes(b, []byte(c.Column))
		var flags byte
		if c.Tombstone {
			flags |= flagTombstone
		}
		b = append(b, flags)
		b = appendU64(b, uint64(c.Timestamp))
		b = appendBytes(b, c.Value)
	}
	return b
}

// decoder reads big-endian fields from a byte slice. Every read is bounded by
// the bytes that remain; the first failure sticks in err and later reads
// return zero values, so a decoder never panics on any input.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %d bytes left", ErrCorrupt, what, len(d.b))
	}
}

func (d *decoder) u8(what string) byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail(what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u32(what string) uint32 {
	if d.err != nil || len(d.b) < 4 {
		d.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64(what string) uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// bytes returns a length-prefixed byte string, aliasing the input.
func (d *decoder) bytes(what string) []byte {
	n := d.u32(what)
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// count reads a u32 element count and rejects it when count elements of at
// least minLen bytes each cannot fit in what remains.
func (d *decoder) count(what string, minLen int) int {
	n := d.u32(what)
	if d.err != nil {
		return 0
	}
	if uint64(n)*uint64(minLen) > uint64(len(d.b)) {
		d.fail(what)
		return 0
	}
	return int(n)
}

func (d *decoder) key(what string) row.Key {
	tok := int64(d.u64(what))
	p := d.bytes(what)
	return row.Key{Token: tok, Partition: p}
}

// row decodes one row. With keep false it only walks over the cells.
func (d *decoder) row(keep bool) row.Row {
	var r row.Row
	r.Key = d.key("row key")
	n := d.count("cell count", minCellLen)
	if keep {
		r.Cells = make([]row.Cell, 0, n)
	}
	var prev []byte
	for i := 0; i < n && d.err == nil; i++ {
		col := d.bytes("cell column")
		flags := d.u8("cell flags")
		ts := int64(d.u64("cell timestamp"))
		val := d.bytes("cell value")
		if d.err != nil {
			break
		}
		if flags&^flagTombstone != 0 {
			d.fail("cell flags")
			break
		}
		if i > 0 && bytes.Compare(prev, col) >= 0 {
			d.fail("cells out of order")
			break
		}
		prev = col
		if keep {
			r.Cells = append(r.Cells, row.Cell{
				Column:    string(col),
				Value:     val,
				Timestamp: ts,
				Tombstone: flags&flagTombstone != 0,
			})
		}
	}
	return r
}

// frameBlock turns buf, which starts with 4 reserved bytes followed by the
// payload, into a framed block: it fills in the payload length and appends
// the CRC32C of length and payload.
func frameBlock(buf []byte) []byte {
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return appendU32(buf, crc(buf))
}

// unframeBlock checks a framed block (length, payload, CRC32C) and returns its
// payload. It fails unless b is exactly one block whose checksum matches.
func unframeBlock(b []byte) ([]byte, error) {
	if len(b) < blockOverhead {
		return nil, fmt.Errorf("%w: block of %d bytes is shorter than its framing", ErrCorrupt, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) != uint64(len(b)-blockOverhead) {
		return nil, fmt.Errorf("%w: block length field %d, block holds %d payload bytes", ErrCorrupt, n, len(b)-blockOverhead)
	}
	body := b[:len(b)-4]
	want := binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc(body); got != want {
		return nil, fmt.Errorf("%w: block checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	return body[4:], nil
}

// decodeBlock verifies a framed data block and decodes all its rows, which
// alias b. It returns no row at all unless the checksum matches and the whole
// payload decodes into rows in strictly increasing key order.
func decodeBlock(b []byte) ([]row.Row, error) {
	payload, err := unframeBlock(b)
	if err != nil {
		return nil, err
	}
	d := decoder{b: payload}
	n := d.count("row count", minRowLen)
	if n == 0 && d.err == nil {
		d.fail("empty data block")
	}
	rows := make([]row.Row, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		r := d.row(true)
		if d.err == nil && i > 0 && row.Compare(rows[i-1].Key, r.Key) >= 0 {
			d.fail("rows out of order")
		}
		rows = append(rows, r)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes after rows")
	}
	if d.err != nil {
		return nil, d.err
	}
	return rows, nil
}

// findInBlock verifies a framed data block and returns the row with key k,
// decoding only that row's cells.
func findInBlock(b []byte, k row.Key) (row.Row, bool, error) {
	payload, err := unframeBlock(b)
	if err != nil {
		return row.Row{}, false, err
	}
	d := decoder{b: payload}
	n := d.count("row count", minRowLen)
	for i := 0; i < n && d.err == nil; i++ {
		start := d.b
		key := d.key("row key")
		if d.err != nil {
			break
		}
		switch c := row.Compare(key, k); {
		case c == 0:
			d.b = start
			r := d.row(true)
			if d.err != nil {
				return row.Row{}, false, d.err
			}
			return r, true, nil
		case c > 0:
			return row.Row{}, false, nil
		}
		d.b = start
		d.row(false)
	}
	return row.Row{}, false, d.err
}

// indexEntry locates the data block holding one partition.
type indexEntry struct {
	key    row.Key
	offset uint64 // of the framed data block in the Data component
	length uint32 // framed length of that block
}

func appendIndexEntry(b []byte, e indexEntry) []byte {
	b = appendKey(b, e.key)
	b = appendU64(b, e.offset)
	return appendU32(b, e.length)
}

func (d *decoder) indexEntry(what string) indexEntry {
	var e indexEntry
	e.key = d.key(what)
	e.offset = d.u64(what)
	e.length = d.u32(what)
	return e
}

// decodeIndexBlock verifies a framed index (or summary) block and decodes its
// entries in strictly increasing key order.
func decodeIndexBlock(b []byte) ([]indexEntry, error) {
	payload, err := unframeBlock(b)
	if err != nil {
		return nil, err
	}
	return decodeEntries(payload, "index entry")
}

func decodeEntries(payload []byte, what string) ([]indexEntry, error) {
	d := decoder{b: payload}
	n := d.count(what+" count", minEntryLen)
	es := make([]indexEntry, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		e := d.indexEntry(what)
		if d.err == nil && i > 0 && row.Compare(es[i-1].key, e.key) >= 0 {
			d.fail(what + "s out of order")
		}
		es = append(es, e)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes after " + what + "s")
	}
	if d.err != nil {
		return nil, d.err
	}
	return es, nil
}

// Component identifiers, in the order Statistics lists their digests.
const (
	compData = iota
	compIndex
	compSummary
	compFilter
	numDigested
)

// digest records the size and whole-file CRC32C of a component.
type digest struct {
	size uint64
	crc  uint32
}

// stats is the decoded payload of the Statistics component.
type stats struct {
	meta          Meta
	blockSize     uint32
	indexInterval uint32
	fpChance      float64
	digests       [numDigested]digest
}

func encodeStats(s stats) []byte {
	var b []byte
	m := s.meta
	b = appendU64(b, m.Generation)
	b = appendU64(b, m.Rows)
	b = appendKey(b, m.MinKey)
	b = appendKey(b, m.MaxKey)
	b = appendU64(b, uint64(m.MaxTimestamp))
	b = appendU64(b, uint64(m.DataSize))
	b = appendBytes(b, m.User)
	b = appendU32(b, s.blockSize)
	b = appendU32(b, s.indexInterval)
	b = appendU64(b, math.Float64bits(s.fpChance))
	b = appendU32(b, numDigested)
	for _, dg := range s.digests {
		b = appendU64(b, dg.size)
		b = appendU32(b, dg.crc)
	}
	// Footer: version, payload length, CRC32C of everything before it, magic.
	payloadLen := len(b)
	b = appendU32(b, formatVersion)
	b = appendU32(b, uint32(payloadLen))
	b = appendU32(b, crc(b))
	return appendU64(b, formatMagic)
}

const footerLen = 4 + 4 + 4 + 8

func decodeStats(b []byte) (stats, error) {
	var s stats
	if len(b) < footerLen {
		return s, fmt.Errorf("%w: statistics of %d bytes has no footer", ErrCorrupt, len(b))
	}
	f := b[len(b)-footerLen:]
	if magic := binary.BigEndian.Uint64(f[12:]); magic != formatMagic {
		return s, fmt.Errorf("%w: bad magic %016x", ErrCorrupt, magic)
	}
	if v := binary.BigEndian.Uint32(f); v != formatVersion {
		return s, fmt.Errorf("%w: unknown format version %d", ErrCorrupt, v)
	}
	payloadLen := binary.BigEndian.Uint32(f[4:])
	if uint64(payloadLen) != uint64(len(b)-footerLen) {
		return s, fmt.Errorf("%w: footer payload length %d, file holds %d", ErrCorrupt, payloadLen, len(b)-footerLen)
	}
	if got, want := crc(b[:len(b)-12]), binary.BigEndian.Uint32(f[8:]); got != want {
		return s, fmt.Errorf("%w: statistics checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	d := decoder{b: b[:payloadLen]}
	m := &s.meta
	m.Generation = d.u64("generation")
	m.Rows = d.u64("rows")
	m.MinKey = d.key("min key")
	m.MaxKey = d.key("max key")
	m.MaxTimestamp = int64(d.u64("max timestamp"))
	m.DataSize = int64(d.u64("data size"))
	m.User = d.bytes("user metadata")
	s.blockSize = d.u32("block size")
	s.indexInterval = d.u32("index interval")
	s.fpChance = math.Float64frombits(d.u64("fp chance"))
	if n := d.u32("digest count"); d.err == nil && n != numDigested {
		d.fail("digest count")
	}
	for i := range s.digests {
		s.digests[i].size = d.u64("digest size")
		s.digests[i].crc = d.u32("digest crc")
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing statistics bytes")
	}
	if d.err != nil {
		return s, d.err
	}
	if m.DataSize < 0 || uint64(m.DataSize) != s.digests[compData].size {
		return s, fmt.Errorf("%w: data size %d disagrees with digest size %d", ErrCorrupt, m.DataSize, s.digests[compData].size)
	}
	// Detach the caller-visible byte slices from the file buffer.
	m.MinKey = m.MinKey.Clone()
	m.MaxKey = m.MaxKey.Clone()
	m.User = bytes.Clone(m.User)
	if len(m.User) == 0 {
		m.User = nil // as Finish returns it
	}
	return s, nil
}

// findInIndexBlock verifies a framed index block and returns the entry for
// key k, decoding entries only up to it. first is the key the block must
// start with (its summary key).
func findInIndexBlock(b []byte, first, k row.Key) (indexEntry, bool, error) {
	payload, err := unframeBlock(b)
	if err != nil {
		return indexEntry{}, false, err
	}
	d := decoder{b: payload}
	n := d.count("index entry count", minEntryLen)
	if n == 0 && d.err == nil {
		d.fail("empty index block")
	}
	for i := 0; i < n && d.err == nil; i++ {
		e := d.indexEntry("index entry")
		if d.err != nil {
			break
		}
		if i == 0 && row.Compare(e.key, first) != 0 {
			return indexEntry{}, false, fmt.Errorf("%w: index block starts at %s, not at its summary key %s", ErrCorrupt, e.key, first)
		}
		switch c := row.Compare(e.key, k); {
		case c == 0:
			return e, true, nil
		case c > 0:
			return indexEntry{}, false, nil
		}
	}
	return indexEntry{}, false, d.err
}
