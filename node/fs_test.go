package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkv/idemkv/transport"
	"github.com/idemkv/idemkv/vfs"
)

// TestNodeFilesOnOptionsFS: with Options.FS set, every file of the data
// directory (replica, schema, tokens, hints, peers) is on it and nothing on
// the operating system's filesystem.
func TestNodeFilesOnOptionsFS(t *testing.T) {
	root := t.TempDir()
	net := transport.NewMemNetwork(1)
	var fss []*vfs.MemFS
	var nodes []*Node
	for i := 1; i <= 2; i++ {
		fsys := vfs.NewMem()
		cfg := Config{
			DataDirectory: filepath.Join(root, fmt.Sprintf("node%d", i)),
			ListenAddress: fmt.Sprintf("127.0.0.%d", i), Seeds: []string{"127.0.0.1"},
			NumTokens: 4, GossipIntervalMS: 20, HintDeliveryMS: 20, CommitLogSync: "batch",
			StartNativeTransport: new(bool),
		}
		nd, err := Start(cfg, Options{Listen: net.Listen, Logger: quiet(), Seed: uint64(i), FS: fsys})
		if err != nil {
			t.Fatal(err)
		}
		defer nd.Stop()
		fss, nodes = append(fss, fsys), append(nodes, nd)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := fss[0].Stat(filepath.Join(nodes[0].Config().DataDirectory, PeersFile))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no peers file on the node's FS: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	dir := nodes[0].Config().DataDirectory
	for _, name := range []string{"host_id", "tokens.json", "cluster_schema.json", "commitlog", "hints", PeersFile} {
		if _, err := fss[0].Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s not on the node's FS: %v", name, err)
		}
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Errorf("the OS data root holds %d entries (%v), want none", len(ents), err)
	}
}
