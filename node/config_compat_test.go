package node

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/transport"
)

func TestConfigCassandraYAML(t *testing.T) {
	b, err := os.ReadFile("testdata/cassandra-5.0.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Compat: Compat{
			CommitLogDirectory: "/var/lib/cassandra/commitlog",
			HintsDirectory:     "/var/lib/cassandra/hints",
		},
		ClusterName:            "Test Cluster",
		DataDirectory:          "/var/lib/cassandra/data",
		ListenAddress:          "127.0.0.1",
		StoragePort:            7000,
		NativeTransportPort:    9042,
		Seeds:                  []string{"127.0.0.1:7000"},
		NumTokens:              16,
		CommitLogSync:          "periodic",
		CommitLogSyncPeriodMS:  10000,
		CommitLogSegmentSizeMB: 32,
		CounterWriteTimeoutMS:  5000,
		ReadTimeoutMS:          5000,
		Authenticator:          "org.apache.cassandra.auth.AllowAllAuthenticator",
		// batch_size_warn_threshold: 5KiB, batch_size_fail_threshold: 50KiB
		BatchSizeWarnThresholdKB: 5,
		BatchSizeFailThresholdKB: 50,
		MaxHintWindowMS:          10800000, // max_hint_window: 3h
	}
	got := c
	got.IgnoredKeys = nil
	got.StartNativeTransport = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", got, want)
	}
	if c.StartNativeTransport == nil || !*c.StartNativeTransport {
		t.Errorf("start_native_transport: %v", c.StartNativeTransport)
	}
	ignored := strings.Join(c.IgnoredKeys, " ")
	for _, k := range []string{"saved_caches_directory", "concurrent_reads", "memtable", "server_encryption_options", "write_request_timeout", "storage_compatibility_mode"} {
		if !strings.Contains(" "+ignored+" ", " "+k+" ") {
			t.Errorf("ignored keys lack %s: %s", k, ignored)
		}
	}
	for _, k := range []string{"data_file_directories", "seed_provider", "rpc_address", "endpoint_snitch", "partitioner", "commitlog_directory", "hints_directory", "hinted_handoff_enabled", "cluster_name", "read_request_timeout"} {
		if strings.Contains(" "+ignored+" ", " "+k+" ") {
			t.Errorf("%s is honoured, yet listed as ignored", k)
		}
	}
	if _, err := c.withDefaults(); err != nil {
		t.Errorf("the loaded cassandra.yaml would not start: %v", err)
	}
}

func TestConfigKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		check   func(c Config) bool
		ignored string // the IgnoredKeys, joined by ", "
		err     string // a part of the error; "" for none
	}{
		{name: "idemkv keys", yaml: "data_directory: /d\nseeds: [127.0.0.1]\ncommitlog_sync_period_in_ms: 50\n",
			check: func(c Config) bool {
				return c.DataDirectory == "/d" && c.Seeds[0] == "127.0.0.1" && c.CommitLogSyncPeriodMS == 50
			}},
		{name: "typo", yaml: "data_directroy: /d\n", err: `unknown key "data_directroy"`},
		{name: "typo suggestion", yaml: "data_directroy: /d\n", err: `did you mean "data_directory"`},
		{name: "not a key at all", yaml: "flux_capacitor: 88\n", err: `line 1: unknown key "flux_capacitor"`},
		{name: "twice", yaml: "num_tokens: 4\nnum_tokens: 8\n", err: `appears twice`},
		{name: "both data directories", yaml: "data_directory: /a\ndata_file_directories: [/b]\n", err: "both data_directory and data_file_directories"},
		{name: "two data directories", yaml: "data_file_directories: [/a, /b]\n", err: "idemkv keeps a node's data in one"},
		{name: "seeds list", yaml: "seed_provider:\n  - class_name: SimpleSeedProvider\n    parameters:\n      - seeds: \"10.0.0.1, 10.0.0.2:7001,localhost\"\n",
			check: func(c Config) bool {
				return reflect.DeepEqual(c.Seeds, []string{"10.0.0.1", "10.0.0.2:7001", "127.0.0.1"})
			}},
		{name: "seed provider", yaml: "seed_provider:\n  - class_name: com.example.K8sSeedProvider\n", err: "only SimpleSeedProvider"},
		{name: "both seeds", yaml: "seeds: [a]\nseed_provider:\n  - class_name: SimpleSeedProvider\n", err: "both seeds and seed_provider"},
		{name: "rpc_address as listen", yaml: "listen_address: 10.0.0.5\nrpc_address: 10.0.0.5\n", check: func(c Config) bool { return c.ListenAddress == "10.0.0.5" }},
		{name: "rpc_address elsewhere", yaml: "listen_address: 10.0.0.5\nrpc_address: 0.0.0.0\n", ignored: "rpc_address (CQL is served on listen_address)"},
		{name: "snitch", yaml: "endpoint_snitch: org.apache.cassandra.locator.GossipingPropertyFileSnitch\n"},
		{name: "cloud snitch", yaml: "endpoint_snitch: Ec2Snitch\n", ignored: "endpoint_snitch (only SimpleSnitch and GossipingPropertyFileSnitch, with dc and rack)"},
		{name: "partitioner", yaml: "partitioner: org.apache.cassandra.dht.RandomPartitioner\n", err: "only Murmur3Partitioner"},
		{name: "no hints", yaml: "hinted_handoff_enabled: false\n", ignored: "hinted_handoff_enabled (hints cannot be turned off)"},
		{name: "durations", yaml: "commitlog_sync_period: 2s\ncommitlog_sync_group_window: 15ms\nread_request_timeout: 1m\n",
			check: func(c Config) bool {
				return c.CommitLogSyncPeriodMS == 2000 && c.CommitLogGroupWindowMS == 15 && c.ReadTimeoutMS == 60000
			}},
		{name: "bad duration", yaml: "read_request_timeout: 5 fortnights\n", err: `unknown unit "fortnights"`},
		{name: "both durations", yaml: "read_request_timeout: 5s\nread_request_timeout_in_ms: 5000\n", err: "both read_request_timeout_in_ms and read_request_timeout"},
		{name: "sizes", yaml: "commitlog_segment_size: 1GiB\nnative_transport_max_frame_size: 16MiB\n",
			check: func(c Config) bool { return c.CommitLogSegmentSizeMB == 1024 && c.NativeTransportMaxFrameMB == 16 }},
		{name: "size below a MiB", yaml: "commitlog_segment_size: 512KiB\n", err: "whole number of MiB"},
		{name: "native transport limits", yaml: "native_transport_max_request_data_in_flight: 1GiB\nnative_transport_max_request_data_in_flight_per_ip: 32MiB\n" +
			"native_transport_receive_queue_capacity: 2MiB\nnative_transport_max_auth_message_size: 64KiB\nnative_transport_idle_timeout: 0ms\n",
			check: func(c Config) bool {
				return c.NativeTransportMaxRequestDataInFlightMB == 1024 && c.NativeTransportMaxRequestDataPerIPMB == 32 &&
					c.NativeTransportReceiveQueueCapacityBytes == 2<<20 && c.NativeTransportMaxAuthMessageKB == 64 && c.NativeTransportIdleTimeoutMS == 0
			}},
		{name: "batch size thresholds", yaml: "batch_size_warn_threshold: 10KiB\nbatch_size_fail_threshold: 1MiB\n",
			check: func(c Config) bool { return c.BatchSizeWarnThresholdKB == 10 && c.BatchSizeFailThresholdKB == 1024 }},
		{name: "batch size thresholds, old names", yaml: "batch_size_warn_threshold_in_kb: 7\nbatch_size_fail_threshold_in_kb: -1\n",
			check: func(c Config) bool { return c.BatchSizeWarnThresholdKB == 7 && c.BatchSizeFailThresholdKB == -1 }},
		{name: "idle timeout", yaml: "native_transport_idle_timeout: 2m\n", check: func(c Config) bool { return c.NativeTransportIdleTimeoutMS == 120000 }},
		{name: "huge size", yaml: "native_transport_max_request_data_in_flight: 99999999999999GiB\n", err: "too large"},
		{name: "authenticator class", yaml: "authenticator:\n  class_name: PasswordAuthenticator\n  parameters:\n    x: y\n",
			check: func(c Config) bool { return c.Authenticator == "PasswordAuthenticator" }, ignored: "authenticator.parameters"},
		{name: "blank keys", yaml: "listen_address:\nkey_cache_size:\n", check: func(c Config) bool { return c.ListenAddress == "" }, ignored: "key_cache_size"},
		{name: "ignored, sorted", yaml: "concurrent_writes: 32\nauto_snapshot: true\n", ignored: "auto_snapshot, concurrent_writes"},
		{name: "empty", yaml: ""},
		{name: "not a mapping", yaml: "- a\n", err: "not a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil && !tc.check(c) {
				t.Errorf("loaded %+v", c)
			}
			if got := strings.Join(c.IgnoredKeys, ", "); got != tc.ignored {
				t.Errorf("ignored %q, want %q", got, tc.ignored)
			}
		})
	}
}

