package node

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseScript(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.txt")
	src := "# a comment\n\ncluster n=3 table=fbf\n----\n3 nodes\n\nwrite via=1 async\n----\nw1 started\nmore\n\nheal\n----\n\n# trailing\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmds, trailer, err := parseScript(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 3 {
		t.Fatalf("%d commands, want 3: %+v", len(cmds), cmds)
	}
	c := cmds[0]
	if c.name != "cluster" || c.arg("n", "") != "3" || c.arg("table", "") != "fbf" || c.arg("rf", "x") != "x" ||
		c.want != "3 nodes" || c.comments != "# a comment\n\n" || c.line != 3 {
		t.Fatalf("first command %+v", c)
	}
	if c := cmds[1]; !c.has("async") || c.want != "w1 started\nmore" {
		t.Fatalf("second command %+v", c)
	}
	if c := cmds[2]; c.name != "heal" || c.want != "" {
		t.Fatalf("third command %+v", c)
	}
	if trailer != "# trailing\n" {
		t.Fatalf("trailer %q", trailer)
	}
	if err := os.WriteFile(p, []byte("heal\nqueue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := parseScript(p); err == nil {
		t.Fatal("a command without ---- parsed")
	}
}
