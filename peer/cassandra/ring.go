package cassandra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocql/gocql"
)

// Ring is a peer ring of Cassandra JVMs whose state lives in Dir: ring.json
// (what `up` was asked for) and one directory per node, node<i>/, holding
// its cassandra.yaml, logback.xml, pid file, data and logs/.
type Ring struct{ Dir string }

// UpOptions are the settings of `idemkv peer cassandra up`.
type UpOptions struct {
	Nodes               int
	Version             string // default DefaultVersion
	CacheDir            string // default DefaultCacheDir()
	Heap                string // -Xms and -Xmx of every node, default 1G
	NumTokens           int
	CommitLogSync       string        // periodic (default) or batch
	CounterWriteTimeout time.Duration // default 1 s
	// Wipe removes the nodes' data, commit logs and logs before starting;
	// otherwise a ring restarts on the data it has.
	Wipe bool
	// Log receives progress lines and Maven's output; nil discards them.
	Log io.Writer
	// JMX opens every node's JMX on 127.0.0.1:JMXPort(i), for nodetool
	// (Ring.Flush); off by default.
	JMX bool
}

// State is ring.json: how the ring was brought up.
type State struct {
	Version             string `json:"version"`
	Nodes               int    `json:"nodes"`
	Lib                 string `json:"lib"`
	Java                string `json:"java"`
	Heap                string `json:"heap"`
	NumTokens           int    `json:"num_tokens"`
	CommitLogSync       string `json:"commitlog_sync"`
	CounterWriteTimeout string `json:"counter_write_timeout"`
	JMX                 bool   `json:"jmx,omitempty"`
}

// NodeDir is node i's directory.
func (r Ring) NodeDir(i int) string { return filepath.Join(r.Dir, fmt.Sprintf("node%d", i)) }

func (r Ring) statePath() string { return filepath.Join(r.Dir, "ring.json") }

