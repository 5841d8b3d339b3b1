package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/node"
)

// StormMem is the node's Go memory, split as the runtime accounts it: from
// runtime.MemStats for an embedded node, from the go_memstats_* series of
// its admin endpoint for a node process. Bytes.
type StormMem struct {
	HeapInuse           int64 // spans holding objects
	HeapIdleNotReturned int64 // idle spans the runtime keeps (HeapIdle - HeapReleased)
	Stacks              int64 // goroutine stacks (StackSys)
	RuntimeOther        int64 // span and cache metadata, profiling buckets, the rest (OtherSys+MSpanSys+MCacheSys+BuckHashSys)
	GCMeta              int64 // the collector's metadata (GCSys)
}

func memOf(ms *runtime.MemStats) StormMem {
	return StormMem{HeapInuse: int64(ms.HeapInuse), HeapIdleNotReturned: int64(ms.HeapIdle - ms.HeapReleased),
		Stacks: int64(ms.StackSys), RuntimeOther: int64(ms.OtherSys + ms.MSpanSys + ms.MCacheSys + ms.BuckHashSys),
		GCMeta: int64(ms.GCSys)}
}

// stormNode is the node under the storm, embedded in this process or a
// process of its own.
type stormNode interface {
	// rss is the node's resident set size in bytes (VmRSS).
	rss() int64
	// split is its anonymous and file-backed parts.
	split() rssSplit
	// cpu is the CPU time the node's process used so far, user and
	// system.
	cpu() time.Duration
	// sample reads the node's CQL server counters, its Go memory and its
	// goroutines; ok is false when they cannot be had.
	sample() (st cql.Stats, mem StormMem, goroutines int, ok bool)
	stop() error
}

// vmRSS reads VmRSS from a /proc/<pid>/status file, in bytes; 0 if it
// cannot.
func vmRSS(path string) int64 { return statusField(path, "VmRSS") }

// statusField reads a field in kB of a /proc/<pid>/status file, in bytes;
// 0 if it cannot.
func statusField(path, name string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// rssSplit is a process's resident memory split into anonymous memory
// (the heap, stacks, the runtime's) and file pages (the binary's).
type rssSplit struct{ Anon, File int64 }

func readRSSSplit(status string) rssSplit {
	return rssSplit{Anon: statusField(status, "RssAnon"), File: statusField(status, "RssFile")}
}

// embeddedNode is a node running in this process.
type embeddedNode struct{ n *node.Node }

func (e embeddedNode) rss() int64         { return vmRSS("/proc/self/status") }
func (e embeddedNode) split() rssSplit    { return readRSSSplit("/proc/self/status") }
func (e embeddedNode) cpu() time.Duration { return procCPU("/proc/self/stat") }

func (e embeddedNode) sample() (cql.Stats, StormMem, int, bool) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return e.n.CQLStats(), memOf(&ms), runtime.NumGoroutine(), true
}

func (e embeddedNode) stop() error { return e.n.Stop() }

// nodeProcess is a node started as a process of its own ('idemkv node'),
// its output going to a log file.
type nodeProcess struct {
	cmd     *exec.Cmd
	status  string // /proc/<pid>/status
	metrics string // the admin endpoint's metrics URL
	logPath string
	exited  chan struct{} // closed when the process has exited
	waitErr error
	client  *http.Client
}

// freeTCPPort is a port free on 127.0.0.1 now.
func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: storm: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startNodeProcess writes nc (its data directory, address and ports set)
// to dir/node.yaml and starts 'bin node --config dir/node.yaml', its output
// in dir/node.log, then waits until its CQL port accepts connections. The
// process is killed if this one dies (Linux's parent-death signal). env
// ("NAME=value") is added to this process's environment for it.
func startNodeProcess(ctx context.Context, bin, dir string, nc node.Config, env ...string) (*nodeProcess, error) {
	cfgPath := filepath.Join(dir, "node.yaml")
	if err := nc.Write(cfgPath); err != nil {
		return nil, fmt.Errorf("bench: storm: node configuration: %w", err)
	}
	logPath := filepath.Join(dir, "node.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("bench: storm: node log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "node", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: storm: start node %s: %w", bin, err)
	}
	p := &nodeProcess{cmd: cmd, status: fmt.Sprintf("/proc/%d/status", cmd.Process.Pid),
		metrics: fmt.Sprintf("http://%s/metrics", net.JoinHostPort(nc.ListenAddress, strconv.Itoa(nc.AdminPort))),
		logPath: logPath, exited: make(chan struct{}), client: &http.Client{Timeout: 5 * time.Second}}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", nc.CQLAddr(), time.Second)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("bench: storm: the node exited (%v) before serving CQL; its log ends:\n%s", p.waitErr, p.logTail())
		case <-ctx.Done():
			p.stop()
			return nil, fmt.Errorf("bench: storm: waiting for the node: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("bench: storm: the node serves no CQL on %s after 60 s; its log ends:\n%s", nc.CQLAddr(), p.logTail())
		}
	}
}

