// Package metrics is a node's Prometheus instrumentation: one registry per
// node (several nodes share a process in tests and benches, so the global
// registry is not used), a few instruments updated on the request paths
// (client request latencies per operation and consistency level, CQL
// messages, counter writes per design, commit-log syncs, peer messages
// that got no answer), and a collector that reads the node's existing
// statistics at scrape time (coordinator, storage, deduplication filters,
// hints, gossip, the CQL server's limits), so that nothing else is threaded
// through the hot paths. The admin package serves Handler on /metrics;
// docs/operations.md lists the series.
package metrics

import (
	"errors"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/replica"
	"github.com/idemkv/idemkv/transport"
)

// Namespace prefixes every series of a node.
const Namespace = "idemkv"

// Snapshot is what the collector reads of a node at each scrape.
type Snapshot struct {
	Coordinator coordinator.Stats
	Replica     replica.Stats
	CQL         cql.Stats
	// CounterCacheEntries is the number of entries in the counter cache.
	CounterCacheEntries int
	// Caches are the node's bounded caches by name (the idemkv_cache_*
	// series' cache label): "counter" is the cell cache that
	// counter_cache_size_in_mb bounds (coltype/cellcache).
	Caches map[string]cellcache.Stats
	// Dedup sums the deduplication counts of the node's columns by design
	// (the column type's registered name); EstimatedFPP is the largest.
	Dedup map[string]coltype.DedupStats
	// Design sums the numeric fields of each design's own statistics
	// (replica.ColumnStats.Design), by design and field.
	Design map[string]map[string]float64
	// HintsPending are the hints waiting, by target host id.
	HintsPending map[string]int
	// HintsStored and HintsDelivered count the hints since the node started.
	HintsStored, HintsDelivered uint64
	// HintsExpired counts the hints dropped at delivery, older than their
	// table's gc_grace_seconds.
	HintsExpired uint64
	// Nodes are the ring's nodes as this node's gossip sees them.
	Nodes []Node
	// Tables are this node's tables.
	Tables []Table
	// CommitLogBytes is the size of the commit log's segments.
	CommitLogBytes int64
	// Drained is set once the node was drained.
	Drained bool
	// StreamIn counts what the node received by range streaming (its
	// bootstrap, a decommissioning node's pushes), StreamOut what it sent
	// (its decommission, a bootstrapping node's pulls).
	StreamIn, StreamOut Stream
}

// Stream counts the ranges, rows, cells and bytes of range streaming.
type Stream struct {
	Ranges, Rows, Cells, Bytes uint64
}

// Node is one node of the ring as gossip sees it.
type Node struct {
	HostID, Addr, DC, Rack, Status string
	Up                             bool
}

// Table is one table's storage on the node.
type Table struct {
	Keyspace, Name string
	SSTables       int
	SSTableBytes   int64
	MemtableBytes  int64
}

// Source gives the collector its snapshots.
type Source interface {
	MetricsSnapshot() Snapshot
}

// Metrics is one node's registry and instruments. Its methods are safe for
// concurrent use, and a nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	clientLatency  *prometheus.HistogramVec
	clientFailures *prometheus.CounterVec
	cqlLatency     *prometheus.HistogramVec
	cqlErrors      *prometheus.CounterVec
	counterWrites  *prometheus.CounterVec
	syncLatency    prometheus.Histogram
	peerMessages   *prometheus.CounterVec
	peerDropped    *prometheus.CounterVec

	// The labelled children the request paths update, resolved once per
	// label values (WithLabelValues hashes them under the vector's lock on
	// every call).
	clientLatencyOf  children[[2]string, prometheus.Observer]
	clientFailuresOf children[[3]string, prometheus.Counter]
	cqlLatencyOf     children[[2]string, prometheus.Observer]
	cqlErrorsOf      children[[2]string, prometheus.Counter]
	counterWritesOf  children[[2]string, prometheus.Counter]
	peerMessagesOf   children[peerLabels, prometheus.Counter]
	peerDroppedOf    children[peerDropLabels, prometheus.Counter]
}

// peerLabels and peerDropLabels key the children of the messaging series.
type peerLabels struct {
	family string
	typ    int
}

type peerDropLabels struct {
	peerLabels
	reason string
}

