package node

import "testing"

// TestCounterCacheSizeConfig: counter_cache_size_in_mb and Cassandra 4.1's
// counter_cache_size set the cell cache's bound; a negative size is none.
func TestCounterCacheSizeConfig(t *testing.T) {
	for in, want := range map[string]int{
		"data_directory: /x\n":                               0,
		"data_directory: /x\ncounter_cache_size_in_mb: 8\n":  8,
		"data_directory: /x\ncounter_cache_size: 16MiB\n":    16,
		"data_directory: /x\ncounter_cache_size_in_mb: -5\n": -1,
	} {
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
		if eff.CounterCacheSizeMB != want {
			t.Errorf("%q: counter_cache_size_in_mb %d, want %d", in, eff.CounterCacheSizeMB, want)
		}
	}
	if _, err := ParseConfig([]byte("counter_cache_size_in_mb: 8\ncounter_cache_size: 8MiB\n")); err == nil {
		t.Error("both names set: no error")
	}
}

// TestMemtableHeapSpaceConfig: memtable_heap_space_in_mb and Cassandra
// 4.1's memtable_heap_space are honoured (no longer ignored) and reach the
// replica's bound on all memtables; a negative size is none.
func TestMemtableHeapSpaceConfig(t *testing.T) {
	for in, want := range map[string]int{
		"data_directory: /x\n":                                 0,
		"data_directory: /x\nmemtable_heap_space_in_mb: 128\n": 128,
		"data_directory: /x\nmemtable_heap_space: 256MiB\n":    256,
		"data_directory: /x\nmemtable_heap_space_in_mb: -3\n":  -1,
		"data_directory: /x\nmemtable_heap_space_in_mb:\n":     0,
	} {
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
		if eff.MemtableHeapSpaceMB != want {
			t.Errorf("%q: memtable_heap_space_in_mb %d, want %d", in, eff.MemtableHeapSpaceMB, want)
		}
	}
}
