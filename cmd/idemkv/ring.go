package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkv/idemkv/localring"
	"github.com/idemkv/idemkv/node"
)

func init() {
	register("ring", "run a local ring of node processes on 127.0.0.i (up, status, start, stop, restart, kill)", runRing)
}

func defaultRingDir() string {
	if d := os.Getenv("IDEMKV_RING_DIR"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".idemkv", "ring")
	}
	return filepath.Join(os.TempDir(), "idemkv-ring")
}

// ringVerb is one verb of idemkv ring.
type ringVerb struct {
	args    string // the positional arguments, for the usage line
	summary string
	node    int // 0: no node argument; 1: optional node I; 2: required node I
	flags   func(fs *flag.FlagSet, o *ringOpts)
	run     func(ctx context.Context, r localring.Ring, o *ringOpts, stdout io.Writer) error
}

// ringOpts are the flags and arguments of one verb.
type ringOpts struct {
	dir      string
	node     int
	wait     time.Duration
	grace    time.Duration
	n        int
	tokens   int
	syncMode string
	leader   string
	// test hooks written into every node.yaml (ring up)
	queryHandler string
	failWrites   string
}

var ringVerbs = map[string]ringVerb{
	"up": {
		summary: "create a ring of -n nodes in --dir and start it",
		flags: func(fs *flag.FlagSet, o *ringOpts) {
			fs.IntVar(&o.n, "n", 3, "number of nodes")
			fs.IntVar(&o.tokens, "num-tokens", 16, "vnodes per node")
			fs.StringVar(&o.syncMode, "commitlog-sync", "periodic", "periodic, batch or group")
			fs.StringVar(&o.leader, "counter-leader", "", "counter leader rule of every table without its own, random (Cassandra's) or first (default: random, and first for FBF tables)")
			fs.StringVar(&o.queryHandler, "custom-query-handler-class", "", "every node's custom_query_handler_class (test hook: mirror echoes requests' custom payloads)")
			fs.StringVar(&o.failWrites, "test-fail-writes-keyspace", "", "every node's test_fail_writes_keyspace (test hook: writes to that keyspace fail with WRITE_FAILURE)")
			waitFlag(fs, o)
		},
		run: func(ctx context.Context, r localring.Ring, o *ringOpts, w io.Writer) error {
			extra := func(_ int, c *node.Config) {
				c.CustomQueryHandlerClass = o.queryHandler
				c.TestFailWritesKeyspace = o.failWrites
			}
			if err := r.Up(ctx, localring.UpOptions{Nodes: o.n, NumTokens: o.tokens, CommitLogSync: o.syncMode, CounterLeader: o.leader, Extra: extra}); err != nil {
				return err
			}
			fmt.Fprintf(w, "ring of %d nodes up in %s\n", o.n, r.Dir)
			return printStatus(ctx, w, r, 0)
		},
	},
	"status": {
		summary: "show each node's process and the ring as a running node sees it",
		run: func(ctx context.Context, r localring.Ring, o *ringOpts, w io.Writer) error {
			return printStatus(ctx, w, r, 0)
		},
	},
	"start": {
		args:    "[I]",
		summary: "start node I, or every stopped node; a running node is left alone",
		node:    1,
		flags:   waitFlag,
		run: func(ctx context.Context, r localring.Ring, o *ringOpts, w io.Writer) error {
			if o.node > 0 {
				res, err := r.StartNode(ctx, o.node)
				if err != nil {
					return err
				}
				fmt.Fprintln(w, res)
				return printStatus(ctx, w, r, o.node)
			}
			res, err := r.StartAll(ctx)
			printResults(w, res)
			fmt.Fprintln(w, summarize(res, localring.DidStart, "started", "node"))
			if err != nil {
				// What runs and what does not, before the failure.
				_ = printStatus(context.Background(), w, r, 0)
				return err
			}
			return printStatus(ctx, w, r, 0)
		},
	},
	"stop": {
		args:    "[I]",
		summary: "stop node I, or every node (SIGTERM, then SIGKILL after --grace)",
		node:    1,
		flags:   graceFlag,
		run: func(ctx context.Context, r localring.Ring, o *ringOpts, w io.Writer) error {
			if o.node > 0 {
				res, err := r.StopNode(o.node, o.grace)
				if err != nil {
					return err
				}
				fmt.Fprintln(w, res)
				return nil
			}
			res, err := r.Stop(o.grace)
			printResults(w, res)
			fmt.Fprintln(w, summarize(res, localring.DidStop, "stopped", "node"))
			return err
		},
	},
	"restart": {
		args:    "[I]",
		summary: "stop and start node I, or every node",
		node:    1,
		flags: func(fs *flag.FlagSet, o *ringOpts) {
			graceFlag(fs, o)
			waitFlag(fs, o)
		},
		run: func(ctx context.Context, r localring.Ring, o *ringOpts, w io.Writer) error {
			res, err := r.Restart(ctx, o.node, o.grace)
			printResults(w, res)
			if err != nil {
				_ = printStatus(context.Background(), w, r, 0)
				return err
			}
			return printStatus(ctx, w, r, o.node)
		},
	},
	"kill": {
		args:    "I",
		summary: "kill node I with SIGKILL (an unclean stop)",
		node:    2,
		run: func(ctx context.Context, r localring.Ring, o *ringOpts, w io.Writer) error {
			res, err := r.Kill(o.node)
			if err != nil {
				return err
			}
			fmt.Fprintln(w, res)
			return nil
		},
	},
}

