// Package node assembles one idemkv node: the storage engine (replica), the
// peer transport, gossip membership, the cluster schema and the counter
// coordinator, configured from a cassandra.yaml-like file. It is wiring: the
// behaviour lives in the packages it composes.
//
// # Persisted peers
//
// A node remembers its peers across restarts, as Cassandra's system.peers
// does, in PeersFile (peers.json) in its data directory, so that a node
// restarted while every seed is down still finds its live peers and routes
// to them. At start-up the remembered peers are given to gossip
// (gossip.Config.Known): Down, with their tokens in the ring view, and
// contacted by gossip rounds besides the seeds until each is heard from.
// The file is rewritten atomically (vfs.WriteFileAtomic) when gossip learns
// a peer, or a peer's address, CQL address, data center, rack, tokens or
// generation changes, or a peer leaves (it is then dropped, as is a peer
// whose address or one of whose tokens a newer node of another host id
// announces) — never on heartbeats. It is JSON:
//
//	{
//	  "version": 1,
//	  "peers": [
//	    {"host_id": "<32 lowercase hex>", "addr": "127.0.0.2:7000", "cql_addr": "127.0.0.2:9042",
//	     "dc": "datacenter1", "rack": "rack1", "tokens": [-9042..., 31...], "generation": 1795448697768768712}
//	  ]
//	}
//
// version is 1; peers are sorted by host id, each listed once, with a
// host:port addr, a positive generation (the peer's process start, unix
// nanoseconds), at most 4096 tokens and strings of at most 255 bytes;
// unknown fields and trailing data are errors. A file that cannot be read
// or decoded does not stop the node: it logs a warning, moves the file
// aside to peers.json.bad and starts from its seeds alone (gossip writes a
// fresh file at the next peer change).
package node

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/idemkv/idemkv/coltype/builtin" // the counter designs idemkv ships
	"github.com/idemkv/idemkv/coltype/handoffcol"

	"github.com/idemkv/idemkv/admin"
	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/metrics"
	"github.com/idemkv/idemkv/replica"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/schema"
	"github.com/idemkv/idemkv/transport"
	"github.com/idemkv/idemkv/vfs"
)

// ReleaseVersion is the Cassandra release idemkv presents itself as.
const ReleaseVersion = "3.11.17"

// Node message types, in transport's 48–63 range.
const (
	TypeSchemaPush transport.Type = 48 // a node's schema document, merged by the receiver
	TypeSchemaPull transport.Type = 49 // asks for the receiver's schema document
	TypeStatus     transport.Type = 50 // asks for the receiver's view of the ring (for idemkv ring status)
	// Client requests (see Client): the receiving node coordinates them.
	TypeClientWrite  transport.Type = 51
	TypeClientRead   transport.Type = 52
	TypeClientSchema transport.Type = 53
)

// ListenFunc opens a node's transport endpoint; the default is TCP.
type ListenFunc func(addr transport.Addr, h transport.Handler) (transport.Transport, error)

// Options are what a node takes besides its configuration: test seams.
type Options struct {
	Listen ListenFunc // default: transport.ListenTCP
	Logger *slog.Logger
	// Seed seeds token choice, gossip peer choice, leader choice and, when
	// set, handoff participant ids (with the start time on Clock, so that a
	// restart draws new ones); 0 = from the clock (and crypto/rand ids).
	Seed uint64
	// Clock is the node's clock (cell timestamps, FBF filters, gossip's
	// failure detector and generation, delete timestamps); default
	// time.Now. Tests inject virtual time.
	Clock func() time.Time
	// WithTimeout makes the coordinator's timeout contexts; default
	// context.WithTimeout. Tests pass a stepped network's Timeouts.
	WithTimeout func(context.Context, time.Duration) (context.Context, context.CancelFunc)
	// Stepped starts none of the node's background loops (gossip rounds,
	// hint delivery, hint pulls, the settling of updates in doubt,
	// anti-entropy, load reports), nor the admin endpoint: the test drives them
	// (Gossip().Round, Hints().Deliver, Coordinator().ResolveInDoubt) so
	// that nothing happens between its steps. Timers of requests in flight
	// still run.
	Stepped bool
	// WrapExecutor, when set, wraps the CQL executor: a seam for tests that
	// inject faults between the protocol and the statements.
	WrapExecutor func(cql.Executor) cql.Executor
	// FS is the filesystem of the data directory: the replica's files,
	// the schema, the hints, the tokens and the peers file; nil means
	// vfs.Default.
	FS vfs.FS
}

