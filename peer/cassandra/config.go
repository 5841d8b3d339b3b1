// Package cassandra runs a real Apache Cassandra ring next to idemkv, for
// side-by-side benchmarks: `idemkv peer cassandra up -n N` resolves
// cassandra-all and its runtime dependencies from Maven Central into a
// cache directory (once), writes one cassandra.yaml and one logback.xml per
// node, and starts one JVM per node (main class CassandraDaemon) on its own
// loopback address 127.0.1.i, apart from `idemkv ring`'s 127.0.0.i.
//
// This file generates the per-node configuration; resolve.go fetches the
// jars; ring.go starts, watches and stops the JVMs.
package cassandra

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultVersion is the Cassandra release the peer ring runs: the newest
// 5.0.x that Maven Central serves as org.apache.cassandra:cassandra-all.
const DefaultVersion = "5.0.9"

// Ports of every peer node (each node has its own address, so they are the
// same on every node).
const (
	StoragePort = 7000
	CQLPort     = 9042
)

// Address is the loopback address of node i (1-based): 127.0.1.i, apart
// from the 127.0.0.i of `idemkv ring` and the embedded bench ring.
func Address(i int) string { return fmt.Sprintf("127.0.1.%d", i) }

// NodeConfig is what a node's generated files depend on.
type NodeConfig struct {
	Index int    // 1-based
	Nodes int    // ring size: nodes 1..Nodes
	Dir   string // the node's directory (data, commit log, logs, config)
	// NumTokens is the number of vnodes (default 16).
	NumTokens int
	// CommitLogSync is "periodic" (fsync every 10 s, Cassandra's default
	// and idemkv's) or "batch" (fsync before acknowledging).
	CommitLogSync string
	// CounterWriteTimeout is counter_write_request_timeout (default 1 s,
	// the bench's --counter-write-timeout default).
	CounterWriteTimeout time.Duration
	// Seeds are the nodes named as seeds (default: node 1).
	Seeds []int
	// JMX, when set, opens the node's JMX on 127.0.0.1:JMXPort(Index)
	// (local only, no authentication, as cassandra-env.sh's LOCAL_JMX),
	// so that nodetool can reach it (Ring.Flush).
	JMX bool
}

// JMXPort is node i's local JMX port when the ring runs with JMX: 7199
// (Cassandra's) for node 1, 7200 for node 2, and so on; every node's JMX
// listens on 127.0.0.1, so the ports differ.
func JMXPort(i int) int { return 7199 + i - 1 }

func (c NodeConfig) withDefaults() NodeConfig {
	if c.NumTokens <= 0 {
		c.NumTokens = 16
	}
	if c.CommitLogSync == "" {
		c.CommitLogSync = "periodic"
	}
	if c.CounterWriteTimeout <= 0 {
		c.CounterWriteTimeout = time.Second
	}
	if len(c.Seeds) == 0 {
		c.Seeds = []int{1}
	}
	return c
}

// Validate reports a configuration no node can start with.
func (c NodeConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Nodes < 1 || c.Nodes > 254:
		return fmt.Errorf("cassandra: %d nodes: want 1 to 254", c.Nodes)
	case c.Index < 1 || c.Index > c.Nodes:
		return fmt.Errorf("cassandra: node %d of %d", c.Index, c.Nodes)
	case c.Dir == "" || !filepath.IsAbs(c.Dir):
		return fmt.Errorf("cassandra: node directory %q: want an absolute path", c.Dir)
	case c.CommitLogSync != "periodic" && c.CommitLogSync != "batch":
		return fmt.Errorf("cassandra: commit log sync %q: want periodic or batch (Cassandra's group mode has no idemkv twin here)", c.CommitLogSync)
	}
	for _, s := range c.Seeds {
		if s < 1 || s > c.Nodes {
			return fmt.Errorf("cassandra: seed node %d of %d", s, c.Nodes)
		}
	}
	return nil
}

