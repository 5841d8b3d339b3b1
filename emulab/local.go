package emulab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemkv/idemkv/node"
)

// NamespacePrefix begins the name of every network namespace the local
// emulation creates: idemkv-<run>-<host>, and idemkv-<run>-<lan> for the
// switch of a LAN. Cleanup removes namespaces by this prefix.
const NamespacePrefix = "idemkv-"

// Shaping of every veth end: tc's token bucket filter at the link's rate.
// The bucket holds a few full-size packets; the queue holds 10 ms of
// traffic at 100 Mb/s (125 kB, about Emulab's 50-packet DropTail queue and
// a half).
const (
	tbfBurst   = "32kb"
	tbfLatency = "10ms"
)

// ErrNotRoot is returned by CheckPrivileges when the process is not root.
var ErrNotRoot = errors.New("emulab: the local emulation needs root")

// CheckPrivileges reports whether this process can build the local
// emulation: it must run as root and find ip and tc (iproute2).
func CheckPrivileges() error { return checkPrivileges(os.Geteuid(), exec.LookPath) }

func checkPrivileges(euid int, lookPath func(string) (string, error)) error {
	if euid != 0 {
		return fmt.Errorf("%w: it creates network namespaces, veth links and tc qdiscs. "+
			"Run it with sudo (effective uid is %d), or write the files for the real testbed "+
			"with \"idemkv emulab ns\"", ErrNotRoot, euid)
	}
	var missing []string
	for _, tool := range []string{"ip", "tc"} {
		if _, err := lookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("emulab: the local emulation needs %s from iproute2 on the PATH (apt-get install iproute2)", strings.Join(missing, " and "))
	}
	return nil
}

var runIDPattern = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// NewRunID returns a fresh random run id.
func NewRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LocalPlan is how a topology is laid out on one machine: a namespace per
// host (and per LAN switch), and the ip and tc commands that build it.
type LocalPlan struct {
	RunID string
	// Namespaces maps each host, and each LAN's switch (by the LAN's
	// name), to its namespace, in creation order in Order.
	Namespaces map[string]string
	Order      []string
	// Setup are the commands, in order, that build the namespaces, links,
	// addresses, shaping and routes.
	Setup [][]string
}