// logTail is the end of the node's log.
func (p *nodeProcess) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (p *nodeProcess) rss() int64      { return vmRSS(p.status) }
func (p *nodeProcess) split() rssSplit { return readRSSSplit(p.status) }
func (p *nodeProcess) cpu() time.Duration {
	return procCPU(strings.TrimSuffix(p.status, "status") + "stat")
}

// procCPU reads the user and system time of a /proc/<pid>/stat file (in
// clock ticks of 10 ms, Linux's USER_HZ); 0 if it cannot.
func procCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis (field 3, the state).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// scrape reads the node's metrics: the series without labels, by name.
func (p *nodeProcess) scrape() (map[string]float64, error) {
	resp, err := p.client.Get(p.metrics)
	if err != nil {
		return nil, fmt.Errorf("bench: storm: metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: storm: metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads Prometheus text exposition: the value of every series
// without labels, by name.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		val, _, _ = strings.Cut(val, " ") // a timestamp
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: storm: metrics: %w", err)
	}
	return out, nil
}

// statsFromMetrics rebuilds the CQL server's counters, the Go memory and
// the goroutines from a node's metrics (package metrics' idemkv_cql_*
// series and the Go collector's).
func statsFromMetrics(m map[string]float64) (cql.Stats, StormMem, int) {
	i := func(name string) int64 { return int64(m[name]) }
	c := func(name string) int64 { return i("idemkv_cql_" + name) }
	st := cql.Stats{
		ConnectionsOpen: c("connections"), ConnectionsAccepted: c("connections_accepted_total"),
		ConnectionsRefused: c("connections_refused_total"), AcceptErrors: c("accept_errors_total"),
		RequestsInFlight: c("requests_in_flight"), RequestBytesInFlight: c("request_bytes_in_flight"),
		PeakRequestBytesInFlight: c("request_bytes_in_flight_peak"), QueuedResponseBytes: c("queued_response_bytes"),
		ReadsPausedNow: c("reads_paused"), ReadPauses: c("read_pauses_total"), FramesTooLarge: c("frames_too_large_total"),
		IdleTimeouts: c("idle_timeouts_total"), HalfFrameTimeouts: c("half_frame_timeouts_total"),
		WriteTimeouts: c("write_timeouts_total"), EventOverflows: c("event_overflows_total"),
	}
	mem := StormMem{
		HeapInuse:           i("go_memstats_heap_inuse_bytes"),
		HeapIdleNotReturned: i("go_memstats_heap_idle_bytes") - i("go_memstats_heap_released_bytes"),
		Stacks:              i("go_memstats_stack_sys_bytes"),
		RuntimeOther: i("go_memstats_other_sys_bytes") + i("go_memstats_mspan_sys_bytes") +
			i("go_memstats_mcache_sys_bytes") + i("go_memstats_buck_hash_sys_bytes"),
		GCMeta: i("go_memstats_gc_sys_bytes"),
	}
	return st, mem, int(i("go_goroutines"))
}

func (p *nodeProcess) sample() (cql.Stats, StormMem, int, bool) {
	m, err := p.scrape()
	if err != nil {
		return cql.Stats{}, StormMem{}, 0, false
	}
	st, mem, g := statsFromMetrics(m)
	return st, mem, g, true
}

// memoryReleaseLog is the message the CQL server logs when it gives memory
// back after a storm (cql.Server's releaseMemory).
const memoryReleaseLog = "released memory to the OS after a storm of connections"

// countLog counts the lines of the node's log that contain s.
func (p *nodeProcess) countLog(s string) int {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// stop ends the node with SIGTERM, and SIGKILL after 15 s.
func (p *nodeProcess) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("bench: storm: stop node: %w", err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(15 * time.Second):
	}
	p.cmd.Process.Kill()
	<-p.exited
	return errors.New("bench: storm: the node did not stop within 15 s of SIGTERM and was killed")
}
