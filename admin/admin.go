// Package admin is a node's admin endpoint: one small HTTP server per node
// (port 9180 of the node's listen address by default, as ScyllaDB serves
// Prometheus) serving the node's metrics on /metrics and the JSON API that
// `idemkv nodetool` calls under /api/v1/:
//
//	GET  /api/v1/status[?keyspace=K]             the ring as this node sees it
//	GET  /api/v1/info                            this node
//	GET  /api/v1/tablestats[?keyspace=K[&table=T]]
//	GET  /api/v1/describering?keyspace=K
//	GET  /api/v1/getendpoints?keyspace=K&table=T&key=KEY
//	POST /api/v1/flush[?keyspace=K[&table=T]]
//	POST /api/v1/compact[?keyspace=K[&table=T]]
//	POST /api/v1/drain
//	POST /api/v1/decommission                    (a Node that is a Decommissioner)
//
// With Options.Profiling (the node's admin_profiling) it also serves the Go
// runtime's profiles under /debug/pprof/ (net/http/pprof: heap, allocs,
// goroutine, profile?seconds=N, trace, ...), for `go tool pprof
// http://HOST:9180/debug/pprof/heap`. They are off by default: a CPU
// profile or a trace costs the node while it runs, and the heap profile
// shows the shape of the data it holds.
//
// The mutating calls answer only POST. Errors are JSON objects
// {"error": "..."} with status 400 (a bad request), 404 (an unknown
// keyspace or table), 405 (a wrong method), 409 (the node is drained) or
// 500. The package does not import the node: the node implements Node.
// docs/operations.md describes the endpoint and the metrics.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// DefaultPort is the admin endpoint's port when the configuration sets none.
const DefaultPort = 9180

// Errors a Node's methods wrap to choose the HTTP status.
var (
	// ErrNotFound: an unknown keyspace or table (404).
	ErrNotFound = errors.New("not found")
	// ErrBadRequest: a missing or malformed argument (400).
	ErrBadRequest = errors.New("bad request")
	// ErrDrained: the node was drained and does not do this any more (409).
	ErrDrained = errors.New("the node is drained")
)

// Node is what the endpoint needs of a node.
type Node interface {
	Info() Info
	// Ring is the ring as the node sees it; with a keyspace, Owns is
	// each node's effective ownership under its replication.
	Ring(keyspace string) ([]Peer, error)
	TableStats(keyspace, table string) ([]TableStats, error)
	DescribeRing(keyspace string) (Ring, error)
	Endpoints(keyspace, table, key string) ([]Endpoint, error)
	Flush(ctx context.Context, keyspace, table string) error
	Compact(ctx context.Context, keyspace, table string) error
	Drain(ctx context.Context) error
}

// Decommissioner is a Node that can leave the ring for good, streaming its
// ranges to the nodes that take them over (nodetool decommission). The
// endpoint answers a decommission of a Node without it with 400.
type Decommissioner interface {
	Decommission(ctx context.Context) error
}

// Info describes the node that answers.
type Info struct {
	HostID         string    `json:"host_id"`
	Address        string    `json:"address"` // listen address
	PeerAddr       string    `json:"peer_addr"`
	CQLAddr        string    `json:"cql_addr"`
	AdminAddr      string    `json:"admin_addr"`
	DC             string    `json:"dc"`
	Rack           string    `json:"rack"`
	ClusterName    string    `json:"cluster_name"`
	ReleaseVersion string    `json:"release_version"`
	SchemaVersion  string    `json:"schema_version"`
	Mode           string    `json:"mode"` // NORMAL, DRAINED
	Gossip         bool      `json:"gossip_active"`
	NativeProtocol bool      `json:"native_transport_active"`
	Tokens         int       `json:"tokens"`
	Generation     int64     `json:"generation"`
	Started        time.Time `json:"started"`
	UptimeSeconds  float64   `json:"uptime_seconds"`
	LoadBytes      int64     `json:"load_bytes"`
	HeapUsedBytes  uint64    `json:"heap_used_bytes"`
	HeapSysBytes   uint64    `json:"heap_sys_bytes"`
	CounterCache   Cache     `json:"counter_cache"`
	CommitLogBytes int64     `json:"commitlog_bytes"`
	HintsPending   int       `json:"hints_pending"`
	CorruptBlocks  uint64    `json:"corrupt_blocks"`
	CQLConnections int64     `json:"cql_connections"`
}

// Cache is the counter cache's state.
type Cache struct {
	Entries int `json:"entries"`
	// SizeBytes is the entries' estimated bytes; CapacityBytes the bound
	// (counter_cache_size_in_mb), 0 for none.
	SizeBytes     int64  `json:"size_bytes"`
	CapacityBytes int64  `json:"capacity_bytes"`
	Pinned        int    `json:"pinned"` // entries in use now, not evictable
	Hits          uint64 `json:"hits"`
	Misses        uint64 `json:"misses"`
	Evictions     uint64 `json:"evictions"`
}

// Peer is one node of the ring as the answering node sees it.
type Peer struct {
	HostID  string  `json:"host_id"`
	Address string  `json:"address"` // the IP, as nodetool status shows it
	Addr    string  `json:"addr"`    // ip:storage port
	CQLAddr string  `json:"cql_addr"`
	DC      string  `json:"dc"`
	Rack    string  `json:"rack"`
	Up      bool    `json:"up"`
	Status  string  `json:"status"` // gossip's: NORMAL, SHUTDOWN, ...
	Tokens  int     `json:"tokens"`
	Load    int64   `json:"load"`
	Owns    float64 `json:"owns"` // share of the token ring, 0–1 (with a keyspace: of the keyspace's data, 0–1 per node, summing to its replication factor)
}

