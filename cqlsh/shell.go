// Package cqlsh is the interactive CQL shell behind `idemkv cql`, in the
// spirit of Cassandra's cqlsh: statements end with a semicolon and may span
// lines, several may share one; results print as cqlsh prints them; the
// shell's own commands (HELP, DESCRIBE, EXPAND, PAGING, SOURCE, SHOW,
// TRACING, CONSISTENCY, USE, EXIT) are handled by the shell; and the session
// stays on the one host it was given, so system.local and system.peers
// describe that node.
//
// The shell reads its input through a LineReader: a Terminal (line editing
// and history, over github.com/peterh/liner), Lines (piped scripts, -e and
// SOURCE files; the first error ends them) or Scripted (a typist following a
// script, for tests).
package cqlsh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/mattn/go-runewidth"
)

// DefaultPageSize is the number of rows an interactive shell shows before
// pausing at ---MORE--- (PAGING ON), as in cqlsh.
const DefaultPageSize = 100

// batchPageSize is the page size rows are fetched with when the shell does
// not pause between pages (a variable for tests).
var batchPageSize = 5000

// Config configures a shell.
type Config struct {
	// Hosts are tried in order; the shell stays on the first that accepts
	// the connection and sends every statement to it.
	Hosts       []string
	Port        int               // CQL port; 9042 if zero
	Keyspace    string            // used at start if set; it must exist
	Consistency gocql.Consistency // of the statements; ONE if zero (ANY cannot be chosen here)
	Username    string            // password authentication, if set
	Password    string
	Timeout     time.Duration // per request and connection; 10 s if zero
}

// Shell is a connected shell.
type Shell struct {
	cfg      Config
	host     string // the host the shell is connected to
	session  *gocql.Session
	expand   bool
	paging   bool
	pageSize int
	history  []string
	depth    int             // SOURCE nesting
	tracing  bool            // TRACING ON
	ctx      context.Context // of the statement running; Ctrl-C cancels it
}

// query is a statement on the session, cancelled with the shell's statement.
func (s *Shell) query(stmt string, values ...any) *gocql.Query {
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	return s.session.Query(stmt, values...).WithContext(ctx)
}

// Open connects to the first of cfg.Hosts that answers and, if a keyspace
// is given, checks that it exists and uses it.
func Open(cfg Config) (*Shell, error) {
	if cfg.Port == 0 {
		cfg.Port = 9042
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Consistency == 0 {
		cfg.Consistency = gocql.One
	}
	if len(cfg.Hosts) == 0 {
		cfg.Hosts = []string{"127.0.0.1"}
	}
	s := &Shell{cfg: cfg, paging: true, pageSize: DefaultPageSize}
	var errs []error
	for _, h := range cfg.Hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		sess, err := s.dial(h, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.host, s.session = h, sess
		break
	}
	if s.session == nil {
		return nil, errors.Join(errs...)
	}
	if cfg.Keyspace != "" {
		s.cfg.Keyspace = ""
		if err := s.use(cfg.Keyspace); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// quietLogger drops gocql's log lines (host dumps on a failed connection
// among them): the shell reports the errors itself.
type quietLogger struct{}

func (quietLogger) Print(...any)          {}
func (quietLogger) Printf(string, ...any) {}
func (quietLogger) Println(...any)        {}

// dial opens a session that only ever uses host: gocql does not look up the
// other nodes, ignores topology events and filters out any host that is not
// this one.
func (s *Shell) dial(host, keyspace string) (*gocql.Session, error) {
	ips, err := net.LookupIP(host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	c := gocql.NewCluster(host)
	c.Port = s.cfg.Port
	c.Keyspace = keyspace
	c.Consistency = s.cfg.Consistency
	c.Timeout = s.cfg.Timeout
	c.ConnectTimeout = s.cfg.Timeout
	c.NumConns = 1
	// One statement at a time: gocql's write coalescing would only hold
	// each request frame for its 200µs timer (about 1ms on an idle runtime).
	c.WriteCoalesceWaitTime = 0
	c.Logger = quietLogger{}
	c.DisableInitialHostLookup = true
	c.Events.DisableTopologyEvents = true
	c.HostFilter = gocql.HostFilterFunc(func(h *gocql.HostInfo) bool {
		for _, ip := range ips {
			if ip.Equal(h.ConnectAddress()) {
				return true
			}
		}
		return false
	})
	c.PoolConfig.HostSelectionPolicy = gocql.RoundRobinHostPolicy()
	if s.cfg.Username != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: s.cfg.Username, Password: s.cfg.Password}
	}
	sess, err := c.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("connect to %s:%d: %w", host, s.cfg.Port, err)
	}
	return sess, nil
}

// Host is the address the shell is connected to, as host:port.
func (s *Shell) Host() string { return net.JoinHostPort(s.host, strconv.Itoa(s.cfg.Port)) }

// Keyspace is the keyspace in use, "" if none.
func (s *Shell) Keyspace() string { return s.cfg.Keyspace }

// Close ends the session.
func (s *Shell) Close() {
	if s.session != nil {
		s.session.Close()
	}
}

// errExit ends Run without an error (EXIT, QUIT).
var errExit = errors.New("exit")

// ScriptError is the first failed statement of a non-interactive input.
type ScriptError struct {
	Source string // "<stdin>", "-e" or a file name
	Line   int    // the line the statement ended on
	Err    error
}

// Error is "source:line: message".
func (e *ScriptError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.Source, e.Line, FormatError(e.Err))
}