// Node is a running idemkv node.
type Node struct {
	cfg     Config
	fsys    vfs.FS
	logger  *slog.Logger
	replica *replica.Replica
	stepped bool // Options.Stepped
	// skipJoinable makes a decommission stream no table with a Joinable
	// column (a seam for the tests that show such a decommission is
	// caught).
	skipJoinable bool
	schema       *schema.Schema
	tr           transport.Transport
	gossip       *gossip.Gossiper
	coord        *coordinator.Coordinator
	hints        *coordinator.Hints
	view         *clusterView
	peers        *peerStore
	events       *events
	cql          *cql.Server
	dirLock      *os.File // the data directory's LOCK, held while the node runs; nil off the OS filesystem

	// The admin endpoint and the metrics (admin.go, metrics.go).
	metrics   *metrics.Metrics
	admin     *admin.Server
	adminOnce sync.Once
	drainMu   sync.Mutex
	drained   atomic.Bool
	started   time.Time

	stream streamCounters // stream.go

	ready    atomic.Bool
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// Start opens the node's data, joins the cluster through the seeds and
// serves peers until Stop.
func Start(cfg Config, opts Options) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	var ids io.Reader // nil: the coordinator's default, crypto/rand
	if opts.Seed != 0 {
		// The start time too: a restart with the same seed must not
		// reuse the ids of the previous run.
		ids = newSeededReader(opts.Seed, uint64(opts.Clock().UnixNano()))
	} else {
		opts.Seed = uint64(opts.Clock().UnixNano())
	}
	if opts.Listen == nil {
		opts.Listen = func(a transport.Addr, h transport.Handler) (transport.Transport, error) {
			return transport.ListenTCP(a, h, transport.TCPOptions{Logger: opts.Logger})
		}
	}
	opts.FS = vfs.Or(opts.FS)
	logger := opts.Logger.With("node", cfg.ListenAddress)
	cfg.logIgnored(logger)
	rng := rand.New(rand.NewPCG(opts.Seed, 0x1de4))
	mode, _ := commitlog.ParseSyncMode(cfg.CommitLogSync)
	access, _ := commitlog.ParseAccessMode(cfg.CommitLogDiskAccessMode)
	// One node per data directory: a second one would share the host id
	// and the commit log. Only the operating system's files are locked.
	var dirLock *os.File
	if opts.FS == vfs.Default {
		if dirLock, err = lockDataDir(cfg.DataDirectory); err != nil {
			return nil, err
		}
	}
	src := &lazySource{}
	mtr, err := metrics.New(src, nil)
	if err != nil {
		if dirLock != nil {
			dirLock.Close()
		}
		return nil, fmt.Errorf("node: metrics: %w", err)
	}
	settings := map[string]string{
		handoffcol.NoticeRetentionSetting: ms(cfg.HandoffNoticeMS).String(),
		cellcache.SizeSetting:             strconv.Itoa(cfg.CounterCacheSizeMB), // 0: Cassandra's default, -1: none
	}
	rep, err := replica.Open(replica.Config{
		Dir: cfg.DataDirectory, FS: syncTimedFS{FS: opts.FS, dir: cmp.Or(cfg.CommitLogDirectory, filepath.Join(cfg.DataDirectory, "commitlog")), m: mtr},
		CommitLog: commitlog.Options{
			Dir:  cfg.CommitLogDirectory, // "": inside the data directory
			Sync: mode, Access: access, SyncPeriod: ms(cfg.CommitLogSyncPeriodMS), GroupWindow: ms(cfg.CommitLogGroupWindowMS),
			SegmentSize: int64(cfg.CommitLogSegmentSizeMB) << 20,
		},
		MemtableFlushBytes:  int64(cfg.MemtableFlushMB) << 20,
		MemtableSpaceBytes:  int64(cfg.MemtableHeapSpaceMB) << 20, // 0: Cassandra's default, -1: none
		CommitLogSpaceBytes: commitLogSpace(cfg, opts.FS),
		CounterWriteTimeout: ms(cfg.CounterWriteTimeoutMS),
		Settings:            settings,
		Now:                 opts.Clock,
		IDs:                 ids,
		Logger:              logger,
	})
	if err != nil {
		if dirLock != nil {
			dirLock.Close()
		}
		return nil, err
	}
	n := &Node{cfg: cfg, fsys: opts.FS, logger: logger, replica: rep, events: &events{}, stepped: opts.Stepped, dirLock: dirLock,
		metrics: mtr, started: time.Now()}
	src.n = n
	fail := func(err error) (*Node, error) {
		n.closeAll(true) // a replica with updates in doubt is not marked clean (see replica.Close)
		return nil, err
	}
	if n.schema, err = schema.OpenFS(opts.FS, cfg.DataDirectory, rep); err != nil {
		return fail(err)
	}
	if n.fileExists(decommissionedFile) {
		return fail(fmt.Errorf("node: this node was decommissioned and will not rejoin the ring (%s in %s); start it from an empty data directory to add it as a new node",
			decommissionedFile, cfg.DataDirectory))
	}
	tokens, fresh, err := loadTokens(opts.FS, cfg.DataDirectory, cfg.NumTokens, rng, len(rep.Tables()) > 0)
	if err != nil {
		return fail(err)
	}
	if n.hints, err = coordinator.OpenHints(opts.FS, cfg.hintsDir(), logger); err != nil {
		return fail(err)
	}
	if cfg.MaxHintWindowMS > 0 {
		// n.view is made below, before anything stores a hint.
		n.hints.SetWindow(ms(cfg.MaxHintWindowMS), func(target string) time.Duration { return n.view.downtime(target, opts.Clock()) })
	}
	// A hint older than its table's gc_grace_seconds is dropped, not
	// delivered (the tombstone it predates may be purged).
	n.hints.SetExpiry(n.replica.GCGrace, opts.Clock)
	// An update this node led whose replication a hint still waits to
	// complete may have been retried and counted elsewhere: in doubt, as
	// after an unclean stop.
	for _, m := range n.hints.Queued() {
		if m.HasOp && !m.Cell.Tombstone && rep.MarkInDoubt(m.Table, m.Key, m.Cell.Column, m.OpID) {
			logger.Debug("an update this node led is in doubt: its replication waits in a hint", "table", m.Table,
				"column", m.Cell.Column, "op", fmt.Sprintf("%x", m.OpID))
		}
	}
	// A failed Listen may return a typed nil: n.tr stays an untyped nil
	// then, which closeAll skips.
	tr, err := opts.Listen(transport.Addr(cfg.PeerAddr()), n.handle)
	if err != nil {
		return fail(fmt.Errorf("node: listen on %s: %w", cfg.PeerAddr(), err))
	}
	n.tr = meteredTransport{Transport: tr, m: mtr}
	hostID := rep.HostID().String()
	var seeds []transport.Addr
	for _, s := range cfg.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(s, strconv.Itoa(cfg.StoragePort))
		}
		seeds = append(seeds, transport.Addr(s))
	}
	// A node that starts for the first time (or did not finish its
	// bootstrap) in an existing ring streams its ranges before it serves
	// them, as Cassandra's auto_bootstrap; seeds do not (stream.go).
	bootstrap := (cfg.AutoBootstrap == nil || *cfg.AutoBootstrap) && !opts.Stepped && !n.isSeed(seeds) &&
		(fresh || n.fileExists(bootstrapFile))
	if bootstrap && !n.fileExists(bootstrapFile) {
		// A ring whose schema holds no table has nothing to stream: the
		// node joins it at once (so do the nodes of a new cluster started
		// together).
		bootstrap = n.probeSeeds(seeds)
	}
	status := gossip.StatusNormal
	if bootstrap {
		status = gossip.StatusJoining
		if err := vfs.WriteFileAtomic(opts.FS, cfg.DataDirectory, bootstrapFile, []byte("bootstrapping\n")); err != nil {
			return fail(fmt.Errorf("node: bootstrap: %w", err))
		}
	}
	n.peers = loadPeers(opts.FS, cfg.DataDirectory, hostID, logger)
	n.gossip, err = gossip.New(gossip.Config{
		Known: n.peers.known(),
		Self: gossip.NodeState{
			HostID: hostID, Addr: transport.Addr(cfg.PeerAddr()), CQLAddr: cfg.CQLAddr(),
			DC: cfg.DC, Rack: cfg.Rack, Tokens: tokens, Status: status,
			SchemaVersion: n.schema.Version(), ReleaseVersion: ReleaseVersion,
			Generation: opts.Clock().UnixNano(),
		},
		Seeds: seeds, Transport: n.tr,
		Interval: ms(cfg.GossipIntervalMS), PhiConvictThreshold: cfg.PhiConvictThreshold,
		Rand: rand.New(rand.NewPCG(opts.Seed, 0x90551)), Now: opts.Clock, Logger: logger,
	})
	if err != nil {
		return fail(err)
	}
	n.view = newClusterView(n.gossip, ring.Endpoint{ID: hostID, DC: cfg.DC, Rack: cfg.Rack}, logger)
	rule := coltype.LeaderRandom
	if cfg.CounterLeader != "" {
		rule, _ = coltype.ParseLeaderRule(cfg.CounterLeader)
	}
	n.coord, err = coordinator.New(coordinator.Config{
		Cluster: n.view, Tables: n.schema, Store: rep, Transport: n.tr, Hints: n.hints,
		LeaderRule: rule, LeaderRuleSet: cfg.CounterLeader != "", CounterWriteTimeout: ms(cfg.CounterWriteTimeoutMS), ReadTimeout: ms(cfg.ReadTimeoutMS),
		Rand: rand.New(rand.NewPCG(opts.Seed, 0x1ead)), Now: opts.Clock, IDs: ids, WithTimeout: opts.WithTimeout, Logger: logger,
		RefuseWrites: refuseWrites(n.schema, cfg.TestFailWritesKeyspace),
	})
	if err != nil {
		return fail(err)
	}
	noteMove := n.coord.NoteRangeMovement
	n.view.onMove.Store(&noteMove)
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	// The peers it remembers may hold hints for it: it pulls them before it
	// leads an update with an op id (see coordinator.PeerUp).
	if !opts.Stepped {
		for _, p := range n.gossip.Nodes() {
			n.coord.PeerUp(ctx, p.HostID)
		}
	}
	n.schema.OnChange(func(version string) {
		n.gossip.UpdateSelf(func(s *gossip.NodeState) { s.SchemaVersion = version })
		n.pushSchema(ctx)
		n.events.schemaEvents(n.schema.Visible())
	})
	n.gossip.Subscribe(n.peers.observe)
	n.gossip.Subscribe(func(ev gossip.Event) {
		n.onGossip(ctx, ev)
		if ev.Node.HostID != n.HostID() {
			n.events.gossipEvent(ev, cfg.NativeTransportPort)
		}
	})
	if *cfg.StartNativeTransport {
		if err := n.startCQL(opts.WrapExecutor); err != nil {
			cancel()
			return fail(err)
		}
	}
	n.startAdmin()
	if len(rep.InDoubt()) > 0 {
		// Its hints of updates in doubt wait until those are settled (the
		// resolver below, or the test of a stepped node, resumes them).
		n.hints.Pause()
	}
	n.ready.Store(true)
	if opts.Stepped {
		logger.Info("node started (stepped)", "host_id", hostID, "peer", cfg.PeerAddr())
		return n, nil
	}
	n.gossip.Start()
	n.bg.Add(5)
	settled := make(chan struct{})
	go func() {
		defer n.bg.Done()
		n.coord.RunInDoubtResolver(ctx, ms(cfg.GossipIntervalMS))
		close(settled)
	}()
	go func() {
		defer n.bg.Done()
		// Updates this node led before an unclean stop are settled with the
		// other replicas first, and its hints wait for that (up to a bound:
		// a replica may be down for long), since a hint of such an update
		// could reach a replica that counted a retry of it and blur the
		// evidence (see coltype.Decide).
		select {
		case <-settled:
		case <-time.After(max(10*time.Second, 2*ms(cfg.CounterWriteTimeoutMS))):
			logger.Warn("hint delivery starts with updates still in doubt: a replica of their cells is unreachable")
		case <-ctx.Done():
		}
		n.hints.Resume()
	}()
	go func() {
		defer n.bg.Done()
		n.hints.Run(ctx, ms(cfg.HintDeliveryMS), n.view, n.tr)
	}()
	go func() {
		defer n.bg.Done()
		n.coord.RunAntiEntropy(ctx, ms(cfg.HandoffSyncMS))
	}()
	go func() {
		defer n.bg.Done()
		n.reportLoad(ctx)
	}()
	logger.Info("node started", "host_id", hostID, "peer", cfg.PeerAddr(), "cql", cfg.CQLAddr(), "dc", cfg.DC, "rack", cfg.Rack, "tokens", len(tokens), "status", status,
		"commitlog", cfg.CommitLogSync+", "+rep.CommitLog().Access().String())
	if bootstrap {
		// As Cassandra's, Start returns once the node is normal: a
		// failed bootstrap stops it (the next start streams again).
		if err := n.bootstrap(ctx); err != nil {
			_ = n.Stop()
			return nil, fmt.Errorf("node: bootstrap: %w", err)
		}
	}
	return n, nil
}

