package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"

	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/transport"
	"github.com/idemkv/idemkv/vfs"
)

// PeersFile is the name of the persisted peers file in the data directory;
// the package comment describes its format.
const PeersFile = "peers.json"

// peersFormat is the version of the peers file this code writes and reads.
const peersFormat = 1

// Bounds of a peers file's contents (those of gossip's wire format).
const (
	maxPeers       = 4096
	maxPeerTokens  = 4096
	maxPeerString  = 255
	maxPeersFileSz = 16 << 20
)

// peerRecord is what the node remembers of one peer.
type peerRecord struct {
	HostID     string  `json:"host_id"`
	Addr       string  `json:"addr"`
	CQLAddr    string  `json:"cql_addr,omitempty"`
	DC         string  `json:"dc"`
	Rack       string  `json:"rack"`
	Tokens     []int64 `json:"tokens"`
	Generation int64   `json:"generation"`
}

func (r peerRecord) equal(o peerRecord) bool {
	return r.HostID == o.HostID && r.Addr == o.Addr && r.CQLAddr == o.CQLAddr && r.DC == o.DC &&
		r.Rack == o.Rack && r.Generation == o.Generation && slices.Equal(r.Tokens, o.Tokens)
}

// state is the record as a remembered gossip state: shutdown (Down) until
// the peer is heard from.
func (r peerRecord) state() gossip.NodeState {
	return gossip.NodeState{
		HostID: r.HostID, Addr: transport.Addr(r.Addr), CQLAddr: r.CQLAddr, DC: r.DC, Rack: r.Rack,
		Tokens: slices.Clone(r.Tokens), Status: gossip.StatusShutdown, Generation: r.Generation,
	}
}

func recordOf(n gossip.Node) peerRecord {
	return peerRecord{
		HostID: n.HostID, Addr: string(n.Addr), CQLAddr: n.CQLAddr, DC: n.DC, Rack: n.Rack,
		Tokens: slices.Clone(n.Tokens), Generation: n.Generation,
	}
}

type peersDoc struct {
	Version int          `json:"version"`
	Peers   []peerRecord `json:"peers"`
}

func validHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (r peerRecord) validate() error {
	switch {
	case !validHex32(r.HostID):
		return fmt.Errorf("host id %q is not 32 lowercase hex characters", r.HostID)
	case r.Generation <= 0:
		return fmt.Errorf("peer %s: generation %d is not positive", r.HostID, r.Generation)
	case len(r.Tokens) > maxPeerTokens:
		return fmt.Errorf("peer %s: %d tokens, more than %d", r.HostID, len(r.Tokens), maxPeerTokens)
	}
	if _, _, err := net.SplitHostPort(r.Addr); err != nil {
		return fmt.Errorf("peer %s: address %q: %w", r.HostID, r.Addr, err)
	}
	for _, f := range [...]string{r.Addr, r.CQLAddr, r.DC, r.Rack} {
		if len(f) > maxPeerString {
			return fmt.Errorf("peer %s: field %.20q... longer than %d bytes", r.HostID, f, maxPeerString)
		}
	}
	return nil
}

// decodePeers parses a peers file: it rejects unknown versions and fields,
// trailing data, invalid or duplicate peers, and never panics
// (FuzzDecodePeers).
func decodePeers(b []byte) ([]peerRecord, error) {
	if len(b) > maxPeersFileSz {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), maxPeersFileSz)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d peersDoc
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("not a peers document: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the peers document")
	}
	if d.Version != peersFormat {
		return nil, fmt.Errorf("format version %d, want %d", d.Version, peersFormat)
	}
	if len(d.Peers) > maxPeers {
		return nil, fmt.Errorf("%d peers, more than %d", len(d.Peers), maxPeers)
	}
	seen := make(map[string]bool, len(d.Peers))
	for i, p := range d.Peers {
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("peer #%d: %w", i, err)
		}
		if seen[p.HostID] {
			return nil, fmt.Errorf("peer #%d: host id %s listed twice", i, p.HostID)
		}
		seen[p.HostID] = true
	}
	return d.Peers, nil
}

