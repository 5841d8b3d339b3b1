package node

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// This file reads cassandra.yaml's own key names into a Config (see
// docs/config.md): the keys idemkv honours with Cassandra's meaning are
// mapped onto Config's fields, the other keys of cassandra.yaml are
// ignored and reported once at start-up, and any other key is an error,
// to catch typos.

// Compat holds the node settings that came with cassandra.yaml's key names,
// and what was ignored of a cassandra.yaml.
type Compat struct {
	// CommitLogDirectory is where the commit log lives (default: the
	// commitlog directory inside data_directory).
	CommitLogDirectory string `yaml:"commitlog_directory,omitempty"`
	// HintsDirectory is where the hints for other nodes are kept
	// (default: the hints directory inside data_directory).
	HintsDirectory string `yaml:"hints_directory,omitempty"`
	// IgnoredKeys are the cassandra.yaml keys the loaded file sets that
	// idemkv does not honour; Start logs them, once.
	IgnoredKeys []string `yaml:"-"`
}

// hintsDir is the directory of the node's hints.
func (c Config) hintsDir() string {
	return cmp.Or(c.HintsDirectory, filepath.Join(c.DataDirectory, "hints"))
}

// logIgnored logs, in one line, the cassandra.yaml keys the node ignores.
func (c Config) logIgnored(l *slog.Logger) {
	if len(c.IgnoredKeys) > 0 {
		l.Warn("configuration: cassandra.yaml keys that idemkv does not support are ignored", "keys", strings.Join(c.IgnoredKeys, ", "))
	}
}

// configKeys are Config's own YAML keys, from its struct tags.
func configKeys() map[string]bool {
	keys := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			switch {
			case name == "-":
			case strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			case name != "":
				keys[name] = true
			case f.IsExported():
				keys[strings.ToLower(f.Name)] = true
			}
		}
	}
	walk(reflect.TypeOf(Config{}))
	return keys
}

// ParseConfig reads a configuration in YAML: idemkv's keys and
// cassandra.yaml's (see docs/config.md). A cassandra.yaml key that idemkv
// does not support is listed in IgnoredKeys; a key that is neither is an
// error.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return c, err
	}
	if len(doc.Content) == 0 {
		return c, nil // an empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return c, fmt.Errorf("line %d: the configuration is not a mapping of keys to values", root.Line)
	}
	own := configKeys()
	keep := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	present := map[string]*yaml.Node{}
	var aliases []string
	var ignored []string
	for k := 0; k+1 < len(root.Content); k += 2 {
		key, val := root.Content[k], root.Content[k+1]
		name := key.Value
		if _, dup := present[name]; dup {
			return c, fmt.Errorf("line %d: key %q appears twice", key.Line, name)
		}
		present[name] = val
		switch {
		case own[name]:
			if name == "authenticator" && val.Kind == yaml.MappingNode {
				// Cassandra 5.0: authenticator: {class_name: ..., parameters: ...}
				cls := mapValue(val, "class_name")
				if cls == nil {
					return c, fmt.Errorf("line %d: authenticator has no class_name", val.Line)
				}
				if p := mapValue(val, "parameters"); p != nil && len(p.Content) > 0 {
					ignored = append(ignored, "authenticator.parameters")
				}
				val = cls
			}
			if isNull(val) {
				continue // a key left blank: the default
			}
			keep.Content = append(keep.Content, key, val)
		case cassandraAliases[name] != nil:
			aliases = append(aliases, name)
		case cassandraKeys[name]:
			ignored = append(ignored, name)
		default:
			return c, fmt.Errorf("line %d: unknown key %q: neither an idemkv key nor a cassandra.yaml key (see docs/config.md)%s", key.Line, name, suggest(name, own))
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(keep); err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, errEOF) {
		return c, err
	}
	for _, name := range aliases {
		a := cassandraAliases[name]
		val := present[name]
		if a.own != "" && present[a.own] != nil && !isNull(present[a.own]) && !isNull(val) {
			return c, fmt.Errorf("line %d: both %s and %s are set; keep one", val.Line, a.own, name)
		}
		if isNull(val) {
			continue
		}
		honoured, err := a.apply(val, &c)
		if err != nil {
			return c, fmt.Errorf("line %d: %s: %w", val.Line, name, err)
		}
		if honoured != "" {
			ignored = append(ignored, name+" ("+honoured+")")
		}
	}
	if c.ListenAddress == "localhost" {
		c.ListenAddress = "127.0.0.1"
	}
	sort.Strings(ignored)
	c.IgnoredKeys = ignored
	return c, nil
}