// seededReader is an io.Reader of pseudo-random bytes from a seed, safe for
// concurrent use: handoff participant ids that replay with the seed.
type seededReader struct {
	mu sync.Mutex
	r  *rand.ChaCha8
}

func newSeededReader(seed, start uint64) *seededReader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[0:], seed)
	binary.LittleEndian.PutUint64(s[8:], start)
	binary.LittleEndian.PutUint64(s[16:], seed^0x9e3779b97f4a7c15)
	binary.LittleEndian.PutUint64(s[24:], start^0xbf58476d1ce4e5b9)
	return &seededReader{r: rand.NewChaCha8(s)}
}

func (r *seededReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Read(p)
}

// Coordinator is the node's counter coordinator.
func (n *Node) Coordinator() *coordinator.Coordinator { return n.coord }

// Schema is the node's view of the cluster schema.
func (n *Node) Schema() *schema.Schema { return n.schema }

// Replica is the node's storage engine.
func (n *Node) Replica() *replica.Replica { return n.replica }

// Gossip is the node's membership.
func (n *Node) Gossip() *gossip.Gossiper { return n.gossip }

// Hints is the node's hint store.
func (n *Node) Hints() *coordinator.Hints { return n.hints }

// HostID is the node's host id (hex).
func (n *Node) HostID() string { return n.replica.HostID().String() }

