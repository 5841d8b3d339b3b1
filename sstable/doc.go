// Package sstable writes and reads idemkv's immutable sorted tables, the
// files a memtable flush and a compaction produce, one directory per
// database table.
//
// A table holds row.Row values (a partition and its cells, sorted by column)
// in row.Compare order: token, then partition bytes. Cell values are opaque.
// Rows with no cells are kept like any other row.
//
// # Files
//
// Each generation is a set of component files named as in Cassandra 3.0+,
// ik-<generation>-big-<Component>:
//
//	ik-7-big-Data.db        data blocks: the rows
//	ik-7-big-Index.db       index blocks: partition key → data block
//	ik-7-big-Summary.db     first key of every index block (held in memory)
//	ik-7-big-Filter.db      bloom filter over partition keys (held in memory)
//	ik-7-big-Statistics.db  Meta, options, digests of the four files above, footer
//	ik-7-big-TOC.txt        list of components; written last, marks the table complete
//
// Every integer is big-endian. Every byte string is a u32 length then the
// bytes. Every checksum is CRC32C (Castagnoli).
//
// # Data blocks
//
// Data.db is a sequence of framed blocks with no gaps. Rows are appended to a
// block until it reaches Options.BlockSize (4096 by default) uncompressed
// bytes; a row larger than that gets a block of its own, so a block holds at
// least one row and a row never spans blocks.
//
//	block  := len:u32 | payload (len bytes) | crc:u32      crc = CRC32C(len | payload)
//	payload:= nrows:u32 | row × nrows                       rows strictly increasing
//	row    := token:i64 | plen:u32 | partition | ncells:u32 | cell × ncells
//	cell   := clen:u32 | column | flags:u8 | timestamp:i64 | vlen:u32 | value
//	flags  := bit 0 tombstone; other bits zero
//
//	+--------+----------------------------------------------+--------+
//	| len    | nrows | row 0 | row 1 | ...                  | crc    |
//	| 4 B    | <------------- len bytes ------------------> | 4 B    |
//	+--------+----------------------------------------------+--------+
//
// # Index and summary
//
// Index.db holds one entry per partition, in key order, grouped into framed
// blocks of Options.IndexInterval (128) entries, framed like data blocks:
//
//	index block := len:u32 | n:u32 | entry × n | crc:u32
//	entry       := token:i64 | plen:u32 | partition | offset:u64 | length:u32
//
// offset and length locate the framed data block that holds the partition.
// Summary.db samples every IndexInterval-th index entry, that is the first
// entry of every index block, pointing at the index block instead:
//
//	summary := n:u32 | entry × n       (offset, length of an index block)
//
// Open checks that the summary's index blocks tile Index.db exactly. Get
// then costs a bloom filter probe, a binary search of the summary, one pread
// of an index block and one pread of a data block, each block verified by its
// CRC before it is decoded.
//
// # Filter
//
// Filter.db is a bloom filter of every key: its token (8 bytes, big-endian)
// followed by its partition bytes, hashed with murmur3 x64_128 into h1, h2;
// the filter sets bits (h1 + i·h2) mod m for i < k (double hashing, as
// Cassandra). m = ⌈−n·ln p / (ln 2)²⌉ rounded up to 64 bits, k = round(m/n · ln 2),
// with n the row count and p Options.BloomFPChance (0.01).
//
//	filter := k:u32 | m:u64 | word:u64 × m/64
//
// # Statistics and footer
//
// Statistics.db carries Meta, the writer's options, and the size and
// whole-file CRC32C of Data, Index, Summary and Filter, then a fixed footer:
//
//	payload := generation:u64 | rows:u64 | minkey | maxkey | maxtimestamp:i64 |
//	           datasize:i64 | user:bytes | blocksize:u32 | indexinterval:u32 |
//	           fpchance:f64 | 4:u32 | (size:u64 | crc:u32) × 4   (Data, Index, Summary, Filter)
//	key     := token:i64 | plen:u32 | partition
//
//	+-----------+----------+--------------+----------+----------------------+
//	| payload   | version  | payload len  | crc      | magic "idemkvSS"     |
//	|           | u32 = 1  | u32          | u32      | u64                  |
//	+-----------+----------+--------------+----------+----------------------+
//	crc = CRC32C(payload | version | payload len)
//
// Summary and Statistics stay separate files, as in Cassandra, so that the
// footer anchors the digest of every other component: Open reads Statistics
// first, verifies its footer, then checks each component's size and the
// digests of Summary and Filter, which it loads. Data and Index are too
// large to hash at every Open; their blocks are verified as they are read,
// All verifies that the data blocks cover Data.db exactly and add up to
// Meta's row count and key range, and Reader.Verify checks their whole-file
// digests on demand.
//
// # Durability
//
// A Writer writes every component under a .tmp name, fsyncs it, renames it to
// its final name, fsyncs the directory, and only then writes the TOC (also
// via a .tmp name) and fsyncs the directory again. A generation without a TOC
// is incomplete: List ignores it, RemoveIncomplete deletes it. Remove deletes
// the TOC first for the same reason.
//
// # Manifest
//
// A TOC says a generation is complete, not that it should exist: a lost TOC
// would make a live table look like the leftover of an interrupted write. The
// MANIFEST file of a table directory (ManifestName) therefore lists the live
// generations. Its owner (the replica) rewrites it atomically with
// WriteManifest (vfs.WriteFileAtomic: temp file, fsync, rename, fsync of the
// directory) after a new generation is complete and before any generation it
// replaces is removed, so that a crash at any point leaves a manifest whose
// generations are all complete on disk. A generation listed but missing or
// unreadable is damage to report, never to repair by deletion; files of a
// generation not listed are leftovers of an interrupted write or removal.
//
//	manifest := magic "idemkvMF" (8 B) | version:u32 = 1 | n:u32 |
//	            generation:u64 × n | crc:u32
//	crc      = CRC32C(every byte before it)
//
// Generations are strictly increasing; the file is exactly 20 + 8n bytes.
// DecodeManifest rejects anything else (wrong magic, unknown version, length,
// checksum or order) with an error wrapping ErrCorrupt.
//
// Every file operation goes through a vfs.FS: Options.FS for writers and
// compaction, the FS argument of OpenFS, ListFS, RemoveFS, Files and the
// manifest functions; nil means vfs.Default.
//
// Decoders never panic: every length is bounded by the bytes that remain,
// every count by the smallest encoding of its elements, and every corrupt
// input yields an error wrapping ErrCorrupt, never a row that was not
// written.
package sstable
