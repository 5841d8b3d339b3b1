// Package trace records request traces as Cassandra's tracing does: a
// request sent with the tracing flag gets a trace session, identified by a
// time-based (version 1) UUID, whose events (activities of the request's
// path, each with the microseconds elapsed since the session began) are
// served as the tables system_traces.sessions and system_traces.events.
//
// Traces live in memory on the coordinating node only (Cassandra writes
// them to a replicated keyspace, events from every replica): a Store keeps
// the last MaxSessions sessions (DefaultMaxSessions), each for TTL
// (DefaultTTL, 24 h, Cassandra's tracetype_query_ttl), and at most
// MaxEvents events per session (DefaultMaxEvents; later ones are dropped).
//
// Code on a request's path records events with Eventf(ctx, ...), which does
// nothing when the context carries no session; hot paths test On(ctx) first
// so that an untraced request allocates nothing for its events.
package trace

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"
)

// Bounds of a Store, by default.
const (
	DefaultMaxSessions = 1000
	DefaultMaxEvents   = 500
	DefaultTTL         = 24 * time.Hour
)

// Store holds the recent trace sessions of one node. It is safe for
// concurrent use.
type Store struct {
	// MaxSessions, MaxEvents and TTL bound the store (0: the defaults);
	// set them before use.
	MaxSessions int
	MaxEvents   int
	TTL         time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	mu    sync.Mutex
	byID  map[[16]byte]*Session
	order [][16]byte // oldest first
}

// NewStore returns a store with the default bounds.
func NewStore() *Store { return &Store{} }

func (st *Store) now() time.Time {
	if st.Now != nil {
		return st.Now()
	}
	return time.Now()
}

// Session is one traced request.
type Session struct {
	ID              [16]byte
	Client          net.IP
	Coordinator     net.IP
	CoordinatorPort int
	Command         string // "QUERY", as Cassandra's trace type
	Request         string // e.g. "Execute CQL3 query"
	Parameters      map[string]string
	Started         time.Time

	store  *Store
	mu     sync.Mutex
	events []Event
	// duration is the request's duration in microseconds, -1 until Finish.
	duration int64
}

// Event is one activity of a traced request.
type Event struct {
	ID         [16]byte // a time-based UUID, ordered by time
	Activity   string
	Source     net.IP
	SourcePort int
	Elapsed    int64 // microseconds since the session started
	Thread     string
}

// Start begins a session for a request. Sessions past the store's bounds
// (the oldest beyond MaxSessions, any older than TTL) are forgotten.
func (st *Store) Start(client, coordinator net.IP, port int, command, request string, params map[string]string) *Session {
	now := st.now()
	s := &Session{ID: NewTimeUUID(now), Client: client, Coordinator: coordinator, CoordinatorPort: port,
		Command: command, Request: request, Parameters: params, Started: now, store: st, duration: -1}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID == nil {
		st.byID = map[[16]byte]*Session{}
	}
	st.byID[s.ID] = s
	st.order = append(st.order, s.ID)
	st.expireLocked(now)
	return s
}

func (st *Store) expireLocked(now time.Time) {
	max := st.MaxSessions
	if max <= 0 {
		max = DefaultMaxSessions
	}
	ttl := st.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	n := 0
	for n < len(st.order) {
		s := st.byID[st.order[n]]
		if len(st.order)-n <= max && (s == nil || now.Sub(s.Started) < ttl) {
			break
		}
		delete(st.byID, st.order[n])
		n++
	}
	if n > 0 {
		st.order = append(st.order[:0], st.order[n:]...)
	}
}

// Snapshot is a session as read back: its fields and its events so far.
type Snapshot struct {
	*Session
	Duration int64 // microseconds; -1 while the request runs
	Events   []Event
}

// Get returns a session by id, if the store still has it.
func (st *Store) Get(id [16]byte) (Snapshot, bool) {
	st.mu.Lock()
	st.expireLocked(st.now())
	s, ok := st.byID[id]
	st.mu.Unlock()
	if !ok {
		return Snapshot{}, false
	}
	return s.snapshot(), true
}

