package node

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/schema"
	"github.com/idemkv/idemkv/transport"
)

// TestStartWithOutOfRangeFBFOptions: a schema holding FBF options out of
// their bounds (written before them, or edited by hand) does not take the
// node down at start: the table is loaded with the values clamped to their
// limits (the 4294967295-bit filter is never allocated) and the log names
// the table, the option, the limit and the ALTER TABLE that fixes it.
func TestStartWithOutOfRangeFBFOptions(t *testing.T) {
	netw := transport.NewMemNetwork(11)
	dir := t.TempDir()
	cfg := Config{DataDirectory: dir, ListenAddress: "127.0.0.1", Seeds: []string{"127.0.0.1"}, NumTokens: 4,
		GossipIntervalMS: 50, StartNativeTransport: new(bool)}
	n, err := Start(cfg, Options{Listen: netw.Listen, Logger: quiet(), Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Schema().CreateKeyspace(schema.Keyspace{Name: "ks", Class: "SimpleStrategy", Options: map[string]string{"replication_factor": "1"}}, false); err != nil {
		t.Fatal(err)
	}
	def := coltype.TableDef{ID: 77, Keyspace: "ks", Name: "idem", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
		Options: map[string]string{counter.IdempotenceOption: `{"class":"fbf","bits":"65536"}`}}
	if err := n.Schema().CreateTable(def, false); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	// Both schema files, as a version without the bounds wrote them.
	for _, name := range []string{"schema.json", "cluster_schema.json"} {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`\"bits\":\"65536\"`)) {
			t.Fatalf("%s does not hold the option: %s", name, b)
		}
		b = bytes.ReplaceAll(b, []byte(`\"bits\":\"65536\"`), []byte(`\"bits\":\"4294967295\"`))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err = Start(cfg, Options{Listen: netw.Listen, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Seed: 5})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("start with an out-of-range option: %v", err)
	}
	defer n.Stop()
	// Two filters of 2^32 bits are 1 GiB; clamped to 2^28 bits, 64 MiB.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Errorf("start allocated %d MiB", grew>>20)
	}
	out := logs.String()
	for _, w := range []string{"ks.idem", `bits = \"4294967295\"`, "at most 268435456", "ALTER TABLE ks.idem WITH idempotence"} {
		if !strings.Contains(out, w) {
			t.Errorf("the start-up log does not say %q:\n%s", w, out)
		}
	}
	if _, ok := n.Schema().Table("ks", "idem"); !ok {
		t.Fatal("the table is gone")
	}
}
