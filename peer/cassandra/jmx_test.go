package cassandra

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommandJMX: JMX is off unless asked for, and then each node listens
// on its own local port.
func TestCommandJMX(t *testing.T) {
	lib := t.TempDir()
	off, err := Command(NodeConfig{Index: 2, Nodes: 3, Dir: "/r/node2"}, lib, "1G")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range off {
		if strings.HasPrefix(a, "-Dcassandra.jmx") {
			t.Errorf("JMX option %q without NodeConfig.JMX", a)
		}
	}
	on, err := Command(NodeConfig{Index: 2, Nodes: 3, Dir: "/r/node2", JMX: true}, lib, "1G")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(on, "-Dcassandra.jmx.local.port=7200") || on[len(on)-1] != MainClass {
		t.Errorf("node 2 with JMX: %v", on)
	}
	if JMXPort(1) != 7199 || JMXPort(3) != 7201 {
		t.Errorf("JMX ports %d, %d; want 7199 and 7201", JMXPort(1), JMXPort(3))
	}
}

// TestNodeToolArgs: nodetool runs on JDK 17 with the clients' module
// options, against node i's port, with its history in home.
func TestNodeToolArgs(t *testing.T) {
	args := NodeToolArgs("/lib", "/ring", 2, "flush", "--", "ks")
	i := slices.Index(args, NodeToolClass)
	if i < 0 || !slices.Equal(args[i+1:], []string{"-h", "127.0.0.1", "-p", "7200", "flush", "--", "ks"}) {
		t.Fatalf("nodetool arguments %v", args)
	}
	if !slices.Contains(args[:i], "java.base/sun.nio.ch=ALL-UNNAMED") || !slices.Contains(args[:i], "-Duser.home=/ring") || !slices.Contains(args[:i], "/lib/*") {
		t.Errorf("JVM options %v", args[:i])
	}
}

// TestFlushNeedsJMX: a ring brought up without JMX refuses to flush, and
// so does a node it does not have.
func TestFlushNeedsJMX(t *testing.T) {
	r := Ring{Dir: t.TempDir()}
	ctx := context.Background()
	if err := r.Flush(ctx, 1, "ks"); err == nil {
		t.Error("flush without ring.json ran")
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "ring.json"), []byte(`{"version": "5.0.9", "nodes": 2, "java": "/bin/false"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx, 1, "ks"); !errors.Is(err, ErrNoJMX) {
		t.Errorf("flush without JMX: %v, want ErrNoJMX", err)
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "ring.json"), []byte(`{"version": "5.0.9", "nodes": 2, "java": "/bin/false", "jmx": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx, 3, "ks"); err == nil || !strings.Contains(err.Error(), "no node 3") {
		t.Errorf("flush of node 3 of 2: %v", err)
	}
	// A nodetool that fails (here java is /bin/false) is an error.
	if err := r.Flush(ctx, 1, "ks"); err == nil || errors.Is(err, ErrNoJMX) {
		t.Errorf("failing nodetool: %v", err)
	}
}

// TestKillRestartRefuse: Kill and Restart refuse nodes the ring does not
// have, and Kill a node that is not running.
func TestKillRestartRefuse(t *testing.T) {
	r := Ring{Dir: t.TempDir()}
	if err := r.Kill(1); err == nil {
		t.Error("kill without ring.json ran")
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "ring.json"), []byte(`{"version": "5.0.9", "nodes": 2, "java": "/bin/false"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(3); err == nil || !strings.Contains(err.Error(), "no node 3") {
		t.Errorf("kill node 3 of 2: %v", err)
	}
	if err := r.Kill(1); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("kill a node never started: %v", err)
	}
	if err := r.Restart(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "no node 0") {
		t.Errorf("restart node 0: %v", err)
	}
}
