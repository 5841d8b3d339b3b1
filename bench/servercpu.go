package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ServerCPU is the CPU time the server processes of one ring spent during a
// run, and that time per acknowledged op of the rows the ring served: what
// the servers cost per update, apart from the clients and anything else
// sharing the machine.
type ServerCPU struct {
	Target    string  `json:"target"`    // "idemkv", or the peer's name ("cassandra")
	Processes int     `json:"processes"` // server processes measured
	CPUS      float64 `json:"cpu_s"`     // their user + system CPU time during the run
	Ops       int64   `json:"ops"`       // acknowledged ops of the rows the ring served
	PerOpUS   float64 `json:"cpu_us_per_op"`

	// ClientCPUS is this process's CPU time over the same interval when
	// it is not one of the server processes and nothing else ran in it
	// meanwhile (not with a peer's rows at the same time): what the
	// benchmark's clients (gocql, the faults, the bookkeeping) spent on
	// the rows; ClientPerOpUS per acknowledged op. On one machine the two
	// share the cores, so a server's throughput there is bound by
	// 1 / (server + client CPU per op), whatever the server costs.
	ClientCPUS    float64 `json:"client_cpu_s,omitempty"`
	ClientPerOpUS float64 `json:"client_cpu_us_per_op,omitempty"`
}

// clientMeter measures this process's CPU time, unless it is one of the
// server processes (an embedded ring): nil then.
func clientMeter(serverPids []int) (*cpuMeter, error) {
	self := os.Getpid()
	if slices.Contains(serverPids, self) {
		return nil, nil
	}
	return startCPUMeter([]int{self})
}

// userHZ is the unit of the CPU times in /proc/PID/stat: Linux reports them
// in USER_HZ ticks, 100 per second on every architecture it exports it to
// user space with.
const userHZ = 100

// processCPUTime is the user + system CPU time of process pid so far, from
// /proc/PID/stat (fields 14 and 15, after the command name, which may hold
// spaces and parentheses and ends at the last ')').
func processCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: CPU time of process %d: %w", pid, err)
	}
	return parseProcStatCPU(string(b))
}

// parseProcStatCPU reads utime + stime out of a /proc/PID/stat line.
func parseProcStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc stat %q: %d fields after the command name, want at least 13", stat, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 (utime) and 15 (stime)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bench: /proc stat: CPU time %q is not a tick count", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuMeter measures the CPU time of a set of processes between start and
// stop.
type cpuMeter struct {
	pids  []int
	start []time.Duration
}

func startCPUMeter(pids []int) (*cpuMeter, error) {
	if len(pids) == 0 {
		return nil, fmt.Errorf("bench: no server process to measure")
	}
	m := &cpuMeter{pids: pids}
	for _, pid := range pids {
		t, err := processCPUTime(pid)
		if err != nil {
			return nil, err
		}
		m.start = append(m.start, t)
	}
	return m, nil
}

// stop returns the CPU time the processes spent since start; an error if
// one of them is gone (so a run that kills nodes is not measured).
func (m *cpuMeter) stop() (time.Duration, error) {
	var total time.Duration
	for i, pid := range m.pids {
		t, err := processCPUTime(pid)
		if err != nil {
			return total, err
		}
		total += t - m.start[i]
	}
	return total, nil
}