// ms renders a duration in Cassandra 5's duration syntax.
func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// YAML returns node c's cassandra.yaml. It keeps a node small enough that
// three of them, the benchmark and other work share a 2-core machine: small
// memtables and caches, few concurrent reads and writes, one compactor,
// throttled compaction.
func YAML(c NodeConfig) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	seeds := make([]string, len(c.Seeds))
	for i, s := range c.Seeds {
		seeds[i] = fmt.Sprintf("%s:%d", Address(s), StoragePort)
	}
	d := func(sub string) string { return filepath.Join(c.Dir, sub) }
	// yaml.v3 keeps a yaml.Node's key order; build one from ordered pairs
	// so the file reads like Cassandra's own.
	kv := []any{
		"cluster_name", "idemkv-peer",
		"num_tokens", c.NumTokens,
		"allocate_tokens_for_local_replication_factor", min(3, c.Nodes),
		"partitioner", "org.apache.cassandra.dht.Murmur3Partitioner",
		"endpoint_snitch", "SimpleSnitch",
		// A fresh ring holds no data: nodes join without streaming.
		"auto_bootstrap", false,
		"seed_provider", []any{map[string]any{
			"class_name": "org.apache.cassandra.locator.SimpleSeedProvider",
			"parameters": []any{map[string]any{"seeds": strings.Join(seeds, ",")}},
		}},
		"listen_address", Address(c.Index),
		"rpc_address", Address(c.Index),
		"storage_port", StoragePort,
		"native_transport_port", CQLPort,
		"start_native_transport", true,
		"data_file_directories", []any{d("data")},
		"commitlog_directory", d("commitlog"),
		"saved_caches_directory", d("saved_caches"),
		"hints_directory", d("hints"),
		"cdc_raw_directory", d("cdc_raw"),
		"commitlog_sync", c.CommitLogSync,
	}
	if c.CommitLogSync == "periodic" {
		kv = append(kv, "commitlog_sync_period", "10000ms")
	}
	kv = append(kv,
		"commitlog_segment_size", "8MiB",
		"memtable_heap_space", "64MiB",
		"memtable_offheap_space", "64MiB",
		"key_cache_size", "8MiB",
		"counter_cache_size", "8MiB",
		"concurrent_reads", 4,
		"concurrent_writes", 4,
		"concurrent_counter_writes", 4,
		"concurrent_compactors", 1,
		"compaction_throughput", "16MiB/s",
		"native_transport_max_threads", 32,
		"counter_write_request_timeout", ms(c.CounterWriteTimeout),
		"write_request_timeout", "2000ms",
		"read_request_timeout", "5000ms",
		"authenticator", "AllowAllAuthenticator",
		"authorizer", "AllowAllAuthorizer",
		"auto_snapshot", false,
	)
	root := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i < len(kv); i += 2 {
		var k, v yaml.Node
		if err := k.Encode(kv[i]); err != nil {
			return nil, fmt.Errorf("cassandra: yaml key %v: %w", kv[i], err)
		}
		if err := v.Encode(kv[i+1]); err != nil {
			return nil, fmt.Errorf("cassandra: yaml value of %v: %w", kv[i], err)
		}
		root.Content = append(root.Content, &k, &v)
	}
	out, err := yaml.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("cassandra: yaml: %w", err)
	}
	header := fmt.Sprintf("# cassandra.yaml of peer node %d of %d, generated by idemkv peer cassandra up: edits are overwritten\n", c.Index, c.Nodes)
	return append([]byte(header), out...), nil
}

