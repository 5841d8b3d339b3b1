package cqlsh

import (
	"reflect"
	"testing"
)

func TestSplitter(t *testing.T) {
	cases := []struct {
		name    string
		lines   []string
		want    []string
		pending string
	}{
		{"one", []string{"SELECT * FROM t;"}, []string{"SELECT * FROM t"}, ""},
		{"two on a line", []string{"USE ks; SELECT * FROM t;"}, []string{"USE ks", "SELECT * FROM t"}, ""},
		{"across lines", []string{"SELECT *", "FROM t", ";"}, []string{"SELECT *\nFROM t"}, ""},
		{"unfinished", []string{"UPDATE t SET c = c + 1 WHERE k = 'a'"}, nil, "UPDATE t SET c = c + 1 WHERE k = 'a'"},
		{"dash comment after semicolon", []string{"SELECT 1 FROM t; -- a comment", "SELECT 2 FROM t;"},
			[]string{"SELECT 1 FROM t", "SELECT 2 FROM t"}, ""},
		{"slash comment after semicolon", []string{"SELECT 1 FROM t; // note; not a statement", "SELECT 2 FROM t;"},
			[]string{"SELECT 1 FROM t", "SELECT 2 FROM t"}, ""},
		{"block comment across lines", []string{"SELECT 1 /* a; b", "c; */ FROM t;"}, []string{"SELECT 1 \n  FROM t"}, ""},
		{"semicolon in string", []string{"UPDATE t SET c = c + 1 WHERE k = 'a;b';"},
			[]string{"UPDATE t SET c = c + 1 WHERE k = 'a;b'"}, ""},
		{"doubled quote", []string{"SELECT * FROM t WHERE k = 'it''s; ok';"},
			[]string{"SELECT * FROM t WHERE k = 'it''s; ok'"}, ""},
		{"comment markers in string", []string{"SELECT * FROM t WHERE k = '-- //';"},
			[]string{"SELECT * FROM t WHERE k = '-- //'"}, ""},
		{"string across lines", []string{"SELECT * FROM t WHERE k = 'a;", "b';"}, []string{"SELECT * FROM t WHERE k = 'a;\nb'"}, ""},
		{"quoted name", []string{`SELECT "a;b" FROM t;`}, []string{`SELECT "a;b" FROM t`}, ""},
		{"dollar string", []string{"SELECT $$a;b$$ FROM t;"}, []string{"SELECT $$a;b$$ FROM t"}, ""},
		{"empty statements", []string{";;  ;"}, nil, ""},
		{"shell command without semicolon", []string{"DESCRIBE KEYSPACES", "expand on"},
			[]string{"DESCRIBE KEYSPACES", "expand on"}, ""},
		{"shell command after a statement", []string{"SELECT * FROM t; HELP"}, []string{"SELECT * FROM t", "HELP"}, ""},
		{"use needs its semicolon", []string{"USE ks"}, nil, "USE ks"},
		{"comment only", []string{"-- nothing", "/* nor */"}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sp splitter
			var got []string
			for _, l := range c.lines {
				got = append(got, sp.feed(l)...)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("statements %q, want %q", got, c.want)
			}
			if p := sp.pending(); p != c.pending {
				t.Errorf("pending %q, want %q", p, c.pending)
			}
		})
	}
}

func TestSplitterBusy(t *testing.T) {
	var sp splitter
	sp.feed("/* open comment")
	if !sp.busy() {
		t.Error("an open comment is not busy")
	}
	sp.reset()
	if sp.busy() {
		t.Error("busy after reset")
	}
	sp.feed("SELECT 'open")
	if !sp.busy() {
		t.Error("an open string is not busy")
	}
}