// children caches the children of a metric vector by their label values:
// a map read without a lock, replaced by a copy when a child is added (the
// label values are few: operations, levels, designs, message types).
type children[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

// get returns the child of k, resolving it with resolve the first time.
func (c *children[K, V]) get(k K, resolve func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	m := make(map[K]V, 1)
	if old != nil {
		m = make(map[K]V, len(*old)+1)
		for k, v := range *old {
			m[k] = v
		}
	}
	v := resolve()
	m[k] = v
	c.m.Store(&m)
	return v
}

// latencyBuckets span 50 µs to about 13 s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 19)

// New makes a node's registry: its instruments, the collector of src, and
// the Go runtime's and the process's collectors. labels (e.g. the node's
// address) are added to every series; nil adds none.
func New(src Source, labels prometheus.Labels) (*Metrics, error) {
	m := &Metrics{reg: prometheus.NewRegistry()}
	r := prometheus.WrapRegistererWith(labels, m.reg)
	m.clientLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "client_request", Name: "latency_seconds",
		Help:    "Latency of the requests this node coordinated for CQL clients, by operation and consistency level (failed ones included).",
		Buckets: latencyBuckets,
	}, []string{"operation", "consistency"})
	m.clientFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "client_request", Name: "failures_total",
		Help: "Client requests this node coordinated that failed, by operation, consistency level and error (unavailable, timeout, invalid, other).",
	}, []string{"operation", "consistency", "error"})
	m.cqlLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "cql", Name: "request_latency_seconds",
		Help:    "Latency of the CQL requests the node's executor ran, by message (query, prepare, execute, batch) and statement (select, update, ...; for execute, the prepared statement's).",
		Buckets: latencyBuckets,
	}, []string{"message", "statement"})
	m.cqlErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "cql", Name: "request_errors_total",
		Help: "CQL requests answered with an error, by message and statement.",
	}, []string{"message", "statement"})
	m.counterWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "counter", Name: "writes_total",
		Help: "Counter updates this node coordinated for clients, by design (the column type's registered name) and result (ok, failed).",
	}, []string{"design", "result"})
	m.syncLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "commitlog", Name: "sync_latency_seconds",
		Help:    "Duration of the commit log's fsyncs of its segments.",
		Buckets: latencyBuckets,
	})
	m.peerMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "messaging", Name: "sent_total",
		Help: "Messages this node sent to peers, by family (gossip, coordinator, node) and message type.",
	}, []string{"family", "type"})
	m.peerDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "messaging", Name: "dropped_total",
		Help: "Messages to peers that got no answer, by family, message type and reason (timeout, unreachable, error).",
	}, []string{"family", "type", "reason"})
	for _, c := range []prometheus.Collector{
		m.clientLatency, m.clientFailures, m.cqlLatency, m.cqlErrors, m.counterWrites,
		m.syncLatency, m.peerMessages, m.peerDropped,
		&collector{src: src},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Registry is the node's registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus' exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveClient records a client request the node coordinated.
// consistency is the level's name ("none" for the exchanges of designs
// updated by a custom payload, which take none).
func (m *Metrics) ObserveClient(op, cls string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.clientLatencyOf.get([2]string{op, cls}, func() prometheus.Observer {
		return m.clientLatency.WithLabelValues(op, cls)
	}).Observe(d.Seconds())
	if err != nil {
		class := ErrorClass(err)
		m.clientFailuresOf.get([3]string{op, cls, class}, func() prometheus.Counter {
			return m.clientFailures.WithLabelValues(op, cls, class)
		}).Inc()
	}
}

// ObserveCQL records a request of the CQL executor.
func (m *Metrics) ObserveCQL(message, statement string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.cqlLatencyOf.get([2]string{message, statement}, func() prometheus.Observer {
		return m.cqlLatency.WithLabelValues(message, statement)
	}).Observe(d.Seconds())
	if err != nil {
		m.cqlErrorsOf.get([2]string{message, statement}, func() prometheus.Counter {
			return m.cqlErrors.WithLabelValues(message, statement)
		}).Inc()
	}
}

// CounterWrite counts a counter update of a design.
func (m *Metrics) CounterWrite(design string, err error) {
	if m == nil {
		return
	}
	res := "ok"
	if err != nil {
		res = "failed"
	}
	m.counterWritesOf.get([2]string{design, res}, func() prometheus.Counter {
		return m.counterWrites.WithLabelValues(design, res)
	}).Inc()
}

// ObserveSync records a commit-log fsync.
func (m *Metrics) ObserveSync(d time.Duration) {
	if m == nil {
		return
	}
	m.syncLatency.Observe(d.Seconds())
}

// PeerMessage counts a message sent to a peer, and its loss when err is
// not nil.
func (m *Metrics) PeerMessage(family string, typ int, err error) {
	if m == nil {
		return
	}
	k := peerLabels{family, typ}
	m.peerMessagesOf.get(k, func() prometheus.Counter {
		return m.peerMessages.WithLabelValues(family, strconv.Itoa(typ))
	}).Inc()
	if err != nil {
		dk := peerDropLabels{k, dropReason(err)}
		m.peerDroppedOf.get(dk, func() prometheus.Counter {
			return m.peerDropped.WithLabelValues(family, strconv.Itoa(typ), dk.reason)
		}).Inc()
	}
}

// ErrorClass names a coordinator error for a label: unavailable, timeout,
// invalid or other.
func ErrorClass(err error) string {
	var un *coordinator.UnavailableError
	var wt *coordinator.WriteTimeoutError
	var rt *coordinator.ReadTimeoutError
	var inv *coordinator.InvalidError
	switch {
	case errors.As(err, &un):
		return "unavailable"
	case errors.As(err, &wt), errors.As(err, &rt):
		return "timeout"
	case errors.As(err, &inv):
		return "invalid"
	}
	return "other"
}

// collector reads a Source at scrape time.
type collector struct{ src Source }

// Describe sends nothing: the collector is unchecked, its series depend on
// the node's tables, designs and peers.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func desc(sub, name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, sub, name), help, labels, nil)
}

