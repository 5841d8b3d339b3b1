package cqlsh

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gocql/gocql"
)

// traceIDs is a gocql.Tracer that keeps the trace ids of a statement's
// requests (one per page).
type traceIDs struct {
	mu  sync.Mutex
	ids []gocql.UUID
}

// Trace implements gocql.Tracer.
func (t *traceIDs) Trace(id []byte) {
	u, err := gocql.UUIDFromBytes(id)
	if err != nil {
		return
	}
	t.mu.Lock()
	t.ids = append(t.ids, u)
	t.mu.Unlock()
}

// traceWait bounds the wait for a session's duration (cqlsh's
// max_trace_wait, 10 s; idemkv sets it before answering).
var traceWait = 10 * time.Second

// pyTime formats a time as Python's str(datetime) does, in local time:
// microseconds only when not zero.
func pyTime(t time.Time) string {
	t = t.Local()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format("2006-01-02 15:04:05.000000")
}

// prepareRequest is system_traces.sessions' request of a PREPARE.
const prepareRequest = "Preparing CQL3 query"

// printTrace prints a trace session as cqlsh's print_trace: the request,
// its events ("activity [thread]") and, once the session has a duration,
// "Request complete", with timestamps, sources, microseconds elapsed and
// the client. The shell reads system_traces on the node it is connected
// to, which is the coordinator of its statements. A session whose request
// is skip is not printed.
func (s *Shell) printTrace(id gocql.UUID, skip string, out, errOut io.Writer) error {
	var (
		request       string
		started       time.Time
		coord, client net.IP
		duration      *int
	)
	deadline := time.Now().Add(traceWait)
	for {
		err := s.query(`SELECT request, started_at, coordinator, duration, client FROM system_traces.sessions WHERE session_id = ?`, id).
			Consistency(gocql.One).Scan(&request, &started, &coord, &duration, &client)
		if err != nil && err != gocql.ErrNotFound {
			return fmt.Errorf("read the trace session %s: %w", id, err)
		}
		if err == nil && skip != "" && request == skip {
			return nil
		}
		if err == nil && duration != nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(errOut, "Statement trace did not complete within %d seconds; trace data may be incomplete.\n", int(traceWait.Seconds()))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	iter := s.query(`SELECT event_id, activity, source, source_elapsed, thread FROM system_traces.events WHERE session_id = ?`, id).
		Consistency(gocql.One).Iter()
	var (
		eventID gocql.UUID
		act     string
		source  net.IP
		elapsed int
		thread  string
	)
	rows := [][]string{{request, pyTime(started), coord.String(), "0", client.String()}}
	for iter.Scan(&eventID, &act, &source, &elapsed, &thread) {
		rows = append(rows, []string{act + " [" + thread + "]", pyTime(eventID.Time()), source.String(), strconv.Itoa(elapsed), client.String()})
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("read the trace events of %s: %w", id, err)
	}
	if len(rows) == 1 {
		fmt.Fprintf(errOut, "No rows for session %s found.\n", id)
		return nil
	}
	if duration != nil {
		d := time.Duration(*duration) * time.Microsecond
		rows = append(rows, []string{"Request complete", pyTime(started.Add(d)), coord.String(), strconv.Itoa(*duration), client.String()})
	}
	fmt.Fprintf(out, "\nTracing session: %s\n", id)
	expand := s.expand
	s.expand = false // cqlsh prints traces as tables whatever EXPAND says
	defer func() { s.expand = expand }()
	s.printRows(out, []string{"activity", "timestamp", "source", "source_elapsed", "client"}, rows, 0)
	fmt.Fprintln(out)
	return nil
}