// Config is the node's configuration with defaults filled.
func (n *Node) Config() Config { return n.cfg }

// Stop announces the shutdown to peers and closes everything. Unflushed data
// is in the commit log and replayed by the next Start.
func (n *Node) Stop() error {
	err := n.stop()
	n.closeAdmin()
	return err
}

// stop is Stop but for the admin endpoint (Drain leaves it up).
func (n *Node) stop() error {
	n.stopOnce.Do(func() {
		n.ready.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if n.gossip != nil {
			n.gossip.Stop(ctx)
		}
		n.stopErr = n.closeAll(true)
	})
	return n.stopErr
}

// Crash stops the node as a killed process would leave it, for tests and
// the bench's kill faults: no shutdown is announced (the peers convict it
// by its silence), nothing is flushed, and the data directory is left
// unclean, so the next start renews the counter id and settles the FBF
// updates it led before they are served again. What it wrote stays as the
// operating system has it, as after SIGKILL.
func (n *Node) Crash() error {
	n.stopOnce.Do(func() {
		n.ready.Store(false)
		// As a killed process: its sockets close first, so that peers see
		// refused connections at once, not a node that answers "stopping".
		if n.tr != nil {
			_ = n.tr.Close()
		}
		if n.gossip != nil {
			n.gossip.Abort()
		}
		n.stopErr = n.closeAll(false)
	})
	n.closeAdmin()
	return n.stopErr
}

