package node

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/idemkv/idemkv/admin"
	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
)

// Config is a node's configuration, read from a YAML file in the spirit of
// cassandra.yaml (same key names where Cassandra has one).
type Config struct {
	Compat `yaml:",inline"` // cassandra.yaml's key names: see config_compat.go

	ClusterName         string   `yaml:"cluster_name"`
	DataDirectory       string   `yaml:"data_directory"`
	ListenAddress       string   `yaml:"listen_address"`        // this node's IP, e.g. 127.0.0.2
	StoragePort         int      `yaml:"storage_port"`          // peer port, default 7000
	NativeTransportPort int      `yaml:"native_transport_port"` // CQL port, default 9042
	Seeds               []string `yaml:"seeds"`                 // "ip" or "ip:port"
	NumTokens           int      `yaml:"num_tokens"`            // default 16
	DC                  string   `yaml:"dc"`                    // default "datacenter1"
	Rack                string   `yaml:"rack"`                  // default "rack1"

	CommitLogSync          string `yaml:"commitlog_sync"`                    // periodic | batch | group
	CommitLogSyncPeriodMS  int    `yaml:"commitlog_sync_period_in_ms"`       // default 10000
	CommitLogGroupWindowMS int    `yaml:"commitlog_sync_group_window_in_ms"` // default 2
	CommitLogSegmentSizeMB int    `yaml:"commitlog_segment_size_in_mb"`      // default 32
	// CommitLogDiskAccessMode is how appends reach the segments: "mmap"
	// (preallocated, mapped segments: no system call per append), "standard"
	// (write(2)) or "auto" (the default; also spelled "legacy", Cassandra
	// 5's default): mmap where the filesystem can map files.
	CommitLogDiskAccessMode string `yaml:"commitlog_disk_access_mode"`
	MemtableFlushMB         int    `yaml:"memtable_flush_size_in_mb"` // default 64
	// MemtableHeapSpaceMB bounds the memtables of all tables together
	// (Cassandra's memtable_heap_space_in_mb): when those being written
	// reach half of it, the largest is flushed. 0 (or absent) is
	// Cassandra's default, a quarter of the heap, the heap being GOMEMLIMIT
	// when set, else 2048; -1 is no bound beyond memtable_flush_size_in_mb
	// per table.
	MemtableHeapSpaceMB int `yaml:"memtable_heap_space_in_mb"`
	// CommitLogTotalSpaceMB bounds the commit log's segments on disk
	// (Cassandra's commitlog_total_space_in_mb): past it, the tables whose
	// memtables hold the oldest segment's records are flushed, so that it
	// can be deleted. 0 (or absent) is Cassandra's default, the smaller of
	// 8192 and a quarter of the commit log's volume; -1 is no bound.
	CommitLogTotalSpaceMB int `yaml:"commitlog_total_space_in_mb"`

	CounterWriteTimeoutMS int     `yaml:"counter_write_request_timeout_in_ms"` // default 5000
	ReadTimeoutMS         int     `yaml:"read_request_timeout_in_ms"`          // default 5000
	PhiConvictThreshold   float64 `yaml:"phi_convict_threshold"`               // default 8
	GossipIntervalMS      int     `yaml:"gossip_interval_in_ms"`               // default 1000
	HintDeliveryMS        int     `yaml:"hint_delivery_interval_in_ms"`        // default 1000
	CounterLeader         string  `yaml:"counter_leader"`                      // random (Cassandra) | first
	HandoffSyncMS         int     `yaml:"handoff_sync_interval_in_ms"`         // anti-entropy period of the coltype.AntiEntropy columns (handoff, reset), default 1000
	HandoffNoticeMS       int     `yaml:"handoff_notice_retention_in_ms"`      // how long a processed retirement notice is kept, default 60000

	// StartNativeTransport serves CQL (default true).
	StartNativeTransport      *bool             `yaml:"start_native_transport"`
	NativeTransportMaxFrameMB int               `yaml:"native_transport_max_frame_size_in_mb"` // default 16, as Cassandra 4.0+
	Authenticator             string            `yaml:"authenticator"`                         // AllowAllAuthenticator (default) | PasswordAuthenticator
	Credentials               map[string]string `yaml:"credentials"`                           // users and passwords for PasswordAuthenticator (default cassandra: cassandra)

	// Native transport limits (docs/limits.md). For the limits, 0 (or
	// absent) is the default and -1 no limit.
	NativeTransportMaxAuthMessageKB          int   `yaml:"native_transport_max_auth_message_size_in_kb"`             // frame limit before the handshake is done, default 128
	NativeTransportMaxConcurrentConnections  int   `yaml:"native_transport_max_concurrent_connections"`              // default -1 (no limit), as Cassandra
	NativeTransportMaxConnectionsPerIP       int   `yaml:"native_transport_max_concurrent_connections_per_ip"`       // default -1 (no limit), as Cassandra
	NativeTransportMaxRequestDataInFlightMB  int64 `yaml:"native_transport_max_request_data_in_flight_in_mb"`        // request bytes in flight on the node, default 256
	NativeTransportMaxRequestDataPerIPMB     int64 `yaml:"native_transport_max_request_data_in_flight_per_ip_in_mb"` // per source address, default 64
	NativeTransportReceiveQueueCapacityBytes int64 `yaml:"native_transport_receive_queue_capacity_in_bytes"`         // per connection, default 1 MiB
	NativeTransportMaxRequestsPerConnection  int   `yaml:"native_transport_max_requests_per_connection"`             // requests in flight per connection, default 1024 (idemkv's own)
	NativeTransportIdleTimeoutMS             int   `yaml:"native_transport_idle_timeout_in_ms"`                      // default 0: never, as Cassandra
	NativeTransportHalfFrameTimeoutMS        int   `yaml:"native_transport_half_frame_timeout_in_ms"`                // a frame stalled half-read, default 10000 (idemkv's own)
	NativeTransportWriteTimeoutMS            int   `yaml:"native_transport_write_timeout_in_ms"`                     // a write blocked by a client that reads nothing, default 30000 (idemkv's own)
	// Batch size thresholds, as Cassandra's: a batch spanning several
	// partitions over the warn threshold is logged and its client warned,
	// over the fail threshold refused ("Batch too large"). -1: none.
	BatchSizeWarnThresholdKB int `yaml:"batch_size_warn_threshold_in_kb"` // default 5, as Cassandra
	BatchSizeFailThresholdKB int `yaml:"batch_size_fail_threshold_in_kb"` // default 50, as Cassandra
	// FBFMaxMemoryMB bounds the FBF filters all tables may make the node
	// allocate (idemkv's own): a CREATE or ALTER TABLE over it is
	// refused. Default 2048; -1: none.
	FBFMaxMemoryMB int `yaml:"fbf_max_memory_in_mb"`
	// CounterCacheSizeMB bounds the counter designs' per-cell state in
	// memory (vanilla and FBF leader shards, handoff and observed-reset
	// cells, in one cache; see
	// coltype/cellcache and docs/limits.md), as Cassandra's counter cache:
	// 0 (or absent) is Cassandra's default, min(2.5 % of the heap, 50 MB),
	// the heap being GOMEMLIMIT when set; -1 is no bound.
	CounterCacheSizeMB int `yaml:"counter_cache_size_in_mb"`
	// MaxHintWindowMS: no hint is stored for a node down longer (as
	// Cassandra's max_hint_window_in_ms). Default 10800000 (3 h); -1: none.
	MaxHintWindowMS int `yaml:"max_hint_window_in_ms"`

	// AdminPort is the port, on listen_address, of the node's admin
	// endpoint: Prometheus metrics on /metrics and the API idemkv nodetool
	// calls (docs/operations.md). 0 (or absent) is 9180, the port
	// ScyllaDB serves its metrics on; -1 serves none.
	AdminPort int `yaml:"admin_port"`

	// AdminProfiling serves the Go runtime's profiles (net/http/pprof)
	// under /debug/pprof/ on the admin endpoint: `go tool pprof
	// http://HOST:9180/debug/pprof/heap`. Default false.
	AdminProfiling bool `yaml:"admin_profiling"`

	// AutoBootstrap: a node that starts for the first time (no saved
	// tokens) and finds an existing ring streams the data of the ranges it
	// takes from their current replicas before it serves them, as
	// cassandra.yaml's auto_bootstrap (default true); seeds never do.
	// false joins at once, without the data (docs/operations.md).
	AutoBootstrap *bool `yaml:"auto_bootstrap"`

	// CustomQueryHandlerClass, as Cassandra's
	// -Dcassandra.custom_query_handler_class system property: empty (the
	// default handler) or CustomPayloadMirroringQueryHandler (the class
	// name org.apache.cassandra.cql3.CustomPayloadMirroringQueryHandler,
	// or "mirror"), which echoes each QUERY, PREPARE, EXECUTE and BATCH
	// request's custom payload in its response (idemkv's own reply keys
	// win a collision). Any other class is a start-up error.
	CustomQueryHandlerClass string `yaml:"custom_query_handler_class"`
	// TestFailWritesKeyspace, as Cassandra's -Dcassandra.test.fail_writes_ks
	// system property (a test hook): every replica refuses the mutations
	// of the tables of this keyspace, and coordinators answer such writes
	// WRITE_FAILURE. Empty: none.
	TestFailWritesKeyspace string `yaml:"test_fail_writes_keyspace"`
}