// Unwrap returns the statement's error.
func (e *ScriptError) Unwrap() error { return e.Err }

// Run reads statements from lr until its end or EXIT and executes them,
// writing results to out and errors and notices to errOut. An interactive
// reader gets prompts, a welcome line and paging; its errors are printed and
// the shell goes on, Ctrl-C drops the statement being typed and Ctrl-D ends
// the session without executing an unfinished statement. A non-interactive
// reader stops at the first error, which Run returns (a *ScriptError); an
// unfinished statement at its end is an error too.
func (s *Shell) Run(lr LineReader, out, errOut io.Writer) error {
	interactive := lr.Interactive()
	if interactive && s.depth == 0 {
		fmt.Fprintf(out, "Connected to %s at %s.\n", s.clusterName(), s.Host())
		fmt.Fprintln(out, s.versionLine())
		fmt.Fprintln(out, "Use HELP for help.")
	}
	var sp splitter
	for {
		line, err := lr.ReadLine(s.prompt(sp.busy()))
		switch {
		case errors.Is(err, ErrInterrupt):
			sp.reset()
			continue
		case errors.Is(err, io.EOF):
			if interactive {
				fmt.Fprintln(out)
				if sp.busy() {
					fmt.Fprintln(errOut, "(the unfinished statement was not executed)")
				}
				return nil
			}
			if sp.busy() {
				return s.scriptError(lr, fmt.Errorf("incomplete statement at end of input (missing ';'): %s", sp.pending()))
			}
			return nil
		case err != nil:
			return err
		}
		for _, st := range sp.feed(line) {
			if interactive {
				entry := strings.Join(strings.Fields(st), " ")
				if !isShellCommand(st) {
					entry += ";"
				}
				lr.AddHistory(entry)
				s.history = append(s.history, entry)
			}
			err := s.executeInterruptible(st, lr, out, errOut)
			switch {
			case errors.Is(err, errExit):
				return nil
			case err == nil:
			case interactive:
				fmt.Fprintln(errOut, FormatError(err))
			default:
				return s.scriptError(lr, err)
			}
		}
	}
}

func (s *Shell) scriptError(lr LineReader, err error) error {
	var se *ScriptError
	if errors.As(err, &se) {
		return err // from a SOURCE file: its own location
	}
	e := &ScriptError{Source: "<stdin>", Err: err}
	if l, ok := lr.(*Lines); ok {
		e.Line = l.Line()
		if l.Name != "" {
			e.Source = l.Name
		}
	}
	return e
}