func (n *Node) closeAll(clean bool) error {
	if n.cancel != nil {
		n.cancel()
	}
	n.bg.Wait()
	var errs []error
	if n.cql != nil {
		errs = append(errs, n.cql.Close())
	}
	if n.tr != nil {
		errs = append(errs, n.tr.Close())
	}
	if n.coord != nil {
		// Updates this node leads finish first: replication the stop cut
		// short goes to a hint before the hints close.
		n.coord.Close()
	}
	if n.hints != nil {
		errs = append(errs, n.hints.Close())
	}
	if clean {
		errs = append(errs, n.replica.Close())
	} else {
		errs = append(errs, n.replica.Crash())
	}
	if n.dirLock != nil {
		errs = append(errs, n.dirLock.Close()) // as a killed process's would, after Crash too
		n.dirLock = nil
	}
	if !n.drained.Load() {
		n.closeAdmin() // a drained node's stays up until Stop
	}
	return errors.Join(errs...)
}

// handle dispatches a peer's message to the part that owns its type.
func (n *Node) handle(ctx context.Context, from transport.Addr, m transport.Message) (resp transport.Message, err error) {
	defer func() {
		// A bug in one request's handling must not take the node down:
		// the peer gets an error and the stack goes to the log.
		if p := recover(); p != nil {
			n.logger.Error("panic serving a peer request", "type", m.Type, "from", from, "panic", p, "stack", string(debug.Stack()))
			resp, err = transport.Message{}, fmt.Errorf("node: internal error serving message type %d", m.Type)
		}
	}()
	if !n.ready.Load() {
		return transport.Message{}, errors.New("node is starting or stopping")
	}
	switch {
	case gossip.IsGossipType(m.Type):
		return n.gossip.Handle(ctx, from, m)
	case coordinator.IsCoordinatorType(m.Type):
		return n.coord.Handle(ctx, from, m)
	}
	switch m.Type {
	case TypeSchemaPush:
		var d schema.Doc
		if err := json.Unmarshal(m.Body, &d); err != nil {
			return transport.Message{}, fmt.Errorf("schema push: %w", err)
		}
		if _, err := n.schema.Merge(d); err != nil {
			return transport.Message{}, err
		}
		return transport.Message{Type: TypeSchemaPush}, nil
	case TypeSchemaPull:
		b, err := json.Marshal(n.schema.Doc())
		return transport.Message{Type: TypeSchemaPull, Body: b}, err
	case TypeStatus:
		b, err := json.Marshal(n.Status())
		return transport.Message{Type: TypeStatus, Body: b}, err
	case TypeStreamPull, TypeStreamPullFor, TypeStreamPrepare, TypeStreamPush:
		return n.handleStream(m)
	case TypeClientWrite:
		cl, u, err := coordinator.DecodeWriteRequest(m.Body)
		if err != nil {
			return transport.Message{}, err
		}
		err = n.coord.CounterWrite(ctx, u, cl)
		return transport.Message{Type: TypeClientWrite, Body: coordinator.EncodeResult(err)}, nil
	case TypeClientRead:
		cl, table, key, err := coordinator.DecodeReadRequest(m.Body)
		if err != nil {
			return transport.Message{}, err
		}
		r, found, err := n.coord.Read(ctx, table, key, cl)
		return transport.Message{Type: TypeClientRead, Body: coordinator.EncodeReadResult(r, found, err)}, nil
	case TypeClientSchema:
		var req schemaRequest
		if err := json.Unmarshal(m.Body, &req); err != nil {
			return transport.Message{}, fmt.Errorf("schema request: %w", err)
		}
		return transport.Message{Type: TypeClientSchema}, n.applySchemaRequest(req)
	}
	return transport.Message{}, fmt.Errorf("node: unknown message type %d", m.Type)
}

