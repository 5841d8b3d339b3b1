// Package replica is a node's storage engine: its tables, the write path of
// a leader and of a replica, reads, flush, compaction and commit-log replay.
//
// The engine knows no counter design. A column's behaviour comes from its
// registered type (package coltype): the engine looks the type up by name,
// asks a Configurable type for the column's instance, leads an update
// through Leading, lets an Observer see replicated state, hands a
// Replicated type its mutations, asks a Deleter what DELETE means, checks
// and re-feeds replayed records through a Replayer, serves an Exchanger's
// client exchanges and an AntiEntropy type's sync rounds, and runs the
// in-doubt protocol below for any Deduplicator. Designs register
// themselves (coltype/counter: vanilla, legacy and FBF counters;
// coltype/handoffcol: handoff counters), imported by package node through
// coltype/builtin.
//
// # Data directory
//
//	host_id          the node's host id
//	counter_id       the node's counter ids, current first
//	clean_shutdown   present only while the node is stopped cleanly
//	schema.json      the tables (read before the commit log is replayed)
//	in_doubt         the updates in doubt not yet settled (see below)
//	commitlog/       the commit log (package commitlog)
//	data/<ks>-<table>-<id>/
//	                 a table's SSTables and their manifest (package sstable)
//
// Every file is replaced whole with vfs.WriteFileAtomic (write a temporary
// file, fsync, rename, fsync the directory), so a crash leaves the old file
// or the new one.
//
// host_id holds 32 lower-case hex digits and a newline: 16 bytes, a version-4
// UUID drawn at the directory's first Open. A directory that holds data
// (counter_id or schema.json) and has lost host_id is refused, since a new
// id would give the same data a second identity.
//
// counter_id holds one id per line, 32 hex digits each, the current one
// first, then the ids written under before, newest first; no id twice. A
// fresh directory's counter id is its host id. An Open that does not find
// clean_shutdown (holding "clean\n") draws a new current id and keeps the
// old ones (see counterIdentity), then removes the marker, so that a crash
// of this run is seen as unclean by the next.
//
// schema.json is JSON:
//
//	{"version": 2,
//	 "tables": [{"id": 1, "keyspace": "ks", "name": "t",
//	             "columns": [{"name": "c", "type": "counter"}],
//	             "partition_key": [{"name": "k", "type": "text"}],
//	             "options": {"idempotence": "{\"class\":\"fbf\"}"},
//	             "revision": 0, "keyspace_generation": 1}, ...],
//	 "dropped": [7, 9]}
//
// ("keyspace_generation", the incarnation of a keyspace name the table
// belongs to, is omitted when 0: see package schema), with the tables
// sorted by id (coltype.TableDef's JSON) and the ids of
// dropped tables ascending. Version 1 had no "dropped" and no SSTable
// manifests; it is read and rewritten as version 2.
//
// in_doubt lists the FBF updates this node led and holds in doubt (see
// In-doubt updates below and indoubtfile.go), and, per counter id, the
// highest clock of its led updates whose doubt the file accounts for.
// Bytes (integers big-endian, lengths uvarint):
//
//	"IDKVDBT3"                      magic and version
//	uvarint n; n × run:             counter id (16 bytes), clock (int64)
//	uvarint m; m × update:          table (uint64), key (length, bytes),
//	                                column (length, bytes), op id (16 bytes),
//	                                op time (int64, unix nanoseconds),
//	                                counter id (16 bytes), clock (int64),
//	                                delta (int64), uvarint c; c × counter
//	                                id (16 bytes) of another leader whose
//	                                counted replication of the op arrived
//	                                while it was in doubt here
//	uvarint s; s × settled update:  an update without the c counter ids
//	                                that follow one in doubt, decision (1 byte:
//	                                1 kept, 0 taken back), answered until
//	                                (int64, unix nanoseconds)
//	CRC-32C (Castagnoli) of all the bytes before it (uint32)
//
// with the runs sorted by counter id, the updates by op time, op id, then
// their bytes, and the settled updates by op time, then their bytes. The
// settled updates are those this node settled, answered with their
// decision for three hours, also after a restart (another leader may hold
// the same op in doubt). Version 1 ("IDKVDBT1") has no settled updates,
// version 2 ("IDKVDBT2") no other leaders' counter ids after an update in
// doubt; both are still read. A file that does not decode stops Open with an error
// naming it.
//
// # Cells
//
// A cell's value is opaque to the engine: its column type encodes it and
// merges two versions (coltype.ColumnType.Merge; memtables, SSTables,
// compaction and replay call it). A tombstone is a cell with Tombstone set
// and no value. The encodings of the shipped designs:
//
//   - counter, legacy_counter and the FBF counter: a counter context
//     (package counters: global shards of (counter id, clock, count), and
//     the legacy local shards, which sum).
//   - handoff counters (coltype/handoffcol): one format byte, then a uvarint
//     version the replica bumps on every change, then, for format 2, an
//     encoded handoff.Message (this replica's tier-0 state and the
//     retirement notices it holds), or, for format 1 (still read), a bare
//     handoff state.
//
// # Commit-log records
//
// Every write is one commitlog.Record: Table (the table id), Key (the
// serialized partition key), Column, Timestamp (microseconds), Kind and
// Payload: PayloadShard with the cell's value (a state that merges
// idempotently, replayed as is), PayloadDelta with a legacy counter's
// local shard (applied again if replayed again: why legacy counters
// over-count), PayloadTombstone with no payload. An update with an op id
// carries HasOp, OpID and OpTime; a leader's own record of it also carries
// Led and Delta (and Compensation when it takes an update back), which the
// in-doubt protocol reads at replay; they are never replicated.
//
// A flushed SSTable records, as its user metadata, the commit-log position
// up to which the table's records are in it: 16 bytes, the segment id
// (uint64) then the offset (uint64), big-endian. Replay skips a table's
// records before its highest flushed position (all of them with
// Config.ReplayAll), but hands every record still in the log to the column
// type's Replayer first, so that an FBF's filter is rebuilt; the log keeps
// the segments holding op ids younger than the longest Deduplicator window
// (Config.CommitLog.Retain).
//
// # In-doubt updates
//
// See indoubt.go: a leader that restarted after an unclean stop holds the
// op-id updates it led just before in doubt until every natural replica of
// the cell has answered (coltype.OpAnswer) and coltype.Decide has kept or
// taken each back (coltype.Deduplicator.Compensate).
package replica
