package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStormMetricsParse: the node's Prometheus text is read into the CQL
// server's counters and the Go memory; series with labels, comments and
// timestamps are handled.
func TestStormMetricsParse(t *testing.T) {
	text := `# HELP idemkv_cql_connections CQL connections being served.
# TYPE idemkv_cql_connections gauge
idemkv_cql_connections 2011
idemkv_cql_connections_accepted_total 83723
idemkv_cql_frames_too_large_total 3557 1700000000000
idemkv_cql_request_latency_seconds_bucket{message="execute",statement="update",le="5e-05"} 12
go_goroutines 4035
go_memstats_heap_inuse_bytes 2.76e+07
go_memstats_heap_idle_bytes 6e+06
go_memstats_heap_released_bytes 1e+06
go_memstats_stack_sys_bytes 1.27e+07
go_memstats_other_sys_bytes 1e+06
go_memstats_mspan_sys_bytes 2e+06
go_memstats_mcache_sys_bytes 3e+05
go_memstats_buck_hash_sys_bytes 5e+05
go_memstats_gc_sys_bytes 3.5e+06
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["idemkv_cql_request_latency_seconds_bucket"]; ok {
		t.Error("a series with labels was read")
	}
	st, mem, g := statsFromMetrics(m)
	if st.ConnectionsOpen != 2011 || st.ConnectionsAccepted != 83723 || st.FramesTooLarge != 3557 {
		t.Errorf("stats %+v", st)
	}
	if g != 4035 {
		t.Errorf("goroutines %d", g)
	}
	want := StormMem{HeapInuse: 27_600_000, HeapIdleNotReturned: 5_000_000, Stacks: 12_700_000, RuntimeOther: 3_800_000, GCMeta: 3_500_000}
	if mem != want {
		t.Errorf("memory %+v, want %+v", mem, want)
	}
}

// TestStormProcFiles: VmRSS, RssAnon and RssFile from a status file, the
// CPU time from a stat file whose command name holds spaces and a
// parenthesis.
func TestStormProcFiles(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, "status")
	os.WriteFile(status, []byte("Name:\tidemkv\nVmRSS:\t   31744 kB\nRssAnon:\t   10880 kB\nRssFile:\t   20864 kB\n"), 0o644)
	if got := vmRSS(status); got != 31744<<10 {
		t.Errorf("VmRSS %d", got)
	}
	if sp := readRSSSplit(status); sp.Anon != 10880<<10 || sp.File != 20864<<10 {
		t.Errorf("split %+v", sp)
	}
	if got := vmRSS(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("missing file: %d", got)
	}
	stat := filepath.Join(dir, "stat")
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
	os.WriteFile(stat, []byte("1234 (idem kv) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 556 131 0 0 20 0 12 0\n"), 0o644)
	if got := procCPU(stat); got != 6870*time.Millisecond {
		t.Errorf("CPU %v, want 6.87s", got)
	}
}