// ExecString runs the statements of text (the -e flag): several may share
// it, and the last needs no semicolon. It stops at the first error.
func (s *Shell) ExecString(text string, out, errOut io.Writer) error {
	l := NewLines(strings.NewReader(text + "\n;"))
	l.Name = "-e"
	return s.Run(l, out, errOut)
}

func (s *Shell) prompt(continued bool) string {
	if continued {
		return "   ... "
	}
	if s.cfg.Keyspace != "" {
		return "idemkv:" + s.cfg.Keyspace + "> "
	}
	return "idemkv> "
}

// errorNames are cqlsh's names of the protocol's error codes.
var errorNames = map[int]string{
	0x0000: "ServerError", 0x000A: "ProtocolError", 0x0100: "AuthenticationFailed",
	0x1000: "Unavailable", 0x1001: "Overloaded", 0x1002: "IsBootstrapping", 0x1003: "TruncateError",
	0x1100: "WriteTimeout", 0x1200: "ReadTimeout", 0x1300: "ReadFailure", 0x1400: "FunctionFailure",
	0x1500: "WriteFailure", 0x2000: "SyntaxException", 0x2100: "Unauthorized", 0x2200: "InvalidRequest",
	0x2300: "ConfigurationException", 0x2400: "AlreadyExists", 0x2500: "Unprepared",
}

// FormatError prints an error as cqlsh does: a server error with its class
// and code, others as they are.
func FormatError(err error) string {
	var se *ScriptError
	if errors.As(err, &se) {
		return se.Error() // with its place in the script
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		name := errorNames[re.Code()]
		if name == "" {
			name = "Error"
		}
		return fmt.Sprintf("%s: Error from server: code=%04x message=%q", name, re.Code(), re.Message())
	}
	if errors.Is(err, context.Canceled) {
		return "Query cancelled (Ctrl-C); it may still have run on the server."
	}
	return err.Error()
}

var (
	useRe         = regexp.MustCompile(`(?is)^use\s+("([^"]|"")+"|[A-Za-z0-9_]+)$`)
	consistencyRe = regexp.MustCompile(`(?is)^(serial\s+)?consistency(\s+([A-Za-z_]+))?$`)
)

