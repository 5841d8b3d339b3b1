// Package commitlog is idemkv's node-level commit log: a segmented,
// append-only, checksummed log of cell writes, replayed into the memtables on
// restart, modelled on Cassandra's.
//
// # Files
//
// A log is a directory of segment files named
//
//	CommitLog-<version>-<id>.log
//
// where <version> is FormatVersion (1) and <id> the segment id, both in
// decimal without leading zeros, and a manifest, CommitLog-manifest (see
// Manifest). Other files in the directory (such as CommitLog-manifest.tmp)
// are ignored; a segment file of another version makes Open fail. Ids grow
// by one; Open always starts a new segment whose id is one more than the
// highest found or listed. All integers below are big-endian; every checksum
// is CRC-32C (Castagnoli).
//
// # Manifest
//
// The manifest lists the segments that should exist, so that Open can tell
// a lost segment from a released one:
//
//	offset size field
//	0      4    magic "IDCM"
//	4      4    manifest version (uint32) = 1
//	8      4    count n (uint32)
//	12     8×n  segment ids (uint64), strictly ascending
//	12+8n  4    CRC-32C of bytes 0..12+8n-1
//
// It is only ever replaced whole, with vfs.WriteFileAtomic (write and fsync
// CommitLog-manifest.tmp, rename it over CommitLog-manifest, fsync the
// directory), at two moments:
//
//   - Creating a segment: the file is created (O_EXCL), its header written
//     and fsynced, the directory fsynced, and only then is the manifest
//     rewritten to list it; no record is written to a segment before that.
//     So a listed segment always had a durable header, and a segment not yet
//     listed never held a record.
//   - Release: the manifest is rewritten without the segments about to be
//     deleted before any is deleted.
//
// A directory with segments but no manifest (a log written before the
// manifest existed, or one whose manifest was lost) is opened with a warning
// and checked for gaps only; the Open then writes a manifest.
//
// # Segment header (20 bytes)
//
//	offset size field
//	0      4    magic "IDCL"
//	4      4    format version (uint32) = 1
//	8      8    segment id (uint64), equal to the id in the file name
//	16     4    CRC-32C of bytes 0..15
//
// # Record frames
//
// After the header, frames follow back to back until the end of the file:
//
//	4 bytes  length n of the payload (uint32, n > 0)
//	4 bytes  CRC-32C of the 4 length bytes
//	n bytes  payload: one encoded Record
//	4 bytes  CRC-32C of the n payload bytes
//
// A record's Position is the segment id and the byte offset of its frame.
// A frame longer than half the segment size is refused by Append (Cassandra's
// max mutation size), so every record fits in a fresh segment. A segment is
// rolled when the next frame would take it past Options.SegmentSize.
//
// With mmap access (Options.Access; the default where the filesystem can
// map files) a segment is created at its full size: the header is written,
// the file preallocated to SegmentSize with zeros (fallocate(2), so that the
// disk's blocks are reserved) and mapped, and frames are copied into the
// mapping. Its unwritten rest is zeros, which no frame starts with (a zero
// length word fails its CRC). A segment is cut to its written length before
// its final fsync when it is sealed, and the last one when the log closes,
// so that only the newest segment of a log that did not close (a killed
// process, a machine crash) has a zero tail; Open cuts that tail (see
// Replay). With standard access frames are written with write(2) and the
// file is never longer than what was written. The bytes on disk are the
// same either way, so a log written with one access mode opens with the
// other.
//
// # Record encoding (version 1)
//
//	size     field
//	1        record version = 1
//	1        kind: 1 shard, 2 delta, 3 tombstone (see PayloadKind)
//	1        flags: bit 0 = has op id; bit 1 = led (needs bit 0);
//	         bit 2 = compensation (needs bit 1); bit 3 = carries ops
//	         (needs bit 1); other bits must be 0
//	8        table id (uint64)
//	8        timestamp (int64, microseconds)
//	4 + k    key length (uint32), key bytes
//	4 + c    column length (uint32), column name bytes
//	4 + p    payload length (uint32), payload bytes
//	16       op id (only with flag bit 0): client id, sequence (uint64 each)
//	8        op time (only with flag bit 0): int64, unix nanoseconds
//	8        delta (only with flag bit 1): int64, the client's delta that
//	         the leader's shard in the payload added (bit 2: takes back)
//	4        carried op count n ≥ 1 (only with flag bit 3; uint32)
//	41 × n   carried ops (only with flag bit 3), each: op id (16), op
//	         time (int64, unix nanoseconds), delta (int64), the shard's
//	         clock the op gave it (int64), flags (1 byte: bit 0 =
//	         compensation, other bits 0)
//
// A led record is one the node wrote as the op's leader; a restart reads
// the led records of its recent past to find the updates it applied but may
// not have replicated (see package replica). A led record carries the
// updates of the same shard that the leader had added to it but not yet
// logged when it wrote this one (their deltas are in this record's shard):
// a stop before their own records leaves this one naming them. Records
// written before bits 1 to 3 existed decode unchanged.
//
// The encoding is canonical: DecodeRecord rejects unknown versions, kinds and
// flags, lengths that run past the input, and trailing bytes, so a record
// that decodes re-encodes to the same bytes.
//
// # Durability
//
// Every file operation goes through Options.FS (the operating system's
// filesystem by default), whose durability contract (package vfs) the rules
// below rely on; tests run the log on vfs.NewMem and crash it.
//
// Writers encode their frame into an in-memory buffer under a short mutex.
// In SyncPeriodic mode the appending goroutine then writes the buffer to the
// file (a copy into the mapping, or write(2); whichever writer holds the
// file lock writes everything pending) before Append returns, so a process
// crash loses nothing (a mapping's stores are in the kernel's page cache as
// a write's bytes are), and a ticker fsyncs every SyncPeriod; appends block while the last sync is older
// than 1.5×SyncPeriod. In SyncBatch and SyncGroup modes one syncer goroutine
// per log takes the whole buffer, writes it, fsyncs it and wakes every append
// it covered at once (one channel per sync generation). Batch syncs as soon
// as anything is pending. Group lets a group gather after its
// first pending append unless the log is as good as idle: when the last
// group held one append and the moving average of the time between appends
// is longer than that of the fsyncs (fewer than one more append is expected
// during an fsync), a group is synced at once, so that a lone writer waits
// for its own fsync only.
// Otherwise the window is four average fsyncs, at most GroupWindow, and
// ends early when 1 MiB is pending or when as many records are pending as
// the previous group commit held (at least 2) — that is, once the writers
// that waited last time are all back. Either way, concurrent appends share
// one fsync. A segment is
// fsynced before the next one is written, and the directory is fsynced after
// a segment is created or deleted. A write or fsync error is sticky: it is
// returned to every waiter and to every later append, and Durable stops.
//
// # Replay and damage
//
// Open reads segments in id order and passes each complete record with valid
// checksums to the replay function, in order. Nothing whose checksums fail is
// ever replayed. Damage is handled as follows:
//
//   - Unwritten tail: in the newest segment, a frame position from which
//     every byte to the end of a file of exactly SegmentSize bytes is zero
//     is the unused preallocation of a mapped segment whose log did not
//     close. The file is cut there and fsynced, with an Info line naming
//     the file, offset and bytes. (A zero tail in a file of any other size
//     is a torn tail, below; so is this one after SegmentSize changed.)
//   - Torn tail: in the newest segment, a bad or incomplete frame after which
//     no offset starts a frame with both checksums valid (the bytes run to
//     end of file, or are zeros or garbage) is a write the crash interrupted.
//     The file is truncated to the end of the last good record and fsynced,
//     and a warning names the file, offset and number of bytes dropped.
//   - Hole: in the newest segment, a bad frame over a 4 KiB page (see
//     vfs.PageSize) that the crash did not persist — the bytes from the
//     frame's start to the end of its page are zero, or a whole later page
//     the frame runs into is — even when valid frames follow. A disk may
//     persist an fsync's pages out of order (and a filesystem convert a
//     later preallocated extent before an earlier one), so the crash of an
//     fsync in flight can keep a later page and lose an earlier one; no
//     fsync that covered the hole completed, so nothing from it on was
//     acknowledged as durable. The file is cut at the frame and fsynced,
//     with a warning naming the file, offset and bytes dropped. (A disk
//     fault that zeroes a page of the newest segment is taken for a hole.)
//   - A newest segment shorter than the header, or all zero bytes, that the
//     manifest does not list was torn at creation (it never held a record):
//     it is deleted with a warning naming it. If the manifest lists it, its
//     header was durable, so a disk fault emptied it and acknowledged records
//     may be lost: that is corruption. (A disk that loses only the tail of
//     the newest segment, leaving whole frames, cannot be told from a torn
//     write and is treated as one.)
//   - A segment the manifest lists but the directory lacks — oldest, in the
//     middle or newest — is lost: Open fails with a *CorruptionError that
//     wraps ErrMissingSegment and names every missing file. Without a
//     manifest, a gap in the ids between the lowest and the highest segment
//     found is the same error.
//   - A segment found that the manifest does not list, with an id below the
//     highest listed one, was released and its deletion did not survive a
//     crash: it is deleted, unreplayed, with a warning naming it. A segment
//     with an id above every listed one was being created: it is scanned as
//     usual (it holds at most a header).
//   - Anything else is corruption: a bad frame followed by a valid one (and
//     no hole), any
//     bad frame in an older segment (older segments are fsynced in full
//     before the next one is written), a bad segment header, or a frame whose
//     checksums hold but whose payload DecodeRecord rejects. Open fails with
//     a *CorruptionError naming the file and byte offset.
//   - With Options.SkipCorrupt, corruption is logged instead: a bad record
//     whose length word passed its checksum is skipped and scanning resumes
//     at the next frame; otherwise the rest of the segment is abandoned (the
//     log line gives the byte count); a segment with a bad header (or an
//     emptied listed newest segment) is skipped whole; each missing segment
//     is logged at Error level and dropped from the manifest; a corrupt
//     manifest is logged and ignored (ids are then checked for gaps only) and
//     rewritten. The files are left as they are.
//
// Open and Release never delete a file without a log line naming it: Warn
// for the deletions recovery decides (torn at creation, released before a
// crash), Info for Release's routine ones.
//
// # Release
//
// Once the records before a position are in flushed SSTables, Release
// deletes the segments wholly before it, never the active one, and asks
// Options.Retain first so that segments still holding needed op ids (for the
// FBF filters) can be kept; kept segments are offered again on every later
// Release. Retained segments leave holes in the ids of the live segments,
// which is why the manifest lists ids rather than a range. The manifest is
// rewritten before the files are deleted; a file it no longer lists that
// cannot be deleted is logged and deleted by the next Open.
package commitlog
