package node

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The scenario scripts are in the manner of etcd raft's interaction tests
// (cockroachdb/datadriven's format): a file is a sequence of commands, each
// followed by a line "----" and the output it is expected to print, ended
// by a blank line. Lines starting with # are comments. With -rewrite the
// expected output is replaced by the actual one:
//
//	go test -run TestScenarios ./node/ -rewrite

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scenario scripts in testdata/scenarios")

// scriptCmd is one command of a script and its expected output.
type scriptCmd struct {
	line     int    // of the command, 1-based
	comments string // comment and blank lines before the command, verbatim
	text     string // the command line
	name     string
	args     []scriptArg
	want     string
}

type scriptArg struct{ key, val string }

// parseScript reads a script.
func parseScript(path string) (cmds []scriptCmd, trailer string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, "", err
	}
	var pre strings.Builder
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre.WriteString(l + "\n")
			continue
		}
		c := scriptCmd{line: i + 1, comments: pre.String(), text: strings.TrimSpace(l)}
		pre.Reset()
		fields := strings.Fields(c.text)
		c.name = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.args = append(c.args, scriptArg{k, v})
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			return nil, "", fmt.Errorf("%s:%d: %q is not followed by ----", path, i+1, c.text)
		}
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		c.want = strings.Join(want, "\n")
		cmds = append(cmds, c)
	}
	return cmds, pre.String(), nil
}

// runScript runs a script's commands through do and compares (or, with
// -rewrite, replaces) their output.
func runScript(t *testing.T, path string, do func(c *scriptCmd) string) {
	t.Helper()
	cmds, trailer, err := parseScript(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for i := range cmds {
		c := &cmds[i]
		got := strings.TrimRight(do(c), "\n")
		if t.Failed() {
			t.Fatalf("%s:%d: %s: the scenario failed", path, c.line, c.text)
		}
		out.WriteString(c.comments + c.text + "\n----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
		out.WriteString("\n")
		if !*rewrite && got != c.want {
			t.Fatalf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.text, got, c.want)
		}
	}
	if *rewrite {
		s := strings.TrimRight(out.String()+trailer, "\n") + "\n"
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// arg returns a command's argument, or def when absent.
func (c *scriptCmd) arg(key, def string) string {
	for _, a := range c.args {
		if a.key == key {
			return a.val
		}
	}
	return def
}

func (c *scriptCmd) has(key string) bool {
	for _, a := range c.args {
		if a.key == key {
			return true
		}
	}
	return false
}