// executeInterruptible runs a statement; in an interactive shell, Ctrl-C
// (SIGINT: the terminal is out of raw mode while a statement runs) cancels
// it instead of ending the shell.
func (s *Shell) executeInterruptible(stmt string, lr LineReader, out, errOut io.Writer) error {
	if !lr.Interactive() || s.ctx != nil {
		return s.execute(stmt, lr, out, errOut)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s.ctx = ctx
	defer func() { s.ctx = nil }()
	return s.execute(stmt, lr, out, errOut)
}

// execute runs one statement (without its semicolon).
func (s *Shell) execute(stmt string, lr LineReader, out, errOut io.Writer) error {
	fields := strings.Fields(stmt)
	arg := func(i int) string {
		if i < len(fields) {
			return strings.ToUpper(fields[i])
		}
		return ""
	}
	switch firstWord(stmt) {
	case "exit", "quit":
		return errExit
	case "help", "?":
		return s.help(strings.Join(fields[1:], " "), out)
	case "describe", "desc":
		return s.describe(fields[1:], out)
	case "expand":
		switch arg(1) {
		case "":
			fmt.Fprintf(out, "Expanded output is currently %s.\n", onOff(s.expand))
		case "ON":
			s.expand = true
			fmt.Fprintln(out, "Now Expanded output is enabled")
		case "OFF":
			s.expand = false
			fmt.Fprintln(out, "Disabled Expanded output.")
		default:
			return fmt.Errorf("improper EXPAND command: EXPAND [ON|OFF]")
		}
		return nil
	case "paging":
		switch a := arg(1); a {
		case "":
			fmt.Fprintf(out, "Query paging is currently %s (page size %d).\n", onOff(s.paging), s.pageSize)
		case "ON":
			s.paging = true
			fmt.Fprintf(out, "Now Query paging is enabled\nPage size: %d\n", s.pageSize)
		case "OFF":
			s.paging = false
			fmt.Fprintln(out, "Disabled Query paging.")
		default:
			n, err := strconv.Atoi(a)
			if err != nil || n <= 0 {
				return fmt.Errorf("improper PAGING command: PAGING [ON|OFF|<page size>]")
			}
			s.paging, s.pageSize = true, n
			fmt.Fprintf(out, "Page size: %d\n", n)
		}
		return nil
	case "tracing":
		// cqlsh's SwitchCommand messages.
		switch arg(1) {
		case "":
			if s.tracing {
				fmt.Fprintln(out, "Tracing is currently enabled. Use TRACING OFF to disable")
			} else {
				fmt.Fprintln(out, "Tracing is currently disabled. Use TRACING ON to enable.")
			}
		case "ON":
			if s.tracing {
				fmt.Fprintln(errOut, "Tracing is already enabled. Use TRACING OFF to disable.")
			} else {
				s.tracing = true
				fmt.Fprintln(out, "Now Tracing is enabled")
			}
		case "OFF":
			if !s.tracing {
				fmt.Fprintln(errOut, "Tracing is not enabled.")
			} else {
				s.tracing = false
				fmt.Fprintln(out, "Disabled Tracing.")
			}
		default:
			return fmt.Errorf("improper TRACING command: TRACING [ON|OFF]")
		}
		return nil
	case "show":
		switch arg(1) {
		case "VERSION":
			fmt.Fprintln(out, s.versionLine())
		case "HOST":
			fmt.Fprintf(out, "Connected to %s at %s.\n", s.clusterName(), s.Host())
		case "SESSION":
			id, err := gocql.ParseUUID(strings.TrimSpace(strings.Join(fields[2:], "")))
			if err != nil {
				return fmt.Errorf("improper SHOW command: SHOW SESSION <session id>")
			}
			return s.printTrace(id, "", out, errOut)
		default:
			return fmt.Errorf("improper SHOW command: SHOW VERSION | SHOW HOST | SHOW SESSION <session id>")
		}
		return nil
	case "source":
		return s.source(strings.TrimSpace(stmt[len(fields[0]):]), out, errOut)
	case "history":
		for i, h := range s.history {
			fmt.Fprintf(out, "%4d  %s\n", i+1, h)
		}
		return nil
	case "clear", "cls":
		if lr.Interactive() {
			fmt.Fprint(out, "\x1b[H\x1b[2J")
		}
		return nil
	}
	if m := useRe.FindStringSubmatch(stmt); m != nil {
		return s.use(m[1])
	}
	if m := consistencyRe.FindStringSubmatch(stmt); m != nil {
		return s.consistency(m[1] != "", m[3], out)
	}
	if !s.tracing {
		return s.selectRows(stmt, lr, out)
	}
	// As cqlsh, the traces of a statement that succeeded, after its result.
	tr := &traceIDs{}
	if err := s.selectRowsTraced(stmt, lr, out, tr); err != nil {
		return err
	}
	for _, id := range tr.ids {
		// gocql prepares the statement first (traced too), which cqlsh
		// does not: only the statement's own traces are printed.
		if perr := s.printTrace(id, prepareRequest, out, errOut); perr != nil {
			fmt.Fprintf(errOut, "Unable to fetch query trace: %v\n", perr)
		}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// use switches keyspace. gocql refuses USE statements, and a session's
// keyspace is fixed: the shell checks the keyspace exists, then reconnects
// to the same host with it.
func (s *Shell) use(name string) error {
	ks := name
	if strings.HasPrefix(ks, `"`) {
		ks = strings.ReplaceAll(ks[1:len(ks)-1], `""`, `"`)
	} else {
		ks = strings.ToLower(ks)
	}
	var found string
	err := s.query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, ks).Scan(&found)
	if errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("keyspace '%s' does not exist", ks)
	}
	if err != nil {
		return fmt.Errorf("look up keyspace %s: %w", ks, err)
	}
	sess, err := s.dial(s.host, ks)
	if err != nil {
		return err
	}
	s.session.Close()
	s.session, s.cfg.Keyspace = sess, ks
	return nil
}

func (s *Shell) consistency(serial bool, level string, out io.Writer) error {
	if serial {
		if level == "" {
			fmt.Fprintln(out, "Current serial consistency level is SERIAL.")
			return nil
		}
		return fmt.Errorf("idemkv has no lightweight transactions: SERIAL CONSISTENCY does not apply")
	}
	if level == "" {
		fmt.Fprintf(out, "Current consistency level is %s.\n", s.cfg.Consistency)
		return nil
	}
	cl, err := gocql.ParseConsistencyWrapper(strings.ToUpper(level))
	if err != nil {
		return fmt.Errorf("improper CONSISTENCY command: %w", err)
	}
	s.cfg.Consistency = cl
	s.session.SetConsistency(cl)
	fmt.Fprintf(out, "Consistency level set to %s.\n", cl)
	return nil
}

// source runs the statements of a file; the first error ends it.
func (s *Shell) source(arg string, out, errOut io.Writer) error {
	name := strings.TrimSpace(arg)
	if len(name) >= 2 && name[0] == '\'' && name[len(name)-1] == '\'' {
		name = strings.ReplaceAll(name[1:len(name)-1], "''", "'")
	}
	if name == "" {
		return fmt.Errorf("improper SOURCE command: SOURCE '<file>'")
	}
	if strings.HasPrefix(name, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			name = h + name[1:]
		}
	}
	if s.depth >= 10 {
		return fmt.Errorf("SOURCE %s: nested too deep", name)
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("SOURCE: %w", err)
	}
	defer f.Close()
	l := NewLines(f)
	l.Name = name
	s.depth++
	defer func() { s.depth-- }()
	return s.Run(l, out, errOut)
}

