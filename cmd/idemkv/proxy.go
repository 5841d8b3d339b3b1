package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemkv/idemkv/faultproxy"
)

func init() {
	register("proxy", "run CQL-aware fault proxies in front of any CQL servers (lost acks, late answers, resets; peer addresses rewritten)", runProxy)
}

const proxyUsage = `usage: idemkv proxy --listen A1,A2,... --to S1,S2,... [flags]

Starts one CQL-aware fault proxy per server: proxy i accepts driver
connections on Ai and forwards them to Si, and rewrites the servers'
addresses in system.local, system.peers and system.peers_v2 rows and in
topology and status events into the proxies' addresses, so that drivers
given any Ai discover only the proxies and route by token to them.
Counter writes (QUERY, EXECUTE or BATCH of an UPDATE) meet seeded faults
by the bench's schedule: a lost ack (forwarded, applied, answer dropped),
a late answer (held --delay-by), a reset connection. Each fault is printed
as a line (and, with --events, a JSON line in a file); on exit the counts.
Runs until interrupted, or for --for.
`

func runProxy(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveProxy(ctx, args, stdout, stderr)
}

// serveProxy is idemkv proxy until ctx ends.
func serveProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, proxyUsage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "", "the proxies' addresses, comma-separated (host:port; port 0 picks one)")
	to := fs.String("to", "", "the servers' CQL addresses, comma-separated, one per --listen (host:port)")
	seed := fs.Uint64("seed", 1, "seed of the fault decisions")
	lostAck := fs.Float64("lost-ack", 0, "probability that a counter write's answer is dropped after the server applied it")
	delay := fs.Float64("delay", 0, "probability that a counter write's answer is held for --delay-by")
	delayBy := fs.Duration("delay-by", faultproxy.DefaultDelayBy, "how long a late answer is held (past the client's timeout)")
	reset := fs.Float64("reset", 0, "probability that the connection is closed once a counter write is forwarded")
	events := fs.String("events", "", "also write every fault as a JSON line to this file")
	dur := fs.Duration("for", 0, "stop after this long (0: until interrupted)")
	forget := fs.Duration("forget-after", time.Minute, "forget an op id not seen for this long (above the clients' retry horizon; 0: never)")
	verbose := fs.Bool("v", false, "log every connection closed on an error (malformed frame, failed dial)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	ls, ts := splitList(*listen), splitList(*to)
	if len(ls) == 0 || len(ls) != len(ts) {
		return fmt.Errorf("give as many --listen as --to addresses (%d and %d), at least one", len(ls), len(ts))
	}
	var ev io.Writer
	if *events != "" {
		f, err := os.Create(*events)
		if err != nil {
			return fmt.Errorf("--events: %w", err)
		}
		defer f.Close()
		ev = f
	}
	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	var mu sync.Mutex
	start := time.Now()
	g, err := faultproxy.NewGroup(faultproxy.Config{
		Schedule:    faultproxy.Schedule{Seed: *seed, LostAck: *lostAck, Delay: *delay, DelayBy: *delayBy, Reset: *reset},
		Logger:      slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		ForgetAfter: *forget,
		OnEvent: func(e faultproxy.Event) {
			mu.Lock()
			defer mu.Unlock()
			op := "-"
			if e.HasOp {
				op = fmt.Sprintf("%x:%d", e.Op.Client, e.Op.Sequence)
			}
			fmt.Fprintf(stdout, "%s +%.3fs node %d stream %d %s op %s attempt %d\n",
				e.At.UTC().Format("15:04:05.000"), e.At.Sub(start).Seconds(), e.Node, e.Stream, e.Kind, op, e.Attempt)
			if ev != nil {
				_ = json.NewEncoder(ev).Encode(proxyEvent{AtMS: float64(e.At.Sub(start).Microseconds()) / 1000, Node: e.Node, Proxy: e.Proxy,
					Stream: e.Stream, Kind: e.Kind, Client: e.Op.Client, Seq: e.Op.Sequence, HasOp: e.HasOp, Attempt: e.Attempt})
			}
		},
	})
	if err != nil {
		return err
	}
	defer g.Close()
	for i := range ls {
		p, err := g.Listen(ls[i], ts[i])
		if err != nil {
			return err
		}
		mu.Lock()
		fmt.Fprintf(stdout, "proxy %d: %s -> %s\n", p.Node(), p.Addr(), p.Target())
		mu.Unlock()
	}
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	<-ctx.Done()
	err = g.Close()
	mu.Lock()
	defer mu.Unlock()
	counts := g.Counts()
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	fmt.Fprintf(stdout, "faults: %s\n", strings.Join(parts, ", "))
	for _, p := range g.Proxies() {
		s := p.Stats()
		fmt.Fprintf(stdout, "proxy %d: %d connections, %d requests, %d counter writes, %d faults, %d frames rewritten\n",
			p.Node(), s.Conns, s.Requests, s.Matched, s.Faults, s.Rewrites)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// proxyEvent is a fault as written to --events.
type proxyEvent struct {
	AtMS    float64 `json:"at_ms"`
	Node    int     `json:"node"`
	Proxy   string  `json:"proxy"`
	Stream  int16   `json:"stream"`
	Kind    string  `json:"kind"`
	HasOp   bool    `json:"has_op"`
	Client  uint64  `json:"client,omitempty"`
	Seq     uint64  `json:"seq,omitempty"`
	Attempt int     `json:"attempt"`
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