// Logback returns node c's logback.xml: system.log under the node's logs
// directory, rolled at 20 MiB, 5 files kept.
func Logback(c NodeConfig) []byte {
	logs := filepath.Join(c.Dir, "logs")
	return []byte(`<configuration scan="false">
  <appender name="SYSTEMLOG" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>` + xmlEscape(filepath.Join(logs, "system.log")) + `</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.FixedWindowRollingPolicy">
      <fileNamePattern>` + xmlEscape(filepath.Join(logs, "system.log.%i.zip")) + `</fileNamePattern>
      <minIndex>1</minIndex>
      <maxIndex>5</maxIndex>
    </rollingPolicy>
    <triggeringPolicy class="ch.qos.logback.core.rolling.SizeBasedTriggeringPolicy">
      <maxFileSize>20MB</maxFileSize>
    </triggeringPolicy>
    <encoder>
      <pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="SYSTEMLOG"/>
  </root>
</configuration>
`)
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// JVMOptions are the JVM's options for JDK 17 as Cassandra 5.0's
// conf/jvm-server.options and conf/jvm17-server.options give them (G1, the
// module exports and opens Cassandra needs on 17, Netty's settings), with
// the heap set explicitly instead of cassandra-env.sh's computation, and no
// JMX unless NodeConfig.JMX asks for it (cassandra-env.sh enables it).
var JVMOptions = []string{
	// jvm-server.options
	"-ea",
	"-da:net.openhft...",
	"-XX:+UseThreadPriorities",
	"-Xss256k",
	"-XX:+UseTLAB",
	"-XX:+ResizeTLAB",
	"-XX:+PerfDisableSharedMem",
	"-Djava.net.preferIPv4Stack=true",
	// cassandra-env.sh: stop rather than run on after an OutOfMemoryError
	"-XX:+ExitOnOutOfMemoryError",
	// jvm17-server.options: G1
	"-XX:+UseG1GC",
	"-XX:+ParallelRefProcEnabled",
	"-XX:MaxTenuringThreshold=1",
	"-XX:G1HeapRegionSize=16m",
	"-XX:G1RSetUpdatingPauseTimePercent=5",
	"-XX:MaxGCPauseMillis=300",
	"-XX:InitiatingHeapOccupancyPercent=70",
	// jvm17-server.options: JPMS
	"-Djdk.attach.allowAttachSelf=true",
	"--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
	"--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
	"--add-exports", "java.sql/java.sql=ALL-UNNAMED",
	"--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
	"--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
	"--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
	"--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
	"--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
	"--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens", "java.base/java.io=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang=ALL-UNNAMED",
	"--add-opens", "java.base/java.util=ALL-UNNAMED",
	// jvm17-server.options: Netty
	"-Dio.netty.tryReflectionSetAccessible=true",
	"-Dio.netty.allocator.useCacheForAllThreads=true",
	"-Dio.netty.allocator.maxOrder=11",
}

// NodeToolJVMOptions are the JVM's options of nodetool on JDK 17, the
// module exports and opens of Cassandra 5.0's conf/jvm17-clients.options
// (without them its FileUtils cannot reach sun.nio.ch and nodetool stops).
var NodeToolJVMOptions = []string{
	"--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
	"--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
	"--add-exports", "java.sql/java.sql=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
	"--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
}

// heapRE is a JVM memory size: a number with an optional unit.
var heapRE = regexp.MustCompile(`^[1-9][0-9]*[kKmMgG]?$`)

// MainClass is the class every node's JVM runs.
const MainClass = "org.apache.cassandra.service.CassandraDaemon"

// Command returns the java command line of node c: java's arguments after
// the executable. lib is the directory of cassandra-all and its
// dependencies; heap is -Xms and -Xmx (e.g. "1G").
func Command(c NodeConfig, lib, heap string) ([]string, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !heapRE.MatchString(heap) {
		return nil, fmt.Errorf("cassandra: heap %q: want a size such as 1G", heap)
	}
	if lib == "" {
		return nil, errors.New("cassandra: no library directory")
	}
	args := []string{"-Xms" + heap, "-Xmx" + heap}
	args = append(args, JVMOptions...)
	if jamm, err := filepath.Glob(filepath.Join(lib, "jamm-*.jar")); err == nil && len(jamm) > 0 {
		args = append(args, "-javaagent:"+jamm[0]) // cassandra-env.sh: the memory meter's agent
	}
	args = append(args,
		"-Dcassandra.config=file://"+filepath.Join(c.Dir, "cassandra.yaml"),
		"-Dcassandra-foreground=yes",
		"-Dcassandra.storagedir="+c.Dir,
		"-Dcassandra.logdir="+filepath.Join(c.Dir, "logs"),
		"-Dlogback.configurationFile=file://"+filepath.Join(c.Dir, "logback.xml"),
	)
	if c.JMX {
		args = append(args, fmt.Sprintf("-Dcassandra.jmx.local.port=%d", JMXPort(c.Index)))
	}
	args = append(args,
		// A local ring: no need to wait 30 s for gossip to settle.
		"-Dcassandra.skip_wait_for_gossip_to_settle=0",
		"-Dcassandra.ring_delay_ms=1000",
		"-cp", filepath.Join(lib, "*"),
		MainClass,
	)
	return args, nil
}
