package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/transport"
)

// A busy storage port is an error naming the address, not a panic in
// closeAll (a failed Listen returned a typed nil transport).
func TestStartOnABusyStoragePortFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	nd, err := Start(Config{
		DataDirectory: t.TempDir(), ListenAddress: "127.0.0.1", StoragePort: port,
		Seeds: []string{"127.0.0.1"}, NumTokens: 4, StartNativeTransport: new(bool),
	}, Options{Logger: quiet(), Seed: 1})
	if err == nil {
		nd.Stop()
		t.Fatal("Start on a busy port succeeded")
	}
	if want := fmt.Sprintf("listen on 127.0.0.1:%d", port); !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error %q does not say %q and the bind error", err, want)
	}
}

// A data directory belongs to one node at a time; Stop and Crash release it.
func TestDataDirectoryIsLocked(t *testing.T) {
	netw := transport.NewMemNetwork(7)
	dir := t.TempDir()
	cfg := func(addr string) Config {
		return Config{DataDirectory: dir, ListenAddress: addr, Seeds: []string{addr}, NumTokens: 4,
			GossipIntervalMS: 50, StartNativeTransport: new(bool)}
	}
	start := func(addr string) (*Node, error) {
		return Start(cfg(addr), Options{Listen: netw.Listen, Logger: quiet(), Seed: 3})
	}
	a, err := start("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := start("127.0.0.2")
	if err == nil {
		b.Stop()
		a.Stop()
		t.Fatal("a second node opened a data directory in use")
	}
	if !errors.Is(err, ErrDataDirLocked) || !strings.Contains(err.Error(), dir) ||
		!strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("error %q does not name the directory and the holder", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, LockFile)); err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(os.Getpid()) {
		t.Errorf("LOCK holds %q (%v), want the pid", b, err)
	}
	if err := a.Crash(); err != nil {
		t.Fatal(err)
	}
	a, err = start("127.0.0.1")
	if err != nil {
		t.Fatalf("start after a crash: %v", err)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	a, err = start("127.0.0.1")
	if err != nil {
		t.Fatalf("start after a stop: %v", err)
	}
	a.Stop()
}
