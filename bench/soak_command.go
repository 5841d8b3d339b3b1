package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"time"
)

// RunSoakCommand is 'idemkv bench soak': flags, run, report.
func RunSoakCommand(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseSoakFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stdout, "# idemkv bench soak %s\n", strings.Join(args, " "))
	limit := "GOMEMLIMIT as this process's environment has it"
	if cfg.MemoryLimit != "" {
		limit = "GOMEMLIMIT=" + cfg.MemoryLimit
	}
	fmt.Fprintf(stdout, "# one node process per design, its default configuration (counter_cache_size_in_mb and memtable_heap_space_in_mb: Cassandra's defaults), %s; %d distinct counters per design, each +1 once, sequential keys, %d closed-loop gocql writers at ONE (RF 1)\n",
		limit, cfg.Counters, cfg.Writers)
	fmt.Fprintln(stdout, "# RSS and anon from /proc/PID/status; heap = go_memstats_heap_inuse_bytes, cache = idemkv_cache_*{cache=\"counter\"}, SSTs/memtable = idemkv_table_* of the design's table")
	for _, d := range cfg.Designs {
		c := cfg
		c.Designs = []string{d}
		res, err := RunSoak(ctx, c)
		if err != nil {
			return err
		}
		for _, r := range res {
			if err := WriteSoakTable(stdout, r); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
	}
	return nil
}

// goMemLimitRE is the syntax of GOMEMLIMIT's sizes (runtime/debug).
var goMemLimitRE = regexp.MustCompile(`^[0-9]+(B|KiB|MiB|GiB|TiB)?$`)

// parseSoakFlags reads the soak's flags.
func parseSoakFlags(args []string, stderr io.Writer) (SoakConfig, error) {
	fs := flag.NewFlagSet("bench soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	designs := fs.String("designs", "vanilla,fbf", "counter designs, comma-separated: vanilla, fbf, handoff, reset, borrow")
	counters := fs.Int64("counters", 10_000_000, "distinct counters written per design")
	every := fs.Int64("sample-every", 1_000_000, "counters between samples during the load")
	after := fs.String("after", "0,30s,60s", "samples after the load stops, comma-separated offsets")
	flush := fs.Bool("flush", true, "flush the design's table after the last of --after, and sample again")
	writers := fs.Int("writers", 32, "closed-loop gocql writers")
	timeout := fs.Duration("timeout", 2*time.Second, "client timeout per attempt")
	seed := fs.Uint64("seed", 1, "seed of the op ids' client ids")
	dir := fs.String("dir", "", "data directories and node logs, one subdirectory per design (default: a temporary directory, removed)")
	binary := fs.String("binary", "", "the idemkv binary the node process runs (default: this executable)")
	limit := fs.Duration("load-limit", 0, "stop each design's load after this long, written or not (0: no limit)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	memLimit := fs.String("gomemlimit", "", "the node process's GOMEMLIMIT (e.g. 256MiB; default: this process's environment), from which its counter cache and memtable space defaults derive")
	profiles := fs.Bool("heap-profiles", false, "turn the node's admin_profiling on and save its heap profile at every sample, as heap-LABEL.pb.gz in the design's directory (needs --dir)")
	if err := fs.Parse(args); err != nil {
		return SoakConfig{}, err
	}
	if fs.NArg() > 0 {
		return SoakConfig{}, fmt.Errorf("bench soak: unexpected arguments %q", fs.Args())
	}
	ds, err := ParseDesigns(*designs)
	if err != nil {
		return SoakConfig{}, err
	}
	af, err := ParseDurations(*after)
	if err != nil {
		return SoakConfig{}, fmt.Errorf("--after: %w", err)
	}
	if *counters <= 0 || *every <= 0 || *writers <= 0 {
		return SoakConfig{}, fmt.Errorf("bench soak: --counters, --sample-every and --writers must be positive")
	}
	cfg := SoakConfig{Designs: ds, Counters: *counters, SampleEvery: *every, After: af, Flush: *flush, Writers: *writers,
		LoadLimit: *limit, Timeout: *timeout, Seed: *seed, Dir: *dir, Binary: *binary, HeapProfiles: *profiles, MemoryLimit: *memLimit}
	if *memLimit != "" && !goMemLimitRE.MatchString(*memLimit) {
		return SoakConfig{}, fmt.Errorf("bench soak: --gomemlimit %q: want a size as GOMEMLIMIT takes it, e.g. 256MiB or 1GiB", *memLimit)
	}
	if *profiles && *dir == "" {
		return SoakConfig{}, fmt.Errorf("bench soak: --heap-profiles needs --dir (the profiles are saved there)")
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	return cfg, nil
}
