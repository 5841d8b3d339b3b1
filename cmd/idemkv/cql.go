package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gocql/gocql"
	"golang.org/x/term"

	"github.com/idemkv/idemkv/cqlsh"
)

func init() {
	register("cql", "an interactive CQL shell, like cqlsh (HELP inside it lists its commands)", runCQL)
}

// cqlInput is where the interactive shell reads from: a terminal with line
// editing, or standard input as a script when it is not a terminal.
func cqlInput(historyFile string) (cqlsh.LineReader, func()) {
	if term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stdout.Fd())) {
		t := cqlsh.NewTerminal(historyFile)
		return t, func() { _ = t.Close() }
	}
	l := cqlsh.NewLines(os.Stdin)
	l.Name = "<stdin>"
	return l, func() {}
}

func runCQL(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cql", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: idemkv cql [flags] [host [port]]")
		fmt.Fprintln(stderr, "\nAn interactive CQL shell connected to one node (it sends every statement to that node).")
		fmt.Fprintln(stderr, "Piped input and -e run without prompts and exit with status 1 at the first error.")
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	host := fs.String("host", "127.0.0.1", "the node to connect to (a comma-separated list is tried in order; the shell stays on the first that answers)")
	port := fs.Int("port", 9042, "CQL port")
	ks := fs.String("keyspace", "", "keyspace to use")
	fs.StringVar(ks, "k", "", "keyspace to use (short for --keyspace)")
	cl := fs.String("consistency", "ONE", "consistency level")
	user := fs.String("u", "", "username (password authentication)")
	pass := fs.String("p", "", "password")
	exec := fs.String("e", "", "execute these statements (';'-separated) and exit")
	file := fs.String("f", "", "execute the statements of this file and exit")
	hist := fs.String("history", defaultHistory(), "history file of the interactive shell (\"\" keeps none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// cqlsh takes the host and port as arguments too.
	switch rest := fs.Args(); len(rest) {
	case 0:
	case 1, 2:
		*host = rest[0]
		if len(rest) == 2 {
			if _, err := fmt.Sscan(rest[1], port); err != nil {
				return fmt.Errorf("port %q: %w", rest[1], err)
			}
		}
	default:
		return fmt.Errorf("too many arguments: %q", rest)
	}
	consistency, err := gocql.ParseConsistencyWrapper(strings.ToUpper(*cl))
	if err != nil {
		return fmt.Errorf("consistency: %w", err)
	}
	sh, err := cqlsh.Open(cqlsh.Config{Hosts: strings.Split(*host, ","), Port: *port, Keyspace: *ks,
		Consistency: consistency, Username: *user, Password: *pass})
	if err != nil {
		return err
	}
	defer sh.Close()
	switch {
	case *exec != "":
		return sh.ExecString(*exec, stdout, stderr)
	case *file != "":
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		l := cqlsh.NewLines(f)
		l.Name = *file
		return sh.Run(l, stdout, stderr)
	}
	in, done := cqlInput(*hist)
	defer done()
	return sh.Run(in, stdout, stderr)
}

func defaultHistory() string {
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".idemkv_history")
	}
	return ""
}