// PlanLocal lays t out on one machine for run runID: namespace
// idemkv-<run>-<host> per host; per point-to-point link a veth pair named
// after the link at both ends; per LAN a namespace holding a bridge, with
// a veth pair per member (named after the LAN on the host, p-<host> on the
// bridge); tbf shaping at the link's rate on every veth end; IP forwarding
// on and reverse-path filtering off in every host namespace; the model's
// static routes. Every address it assigns comes from the model, so from
// TestSubnet.
func PlanLocal(t Topology, runID string) (LocalPlan, error) {
	if !runIDPattern.MatchString(runID) {
		return LocalPlan{}, fmt.Errorf("emulab: run id %q: want 1 to 16 lower-case letters and digits", runID)
	}
	if err := t.Validate(); err != nil {
		return LocalPlan{}, err
	}
	p := LocalPlan{RunID: runID, Namespaces: map[string]string{}}
	ns := func(name string) string { return NamespacePrefix + runID + "-" + name }
	add := func(args ...string) { p.Setup = append(p.Setup, args) }
	newNS := func(name string) {
		p.Namespaces[name] = ns(name)
		p.Order = append(p.Order, name)
		add("ip", "netns", "add", ns(name))
		add("ip", "-n", ns(name), "link", "set", "lo", "up")
	}
	shape := func(n Net, namespace, dev string) {
		add("tc", "-n", namespace, "qdisc", "add", "dev", dev, "root", "tbf",
			"rate", tcRate(n.Bandwidth), "burst", tbfBurst, "latency", tbfLatency)
	}
	for _, h := range t.Hosts {
		newNS(h.Name)
		// Written through /proc inside the namespace: needs only sh.
		add("ip", "netns", "exec", ns(h.Name), "sh", "-c",
			"echo 1 >/proc/sys/net/ipv4/ip_forward && "+
				"echo 0 >/proc/sys/net/ipv4/conf/all/rp_filter && "+
				"echo 0 >/proc/sys/net/ipv4/conf/default/rp_filter")
	}
	for _, n := range t.Nets {
		if n.Delay != 0 {
			return LocalPlan{}, fmt.Errorf("emulab: %s: net %s has a %v delay; the local emulation shapes with tbf only and cannot add delay", t.Name, n.Name, n.Delay)
		}
		if _, clash := p.Namespaces[n.Name]; clash {
			return LocalPlan{}, fmt.Errorf("emulab: %s: net %s has a host's name", t.Name, n.Name)
		}
		if len(n.Name) > 15 || len("p-")+maxHostLen(n) > 15 {
			return LocalPlan{}, fmt.Errorf("emulab: %s: net %s: interface names would pass 15 characters", t.Name, n.Name)
		}
		if !n.LAN {
			a, b := n.Members[0], n.Members[1]
			add("ip", "-n", ns(a.Host), "link", "add", "name", n.Name, "type", "veth", "peer", "name", n.Name, "netns", ns(b.Host))
			for _, m := range n.Members {
				add("ip", "-n", ns(m.Host), "addr", "add", netip4(m.Addr, n), "dev", n.Name)
				add("ip", "-n", ns(m.Host), "link", "set", n.Name, "up")
				shape(n, ns(m.Host), n.Name)
			}
			continue
		}
		newNS(n.Name)
		sw := ns(n.Name)
		add("ip", "-n", sw, "link", "add", "name", "br0", "type", "bridge")
		add("ip", "-n", sw, "link", "set", "br0", "up")
		for _, m := range n.Members {
			port := "p-" + m.Host
			add("ip", "-n", ns(m.Host), "link", "add", "name", n.Name, "type", "veth", "peer", "name", port, "netns", sw)
			add("ip", "-n", sw, "link", "set", port, "master", "br0")
			add("ip", "-n", sw, "link", "set", port, "up")
			shape(n, sw, port)
			add("ip", "-n", ns(m.Host), "addr", "add", netip4(m.Addr, n), "dev", n.Name)
			add("ip", "-n", ns(m.Host), "link", "set", n.Name, "up")
			shape(n, ns(m.Host), n.Name)
		}
	}
	for _, r := range t.Routes {
		add("ip", "-n", ns(r.Host), "route", "add", r.Dest.String(), "via", r.Gateway.String())
	}
	return p, nil
}

