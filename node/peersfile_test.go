package node

import (
	"strings"
	"testing"

	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/vfs"
)

const goodPeers = `{"version": 1, "peers": [
 {"host_id": "0123456789abcdef0123456789abcdef", "addr": "127.0.0.2:7000", "cql_addr": "127.0.0.2:9042",
  "dc": "datacenter1", "rack": "rack1", "tokens": [-5, 7], "generation": 1700000000000000000},
 {"host_id": "fedcba9876543210fedcba9876543210", "addr": "127.0.0.3:7000",
  "dc": "datacenter1", "rack": "rack1", "tokens": [], "generation": 1}]}`

func TestDecodePeers(t *testing.T) {
	rs, err := decodePeers([]byte(goodPeers))
	if err != nil || len(rs) != 2 || rs[0].Addr != "127.0.0.2:7000" || len(rs[0].Tokens) != 2 {
		t.Fatalf("good file: %+v, %v", rs, err)
	}
	b, err := encodePeers([]peerRecord{rs[1], rs[0]})
	if err != nil {
		t.Fatal(err)
	}
	again, err := decodePeers(b)
	if err != nil || len(again) != 2 || !again[0].equal(rs[0]) || !again[1].equal(rs[1]) {
		t.Fatalf("round trip: %+v, %v\n%s", again, err, b)
	}
	if b, _ := encodePeers(nil); string(b) != "{\n  \"version\": 1,\n  \"peers\": []\n}\n" {
		t.Fatalf("empty list encodes as %q", b)
	}
	for name, bad := range map[string]string{
		"empty":           ``,
		"not json":        `peers`,
		"version 2":       strings.Replace(goodPeers, `"version": 1`, `"version": 2`, 1),
		"no version":      `{"peers": []}`,
		"unknown field":   strings.Replace(goodPeers, `"rack": "rack1", "tokens": [-5`, `"rack": "rack1", "zone": "z", "tokens": [-5`, 1),
		"trailing data":   goodPeers + ` {}`,
		"duplicate":       strings.Replace(goodPeers, "fedcba9876543210fedcba9876543210", "0123456789abcdef0123456789abcdef", 1),
		"bad host id":     strings.Replace(goodPeers, "fedcba9876543210fedcba9876543210", "FEDCBA9876543210FEDCBA9876543210", 1),
		"bad address":     strings.Replace(goodPeers, `"127.0.0.3:7000"`, `"127.0.0.3"`, 1),
		"zero generation": strings.Replace(goodPeers, `"generation": 1}`, `"generation": 0}`, 1),
		"wrong type":      strings.Replace(goodPeers, `[-5, 7]`, `["a"]`, 1),
	} {
		if rs, err := decodePeers([]byte(bad)); err == nil {
			t.Errorf("%s: accepted as %+v", name, rs)
		}
	}
}

// FuzzDecodePeers: the decoder never panics, and what it accepts encodes
// and decodes back to the same records.
func FuzzDecodePeers(f *testing.F) {
	f.Add([]byte(goodPeers))
	f.Add([]byte(`{"version": 1, "peers": []}`))
	f.Add([]byte(`{"version": 1, "peers": null}`))
	f.Add([]byte(`{"version": 1, "peers": [{"host_id": "0123456789abcdef0123456789abcdef", "addr": "[::1]:7000", "dc": "d", "rack": "r", "tokens": [9223372036854775807], "generation": 9223372036854775807}]}`))
	f.Add([]byte(`{"version": 1, "peers": [{"host_id": "zz"`))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := decodePeers(b)
		if err != nil {
			return
		}
		out, err := encodePeers(rs)
		if err != nil {
			t.Fatalf("accepted records do not encode: %v", err)
		}
		again, err := decodePeers(out)
		if err != nil {
			t.Fatalf("encoded records do not decode: %v\n%s", err, out)
		}
		if len(again) != len(rs) {
			t.Fatalf("round trip lost records: %d, want %d", len(again), len(rs))
		}
		byID := map[string]peerRecord{}
		for _, r := range rs {
			byID[r.HostID] = r
		}
		for _, r := range again {
			if !r.equal(byID[r.HostID]) {
				t.Fatalf("round trip changed %+v into %+v", byID[r.HostID], r)
			}
		}
	})
}