// onGossip reacts to membership events: rebuild the token map, deliver
// hints to a node that came back, and fetch a newer schema.
func (n *Node) onGossip(ctx context.Context, ev gossip.Event) {
	n.view.rebuild()
	if ev.Node.HostID == n.HostID() {
		return
	}
	switch ev.Kind {
	case gossip.EventUp, gossip.EventDown, gossip.EventRestarted, gossip.EventLeft:
		// Not EventJoined: a node first heard of (at start-up, a new
		// node) has led nothing this node's filters could lack.
		n.coord.NoteLivenessChange()
	}
	if ev.Kind == gossip.EventUp || ev.Kind == gossip.EventRestarted || ev.Kind == gossip.EventJoined {
		if !n.stepped {
			n.coord.PeerUp(ctx, ev.Node.HostID)
		}
		go func() {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = n.hints.Deliver(dctx, n.view, n.tr)
		}()
	}
	if ev.Node.Up && ev.Node.SchemaVersion != "" && ev.Node.SchemaVersion != n.schema.Version() {
		go n.pullSchema(ctx, ev.Node.Addr)
	}
}

func (n *Node) pullSchema(ctx context.Context, from transport.Addr) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := n.tr.Request(ctx, from, transport.Message{Type: TypeSchemaPull})
	if err != nil {
		n.logger.Debug("schema pull failed", "from", from, "err", err)
		return
	}
	var d schema.Doc
	if err := json.Unmarshal(resp.Body, &d); err != nil {
		n.logger.Warn("schema pull: bad document", "from", from, "err", err)
		return
	}
	if _, err := n.schema.Merge(d); err != nil {
		n.logger.Error("schema merge failed", "err", err)
	}
}

// pushSchema sends the schema to every live peer.
func (n *Node) pushSchema(ctx context.Context) {
	b, err := json.Marshal(n.schema.Doc())
	if err != nil {
		return
	}
	for _, p := range n.gossip.Nodes() {
		if p.HostID == n.HostID() || !p.Up {
			continue
		}
		go func(a transport.Addr) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, err := n.tr.Request(ctx, a, transport.Message{Type: TypeSchemaPush, Body: b}); err != nil {
				n.logger.Debug("schema push failed", "to", a, "err", err)
			}
		}(p.Addr)
	}
}

