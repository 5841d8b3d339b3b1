package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gocql/gocql"
	"golang.org/x/term"

	"github.com/idemkv/idemkv/cqlsh"
)

func init() {
	register("cql", "an interactive CQL shell over gocql (statements end with ';')", runCQL)
}

func runCQL(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cql", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "127.0.0.1", "contact point(s), comma-separated")
	port := fs.Int("port", 9042, "CQL port")
	ks := fs.String("keyspace", "", "keyspace to use")
	cl := fs.String("consistency", "ONE", "consistency level")
	user := fs.String("u", "", "username (password authentication)")
	pass := fs.String("p", "", "password")
	exec := fs.String("e", "", "execute these statements and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	consistency, err := gocql.ParseConsistencyWrapper(strings.ToUpper(*cl))
	if err != nil {
		return err
	}
	hist := ""
	if h, err := os.UserHomeDir(); err == nil {
		hist = filepath.Join(h, ".idemkv_history")
	}
	sh, err := cqlsh.Open(cqlsh.Config{Hosts: strings.Split(*host, ","), Port: *port, Keyspace: *ks,
		Consistency: consistency, Username: *user, Password: *pass, HistoryFile: hist})
	if err != nil {
		return err
	}
	defer sh.Close()
	if *exec != "" {
		return sh.Run(strings.NewReader(*exec), stdout, false)
	}
	return sh.Run(os.Stdin, stdout, term.IsTerminal(int(os.Stdin.Fd())))
}