// State reads ring.json.
func (r Ring) State() (State, error) {
	var s State
	b, err := os.ReadFile(r.statePath())
	if err != nil {
		return s, fmt.Errorf("cassandra: no peer ring in %s (idemkv peer cassandra up): %w", r.Dir, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("cassandra: %s: %w", r.statePath(), err)
	}
	return s, nil
}

// Up resolves the release (once), writes every node's configuration and
// starts the nodes one after the other (a node joins once the previous
// one answers CQL), then waits until every node answers CQL and lists
// every other node as its peer. A ring already running with the same size
// is only waited for.
func (r Ring) Up(ctx context.Context, o UpOptions) error {
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.Heap == "" {
		o.Heap = "1G"
	}
	if o.CounterWriteTimeout <= 0 {
		o.CounterWriteTimeout = time.Second
	}
	if o.NumTokens <= 0 {
		o.NumTokens = 16
	}
	if o.CommitLogSync == "" {
		o.CommitLogSync = "periodic"
	}
	if !filepath.IsAbs(r.Dir) {
		abs, err := filepath.Abs(r.Dir)
		if err != nil {
			return fmt.Errorf("cassandra: ring directory: %w", err)
		}
		r.Dir = abs
	}
	if old, err := r.State(); err == nil {
		running := 0
		for i := 1; i <= old.Nodes; i++ {
			if _, alive := r.pid(i); alive {
				running++
			}
		}
		switch {
		case running == old.Nodes && old.Nodes == o.Nodes && old.JMX == o.JMX:
			fmt.Fprintf(logw, "peer ring of %d nodes already running in %s\n", old.Nodes, r.Dir)
			return r.WaitUp(ctx)
		case running > 0:
			return fmt.Errorf("cassandra: %d of the %d nodes of the peer ring in %s are running: stop it first (idemkv peer cassandra stop)", running, old.Nodes, r.Dir)
		case old.Nodes != o.Nodes && !o.Wipe:
			// The nodes' data remembers the old ring's members and tokens.
			return fmt.Errorf("cassandra: the peer ring in %s has %d nodes, not %d: add --wipe to start a new ring there", r.Dir, old.Nodes, o.Nodes)
		}
	}
	if o.Nodes < 1 {
		return fmt.Errorf("cassandra: %d nodes: want at least 1", o.Nodes)
	}
	for i := 1; i <= o.Nodes; i++ {
		if err := (NodeConfig{Index: i, Nodes: o.Nodes, Dir: r.NodeDir(i), NumTokens: o.NumTokens, CommitLogSync: o.CommitLogSync, CounterWriteTimeout: o.CounterWriteTimeout}).Validate(); err != nil {
			return err
		}
	}
	java, err := Java()
	if err != nil {
		return err
	}
	if err := checkJava(java); err != nil {
		return err
	}
	for i := 1; i <= o.Nodes; i++ {
		if err := portsFree(Address(i)); err != nil {
			return err
		}
	}
	rel := Release{Version: o.Version, Dir: filepath.Join(o.CacheDir, "cassandra-"+o.Version)}
	if !rel.Resolved() {
		fmt.Fprintf(logw, "resolving cassandra-all %s and its runtime dependencies from Maven Central into %s (first run only)\n", o.Version, rel.Dir)
		start := time.Now()
		if rel, err = Resolve(ctx, o.CacheDir, o.Version, logw); err != nil {
			return err
		}
		fmt.Fprintf(logw, "resolved in %s (%s)\n", time.Since(start).Round(100*time.Millisecond), dirSize(rel.Lib()))
	}
	st := State{Version: o.Version, Nodes: o.Nodes, Lib: rel.Lib(), Java: java, Heap: o.Heap, NumTokens: o.NumTokens,
		CommitLogSync: o.CommitLogSync, CounterWriteTimeout: o.CounterWriteTimeout.String(), JMX: o.JMX}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return fmt.Errorf("cassandra: ring directory: %w", err)
	}
	// Nodes of an earlier, larger ring would be left behind: remove them.
	for i := o.Nodes + 1; ; i++ {
		if _, err := os.Stat(r.NodeDir(i)); err != nil {
			break
		}
		if err := os.RemoveAll(r.NodeDir(i)); err != nil {
			return fmt.Errorf("cassandra: remove node %d: %w", i, err)
		}
	}
	for i := 1; i <= o.Nodes; i++ {
		nc := NodeConfig{Index: i, Nodes: o.Nodes, Dir: r.NodeDir(i), NumTokens: o.NumTokens, CommitLogSync: o.CommitLogSync, CounterWriteTimeout: o.CounterWriteTimeout}
		if err := writeNode(nc, o.Wipe); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("cassandra: ring.json: %w", err)
	}
	if err := os.WriteFile(r.statePath(), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cassandra: ring.json: %w", err)
	}
	begin := time.Now()
	for i := 1; i <= o.Nodes; i++ {
		if err := r.start(st, i); err != nil {
			return err
		}
		if err := r.waitCQL(ctx, i); err != nil {
			return err
		}
		fmt.Fprintf(logw, "node %d (%s) answers CQL, %s after the first start\n", i, Address(i), time.Since(begin).Round(100*time.Millisecond))
	}
	if err := r.WaitUp(ctx); err != nil {
		return err
	}
	fmt.Fprintf(logw, "every node sees %d nodes, %s after the first start\n", o.Nodes, time.Since(begin).Round(100*time.Millisecond))
	return nil
}