// All returns the sessions the store has, ordered by id bytes.
func (st *Store) All() []Snapshot {
	st.mu.Lock()
	st.expireLocked(st.now())
	ss := make([]*Session, 0, len(st.byID))
	for _, s := range st.byID {
		ss = append(ss, s)
	}
	st.mu.Unlock()
	sort.Slice(ss, func(i, j int) bool { return string(ss[i].ID[:]) < string(ss[j].ID[:]) })
	out := make([]Snapshot, len(ss))
	for i, s := range ss {
		out[i] = s.snapshot()
	}
	return out
}

func (s *Session) snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Snapshot{Session: s, Duration: s.duration, Events: append([]Event(nil), s.events...)}
}

// Thread names of events, after Cassandra's stages.
const (
	ThreadRequest = "Native-Transport-Requests"
	ThreadWrite   = "CounterMutationStage"
	ThreadRead    = "ReadStage"
)

// Event records an activity; it does nothing on a nil session.
func (s *Session) Event(thread, activity string) {
	if s == nil {
		return
	}
	max := s.store.MaxEvents
	if max <= 0 {
		max = DefaultMaxEvents
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) >= max {
		return
	}
	now := s.store.now() // under mu, so that events are in id order
	s.events = append(s.events, Event{ID: NewTimeUUID(now), Activity: activity, Source: s.Coordinator,
		SourcePort: s.CoordinatorPort, Elapsed: now.Sub(s.Started).Microseconds(), Thread: thread})
}

// Finish records the request's duration, once. It adds no event: as in
// Cassandra, the end of a request is its session's duration (cqlsh prints
// a "Request complete" row from it).
func (s *Session) Finish() {
	if s == nil {
		return
	}
	d := s.store.now().Sub(s.Started).Microseconds()
	s.mu.Lock()
	if s.duration < 0 {
		s.duration = max(d, 0)
	}
	s.mu.Unlock()
}

type ctxKey struct{}

// With returns ctx carrying s; events recorded with ctx go to s.
func With(ctx context.Context, s *Session) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, s)
}

// From returns the session ctx carries, or nil.
func From(ctx context.Context) *Session {
	s, _ := ctx.Value(ctxKey{}).(*Session)
	return s
}

// On reports whether ctx carries a session. Hot paths test it before
// Eventf, whose arguments would otherwise be boxed (allocated) for nothing.
func On(ctx context.Context) bool { return From(ctx) != nil }

// Eventf records an activity, formatted, in ctx's session, if any.
func Eventf(ctx context.Context, thread, format string, args ...any) {
	if s := From(ctx); s != nil {
		s.Event(thread, fmt.Sprintf(format, args...))
	}
}

var (
	uuidMu    sync.Mutex
	lastTicks uint64
	clockSeq  uint16
	nodeID    [6]byte
)

func init() {
	var b [8]byte
	rand.Read(b[:])
	clockSeq = binary.BigEndian.Uint16(b[:2]) & 0x3fff
	copy(nodeID[:], b[2:])
	nodeID[0] |= 0x01 // multicast bit: a random node id, RFC 4122 §4.5
}

// gregorianOffset is the number of 100 ns intervals from 1582-10-15 to
// the Unix epoch.
const gregorianOffset = 0x01B21DD213814000

// NewTimeUUID returns a version 1 UUID for t, distinct from and greater in
// time than every other this process made (a tick later when t does not
// move), as Cassandra's UUIDGen.getTimeUUID.
func NewTimeUUID(t time.Time) [16]byte {
	ticks := uint64(t.UnixNano()/100) + gregorianOffset
	uuidMu.Lock()
	if ticks <= lastTicks {
		ticks = lastTicks + 1
	}
	lastTicks = ticks
	uuidMu.Unlock()
	var u [16]byte
	binary.BigEndian.PutUint32(u[0:4], uint32(ticks))
	binary.BigEndian.PutUint16(u[4:6], uint16(ticks>>32))
	binary.BigEndian.PutUint16(u[6:8], uint16(ticks>>48)&0x0fff|0x1000)
	binary.BigEndian.PutUint16(u[8:10], clockSeq|0x8000)
	copy(u[10:], nodeID[:])
	return u
}

// UUIDTime is the time of a version 1 UUID.
func UUIDTime(u [16]byte) time.Time {
	ticks := uint64(binary.BigEndian.Uint32(u[0:4])) |
		uint64(binary.BigEndian.Uint16(u[4:6]))<<32 |
		uint64(binary.BigEndian.Uint16(u[6:8])&0x0fff)<<48
	return time.Unix(0, int64(ticks-gregorianOffset)*100)
}
