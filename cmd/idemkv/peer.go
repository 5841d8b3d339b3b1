package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkv/idemkv/peer/cassandra"
)

func init() {
	register("peer", "run a real Apache Cassandra ring on 127.0.1.i to compare with (peer cassandra up|status|stop)", runPeer)
}

func defaultPeerDir() string {
	if d := os.Getenv("IDEMKV_PEER_DIR"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".idemkv", "peer-cassandra")
	}
	return filepath.Join(os.TempDir(), "idemkv-peer-cassandra")
}

const peerUsage = `usage: idemkv peer cassandra up [-n N] [flags]   start an Apache Cassandra ring, node i on 127.0.1.i (CQL 9042)
       idemkv peer cassandra status [--dir D]     each node's pid, address, process and CQL state
       idemkv peer cassandra stop [--dir D]       SIGTERM every node, SIGKILL after --grace

The first 'up' resolves cassandra-all and its runtime dependencies from Maven
Central into the cache (--cache); it needs Maven and a JDK 17. Then
'idemkv bench --hosts 127.0.1.1,127.0.1.2,127.0.1.3 --modes vanilla' runs the
benchmark against it.
`

func runPeer(args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 || args[0] != "cassandra" {
		fmt.Fprint(stderr, peerUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return flag.ErrHelp
		}
		return fmt.Errorf("peer: want 'peer cassandra up|status|stop'")
	}
	verb := args[1]
	fs := flag.NewFlagSet("peer cassandra "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, peerUsage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	dir := fs.String("dir", defaultPeerDir(), "the peer ring's directory (env IDEMKV_PEER_DIR)")
	n := fs.Int("n", 3, "up: number of nodes")
	version := fs.String("version", cassandra.DefaultVersion, "up: Cassandra release (org.apache.cassandra:cassandra-all on Maven Central)")
	cache := fs.String("cache", cassandra.DefaultCacheDir(), "up: cache of resolved releases (env IDEMKV_CASSANDRA_CACHE)")
	heap := fs.String("heap", "1G", "up: -Xms and -Xmx of every node")
	tokens := fs.Int("num-tokens", 16, "up: vnodes per node")
	syncMode := fs.String("commitlog-sync", "periodic", "up: periodic or batch (match the bench's --commitlog-sync)")
	cwt := fs.Duration("counter-write-timeout", time.Second, "up: counter_write_request_timeout (match the bench's --counter-write-timeout)")
	wipe := fs.Bool("wipe", false, "up: remove the nodes' data and logs first (default: restart on the data there is)")
	jmx := fs.Bool("jmx", false, "up: open node i's JMX on 127.0.0.1:7198+i (local, no authentication) so that nodetool, e.g. the flush of 'experiment cluster fig6 --cassandra-dir', can reach it")
	wait := fs.Duration("wait", 5*time.Minute, "up: how long to wait for the ring, the first download included")
	grace := fs.Duration("grace", 30*time.Second, "stop: how long a node may take to shut down before SIGKILL")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("peer cassandra %s: unexpected argument %q", verb, fs.Arg(0))
	}
	r := cassandra.Ring{Dir: *dir}
	switch verb {
	case "up":
		ctx, cancel := context.WithTimeout(context.Background(), *wait)
		defer cancel()
		start := time.Now()
		err := r.Up(ctx, cassandra.UpOptions{Nodes: *n, Version: *version, CacheDir: *cache, Heap: *heap, NumTokens: *tokens,
			CommitLogSync: *syncMode, CounterWriteTimeout: *cwt, Wipe: *wipe, Log: stderr, JMX: *jmx})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Cassandra peer ring of %d nodes up in %s (%s)\n", *n, r.Dir, time.Since(start).Round(100*time.Millisecond))
		return printPeerStatus(ctx, stdout, r)
	case "status":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return printPeerStatus(ctx, stdout, r)
	case "stop":
		return r.Stop(*grace)
	}
	fmt.Fprint(stderr, peerUsage)
	return fmt.Errorf("peer cassandra: unknown verb %q (up, status, stop)", verb)
}

func printPeerStatus(ctx context.Context, w io.Writer, r cassandra.Ring) error {
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "node\tCQL address\tpid\tprocess\tCQL\trelease\tnormal\treplicas up\tpeers")
	for _, s := range st {
		proc, cql, rel, peers, normal, all := "stopped", "-", "-", "-", "-", "-"
		if s.Running {
			proc, cql = "running", "no"
		}
		if s.CQL {
			cql, rel, peers = "answers", s.Release, strings.Join(s.Peers, ",")
			normal, all = fmt.Sprintf("%d/%d", s.Normal, len(st)), "unavailable"
			if s.Reaches {
				all = "ok"
			}
		}
		if peers == "" {
			peers = "(none)"
		}
		pid := "-"
		if s.PID > 0 {
			pid = fmt.Sprint(s.PID)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Node, s.Addr, pid, proc, cql, rel, normal, all, peers)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range st {
		if s.Err != nil {
			fmt.Fprintf(w, "node %d: %v\n", s.Node, s.Err)
		}
	}
	fmt.Fprintln(w, "(normal: nodes the node's gossip shows joined and serving CQL; replicas up: whether reads it coordinates that need every replica succeed)")
	return nil
}