var (
	descCoord = map[string]*prometheus.Desc{}
	descStore = map[string]*prometheus.Desc{}
	descCQL   = map[string]*prometheus.Desc{}
)

type field[S any] struct {
	name, help string
	counter    bool
	get        func(S) float64
}

var coordFields = []field[coordinator.Stats]{
	{"writes_total", "Counter writes this node coordinated.", true, func(s coordinator.Stats) float64 { return float64(s.Writes) }},
	{"writes_led_total", "Counter writes this node led as the leader replica.", true, func(s coordinator.Stats) float64 { return float64(s.WritesLed) }},
	{"unavailable_total", "Requests refused as unavailable (too few live replicas).", true, func(s coordinator.Stats) float64 { return float64(s.Unavailable) }},
	{"write_timeouts_total", "Counter writes that timed out.", true, func(s coordinator.Stats) float64 { return float64(s.WriteTimeouts) }},
	{"reads_total", "Reads this node coordinated.", true, func(s coordinator.Stats) float64 { return float64(s.Reads) }},
	{"read_timeouts_total", "Reads that timed out.", true, func(s coordinator.Stats) float64 { return float64(s.ReadTimeouts) }},
	{"read_repairs_total", "Read repairs sent.", true, func(s coordinator.Stats) float64 { return float64(s.ReadRepairs) }},
	{"replica_mutations_total", "Mutations sent to other replicas.", true, func(s coordinator.Stats) float64 { return float64(s.ReplicaMutations) }},
	{"retries_dismissed_total", "Updates this node led that its column recognised as retries (by op id) and acknowledged without applying.", true, func(s coordinator.Stats) float64 { return float64(s.Dismissed) }},
	{"in_doubt_resolved_total", "Updates led before an unclean stop, settled after the restart.", true, func(s coordinator.Stats) float64 { return float64(s.InDoubtResolved) }},
	{"in_doubt_dropped_total", "Updates led before an unclean stop, taken back because another leader counted them.", true, func(s coordinator.Stats) float64 { return float64(s.InDoubtDropped) }},
	{"ops_asked_total", "Ops asked about at the other replicas before leading them (after an unclean start, or a change in the live replicas).", true, func(s coordinator.Stats) float64 { return float64(s.OpsAsked) }},
	{"ops_learned_total", "Op ids learned from other replicas before leading them, then dismissed.", true, func(s coordinator.Stats) float64 { return float64(s.OpsLearned) }},
	{"exchanges_total", "Exchanges this node coordinated: clients' custom payloads, and those a design's coordinator-side logic ran (plain updates of handoff counters).", true, func(s coordinator.Stats) float64 { return float64(s.Exchanges) }},
	{"exchange_bytes_total", "Bytes of the payloads those exchanges carried, both ways.", true, func(s coordinator.Stats) float64 { return float64(s.ExchangeBytes) }},
	{"anti_entropy_messages_total", "Anti-entropy exchanges sent to other replicas.", true, func(s coordinator.Stats) float64 { return float64(s.AntiEntropyMessages) }},
	{"anti_entropy_bytes_total", "Bytes of the anti-entropy exchanges, both ways.", true, func(s coordinator.Stats) float64 { return float64(s.AntiEntropyBytes) }},
	{"retirements_total", "Temporary participants of plain updates a design retired in the background (handoff: with a notice).", true, func(s coordinator.Stats) float64 { return float64(s.Retirements) }},
}

