package bench

import (
	"flag"
	"time"

	"github.com/gocql/gocql"
)

// CoalesceUsage is the help of the --gocql-coalesce flag of the benchmarks
// whose clients are gocql sessions.
const CoalesceUsage = "gocql's WriteCoalesceWaitTime for the benchmark's sessions: how long a connection holds a request frame for others to share its write system call (gocql's default, 200µs, is stretched to about 1ms by an idle Go runtime; 0: each request is written at once)"

// CoalesceFlag defines --gocql-coalesce on fs, default 0.
//
// gocql holds every request frame for ClusterConfig.WriteCoalesceWaitTime
// (200µs by default) on a timer, so that the requests of concurrent callers
// on one connection go out in one write. The Go runtime's network poller
// sleeps in whole milliseconds when it has nothing else to do, so on a
// client that is not busy the timer fires after about 1ms: a lone client's
// QUORUM update through an embedded ring took 1.2ms at p50 with the default
// and 66µs without it (BENCHMARKS.md, "The client's write coalescing").
// Under load the shared writes save CPU. The benchmarks measure the
// servers' latency, so their sessions write at once unless told otherwise.
func CoalesceFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("gocql-coalesce", 0, CoalesceUsage)
}

// CoalesceSummary describes a session's write coalescing for a benchmark's
// header.
func CoalesceSummary(d time.Duration) string {
	if d <= 0 {
		return "gocql write coalescing off"
	}
	return "gocql write coalescing " + d.String()
}

// setCoalesce sets a benchmark session's write coalescing wait: d, or none
// when d is 0 (gocql's zero turns coalescing off).
func setCoalesce(cc *gocql.ClusterConfig, d time.Duration) {
	cc.WriteCoalesceWaitTime = max(d, 0)
}