// WaitSchemaAgreement waits until every live node gossips this node's schema
// version.
func (n *Node) WaitSchemaAgreement(ctx context.Context) error {
	for {
		v := n.schema.Version()
		agreed := true
		for _, p := range n.gossip.Nodes() {
			if p.Up && p.SchemaVersion != v {
				agreed = false
			}
		}
		if agreed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: no schema agreement: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reportLoad gossips the node's load every 10 s.
func (n *Node) reportLoad(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		size := n.load()
		n.gossip.UpdateSelf(func(s *gossip.NodeState) { s.Load = size })
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// load is the bytes of the node's tables on disk (SSTables and their
// manifests, below data/), as Cassandra's Load counts live SSTables: not the
// commit log, whose active segment a mapped log preallocates to its full
// size, nor hints or the node's small files.
func (n *Node) load() int64 { return dirSize(n.fsys, filepath.Join(n.cfg.DataDirectory, "data")) }

// dirSize is the bytes of the files below dir.
func dirSize(fsys vfs.FS, dir string) int64 {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return 0
	}
	var size int64
	for _, e := range ents {
		if e.IsDir() {
			size += dirSize(fsys, filepath.Join(dir, e.Name()))
		} else if fi, err := e.Info(); err == nil {
			size += fi.Size()
		}
	}
	return size
}

// PeerStatus is one node as another sees it.
type PeerStatus struct {
	HostID        string  `json:"host_id"`
	Addr          string  `json:"addr"`
	CQLAddr       string  `json:"cql_addr"`
	DC            string  `json:"dc"`
	Rack          string  `json:"rack"`
	Up            bool    `json:"up"`
	Status        string  `json:"status"`
	Tokens        []int64 `json:"tokens"`
	Load          int64   `json:"load"`
	Owns          float64 `json:"owns"`
	SchemaVersion string  `json:"schema_version"`
}

// Status returns this node's view of the ring.
func (n *Node) Status() []PeerStatus {
	own := map[string]float64{}
	if m := n.view.Metadata(); m != nil {
		own = m.Ownership()
	}
	var out []PeerStatus
	for _, p := range n.gossip.Nodes() {
		if p.Status == gossip.StatusLeft {
			continue // decommissioned: out of the ring, as Cassandra's nodetool status
		}
		out = append(out, PeerStatus{
			HostID: p.HostID, Addr: string(p.Addr), CQLAddr: p.CQLAddr, DC: p.DC, Rack: p.Rack,
			Up: p.Up, Status: string(p.Status), Tokens: p.Tokens, Load: p.Load, Owns: own[p.HostID],
			SchemaVersion: p.SchemaVersion,
		})
	}
	return out
}

// loadTokens returns the node's tokens, choosing and saving them on first
// start (Cassandra keeps them in system.local). The file is written
// atomically and durably: tokens lost at a crash would move the node's
// ranges away from its data.
// loadTokens reads the node's tokens, or draws and saves new ones on its
// first start. A node that holds tables (hasData) and has lost its tokens
// does not draw new ones: the ranges it held would move away from its
// data; it refuses to start.
// fresh reports that the tokens were drawn now.
func loadTokens(fsys vfs.FS, dir string, n int, rng *rand.Rand, hasData bool) (tokens []int64, fresh bool, err error) {
	p := filepath.Join(dir, "tokens.json")
	b, err := fsys.ReadFile(p)
	if err == nil {
		var t []int64
		if err := json.Unmarshal(b, &t); err != nil || len(t) == 0 {
			return nil, false, fmt.Errorf("node: %s is corrupt", p)
		}
		return t, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("node: read tokens: %w", err)
	}
	if hasData {
		return nil, false, fmt.Errorf("node: %s is missing but the node holds tables: new tokens would move its ranges away from its data; restore the file (or start from an empty data directory)", p)
	}
	t := ring.RandomTokens(rng, n)
	b, _ = json.Marshal(t)
	if err := vfs.WriteFileAtomic(fsys, dir, "tokens.json", b); err != nil {
		return nil, false, fmt.Errorf("node: save tokens: %w", err)
	}
	return t, true, nil
}

// clusterView is the coordinator's view of the ring, rebuilt from gossip.
type clusterView struct {
	g      *gossip.Gossiper
	self   ring.Endpoint
	logger *slog.Logger
	mu     sync.Mutex
	rings  atomic.Pointer[rings]
	// heldDown (tests) holds nodes down whatever gossip says: the stepped
	// scenario tests convict nodes without running the failure detector.
	heldDown atomic.Pointer[map[string]bool]
	// onMove, when set, is called (under mu) with the token map before a
	// range movement when rebuild sees one complete.
	onMove atomic.Pointer[func(before *ring.Metadata)]
}

func newClusterView(g *gossip.Gossiper, self ring.Endpoint, logger *slog.Logger) *clusterView {
	v := &clusterView{g: g, self: self, logger: logger}
	v.rebuild()
	return v
}

func (v *clusterView) rebuild() {
	v.mu.Lock()
	defer v.mu.Unlock()
	// A leaving node replicates its ranges until it has left; a joining
	// one is only a pending replica (Pending) until it is normal.
	tokens, future := map[ring.Endpoint][]int64{}, map[ring.Endpoint][]int64{}
	moving := false
	for _, p := range v.g.Nodes() {
		if len(p.Tokens) == 0 {
			continue
		}
		e := ring.Endpoint{ID: p.HostID, DC: p.DC, Rack: p.Rack}
		switch p.Status {
		case gossip.StatusNormal, gossip.StatusShutdown:
			tokens[e], future[e] = p.Tokens, p.Tokens
		case gossip.StatusLeaving:
			tokens[e], moving = p.Tokens, true
		case gossip.StatusJoining:
			// One that stopped (a failed bootstrap announces nothing)
			// is no pending replica while it is down.
			if p.Up {
				future[e], moving = p.Tokens, true
			}
		}
	}
	m, err := ring.NewMetadata(tokens)
	if err != nil {
		v.logger.Error("token map not rebuilt", "err", err)
		return
	}
	var f *ring.Metadata
	if moving {
		if f, err = ring.NewMetadata(future); err != nil {
			v.logger.Error("future token map not built", "err", err)
			f = nil
		}
	}
	prev := v.rings.Swap(&rings{current: m, future: f})
	// A movement has completed when a node the previous snapshot had
	// joining is now in the current map, or one it had leaving is out:
	// the coordinator then asks the replicas of before it about the ops
	// it leads on moved keys for a while. A node merely first heard of
	// (at start-up) moves no range.
	if prev != nil && prev.future != nil && movementDone(prev, m) {
		if fn := v.onMove.Load(); fn != nil {
			(*fn)(prev.current)
		}
	}
}

// movementDone reports whether a movement under way in prev has completed
// in the current map now: a joining node is in it, or a leaving one out.
func movementDone(prev *rings, now *ring.Metadata) bool {
	was, will, is := prev.current.Endpoints(), prev.future.Endpoints(), now.Endpoints()
	for _, e := range is {
		if !hasEndpoint(was, e.ID) && hasEndpoint(will, e.ID) {
			return true // joined
		}
	}
	for _, e := range was {
		if !hasEndpoint(is, e.ID) && !hasEndpoint(will, e.ID) {
			return true // left
		}
	}
	return false
}

// rings is one snapshot of the ring: the current token map and, while
// nodes join or leave, the map once they are done (joining nodes in,
// leaving ones out); future is nil when no movement is under way.
type rings struct{ current, future *ring.Metadata }

// Rings implements the coordinator's pendingCluster: a leader sends its
// writes to the future map's replicas too.
func (v *clusterView) Rings() (current, future *ring.Metadata) {
	r := v.rings.Load()
	if r == nil {
		return nil, nil
	}
	return r.current, r.future
}

func (v *clusterView) Self() ring.Endpoint { return v.self }
func (v *clusterView) Metadata() *ring.Metadata {
	m, _ := v.Rings()
	return m
}
func (v *clusterView) IsUp(hostID string) bool {
	if d := v.heldDown.Load(); d != nil && (*d)[hostID] {
		return false
	}
	return v.g.IsUp(hostID)
}

// downtime is how long a node has been down at now: since gossip last
// heard a fresh state of it (the failure detector then convicts it), 0 when
// it is up or unknown. Hints use it for their window.
func (v *clusterView) downtime(hostID string, now time.Time) time.Duration {
	if v.IsUp(hostID) {
		return 0
	}
	p, ok := v.g.Node(hostID)
	if !ok || p.LastSeen.IsZero() {
		return 0
	}
	return max(0, now.Sub(p.LastSeen))
}

// holdDown (tests) makes the view hold a node down (up false: releases it).
func (v *clusterView) holdDown(hostID string, down bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	next := map[string]bool{}
	if d := v.heldDown.Load(); d != nil {
		maps.Copy(next, *d)
	}
	if down {
		next[hostID] = true
	} else {
		delete(next, hostID)
	}
	v.heldDown.Store(&next)
}
func (v *clusterView) Addr(hostID string) (transport.Addr, bool) {
	return v.g.Addr(hostID)
}

// ClusterMetadata is the node's current token map.
func (n *Node) ClusterMetadata() *ring.Metadata { return n.view.Metadata() }

// commitLogSpace is the replica's bound on the commit log's segments:
// commitlog_total_space_in_mb, or when 0 Cassandra's default computed on
// the commit log's volume (the replica's own default, 8 GiB, on a
// filesystem other than the machine's); negative for none.
func commitLogSpace(cfg Config, fsys vfs.FS) int64 {
	switch {
	case cfg.CommitLogTotalSpaceMB < 0:
		return -1
	case cfg.CommitLogTotalSpaceMB > 0:
		return int64(cfg.CommitLogTotalSpaceMB) << 20
	case fsys == vfs.Default:
		return replica.DefaultCommitLogSpace(cmp.Or(cfg.CommitLogDirectory, filepath.Join(cfg.DataDirectory, "commitlog")))
	}
	return 0
}
