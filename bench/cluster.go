package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkv/idemkv/coltype/handoffcol"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/node"
	"github.com/idemkv/idemkv/vfs"
)

// ClusterConfig configures an embedded ring for the load generator: node i
// (1-based) listens on 127.0.0.i, peers on Port and CQL on Port+1, every
// node's CQL executor wrapped by the cluster's fault Injector.
type ClusterConfig struct {
	Nodes int
	Dir   string // data directories; a temporary one, removed by Stop, when empty
	Port  int    // peer port; 0 picks a free one (CQL is Port+1)
	Seed  uint64 // seeds tokens, leader choice, the free port and the faults
	// CounterWriteTimeout is the nodes' counter write timeout (default
	// 1 s: below the load generator's default client timeout, as in
	// Cassandra, so a slow write surfaces as a write timeout).
	CounterWriteTimeout time.Duration
	Sync                string       // commit log sync mode (default periodic)
	Access              string       // commit log disk access mode (default auto)
	Leader              string       // vanilla counter leader rule: random (default) or first
	Logger              *slog.Logger // default: discard
	Log                 *FaultLog    // where faults are logged; default a new log
	// FS, when set, gives node i (1-based) its filesystem (node.Options.FS),
	// e.g. one that counts the commit log's fsyncs; nil: the OS's.
	FS func(i int) vfs.FS
}

// Cluster is an embedded ring whose nodes can be stopped, restarted and
// paused, with a fault Injector in front of every node's statements.
type Cluster struct {
	cfg      ClusterConfig
	tempDir  bool
	injector *Injector
	rng      *rand.Rand

	mu    sync.Mutex
	nodes []*node.Node // nil while stopped
	confs []node.Config
	opts  []node.Options
	// dismissedGone is what stopped node objects had counted; syncGone
	// their handoff anti-entropy counts.
	dismissedGone uint64
	// resetDismissedGone is the part of dismissedGone that reset_counter
	// columns dismissed.
	resetDismissedGone uint64
	syncGone           [2]uint64
}

// StartCluster starts the ring and waits until every node sees every other
// up. The caller calls Stop.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes < 1 || cfg.Nodes > 254 {
		return nil, fmt.Errorf("bench: %d nodes: want 1 to 254", cfg.Nodes)
	}
	if cfg.CounterWriteTimeout <= 0 {
		cfg.CounterWriteTimeout = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Log == nil {
		cfg.Log = NewFaultLog()
	}
	c := &Cluster{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, saltNode))}
	c.injector = NewInjector(cfg.Seed, cfg.Log)
	if c.cfg.Dir == "" {
		d, err := os.MkdirTemp("", "idemkv-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		c.cfg.Dir, c.tempDir = d, true
	}
	if c.cfg.Port == 0 {
		p, err := FreePort(cfg.Nodes, rand.New(rand.NewPCG(cfg.Seed, 7)))
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.cfg.Port = p
	}
	for i := 1; i <= cfg.Nodes; i++ {
		c.confs = append(c.confs, node.Config{
			DataDirectory: filepath.Join(c.cfg.Dir, fmt.Sprintf("node%d", i)),
			ListenAddress: fmt.Sprintf("127.0.0.%d", i),
			StoragePort:   c.cfg.Port, NativeTransportPort: c.cfg.Port + 1,
			Seeds:         []string{fmt.Sprintf("127.0.0.1:%d", c.cfg.Port)},
			NumTokens:     16,
			CommitLogSync: cfg.Sync, CommitLogDiskAccessMode: cfg.Access, CounterLeader: cfg.Leader,
			CounterWriteTimeoutMS: int(cfg.CounterWriteTimeout / time.Millisecond),
			GossipIntervalMS:      200, PhiConvictThreshold: 12, HintDeliveryMS: 500,
		})
		opts := node.Options{Logger: cfg.Logger, Seed: cfg.Seed*1000 + uint64(i), WrapExecutor: c.injector.Wrap(i)}
		if cfg.FS != nil {
			opts.FS = cfg.FS(i)
		}
		c.opts = append(c.opts, opts)
		n, err := node.Start(c.confs[i-1], c.opts[i-1])
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("bench: start node %d: %w", i, err)
		}
		c.nodes = append(c.nodes, n)
	}
	if err := c.WaitUp(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Hosts returns the nodes' CQL addresses (host:port).
func (c *Cluster) Hosts() []string {
	var out []string
	for _, conf := range c.confs {
		out = append(out, conf.CQLAddr())
	}
	return out
}

// CQLPort is the nodes' CQL port.
func (c *Cluster) CQLPort() int { return c.cfg.Port + 1 }

// Injector is the fault injector in front of every node's statements.
func (c *Cluster) Injector() *Injector { return c.injector }

// Log is the cluster's fault log.
func (c *Cluster) Log() *FaultLog { return c.cfg.Log }

// Size is the number of nodes, running or not.
func (c *Cluster) Size() int { return len(c.confs) }

// Node returns node i (1-based), nil while it is stopped.
func (c *Cluster) Node(i int) *node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i-1]
}

// Dismissed sums the coordinators' Dismissed counts (updates recognised as
// retries and acknowledged without applying), including those of node
// incarnations since stopped.
func (c *Cluster) Dismissed() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.dismissedGone
	for _, nd := range c.nodes {
		if nd != nil {
			n += nd.Coordinator().Stats().Dismissed
		}
	}
	return n
}

