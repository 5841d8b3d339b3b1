package gossip

import (
	"fmt"
	"slices"
	"time"

	"github.com/idemkv/idemkv/transport"
)

// Status is a node's life-cycle state as it announces it.
type Status string

// The statuses a node announces. Joining, normal and leaving nodes are
// candidates for Up; shutdown and left are dead states: a peer that learns
// either marks the node Down at once, without waiting for the failure
// detector.
const (
	StatusJoining  Status = "joining"
	StatusNormal   Status = "normal"
	StatusLeaving  Status = "leaving"
	StatusLeft     Status = "left"
	StatusShutdown Status = "shutdown"
)

// dead reports whether s is a dead state (shutdown or left).
func (s Status) dead() bool { return s == StatusShutdown || s == StatusLeft }

// NodeState is what a node announces about itself. It travels as one unit:
// any change, and every heartbeat, bumps Version, and (Generation, Version)
// orders two states of the same node.
type NodeState struct {
	// HostID is the node's identity, 32 lowercase hex characters (also its
	// counter id).
	HostID string
	// Addr is the node's peer (transport) address, e.g. "127.0.0.2:7000".
	Addr transport.Addr
	// CQLAddr is the node's CQL address, e.g. "127.0.0.2:9042", or "".
	CQLAddr string
	// DC and Rack place the node for NetworkTopologyStrategy.
	DC, Rack string
	// Tokens are the node's ring tokens.
	Tokens []int64
	// Status is the node's life-cycle state.
	Status Status
	// SchemaVersion changes whenever the node's schema changes.
	SchemaVersion string
	// ReleaseVersion is the version the node reports, e.g. "3.11.4".
	ReleaseVersion string
	// Load is the node's bytes on disk (informational).
	Load int64
	// Generation is set at process start (unix nanoseconds): a restarted
	// node has a higher one, and its new state replaces the old one whatever
	// the versions.
	Generation int64
	// Version is bumped on every change and every heartbeat of the node.
	Version int64
}

// Node is a NodeState as one gossiper sees it.
type Node struct {
	NodeState
	// Up is the local verdict: false once the failure detector convicted
	// the node or it announced shutdown or left; true again at its next
	// fresh heartbeat. A gossiper always sees itself Up.
	Up bool
	// LastSeen is when a fresh state (a higher version) of the node last
	// arrived, directly or through another peer.
	LastSeen time.Time
	// Phi is the failure detector's suspicion of the node now (0 for self).
	Phi float64
}

// EventKind says what happened to a node.
type EventKind uint8

// The kinds of Event.
const (
	// EventJoined: a node is known for the first time (Node.Up says
	// whether it is considered up).
	EventJoined EventKind = iota + 1
	// EventUp: a node that was down has a fresh heartbeat.
	EventUp
	// EventDown: the failure detector convicted a node, or it announced
	// shutdown.
	EventDown
	// EventRestarted: a node came back with a higher generation; its old
	// state was replaced. An EventUp or EventDown follows if its liveness
	// changed.
	EventRestarted
	// EventChanged: a node's announced state changed (anything but the
	// heartbeat version): status, tokens, schema version, load, addresses.
	EventChanged
	// EventLeft: a node announced status left (decommissioned).
	EventLeft
)

var eventNames = [...]string{"?", "joined", "up", "down", "restarted", "changed", "left"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event tells subscribers about another node: Node is that node as seen
// just after the change.
type Event struct {
	Kind EventKind
	Node Node
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s gen=%d v=%d up=%v", e.Kind, e.Node.HostID, e.Node.Generation, e.Node.Version, e.Node.Up)
}

// clone returns s with its own copy of Tokens.
func (s NodeState) clone() NodeState {
	s.Tokens = slices.Clone(s.Tokens)
	return s
}

// sameContent reports whether a and b announce the same things, ignoring
// Version (the heartbeat).
func sameContent(a, b NodeState) bool {
	a.Version, b.Version = 0, 0
	return a.HostID == b.HostID && a.Addr == b.Addr && a.CQLAddr == b.CQLAddr &&
		a.DC == b.DC && a.Rack == b.Rack && a.Status == b.Status &&
		a.SchemaVersion == b.SchemaVersion && a.ReleaseVersion == b.ReleaseVersion &&
		a.Load == b.Load && a.Generation == b.Generation && slices.Equal(a.Tokens, b.Tokens)
}

// validHostID reports whether id is 32 lowercase hex characters.
func validHostID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validate checks that s can be announced: the limits are those of the wire
// format.
func (s *NodeState) validate() error {
	switch {
	case !validHostID(s.HostID):
		return fmt.Errorf("gossip: host id %q is not 32 lowercase hex characters", s.HostID)
	case s.Addr == "":
		return fmt.Errorf("gossip: node %s has no address", s.HostID)
	case s.Generation <= 0:
		return fmt.Errorf("gossip: node %s: generation %d is not positive", s.HostID, s.Generation)
	case s.Version < 0:
		return fmt.Errorf("gossip: node %s: negative version %d", s.HostID, s.Version)
	case s.Load < 0:
		return fmt.Errorf("gossip: node %s: negative load %d", s.HostID, s.Load)
	case statusCode(s.Status) == 0:
		return fmt.Errorf("gossip: node %s: unknown status %q", s.HostID, s.Status)
	case len(s.Tokens) > maxTokens:
		return fmt.Errorf("gossip: node %s: %d tokens, more than %d", s.HostID, len(s.Tokens), maxTokens)
	}
	for _, f := range [...]string{string(s.Addr), s.CQLAddr, s.DC, s.Rack, s.SchemaVersion, s.ReleaseVersion} {
		if len(f) > maxString {
			return fmt.Errorf("gossip: node %s: field %.20q... longer than %d bytes", s.HostID, f, maxString)
		}
	}
	return nil
}

// digest is the summary of a node's state that SYN messages carry.
type digest struct {
	hostID     string
	generation int64
	version    int64
}

func (s *NodeState) digest() digest { return digest{s.HostID, s.Generation, s.Version} }

// compare orders two digests of the same node: generation first, then
// version.
func (d digest) compare(o digest) int {
	switch {
	case d.generation != o.generation:
		if d.generation < o.generation {
			return -1
		}
		return 1
	case d.version < o.version:
		return -1
	case d.version > o.version:
		return 1
	}
	return 0
}
