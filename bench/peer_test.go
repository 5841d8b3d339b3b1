package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseMainCassandraHosts(t *testing.T) {
	m, err := parseMain([]string{"--modes", "vanilla,fbf", "--rf", "3", "--cl", "one", "--cassandra-hosts", "127.0.1.1, 127.0.1.2:9043"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.1.1:9042", "127.0.1.2:9043"}; strings.Join(m.peer, ",") != strings.Join(want, ",") {
		t.Fatalf("peer hosts %v, want %v", m.peer, want)
	}
	for _, cfg := range []Config{m.oc, m.lat} {
		p := PeerConfig(cfg, m.peer)
		if len(p.Modes) != 1 || p.Modes[0] != ModeVanilla || p.RF != 2 || p.Consistency != cfg.Consistency ||
			p.Seed != cfg.Seed || p.Faults != cfg.Faults || p.Duration != cfg.Duration || p.Clients != cfg.Clients {
			t.Fatalf("%s: peer config %+v from %+v", cfg.Name, p, cfg)
		}
	}
	if m.oc.Faults.LostAck == 0 || m.lat.Faults != (Faults{}) {
		t.Fatalf("faults: over-count %+v, latency %+v", m.oc.Faults, m.lat.Faults)
	}
	if m, err := parseMain(nil, io.Discard); err != nil || len(m.peer) != 0 {
		t.Fatalf("no --cassandra-hosts: %v, %v", m, err)
	}
	for _, bad := range [][]string{{"--proxy"}, {"--kill-every", "5s"}, {"--pause-every", "5s"}} {
		if _, err := parseMain(append([]string{"--cassandra-hosts", "127.0.1.1"}, bad...), io.Discard); err == nil {
			t.Errorf("--cassandra-hosts with %v accepted", bad)
		}
	}
}

func TestMergePeerRows(t *testing.T) {
	rep := &Report{Name: "overcount", Config: ReportConfig{Ring: "embedded", Nodes: 1, RF: 1, Consistency: "QUORUM", FaultSide: "client"},
		Modes:   []ModeResult{{Mode: ModeVanilla, Expected: 10}, {Mode: ModeFBF, Expected: 10}},
		Faults:  map[string]int{FaultClientLostAck: 2},
		Horizon: HorizonCheck{Retries: 2, MaxRetryAfterMS: 5, AllWithin: true, HorizonMS: 10000}}
	peer := &Report{Config: ReportConfig{Ring: "hosts", Hosts: []string{"127.0.1.1:9042"}, RF: 1, Consistency: "QUORUM", FaultSide: "client"},
		Modes:   []ModeResult{{Mode: ModeVanilla, Expected: 9, Overcount: 2}},
		Faults:  map[string]int{FaultClientLostAck: 3},
		Series:  []Sample{{Mode: ModeVanilla}},
		Horizon: HorizonCheck{Retries: 3, MaxRetryAfterMS: 7, AllWithin: true}}
	MergePeer(rep, peer, PeerName)
	if len(rep.Modes) != 3 || rep.Modes[2].Mode != "cassandra vanilla" || rep.Modes[2].Overcount != 2 {
		t.Fatalf("modes %+v", rep.Modes)
	}
	if rep.Faults[FaultClientLostAck] != 5 || rep.Horizon.Retries != 5 || rep.Horizon.MaxRetryAfterMS != 7 || rep.Series[0].Mode != "cassandra vanilla" {
		t.Fatalf("merged faults %v, horizon %+v, series %+v", rep.Faults, rep.Horizon, rep.Series)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"cassandra vanilla", "faults injected client-side", "cassandra rows: ring at 127.0.1.1:9042"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if _, ok := rep.Mode(ModeFBF); !ok {
		t.Error("fbf row lost")
	}
}

// TestRunWithPeer runs the same seeded stream on an embedded ring and on a
// second ring standing for the peer, at the same time and one after the
// other: the peer's row is merged under "cassandra vanilla", both sides
// meet the same client-side lost acks (the same ops retried, so the same
// over-count), and the report says when the peer ran.
func TestRunWithPeer(t *testing.T) {
	ring, peer := startTestCluster(t, 1, 7), startTestCluster(t, 1, 8)
	cfg := Config{
		Name: "peer", Ops: 300, Clients: 4, Seed: 7, RF: 1, Modes: []string{ModeVanilla},
		Workload: Workload{Keys: 20}, Faults: Faults{LostAck: 0.1},
	}
	for _, c := range []struct {
		run  func(context.Context, Target, Config, Target) (*Report, error)
		when string
	}{{RunWithPeer, "at the same time as the rows above"}, {RunThenPeer, "after the rows above"}} {
		cfg.Seed++ // a fresh op stream (and keys) per run
		rep, err := c.run(context.Background(), Target{Cluster: ring}, cfg, Target{Hosts: peer.Hosts()})
		if err != nil {
			t.Fatal(err)
		}
		v, ok1 := rep.Mode(ModeVanilla)
		p, ok2 := rep.Mode(PeerName + " " + ModeVanilla)
		if !ok1 || !ok2 {
			t.Fatalf("modes %+v", rep.Modes)
		}
		if v.Overcount == 0 || v.Overcount != p.Overcount || v.Retries != p.Retries || v.Expected != p.Expected {
			t.Errorf("%s: ring over %d retries %d expected %d, peer over %d retries %d expected %d; want the same faults on both",
				c.when, v.Overcount, v.Retries, v.Expected, p.Overcount, p.Retries, p.Expected)
		}
		if rep.Config.FaultSide != "client" || !strings.HasSuffix(rep.Config.Peer, c.when) {
			t.Errorf("fault side %q, peer %q; want client and %q", rep.Config.FaultSide, rep.Config.Peer, c.when)
		}
	}
}

// TestRunEachAlone runs two modes and a peer one row at a time: every row
// is in the report, the FBF row and both vanilla rows meet the same
// client-side lost acks, each row's server CPU is measured on its own
// (one entry per row, named after it), and the header says the rows ran
// alone.
func TestRunEachAlone(t *testing.T) {
	ring, peer := startTestCluster(t, 1, 9), startTestCluster(t, 1, 10)
	self := func() ([]int, error) { return []int{os.Getpid()}, nil }
	cfg := Config{
		Name: "alone", Ops: 300, Clients: 4, Seed: 11, RF: 1, Modes: []string{ModeVanilla, ModeFBF},
		Workload: Workload{Keys: 20}, Faults: Faults{LostAck: 0.1},
	}
	rep, err := RunEachAlone(context.Background(), Target{Cluster: ring, ServerPids: self}, cfg, Target{Hosts: peer.Hosts(), ServerPids: self})
	if err != nil {
		t.Fatal(err)
	}
	v, ok1 := rep.Mode(ModeVanilla)
	f, ok2 := rep.Mode(ModeFBF)
	p, ok3 := rep.Mode(PeerName + " " + ModeVanilla)
	if !ok1 || !ok2 || !ok3 || len(rep.Modes) != 3 {
		t.Fatalf("modes %+v", rep.Modes)
	}
	if v.Overcount == 0 || v.Overcount != p.Overcount || v.Retries != p.Retries || v.Retries != f.Retries {
		t.Errorf("vanilla over %d retries %d, peer over %d retries %d, fbf retries %d; want the same faults on every row",
			v.Overcount, v.Retries, p.Overcount, p.Retries, f.Retries)
	}
	if f.Overcount != 0 {
		t.Errorf("fbf over-counted %d", f.Overcount)
	}
	var names []string
	for _, sc := range rep.ServerCPU {
		names = append(names, sc.Target)
	}
	if want := []string{"idemkv " + ModeVanilla, "idemkv " + ModeFBF, PeerName}; !slices.Equal(names, want) {
		t.Errorf("server CPU entries %q, want %q", names, want)
	}
	for _, sc := range rep.ServerCPU {
		if sc.Ops != v.Ops && sc.Ops != f.Ops && sc.Ops != p.Ops {
			t.Errorf("server CPU of %s over %d ops, not one row's", sc.Target, sc.Ops)
		}
	}
	desc := rep.Describe()
	if !rep.Config.Alone || !strings.Contains(desc, "modes one at a time") || !strings.HasSuffix(rep.Config.Peer, "after the rows above, alone") {
		t.Errorf("header %q; want the rows said to run alone", desc)
	}
}

// TestRunWithPeerKillsNeedKiller: node kills on the ring must be matched on
// the peer, so a peer without a killer is refused before anything runs.
func TestRunWithPeerKillsNeedKiller(t *testing.T) {
	cfg := Config{Name: "kills", Ops: 10, Modes: []string{ModeVanilla}, Faults: Faults{KillEvery: time.Second}}
	_, err := RunWithPeer(context.Background(), Target{Hosts: []string{"127.0.0.1:1"}}, cfg, Target{Hosts: []string{"127.0.0.1:2"}})
	if err == nil || !strings.Contains(err.Error(), "need a killer") {
		t.Fatalf("kills without a peer killer: %v", err)
	}
}

// TestMainDurations: --duration sets the length of each phase of 'idemkv
// bench' that is not given its own; without it both phases run 25 s.
func TestMainDurations(t *testing.T) {
	for _, c := range []struct {
		args    []string
		oc, lat time.Duration
	}{
		{nil, 25 * time.Second, 25 * time.Second},
		{[]string{"--duration", "8s"}, 8 * time.Second, 8 * time.Second},
		{[]string{"--duration", "8s", "--latency-duration", "3s"}, 8 * time.Second, 3 * time.Second},
		{[]string{"--overcount-duration", "4s"}, 4 * time.Second, 25 * time.Second},
	} {
		m, err := parseMain(c.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if m.oc.Duration != c.oc || m.lat.Duration != c.lat {
			t.Errorf("%v: phases of %v and %v, want %v and %v", c.args, m.oc.Duration, m.lat.Duration, c.oc, c.lat)
		}
	}
}

// TestParseMainCassandraDir: --cassandra-dir measures the peer ring's
// processes, so it needs that ring's addresses.
func TestParseMainCassandraDir(t *testing.T) {
	if _, err := parseMain([]string{"--cassandra-dir", t.TempDir()}, io.Discard); err == nil {
		t.Fatal("--cassandra-dir without --cassandra-hosts: no error")
	}
	m, err := parseMain([]string{"--cassandra-dir", "/tmp/p", "--cassandra-hosts", "127.0.1.1"}, io.Discard)
	if err != nil || m.peerDir != "/tmp/p" {
		t.Fatalf("parse: %v, peer dir %q", err, m.peerDir)
	}
}
