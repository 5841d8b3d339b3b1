// Package cqlsh is a small interactive CQL shell over the gocql driver, in
// the spirit of Cassandra's cqlsh: statements end with a semicolon and may
// span lines, results print as aligned tables, USE and CONSISTENCY are
// handled by the shell, and the statements entered are kept in a history
// file.
package cqlsh

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gocql/gocql"
)

// Config configures a shell.
type Config struct {
	Hosts       []string
	Port        int
	Keyspace    string
	Consistency gocql.Consistency
	Username    string
	Password    string
	HistoryFile string // "" keeps no history
	Timeout     time.Duration
}

// Shell is a connected shell.
type Shell struct {
	cfg     Config
	session *gocql.Session
	history []string
}

// Open connects to the cluster.
func Open(cfg Config) (*Shell, error) {
	if cfg.Port == 0 {
		cfg.Port = 9042
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	s := &Shell{cfg: cfg}
	if err := s.connect(cfg.Keyspace); err != nil {
		return nil, err
	}
	if cfg.HistoryFile != "" {
		if b, err := os.ReadFile(cfg.HistoryFile); err == nil {
			s.history = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		}
	}
	return s, nil
}

func (s *Shell) connect(keyspace string) error {
	c := gocql.NewCluster(s.cfg.Hosts...)
	c.Port = s.cfg.Port
	c.Keyspace = keyspace
	c.Consistency = s.cfg.Consistency
	c.Timeout = s.cfg.Timeout
	c.ConnectTimeout = s.cfg.Timeout
	if s.cfg.Username != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: s.cfg.Username, Password: s.cfg.Password}
	}
	sess, err := c.CreateSession()
	if err != nil {
		return fmt.Errorf("cqlsh: connect to %v: %w", s.cfg.Hosts, err)
	}
	if s.session != nil {
		s.session.Close()
	}
	s.session, s.cfg.Keyspace = sess, keyspace
	return nil
}

// Close ends the session.
func (s *Shell) Close() {
	if s.session != nil {
		s.session.Close()
	}
}

var (
	useRe         = regexp.MustCompile(`(?is)^\s*use\s+("?)([A-Za-z0-9_]+)("?)\s*$`)
	consistencyRe = regexp.MustCompile(`(?is)^\s*consistency(\s+([A-Za-z_]+))?\s*$`)
)

// Run reads statements from in until EOF or EXIT, printing results to out.
// With interactive set, it prints prompts.
func (s *Shell) Run(in io.Reader, out io.Writer, interactive bool) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var stmt strings.Builder
	prompt := func() {
		if !interactive {
			return
		}
		if stmt.Len() == 0 {
			ks := s.cfg.Keyspace
			if ks != "" {
				ks = ":" + ks
			}
			fmt.Fprintf(out, "idemkv%s> ", ks)
		} else {
			fmt.Fprint(out, "   ...> ")
		}
	}
	prompt()
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if stmt.Len() == 0 {
			switch strings.ToLower(strings.TrimSuffix(trimmed, ";")) {
			case "exit", "quit":
				return nil
			case "history":
				for i, h := range s.history {
					fmt.Fprintf(out, "%4d  %s\n", i+1, h)
				}
				prompt()
				continue
			case "":
				prompt()
				continue
			}
		}
		stmt.WriteString(line)
		stmt.WriteByte('\n')
		if !strings.HasSuffix(trimmed, ";") {
			prompt()
			continue
		}
		text := strings.TrimSpace(stmt.String())
		stmt.Reset()
		s.remember(text)
		if err := s.Exec(strings.TrimSuffix(text, ";"), out); err != nil {
			fmt.Fprintln(out, formatError(err))
		}
		prompt()
	}
	if rest := strings.TrimSpace(stmt.String()); rest != "" {
		if err := s.Exec(strings.TrimSuffix(rest, ";"), out); err != nil {
			fmt.Fprintln(out, formatError(err))
		}
	}
	return sc.Err()
}

func (s *Shell) remember(stmt string) {
	flat := strings.Join(strings.Fields(stmt), " ")
	s.history = append(s.history, flat)
	if s.cfg.HistoryFile == "" {
		return
	}
	if f, err := os.OpenFile(s.cfg.HistoryFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintln(f, flat)
		f.Close()
	}
}

func formatError(err error) string {
	var re gocql.RequestError
	if errors.As(err, &re) {
		return fmt.Sprintf("error %04x: %s", re.Code(), re.Message())
	}
	return "error: " + err.Error()
}

// Exec runs one statement (without its semicolon) and prints its result.
func (s *Shell) Exec(stmt string, out io.Writer) error {
	if m := useRe.FindStringSubmatch(stmt); m != nil {
		ks := m[2]
		if m[1] == "" {
			ks = strings.ToLower(ks)
		}
		// gocql refuses USE statements: the shell reconnects with the
		// keyspace instead, after checking it exists.
		if err := s.session.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, ks).Exec(); err != nil {
			return err
		}
		return s.connect(ks)
	}
	if m := consistencyRe.FindStringSubmatch(stmt); m != nil {
		if m[2] == "" {
			fmt.Fprintf(out, "Current consistency level is %s.\n", s.cfg.Consistency)
			return nil
		}
		cl, err := gocql.ParseConsistencyWrapper(strings.ToUpper(m[2]))
		if err != nil {
			return err
		}
		s.cfg.Consistency = cl
		s.session.SetConsistency(cl)
		fmt.Fprintf(out, "Consistency level set to %s.\n", cl)
		return nil
	}
	iter := s.session.Query(stmt).Iter()
	cols := iter.Columns()
	var rows [][]string
	for {
		row := map[string]any{}
		if !iter.MapScan(row) {
			break
		}
		var cells []string
		for _, c := range cols {
			cells = append(cells, render(row[c.Name]))
		}
		rows = append(rows, cells)
	}
	if err := iter.Close(); err != nil {
		return err
	}
	if len(cols) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 1, ' ', 0)
	var head, rule []string
	for _, c := range cols {
		head = append(head, " "+c.Name)
		rule = append(rule, strings.Repeat("-", len(c.Name)+2))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t|"))
	fmt.Fprintln(tw, strings.Join(rule, "\t+"))
	for _, r := range rows {
		for i := range r {
			r[i] = " " + r[i]
		}
		fmt.Fprintln(tw, strings.Join(r, "\t|"))
	}
	tw.Flush()
	fmt.Fprintf(out, "\n(%d rows)\n", len(rows))
	return nil
}

func render(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case []byte:
		return fmt.Sprintf("0x%x", x)
	case []string:
		return "{" + strings.Join(quoteAll(x), ", ") + "}"
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("'%s': '%s'", k, x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "'" + x + "'"
	}
	return out
}
