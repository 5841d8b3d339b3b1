package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkv/idemkv/admin"
)

func init() {
	register("nodetool", "operate a node as Cassandra's nodetool does (status, info, flush, compact, drain, tablestats, describering, getendpoints)", runNodetool)
}

// nodetoolVerb is one nodetool command.
type nodetoolVerb struct {
	args    string // the arguments, for the usage line
	summary string
	run     func(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error
}

var nodetoolVerbs = map[string]nodetoolVerb{
	"status":       {"[KEYSPACE]", "the ring as the node sees it: one line per node (UN = up, normal); with a keyspace, its effective ownership", ntStatus},
	"info":         {"", "the node: host id, load, uptime, memory, caches", ntInfo},
	"flush":        {"[KEYSPACE [TABLE...]]", "write memtables to SSTables (every table when no keyspace is given)", ntFlush},
	"compact":      {"[KEYSPACE [TABLE...]]", "merge each table's SSTables into one (a major compaction)", ntCompact},
	"drain":        {"", "flush every table, stop serving CQL and leave the ring, before the process is stopped", ntDrain},
	"decommission": {"", "stream the node's ranges to the nodes that take them over, leave the ring for good (UL, then gone from status)", ntDecommission},
	"tablestats":   {"[KEYSPACE[.TABLE]...]", "per table: SSTables, sizes, memtable, counter columns' filters and design statistics", ntTableStats},
	"cfstats":      {"[KEYSPACE[.TABLE]...]", "the old name of tablestats", ntTableStats},
	"describering": {"KEYSPACE", "the token ranges of a keyspace and their replicas", ntDescribeRing},
	"getendpoints": {"KEYSPACE TABLE KEY", "the replicas of a partition key (a composite key's values separated by ':')", ntGetEndpoints},
}

func nodetoolUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: idemkv nodetool [--host HOST] [--port PORT] COMMAND [ARGS]")
	fmt.Fprintln(w, "\nTalks to a node's admin endpoint (admin_port, 9180 by default; docs/operations.md).")
	fmt.Fprintln(w, "\nflags:")
	fs.PrintDefaults()
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(nodetoolVerbs))
	for n := range nodetoolVerbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-13s %s\n", n, nodetoolVerbs[n].summary)
	}
	fmt.Fprintln(w, "\nrun 'idemkv nodetool COMMAND -h' for a command's arguments")
}

func runNodetool(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nodetool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "127.0.0.1", "the node's address (its listen_address)")
	port := fs.Int("port", admin.DefaultPort, "the node's admin port (admin_port)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (a flush or a compaction of a large table takes a while)")
	fs.Usage = func() { nodetoolUsage(stderr, fs) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		nodetoolUsage(stderr, fs)
		return errors.New("no command given")
	}
	name := fs.Arg(0)
	verb, ok := nodetoolVerbs[name]
	if !ok {
		nodetoolUsage(stderr, fs)
		return fmt.Errorf("unknown command %q", name)
	}
	vfs := flag.NewFlagSet("nodetool "+name, flag.ContinueOnError)
	vfs.SetOutput(stderr)
	vfs.Usage = func() {
		fmt.Fprintf(stderr, "usage: idemkv nodetool [--host HOST] [--port PORT] %s %s\n\n%s\n", name, verb.args, verb.summary)
		if name == "info" {
			fmt.Fprintln(stderr, "\nflags:")
			vfs.PrintDefaults()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// No overall HTTP timeout (a flush may take long: --timeout bounds it),
	// but a node that does not answer the connection fails fast.
	c := &admin.Client{Addr: net.JoinHostPort(*host, strconv.Itoa(*port)), HTTP: &http.Client{
		Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext},
	}}
	return verb.run(ctx, c, vfs, fs.Args()[1:], stdout)
}

// nargs parses a verb's flags and checks its argument count.
func nargs(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if n := fs.NArg(); n < min || (max >= 0 && n > max) {
		fs.Usage()
		return nil, fmt.Errorf("%s: wrong number of arguments", fs.Name())
	}
	return fs.Args(), nil
}

// humanBytes formats a size as nodetool does: "12 bytes", "1.5 KiB".
func humanBytes(b int64) string {
	if b < 1024 {
		return fmt.Sprintf("%d bytes", b)
	}
	f := float64(b)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= 1024
		if f < 1024 || u == "TiB" {
			return fmt.Sprintf("%.2f %s", f, u)
		}
	}
	return ""
}

// uuid formats a 32-hex host id as a UUID, as Cassandra shows host ids.
func uuid(id string) string {
	if len(id) != 32 {
		return id
	}
	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
}