func writeNode(nc NodeConfig, wipe bool) error {
	if wipe {
		for _, sub := range []string{"data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs"} {
			if err := os.RemoveAll(filepath.Join(nc.Dir, sub)); err != nil {
				return fmt.Errorf("cassandra: wipe node %d: %w", nc.Index, err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(nc.Dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("cassandra: node %d: %w", nc.Index, err)
	}
	y, err := YAML(nc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(nc.Dir, "cassandra.yaml"), y, 0o644); err != nil {
		return fmt.Errorf("cassandra: node %d: %w", nc.Index, err)
	}
	if err := os.WriteFile(filepath.Join(nc.Dir, "logback.xml"), Logback(nc), 0o644); err != nil {
		return fmt.Errorf("cassandra: node %d: %w", nc.Index, err)
	}
	return nil
}

// start starts node i's JVM in its own session (it outlives this command)
// with its standard output and error in logs/stdout.log.
func (r Ring) start(st State, i int) error {
	if pid, alive := r.pid(i); alive {
		return fmt.Errorf("cassandra: node %d is already running (pid %d)", i, pid)
	}
	nc := NodeConfig{Index: i, Nodes: st.Nodes, Dir: r.NodeDir(i), NumTokens: st.NumTokens, CommitLogSync: st.CommitLogSync, JMX: st.JMX}
	args, err := Command(nc, st.Lib, st.Heap)
	if err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(nc.Dir, "logs", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cassandra: node %d: %w", i, err)
	}
	defer out.Close()
	cmd := exec.Command(st.Java, args...)
	cmd.Dir = nc.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cassandra: start node %d: %w", i, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	if err := os.WriteFile(filepath.Join(nc.Dir, "pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("cassandra: node %d pid file: %w", i, err)
	}
	return nil
}

// pid returns node i's recorded pid and whether that process is alive.
func (r Ring) pid(i int) (int, bool) {
	b, err := os.ReadFile(filepath.Join(r.NodeDir(i), "pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processAlive(pid)
}

func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// A zombie is not alive; neither is a recycled pid that is no JVM.
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return false
		}
	}
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && !strings.Contains(string(cmd), MainClass) {
		return false
	}
	return true
}

// Stop stops every node: SIGTERM (Cassandra drains and announces its
// shutdown), then SIGKILL for any node still running after grace. Stopping
// a stopped ring, or a directory without a ring, does nothing.
func (r Ring) Stop(grace time.Duration) error {
	st, err := r.State()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var pids []int
	for i := 1; i <= st.Nodes; i++ {
		if pid, alive := r.pid(i); alive {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			pids = append(pids, pid)
		}
	}
	deadline := time.Now().Add(grace)
	for _, pid := range pids {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if processAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	var errs []error
	for _, pid := range pids {
		for end := time.Now().Add(5 * time.Second); processAlive(pid) && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
		if processAlive(pid) {
			errs = append(errs, fmt.Errorf("cassandra: pid %d still running", pid))
		}
	}
	return errors.Join(errs...)
}

// NodeStatus is one node's line of `idemkv peer cassandra status`.
type NodeStatus struct {
	Node    int
	Addr    string // CQL address
	PID     int
	Running bool
	// CQL is whether the node answered a query; Release its
	// release_version; Peers the addresses it lists in system.peers.
	CQL     bool
	Release string
	Peers   []string
	// Normal counts the endpoints the node's gossip shows joined (status
	// NORMAL) and serving CQL (rpc_ready), itself included.
	Normal int
	// Reaches is whether reads needing every replica, coordinated by this
	// node, succeed (they fail as unavailable while a replica is down in
	// its failure detector's view): see upProbeKeys.
	Reaches bool
	Err     error
}

// Status reports every node's process and whether it answers CQL.
func (r Ring) Status(ctx context.Context) ([]NodeStatus, error) {
	st, err := r.State()
	if err != nil {
		return nil, err
	}
	out := make([]NodeStatus, 0, st.Nodes)
	for i := 1; i <= st.Nodes; i++ {
		s := NodeStatus{Node: i, Addr: net.JoinHostPort(Address(i), strconv.Itoa(CQLPort))}
		s.PID, s.Running = r.pid(i)
		if s.Running {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var p probe
			p, s.Err = query(qctx, Address(i), st.Nodes)
			cancel()
			s.CQL = p.release != ""
			s.Release, s.Peers, s.Normal, s.Reaches = p.release, p.peers, p.normal, p.reaches
		}
		out = append(out, s)
	}
	return out, nil
}

// Session opens a gocql session to node i alone (no other host is
// discovered), for checks and tests.
func Session(addr string, timeout time.Duration) (*gocql.Session, error) {
	cc := gocql.NewCluster(addr)
	cc.Port = CQLPort
	cc.ProtoVersion = 4
	cc.DisableInitialHostLookup = true
	cc.HostFilter = gocql.WhiteListHostFilter(addr)
	cc.Timeout, cc.ConnectTimeout = timeout, timeout
	cc.NumConns = 1
	cc.Logger = log.New(io.Discard, "", 0)
	s, err := cc.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("cassandra: CQL session to %s: %w", addr, err)
	}
	return s, nil
}

// probe is what one node says of the ring.
type probe struct {
	release string
	peers   []string
	normal  int
	reaches bool
}

// upProbeKeys is how many partitions of system_distributed.repair_history
// (replication factor 3) the UP check reads at min(N, 3) answers: on a ring
// of up to 3 nodes every read needs every node; on a larger one 16 random
// partitions of a 16-vnode ring cover every node with high probability,
// not surely.
const upProbeKeys = 16

// query asks node addr for its release, its peers, the endpoints its gossip
// shows NORMAL and serving CQL, and whether reads that need every replica
// of a ring of nodes nodes succeed from it.
// The first error is returned with what was learnt before it.
func query(ctx context.Context, addr string, nodes int) (p probe, err error) {
	s, err := Session(addr, 3*time.Second)
	if err != nil {
		return p, err
	}
	defer s.Close()
	var release string
	if err := s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&release); err != nil {
		return p, fmt.Errorf("cassandra: %s system.local: %w", addr, err)
	}
	p.release = release
	iter := s.Query("SELECT rpc_address FROM system.peers").WithContext(ctx).Iter()
	var ip net.IP
	for iter.Scan(&ip) {
		p.peers = append(p.peers, ip.String())
	}
	if err := iter.Close(); err != nil {
		return p, fmt.Errorf("cassandra: %s system.peers: %w", addr, err)
	}
	// Every column of gossip_info is text; a 5.0 node gossips its status
	// as status_with_port alone (status stays empty but for its own row).
	iter = s.Query("SELECT status, status_with_port, rpc_ready FROM system_views.gossip_info").WithContext(ctx).Iter()
	var status, statusWithPort, ready string
	for iter.Scan(&status, &statusWithPort, &ready) {
		if (strings.HasPrefix(status, "NORMAL") || strings.HasPrefix(statusWithPort, "NORMAL")) && ready == "true" {
			p.normal++
		}
	}
	if err := iter.Close(); err != nil {
		return p, fmt.Errorf("cassandra: %s system_views.gossip_info: %w", addr, err)
	}
	// repair_history has replication factor 3, and ALL needs all 3
	// replicas even on a smaller ring: ask for min(nodes, 3) answers.
	cl := []gocql.Consistency{gocql.One, gocql.Two, gocql.Three}[min(max(nodes, 1), 3)-1]
	for k := range upProbeKeys {
		var id gocql.UUID
		err := s.Query("SELECT id FROM system_distributed.repair_history WHERE keyspace_name = ? AND columnfamily_name = ? LIMIT 1",
			"idemkv_up_probe", fmt.Sprintf("p%d", k)).Consistency(cl).WithContext(ctx).Scan(&id)
		if err != nil && !errors.Is(err, gocql.ErrNotFound) {
			return p, fmt.Errorf("cassandra: %s read at %s: %w", addr, cl, err)
		}
	}
	p.reaches = true
	return p, nil
}

// waitCQL waits until node i answers CQL, failing early if it exits.
func (r Ring) waitCQL(ctx context.Context, i int) error {
	for {
		if _, alive := r.pid(i); !alive {
			return r.exited(i)
		}
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		p, err := query(qctx, Address(i), 1)
		cancel()
		if p.release != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cassandra: node %d does not answer CQL on %s: %w (last: %v)", i, Address(i), ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (r Ring) exited(i int) error {
	b, _ := os.ReadFile(filepath.Join(r.NodeDir(i), "logs", "system.log"))
	o, _ := os.ReadFile(filepath.Join(r.NodeDir(i), "logs", "stdout.log"))
	return fmt.Errorf("cassandra: node %d exited; logs/stdout.log ends:\n%s\nlogs/system.log ends:\n%s", i, tail(string(o), 1500), tail(string(b), 2500))
}

// WaitUp waits until every node runs, answers CQL, lists every other node
// in system.peers, shows every node NORMAL and serving CQL in its gossip,
// and coordinates reads that need every replica (they fail as unavailable
// while a replica is down in its failure detector's view). Cassandra has no CQL view of its failure detector;
// nodetool, which has one, needs JMX, which the peer ring leaves off by
// default.
func (r Ring) WaitUp(ctx context.Context) error {
	for {
		st, err := r.Status(ctx)
		if err != nil {
			return err
		}
		ready := true
		var last error
		for _, s := range st {
			if !s.Running {
				return r.exited(s.Node)
			}
			if !s.CQL || len(s.Peers) < len(st)-1 || s.Normal < len(st) || !s.Reaches {
				ready, last = false, s.Err
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cassandra: peer ring not up: %w (last: %v)", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// portsFree fails when addr's storage or CQL port is taken (another ring,
// or a node of this one started by hand).
func portsFree(addr string) error {
	for _, p := range []int{StoragePort, CQLPort} {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(p)))
		if err != nil {
			return fmt.Errorf("cassandra: %s:%d is not free: %w", addr, p, err)
		}
		l.Close()
	}
	return nil
}

var javaVersionRE = regexp.MustCompile(`version "(\d+)`)

// checkJava fails unless java is JDK 17 or newer.
func checkJava(java string) error {
	out, err := exec.Command(java, "-version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("cassandra: %s -version: %w", java, err)
	}
	m := javaVersionRE.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("cassandra: cannot read the version of %s: %q", java, tail(string(out), 200))
	}
	if v, _ := strconv.Atoi(string(m[1])); v < 17 {
		return fmt.Errorf("cassandra: %s is Java %d; the peer ring's options are JDK 17's", java, v)
	}
	return nil
}

func dirSize(dir string) string {
	var n int64
	var files int
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
			files++
		}
		return nil
	})
	return fmt.Sprintf("%d jars, %.0f MiB", files, float64(n)/(1<<20))
}

