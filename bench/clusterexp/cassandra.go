package clusterexp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"time"

	"github.com/gocql/gocql"
)

// Fig6CassandraMode is the mode of Fig6Cassandra's rows.
const Fig6CassandraMode = cassandraVanilla

// Fig6Keyspace is the keyspace Fig6Cassandra drops and creates on the
// Cassandra ring, with table c1 (k text PRIMARY KEY, c counter).
const Fig6Keyspace = "idemkv_fig6"

// Fig6CassandraSteps are the steps of Fig6Cassandra, as its rows name them
// (step 5 only with a Fig6Peer).
var Fig6CassandraSteps = []string{
	"1: A coordinates +1",
	"2: B coordinates +2",
	"3: nodetool flush on A and B",
	"4: A coordinates +3, ack lost, retried at A",
	"5: SIGKILL A, restart it (commit log replayed)",
}

// Fig6Peer acts on the nodes of Fig6Cassandra's ring beyond CQL, node 1
// being A and node 2 B: package peer/cassandra's Ring of a ring started
// with JMX ('idemkv peer cassandra up -n 2 --jmx').
type Fig6Peer interface {
	// Flush writes the node's memtables of keyspace to SSTables.
	Flush(ctx context.Context, node int, keyspace string) error
	// Kill stops the node uncleanly; Restart starts it again on its data
	// and returns once the ring is up.
	Kill(node int) error
	Restart(ctx context.Context, node int) error
}

// Fig6CassandraNoFlush names step 3 of a run without a flush.
const Fig6CassandraNoFlush = "3: flush skipped (no JMX, no nodetool)"

// Fig6Cassandra runs the four-step scenario of Figs. 6 and 7 on a real
// Apache Cassandra ring of exactly two nodes A and B (hosts, host:port;
// 'idemkv peer cassandra up -n 2'), counter c1 at RF 2:
//
//  1. A coordinates +1 (a session that knows A alone, so A is the
//     coordinator and, being a replica, Cassandra's counter leader);
//  2. B coordinates +2;
//  3. peer flushes A's and B's memtables of the keyspace to SSTables
//     ('nodetool flush'); with peer nil the step is skipped, which changes
//     nothing either: since 2.1 a counter's replicas hold and log its
//     value, not deltas;
//  4. A coordinates +3 and the client drops the acknowledgement it got
//     (the bench's client-side lost ack: the update applied); the client
//     retries the same update at A;
//  5. with a peer only: A is killed (SIGKILL) and restarted, so it replays
//     the commit log that holds step 4 over its flushed SSTable — the
//     legacy 2.0 counter's over-count (Fig6's legacy mode) does not happen
//     since 2.1.
//
// Every write is at ALL, and after every step both A and B coordinate a
// read at ALL. The paper's Fig. 6 predicts 1, 3, 3, 9; the rows hold what
// the ring reads.
func Fig6Cassandra(ctx context.Context, hosts []string, peer Fig6Peer) ([]Fig6Row, error) {
	if len(hosts) != 2 {
		return nil, fmt.Errorf("fig6 on Cassandra: want the CQL addresses of 2 nodes A and B, got %d", len(hosts))
	}
	sa, err := pinnedSession(hosts[0])
	if err != nil {
		return nil, err
	}
	defer func() { sa.Close() }()
	sb, err := pinnedSession(hosts[1])
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	if err := checkTwoNodes(ctx, sa, hosts[1]); err != nil {
		return nil, err
	}
	for _, stmt := range []string{
		"DROP KEYSPACE IF EXISTS " + Fig6Keyspace,
		"CREATE KEYSPACE " + Fig6Keyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
		"CREATE TABLE " + Fig6Keyspace + ".c1 (k text PRIMARY KEY, c counter)",
	} {
		if err := sa.Query(stmt).WithContext(ctx).Exec(); err != nil {
			return nil, fmt.Errorf("fig6 on Cassandra: %s: %w", stmt, err)
		}
	}
	if err := waitTable(ctx, sb); err != nil {
		return nil, err
	}
	update := func(s *gocql.Session, delta int64) error {
		q := s.Query("UPDATE "+Fig6Keyspace+".c1 SET c = c + ? WHERE k = 'c1'", delta).
			Consistency(gocql.All).RetryPolicy(nil).WithContext(ctx)
		if err := q.Exec(); err != nil {
			return fmt.Errorf("fig6 on Cassandra: +%d: %w", delta, err)
		}
		return nil
	}
	steps := []func() error{
		func() error { return update(sa, 1) },
		func() error { return update(sb, 2) },
		func() error {
			if peer == nil {
				return nil
			}
			for node := 1; node <= 2; node++ {
				if err := peer.Flush(ctx, node, Fig6Keyspace); err != nil {
					return fmt.Errorf("fig6 on Cassandra: flush: %w", err)
				}
			}
			return nil
		},
		func() error {
			// The first attempt applies and is acknowledged; the client
			// drops the acknowledgement, as after a lost answer, and
			// retries the same update at the same coordinator.
			if err := update(sa, 3); err != nil {
				return err
			}
			return update(sa, 3)
		},
	}
	papers := []int64{1, 3, 3, 9, -1}
	if peer != nil {
		steps = append(steps, func() error {
			if err := peer.Kill(1); err != nil {
				return fmt.Errorf("fig6 on Cassandra: %w", err)
			}
			if err := peer.Restart(ctx, 1); err != nil {
				return fmt.Errorf("fig6 on Cassandra: %w", err)
			}
			// The session's only host went away: a new one.
			sa.Close()
			if sa, err = pinnedSession(hosts[0]); err != nil {
				return err
			}
			return nil
		})
	}
	var rows []Fig6Row
	for i, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
		a, err := readAll(ctx, sa)
		if err != nil {
			return nil, err
		}
		b, err := readAll(ctx, sb)
		if err != nil {
			return nil, err
		}
		step := Fig6CassandraSteps[i]
		if i == 2 && peer == nil {
			step = Fig6CassandraNoFlush
		}
		rows = append(rows, Fig6Row{Step: step, Mode: Fig6CassandraMode, A: a, B: b, PaperValue: papers[i]})
	}
	return rows, nil
}

