package commitlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idemkv/idemkv/vfs"
)

// FormatVersion is the segment format version, written in every segment
// header and in its file name.
const FormatVersion = 1

// Magic starts every segment file.
const Magic = "IDCL"

const (
	// HeaderSize is the size of a segment header: magic, version, id, CRC.
	HeaderSize = 4 + 4 + 8 + 4
	// FrameOverhead is the bytes a frame adds around its payload: length,
	// length CRC, payload CRC.
	FrameOverhead = 4 + 4 + 4
	// frameHead is the length word and its CRC.
	frameHead = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Position is a record's place in the log: the segment id and the byte
// offset of the record's frame in that segment file.
type Position struct {
	Segment uint64
	Offset  int64
}

// Compare returns -1, 0 or +1 as p is before, equal to or after q.
func (p Position) Compare(q Position) int {
	switch {
	case p.Segment < q.Segment:
		return -1
	case p.Segment > q.Segment:
		return 1
	case p.Offset < q.Offset:
		return -1
	case p.Offset > q.Offset:
		return 1
	}
	return 0
}

// Less reports whether p is strictly before q.
func (p Position) Less(q Position) bool { return p.Compare(q) < 0 }

// String formats p as "segment:offset".
func (p Position) String() string { return fmt.Sprintf("%d:%d", p.Segment, p.Offset) }

// CorruptionError reports a damaged segment: the file, the byte offset of the
// bad header or frame, and why it was rejected.
type CorruptionError struct {
	Path   string
	Offset int64
	Reason string
	Err    error // underlying error, e.g. from DecodeRecord; may be nil
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("commitlog: corrupt segment %s at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Unwrap returns the underlying error, if any.
func (e *CorruptionError) Unwrap() error { return e.Err }

// SegmentName returns the file name of segment id.
func SegmentName(id uint64) string {
	return fmt.Sprintf("CommitLog-%d-%d.log", FormatVersion, id)
}

// parseSegmentName returns the version and id of a file named like a segment.
// ok is false for any other name (such files are ignored).
func parseSegmentName(name string) (version uint32, id uint64, ok bool) {
	rest, found := strings.CutPrefix(name, "CommitLog-")
	if !found {
		return 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, ".log")
	if !found {
		return 0, 0, false
	}
	vs, is, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	v, err1 := strconv.ParseUint(vs, 10, 32)
	n, err2 := strconv.ParseUint(is, 10, 64)
	if err1 != nil || err2 != nil || strconv.FormatUint(v, 10) != vs || strconv.FormatUint(n, 10) != is {
		return 0, 0, false
	}
	return uint32(v), n, true
}

func appendHeader(dst []byte, id uint64) []byte {
	start := len(dst)
	dst = append(dst, Magic...)
	dst = binary.BigEndian.AppendUint32(dst, FormatVersion)
	dst = binary.BigEndian.AppendUint64(dst, id)
	return binary.BigEndian.AppendUint32(dst, crc(dst[start:]))
}

// checkHeader validates a segment header for segment id.
func checkHeader(b []byte, id uint64) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("file is %d bytes, shorter than the %d-byte header", len(b), HeaderSize)
	}
	if got, want := binary.BigEndian.Uint32(b[16:]), crc(b[:16]); got != want {
		return fmt.Errorf("header checksum %#08x, want %#08x", got, want)
	}
	if string(b[:4]) != Magic {
		return fmt.Errorf("bad magic %q", b[:4])
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != FormatVersion {
		return fmt.Errorf("unsupported format version %d", v)
	}
	if got := binary.BigEndian.Uint64(b[8:]); got != id {
		return fmt.Errorf("header names segment %d, file name says %d", got, id)
	}
	return nil
}

// appendFrame appends r framed: length | CRC(length) | record | CRC(record).
func appendFrame(dst []byte, r *Record) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = r.AppendBinary(dst)
	n := len(dst) - start - frameHead
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	binary.BigEndian.PutUint32(dst[start+4:], crc(dst[start:start+4]))
	return binary.BigEndian.AppendUint32(dst, crc(dst[start+frameHead:]))
}

// frameResult is what readFrame found at one offset.
type frameResult struct {
	rec     Record
	next    int    // offset of the next frame, valid when trusted
	reason  string // empty when the frame is good
	err     error  // decode error, when the checksums were fine
	trusted bool   // the length word passed its CRC, so next is a real boundary
	decode  bool   // checksums fine, DecodeRecord failed
}

// readFrame examines the frame starting at data[off:].
func readFrame(data []byte, off int) frameResult {
	rem := data[off:]
	if len(rem) < frameHead {
		return frameResult{reason: fmt.Sprintf("incomplete frame header (%d bytes left)", len(rem))}
	}
	n := binary.BigEndian.Uint32(rem)
	if got, want := binary.BigEndian.Uint32(rem[4:]), crc(rem[:4]); got != want {
		return frameResult{reason: fmt.Sprintf("length checksum %#08x, want %#08x", got, want)}
	}
	if n == 0 {
		return frameResult{reason: "zero frame length"}
	}
	if int64(n) > int64(len(rem))-FrameOverhead {
		return frameResult{reason: fmt.Sprintf("frame length %d runs past end of file (%d bytes left)", n, len(rem))}
	}
	end := frameHead + int(n)
	res := frameResult{trusted: true, next: off + end + 4}
	if got, want := binary.BigEndian.Uint32(rem[end:]), crc(rem[frameHead:end]); got != want {
		res.reason = fmt.Sprintf("payload checksum %#08x, want %#08x", got, want)
		return res
	}
	rec, err := DecodeRecord(rem[frameHead:end])
	if err != nil {
		res.reason, res.err, res.decode = "undecodable record: "+err.Error(), err, true
		return res
	}
	res.rec = rec
	return res
}

// validFrameAfter reports whether any offset after off starts a frame whose
// both checksums hold: evidence that a bad frame at off is not a torn tail.
func validFrameAfter(data []byte, off int) bool {
	for p := off + 1; p+FrameOverhead < len(data); p++ {
		rem := data[p:]
		n := binary.BigEndian.Uint32(rem)
		if n == 0 || uint64(n) > uint64(len(rem)-FrameOverhead) {
			continue
		}
		if binary.BigEndian.Uint32(rem[4:]) != crc(rem[:4]) {
			continue
		}
		end := frameHead + int(n)
		if binary.BigEndian.Uint32(rem[end:]) == crc(rem[frameHead:end]) {
			return true
		}
	}
	return false
}

// holeAt reports whether the bad frame fr at off lies over a page that a
// crash did not persist: the bytes from off to the end of its vfs.PageSize
// page are all zero, or so is a whole later page the frame runs into (its
// header's 8 bytes when its length is not trusted). A log's bytes are
// written once, in order, so an older version of a page holds a prefix of
// what it holds now, then zeros.
func holeAt(data []byte, off int, fr frameResult) bool {
	pageEnd := func(x int) int { return min((x/vfs.PageSize+1)*vfs.PageSize, len(data)) }
	end := min(off+frameHead, len(data))
	if fr.trusted {
		end = fr.next
	}
	if allZero(data[off:pageEnd(off)]) {
		return true
	}
	for p := pageEnd(off); p < end; p = pageEnd(p) {
		if allZero(data[p:pageEnd(p)]) {
			return true
		}
	}
	return false
}

func allZero(b []byte) bool {
	return len(bytes.TrimLeft(b, "\x00")) == 0
}

// scanner replays segments found by Open.
type scanner struct {
	fs          vfs.FS
	skipCorrupt bool
	segSize     int64 // the log's SegmentSize: a mapped segment's file size
	logger      *slog.Logger
	replay      func(Position, Record) error
}

// scanSegment validates and replays one segment file. It returns nil, nil
// when the (newest) segment was torn at creation and has been deleted.
// listed says the manifest lists the segment, so its header was durable.
func (s *scanner) scanSegment(path string, id uint64, newest, listed bool) (*segment, error) {
	data, err := s.fs.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("commitlog: read segment: %w", err)
	}
	seg := &segment{id: id, path: path, size: int64(len(data)), sealed: true, synced: true}
	if herr := checkHeader(data, id); herr != nil {
		emptied := len(data) < HeaderSize || allZero(data)
		if newest && emptied && !listed {
			s.logger.Warn("commitlog: deleting newest segment with torn header",
				"file", path, "bytes", len(data), "reason", herr.Error())
			if err := s.fs.Remove(path); err != nil {
				return nil, fmt.Errorf("commitlog: delete torn segment: %w", err)
			}
			if err := syncDir(s.fs, filepath.Dir(path)); err != nil {
				return nil, err
			}
			return nil, nil
		}
		reason := "bad segment header: " + herr.Error()
		if newest && emptied {
			reason = "newest segment lost its header, which was durable before the manifest listed it (a disk fault; acknowledged records may be lost): " + herr.Error()
		}
		cerr := &CorruptionError{Path: path, Offset: 0, Reason: reason}
		if !s.skipCorrupt {
			return nil, cerr
		}
		s.logger.Error("commitlog: skipping segment with bad header", "file", path, "bytes", len(data), "reason", cerr.Reason)
		return seg, nil
	}
	off := HeaderSize
	for off < len(data) {
		fr := readFrame(data, off)
		if fr.reason == "" {
			r := fr.rec
			if err := s.replay(Position{Segment: id, Offset: int64(off)}, r); err != nil {
				return nil, fmt.Errorf("commitlog: replay %s at offset %d: %w", path, off, err)
			}
			seg.count(&r)
			off = fr.next
			continue
		}
		if newest && !fr.decode && int64(len(data)) == s.segSize && allZero(data[off:]) {
			// What a mapped segment preallocated and never wrote: the
			// process stopped without its Close.
			s.logger.Info("commitlog: cutting the unwritten zero tail of the newest segment", "file", path,
				"offset", off, "bytes", len(data)-off)
			if err := truncateFile(s.fs, path, int64(off)); err != nil {
				return nil, err
			}
			seg.size = int64(off)
			return seg, nil
		}
		if newest && !fr.decode && !validFrameAfter(data, off) {
			// Torn tail: the last write never completed.
			s.logger.Warn("commitlog: truncating torn tail", "file", path, "offset", off,
				"dropped_bytes", len(data)-off, "reason", fr.reason)
			if err := truncateFile(s.fs, path, int64(off)); err != nil {
				return nil, err
			}
			seg.size = int64(off)
			return seg, nil
		}
		if newest && !fr.decode && holeAt(data, off, fr) {
			// A hole: a page of this frame never reached the disk, but a
			// later page did. The disk persisted the writeback out of
			// order during the fsync the crash cut short, so nothing from
			// here on was covered by a completed fsync: none of it was
			// acknowledged as durable.
			s.logger.Warn("commitlog: cutting the newest segment at a hole the crash left (pages written back out of order); the records after it were not yet durable",
				"file", path, "offset", off, "dropped_bytes", len(data)-off, "reason", fr.reason)
			if err := truncateFile(s.fs, path, int64(off)); err != nil {
				return nil, err
			}
			seg.size = int64(off)
			return seg, nil
		}
		cerr := &CorruptionError{Path: path, Offset: int64(off), Reason: fr.reason, Err: fr.err}
		if !s.skipCorrupt {
			return nil, cerr
		}
		if fr.trusted {
			s.logger.Error("commitlog: skipping corrupt record", "file", path, "offset", off, "reason", fr.reason)
			off = fr.next
			continue
		}
		s.logger.Error("commitlog: abandoning rest of segment after corrupt frame", "file", path,
			"offset", off, "abandoned_bytes", len(data)-off, "reason", fr.reason)
		break
	}
	return seg, nil
}

func truncateFile(fsys vfs.FS, path string, size int64) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("commitlog: truncate torn tail: %w", err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("commitlog: truncate %s to %d bytes: %w", path, size, err)
	}
	return nil
}

// syncDir makes dir's entries durable (vfs.Default already ignores
// filesystems that cannot sync a directory).
func syncDir(fsys vfs.FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("commitlog: sync directory %s: %w", dir, err)
	}
	return nil
}
