package emulab

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests below build real namespaces, links and node processes. They
// run only with IDEMKV_EMULAB=1, as root, with ip and tc.
func needEmulation(t *testing.T) {
	t.Helper()
	if os.Getenv("IDEMKV_EMULAB") != "1" {
		t.Skip("set IDEMKV_EMULAB=1 (as root) to build real namespaces and links")
	}
	if err := CheckPrivileges(); err != nil {
		t.Skip(err)
	}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// idemkvBinary builds the idemkv command once for the tests of this run.
func idemkvBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idemkv-emulab-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "idemkv")
		out, err := exec.Command("go", "build", "-o", builtBin, "github.com/idemkv/idemkv/cmd/idemkv").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build idemkv: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

func testRunID(tag string) string {
	return fmt.Sprintf("t%s%d", tag, os.Getpid()%100000)
}

// checkNothingLeft fails if any namespace of run is left, or any process
// whose pid is in pids is alive.
func checkNothingLeft(t *testing.T, runID string, pids []int) {
	t.Helper()
	left, err := ListNamespaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range left {
		if strings.HasPrefix(n, NamespacePrefix+runID+"-") {
			t.Errorf("namespace %s left behind", n)
		}
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("node process %d still running", pid)
		}
	}
}

func (l *Local) pids() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, c := range l.procs {
		out = append(out, c.Process.Pid)
	}
	return out
}

// TestLocalStar4 brings up the paper's star (4 nodes and a client on one
// shaped LAN), waits for the ring from the client's namespace, checks the
// shaping and that CQL answers across the LAN, and tears down.
func TestLocalStar4(t *testing.T) {
	needEmulation(t)
	bin := idemkvBinary(t)
	topo, _ := ByName("star4")
	runID := testRunID("s")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log strings.Builder
	l, err := StartLocal(ctx, topo, LocalOptions{RunID: runID, Binary: bin, Dir: t.TempDir(), GossipIntervalMS: 200, Log: &syncWriter{w: &log}})
	if err != nil {
		t.Fatal(err)
	}
	pids := l.pids()
	defer func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		checkNothingLeft(t, runID, pids)
		t.Logf("log:\n%s", log.String())
	}()
	if len(pids) != 4 {
		t.Fatalf("%d node processes", len(pids))
	}
	if err := l.WaitRing(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tc", "-n", l.ClientNamespace(), "qdisc", "show", "dev", "lan0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "rate 100Mbit") {
		t.Errorf("client's shaping: %s %v", out, err)
	}
	cql := l.Command(ctx, "cql", "--host", l.Hosts()[0], "-e", "SELECT peer FROM system.peers;")
	out, err = cql.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "(3 rows)") {
		t.Errorf("CQL from the client namespace to n1: %v\n%s", err, out)
	}
}

// TestLocalRing10Routes builds the paper's ring and follows the kernel's
// own routing (ip route get, hop by hop) from every host to every server's
// address: the paths must be the model's shortest paths.
func TestLocalRing10Routes(t *testing.T) {
	needEmulation(t)
	bin := idemkvBinary(t)
	topo, _ := ByName("ring10")
	runID := testRunID("r")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := StartLocal(ctx, topo, LocalOptions{RunID: runID, Binary: bin, Dir: t.TempDir(), GossipIntervalMS: 200})
	if err != nil {
		t.Fatal(err)
	}
	pids := l.pids()
	defer func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		checkNothingLeft(t, runID, pids)
	}()
	owner := map[netip.Addr]string{}
	for _, n := range topo.Nets {
		for _, m := range n.Members {
			owner[m.Addr] = m.Host
		}
	}
	for _, from := range topo.Hosts {
		for _, to := range topo.Servers() {
			want, err := topo.Path(from.Name, to.Addr)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{from.Name}
			for cur := from.Name; cur != to.Name && len(got) <= len(topo.Hosts); {
				out, err := exec.Command("ip", "-n", l.Plan.Namespaces[cur], "route", "get", to.Addr.String()).Output()
				if err != nil {
					t.Fatalf("ip route get in %s: %v", cur, err)
				}
				f := strings.Fields(string(out))
				next := to.Name
				if i := indexOf(f, "via"); i >= 0 {
					next = owner[netip.MustParseAddr(f[i+1])]
				} else if f[0] == "local" {
					next = cur
				}
				cur = next
				got = append(got, cur)
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s → %s: the kernel goes %v, the model %v", from.Name, to.Name, got, want)
			}
		}
	}
	if err := l.WaitRing(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestLocalInterrupted runs `idemkv emulab local star4` with a long
// experiment, interrupts it with SIGINT, and checks that it tore everything
// down.
func TestLocalInterrupted(t *testing.T) {
	needEmulation(t)
	bin := idemkvBinary(t)
	runID := testRunID("i")
	cmd := exec.Command(bin, "emulab", "local", "star4", "--run-id", runID, "--gossip-ms", "200", "--dir", t.TempDir(), "--exec", "sleep 60")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	var lines []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		var host, addr, ns string
		var pid int
		if _, err := fmt.Sscanf(line, "started idemkv node %s on %s in %s (pid %d,", &host, &addr, &ns, &pid); err == nil {
			pids = append(pids, pid)
		}
		if strings.HasPrefix(line, "running in ") {
			time.Sleep(500 * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGINT)
		}
	}
	err = cmd.Wait()
	t.Logf("output:\n%s", strings.Join(lines, "\n"))
	if err == nil {
		t.Error("an interrupted run exited 0")
	}
	if len(pids) != 4 {
		t.Errorf("saw %d node pids", len(pids))
	}
	if !strings.Contains(strings.Join(lines, "\n"), "run "+runID+" removed") {
		t.Error("no teardown reported")
	}
	checkNothingLeft(t, runID, pids)
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