// TestPeerStoreWritesOnlyOnChanges: the file is rewritten when a peer is
// learned, restarts, moves or changes tokens, or leaves; not for schema or
// load changes, liveness changes, or the node itself.
func TestPeerStoreWritesOnlyOnChanges(t *testing.T) {
	dir := t.TempDir()
	self := "00000000000000000000000000000001"
	s := loadPeers(vfs.Default, dir, self, quiet())
	if len(s.known()) != 0 {
		t.Fatalf("empty directory: %d remembered peers", len(s.known()))
	}
	peer := gossip.Node{NodeState: gossip.NodeState{
		HostID: "0123456789abcdef0123456789abcdef", Addr: "127.0.0.2:7000", CQLAddr: "127.0.0.2:9042",
		DC: "dc1", Rack: "r1", Tokens: []int64{1, 2}, Status: gossip.StatusNormal, Generation: 10, Version: 3,
		SchemaVersion: "s1", Load: 5,
	}, Up: true}
	step := func(what string, k gossip.EventKind, n gossip.Node, wantWrites, wantPeers int) {
		t.Helper()
		s.observe(gossip.Event{Kind: k, Node: n})
		if s.writes != wantWrites {
			t.Fatalf("%s: %d writes, want %d", what, s.writes, wantWrites)
		}
		again := loadPeers(vfs.Default, dir, self, quiet())
		if got := len(again.known()); got != wantPeers {
			t.Fatalf("%s: the file holds %d peers, want %d", what, got, wantPeers)
		}
	}
	step("joined", gossip.EventJoined, peer, 1, 1)
	if k := loadPeers(vfs.Default, dir, self, quiet()).known(); k[0].Status != gossip.StatusShutdown ||
		k[0].Addr != peer.Addr || len(k[0].Tokens) != 2 || k[0].Generation != 10 || k[0].DC != "dc1" {
		t.Fatalf("remembered state %+v: want the peer's address, placement, tokens and generation, status shutdown", k[0])
	}
	n := peer
	n.SchemaVersion, n.Load, n.Version = "s2", 99, 50
	step("schema and load change", gossip.EventChanged, n, 1, 1)
	n.Up = false
	step("down", gossip.EventDown, n, 1, 1)
	me := peer
	me.HostID = self
	step("self", gossip.EventJoined, me, 1, 1)
	n.Generation = 20
	step("restarted", gossip.EventRestarted, n, 2, 1)
	n.Tokens = []int64{3}
	step("tokens", gossip.EventChanged, n, 3, 1)
	other := peer
	other.HostID, other.Addr, other.Generation = "fedcba9876543210fedcba9876543210", "127.0.0.3:7000", 30
	step("another peer", gossip.EventJoined, other, 4, 2)
	n.Status = gossip.StatusLeft
	step("left", gossip.EventLeft, n, 5, 1)
	step("left again", gossip.EventChanged, n, 5, 1)
	repl := other
	repl.HostID, repl.Generation = "abababababababababababababababab", 40
	step("replaced at the same address", gossip.EventJoined, repl, 6, 1)
	if k := loadPeers(vfs.Default, dir, self, quiet()).known(); k[0].HostID != repl.HostID {
		t.Fatalf("after the replacement the file remembers %s, want %s", k[0].HostID, repl.HostID)
	}
	owner := peer
	owner.HostID, owner.Addr, owner.Generation, owner.Tokens = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd", "127.0.0.4:7000", 50, []int64{7, 8}
	step("new owner", gossip.EventJoined, owner, 7, 2)
	taker := owner
	taker.HostID, taker.Addr, taker.Generation, taker.Tokens = "efefefefefefefefefefefefefefefef", "127.0.0.5:7000", 60, []int64{8, 9}
	step("a token taken over", gossip.EventJoined, taker, 8, 2)
	for _, k := range loadPeers(vfs.Default, dir, self, quiet()).known() {
		if k.HostID == owner.HostID {
			t.Fatal("the peer whose token a newer node took is still remembered")
		}
	}
	repl.Status = gossip.StatusLeft
	step("replacement left", gossip.EventLeft, repl, 9, 1)
	if k := loadPeers(vfs.Default, dir, self, quiet()).known(); len(k) != 1 || k[0].HostID != taker.HostID {
		t.Fatalf("at the end the file remembers %+v, want only %s", k, taker.HostID)
	}
}