// ResetDismissed is the part of Dismissed that reset_counter columns
// (map form included) recognised as retries, stopped incarnations included.
func (c *Cluster) ResetDismissed() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.resetDismissedGone
	for _, nd := range c.nodes {
		if nd != nil {
			n += resetcol.ReplicaStats(nd.Replica()).Dismissed
		}
	}
	return n
}

// ClusterHandoffStats are an embedded ring's handoff counter counts.
type ClusterHandoffStats struct {
	SyncMessages, SyncBytes uint64 // tier-0 anti-entropy, stopped incarnations included
	Slots                   int    // slots the running replicas hold now
	Notices                 int    // retirement notices they hold now
}

// HandoffStats sums the nodes' handoff counts.
func (c *Cluster) HandoffStats() ClusterHandoffStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := ClusterHandoffStats{SyncMessages: c.syncGone[0], SyncBytes: c.syncGone[1]}
	for _, nd := range c.nodes {
		if nd != nil {
			msgs, bytes := handoffSync(nd)
			out.SyncMessages += msgs
			out.SyncBytes += bytes
			hs := handoffcol.ReplicaStats(nd.Replica())
			out.Slots += hs.Slots
			out.Notices += hs.Notices
		}
	}
	return out
}

// LocalValues reads a counter column of keys of table ks.table on every
// running node's own replica (no coordinator): out[i][key], node i 0-based,
// nil for a stopped node.
func (c *Cluster) LocalValues(ks, table, column string, keys []string) ([]map[string]int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]map[string]int64, len(c.nodes))
	for i, nd := range c.nodes {
		if nd == nil {
			continue
		}
		def, ok := nd.Schema().Table(ks, table)
		if !ok {
			return nil, fmt.Errorf("bench: node %d has no table %s.%s", i+1, ks, table)
		}
		out[i] = map[string]int64{}
		for _, k := range keys {
			v, _, err := nd.Replica().Value(def.ID, []byte(k), column)
			if err != nil {
				return nil, err
			}
			out[i][k] = v
		}
	}
	return out, nil
}

// Kill crashes node i (1-based) as SIGKILL would (node.Crash): no
// shutdown announced, the stop left unclean, so its restart renews its
// counter id and settles the FBF updates it led before serving them.
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	n := c.nodes[i-1]
	c.nodes[i-1] = nil
	if n != nil {
		st := n.Coordinator().Stats()
		c.dismissedGone += st.Dismissed
		c.resetDismissedGone += resetcol.ReplicaStats(n.Replica()).Dismissed
		msgs, bytes := handoffSync(n)
		c.syncGone[0] += msgs
		c.syncGone[1] += bytes
	}
	c.mu.Unlock()
	if n == nil {
		return nil
	}
	c.cfg.Log.Add(FaultEvent{Kind: FaultKill, Node: i})
	if err := n.Crash(); err != nil {
		return fmt.Errorf("bench: kill node %d: %w", i, err)
	}
	return nil
}

// Restart starts a stopped node i again on its data directory (the commit
// log replays; FBF op ids come back from it).
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i-1] != nil {
		return nil
	}
	var n *node.Node
	var err error
	for try := 0; try < 20; try++ { // the old listeners may take a moment to go
		if n, err = node.Start(c.confs[i-1], c.opts[i-1]); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("bench: restart node %d: %w", i, err)
	}
	c.nodes[i-1] = n
	c.cfg.Log.Add(FaultEvent{Kind: FaultRestart, Node: i})
	return nil
}

// Pause stalls node i's CQL executor for d: every statement it receives
// waits (its peers still talk to it).
func (c *Cluster) Pause(i int, d time.Duration) {
	c.cfg.Log.Add(FaultEvent{Kind: FaultPause, Node: i, Detail: d.String()})
	c.injector.Pause(i, time.Now().Add(d))
}

// WaitUp waits until every node runs and sees every other up.
func (c *Cluster) WaitUp(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		nodes := append([]*node.Node(nil), c.nodes...)
		c.mu.Unlock()
		ok := true
		for _, n := range nodes {
			if n == nil {
				return errors.New("bench: a node is stopped")
			}
			up := 0
			for _, p := range n.Gossip().Nodes() {
				if p.Up {
					up++
				}
			}
			if up != len(nodes) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("bench: the embedded ring did not come up within 30 s")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: waiting for the ring: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// randomNode returns a seeded random node number.
func (c *Cluster) randomNode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return 1 + c.rng.IntN(len(c.confs))
}

// Stop stops every node and removes a temporary data directory.
func (c *Cluster) Stop() {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = make([]*node.Node, len(nodes))
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n != nil {
			wg.Add(1)
			go func() { defer wg.Done(); n.Stop() }()
		}
	}
	wg.Wait()
	if c.tempDir {
		os.RemoveAll(c.cfg.Dir)
	}
}

// ParseHosts splits a --hosts list; a host without a port gets port.
func ParseHosts(list string, port int) []string {
	var out []string
	for _, h := range strings.Split(list, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, strconv.Itoa(port))
		}
		out = append(out, h)
	}
	return out
}