var ringVerbOrder = []string{"up", "status", "start", "stop", "restart", "kill"}

func waitFlag(fs *flag.FlagSet, o *ringOpts) {
	fs.DurationVar(&o.wait, "wait", 60*time.Second, "how long to wait for the nodes to be up")
}

func graceFlag(fs *flag.FlagSet, o *ringOpts) {
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "how long a node has to stop cleanly before SIGKILL")
}

func ringUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: idemkv ring <verb> [I] [flags]")
	fmt.Fprintln(w, "\nA local ring of node processes: node I listens on 127.0.0.I and keeps its")
	fmt.Fprintln(w, "node.yaml, data, node.log and pid in <dir>/nodeI (--dir, env IDEMKV_RING_DIR).")
	fmt.Fprintln(w, "\nverbs:")
	for _, name := range ringVerbOrder {
		v := ringVerbs[name]
		fmt.Fprintf(w, "  %-12s %s\n", strings.TrimSpace(name+" "+v.args), v.summary)
	}
	fmt.Fprintln(w, "\nrun 'idemkv ring <verb> -h' for a verb's flags")
}

func runRing(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		ringUsage(stderr)
		return errors.New("which verb?")
	}
	name := args[0]
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		ringUsage(stderr)
		return flag.ErrHelp
	}
	v, ok := ringVerbs[name]
	if !ok {
		ringUsage(stderr)
		return fmt.Errorf("unknown verb %q", name)
	}
	o := &ringOpts{}
	fs := flag.NewFlagSet("ring "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dir, "dir", defaultRingDir(), "the ring's directory (env IDEMKV_RING_DIR)")
	if v.flags != nil {
		v.flags(fs, o)
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: idemkv ring %s [flags]\n\n%s\n\nflags:\n", strings.TrimSpace(name+" "+v.args), v.summary)
		fs.PrintDefaults()
	}
	// The node number may come before or after the flags.
	rest := args[1:]
	var pos []string
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		pos, rest = rest[:1], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	pos = append(pos, fs.Args()...)
	switch {
	case v.node == 0 && len(pos) > 0, v.node > 0 && len(pos) > 1:
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", pos[len(pos)-1])
	case v.node == 2 && len(pos) == 0:
		fs.Usage()
		return fmt.Errorf("which node? (idemkv ring %s I)", name)
	case len(pos) == 1:
		i, err := strconv.Atoi(pos[0])
		if err != nil || i < 1 {
			return fmt.Errorf("%q is not a node number", pos[0])
		}
		o.node = i
	}
	wait := o.wait
	if wait <= 0 {
		wait = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait+o.grace)
	defer cancel()
	return v.run(ctx, localring.Ring{Dir: o.dir}, o, stdout)
}

func printResults(w io.Writer, res []localring.Result) {
	for _, r := range res {
		fmt.Fprintln(w, r)
	}
}

// summarize counts the results: "stopped 3 nodes", "started 1 node, 2
// already running", "no node stopped".
func summarize(res []localring.Result, did, verb, noun string) string {
	n, already, not := 0, 0, 0
	for _, r := range res {
		switch r.What {
		case did, localring.DidKillAfterGrace:
			n++
		case localring.DidAlreadyRunning:
			already++
		case localring.DidNotRunning:
			not++
		}
	}
	plural := func(k int) string {
		if k == 1 {
			return fmt.Sprintf("%d %s", k, noun)
		}
		return fmt.Sprintf("%d %ss", k, noun)
	}
	s := verb + " " + plural(n)
	if n == 0 {
		s = "no " + noun + " " + verb
	}
	if already > 0 {
		s += fmt.Sprintf(", %d already running", already)
	}
	if not > 0 {
		s += fmt.Sprintf(", %d not running", not)
	}
	return s
}

// printStatus shows each node's process, and the ring as one node sees it:
// node from when it is not 0, else the first that answers.
func printStatus(ctx context.Context, w io.Writer, r localring.Ring, from int) error {
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	var view *localring.NodeStatus
	for k, s := range st {
		if s.View != nil && (s.Node == from || (view == nil && from == 0)) {
			view = &st[k]
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "node\taddress\tpid\tprocess\tstate\tstatus\ttokens\tload\towns\thost id")
	for _, s := range st {
		state, status, ntok, load, owns, host := "?", "?", "-", "-", "-", "-"
		proc, pid := "stopped", "-"
		if s.Running {
			proc, pid = "running", strconv.Itoa(s.PID)
			if s.Err != nil {
				proc = "not answering"
			}
		}
		if view != nil {
			for _, p := range view.View {
				if p.Addr == s.Addr {
					state = map[bool]string{true: "UP", false: "DOWN"}[p.Up]
					status, ntok, load = p.Status, strconv.Itoa(len(p.Tokens)), fmt.Sprintf("%.1f KiB", float64(p.Load)/1024)
					owns, host = fmt.Sprintf("%.1f%%", p.Owns*100), p.HostID
				}
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Node, s.Addr, pid, proc, state, status, ntok, load, owns, host)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case view != nil:
		fmt.Fprintf(w, "(state as seen by node %d)\n", view.Node)
	case from != 0:
		fmt.Fprintf(w, "(node %d does not answer: no view of the ring)\n", from)
	default:
		fmt.Fprintln(w, "(no node answers: no view of the ring)")
	}
	return nil
}
