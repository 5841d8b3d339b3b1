// Package localring runs a ring of real idemkv node processes on one
// machine, in the manner of ccm: node i listens on 127.0.0.i, keeps its
// configuration, data, log and pid under Dir/node<i>, and the processes
// outlive the command that started them until Stop or Kill.
package localring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	return out, nil
}

// Up creates the nodes' configurations and starts them, then waits until
// every node sees every other up.
func (r Ring) Up(ctx context.Context, o UpOptions) error {
	if o.Nodes < 1 || o.Nodes > 254 {
		return fmt.Errorf("localring: %d nodes: want 1..254", o.Nodes)
	}
	if _, err := os.Stat(r.Dir); err == nil {
		if ns, _ := r.Nodes(); len(ns) > 0 {
			return fmt.Errorf("localring: %s already holds a ring; stop it and remove the directory, or use another --dir", r.Dir)
		}
	}
	for i := 1; i <= o.Nodes; i++ {
		c := node.Config{
			ClusterName:   "idemkv-local",
			DataDirectory: filepath.Join(r.NodeDir(i), "data"),
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
			return fmt.Errorf("localring: %w", err)
		}
		if err := c.Write(filepath.Join(r.NodeDir(i), "node.yaml")); err != nil {
			return fmt.Errorf("localring: %w", err)
		}
	}
	for i := 1; i <= o.Nodes; i++ {
		if err := r.Start(i); err != nil {
			return err
		}
	}
	return r.WaitUp(ctx)
}

// Start starts node i's process from its configuration.
func (r Ring) Start(i int) error {
	if pid, alive := r.pid(i); alive {
		return fmt.Errorf("localring: node %d is already running (pid %d)", i, pid)
	}
	bin, err := r.binary()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(r.NodeDir(i), "node.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localring: node %d log: %w", i, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "node", "--config", filepath.Join(r.NodeDir(i), "node.yaml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive this command
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localring: start node %d: %w", i, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return os.WriteFile(filepath.Join(r.NodeDir(i), "pid"), []byte(strconv.Itoa(pid)), 0o644)
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
	// A zombie (exited, not reaped because its parent is gone) is not alive.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return false
		}
	}
	return true
}

// Kill sends SIGKILL to node i.
func (r Ring) Kill(i int) error {
	pid, alive := r.pid(i)
	if !alive {
		return fmt.Errorf("localring: node %d is not running", i)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("localring: kill node %d: %w", i, err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !processAlive(pid) {
			return nil
		}
	}
	return fmt.Errorf("localring: node %d (pid %d) survived SIGKILL", i, pid)
}

// Stop stops every node: SIGTERM (a clean shutdown, announced to peers),
// then SIGKILL for any still running after the grace period.
func (r Ring) Stop(grace time.Duration) error {
	ns, err := r.Nodes()
	if err != nil {
		return err
	}
	var pids []int
	for _, i := range ns {
		if pid, alive := r.pid(i); alive {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			pids = append(pids, pid)
		}
	}
	deadline := time.Now().Add(grace)
	for _, pid := range pids {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if processAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	var errs []error
	for _, pid := range pids {
		for end := time.Now().Add(5 * time.Second); processAlive(pid) && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if processAlive(pid) {
			errs = append(errs, fmt.Errorf("localring: pid %d still running", pid))
		}
	}
	return errors.Join(errs...)
}

// NodeStatus is one node's line of the ring status.
type NodeStatus struct {
	Node    int
	Addr    string
	PID     int
	Running bool
	// View is the node's own view of the ring (nil when it did not answer).
	View []node.PeerStatus
	Err  error
}

// Status asks every running node for its view of the ring.
func (r Ring) Status(ctx context.Context) ([]NodeStatus, error) {
	ns, err := r.Nodes()
	if err != nil {
		return nil, err
	}
	client, err := node.NewClient()
	if err != nil {
		return nil, err
	}
	defer client.Close()
	var out []NodeStatus
	for _, i := range ns {
		st := NodeStatus{Node: i, Addr: net.JoinHostPort(Address(i), "7000")}
		st.PID, st.Running = r.pid(i)
		if c, err := node.LoadConfig(filepath.Join(r.NodeDir(i), "node.yaml")); err == nil {
			st.Addr = net.JoinHostPort(c.ListenAddress, strconv.Itoa(max(c.StoragePort, 7000)))
		}
		if st.Running {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st.View, st.Err = client.Status(qctx, st.Addr)
			cancel()
		}
		out = append(out, st)
	}
	return out, nil
}

// WaitUp waits until every node is running and sees every node up.
func (r Ring) WaitUp(ctx context.Context) error {
	for {
		st, err := r.Status(ctx)
		if err != nil {
			return err
		}
		ready := true
		for _, s := range st {
			if !s.Running {
				log, _ := os.ReadFile(filepath.Join(r.NodeDir(s.Node), "node.log"))
				return fmt.Errorf("localring: node %d exited; its log ends:\n%s", s.Node, tail(string(log), 2000))
			}
			up := 0
			for _, p := range s.View {
				if p.Up {
					up++
				}
			}
			if s.Err != nil || up < len(st) {
				ready = false
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localring: ring not up: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
