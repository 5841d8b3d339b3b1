package diff

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Golden is a golden file: one server's answers to the corpus.
type Golden struct {
	// Server says what answered, e.g. "Apache Cassandra 5.0.9, 1 node".
	Server string `json:"server"`
	// Entries are the answers, in corpus order.
	Entries []GoldenEntry `json:"entries"`
}

// GoldenEntry is one entry's recorded answer.
type GoldenEntry struct {
	Name   string `json:"name"`
	Answer Answer `json:"answer"`
}

// NewGolden pairs the corpus with its answers.
func NewGolden(server string, corpus []Entry, answers []Answer) Golden {
	g := Golden{Server: server}
	for i, e := range corpus {
		g.Entries = append(g.Entries, GoldenEntry{Name: e.Name, Answer: answers[i]})
	}
	return g
}

// WriteGolden writes g to path as indented JSON.
func WriteGolden(path string, g Golden) error {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return fmt.Errorf("golden %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("golden: %w", err)
	}
	return nil
}

// ReadGolden reads a golden file.
func ReadGolden(path string) (Golden, error) {
	var g Golden
	b, err := os.ReadFile(path)
	if err != nil {
		return g, fmt.Errorf("golden: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return g, fmt.Errorf("golden %s: %w", path, err)
	}
	return g, nil
}

// Difference kinds in differences.txt.
const (
	// Deliberate: idemkv differs on purpose (an extension, a feature it
	// refuses).
	Deliberate = "deliberate"
	// Bug: idemkv differs and should not; a finding to fix.
	Bug = "bug"
	// Wording: the same answer and error code, another error message.
	Wording = "wording"
)

// Difference is one listed entry of differences.txt.
type Difference struct {
	Name   string
	Kind   string // Deliberate, Bug or Wording
	Reason string
	Line   int
}

// ReadDifferences reads a differences file: one entry a line,
// "<name> <kind>: <reason>", kind being deliberate, bug or wording;
// blank lines and lines starting with # are comments.
func ReadDifferences(path string) (map[string]Difference, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("differences: %w", err)
	}
	defer f.Close()
	out := map[string]Difference{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		kind, reason, ok2 := strings.Cut(strings.TrimSpace(rest), ":")
		reason = strings.TrimSpace(reason)
		if !ok || !ok2 || reason == "" {
			return nil, fmt.Errorf("%s:%d: want \"<name> <kind>: <reason>\", got %q", path, n, line)
		}
		switch kind {
		case Deliberate, Bug, Wording:
		default:
			return nil, fmt.Errorf("%s:%d: kind %q is none of deliberate, bug, wording", path, n, kind)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", path, n, name)
		}
		out[name] = Difference{Name: name, Kind: kind, Reason: reason, Line: n}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("differences %s: %w", path, err)
	}
	return out, nil
}

// Verdict is the outcome of comparing one entry.
type Verdict struct {
	Name    string
	Agree   bool   // the answers are equal
	Wording bool   // they differ in the error message only
	Listed  string // the kind differences.txt lists it as, "" if not listed
	Problem string // why the test fails on this entry, "" if it does not
}

// Compare compares idemkv's answers with the golden ones under the listed
// differences. An entry fails when it differs and is not listed, when it
// is listed and agrees, when it is listed as a wording difference and
// differs in more than its message, when the golden file lacks it, and a
// listed name that is no entry of the corpus fails too.
func Compare(corpus []Entry, got []Answer, golden Golden, diffs map[string]Difference) []Verdict {
	want := map[string]Answer{}
	for _, ge := range golden.Entries {
		want[ge.Name] = ge.Answer
	}
	var out []Verdict
	seen := map[string]bool{}
	for i, e := range corpus {
		seen[e.Name] = true
		v := Verdict{Name: e.Name, Listed: diffs[e.Name].Kind}
		w, ok := want[e.Name]
		if !ok {
			v.Problem = "not in the golden file: re-record it (see docs/differential.md)"
			out = append(out, v)
			continue
		}
		v.Agree, v.Wording = Equal(got[i], w)
		switch {
		case v.Agree && v.Listed != "":
			v.Problem = fmt.Sprintf("listed as %s in differences.txt but now agrees: remove the line", v.Listed)
		case !v.Agree && v.Listed == "":
			v.Problem = "differs and is not listed in differences.txt"
		case !v.Agree && v.Listed == Wording && !v.Wording:
			v.Problem = "listed as a wording difference but differs in more than the message"
		}
		if v.Problem != "" {
			v.Problem += fmt.Sprintf("\n  statement: %s\n  cassandra: %s\n  idemkv:    %s", describe(e), w, got[i])
		}
		out = append(out, v)
	}
	for name, d := range diffs {
		if !seen[name] {
			out = append(out, Verdict{Name: name, Problem: fmt.Sprintf("differences.txt:%d lists an entry the corpus does not have", d.Line)})
		}
	}
	return out
}

func describe(e Entry) string {
	switch e.Op {
	case OpBatch:
		var parts []string
		for _, s := range e.Stmts {
			parts = append(parts, s.Stmt)
		}
		return fmt.Sprintf("batch(%v) %s", e.Batch, strings.Join(parts, "; "))
	case OpPage:
		return fmt.Sprintf("%s (page size %d)", e.Stmt, e.PageSize)
	case OpPrepare:
		return fmt.Sprintf("prepare %s %v", e.Stmt, e.Values)
	}
	s := e.Stmt
	if len(e.Values) > 0 {
		s += fmt.Sprintf(" %v", e.Values)
	}
	if e.CL != "" {
		s += " at " + e.CL
	}
	return s
}