var storeFields = []field[replica.Stats]{
	{"leader_applies_total", "Updates applied on this node as the leader.", true, func(s replica.Stats) float64 { return float64(s.LeaderApplies) }},
	{"mutations_applied_total", "Replicated mutations applied.", true, func(s replica.Stats) float64 { return float64(s.MutationsApplied) }},
	{"counter_cache_hits_total", "Vanilla counter increments that found this node's shard in the counter cache (all designs: idemkv_cache_hits_total{cache=\"counter\"}).", true, func(s replica.Stats) float64 { return float64(s.CacheHits) }},
	{"counter_cache_misses_total", "Vanilla counter increments that read this node's shard from storage (all designs: idemkv_cache_misses_total{cache=\"counter\"}).", true, func(s replica.Stats) float64 { return float64(s.CacheMisses) }},
	{"flushes_total", "Memtable flushes.", true, func(s replica.Stats) float64 { return float64(s.Flushes) }},
	{"commitlog_space_flushes_total", "Memtable flushes queued because the commit log's segments exceeded commitlog_total_space_in_mb.", true, func(s replica.Stats) float64 { return float64(s.LogSpaceFlushes) }},
	{"commitlog_retained_bytes", "Bytes of sealed commit log segments kept for the op ids of deduplicating columns' windows: they count towards commitlog_total_space_in_mb and no flush frees them.", false, func(s replica.Stats) float64 { return float64(s.LogRetainedBytes) }},
	{"memtable_space_flushes_total", "Memtable flushes queued because the memtables of all tables reached half of memtable_heap_space_in_mb.", true, func(s replica.Stats) float64 { return float64(s.SpaceFlushes) }},
	{"compactions_total", "Compactions.", true, func(s replica.Stats) float64 { return float64(s.Compactions) }},
	{"replayed_records_total", "Commit-log records replayed at start-up.", true, func(s replica.Stats) float64 { return float64(s.ReplayedRecords) }},
	{"tombstones_purged_total", "Tombstoned cells compactions dropped, older than their table's gc_grace_seconds.", true, func(s replica.Stats) float64 { return float64(s.TombstonesPurged) }},
	{"corrupt_blocks_total", "SSTable blocks that failed their checksum or did not decode.", true, func(s replica.Stats) float64 { return float64(s.CorruptBlocks) }},
}

var cqlFields = []field[cql.Stats]{
	{"connections", "CQL connections being served.", false, func(s cql.Stats) float64 { return float64(s.ConnectionsOpen) }},
	{"connections_accepted_total", "CQL connections accepted.", true, func(s cql.Stats) float64 { return float64(s.ConnectionsAccepted) }},
	{"connections_refused_total", "CQL connections refused over a connection limit.", true, func(s cql.Stats) float64 { return float64(s.ConnectionsRefused) }},
	{"accept_errors_total", "Failed accepts.", true, func(s cql.Stats) float64 { return float64(s.AcceptErrors) }},
	{"requests_in_flight", "CQL requests read and not yet answered.", false, func(s cql.Stats) float64 { return float64(s.RequestsInFlight) }},
	{"request_bytes_in_flight", "Their frame bytes.", false, func(s cql.Stats) float64 { return float64(s.RequestBytesInFlight) }},
	{"request_bytes_in_flight_peak", "The highest request bytes in flight seen.", false, func(s cql.Stats) float64 { return float64(s.PeakRequestBytesInFlight) }},
	{"queued_response_bytes", "Encoded answers waiting for their connection's writer.", false, func(s cql.Stats) float64 { return float64(s.QueuedResponseBytes) }},
	{"reads_paused", "Connections not reading their socket now, over an in-flight limit.", false, func(s cql.Stats) float64 { return float64(s.ReadsPausedNow) }},
	{"read_pauses_total", "Times a connection stopped reading over an in-flight limit.", true, func(s cql.Stats) float64 { return float64(s.ReadPauses) }},
	{"frames_too_large_total", "Frames refused over the frame size limit.", true, func(s cql.Stats) float64 { return float64(s.FramesTooLarge) }},
	{"idle_timeouts_total", "Connections closed by the idle timeout.", true, func(s cql.Stats) float64 { return float64(s.IdleTimeouts) }},
	{"half_frame_timeouts_total", "Connections closed with a frame stalled half-read.", true, func(s cql.Stats) float64 { return float64(s.HalfFrameTimeouts) }},
	{"write_timeouts_total", "Connections closed with a write blocked too long.", true, func(s cql.Stats) float64 { return float64(s.WriteTimeouts) }},
	{"event_overflows_total", "Connections closed with too many events queued.", true, func(s cql.Stats) float64 { return float64(s.EventOverflows) }},
	{"memory_releases_total", "Times memory was given back to the operating system after a storm of connections.", true, func(s cql.Stats) float64 { return float64(s.MemoryReleases) }},
}