// selectRows sends a CQL statement and prints its rows, if any. An
// interactive shell with paging on shows a page at a time.
func (s *Shell) selectRows(stmt string, lr LineReader, out io.Writer) error {
	return s.selectRowsTraced(stmt, lr, out, nil)
}

// selectRowsTraced is selectRows, each page traced by tr when it is not
// nil.
func (s *Shell) selectRowsTraced(stmt string, lr LineReader, out io.Writer, tr gocql.Tracer) error {
	pause := lr.Interactive() && s.paging
	size := batchPageSize
	if pause {
		size = s.pageSize
	}
	var (
		state   []byte
		names   []string
		pending [][]string // rows fetched and not yet printed
		total   int        // rows printed
		shown   bool       // the header was printed
	)
	flush := func() {
		if len(pending) > 0 || !shown {
			s.printRows(out, names, pending, total)
			shown = true
		}
		total += len(pending)
		pending = nil
	}
	for {
		q := s.query(stmt).PageSize(size).PageState(state)
		if tr != nil {
			q = q.Trace(tr)
		}
		iter := q.Iter()
		cols := iter.Columns()
		// gocql scans a tuple column element by element, into as many
		// destinations as it has elements.
		width := make([]int, len(cols))
		n := 0
		for i, c := range cols {
			width[i] = 1
			if t, ok := c.TypeInfo.(gocql.TupleTypeInfo); ok {
				width[i] = len(t.Elems)
			}
			n += width[i]
		}
		for {
			cells := make([]cell, n)
			dest := make([]any, n)
			for i := range cells {
				dest[i] = &cells[i]
			}
			if !iter.Scan(dest...) {
				break
			}
			r := make([]string, len(cols))
			j := 0
			for i, col := range cols {
				if _, ok := col.TypeInfo.(gocql.TupleTypeInfo); ok {
					r[i] = FormatValue(col.TypeInfo, tupleBytes(cells[j:j+width[i]]))
					j += width[i]
					continue
				}
				c := cells[j]
				j++
				info := c.info
				if info == nil {
					info = col.TypeInfo
				}
				r[i] = FormatValue(info, c.data)
			}
			pending = append(pending, r)
		}
		next := iter.PageState()
		if err := iter.Close(); err != nil {
			return err
		}
		if len(cols) == 0 {
			return nil // not a query of rows
		}
		if names == nil {
			names = make([]string, len(cols))
			for i, c := range cols {
				names[i] = c.Name
			}
		}
		if len(next) == 0 {
			break
		}
		state = next
		if pause {
			// A page at a time, as cqlsh: Enter shows the next one,
			// Ctrl-C or Ctrl-D stops.
			flush()
			if _, err := lr.ReadLine("---MORE---"); err != nil {
				break
			}
		}
	}
	flush()
	fmt.Fprintf(out, "\n(%d rows)\n", total)
	return nil
}