func ntStatus(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	args, err := nargs(fs, args, 0, 1)
	if err != nil {
		return err
	}
	keyspace := ""
	if len(args) == 1 {
		keyspace = args[0]
	}
	peers, err := c.Status(ctx, keyspace)
	if err != nil {
		return err
	}
	owns := "Owns"
	if keyspace != "" {
		owns = "Owns (effective)"
	}
	byDC := map[string][]admin.Peer{}
	var dcs []string
	for _, p := range peers {
		if _, ok := byDC[p.DC]; !ok {
			dcs = append(dcs, p.DC)
		}
		byDC[p.DC] = append(byDC[p.DC], p)
	}
	sort.Strings(dcs)
	for i, dc := range dcs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		title := "Datacenter: " + dc
		fmt.Fprintf(w, "%s\n%s\n", title, strings.Repeat("=", len(title)))
		fmt.Fprintln(w, "Status=Up/Down")
		fmt.Fprintln(w, "|/ State=Normal/Leaving/Joining/Moving")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "--\tAddress\tLoad\tTokens\t%s\tHost ID\tRack\n", owns)
		for _, p := range byDC[dc] {
			st := "D"
			if p.Up {
				st = "U"
			}
			state := "N"
			switch strings.ToLower(p.Status) {
			case "leaving", "left":
				state = "L"
			case "joining":
				state = "J"
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%d\t%.1f%%\t%s\t%s\n", st, state, p.Address, humanBytes(p.Load), p.Tokens, p.Owns*100, uuid(p.HostID), p.Rack)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if keyspace == "" {
		fmt.Fprintln(w, "\nNote: Non-system keyspaces may replicate differently: Owns is each node's share of the token ring; give a keyspace for its effective ownership.")
	}
	return nil
}

// cacheLine is nodetool info's line of a cache, as Cassandra's ("entries
// 0, size 0 bytes, capacity 50 MiB, 0 hits, 0 requests, NaN recent hit
// rate, ..."), with the evictions and the entries pinned now instead of
// the save period (idemkv saves no caches). The hit rate is since the
// start.
func cacheLine(c admin.Cache) string {
	req := c.Hits + c.Misses
	rate := "NaN"
	if req > 0 {
		rate = fmt.Sprintf("%.3f", float64(c.Hits)/float64(req))
	}
	capacity := "unbounded"
	if c.CapacityBytes > 0 {
		capacity = humanBytes(c.CapacityBytes)
	}
	return fmt.Sprintf("entries %d, size %s, capacity %s, %d hits, %d requests, %s recent hit rate, %d evictions, %d pinned",
		c.Entries, humanBytes(c.SizeBytes), capacity, c.Hits, req, rate, c.Evictions, c.Pinned)
}

func ntInfo(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	if _, err := nargs(fs, args, 0, 0); err != nil {
		return err
	}
	in, err := c.Info(ctx)
	if err != nil {
		return err
	}
	lines := [][2]string{
		{"ID", uuid(in.HostID)},
		{"Gossip active", strconv.FormatBool(in.Gossip)},
		{"Native Transport active", strconv.FormatBool(in.NativeProtocol)},
		{"Load", humanBytes(in.LoadBytes)},
		{"Generation No", strconv.FormatInt(in.Generation, 10)},
		{"Uptime (seconds)", strconv.FormatInt(int64(in.UptimeSeconds), 10)},
		{"Heap Memory (MB)", fmt.Sprintf("%.2f / %.2f", float64(in.HeapUsedBytes)/(1<<20), float64(in.HeapSysBytes)/(1<<20))},
		{"Data Center", in.DC},
		{"Rack", in.Rack},
		{"Exceptions", strconv.FormatUint(in.CorruptBlocks, 10) + " (corrupt SSTable blocks read)"},
		{"Counter Cache", cacheLine(in.CounterCache)},
		{"Commit log", humanBytes(in.CommitLogBytes)},
		{"Hints pending", strconv.Itoa(in.HintsPending)},
		{"CQL connections", strconv.FormatInt(in.CQLConnections, 10)},
		{"Mode", in.Mode},
		{"Addresses", fmt.Sprintf("peer %s, CQL %s, admin %s", in.PeerAddr, in.CQLAddr, in.AdminAddr)},
		{"Cluster", in.ClusterName},
		{"Release version", in.ReleaseVersion},
		{"Schema version", in.SchemaVersion},
		{"Token", fmt.Sprintf("(%d tokens: see describering)", in.Tokens)},
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%-23s: %s\n", l[0], l[1])
	}
	return nil
}

// forTables calls f for KEYSPACE [TABLE...] (a keyspace alone: its tables; nothing: every table).
func forTables(args []string, f func(ks, table string) error) error {
	if len(args) == 0 {
		return f("", "")
	}
	if len(args) == 1 {
		return f(args[0], "")
	}
	for _, t := range args[1:] {
		if err := f(args[0], t); err != nil {
			return err
		}
	}
	return nil
}