func init() {
	for _, f := range coordFields {
		descCoord[f.name] = desc("coordinator", f.name, f.help)
	}
	for _, f := range storeFields {
		descStore[f.name] = desc("storage", f.name, f.help)
	}
	for _, f := range cqlFields {
		descCQL[f.name] = desc("cql", f.name, f.help)
	}
}

var (
	descDismissed = desc("dedup", "dismissed_total", "Retries a deduplicating design (e.g. the FBF) recognised by op id and acknowledged without applying, by design.", "design")
	descApplied   = desc("dedup", "applied_total", "Fresh updates a deduplicating design applied as leader, by design.", "design")
	descNoOpID    = desc("dedup", "no_op_id_total", "Updates without an op id, applied without deduplication, by design.", "design")
	descBits      = desc("dedup", "filter_bits_in_use", "Filter bits set, summed over the design's columns.", "design")
	descFPP       = desc("dedup", "estimated_fpp", "Estimated false-positive probability of the design's filters (the largest over its columns): the expected share of fresh updates dropped.", "design")
	descDesign    = desc("design", "stat", "A design's own statistics (the numeric fields its column type's Stats method returns), summed over its columns.", "design", "stat")
	descCache     = desc("storage", "counter_cache_entries", "Entries in the counter cache (the same as idemkv_cache_entries{cache=\"counter\"}).")
	descCEntries  = desc("cache", "entries", "Entries in a cache, by cache (counter: the counter cache of every design's cell state, bounded by counter_cache_size_in_mb).", "cache")
	descCSize     = desc("cache", "size_bytes", "Estimated bytes of a cache's entries (a number of entries for a cache bounded by entries).", "cache")
	descCCapacity = desc("cache", "capacity_bytes", "A cache's bound (counter: counter_cache_size_in_mb); 0: no bound.", "cache")
	descCPinned   = desc("cache", "pinned_entries", "Entries in use by an operation now, which the cache does not evict.", "cache")
	descCHits     = desc("cache", "hits_total", "Lookups that found their entry in the cache.", "cache")
	descCMisses   = desc("cache", "misses_total", "Lookups that did not, and read the state from storage.", "cache")
	descCEvicted  = desc("cache", "evictions_total", "Entries evicted over the cache's bound, least recently used first.", "cache")
	descCommitLog = desc("commitlog", "bytes", "Bytes of the commit log's segments.")
	descPending   = desc("hints", "pending", "Hints waiting for delivery, by target host id.", "target")
	descStored    = desc("hints", "stored_total", "Hints stored since the node started.")
	descDelivered = desc("hints", "delivered_total", "Hints delivered since the node started.")
	descExpired   = desc("hints", "expired_total", "Hints dropped at delivery since the node started, older than their table's gc_grace_seconds.")
	descNodes     = desc("gossip", "nodes", "Nodes of the ring by gossip state (up, down).", "state")
	descNodeUp    = desc("gossip", "node_up", "1 when gossip sees the node up, else 0.", "host_id", "address", "dc", "rack", "status")
	descSSTables  = desc("table", "sstables", "SSTables of a table on this node.", "keyspace", "table")
	descSSTBytes  = desc("table", "sstable_bytes", "Bytes of a table's SSTables' Data components on this node.", "keyspace", "table")
	descMemBytes  = desc("table", "memtable_bytes", "Bytes of a table's memtables on this node.", "keyspace", "table")
	descDrained   = desc("node", "drained", "1 once the node was drained (serves no CQL, flushed, left the ring).")
	descSRanges   = desc("stream", "ranges_total", "Token ranges of a table streamed by a bootstrap (in) or a decommission (out).", "direction")
	descSRows     = desc("stream", "rows_total", "Rows streamed, received (in) or sent (out).", "direction")
	descSCells    = desc("stream", "cells_total", "Cells streamed, received (in) or sent (out).", "direction")
	descSBytes    = desc("stream", "bytes_total", "Bytes of stream messages' rows, received (in) or sent (out).", "direction")
)

