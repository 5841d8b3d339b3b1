package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/idemkv/idemkv/emulab"
)

func init() {
	register("emulab", "the paper's Emulab topologies (ring10, star4): NS files and scripts (ns), a local emulation in network namespaces (local), wait, cleanup", runEmulab)
}

const emulabUsage = `usage:
  idemkv emulab ns ring10|star4 [--project P --os OS --binary PATH --out DIR ...]
      write the Emulab NS file and start-up scripts for the real testbed
  idemkv emulab local ring10|star4 [--run-id R] [--bench "overcount --ops 2000"] [--exec CMD] [--keep] [--dry-run]
      emulate the topology on this machine (root): a network namespace per host,
      veth links shaped to 100 Mbit by tc tbf, static routes, one idemkv node per
      server; wait for the ring, run the experiment from the client, tear down
  idemkv emulab wait --peers IP:PORT,... [--timeout D]
      wait until every node sees every node up (used by run-client.sh)
  idemkv emulab cleanup [--run-id R]
      remove the namespaces (and their links and processes) earlier runs left behind`

func runEmulab(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, emulabUsage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "ns":
		return emulabNS(args[1:], stdout, stderr)
	case "local":
		return emulabLocal(args[1:], stdout, stderr)
	case "wait":
		return emulabWait(args[1:], stdout, stderr)
	case "cleanup":
		return emulabCleanup(args[1:], stdout, stderr)
	}
	fmt.Fprintln(stderr, emulabUsage)
	return fmt.Errorf("unknown emulab command %q", args[0])
}

// parseWithTopology parses flags that may come before or after the
// topology's name, and returns the topology.
func parseWithTopology(fs *flag.FlagSet, args []string) (emulab.Topology, error) {
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return emulab.Topology{}, err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return emulab.Topology{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if name == "" {
		return emulab.Topology{}, fmt.Errorf("which topology? (%s)", strings.Join(emulab.Names, ", "))
	}
	return emulab.ByName(name)
}

func emulabNS(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("emulab ns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o emulab.NSOptions
	fs.StringVar(&o.Project, "project", "idemkv", "Emulab project id (paths default under /proj/<project>/idemkv)")
	fs.StringVar(&o.OS, "os", emulab.DefaultOS, "disk image of every host (the paper used Ubuntu 14.04)")
	fs.StringVar(&o.Hardware, "hardware", "d710", "Emulab node type")
	fs.StringVar(&o.Binary, "binary", "", "the idemkv binary on the shared file system (default /proj/<project>/idemkv/bin/idemkv)")
	fs.StringVar(&o.Shared, "shared", "", "the experiment's shared directory for the scripts and results (default /proj/<project>/idemkv/<topology>)")
	fs.StringVar(&o.LocalDir, "local-dir", "", "each host's local-disk directory for the binary, config, data and logs (default /var/tmp/idemkv)")
	fs.StringVar(&o.Bench, "bench", "", "arguments of 'idemkv bench' the client runs, --hosts is appended (default: overcount on a ring, latency --batch 50 on a star)")
	out := fs.String("out", "", "output directory (default ./emulab-<topology>)")
	t, err := parseWithTopology(fs, args)
	if err != nil {
		return err
	}
	files, err := emulab.Generate(t, o)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = "emulab-" + t.Name
	}
	if err := emulab.WriteFiles(*out, files); err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(stdout, filepath.Join(*out, f.Name))
	}
	fmt.Fprintf(stdout, "%s: %d hosts, %d networks, %d static routes; see %s\n",
		t.Name, len(t.Hosts), len(t.Nets), len(t.Routes), filepath.Join(*out, "README"))
	return nil
}