// NodeToolClass is nodetool's main class, in cassandra-all.
const NodeToolClass = "org.apache.cassandra.tools.NodeTool"

// ErrNoJMX is Flush's error on a ring started without JMX.
var ErrNoJMX = errors.New("cassandra: the peer ring runs without JMX, so nodetool cannot reach it (start it with 'idemkv peer cassandra up --jmx')")

// NodeToolArgs are java's arguments that run nodetool against node i's
// JMX (JMXPort(i) on 127.0.0.1) with the release in lib; home is its
// user.home, where it keeps .cassandra/nodetool.history.
func NodeToolArgs(lib, home string, i int, args ...string) []string {
	out := append([]string{}, NodeToolJVMOptions...)
	out = append(out, "-Duser.home="+home, "-cp", filepath.Join(lib, "*"), NodeToolClass, "-h", "127.0.0.1", "-p", strconv.Itoa(JMXPort(i)))
	return append(out, args...)
}

// Flush runs 'nodetool flush keyspace' on node i: its memtables of the
// keyspace are written to SSTables (and the commit log segments they held
// may be recycled). The ring must run with JMX (UpOptions.JMX); nodetool's
// history goes to the ring's directory, not the user's home.
func (r Ring) Flush(ctx context.Context, i int, keyspace string) error {
	st, err := r.State()
	if err != nil {
		return err
	}
	if !st.JMX {
		return ErrNoJMX
	}
	if i < 1 || i > st.Nodes {
		return fmt.Errorf("cassandra: flush: no node %d in a ring of %d", i, st.Nodes)
	}
	out, err := exec.CommandContext(ctx, st.Java, NodeToolArgs(st.Lib, r.Dir, i, "flush", "--", keyspace)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cassandra: nodetool flush %s on node %d: %w: %s", keyspace, i, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Kill stops node i uncleanly (SIGKILL: no drain, no flush; what its
// commit log holds is replayed when it starts again) and waits until the
// process is gone.
func (r Ring) Kill(i int) error {
	st, err := r.State()
	if err != nil {
		return err
	}
	if i < 1 || i > st.Nodes {
		return fmt.Errorf("cassandra: kill: no node %d in a ring of %d", i, st.Nodes)
	}
	pid, alive := r.pid(i)
	if !alive {
		return fmt.Errorf("cassandra: kill: node %d is not running", i)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("cassandra: kill node %d (pid %d): %w", i, pid, err)
	}
	for end := time.Now().Add(10 * time.Second); processAlive(pid); {
		if time.Now().After(end) {
			return fmt.Errorf("cassandra: node %d (pid %d) still running after SIGKILL", i, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Restart starts stopped node i again on its data, as 'up' started it,
// and waits until the whole ring is up again (WaitUp).
func (r Ring) Restart(ctx context.Context, i int) error {
	st, err := r.State()
	if err != nil {
		return err
	}
	if i < 1 || i > st.Nodes {
		return fmt.Errorf("cassandra: restart: no node %d in a ring of %d", i, st.Nodes)
	}
	if err := r.start(st, i); err != nil {
		return err
	}
	if err := r.waitCQL(ctx, i); err != nil {
		return err
	}
	return r.WaitUp(ctx)
}

// Pids returns the pids of the ring's running nodes, in node order: an
// error when r.Dir holds no ring or none of its nodes runs.
func (r Ring) Pids() ([]int, error) {
	st, err := r.State()
	if err != nil {
		return nil, err
	}
	var pids []int
	for i := 1; i <= st.Nodes; i++ {
		if pid, alive := r.pid(i); alive {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("cassandra: no node of the ring in %s is running", r.Dir)
	}
	return pids, nil
}
