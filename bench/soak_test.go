package bench

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSoakParseFlags: designs and offsets are read and checked.
func TestSoakParseFlags(t *testing.T) {
	cfg, err := parseSoakFlags([]string{"--designs", "vanilla, fbf,handoff,reset,borrow", "--counters", "2000",
		"--sample-every", "500", "--after", "0,30s,1m", "--load-limit", "5m", "--quiet", "--gomemlimit", "256MiB"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"vanilla", "fbf", "handoff", "reset", "borrow"}; !reflect.DeepEqual(cfg.Designs, want) {
		t.Errorf("designs %v", cfg.Designs)
	}
	if want := []time.Duration{0, 30 * time.Second, time.Minute}; !reflect.DeepEqual(cfg.After, want) {
		t.Errorf("after %v", cfg.After)
	}
	if cfg.Counters != 2000 || cfg.SampleEvery != 500 || cfg.LoadLimit != 5*time.Minute || cfg.Progress != nil || !cfg.Flush || cfg.MemoryLimit != "256MiB" {
		t.Errorf("config %+v", cfg)
	}
	for _, bad := range [][]string{
		{"--designs", "vanilla,paxos"},
		{"--designs", "fbf,fbf"},
		{"--designs", ","},
		{"--after", "30s,10s"},
		{"--after", "-1s"},
		{"--after", "soon"},
		{"--counters", "0"},
		{"--writers", "-1"},
		{"extra"},
		{"--gomemlimit", "256MB"},
		{"--gomemlimit", "lots"},
		{"--heap-profiles"}, // without --dir
	} {
		if _, err := parseSoakFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	cfg, err = parseSoakFlags([]string{"--after", ""}, io.Discard)
	if err != nil || len(cfg.After) != 0 || cfg.withDefaults().After == nil || len(cfg.withDefaults().After) != 0 {
		t.Errorf("--after '': %v, %v (want no sample after the load)", cfg.After, err)
	}
}

// TestSoakReading: a sample reads VmRSS and RssAnon from a status file and
// the heap, the counter cache and the design's table from the metrics,
// labels included; without metrics the cache is unknown (-1).
func TestSoakReading(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, "status")
	if err := os.WriteFile(status, []byte("Name:\tidemkv\nVmRSS:\t  204800 kB\nRssAnon:\t  180224 kB\nRssFile:\t   24576 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := `# HELP idemkv_cache_entries Entries in a cache, by cache.
# TYPE idemkv_cache_entries gauge
idemkv_cache_entries{cache="counter"} 123456
idemkv_cache_size_bytes{cache="counter"} 5.24288e+07
idemkv_cache_capacity_bytes{cache="counter"} 5.24288e+07
idemkv_cache_evictions_total{cache="counter"} 99 1700000000000
idemkv_table_sstables{keyspace="bench",table="fbf"} 7
idemkv_table_sstables{keyspace="bench",table="vanilla"} 3
idemkv_table_sstable_bytes{keyspace="bench",table="fbf"} 1.048576e+08
idemkv_table_memtable_bytes{keyspace="bench",table="fbf"} 2.097152e+06
go_memstats_heap_inuse_bytes 8.388608e+07
`
	m, err := parseSeries(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	s := soakReading(status, m, "fbf")
	want := SoakSample{RSS: 204800 << 10, Anon: 180224 << 10, Heap: 80 << 20, CacheEntries: 123456, CacheBytes: 50 << 20,
		CacheCapacity: 50 << 20, CacheEvictions: 99, SSTables: 7, SSTableBytes: 100 << 20, MemtableBytes: 2 << 20, OK: true}
	if s != want {
		t.Errorf("sample\n%+v, want\n%+v", s, want)
	}
	s = soakReading(filepath.Join(dir, "gone"), nil, "fbf")
	if s.OK || s.RSS != 0 || s.CacheEntries != -1 || s.CacheBytes != -1 {
		t.Errorf("without the process and metrics: %+v", s)
	}
	loadavg := filepath.Join(dir, "loadavg")
	os.WriteFile(loadavg, []byte("3.52 4.10 4.77 5/1203 99\n"), 0o644)
	if got := loadAvg1(loadavg); got != 3.52 {
		t.Errorf("load %v", got)
	}
}

// TestSoakTable: the table has a row per sample, unknown figures shown as
// such, and a partial run says so.
func TestSoakTable(t *testing.T) {
	r := SoakResult{Design: "vanilla", Counters: 2000, Elapsed: 2 * time.Second, Checked: 3, Dismissed: 4, Limited: true, Samples: []SoakSample{
		{Label: "start", OK: true, RSS: 30 << 20, CacheEntries: 0},
		{Label: "1000", Counters: 1000, At: time.Second, OpsPerS: 1000, OK: true, RSS: 40 << 20, CacheEntries: 1000},
		{Label: "+0s", Counters: 2000, At: 2 * time.Second, RSS: 41 << 20, CacheEntries: -1, CacheBytes: -1},
	}}
	var b strings.Builder
	if err := WriteSoakTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"2000 counters written in 2s (1000 ops/s), 0 ops failed, 4 fresh updates dismissed", "read back 3, 0 wrong", "PARTIAL", "\n1000 ", "     40.0 "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if lines := strings.Count(out, "\n"); lines != 6 {
		t.Errorf("%d lines:\n%s", lines, out)
	}
}
