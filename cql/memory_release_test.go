package cql

import (
	"testing"
	"time"
)

// noMemoryLoop keeps the servers the test starts from looking at the
// clock themselves: the test calls releaseMemory.
func noMemoryLoop(t *testing.T) {
	saved := memoryCheck
	memoryCheck = time.Hour
	t.Cleanup(func() { memoryCheck = saved })
}

// TestMemoryReleaseAfterAStorm: memory is given back once the connections
// open fall under a quarter of a peak of at least MemoryReleasePeak, at
// most once per MemoryReleaseInterval, and not for a smaller peak nor
// while the connections stay. The clock and the release are the test's.
func TestMemoryReleaseAfterAStorm(t *testing.T) {
	noMemoryLoop(t)
	s, _ := startServer(t, ServerConfig{MemoryReleasePeak: 100, MemoryReleaseInterval: time.Minute})
	released := 0
	s.freeOSMemory = func() { released++ }
	now := time.Unix(1_000_000, 0)
	open := func(n int) {
		for range n {
			if _, ok := s.admit("10.0.0.1"); !ok {
				t.Fatal("admit refused")
			}
		}
	}
	closeConns := func(n int) {
		for range n {
			s.leave("10.0.0.1")
		}
	}
	check := func(what string, want int) {
		t.Helper()
		s.releaseMemory(now)
		if released != want {
			t.Fatalf("%s: %d releases, want %d", what, released, want)
		}
		if got := s.Stats().MemoryReleases; got != int64(want) {
			t.Fatalf("%s: Stats().MemoryReleases %d, want %d", what, got, want)
		}
	}

	open(99)
	closeConns(99)
	check("a peak under MemoryReleasePeak", 0)

	open(120)
	check("connections still open", 0)
	closeConns(90) // 30 open: not under a quarter of 120
	check("30 of 120 open", 0)
	closeConns(1) // 29
	check("29 of 120 open", 1)
	now = now.Add(time.Minute - time.Second)
	check("the follow-up before the interval", 1)
	now = now.Add(time.Second)
	check("the follow-up", 2)
	now = now.Add(2 * time.Minute)
	check("no storm since", 2)

	// A second storm within the interval waits for it; a storm in
	// progress holds the follow-up back.
	open(200) // 229 open
	closeConns(200)
	now = now.Add(time.Second)
	s.released = now.Add(-30 * time.Second)
	check("within the interval", 2)
	now = now.Add(30 * time.Second)
	check("the interval over", 3)
	check("released already", 3)
	open(150) // 179 open, a storm in progress
	now = now.Add(time.Minute)
	check("the follow-up during another storm", 3)
	closeConns(150)
	check("the other storm over", 4)
}

// TestMemoryReleaseOff: with MemoryReleasePeak < 0, no storm releases.
func TestMemoryReleaseOff(t *testing.T) {
	noMemoryLoop(t)
	s, _ := startServer(t, ServerConfig{MemoryReleasePeak: -1})
	released := 0
	s.freeOSMemory = func() { released++ }
	for range 300 {
		s.admit("10.0.0.1")
	}
	for range 300 {
		s.leave("10.0.0.1")
	}
	if s.releaseMemory(time.Unix(1_000_000, 0)) || released != 0 {
		t.Fatalf("released %d times with MemoryReleasePeak -1", released)
	}
}
