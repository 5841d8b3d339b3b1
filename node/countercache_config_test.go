package node

import (
	"testing"

	"github.com/idemkv/idemkv/replica"
	"github.com/idemkv/idemkv/vfs"
)

// checkSizeKey parses each configuration of cases and checks that the
// key is honoured (not ignored) and that get reads the wanted value from
// the effective configuration.
func checkSizeKey(t *testing.T, key string, get func(Config) int, cases map[string]int) {
	t.Helper()
	for in, want := range cases {
		c, err := ParseConfig([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if len(c.IgnoredKeys) > 0 {
			t.Errorf("%q: ignored %v", in, c.IgnoredKeys)
		}
		eff, err := c.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if got := get(eff); got != want {
			t.Errorf("%q: %s %d, want %d", in, key, got, want)
		}
	}
}

// TestCounterCacheSizeConfig: counter_cache_size_in_mb and Cassandra 4.1's
// counter_cache_size set the cell cache's bound; a negative size is none.
func TestCounterCacheSizeConfig(t *testing.T) {
	checkSizeKey(t, "counter_cache_size_in_mb", func(c Config) int { return c.CounterCacheSizeMB }, map[string]int{
		"data_directory: /x\n":                               0,
		"data_directory: /x\ncounter_cache_size_in_mb: 8\n":  8,
		"data_directory: /x\ncounter_cache_size: 16MiB\n":    16,
		"data_directory: /x\ncounter_cache_size_in_mb: -5\n": -1,
	})
	if _, err := ParseConfig([]byte("counter_cache_size_in_mb: 8\ncounter_cache_size: 8MiB\n")); err == nil {
		t.Error("both names set: no error")
	}
}

// TestMemtableHeapSpaceConfig: memtable_heap_space_in_mb and Cassandra
// 4.1's memtable_heap_space are honoured (no longer ignored) and reach the
// replica's bound on all memtables; a negative size is none.
func TestMemtableHeapSpaceConfig(t *testing.T) {
	checkSizeKey(t, "memtable_heap_space_in_mb", func(c Config) int { return c.MemtableHeapSpaceMB }, map[string]int{
		"data_directory: /x\n":                                 0,
		"data_directory: /x\nmemtable_heap_space_in_mb: 128\n": 128,
		"data_directory: /x\nmemtable_heap_space: 256MiB\n":    256,
		"data_directory: /x\nmemtable_heap_space_in_mb: -3\n":  -1,
		"data_directory: /x\nmemtable_heap_space_in_mb:\n":     0,
	})
}

// TestCommitLogTotalSpaceConfig: commitlog_total_space_in_mb and Cassandra
// 4.1's commitlog_total_space are honoured and reach the replica's bound on
// the commit log: a size in bytes, -1 for none, and for 0 Cassandra's
// default on the machine's filesystem (at most 8 GiB) or the replica's own
// on another.
func TestCommitLogTotalSpaceConfig(t *testing.T) {
	checkSizeKey(t, "commitlog_total_space_in_mb", func(c Config) int { return c.CommitLogTotalSpaceMB }, map[string]int{
		"data_directory: /x\n": 0,
		"data_directory: /x\ncommitlog_total_space_in_mb: 100\n": 100,
		"data_directory: /x\ncommitlog_total_space: 1GiB\n":      1024,
		"data_directory: /x\ncommitlog_total_space_in_mb: -5\n":  -1,
		"data_directory: /x\ncommitlog_total_space_in_mb:\n":     0,
	})
	dir := t.TempDir()
	for _, c := range []struct {
		mb   int
		fs   vfs.FS
		want func(int64) bool
	}{
		{100, vfs.Default, func(n int64) bool { return n == 100<<20 }},
		{-1, vfs.Default, func(n int64) bool { return n == -1 }},
		{0, vfs.NewMem(), func(n int64) bool { return n == 0 }},
		{0, vfs.Default, func(n int64) bool { return n >= 1<<20 && n <= replica.DefaultCommitLogSpaceBytes }},
	} {
		if got := commitLogSpace(Config{DataDirectory: dir, CommitLogTotalSpaceMB: c.mb}, c.fs); !c.want(got) {
			t.Errorf("commitlog_total_space_in_mb %d on %T: bound %d", c.mb, c.fs, got)
		}
	}
}