// Script returns the setup commands as sh lines, quoted where needed.
func (p LocalPlan) Script() string {
	var b strings.Builder
	for _, c := range p.Setup {
		for i, a := range c {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(shellQuote(a))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func maxHostLen(n Net) int {
	l := 0
	for _, m := range n.Members {
		l = max(l, len(m.Host))
	}
	return l
}

// netip4 is addr with its network's prefix length, as ip addr add wants.
func netip4(a netip.Addr, n Net) string {
	return a.String() + "/" + strconv.Itoa(n.Prefix.Bits())
}

// tcRate is a bandwidth in tc's units.
func tcRate(bps int64) string {
	if bps%Mbps == 0 {
		return strconv.FormatInt(bps/Mbps, 10) + "mbit"
	}
	return strconv.FormatInt(bps, 10) + "bit"
}

// LocalOptions configure a local emulation.
type LocalOptions struct {
	RunID  string // default NewRunID()
	Binary string // the idemkv binary the nodes run; default this executable
	// Dir holds each host's node.yaml, data and log; default
	// <tmp>/idemkv-emulab-<run>.
	Dir string
	// GossipIntervalMS is the nodes' gossip_interval_in_ms (0: the node's
	// default).
	GossipIntervalMS int
	// Log receives progress lines; default io.Discard.
	Log io.Writer
}

// Local is a running local emulation of a topology.
type Local struct {
	Topo   Topology
	Plan   LocalPlan
	Binary string
	Dir    string
	log    io.Writer

	mu        sync.Mutex
	procs     map[string]*exec.Cmd
	exited    map[string]chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// StartLocal builds the emulation of t — namespaces, links, shaping,
// routes — and starts `idemkv node` in every server's namespace. It does not
// wait for the ring (see WaitRing). If it fails, it removes whatever it
// built; otherwise the caller must call Close.
func StartLocal(ctx context.Context, t Topology, o LocalOptions) (*Local, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	if o.RunID == "" {
		o.RunID = NewRunID()
	}
	plan, err := PlanLocal(t, o.RunID)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("emulab: %w", err)
		}
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(os.TempDir(), "idemkv-emulab-"+o.RunID)
	}
	l := &Local{Topo: t, Plan: plan, Binary: o.Binary, Dir: o.Dir, log: o.Log,
		procs: map[string]*exec.Cmd{}, exited: map[string]chan struct{}{}}
	existing, err := listNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range existing {
		if strings.HasPrefix(n, NamespacePrefix+o.RunID+"-") {
			return nil, fmt.Errorf("emulab: namespace %s already exists: run %s is in use (idemkv emulab cleanup --run-id %s)", n, o.RunID, o.RunID)
		}
	}
	fmt.Fprintf(l.log, "building %s as run %s: %d namespaces, %d commands\n", t.Name, o.RunID, len(plan.Order), len(plan.Setup))
	for _, args := range plan.Setup {
		if err := run(ctx, args...); err != nil {
			return nil, errors.Join(err, l.Close())
		}
	}
	if err := l.startNodes(t, o); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

func (l *Local) startNodes(t Topology, o LocalOptions) error {
	var seeds []string
	for _, s := range t.Seeds() {
		seeds = append(seeds, s.Addr.String())
	}
	for _, h := range t.Servers() {
		dir := filepath.Join(l.Dir, h.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("emulab: %w", err)
		}
		c := node.Config{
			ClusterName:         "idemkv-" + t.Name,
			DataDirectory:       filepath.Join(dir, "data"),
			ListenAddress:       h.Addr.String(),
			StoragePort:         StoragePort,
			NativeTransportPort: CQLPort,
			Seeds:               seeds,
			GossipIntervalMS:    o.GossipIntervalMS,
		}
		cfg := filepath.Join(dir, "node.yaml")
		if err := c.Write(cfg); err != nil {
			return fmt.Errorf("emulab: %s: %w", h.Name, err)
		}
		logf, err := os.OpenFile(filepath.Join(dir, "node.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("emulab: %s: %w", h.Name, err)
		}
		cmd := exec.Command("ip", "netns", "exec", l.Plan.Namespaces[h.Name], l.Binary, "node", "--config", cfg)
		cmd.Stdout, cmd.Stderr = logf, logf
		// Its own session: a ^C at the terminal reaches this process, which
		// stops the nodes in order, not the nodes directly.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		logf.Close()
		if err != nil {
			return fmt.Errorf("emulab: start node %s: %w", h.Name, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		l.mu.Lock()
		l.procs[h.Name], l.exited[h.Name] = cmd, done
		l.mu.Unlock()
		if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			return fmt.Errorf("emulab: %w", err)
		}
		fmt.Fprintf(l.log, "started idemkv node %s on %s:%d in %s (pid %d, log %s)\n",
			h.Name, h.Addr, StoragePort, l.Plan.Namespaces[h.Name], cmd.Process.Pid, filepath.Join(dir, "node.log"))
	}
	return nil
}

// Peers are the servers' peer addresses, ip:storage_port.
func (l *Local) Peers() []string {
	var out []string
	for _, s := range l.Topo.Servers() {
		out = append(out, net.JoinHostPort(s.Addr.String(), strconv.Itoa(StoragePort)))
	}
	return out
}

// Hosts are the servers' addresses, for --hosts (CQL on the default port).
func (l *Local) Hosts() []string {
	var out []string
	for _, s := range l.Topo.Servers() {
		out = append(out, s.Addr.String())
	}
	return out
}

// ClientNamespace is the namespace experiments run in.
func (l *Local) ClientNamespace() string { return l.Plan.Namespaces[l.Topo.ClientHost().Name] }

// Command returns a command that runs the idemkv binary with args in the
// client's namespace, with IDEMKV_HOSTS and IDEMKV_PEERS set.
func (l *Local) Command(ctx context.Context, args ...string) *exec.Cmd {
	return l.commandIn(ctx, l.ClientNamespace(), append([]string{l.Binary}, args...)...)
}

// Shell returns a command that runs a sh command line in the client's
// namespace, with IDEMKV (the binary), IDEMKV_HOSTS and IDEMKV_PEERS set.
func (l *Local) Shell(ctx context.Context, script string) *exec.Cmd {
	return l.commandIn(ctx, l.ClientNamespace(), "sh", "-c", script)
}

func (l *Local) commandIn(ctx context.Context, namespace string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", namespace}, args...)...)
	cmd.Env = append(os.Environ(),
		"IDEMKV="+l.Binary,
		"IDEMKV_HOSTS="+strings.Join(l.Hosts(), ","),
		"IDEMKV_PEERS="+strings.Join(l.Peers(), ","))
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// WaitRing waits until every node sees every node up, asking from the
// client's namespace (by running `idemkv emulab wait` there), and fails
// early if a node exits.
func (l *Local) WaitRing(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := l.Command(ctx, "emulab", "wait", "--peers", strings.Join(l.Peers(), ","), "--timeout", timeout.String())
	cmd.Stdout, cmd.Stderr = l.log, l.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("emulab: wait: %w", err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-waitErr:
			if err != nil {
				return fmt.Errorf("emulab: the ring did not come up: %w", err)
			}
			return nil
		case <-tick.C:
			if h, ok := l.exitedNode(); ok {
				cancel()
				<-waitErr
				b, _ := os.ReadFile(filepath.Join(l.Dir, h, "node.log"))
				return fmt.Errorf("emulab: node %s exited; its log ends:\n%s", h, tail(string(b), 2000))
			}
		}
	}
}

func (l *Local) exitedNode() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.Topo.Servers() {
		if ch, ok := l.exited[h.Name]; ok {
			select {
			case <-ch:
				return h.Name, true
			default:
			}
		}
	}
	return "", false
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Close stops every node (SIGTERM, then SIGKILL after 10 s), kills any
// other process left in the run's namespaces and deletes the namespaces,
// which removes their veth links, bridges and qdiscs. It is safe to call
// more than once and does not depend on any context the caller cancelled.
func (l *Local) Close() error {
	l.closeOnce.Do(func() {
		fmt.Fprintf(l.log, "tearing down run %s\n", l.Plan.RunID)
		l.mu.Lock()
		procs := l.procs
		exited := l.exited
		l.mu.Unlock()
		for _, cmd := range procs {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		deadline := time.Now().Add(10 * time.Second)
		for h, ch := range exited {
			timer := time.NewTimer(time.Until(deadline))
			select {
			case <-ch:
			case <-timer.C:
				fmt.Fprintf(l.log, "node %s ignored SIGTERM for 10s: SIGKILL\n", h)
				_ = procs[h].Process.Kill()
				<-ch
			}
			timer.Stop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var errs []error
		for i := len(l.Plan.Order) - 1; i >= 0; i-- {
			errs = append(errs, removeNamespace(ctx, l.Plan.Namespaces[l.Plan.Order[i]], true))
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// removeNamespace kills every process in namespace ns and deletes it. With
// quiet, a namespace that does not exist is not an error.
func removeNamespace(ctx context.Context, ns string, quiet bool) error {
	if out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	} else if quiet {
		return nil // it does not exist (never created, or already gone)
	}
	if err := run(ctx, "ip", "netns", "del", ns); err != nil {
		return err
	}
	return nil
}

// Cleanup removes whatever earlier runs left behind: every namespace whose
// name starts with idemkv-<runID>- (every idemkv- namespace when runID is
// empty), after killing the processes in it. It returns the namespaces it
// removed.
func Cleanup(ctx context.Context, runID string) ([]string, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	prefix := NamespacePrefix
	if runID != "" {
		if !runIDPattern.MatchString(runID) {
			return nil, fmt.Errorf("emulab: run id %q: want 1 to 16 lower-case letters and digits", runID)
		}
		prefix += runID + "-"
	}
	names, err := listNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		if err := removeNamespace(ctx, n, false); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}

// ListNamespaces returns the names of the local emulation's namespaces
// (those starting with NamespacePrefix) that exist now.
func ListNamespaces(ctx context.Context) ([]string, error) {
	all, err := listNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range all {
		if strings.HasPrefix(n, NamespacePrefix) {
			out = append(out, n)
		}
	}
	return out, nil
}

func listNamespaces(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("emulab: ip netns list: %w", err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			names = append(names, f[0]) // "name (id: 3)"
		}
	}
	return names, nil
}

// run runs one setup command, wrapping its output into the error.
func run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("emulab: %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