// encodePeers returns the file's contents for records, sorted by host id.
func encodePeers(records []peerRecord) ([]byte, error) {
	rs := slices.Clone(records)
	slices.SortFunc(rs, func(a, b peerRecord) int {
		switch {
		case a.HostID < b.HostID:
			return -1
		case a.HostID > b.HostID:
			return 1
		}
		return 0
	})
	if rs == nil {
		rs = []peerRecord{}
	}
	b, err := json.MarshalIndent(peersDoc{Version: peersFormat, Peers: rs}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// peerStore keeps the peers file in step with gossip: it rewrites the file
// when a peer's address, tokens, placement, host id or generation changes,
// or a peer leaves — not on heartbeats, load or schema changes. A peer
// announcing the address or a token of a remembered peer of another host
// id and an earlier generation replaces it in the file.
type peerStore struct {
	fsys   vfs.FS
	dir    string
	self   string
	logger *slog.Logger

	mu     sync.Mutex
	peers  map[string]peerRecord
	writes int // files written, for tests
}

// loadPeers reads the peers file of dir, skipping this node's own host id.
// A missing file is an empty list. A file that cannot be read or decoded is
// not fatal: the node starts from its seeds alone, with a warning, after
// moving the file aside to PeersFile+".bad" (kept for diagnosis; the next
// peer change writes a fresh file).
func loadPeers(fsys vfs.FS, dir, self string, logger *slog.Logger) *peerStore {
	s := &peerStore{fsys: fsys, dir: dir, self: self, logger: logger, peers: map[string]peerRecord{}}
	p := filepath.Join(dir, PeersFile)
	b, err := fsys.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return s
	}
	var records []peerRecord
	if err == nil {
		records, err = decodePeers(b)
	}
	if err != nil {
		bad := p + ".bad"
		if rerr := fsys.Rename(p, bad); rerr != nil {
			bad = "(not moved aside: " + rerr.Error() + ")"
		}
		logger.Warn("node: ignoring the persisted peers file; starting from the seeds alone: a restart while every seed is down will not find the other nodes until gossip rewrites the file",
			"file", p, "moved_to", bad, "err", err)
		return s
	}
	for _, r := range records {
		if r.HostID != self {
			s.peers[r.HostID] = r
		}
	}
	return s
}

// known returns the remembered peers as gossip states.
func (s *peerStore) known() []gossip.NodeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]gossip.NodeState, 0, len(s.peers))
	for _, r := range s.peers {
		out = append(out, r.state())
	}
	return out
}

// observe is the store's gossip subscriber.
func (s *peerStore) observe(ev gossip.Event) {
	if ev.Node.HostID == s.self {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.peers[ev.Node.HostID]
	switch {
	case ev.Node.Status == gossip.StatusLeft:
		if !had {
			return
		}
		delete(s.peers, ev.Node.HostID)
	case ev.Node.Status == gossip.StatusJoining && !had:
		// Not in the ring until it is normal: remembered, it would come
		// back into the ring view at a restart (remembered peers are
		// loaded as shut down).
		return
	case ev.Kind == gossip.EventJoined || ev.Kind == gossip.EventRestarted || ev.Kind == gossip.EventChanged:
		r := recordOf(ev.Node)
		if had && old.equal(r) {
			return
		}
		if r.validate() != nil {
			return // nothing gossip accepted fails this; keep the file valid regardless
		}
		s.peers[r.HostID] = r
		// A node that replaced another at the same address or with some
		// of its tokens (a new host id, a later generation) makes the old
		// record stale: kept, it would come back at every restart as a
		// dead replica, or as a second owner of a token, which the ring
		// view refuses.
		for id, o := range s.peers {
			if id != r.HostID && o.Generation < r.Generation && (o.Addr == r.Addr || shareToken(o.Tokens, r.Tokens)) {
				delete(s.peers, id)
			}
		}
	default:
		return
	}
	if err := s.saveLocked(); err != nil {
		s.logger.Warn("node: peers file not saved", "err", err)
	}
}

func shareToken(a, b []int64) bool {
	for _, t := range a {
		if slices.Contains(b, t) {
			return true
		}
	}
	return false
}

func (s *peerStore) saveLocked() error {
	rs := make([]peerRecord, 0, len(s.peers))
	for _, r := range s.peers {
		rs = append(rs, r)
	}
	b, err := encodePeers(rs)
	if err != nil {
		return fmt.Errorf("encode %s: %w", PeersFile, err)
	}
	if err := vfs.WriteFileAtomic(s.fsys, s.dir, PeersFile, b); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(s.dir, PeersFile), err)
	}
	s.writes++
	return nil
}