// TableStats describe one table on the answering node.
type TableStats struct {
	Keyspace       string        `json:"keyspace"`
	Table          string        `json:"table"`
	ID             uint64        `json:"id"`
	SSTables       int           `json:"sstables"`
	SSTableBytes   []int64       `json:"sstable_bytes"` // the Data component of each, newest first
	SpaceUsedLive  int64         `json:"space_used_live"`
	SpaceUsedTotal int64         `json:"space_used_total"` // the table's directory
	SSTableRows    uint64        `json:"sstable_partitions"`
	MemtableBytes  int64         `json:"memtable_bytes"`
	MemtableRows   int           `json:"memtable_partitions"`
	Columns        []ColumnStats `json:"columns"`
}

// ColumnStats describe one counter column of a table.
type ColumnStats struct {
	Name string `json:"name"`
	Type string `json:"type"` // the design: the column type's registered name
	// Dedup are the op-id filter's counts, for deduplicating designs.
	Dedup *Dedup `json:"dedup,omitempty"`
	// Design are the design's own statistics (e.g. slots and notices held).
	Design map[string]float64 `json:"design,omitempty"`
}

// Dedup are a deduplicating column's counts.
type Dedup struct {
	Dismissed    uint64  `json:"dismissed"`
	Applied      uint64  `json:"applied"`
	NoOpID       uint64  `json:"no_op_id"`
	BitsInUse    uint64  `json:"bits_in_use"`
	EstimatedFPP float64 `json:"estimated_fpp"`
}

// Ring is a keyspace's token ranges and their replicas.
type Ring struct {
	SchemaVersion string       `json:"schema_version"`
	Ranges        []TokenRange `json:"ranges"`
}

// TokenRange is one range (Start, End] of the ring.
type TokenRange struct {
	Start     int64      `json:"start_token"`
	End       int64      `json:"end_token"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is a replica.
type Endpoint struct {
	Address string `json:"address"` // IP
	CQLAddr string `json:"cql_addr"`
	HostID  string `json:"host_id"`
	DC      string `json:"dc"`
	Rack    string `json:"rack"`
}

// Server is a running admin endpoint.
type Server struct {
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}
	logger *slog.Logger
}

// Listen serves the admin endpoint on addr; metrics (nil: none) is served
// on /metrics.
func Listen(addr string, n Node, metrics http.Handler, logger *slog.Logger, opts Options) (*Server, error) {
	if logger == nil {
		logger = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s: %w", addr, err)
	}
	s := &Server{ln: ln, done: make(chan struct{}), logger: logger}
	s.srv = &http.Server{Handler: handler(n, metrics, opts), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin endpoint stopped", "addr", addr, "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the endpoint, waiting up to 2 s for requests in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	if err != nil {
		return fmt.Errorf("admin: close: %w", err)
	}
	return nil
}

// Options are the endpoint's optional parts.
type Options struct {
	// Profiling serves the Go runtime's profiles under /debug/pprof/.
	Profiling bool
}

// Handler is the endpoint's HTTP handler, without profiles.
func Handler(n Node, metrics http.Handler) http.Handler { return handler(n, metrics, Options{}) }

func handler(n Node, metrics http.Handler, opts Options) http.Handler {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	if opts.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index) // the named profiles: heap, allocs, goroutine, block, mutex, threadcreate
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, r *http.Request) {
		reply(w, n.Info(), nil)
	})
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) {
		peers, err := n.Ring(r.URL.Query().Get("keyspace"))
		reply(w, peers, err)
	})
	mux.HandleFunc("GET /api/v1/tablestats", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		st, err := n.TableStats(q.Get("keyspace"), q.Get("table"))
		reply(w, st, err)
	})
	mux.HandleFunc("GET /api/v1/describering", func(w http.ResponseWriter, r *http.Request) {
		ring, err := n.DescribeRing(r.URL.Query().Get("keyspace"))
		reply(w, ring, err)
	})
	mux.HandleFunc("GET /api/v1/getendpoints", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("key") {
			reply(w, nil, fmt.Errorf("%w: key is required", ErrBadRequest))
			return
		}
		eps, err := n.Endpoints(q.Get("keyspace"), q.Get("table"), q.Get("key"))
		reply(w, eps, err)
	})
	mux.HandleFunc("POST /api/v1/flush", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w, done{}, n.Flush(r.Context(), q.Get("keyspace"), q.Get("table")))
	})
	mux.HandleFunc("POST /api/v1/compact", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w, done{}, n.Compact(r.Context(), q.Get("keyspace"), q.Get("table")))
	})
	mux.HandleFunc("POST /api/v1/drain", func(w http.ResponseWriter, r *http.Request) {
		reply(w, done{}, n.Drain(r.Context()))
	})
	mux.HandleFunc("POST /api/v1/decommission", func(w http.ResponseWriter, r *http.Request) {
		d, ok := n.(Decommissioner)
		if !ok {
			reply(w, nil, fmt.Errorf("%w: this node cannot decommission", ErrBadRequest))
			return
		}
		reply(w, done{}, d.Decommission(r.Context()))
	})
	return mux
}

// done is the answer of a mutating call that succeeded.
type done struct {
	OK bool `json:"ok"`
}

// apiError is the body of an error answer.
type apiError struct {
	Error string `json:"error"`
}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrNotFound):
			code = http.StatusNotFound
		case errors.Is(err, ErrBadRequest):
			code = http.StatusBadRequest
		case errors.Is(err, ErrDrained):
			code = http.StatusConflict
		}
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(apiError{Error: err.Error()})
		return
	}
	if d, ok := v.(done); ok {
		d.OK = true
		v = d
	}
	_ = json.NewEncoder(w).Encode(v)
}