func TestConfigWriteEffective(t *testing.T) {
	p := filepath.Join(t.TempDir(), "node.yaml")
	c := Config{DataDirectory: "/data/n1", ListenAddress: "127.0.0.2", Seeds: []string{"127.0.0.1"}, CommitLogSync: "batch"}
	if err := c.Write(p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, bad := range []string{": 0\n", "null", `""`, "{}", "[]"} {
		if strings.Contains(text, bad) {
			t.Errorf("written config holds %q:\n%s", bad, text)
		}
	}
	for _, good := range []string{"# idemkv node configuration", "num_tokens: 16\n", "storage_port: 7000\n", "commitlog_sync: batch\n", "start_native_transport: true\n", "dc: datacenter1\n"} {
		if !strings.Contains(text, good) {
			t.Errorf("written config lacks %q:\n%s", good, text)
		}
	}
	back, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	eff, _ := c.withDefaults()
	if !reflect.DeepEqual(back, eff) {
		t.Errorf("read back\n%+v\nwant\n%+v", back, eff)
	}
	if err := (Config{}).Write(p); err == nil {
		t.Error("a config without data_directory was written")
	}
}

func TestConfigLogIgnoredOnce(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	Config{}.logIgnored(l)
	if buf.Len() != 0 {
		t.Errorf("logged with nothing ignored: %s", buf.String())
	}
	Config{Compat: Compat{IgnoredKeys: []string{"concurrent_reads", "memtable"}}}.logIgnored(l)
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.Contains(buf.String(), "concurrent_reads, memtable") {
		t.Errorf("want one line naming the keys, got:\n%s", buf.String())
	}
}

// TestConfigDirectoriesHonoured starts a node with commitlog_directory and
// hints_directory outside its data directory: the commit log and the hints
// are there, not in the data directory, and the ignored keys are logged in
// one line.
func TestConfigDirectoriesHonoured(t *testing.T) {
	root := t.TempDir()
	b := []byte(`
data_file_directories: [` + filepath.Join(root, "data") + `]
commitlog_directory: ` + filepath.Join(root, "cl") + `
hints_directory: ` + filepath.Join(root, "hints") + `
listen_address: 127.0.0.1
start_native_transport: false
concurrent_reads: 32
key_cache_size:
`)
	c, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	nd, err := Start(c, Options{Listen: transport.NewMemNetwork(1).Listen, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"cl", "hints"} {
		if ents, err := os.ReadDir(filepath.Join(root, d)); err != nil {
			t.Errorf("%s: %v", d, err)
		} else if d == "cl" && len(ents) == 0 {
			t.Errorf("no commit log in %s", d)
		}
	}
	for _, d := range []string{"commitlog", "hints"} {
		if _, err := os.Stat(filepath.Join(root, "data", d)); err == nil {
			t.Errorf("data/%s exists though the configuration puts it elsewhere", d)
		}
	}
	if n := strings.Count(log.String(), "concurrent_reads, key_cache_size"); n != 1 {
		t.Errorf("the ignored keys are logged %d times:\n%s", n, log.String())
	}
}

// TestConfigSample loads docs/node.yaml.sample: every key is idemkv's, the
// values are the defaults, and every key Config has is in the sample.
func TestConfigSample(t *testing.T) {
	b, err := os.ReadFile("../docs/node.yaml.sample")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.IgnoredKeys) > 0 {
		t.Errorf("the sample sets keys idemkv ignores: %v", c.IgnoredKeys)
	}
	eff, err := c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, eff) {
		t.Errorf("the sample's values are not the defaults:\n%+v\nwant\n%+v", c, eff)
	}
	for k := range configKeys() {
		if !strings.Contains(string(b), "\n"+k+":") && !strings.Contains(string(b), "\n# "+k+":") {
			t.Errorf("the sample does not show %s", k)
		}
	}
}