func ntFlush(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	args, err := nargs(fs, args, 0, -1)
	if err != nil {
		return err
	}
	return forTables(args, func(ks, t string) error { return c.Flush(ctx, ks, t) })
}

func ntCompact(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	args, err := nargs(fs, args, 0, -1)
	if err != nil {
		return err
	}
	return forTables(args, func(ks, t string) error { return c.Compact(ctx, ks, t) })
}

func ntDrain(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	if _, err := nargs(fs, args, 0, 0); err != nil {
		return err
	}
	return c.Drain(ctx)
}

func ntDecommission(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	if _, err := nargs(fs, args, 0, 0); err != nil {
		return err
	}
	return c.Decommission(ctx)
}

func ntTableStats(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	args, err := nargs(fs, args, 0, -1)
	if err != nil {
		return err
	}
	var all []admin.TableStats
	if len(args) == 0 {
		args = []string{""}
	}
	for _, a := range args {
		ks, t, _ := strings.Cut(a, ".")
		st, err := c.TableStats(ctx, ks, t)
		if err != nil {
			return err
		}
		all = append(all, st...)
	}
	fmt.Fprintf(w, "Total number of tables: %d\n", len(all))
	fmt.Fprintln(w, "----------------")
	for i, t := range all {
		if i == 0 || all[i-1].Keyspace != t.Keyspace {
			fmt.Fprintf(w, "Keyspace : %s\n", t.Keyspace)
		}
		sizes := make([]string, len(t.SSTableBytes))
		for k, b := range t.SSTableBytes {
			sizes[k] = strconv.FormatInt(b, 10)
		}
		p := func(k string, v any) { fmt.Fprintf(w, "\t\t%s: %v\n", k, v) }
		p("Table", t.Table)
		p("SSTable count", t.SSTables)
		p("SSTable sizes (bytes, newest first)", "["+strings.Join(sizes, ", ")+"]")
		p("Space used (live)", t.SpaceUsedLive)
		p("Space used (total)", t.SpaceUsedTotal)
		p("Number of partitions (estimate)", t.SSTableRows+uint64(t.MemtableRows))
		p("Memtable data size", t.MemtableBytes)
		p("Memtable partitions", t.MemtableRows)
		for _, col := range t.Columns {
			p("Column "+col.Name, col.Type)
			if d := col.Dedup; d != nil {
				fmt.Fprintf(w, "\t\t\tFilter bits in use: %d\n", d.BitsInUse)
				fmt.Fprintf(w, "\t\t\tFilter false positive estimate: %.3g\n", d.EstimatedFPP)
				fmt.Fprintf(w, "\t\t\tRetries dismissed: %d\n", d.Dismissed)
				fmt.Fprintf(w, "\t\t\tUpdates applied as leader: %d\n", d.Applied)
				fmt.Fprintf(w, "\t\t\tUpdates without op id: %d\n", d.NoOpID)
			}
			keys := make([]string, 0, len(col.Design))
			for k := range col.Design {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "\t\t\t%s: %v\n", k, col.Design[k])
			}
		}
		fmt.Fprintln(w, "----------------")
	}
	return nil
}

func ntDescribeRing(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	args, err := nargs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	r, err := c.DescribeRing(ctx, args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Schema Version:%s\nTokenRange: \n", r.SchemaVersion)
	for _, tr := range r.Ranges {
		var eps, rpc, details []string
		for _, e := range tr.Endpoints {
			eps = append(eps, e.Address)
			h, _, err := net.SplitHostPort(e.CQLAddr)
			if err != nil {
				h = e.Address
			}
			rpc = append(rpc, h)
			details = append(details, fmt.Sprintf("EndpointDetails(host:%s, datacenter:%s, rack:%s)", e.Address, e.DC, e.Rack))
		}
		fmt.Fprintf(w, "\tTokenRange(start_token:%d, end_token:%d, endpoints:[%s], rpc_endpoints:[%s], endpoint_details:[%s])\n",
			tr.Start, tr.End, strings.Join(eps, ", "), strings.Join(rpc, ", "), strings.Join(details, ", "))
	}
	return nil
}

func ntGetEndpoints(ctx context.Context, c *admin.Client, fs *flag.FlagSet, args []string, w io.Writer) error {
	args, err := nargs(fs, args, 3, 3)
	if err != nil {
		return err
	}
	eps, err := c.Endpoints(ctx, args[0], args[1], args[2])
	if err != nil {
		return err
	}
	for _, e := range eps {
		fmt.Fprintln(w, e.Address)
	}
	return nil
}
