// Package localring runs a ring of real idemkv node processes on one
// machine, in the manner of ccm: node i listens on 127.0.0.i, keeps its
// configuration, data, log and pid under Dir/node<i>, and the processes
// outlive the command that started them until Stop or Kill.
package localring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkv/idemkv/node"
)

// Ring is a local ring's directory and how to start its nodes.
type Ring struct {
	Dir    string
	Binary string // the idemkv binary; default: this executable
}

// UpOptions configure a new ring.
type UpOptions struct {
	Nodes         int
	NumTokens     int
	CommitLogSync string
	CounterLeader string
	// Extra is merged into every node's configuration.
	Extra func(i int, c *node.Config)
}

func (r Ring) binary() (string, error) {
	if r.Binary != "" {
		return r.Binary, nil
	}
	return os.Executable()
}

// NodeDir is node i's directory.
func (r Ring) NodeDir(i int) string { return filepath.Join(r.Dir, fmt.Sprintf("node%d", i)) }

// Address is node i's IP, 127.0.0.i.
func Address(i int) string { return fmt.Sprintf("127.0.0.%d", i) }

// Nodes returns the node numbers the ring directory holds.
func (r Ring) Nodes() ([]int, error) {
	ents, err := os.ReadDir(r.Dir)
	if err != nil {
		return nil, fmt.Errorf("localring: %w", err)
	}
	var out []int
	for _, e := range ents {
		if i, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node")); err == nil && strings.HasPrefix(e.Name(), "node") {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("localring: no nodes in %s (run idemkv ring up first)", r.Dir)
	}
	sort.Ints(out)
	return out, nil
}

// Result is what a life-cycle verb did to one node.
type Result struct {
	Node int
	PID  int    // the node's process (0 when it had none)
	What string // one of the Did* constants
}

// What a verb did to a node (Result.What).
const (
	DidStart          = "started"
	DidAlreadyRunning = "is already running"
	DidStop           = "stopped"
	DidKillAfterGrace = "did not stop in time and was killed"
	DidKill           = "killed"
	DidNotRunning     = "is not running"
)

// String reads as a sentence: "node 2 (pid 1234) killed".
func (r Result) String() string {
	if r.PID == 0 {
		return fmt.Sprintf("node %d %s", r.Node, r.What)
	}
	return fmt.Sprintf("node %d (pid %d) %s", r.Node, r.PID, r.What)
}

// NodeError is the failure of one node to start or stop, with the end of
// the log it wrote meanwhile.
type NodeError struct {
	Node    int
	Err     error
	LogTail string
}

// Error names the node, the failure, and shows the log's end.
func (e *NodeError) Error() string {
	if e.LogTail == "" {
		return fmt.Sprintf("node %d: %v", e.Node, e.Err)
	}
	return fmt.Sprintf("node %d: %v; its log ends:\n%s", e.Node, e.Err, indent(e.LogTail))
}

// Unwrap returns the failure.
func (e *NodeError) Unwrap() error { return e.Err }