func emulabLocal(args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("emulab local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runID := fs.String("run-id", "", "names this run's namespaces idemkv-<run-id>-<host> (default random)")
	bench := fs.String("bench", "", `arguments of 'idemkv bench' to run from the client, e.g. "overcount --ops 2000" (--hosts is appended)`)
	execCmd := fs.String("exec", "", "a sh command to run in the client's namespace instead (env IDEMKV, IDEMKV_HOSTS, IDEMKV_PEERS)")
	keep := fs.Bool("keep", false, "leave the emulation running at the end (remove it later with idemkv emulab cleanup)")
	dryRun := fs.Bool("dry-run", false, "print the commands that build the emulation and exit (needs no root)")
	binary := fs.String("binary", "", "the idemkv binary the nodes run (default this one)")
	dir := fs.String("dir", "", "the nodes' configs, data and logs (default <tmp>/idemkv-emulab-<run-id>)")
	wait := fs.Duration("wait", 90*time.Second, "how long to wait for the ring")
	gossip := fs.Int("gossip-ms", 0, "the nodes' gossip interval in ms (default the node's)")
	t, err := parseWithTopology(fs, args)
	if err != nil {
		return err
	}
	if *runID == "" {
		*runID = emulab.NewRunID()
	}
	if *dryRun {
		plan, err := emulab.PlanLocal(t, *runID)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, plan.Script())
		return err
	}
	if err := emulab.CheckPrivileges(); err != nil {
		return err
	}
	if *bench != "" && *execCmd != "" {
		return fmt.Errorf("--bench and --exec: choose one")
	}

	// The first signal cancels ctx; later ones stay caught (and are only
	// reported) until the deferred teardown below has finished.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for n := 0; ; n++ {
			s := <-sigs
			if n == 0 {
				fmt.Fprintf(stderr, "emulab: %v: stopping, then tearing down\n", s)
				cancel()
			} else {
				fmt.Fprintln(stderr, "emulab: still tearing down; please wait")
			}
		}
	}()

	l, err := emulab.StartLocal(ctx, t, emulab.LocalOptions{RunID: *runID, Binary: *binary, Dir: *dir, GossipIntervalMS: *gossip, Log: stderr})
	if err != nil {
		return err
	}
	defer func() {
		if *keep {
			fmt.Fprintf(stderr, "kept run %s running: namespaces %s\n  e.g. ip netns exec %s %s cql --host %s\n  remove it with: idemkv emulab cleanup --run-id %s   (logs in %s)\n",
				*runID, strings.Join(namespaces(l.Plan), " "), l.ClientNamespace(), l.Binary, l.Hosts()[0], *runID, l.Dir)
			return
		}
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err == nil {
			_ = os.RemoveAll(l.Dir)
		} else {
			fmt.Fprintf(stderr, "logs kept in %s\n", l.Dir)
		}
		if left, lerr := emulab.ListNamespaces(context.Background()); lerr == nil {
			for _, n := range left {
				if strings.HasPrefix(n, emulab.NamespacePrefix+*runID+"-") {
					err = errors.Join(err, fmt.Errorf("namespace %s is still there (idemkv emulab cleanup --run-id %s)", n, *runID))
				}
			}
		}
		fmt.Fprintf(stderr, "run %s removed\n", *runID)
	}()

	if err := l.WaitRing(ctx, *wait); err != nil {
		return err
	}
	var cmd interface{ Run() error }
	switch {
	case *bench != "":
		a := append([]string{"bench"}, strings.Fields(*bench)...)
		a = append(a, "--hosts", strings.Join(l.Hosts(), ","))
		fmt.Fprintf(stderr, "running in %s: idemkv %s\n", l.ClientNamespace(), strings.Join(a, " "))
		c := l.Command(ctx, a...)
		c.Stdout, c.Stderr = stdout, stderr
		cmd = c
	case *execCmd != "":
		fmt.Fprintf(stderr, "running in %s: %s\n", l.ClientNamespace(), *execCmd)
		c := l.Shell(ctx, *execCmd)
		c.Stdout, c.Stderr = stdout, stderr
		cmd = c
	default:
		fmt.Fprintf(stdout, "%s is up: %d nodes (%s); no experiment given (--bench or --exec)\n", t.Name, len(l.Hosts()), strings.Join(l.Hosts(), ", "))
		return nil
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		return fmt.Errorf("experiment: %w", err)
	}
	return nil
}

func namespaces(p emulab.LocalPlan) []string {
	var out []string
	for _, n := range p.Order {
		out = append(out, p.Namespaces[n])
	}
	return out
}

func emulabWait(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("emulab wait", flag.ContinueOnError)
	fs.SetOutput(stderr)
	peers := fs.String("peers", "", "comma-separated peer addresses, ip:storage_port")
	timeout := fs.Duration("timeout", 90*time.Second, "how long to wait")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *peers == "" {
		return fmt.Errorf("--peers is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return emulab.WaitRing(ctx, strings.Split(*peers, ","), stdout)
}

func emulabCleanup(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("emulab cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runID := fs.String("run-id", "", "only this run's namespaces (default every idemkv- namespace)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	removed, err := emulab.Cleanup(ctx, *runID)
	for _, n := range removed {
		fmt.Fprintf(stdout, "removed %s\n", n)
	}
	if err == nil && len(removed) == 0 {
		fmt.Fprintln(stdout, "nothing to clean up")
	}
	return err
}
