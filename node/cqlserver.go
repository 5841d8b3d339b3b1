package node

import (
	"fmt"
	"net"
	"sync"

	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/exec"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/gossip"
	"github.com/idemkv/idemkv/schema"
)

// events fans the node's membership and schema changes out to the CQL
// connections that sent REGISTER (cql.Events).
type events struct {
	mu   sync.Mutex
	next int
	subs map[int]func(frame.Event)
	last schema.Doc // the visible schema the last schema events were computed from
}

func (e *events) Subscribe(fn func(frame.Event)) (cancel func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.subs == nil {
		e.subs = map[int]func(frame.Event){}
	}
	id := e.next
	e.next++
	e.subs[id] = fn
	return func() {
		e.mu.Lock()
		delete(e.subs, id)
		e.mu.Unlock()
	}
}

func (e *events) publish(ev frame.Event) {
	e.mu.Lock()
	fns := make([]func(frame.Event), 0, len(e.subs))
	for _, fn := range e.subs {
		fns = append(fns, fn)
	}
	e.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// gossipEvent turns a membership event into the CQL event drivers expect.
func (e *events) gossipEvent(ev gossip.Event, nativePort int) {
	host, _, err := net.SplitHostPort(ev.Node.CQLAddr)
	if err != nil {
		host, _, _ = net.SplitHostPort(string(ev.Node.Addr))
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	out := frame.Event{IP: ip, Port: int32(nativePort)}
	switch ev.Kind {
	case gossip.EventJoined:
		out.Type, out.Change = "TOPOLOGY_CHANGE", "NEW_NODE"
	case gossip.EventLeft:
		out.Type, out.Change = "TOPOLOGY_CHANGE", "REMOVED_NODE"
	case gossip.EventUp, gossip.EventRestarted:
		out.Type, out.Change = "STATUS_CHANGE", "UP"
	case gossip.EventDown:
		out.Type, out.Change = "STATUS_CHANGE", "DOWN"
	default:
		return
	}
	e.publish(out)
}

// schemaEvents publishes a SCHEMA_CHANGE for every keyspace and table that
// appeared or disappeared since the last call.
func (e *events) schemaEvents(now schema.Doc) {
	e.mu.Lock()
	last := e.last
	e.last = now
	e.mu.Unlock()
	send := func(change, target, ks, name string) {
		e.publish(frame.Event{Type: "SCHEMA_CHANGE", Change: change,
			Schema: frame.SchemaChangeResult{Change: change, Target: target, Keyspace: ks, Name: name}})
	}
	// Drops before creations, tables inside keyspaces: a keyspace dropped
	// and created again since the last call (a new generation of its name,
	// whose tables are new ones) is announced as its old tables dropped,
	// the keyspace dropped, created, and its new tables created, so that a
	// driver applying the events in order ends with the new definitions.
	for id, t := range last.Tables {
		if _, ok := now.Tables[id]; !ok {
			send("DROPPED", "TABLE", t.Keyspace, t.Name)
		}
	}
	for n, l := range last.Keyspaces {
		if k, ok := now.Keyspaces[n]; !ok || k.Generation != l.Generation {
			send("DROPPED", "KEYSPACE", n, "")
		}
	}
	for n, k := range now.Keyspaces {
		if l, ok := last.Keyspaces[n]; !ok || k.Generation != l.Generation {
			send("CREATED", "KEYSPACE", n, "")
		}
	}
	for id, t := range now.Tables {
		if _, ok := last.Tables[id]; !ok {
			send("CREATED", "TABLE", t.Keyspace, t.Name)
		}
	}
}

// mib is a limit in MiB as bytes, -1 (no limit) kept.
func mib(v int64) int64 {
	if v < 0 {
		return -1
	}
	return v << 20
}

// startCQL serves CQL on the node's native transport address.
func (n *Node) startCQL(wrap func(cql.Executor) cql.Executor) error {
	var auth map[string]string
	if n.cfg.Authenticator == "PasswordAuthenticator" {
		auth = n.cfg.Credentials
	}
	n.events.last = n.schema.Visible()
	var ex cql.Executor = exec.New(meteredBackend{backend{n}, n.metrics}, exec.Options{ClusterName: n.cfg.ClusterName, ReleaseVersion: ReleaseVersion, Logger: n.logger,
		BatchSizeWarnThreshold: kib(n.cfg.BatchSizeWarnThresholdKB), BatchSizeFailThreshold: kib(n.cfg.BatchSizeFailThresholdKB),
		TableOptionMemory: mib(int64(n.cfg.FBFMaxMemoryMB))})
	if n.cfg.CustomQueryHandlerClass == MirroringQueryHandler {
		ex = mirroringExecutor{ex}
	}
	ex = &meteredExecutor{Executor: ex, m: n.metrics}
	if wrap != nil {
		ex = wrap(ex)
	}
	cfg := cql.ServerConfig{
		Addr:     n.cfg.CQLAddr(),
		Executor: ex,
		Events:   n.events,
		MaxFrame: n.cfg.NativeTransportMaxFrameMB << 20,
		Auth:     auth,
		Logger:   n.logger,
	}
	cfg.MaxHandshakeFrame = n.cfg.NativeTransportMaxAuthMessageKB << 10
	cfg.MaxConnections = n.cfg.NativeTransportMaxConcurrentConnections
	cfg.MaxConnectionsPerIP = n.cfg.NativeTransportMaxConnectionsPerIP
	cfg.MaxInFlightBytes = mib(n.cfg.NativeTransportMaxRequestDataInFlightMB)
	cfg.MaxInFlightBytesPerIP = mib(n.cfg.NativeTransportMaxRequestDataPerIPMB)
	cfg.MaxInFlightBytesPerConn = n.cfg.NativeTransportReceiveQueueCapacityBytes
	cfg.MaxRequestsPerConn = n.cfg.NativeTransportMaxRequestsPerConnection
	cfg.IdleTimeout = ms(n.cfg.NativeTransportIdleTimeoutMS)
	cfg.HalfFrameTimeout = ms(n.cfg.NativeTransportHalfFrameTimeoutMS)
	cfg.WriteTimeout = ms(n.cfg.NativeTransportWriteTimeoutMS)
	srv, err := cql.Listen(cfg)
	if err != nil {
		return fmt.Errorf("node: CQL on %s: %w", n.cfg.CQLAddr(), err)
	}
	n.cql = srv
	return nil
}

// CQLStats are the counters of the node's CQL server (connections, requests
// and bytes in flight, paused reads, refusals and timeouts); zero when the
// node serves no CQL.
func (n *Node) CQLStats() cql.Stats {
	if n.cql == nil {
		return cql.Stats{}
	}
	return n.cql.Stats()
}

// kib converts a threshold in KiB to bytes; -1 (none) stays negative.
func kib(n int) int64 {
	if n < 0 {
		return -1
	}
	return int64(n) << 10
}
