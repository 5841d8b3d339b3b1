package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"
)

// Components of the CPU breakdown, in the order they are printed: where an
// update's CPU goes, from the client to the disk.
var Components = []string{
	"client", "cql server", "executor", "coordinator", "transport", "replica", "node", "runtime: gc", "runtime: scheduler", "other",
}

// componentOf names the component a function belongs to, "" for none (the
// runtime, the standard library, helpers): a sample is charged to the
// innermost frame that names one, so a system call or an allocation is
// charged to the component that made it.
func componentOf(fn string) string {
	const mod = "github.com/idemkv/idemkv/"
	switch {
	case strings.HasPrefix(fn, "github.com/gocql/gocql"), strings.HasPrefix(fn, mod+"bench."), strings.HasPrefix(fn, mod+"client."):
		return "client"
	case strings.HasPrefix(fn, mod+"cql/exec."), strings.HasPrefix(fn, mod+"cql/parse."):
		return "executor"
	case strings.HasPrefix(fn, mod+"cql."), strings.HasPrefix(fn, mod+"cql/frame."), strings.HasPrefix(fn, mod+"cql/trace."):
		return "cql server"
	case strings.HasPrefix(fn, mod+"coordinator."):
		return "coordinator"
	case strings.HasPrefix(fn, mod+"transport."):
		return "transport"
	case strings.HasPrefix(fn, mod+"replica."), strings.HasPrefix(fn, mod+"memtable."), strings.HasPrefix(fn, mod+"commitlog."),
		strings.HasPrefix(fn, mod+"sstable."), strings.HasPrefix(fn, mod+"coltype"), strings.HasPrefix(fn, mod+"fbf."),
		strings.HasPrefix(fn, mod+"counters"), strings.HasPrefix(fn, mod+"row."), strings.HasPrefix(fn, mod+"vfs."):
		return "replica"
	case strings.HasPrefix(fn, mod+"internal/workpool."):
		return "" // handing a request to a waiting goroutine: the scheduler's
	case strings.HasPrefix(fn, mod):
		return "node" // node, gossip, schema, ring, metrics
	}
	return ""
}

// runtimeComponent names a sample no component frame claims.
func runtimeComponent(fns []string) string {
	for _, fn := range fns {
		switch {
		case strings.HasPrefix(fn, "runtime.gcBgMarkWorker"), strings.HasPrefix(fn, "runtime.bgsweep"),
			strings.HasPrefix(fn, "runtime.bgscavenge"), strings.HasPrefix(fn, "runtime.gcDrain"),
			strings.HasPrefix(fn, "runtime.markroot"), strings.HasPrefix(fn, "runtime.gcStart"):
			return "runtime: gc"
		case strings.HasPrefix(fn, "github.com/idemkv/idemkv/internal/workpool."),
			fn == "runtime.schedule", fn == "runtime.findRunnable", fn == "runtime.mcall", fn == "runtime.park_m",
			fn == "runtime.goexit0", fn == "runtime.sysmon", fn == "runtime.mstart", fn == "runtime.gosched_m",
			fn == "runtime.netpoll", fn == "runtime.stopm", fn == "runtime.startm":
			return "runtime: scheduler"
		}
	}
	return "other"
}

// Breakdown is the CPU time of one benchmark run charged to components.
type Breakdown map[string]time.Duration

// breakdownOf charges every sample of a CPU profile to a component.
func breakdownOf(p *profile.Profile) Breakdown {
	valueIdx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			valueIdx = i
		}
	}
	b := Breakdown{}
	if valueIdx < 0 {
		return b
	}
	var fns []string
	for _, s := range p.Sample {
		fns = fns[:0]
		comp := ""
		for _, loc := range s.Location { // innermost first
			for _, line := range loc.Line { // inlined innermost first
				if line.Function == nil {
					continue
				}
				fns = append(fns, line.Function.Name)
				if comp == "" {
					comp = componentOf(line.Function.Name)
				}
			}
		}
		if comp == "" {
			comp = runtimeComponent(fns)
		}
		b[comp] += time.Duration(s.Value[valueIdx])
	}
	return b
}

// cpuProfiler profiles the process's CPU over one measured run.
type cpuProfiler struct{ buf bytes.Buffer }

func startCPUProfile() (*cpuProfiler, error) {
	p := &cpuProfiler{}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return nil, fmt.Errorf("bench: CPU breakdown: %w (is another CPU profile running?)", err)
	}
	return p, nil
}

// stop ends the profile and charges it to components; with keep it also
// writes the profile there.
func (p *cpuProfiler) stop(keep string) (Breakdown, error) {
	pprof.StopCPUProfile()
	if keep != "" {
		if err := os.WriteFile(keep, p.buf.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("bench: CPU profile: %w", err)
		}
	}
	prof, err := profile.Parse(&p.buf)
	if err != nil {
		return nil, fmt.Errorf("bench: CPU breakdown: %w", err)
	}
	return breakdownOf(prof), nil
}

// WriteBreakdown prints the CPU µs per acknowledged update of each run by
// component; the profile's samples are scaled to the run's measured CPU time
// (the profiler samples at 100 Hz and misses some).
func WriteBreakdown(w io.Writer, results []RingResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "table\tvia\tCL\tkeys\tCPU µs/op\t")
	for _, c := range Components {
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprintln(tw)
	for _, r := range results {
		if r.Breakdown == nil || r.Ops == 0 {
			continue
		}
		var sampled time.Duration
		for _, d := range r.Breakdown {
			sampled += d
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t", r.Table, r.Via, r.CL, r.Keys, us(r.CPUPerOp()))
		for _, c := range Components {
			share := 0.0
			if sampled > 0 {
				share = float64(r.Breakdown[c]) / float64(sampled)
			}
			fmt.Fprintf(tw, "%.1f\t", share*us(r.CPUPerOp()))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