// Collect reads a snapshot and sends its series.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.MetricsSnapshot()
	emit := func(d *prometheus.Desc, counter bool, v float64, labels ...string) {
		t := prometheus.GaugeValue
		if counter {
			t = prometheus.CounterValue
		}
		if m, err := prometheus.NewConstMetric(d, t, v, labels...); err == nil {
			ch <- m
		}
	}
	for _, f := range coordFields {
		emit(descCoord[f.name], f.counter, f.get(s.Coordinator))
	}
	for _, f := range storeFields {
		emit(descStore[f.name], f.counter, f.get(s.Replica))
	}
	for _, f := range cqlFields {
		emit(descCQL[f.name], f.counter, f.get(s.CQL))
	}
	emit(descCache, false, float64(s.CounterCacheEntries))
	for _, name := range sortedKeys(s.Caches) {
		c := s.Caches[name]
		emit(descCEntries, false, float64(c.Entries), name)
		emit(descCSize, false, float64(c.Cost), name)
		emit(descCCapacity, false, float64(c.Bound), name)
		emit(descCPinned, false, float64(c.Pinned), name)
		emit(descCHits, true, float64(c.Hits), name)
		emit(descCMisses, true, float64(c.Misses), name)
		emit(descCEvicted, true, float64(c.Evictions), name)
	}
	emit(descCommitLog, false, float64(s.CommitLogBytes))
	for _, design := range sortedKeys(s.Dedup) {
		d := s.Dedup[design]
		emit(descDismissed, true, float64(d.Dismissed), design)
		emit(descApplied, true, float64(d.Applied), design)
		emit(descNoOpID, true, float64(d.NoOpID), design)
		emit(descBits, false, float64(d.BitsInUse), design)
		emit(descFPP, false, d.EstimatedFPP, design)
	}
	for _, design := range sortedKeys(s.Design) {
		for _, stat := range sortedKeys(s.Design[design]) {
			emit(descDesign, false, s.Design[design][stat], design, stat)
		}
	}
	for _, target := range sortedKeys(s.HintsPending) {
		emit(descPending, false, float64(s.HintsPending[target]), target)
	}
	emit(descStored, true, float64(s.HintsStored))
	emit(descDelivered, true, float64(s.HintsDelivered))
	emit(descExpired, true, float64(s.HintsExpired))
	up, down := 0, 0
	for _, n := range s.Nodes {
		v := 0.0
		if n.Up {
			up++
			v = 1
		} else {
			down++
		}
		emit(descNodeUp, false, v, n.HostID, n.Addr, n.DC, n.Rack, n.Status)
	}
	emit(descNodes, false, float64(up), "up")
	emit(descNodes, false, float64(down), "down")
	for _, t := range s.Tables {
		emit(descSSTables, false, float64(t.SSTables), t.Keyspace, t.Name)
		emit(descSSTBytes, false, float64(t.SSTableBytes), t.Keyspace, t.Name)
		emit(descMemBytes, false, float64(t.MemtableBytes), t.Keyspace, t.Name)
	}
	drained := 0.0
	if s.Drained {
		drained = 1
	}
	emit(descDrained, false, drained)
	for _, d := range []struct {
		name string
		s    Stream
	}{{"in", s.StreamIn}, {"out", s.StreamOut}} {
		emit(descSRanges, true, float64(d.s.Ranges), d.name)
		emit(descSRows, true, float64(d.s.Rows), d.name)
		emit(descSCells, true, float64(d.s.Cells), d.name)
		emit(descSBytes, true, float64(d.s.Bytes), d.name)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dropReason names a failed peer message's error for a label.
func dropReason(err error) string {
	switch {
	case errors.Is(err, transport.ErrTimeout):
		return "timeout"
	case errors.Is(err, transport.ErrUnreachable):
		return "unreachable"
	case errors.Is(err, transport.ErrClosed):
		return "closed"
	}
	return "error"
}
