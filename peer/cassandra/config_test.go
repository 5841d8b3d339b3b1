package cassandra

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestYAMLNode2Of3(t *testing.T) {
	b, err := YAML(NodeConfig{Index: 2, Nodes: 3, Dir: "/r/node2", CommitLogSync: "batch", CounterWriteTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("generated yaml does not parse: %v\n%s", err, b)
	}
	want := map[string]any{
		"listen_address": "127.0.1.2", "rpc_address": "127.0.1.2", "num_tokens": 16,
		"commitlog_sync": "batch", "counter_write_request_timeout": "1500ms",
		"commitlog_directory": "/r/node2/commitlog", "storage_port": 7000, "native_transport_port": 9042,
		"auto_bootstrap": false, "concurrent_counter_writes": 4, "concurrent_compactors": 1,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v (%T), want %v", k, m[k], m[k], v)
		}
	}
	if _, ok := m["commitlog_sync_period"]; ok {
		t.Error("batch mode has a commitlog_sync_period")
	}
	if dirs, _ := m["data_file_directories"].([]any); len(dirs) != 1 || dirs[0] != "/r/node2/data" {
		t.Errorf("data_file_directories = %v", m["data_file_directories"])
	}
	sp, _ := m["seed_provider"].([]any)
	if len(sp) != 1 {
		t.Fatalf("seed_provider = %v", m["seed_provider"])
	}
	params, _ := sp[0].(map[string]any)["parameters"].([]any)
	if len(params) != 1 || params[0].(map[string]any)["seeds"] != "127.0.1.1:7000" {
		t.Errorf("seeds = %v", params)
	}
	if !strings.HasPrefix(string(b), "# cassandra.yaml of peer node 2 of 3") {
		t.Errorf("no header: %.60s", b)
	}
}

func TestYAMLPeriodicDefaults(t *testing.T) {
	b, err := YAML(NodeConfig{Index: 1, Nodes: 1, Dir: "/r/node1"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["commitlog_sync"] != "periodic" || m["commitlog_sync_period"] != "10000ms" || m["counter_write_request_timeout"] != "1000ms" {
		t.Errorf("sync %v period %v counter timeout %v", m["commitlog_sync"], m["commitlog_sync_period"], m["counter_write_request_timeout"])
	}
	if m["allocate_tokens_for_local_replication_factor"] != 1 {
		t.Errorf("token allocation RF %v on a 1-node ring", m["allocate_tokens_for_local_replication_factor"])
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []NodeConfig{
		{Index: 0, Nodes: 3, Dir: "/r"},
		{Index: 4, Nodes: 3, Dir: "/r"},
		{Index: 1, Nodes: 3, Dir: "rel"},
		{Index: 1, Nodes: 3, Dir: "/r", CommitLogSync: "group"},
		{Index: 1, Nodes: 3, Dir: "/r", Seeds: []int{5}},
		{Index: 1, Nodes: 300, Dir: "/r"},
	} {
		if _, err := YAML(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

func TestCommand(t *testing.T) {
	lib := t.TempDir()
	args, err := Command(NodeConfig{Index: 3, Nodes: 3, Dir: "/r/node3"}, lib, "1G")
	if err != nil {
		t.Fatal(err)
	}
	if args[len(args)-1] != MainClass {
		t.Errorf("last argument %q, want the main class", args[len(args)-1])
	}
	for _, want := range []string{"-Xms1G", "-Xmx1G", "-XX:+UseG1GC", "-Dcassandra-foreground=yes",
		"-Dcassandra.config=file:///r/node3/cassandra.yaml", "-Dcassandra.storagedir=/r/node3",
		"-Dlogback.configurationFile=file:///r/node3/logback.xml", "-Dcassandra.logdir=/r/node3/logs",
		"-Dio.netty.tryReflectionSetAccessible=true"} {
		if !slices.Contains(args, want) {
			t.Errorf("no %s in %v", want, args)
		}
	}
	// Every --add-opens and --add-exports takes the next argument.
	opens := 0
	for i, a := range args {
		if a == "--add-opens" || a == "--add-exports" {
			if i+1 >= len(args) || !strings.HasSuffix(args[i+1], "=ALL-UNNAMED") {
				t.Errorf("%s without its module/package=ALL-UNNAMED", a)
			}
			if a == "--add-opens" {
				opens++
			}
		}
	}
	if opens != 14 {
		t.Errorf("%d --add-opens, want jvm17-server.options' 14", opens)
	}
	if i := slices.Index(args, "-cp"); i < 0 || args[i+1] != lib+"/*" {
		t.Errorf("class path: %v", args)
	}
	for _, heap := range []string{"", "1 G", "abc", "0", "1G -XX:+Foo"} {
		if _, err := Command(NodeConfig{Index: 1, Nodes: 1, Dir: "/r"}, lib, heap); err == nil {
			t.Errorf("heap %q accepted", heap)
		}
	}
	for _, heap := range []string{"512M", "1G", "1536m", "2147483648"} {
		if _, err := Command(NodeConfig{Index: 1, Nodes: 1, Dir: "/r"}, lib, heap); err != nil {
			t.Errorf("heap %q: %v", heap, err)
		}
	}
}

func TestPOM(t *testing.T) {
	b, err := POM("5.0.9")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "<artifactId>cassandra-all</artifactId>") || !strings.Contains(string(b), "<version>5.0.9</version>") {
		t.Errorf("pom:\n%s", b)
	}
	for _, v := range []string{"", "5.0", "5.0.9</version><x>", "latest"} {
		if _, err := POM(v); err == nil {
			t.Errorf("version %q accepted", v)
		}
	}
}

func TestLogbackEscapes(t *testing.T) {
	b := string(Logback(NodeConfig{Index: 1, Nodes: 1, Dir: "/r&d/node1"}))
	if !strings.Contains(b, "/r&amp;d/node1/logs/system.log") {
		t.Errorf("logback:\n%s", b)
	}
}

// A ring's data remembers its members: another size needs --wipe. The
// check comes before anything is resolved or started.
func TestUpOtherSizeNeedsWipe(t *testing.T) {
	r := Ring{Dir: t.TempDir()}
	if err := os.WriteFile(r.statePath(), []byte(`{"version": "5.0.9", "nodes": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err := r.Up(context.Background(), UpOptions{Nodes: 1, CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "add --wipe") {
		t.Errorf("error %v", err)
	}
}

// TestPidsWithoutRing: a directory without a peer ring has no pids to
// measure, and says so.
func TestPidsWithoutRing(t *testing.T) {
	if pids, err := (Ring{Dir: t.TempDir()}).Pids(); err == nil {
		t.Fatalf("pids %v of no ring, no error", pids)
	}
}