// pinnedSession is a gocql session to the node at addr (host:port) alone:
// every request it sends is coordinated by that node.
func pinnedSession(addr string) (*gocql.Session, error) {
	host, port, err := splitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cc := gocql.NewCluster(host)
	cc.Port = port
	cc.ProtoVersion = 4
	cc.DisableInitialHostLookup = true
	cc.HostFilter = gocql.WhiteListHostFilter(host)
	cc.Timeout, cc.ConnectTimeout = 10*time.Second, 10*time.Second
	cc.NumConns = 1
	cc.Logger = log.New(io.Discard, "", 0)
	s, err := cc.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("fig6 on Cassandra: CQL session to %s: %w", addr, err)
	}
	return s, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("fig6 on Cassandra: address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("fig6 on Cassandra: address %q: %w", addr, err)
	}
	return host, port, nil
}

// checkTwoNodes makes sure that A's ring is A and B alone: at RF 2 both
// are then replicas of every key.
func checkTwoNodes(ctx context.Context, sa *gocql.Session, b string) error {
	bHost, _, err := splitHostPort(b)
	if err != nil {
		return err
	}
	iter := sa.Query("SELECT peer FROM system.peers").WithContext(ctx).Iter()
	var peers []string
	var ip net.IP
	for iter.Scan(&ip) {
		peers = append(peers, ip.String())
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("fig6 on Cassandra: system.peers: %w", err)
	}
	if len(peers) != 1 || peers[0] != bHost {
		return fmt.Errorf("fig6 on Cassandra: A's peers are %v; want B (%s) alone, a 2-node ring ('idemkv peer cassandra up -n 2')", peers, bHost)
	}
	return nil
}

// waitTable waits until B knows table c1.
func waitTable(ctx context.Context, sb *gocql.Session) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var name string
		err := sb.Query("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = 'c1'", Fig6Keyspace).
			WithContext(ctx).Scan(&name)
		if err == nil {
			return nil
		}
		if !errors.Is(err, gocql.ErrNotFound) || time.Now().After(deadline) {
			return fmt.Errorf("fig6 on Cassandra: B does not know table %s.c1: %w", Fig6Keyspace, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readAll reads c1 at ALL through the session's node; no row reads 0.
func readAll(ctx context.Context, s *gocql.Session) (int64, error) {
	var v int64
	err := s.Query("SELECT c FROM " + Fig6Keyspace + ".c1 WHERE k = 'c1'").Consistency(gocql.All).RetryPolicy(nil).WithContext(ctx).Scan(&v)
	if errors.Is(err, gocql.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fig6 on Cassandra: read at ALL: %w", err)
	}
	return v, nil
}