// errExited is a node process that exited while it was awaited.
var errExited = errors.New("the process exited")

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// Up creates the nodes' configurations and starts them, then waits until
// every node sees every other up. If any node fails, Up stops the nodes it
// started, removes the node directories it created, and returns an error
// naming the failed nodes with the end of their logs.
func (r Ring) Up(ctx context.Context, o UpOptions) error {
	if o.Nodes < 1 || o.Nodes > 254 {
		return fmt.Errorf("localring: %d nodes: want 1..254", o.Nodes)
	}
	if ns, err := r.Nodes(); err == nil && len(ns) > 0 {
		return fmt.Errorf("localring: %s already holds a ring of %d nodes; start it with idemkv ring start, or remove the directory, or use another --dir", r.Dir, len(ns))
	}
	var created []int
	cleanup := func(cause error) error {
		var errs []error
		for _, i := range created {
			if _, err := r.StopNode(i, 5*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			// A node still running keeps its directory.
			return fmt.Errorf("%w\nring not up, and stopping the nodes that started failed: %w", cause, errors.Join(errs...))
		}
		for _, i := range created {
			_ = os.RemoveAll(r.NodeDir(i))
		}
		return fmt.Errorf("%w\nring not up: the nodes that started were stopped, and the node directories removed from %s", cause, r.Dir)
	}
	for i := 1; i <= o.Nodes; i++ {
		// Absolute: a node may be started again from another directory.
		data, err := filepath.Abs(filepath.Join(r.NodeDir(i), "data"))
		if err != nil {
			return cleanup(fmt.Errorf("localring: %w", err))
		}
		c := node.Config{
			ClusterName:   "idemkv-local",
			DataDirectory: data,
			ListenAddress: Address(i),
			Seeds:         []string{Address(1)},
			NumTokens:     o.NumTokens,
			CommitLogSync: o.CommitLogSync,
			CounterLeader: o.CounterLeader,
		}
		if o.Extra != nil {
			o.Extra(i, &c)
		}
		if err := os.MkdirAll(r.NodeDir(i), 0o755); err != nil {
			return cleanup(err)
		}
		created = append(created, i)
		if err := c.Write(r.configPath(i)); err != nil {
			return cleanup(err)
		}
	}
	starts := map[int]launched{}
	for _, i := range created {
		l, err := r.launch(i)
		if err != nil {
			return cleanup(err)
		}
		starts[i] = l
	}
	if err := r.waitRing(ctx, starts); err != nil {
		return cleanup(err)
	}
	return nil
}

// configPath is node i's configuration file, an absolute path: the
// process's command line holds it, by which pid recognises the process.
func (r Ring) configPath(i int) string {
	p := filepath.Join(r.NodeDir(i), "node.yaml")
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func (r Ring) logPath(i int) string { return filepath.Join(r.NodeDir(i), "node.log") }
func (r Ring) pidPath(i int) string { return filepath.Join(r.NodeDir(i), "pid") }

// launched is a process this command started, and where its log stood.
type launched struct {
	pid       int
	logOffset int64
}

// launch starts node i's process from its configuration, without waiting.
func (r Ring) launch(i int) (launched, error) {
	bin, err := r.binary()
	if err != nil {
		return launched{}, fmt.Errorf("localring: %w", err)
	}
	logf, err := os.OpenFile(r.logPath(i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return launched{}, fmt.Errorf("localring: node %d log: %w", i, err)
	}
	defer logf.Close()
	var off int64
	if st, err := logf.Stat(); err == nil {
		off = st.Size()
	}
	cmd := exec.Command(bin, "node", "--config", r.configPath(i))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive this command
	if err := cmd.Start(); err != nil {
		return launched{}, fmt.Errorf("localring: start node %d: %w", i, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	if err := os.WriteFile(r.pidPath(i), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return launched{}, fmt.Errorf("localring: node %d: %w", i, err)
	}
	return launched{pid: pid, logOffset: off}, nil
}

// has reports whether node i belongs to the ring.
func (r Ring) has(i int) error {
	ns, err := r.Nodes()
	if err != nil {
		return err
	}
	for _, n := range ns {
		if n == i {
			return nil
		}
	}
	return fmt.Errorf("localring: the ring in %s has no node %d (nodes %s)", r.Dir, i, listInts(ns))
}

func listInts(ns []int) string {
	s := make([]string, len(ns))
	for k, n := range ns {
		s[k] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// StartNode starts node i and waits until it answers; the other nodes do
// not matter, running or not. A node already running is left alone
// (Result.What is DidAlreadyRunning), which is not an error.
func (r Ring) StartNode(ctx context.Context, i int) (Result, error) {
	if err := r.has(i); err != nil {
		return Result{}, err
	}
	if pid, alive := r.pid(i); alive {
		return Result{Node: i, PID: pid, What: DidAlreadyRunning}, nil
	}
	l, err := r.launch(i)
	if err != nil {
		return Result{}, err
	}
	if err := r.waitNode(ctx, i, l); err != nil {
		return Result{}, fmt.Errorf("localring: %w", err)
	}
	r.settle(ctx, i)
	return Result{Node: i, PID: l.pid, What: DidStart}, nil
}

// StartAll starts every node that is not running and waits until every
// node sees every other up. Nodes that started stay running when another
// fails; the error names the nodes that failed.
func (r Ring) StartAll(ctx context.Context) ([]Result, error) {
	ns, err := r.Nodes()
	if err != nil {
		return nil, err
	}
	var out []Result
	starts := map[int]launched{}
	var errs []error
	for _, i := range ns {
		if pid, alive := r.pid(i); alive {
			out = append(out, Result{Node: i, PID: pid, What: DidAlreadyRunning})
			continue
		}
		l, err := r.launch(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		starts[i] = l
	}
	err = r.waitRing(ctx, starts)
	failed := map[int]bool{}
	failedNodes(err, failed)
	for _, i := range ns {
		if l, ok := starts[i]; ok && !failed[i] {
			out = append(out, Result{Node: i, PID: l.pid, What: DidStart})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Node < out[b].Node })
	if err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// failedNodes adds the nodes of every NodeError in err's tree to into.
func failedNodes(err error, into map[int]bool) {
	switch e := err.(type) {
	case nil:
	case *NodeError:
		into[e.Node] = true
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			failedNodes(x, into)
		}
	case interface{ Unwrap() error }:
		failedNodes(e.Unwrap(), into)
	}
}

// pid returns node i's recorded pid and whether that process is alive and
// is node i (a recycled pid is not).
func (r Ring) pid(i int) (int, bool) {
	b, err := os.ReadFile(r.pidPath(i))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if !processAlive(pid) {
		return pid, false
	}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && !strings.Contains(string(cmdline), r.configPath(i)) {
		return pid, false // another program now has the pid
	}
	return pid, true
}

func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie (exited, not reaped because its parent is gone) is not alive.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// The state follows the command name, which is in parentheses.
		if k := strings.LastIndexByte(string(b), ')'); k >= 0 {
			if f := strings.Fields(string(b[k+1:])); len(f) > 0 && f[0] == "Z" {
				return false
			}
		}
	}
	return true
}

// waitGone waits up to d for pid to exit.
func waitGone(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if !processAlive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// Kill sends SIGKILL to node i. A node not running is not an error
// (Result.What is DidNotRunning).
func (r Ring) Kill(i int) (Result, error) {
	if err := r.has(i); err != nil {
		return Result{}, err
	}
	pid, alive := r.pid(i)
	if !alive {
		return Result{Node: i, What: DidNotRunning}, nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return Result{}, fmt.Errorf("localring: kill node %d (pid %d): %w", i, pid, err)
	}
	if !waitGone(pid, 5*time.Second) {
		return Result{}, fmt.Errorf("localring: node %d (pid %d) survived SIGKILL", i, pid)
	}
	_ = os.Remove(r.pidPath(i))
	return Result{Node: i, PID: pid, What: DidKill}, nil
}

// StopNode stops node i: SIGTERM (a clean shutdown, announced to its
// peers), then SIGKILL if it still runs after the grace period. A node not
// running is not an error (Result.What is DidNotRunning).
func (r Ring) StopNode(i int, grace time.Duration) (Result, error) {
	if err := r.has(i); err != nil {
		return Result{}, err
	}
	out, err := r.stop([]int{i}, grace)
	if len(out) == 0 {
		return Result{}, err
	}
	return out[0], err
}

// Stop stops every node as StopNode does, all at once. Stopping a stopped
// ring is not an error.
func (r Ring) Stop(grace time.Duration) ([]Result, error) {
	ns, err := r.Nodes()
	if err != nil {
		return nil, err
	}
	return r.stop(ns, grace)
}

func (r Ring) stop(ns []int, grace time.Duration) ([]Result, error) {
	var out []Result
	pids := map[int]int{}
	for _, i := range ns {
		pid, alive := r.pid(i)
		if !alive {
			out = append(out, Result{Node: i, What: DidNotRunning})
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err == nil {
			pids[i] = pid
		} else if !errors.Is(err, syscall.ESRCH) {
			pids[i] = pid // SIGKILL below will try again
		}
	}
	deadline := time.Now().Add(grace)
	var errs []error
	for _, i := range ns {
		pid, ok := pids[i]
		if !ok {
			continue
		}
		res := Result{Node: i, PID: pid, What: DidStop}
		if !waitGone(pid, time.Until(deadline)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			res.What = DidKillAfterGrace
			if !waitGone(pid, 5*time.Second) {
				errs = append(errs, &NodeError{Node: i, Err: fmt.Errorf("pid %d survived SIGTERM and SIGKILL", pid)})
				continue
			}
		}
		_ = os.Remove(r.pidPath(i))
		out = append(out, res)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Node < out[b].Node })
	if len(errs) > 0 {
		return out, fmt.Errorf("localring: %w", errors.Join(errs...))
	}
	return out, nil
}

// Restart stops node i (every node when i is 0) and starts it again,
// waiting as StartNode (StartAll) does.
func (r Ring) Restart(ctx context.Context, i int, grace time.Duration) ([]Result, error) {
	if i == 0 {
		out, err := r.Stop(grace)
		if err != nil {
			return out, err
		}
		started, err := r.StartAll(ctx)
		return append(out, started...), err
	}
	stopped, err := r.StopNode(i, grace)
	if err != nil {
		return nil, err
	}
	started, err := r.StartNode(ctx, i)
	if err != nil {
		return []Result{stopped}, err
	}
	return []Result{stopped, started}, nil
}

// NodeStatus is one node's line of the ring status.
type NodeStatus struct {
	Node    int
	Addr    string // peer address, ip:storage_port
	PID     int
	Running bool
	// View is the node's own view of the ring (nil when it did not answer).
	View []node.PeerStatus
	Err  error
}

// peerAddr is node i's peer address from its configuration.
func (r Ring) peerAddr(i int) string {
	addr := net.JoinHostPort(Address(i), "7000")
	if c, err := node.LoadConfig(r.configPath(i)); err == nil {
		ip := c.ListenAddress
		if ip == "" {
			ip = Address(i)
		}
		addr = net.JoinHostPort(ip, strconv.Itoa(cmp.Or(c.StoragePort, 7000)))
	}
	return addr
}

// Status asks every running node for its view of the ring.
func (r Ring) Status(ctx context.Context) ([]NodeStatus, error) {
	ns, err := r.Nodes()
	if err != nil {
		return nil, err
	}
	client, err := node.NewClient()
	if err != nil {
		return nil, fmt.Errorf("localring: %w", err)
	}
	defer client.Close()
	var out []NodeStatus
	for _, i := range ns {
		out = append(out, r.nodeStatus(ctx, client, i))
	}
	return out, nil
}

func (r Ring) nodeStatus(ctx context.Context, client *node.Client, i int) NodeStatus {
	st := NodeStatus{Node: i, Addr: r.peerAddr(i)}
	st.PID, st.Running = r.pid(i)
	if !st.Running {
		st.PID = 0
		return st
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	st.View, st.Err = client.Status(qctx, st.Addr)
	cancel()
	return st
}

// sees reports whether the view holds addr as up.
func sees(view []node.PeerStatus, addr string) bool {
	for _, p := range view {
		if p.Addr == addr {
			return p.Up
		}
	}
	return false
}

// logTail is the end of what node i logged since offset.
func (r Ring) logTail(i int, offset int64) string {
	b, err := os.ReadFile(r.logPath(i))
	if err != nil {
		return ""
	}
	if offset >= 0 && offset <= int64(len(b)) {
		b = b[offset:]
	}
	return tail(string(b), 2000)
}

// waitNode waits until node i, launched as l, answers with a view that
// holds it up.
func (r Ring) waitNode(ctx context.Context, i int, l launched) error {
	client, err := node.NewClient()
	if err != nil {
		return err
	}
	defer client.Close()
	addr := r.peerAddr(i)
	var last error
	for {
		if !processAlive(l.pid) {
			return &NodeError{Node: i, Err: errExited, LogTail: r.logTail(i, l.logOffset)}
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		view, err := client.Status(qctx, addr)
		cancel()
		if err == nil && sees(view, addr) {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return &NodeError{Node: i, Err: fmt.Errorf("not up (last answer: %v): %w", last, ctx.Err()), LogTail: r.logTail(i, l.logOffset)}
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settle gives the gossip of a node just started a moment, at most a few
// seconds, to see the other running nodes up, so that the status shown
// next is not a view of before it met them. Not reaching it is no failure.
func (r Ring) settle(ctx context.Context, i int) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client, err := node.NewClient()
	if err != nil {
		return
	}
	defer client.Close()
	ns, _ := r.Nodes()
	for {
		self := r.nodeStatus(ctx, client, i)
		done := self.Err == nil
		for _, j := range ns {
			if j == i {
				continue
			}
			other := r.nodeStatus(ctx, client, j)
			if other.Running && other.Err == nil && (!sees(self.View, other.Addr) || !sees(other.View, self.Addr)) {
				done = false
			}
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitUp waits until every node is running and sees every node up.
func (r Ring) WaitUp(ctx context.Context) error {
	return r.waitRing(ctx, nil)
}

// waitRing waits until every node runs and sees every node up. The nodes
// in starts were just launched: one that exits fails at once, with what it
// logged since. A node that is not running and was not launched fails too.
func (r Ring) waitRing(ctx context.Context, starts map[int]launched) error {
	ns, err := r.Nodes()
	if err != nil {
		return err
	}
	client, err := node.NewClient()
	if err != nil {
		return fmt.Errorf("localring: %w", err)
	}
	defer client.Close()
	for {
		var failed []error
		var notUp []string
		st := make([]NodeStatus, 0, len(ns))
		for _, i := range ns {
			st = append(st, r.nodeStatus(ctx, client, i))
		}
		for _, s := range st {
			if s.Running {
				continue
			}
			if l, ok := starts[s.Node]; ok {
				failed = append(failed, &NodeError{Node: s.Node, Err: errExited, LogTail: r.logTail(s.Node, l.logOffset)})
			} else {
				failed = append(failed, &NodeError{Node: s.Node, Err: errors.New("not running")})
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("localring: %w", errors.Join(failed...))
		}
		for _, s := range st {
			if s.Err != nil {
				notUp = append(notUp, fmt.Sprintf("node %d does not answer (%v)", s.Node, s.Err))
				continue
			}
			var missing []int
			for _, o := range st {
				if !sees(s.View, o.Addr) {
					missing = append(missing, o.Node)
				}
			}
			if len(missing) > 0 {
				notUp = append(notUp, fmt.Sprintf("node %d does not see node(s) %s up", s.Node, listInts(missing)))
			}
		}
		if len(notUp) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			errs := []error{fmt.Errorf("ring not up: %s: %w", strings.Join(notUp, "; "), ctx.Err())}
			for _, s := range st {
				if l, ok := starts[s.Node]; ok && s.Err != nil {
					errs = append(errs, &NodeError{Node: s.Node, Err: errors.New("does not answer"), LogTail: r.logTail(s.Node, l.logOffset)})
				}
			}
			return fmt.Errorf("localring: %w", errors.Join(errs...))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
		if k := strings.IndexByte(s, '\n'); k >= 0 && k < len(s)-1 {
			s = s[k+1:] // from a line's start
		}
	}
	return s
}

// Config reads node i's configuration (its node.yaml, with the effective
// values: the CQL address, the commit log sync mode).
func (r Ring) Config(i int) (node.Config, error) {
	if err := r.has(i); err != nil {
		return node.Config{}, err
	}
	c, err := node.LoadConfig(r.configPath(i))
	if err != nil {
		return c, fmt.Errorf("localring: %w", err)
	}
	return c, nil
}

// Pids returns the pids of the ring's running nodes, in node order: an
// error when r.Dir holds no ring or none of its nodes runs.
func (r Ring) Pids() ([]int, error) {
	ns, err := r.Nodes()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, i := range ns {
		if pid, alive := r.pid(i); alive {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("localring: no node of the ring in %s is running", r.Dir)
	}
	return pids, nil
}
