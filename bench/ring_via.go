package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/metrics"
	"strconv"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/node"
	"github.com/idemkv/idemkv/ring"
)

// Client paths (RingConfig.Via) and routes (RingConfig.Route) of the ring
// benchmark.
const (
	ViaCoordinator = "coordinator"
	ViaCQL         = "cql"
	RouteAny       = "any"
	RoutePrimary   = "primary"
)

// errNotApplied marks an answer that says the update was not applied (the
// replicas were unavailable): a failed write whose outcome is known.
var errNotApplied = errors.New("bench: not applied")

// ringSend sends one increment of key through node coord (an index into the
// ring's nodes; the cql path lets the driver route instead), with op as its
// op id when the table dedups. An error wrapping errNotApplied is known not
// to have been applied; any other leaves the outcome unknown.
type ringSend func(ctx context.Context, coord int, key []byte, op *[16]byte) error

// coordinatorSender calls the coordinator of node coord in process, or with
// primary that of the key's first replica.
func coordinatorSender(nodes []*node.Node, def coltype.TableDef, cl coordinator.ConsistencyLevel, primary bool) ringSend {
	byHost := map[string]int{}
	for i, n := range nodes {
		byHost[n.HostID()] = i
	}
	return func(ctx context.Context, coord int, key []byte, op *[16]byte) error {
		if primary {
			if i, ok := byHost[nodes[coord].ClusterMetadata().Primary(ring.Token(key)).ID]; ok {
				coord = i
			}
		}
		u := coltype.Update{Table: def.ID, Key: key, Column: "c", Delta: 1}
		if op != nil {
			u.HasOp, u.OpID, u.OpTime = true, *op, time.Now().UnixNano()
		}
		err := nodes[coord].Coordinator().CounterWrite(ctx, u, cl)
		if un := (*coordinator.UnavailableError)(nil); errors.As(err, &un) {
			return fmt.Errorf("%w: %w", errNotApplied, err)
		}
		return err
	}
}

// cqlSender sends UPDATE ks.table SET c = c + 1 WHERE k = ? through the
// shared gocql session (prepared once by the driver, token-aware), with the
// op id in the idemkv-op custom payload as client.Client does.
func cqlSender(s *gocql.Session, def coltype.TableDef, cl coordinator.ConsistencyLevel) ringSend {
	stmt := "UPDATE " + def.Keyspace + "." + def.Name + " SET c = c + 1 WHERE k = ?"
	return func(ctx context.Context, _ int, key []byte, op *[16]byte) error {
		q := s.Query(stmt, string(key)).Consistency(gocql.Consistency(cl)).Idempotent(true).WithContext(ctx)
		if op != nil {
			q.CustomPayload(map[string][]byte{client.PayloadKey: op[:]})
		}
		err := q.Exec()
		q.Release()
		if un := (*gocql.RequestErrUnavailable)(nil); errors.As(err, &un) {
			return fmt.Errorf("%w: %w", errNotApplied, err)
		}
		return err
	}
}

// ringSession opens one gocql session to every node's CQL port, as the main
// benchmark's clients do: token-aware over round robin (replicas shuffled
// with shuffle, else the key's primary replica first), two connections per
// host, no driver retries (a timeout is an unknown outcome here), coalesce
// the write coalescing wait.
func ringSession(nodes []*node.Node, shuffle bool, coalesce time.Duration) (*gocql.Session, error) {
	var hosts []string
	port := 0
	for _, n := range nodes {
		h, p, err := net.SplitHostPort(n.Config().CQLAddr())
		if err != nil {
			return nil, fmt.Errorf("bench: node CQL address %q: %w", n.Config().CQLAddr(), err)
		}
		hosts = append(hosts, h)
		port, _ = strconv.Atoi(p)
	}
	cc := gocql.NewCluster(hosts...)
	cc.Port = port
	cc.Consistency = gocql.Quorum
	cc.Timeout = 5 * time.Second
	cc.WriteTimeout = 5 * time.Second
	cc.ConnectTimeout = 5 * time.Second
	cc.RetryPolicy = nil
	cc.NumConns = 2
	setCoalesce(cc, coalesce)
	cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	if shuffle {
		cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy(), gocql.ShuffleReplicas())
	}
	s, err := cc.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("bench: gocql session to %v: %w", hosts, err)
	}
	return s, nil
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapAllocs is the process's heap allocations so far: objects and bytes
// (runtime/metrics, cheap: no stop of the world).
func heapAllocs() [2]uint64 {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(samples)
	var out [2]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			out[i] = s.Value.Uint64()
		}
	}
	return out
}

func perOp(n uint64, ops int64) float64 {
	if ops <= 0 {
		return 0
	}
	return float64(n) / float64(ops)
}