// printRows prints rows as cqlsh does: a table with the header left-aligned
// and the values right-aligned, or with EXPAND ON one block per row. first
// is the number of rows printed before (for the expanded row numbers).
func (s *Shell) printRows(out io.Writer, names []string, rows [][]string, first int) {
	if s.expand {
		nw, vw := 0, 0
		for _, n := range names {
			nw = max(nw, width(n))
		}
		for _, r := range rows {
			for _, v := range r {
				vw = max(vw, width(v))
			}
		}
		for i, r := range rows {
			fmt.Fprintf(out, "\n@ Row %d\n", first+i+1)
			fmt.Fprintf(out, "-%s-+-%s-\n", strings.Repeat("-", nw), strings.Repeat("-", vw))
			for j, v := range r {
				fmt.Fprintf(out, " %s | %s\n", pad(names[j], nw, false), v)
			}
		}
		return
	}
	widths := make([]int, len(names))
	for i, n := range names {
		widths[i] = width(n)
	}
	for _, r := range rows {
		for i, v := range r {
			widths[i] = max(widths[i], width(v))
		}
	}
	head := make([]string, len(names))
	rule := make([]string, len(names))
	for i, n := range names {
		head[i] = pad(n, widths[i], false)
		rule[i] = strings.Repeat("-", widths[i])
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, strings.TrimRight(" "+strings.Join(head, " | "), " "))
	fmt.Fprintln(out, "-"+strings.Join(rule, "-+-")+"-")
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, v := range r {
			cells[i] = pad(v, widths[i], true)
		}
		fmt.Fprintln(out, " "+strings.Join(cells, " | "))
	}
}

// width is the number of terminal columns s takes (wide East Asian
// characters take two).
func width(s string) int { return runewidth.StringWidth(s) }

func pad(s string, w int, right bool) string {
	n := w - width(s)
	if n <= 0 {
		return s
	}
	if right {
		return strings.Repeat(" ", n) + s
	}
	return s + strings.Repeat(" ", n)
}

// localInfo reads a few columns of the connected node's system.local.
func (s *Shell) localInfo() (cluster, release, cqlVersion, proto string) {
	_ = s.query(`SELECT cluster_name, release_version, cql_version, native_protocol_version FROM system.local WHERE key = 'local'`).
		Scan(&cluster, &release, &cqlVersion, &proto)
	return cluster, release, cqlVersion, proto
}

func (s *Shell) clusterName() string {
	c, _, _, _ := s.localInfo()
	if c == "" {
		c = "(unknown cluster)"
	}
	return c
}

func (s *Shell) versionLine() string {
	_, release, cqlVersion, proto := s.localInfo()
	return fmt.Sprintf("[idemkv cql shell | Cassandra %s | CQL spec %s | Native protocol v%s]", release, cqlVersion, proto)
}
