package metrics

import (
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/internal/testseed"
	"github.com/idemkv/idemkv/transport"
)

type fakeSource struct{ s Snapshot }

func (f fakeSource) MetricsSnapshot() Snapshot { return f.s }

func TestSeriesFromSnapshotAndInstruments(t *testing.T) {
	src := fakeSource{Snapshot{
		Coordinator:  coordinator.Stats{Writes: 7, Dismissed: 2},
		Dedup:        map[string]coltype.DedupStats{"counter": {Dismissed: 3, EstimatedFPP: 0.001}},
		Design:       map[string]map[string]float64{"handoff_counter": {"Slots": 4}},
		Nodes:        []Node{{HostID: "a", Addr: "127.0.0.1:7000", Up: true}, {HostID: "b", Addr: "127.0.0.2:7000"}},
		Tables:       []Table{{Keyspace: "ks", Name: "t", SSTables: 2}},
		HintsPending: map[string]int{"b": 5},
		Caches:       map[string]cellcache.Stats{"counter": {Entries: 3, Pinned: 1, Cost: 720, Bound: 50 << 20, Hits: 9, Misses: 4, Evictions: 2}},
	}}
	m, err := New(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveClient("counter_write", coordinator.Quorum.String(), time.Millisecond, nil)
	m.ObserveClient("counter_write", coordinator.Quorum.String(), time.Millisecond, &coordinator.UnavailableError{})
	m.CounterWrite("counter", nil)
	m.ObserveSync(time.Millisecond)
	m.PeerMessage("coordinator", 17, fmt.Errorf("x: %w", transport.ErrTimeout))
	var nilM *Metrics
	nilM.ObserveClient("read", "ONE", time.Second, nil) // a nil *Metrics records nothing
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		"idemkv_coordinator_writes_total 7\n",
		"idemkv_coordinator_retries_dismissed_total 2\n",
		`idemkv_dedup_dismissed_total{design="counter"} 3` + "\n",
		`idemkv_dedup_estimated_fpp{design="counter"} 0.001` + "\n",
		`idemkv_design_stat{design="handoff_counter",stat="Slots"} 4` + "\n",
		`idemkv_gossip_nodes{state="down"} 1` + "\n",
		`idemkv_table_sstables{keyspace="ks",table="t"} 2` + "\n",
		`idemkv_hints_pending{target="b"} 5` + "\n",
		`idemkv_cache_entries{cache="counter"} 3` + "\n",
		`idemkv_cache_size_bytes{cache="counter"} 720` + "\n",
		`idemkv_cache_capacity_bytes{cache="counter"} 5.24288e+07` + "\n",
		`idemkv_cache_pinned_entries{cache="counter"} 1` + "\n",
		`idemkv_cache_hits_total{cache="counter"} 9` + "\n",
		`idemkv_cache_misses_total{cache="counter"} 4` + "\n",
		`idemkv_cache_evictions_total{cache="counter"} 2` + "\n",
		`idemkv_client_request_latency_seconds_count{consistency="QUORUM",operation="counter_write"} 2` + "\n",
		`idemkv_client_request_failures_total{consistency="QUORUM",error="unavailable",operation="counter_write"} 1` + "\n",
		`idemkv_counter_writes_total{design="counter",result="ok"} 1` + "\n",
		"idemkv_commitlog_sync_latency_seconds_count 1\n",
		`idemkv_messaging_dropped_total{family="coordinator",reason="timeout",type="17"} 1` + "\n",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}
}

func TestErrorClass(t *testing.T) {
	for err, want := range map[error]string{
		&coordinator.WriteTimeoutError{}:                 "timeout",
		fmt.Errorf("w: %w", &coordinator.InvalidError{}): "invalid",
		errors.New("x"): "other",
	} {
		if got := ErrorClass(err); got != want {
			t.Errorf("ErrorClass(%v) = %s, want %s", err, got, want)
		}
	}
}

// TestCachedChildren checks, over seeded random label values, that the
// children cached per label values count what WithLabelValues' would: each
// series ends with the number of calls made with its labels.
func TestCachedChildren(t *testing.T) {
	rng := testseed.Rand(t)
	m, err := New(fakeSource{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ops := []string{"counter_write", "read", "delete"}
	levels := []string{"ONE", "QUORUM", "ALL"}
	families := []string{"gossip", "coordinator", "node"}
	client := map[[2]string]int{}
	failures := map[[3]string]int{}
	peer := map[string]int{}
	for range 2000 {
		op, cl := ops[rng.IntN(len(ops))], levels[rng.IntN(len(levels))]
		var err error
		if rng.IntN(3) == 0 {
			err = &coordinator.WriteTimeoutError{}
			failures[[3]string{op, cl, "timeout"}]++
		}
		m.ObserveClient(op, cl, time.Millisecond, err)
		m.ObserveCQL(op, cl, time.Millisecond, err)
		m.CounterWrite(op+cl, nil)
		client[[2]string{op, cl}]++
		fam, typ := families[rng.IntN(len(families))], rng.IntN(20)
		m.PeerMessage(fam, typ, nil)
		peer[fmt.Sprintf(`family="%s",type="%d"`, fam, typ)]++
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	want := func(s string) {
		t.Helper()
		if !strings.Contains(string(body), s) {
			t.Errorf("no %q", s)
		}
	}
	for k, n := range client {
		want(fmt.Sprintf(`idemkv_client_request_latency_seconds_count{consistency="%s",operation="%s"} %d`+"\n", k[1], k[0], n))
		want(fmt.Sprintf(`idemkv_cql_request_latency_seconds_count{message="%s",statement="%s"} %d`+"\n", k[0], k[1], n))
		want(fmt.Sprintf(`idemkv_counter_writes_total{design="%s",result="ok"} %d`+"\n", k[0]+k[1], n))
	}
	for k, n := range failures {
		want(fmt.Sprintf(`idemkv_client_request_failures_total{consistency="%s",error="%s",operation="%s"} %d`+"\n", k[1], k[2], k[0], n))
		want(fmt.Sprintf(`idemkv_cql_request_errors_total{message="%s",statement="%s"} %d`+"\n", k[0], k[1], n))
	}
	for k, n := range peer {
		want(fmt.Sprintf(`idemkv_messaging_sent_total{%s} %d`+"\n", k, n))
	}
}

// BenchmarkRequestMetrics is what a counter update through CQL records:
// the executor's request, the client request, the counter write and two
// replication messages.
func BenchmarkRequestMetrics(b *testing.B) {
	m, err := New(fakeSource{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveCQL("execute", "update", time.Millisecond, nil)
			m.ObserveClient("counter_write", "QUORUM", time.Millisecond, nil)
			m.CounterWrite("fbf_counter", nil)
			m.PeerMessage("coordinator", 17, nil)
			m.PeerMessage("coordinator", 17, nil)
		}
	})
}
