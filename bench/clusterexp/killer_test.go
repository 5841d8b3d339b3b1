package clusterexp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPeerKiller opens a peer ring's state: its hosts and size, and a kill
// of a node that does not run fails without logging a kill.
func TestPeerKiller(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewPeerKiller(dir); err == nil {
		t.Fatal("a directory without ring.json opened")
	}
	if err := os.WriteFile(filepath.Join(dir, "ring.json"), []byte(`{"version": "5.0.9", "nodes": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := NewPeerKiller(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.Hosts(), ","); k.Size() != 3 || got != "127.0.1.1:9042,127.0.1.2:9042,127.0.1.3:9042" {
		t.Errorf("size %d, hosts %s", k.Size(), got)
	}
	if err := k.Kill(2); err == nil || k.Log().Len() != 0 {
		t.Errorf("kill of a stopped node: %v, %d events", err, k.Log().Len())
	}
}