// MirroringQueryHandler is the canonical custom_query_handler_class value
// of the handler that echoes requests' custom payloads.
const MirroringQueryHandler = "org.apache.cassandra.cql3.CustomPayloadMirroringQueryHandler"

// LoadConfig reads a YAML configuration file with idemkv's keys and
// cassandra.yaml's (see ParseConfig); unknown keys are an error.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("node: config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return c, fmt.Errorf("node: config %s: %w", path, err)
	}
	return c, nil
}

// Write saves the configuration as YAML, with the effective values: the
// defaults filled in, and the settings left empty omitted. A configuration
// that would not start is not written.
func (c Config) Write(path string) error {
	return writeConfig(c, path)
}

// withDefaults fills the defaults and validates.
func (c Config) withDefaults() (Config, error) {
	if c.ClusterName == "" {
		c.ClusterName = "idemkv"
	}
	if c.DataDirectory == "" {
		return c, fmt.Errorf("node: data_directory is required")
	}
	if c.ListenAddress == "" {
		c.ListenAddress = "127.0.0.1"
	}
	if net.ParseIP(c.ListenAddress) == nil {
		return c, fmt.Errorf("node: listen_address %q is not an IP address", c.ListenAddress)
	}
	if c.StoragePort == 0 {
		c.StoragePort = 7000
	}
	if c.NativeTransportPort == 0 {
		c.NativeTransportPort = 9042
	}
	if c.NumTokens <= 0 {
		c.NumTokens = 16
	}
	if c.DC == "" {
		c.DC = "datacenter1"
	}
	if c.Rack == "" {
		c.Rack = "rack1"
	}
	if c.CommitLogSync == "" {
		c.CommitLogSync = "periodic"
	}
	if _, err := commitlog.ParseSyncMode(c.CommitLogSync); err != nil {
		return c, fmt.Errorf("node: commitlog_sync: %w", err)
	}
	if c.CommitLogDiskAccessMode == "" {
		c.CommitLogDiskAccessMode = "auto"
	}
	if _, err := commitlog.ParseAccessMode(c.CommitLogDiskAccessMode); err != nil {
		return c, fmt.Errorf("node: commitlog_disk_access_mode: %w", err)
	}
	// An empty counter_leader is the default: random for vanilla tables,
	// each counter design's own for the others (FBF: first).
	if c.CounterLeader != "" {
		if _, err := coltype.ParseLeaderRule(c.CounterLeader); err != nil {
			return c, fmt.Errorf("node: counter_leader: %w", err)
		}
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.CommitLogSyncPeriodMS, 10000)
	def(&c.CommitLogGroupWindowMS, 2)
	def(&c.CommitLogSegmentSizeMB, 32)
	def(&c.MemtableFlushMB, 64)
	def(&c.CounterWriteTimeoutMS, 5000)
	def(&c.ReadTimeoutMS, 5000)
	def(&c.GossipIntervalMS, 1000)
	def(&c.HintDeliveryMS, 1000)
	def(&c.HandoffSyncMS, 1000)
	def(&c.HandoffNoticeMS, 60000)
	if c.AdminPort == 0 {
		c.AdminPort = admin.DefaultPort
	} else if c.AdminPort < 0 {
		c.AdminPort = -1
	} else if c.AdminPort > 65535 {
		return c, fmt.Errorf("node: admin_port %d: at most 65535 (-1: no admin endpoint)", c.AdminPort)
	}
	if c.PhiConvictThreshold <= 0 {
		c.PhiConvictThreshold = 8
	}
	if c.StartNativeTransport == nil {
		on := true
		c.StartNativeTransport = &on
	}
	def(&c.NativeTransportMaxFrameMB, 16)
	def(&c.NativeTransportMaxAuthMessageKB, 128)
	if c.NativeTransportMaxFrameMB > 2047 {
		return c, fmt.Errorf("node: native_transport_max_frame_size_in_mb %d: at most 2047", c.NativeTransportMaxFrameMB)
	}
	// The limits where -1 means none: 0 (absent) is the default.
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		} else if *v < 0 {
			*v = -1
		}
	}
	def64(&c.NativeTransportMaxRequestDataInFlightMB, 256)
	def64(&c.NativeTransportMaxRequestDataPerIPMB, 64)
	def64(&c.NativeTransportReceiveQueueCapacityBytes, 1<<20)
	orNone := func(v *int, d int) {
		if *v == 0 {
			*v = d
		} else if *v < 0 {
			*v = -1
		}
	}
	if c.CounterCacheSizeMB < 0 {
		c.CounterCacheSizeMB = -1
	}
	if c.MemtableHeapSpaceMB < 0 {
		c.MemtableHeapSpaceMB = -1
	}
	if c.CommitLogTotalSpaceMB < 0 {
		c.CommitLogTotalSpaceMB = -1
	}
	orNone(&c.NativeTransportMaxConcurrentConnections, -1)
	orNone(&c.NativeTransportMaxConnectionsPerIP, -1)
	orNone(&c.NativeTransportMaxRequestsPerConnection, 1024)
	orNone(&c.NativeTransportHalfFrameTimeoutMS, 10000)
	orNone(&c.NativeTransportWriteTimeoutMS, 30000)
	orNone(&c.BatchSizeWarnThresholdKB, 5)
	orNone(&c.BatchSizeFailThresholdKB, 50)
	orNone(&c.FBFMaxMemoryMB, 2048)
	orNone(&c.MaxHintWindowMS, 3*60*60*1000) // coordinator.DefaultMaxHintWindow
	if c.NativeTransportIdleTimeoutMS < 0 {
		c.NativeTransportIdleTimeoutMS = 0
	}
	switch c.CustomQueryHandlerClass {
	case "", "QueryProcessor", "org.apache.cassandra.cql3.QueryProcessor":
		c.CustomQueryHandlerClass = ""
	case MirroringQueryHandler, "CustomPayloadMirroringQueryHandler", "mirror":
		c.CustomQueryHandlerClass = MirroringQueryHandler
	default:
		return c, fmt.Errorf("node: custom_query_handler_class %q: idemkv has only %s (or \"mirror\"), or none", c.CustomQueryHandlerClass, MirroringQueryHandler)
	}
	switch c.Authenticator {
	case "", "AllowAllAuthenticator", "org.apache.cassandra.auth.AllowAllAuthenticator":
		c.Authenticator = "AllowAllAuthenticator"
	case "PasswordAuthenticator", "org.apache.cassandra.auth.PasswordAuthenticator":
		c.Authenticator = "PasswordAuthenticator"
		if len(c.Credentials) == 0 {
			c.Credentials = map[string]string{"cassandra": "cassandra"}
		}
	default:
		return c, fmt.Errorf("node: authenticator %q: want AllowAllAuthenticator or PasswordAuthenticator", c.Authenticator)
	}
	return c, nil
}

// PeerAddr is the node's peer address, ip:storage_port.
func (c Config) PeerAddr() string {
	return net.JoinHostPort(c.ListenAddress, strconv.Itoa(c.StoragePort))
}

// CQLAddr is the node's CQL address, ip:native_transport_port.
func (c Config) CQLAddr() string {
	return net.JoinHostPort(c.ListenAddress, strconv.Itoa(c.NativeTransportPort))
}

func ms(v int) time.Duration { return time.Duration(v) * time.Millisecond }