// errEOF is what a decoder returns for an empty document.
var errEOF = func() error {
	var v struct{}
	return yaml.NewDecoder(strings.NewReader("")).Decode(&v)
}()

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// mapValue returns the value of key in mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for k := 0; k+1 < len(m.Content); k += 2 {
		if m.Content[k].Value == key {
			return m.Content[k+1]
		}
	}
	return nil
}

// suggest names an idemkv key close to a mistyped one.
func suggest(name string, own map[string]bool) string {
	best, bestD := "", 3
	for k := range own {
		if d := editDistance(name, k); d < bestD || (d == bestD && k < best && best != "") {
			best, bestD = k, d
		}
	}
	for k := range cassandraKeys {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// alias is a cassandra.yaml key that idemkv honours by setting its own
// field (own names that field's key, which must not be set too). apply
// returns a non-empty reason when the value given cannot be honoured and
// is ignored.
type alias struct {
	own   string
	apply func(v *yaml.Node, c *Config) (ignored string, err error)
}

var cassandraAliases = map[string]*alias{
	"data_file_directories": {own: "data_directory", apply: func(v *yaml.Node, c *Config) (string, error) {
		var dirs []string
		if err := v.Decode(&dirs); err != nil {
			return "", err
		}
		switch len(dirs) {
		case 0:
			return "", nil
		case 1:
			c.DataDirectory = dirs[0]
			return "", nil
		}
		return "", fmt.Errorf("%d directories: idemkv keeps a node's data in one", len(dirs))
	}},
	"seed_provider": {own: "seeds", apply: func(v *yaml.Node, c *Config) (string, error) {
		var sp []struct {
			ClassName  string              `yaml:"class_name"`
			Parameters []map[string]string `yaml:"parameters"`
		}
		if err := v.Decode(&sp); err != nil {
			return "", err
		}
		for _, p := range sp {
			if !strings.HasSuffix(p.ClassName, "SimpleSeedProvider") {
				return "", fmt.Errorf("class_name %q: idemkv has only SimpleSeedProvider", p.ClassName)
			}
			for _, params := range p.Parameters {
				for _, s := range strings.Split(params["seeds"], ",") {
					if s = strings.TrimSpace(s); s != "" {
						if s == "localhost" {
							s = "127.0.0.1"
						}
						c.Seeds = append(c.Seeds, s)
					}
				}
			}
		}
		return "", nil
	}},
	"rpc_address":       {apply: sameAddress("rpc_address", "CQL is served on listen_address")},
	"broadcast_address": {apply: sameAddress("broadcast_address", "peers reach the node on listen_address")},
	"endpoint_snitch": {apply: func(v *yaml.Node, c *Config) (string, error) {
		switch s := v.Value; s[strings.LastIndexByte(s, '.')+1:] {
		case "SimpleSnitch", "GossipingPropertyFileSnitch":
			return "", nil // the node's place is dc and rack
		}
		return "only SimpleSnitch and GossipingPropertyFileSnitch, with dc and rack", nil
	}},
	"partitioner": {apply: func(v *yaml.Node, c *Config) (string, error) {
		if strings.HasSuffix(v.Value, "Murmur3Partitioner") {
			return "", nil
		}
		return "", fmt.Errorf("%q: idemkv has only Murmur3Partitioner", v.Value)
	}},
	"hinted_handoff_enabled": {apply: func(v *yaml.Node, c *Config) (string, error) {
		var on bool
		if err := v.Decode(&on); err != nil {
			return "", err
		}
		if on {
			return "", nil
		}
		return "hints cannot be turned off", nil
	}},
	"commitlog_sync_period":           {own: "commitlog_sync_period_in_ms", apply: durationMS(func(c *Config) *int { return &c.CommitLogSyncPeriodMS })},
	"commitlog_sync_group_window":     {own: "commitlog_sync_group_window_in_ms", apply: durationMS(func(c *Config) *int { return &c.CommitLogGroupWindowMS })},
	"read_request_timeout":            {own: "read_request_timeout_in_ms", apply: durationMS(func(c *Config) *int { return &c.ReadTimeoutMS })},
	"counter_write_request_timeout":   {own: "counter_write_request_timeout_in_ms", apply: durationMS(func(c *Config) *int { return &c.CounterWriteTimeoutMS })},
	"commitlog_segment_size":          {own: "commitlog_segment_size_in_mb", apply: sizeMiB(func(c *Config) *int { return &c.CommitLogSegmentSizeMB })},
	"native_transport_max_frame_size": {own: "native_transport_max_frame_size_in_mb", apply: sizeMiB(func(c *Config) *int { return &c.NativeTransportMaxFrameMB })},
	"native_transport_max_auth_message_size": {own: "native_transport_max_auth_message_size_in_kb",
		apply: sizeIn(1<<10, "KiB", func(c *Config, n int64) { c.NativeTransportMaxAuthMessageKB = int(min(n, 1<<30)) })},
	"native_transport_max_request_data_in_flight": {own: "native_transport_max_request_data_in_flight_in_mb",
		apply: sizeIn(1<<20, "MiB", func(c *Config, n int64) { c.NativeTransportMaxRequestDataInFlightMB = n })},
	"native_transport_max_request_data_in_flight_per_ip": {own: "native_transport_max_request_data_in_flight_per_ip_in_mb",
		apply: sizeIn(1<<20, "MiB", func(c *Config, n int64) { c.NativeTransportMaxRequestDataPerIPMB = n })},
	"native_transport_receive_queue_capacity": {own: "native_transport_receive_queue_capacity_in_bytes",
		apply: sizeIn(1, "bytes", func(c *Config, n int64) { c.NativeTransportReceiveQueueCapacityBytes = n })},
	"native_transport_idle_timeout": {own: "native_transport_idle_timeout_in_ms", apply: durationMSOrZero(func(c *Config) *int { return &c.NativeTransportIdleTimeoutMS })},
	"max_hint_window":               {own: "max_hint_window_in_ms", apply: durationMS(func(c *Config) *int { return &c.MaxHintWindowMS })},
	"commitlog_total_space": {own: "commitlog_total_space_in_mb",
		apply: sizeIn(1<<20, "MiB", func(c *Config, n int64) { c.CommitLogTotalSpaceMB = int(min(n, 1<<30)) })},
	"memtable_heap_space": {own: "memtable_heap_space_in_mb",
		apply: sizeIn(1<<20, "MiB", func(c *Config, n int64) { c.MemtableHeapSpaceMB = int(min(n, 1<<30)) })},
	"counter_cache_size": {own: "counter_cache_size_in_mb",
		apply: sizeIn(1<<20, "MiB", func(c *Config, n int64) { c.CounterCacheSizeMB = int(min(n, 1<<30)) })},
	"batch_size_warn_threshold": {own: "batch_size_warn_threshold_in_kb",
		apply: sizeIn(1<<10, "KiB", func(c *Config, n int64) { c.BatchSizeWarnThresholdKB = int(min(n, 1<<30)) })},
	"batch_size_fail_threshold": {own: "batch_size_fail_threshold_in_kb",
		apply: sizeIn(1<<10, "KiB", func(c *Config, n int64) { c.BatchSizeFailThresholdKB = int(min(n, 1<<30)) })},
}

// sameAddress honours an address key that idemkv has no separate setting
// for when it is blank or listen_address.
func sameAddress(key, why string) func(v *yaml.Node, c *Config) (string, error) {
	return func(v *yaml.Node, c *Config) (string, error) {
		a := v.Value
		if a == "localhost" {
			a = "127.0.0.1"
		}
		listen := c.ListenAddress
		if listen == "" || listen == "localhost" {
			listen = "127.0.0.1"
		}
		if a == "" || a == listen {
			return "", nil
		}
		return why, nil
	}
}

var quantity = regexp.MustCompile(`^\s*(\d+)\s*([a-zA-Zµ/]*)\s*$`)

// durationMS reads a Cassandra duration ("10000ms", "10s", "2m") into a
// field of milliseconds.
func durationMS(field func(c *Config) *int) func(v *yaml.Node, c *Config) (string, error) {
	return func(v *yaml.Node, c *Config) (string, error) {
		m := quantity.FindStringSubmatch(v.Value)
		if m == nil {
			return "", fmt.Errorf("%q is not a duration such as 10000ms or 10s", v.Value)
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return "", fmt.Errorf("%q: %w", v.Value, err)
		}
		unit := map[string]time.Duration{"": time.Millisecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour,
			"us": time.Microsecond, "µs": time.Microsecond, "ns": time.Nanosecond}
		u, ok := unit[strings.ToLower(m[2])]
		if !ok {
			return "", fmt.Errorf("%q: unknown unit %q (ms, s, m, h, d)", v.Value, m[2])
		}
		d := time.Duration(n) * u
		if d%time.Millisecond != 0 || d <= 0 {
			return "", fmt.Errorf("%q: want a positive whole number of milliseconds", v.Value)
		}
		*field(c) = int(d / time.Millisecond)
		return "", nil
	}
}

// durationMSOrZero is durationMS for settings where 0 turns the feature off.
func durationMSOrZero(field func(c *Config) *int) func(v *yaml.Node, c *Config) (string, error) {
	positive := durationMS(field)
	return func(v *yaml.Node, c *Config) (string, error) {
		if m := quantity.FindStringSubmatch(v.Value); m != nil && strings.Trim(m[1], "0") == "" {
			*field(c) = 0
			return "", nil
		}
		return positive(v, c)
	}
}

// sizeMiB reads a Cassandra data size ("32MiB", "1GiB") into a field of
// mebibytes.
func sizeMiB(field func(c *Config) *int) func(v *yaml.Node, c *Config) (string, error) {
	return sizeIn(1<<20, "MiB", func(c *Config, n int64) { *field(c) = int(n) })
}

// sizeIn reads a Cassandra data size ("32MiB", "1GiB", "128KiB"; a bare
// number is in MiB) and stores it as a positive whole number of unit bytes
// (named name in errors).
func sizeIn(unit int64, name string, set func(c *Config, n int64)) func(v *yaml.Node, c *Config) (string, error) {
	return func(v *yaml.Node, c *Config) (string, error) {
		m := quantity.FindStringSubmatch(v.Value)
		if m == nil {
			return "", fmt.Errorf("%q is not a size such as 32MiB", v.Value)
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return "", fmt.Errorf("%q: %w", v.Value, err)
		}
		units := map[string]int64{"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "": 1 << 20}
		u, ok := units[strings.ToLower(m[2])]
		if !ok {
			return "", fmt.Errorf("%q: unknown unit %q (B, KiB, MiB, GiB)", v.Value, m[2])
		}
		if n > (1<<62)/u {
			return "", fmt.Errorf("%q: too large", v.Value)
		}
		b := n * u
		if b%unit != 0 || b <= 0 {
			return "", fmt.Errorf("%q: want a positive whole number of %s", v.Value, name)
		}
		set(c, b/unit)
		return "", nil
	}
}

// writeConfig saves the configuration with its effective values, the
// defaults filled in and the settings left empty omitted, under a header
// that points at docs/config.md.
func writeConfig(c Config, path string) error {
	eff, err := c.withDefaults()
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := doc.Encode(eff); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	if doc.Kind == yaml.MappingNode {
		var kept []*yaml.Node
		for k := 0; k+1 < len(doc.Content); k += 2 {
			if !emptyValue(doc.Content[k+1]) {
				kept = append(kept, doc.Content[k], doc.Content[k+1])
			}
		}
		doc.Content = kept
	}
	doc.HeadComment = "idemkv node configuration, with the defaults filled in.\n" +
		"Keys as in cassandra.yaml where Cassandra has one; see docs/config.md\n" +
		"for every key, its default and its cassandra.yaml counterpart."
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	return nil
}

func emptyValue(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Tag == "!!null" || (n.Tag == "!!str" && n.Value == "") || ((n.Tag == "!!int" || n.Tag == "!!float") && (n.Value == "0" || n.Value == "0.0"))
	case yaml.MappingNode, yaml.SequenceNode:
		return len(n.Content) == 0
	}
	return false
}
