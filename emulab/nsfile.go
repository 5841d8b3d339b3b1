package emulab

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// NSOptions are the testbed-side settings of the generated files.
type NSOptions struct {
	Project  string // Emulab project id; default "idemkv"
	OS       string // disk image of every host; default DefaultOS
	Hardware string // node type; default "d710", the paper's
	// Shared is the experiment's directory on the shared file system,
	// where the scripts are copied and results are written; default
	// /proj/<Project>/idemkv/<topology>.
	Shared string
	// Binary is the idemkv binary on the shared file system, built with
	// GOOS=linux GOARCH=amd64 CGO_ENABLED=0; default
	// /proj/<Project>/idemkv/bin/idemkv.
	Binary string
	// LocalDir is each host's local-disk directory for the binary, its
	// node.yaml, data and logs; default /var/tmp/idemkv.
	LocalDir string
	// Bench is the arguments of `idemkv bench` the client runs (the
	// servers' addresses are appended as --hosts); default
	// DefaultBench(topology).
	Bench string
}

// DefaultOS is the default disk image. The paper used Ubuntu 14.04
// (UBUNTU14-64-STD), which Emulab no longer offers on every node type.
const DefaultOS = "UBUNTU22-64-STD"

// DefaultBench is the experiment the client host runs by default: the
// over-count comparison on a ring (Fig. 14), the latency comparison with
// batches of 50 on a star (Fig. 15).
func DefaultBench(t Topology) string {
	if strings.HasPrefix(t.Name, "star") {
		return "latency --batch 50 --duration 60s --seed 1"
	}
	return "overcount --rf 3 --ops 2000 --lost-ack 0.05 --seed 1"
}

func (o NSOptions) withDefaults(t Topology) NSOptions {
	if o.Project == "" {
		o.Project = "idemkv"
	}
	if o.OS == "" {
		o.OS = DefaultOS
	}
	if o.Hardware == "" {
		o.Hardware = "d710"
	}
	if o.Shared == "" {
		o.Shared = "/proj/" + o.Project + "/idemkv/" + t.Name
	}
	if o.Binary == "" {
		o.Binary = "/proj/" + o.Project + "/idemkv/bin/idemkv"
	}
	if o.LocalDir == "" {
		o.LocalDir = "/var/tmp/idemkv"
	}
	if o.Bench == "" {
		o.Bench = DefaultBench(t)
	}
	return o
}

// safeWord matches the values written unquoted into Tcl and sh.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9_./:=,@%+-]+$`)

func (o NSOptions) validate() error {
	for _, f := range []struct{ name, v string }{
		{"project", o.Project}, {"os", o.OS}, {"hardware", o.Hardware},
		{"shared", o.Shared}, {"binary", o.Binary}, {"local-dir", o.LocalDir},
	} {
		if !safeWord.MatchString(f.v) {
			return fmt.Errorf("emulab: --%s %q: use only letters, digits and _ . / : = , @ %% + -", f.name, f.v)
		}
	}
	for _, p := range []string{o.Shared, o.Binary, o.LocalDir} {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("emulab: %q is not an absolute path", p)
		}
	}
	return nil
}

// File is one generated file.
type File struct {
	Name string // relative to the output directory
	Mode fs.FileMode
	Data []byte
}

// Generate writes the NS file of t (<name>.ns) and its start-up scripts:
// start-node.sh (run at boot on every server: copy the binary to local
// disk, write node.yaml, start `idemkv node` under nohup), stop-node.sh,
// run-client.sh (run at boot on the client: wait for the ring, run the
// benchmark, save its JSON under Shared/results) and a README.
func Generate(t Topology, o NSOptions) ([]File, error) {
	o = o.withDefaults(t)
	if err := o.validate(); err != nil {
		return nil, err
	}
	d := genData{T: t, O: o, Servers: t.Servers(), Client: t.ClientHost()}
	for _, s := range d.Servers {
		d.PeerList = append(d.PeerList, net.JoinHostPort(s.Addr.String(), strconv.Itoa(StoragePort)))
		d.HostList = append(d.HostList, s.Addr.String())
	}
	for _, s := range t.Seeds() {
		d.SeedList = append(d.SeedList, s.Addr.String())
	}
	for _, a := range strings.Fields(o.Bench) {
		d.BenchArgs = append(d.BenchArgs, shellQuote(a))
	}
	var files []File
	for _, f := range []struct {
		name string
		mode fs.FileMode
		tmpl *template.Template
	}{
		{t.Name + ".ns", 0o644, nsTmpl},
		{"start-node.sh", 0o755, startNodeTmpl},
		{"stop-node.sh", 0o755, stopNodeTmpl},
		{"run-client.sh", 0o755, runClientTmpl},
		{"README", 0o644, readmeTmpl},
	} {
		var b bytes.Buffer
		if err := f.tmpl.Execute(&b, d); err != nil {
			return nil, fmt.Errorf("emulab: %s: %w", f.name, err)
		}
		files = append(files, File{Name: f.name, Mode: f.mode, Data: b.Bytes()})
	}
	return files, nil
}

// WriteFiles writes files into dir, creating it.
func WriteFiles(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("emulab: %w", err)
	}
	var errs []error
	for _, f := range files {
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
			errs = append(errs, fmt.Errorf("emulab: %w", err))
			continue
		}
		if err := os.Chmod(p, f.Mode); err != nil { // WriteFile keeps an existing file's mode
			errs = append(errs, fmt.Errorf("emulab: %w", err))
		}
	}
	return errors.Join(errs...)
}

type genData struct {
	T         Topology
	O         NSOptions
	Servers   []Host
	Client    Host
	PeerList  []string // ip:storage_port of every server
	HostList  []string // ip of every server (CQL on the default port)
	SeedList  []string
	BenchArgs []string
}

func (d genData) Peers() string { return strings.Join(d.PeerList, ",") }
func (d genData) Hosts() string { return strings.Join(d.HostList, ",") }
func (d genData) Bench() string { return strings.Join(d.BenchArgs, " ") }

// shellQuote quotes s for sh unless it needs no quoting.
func shellQuote(s string) string {
	if safeWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var funcs = template.FuncMap{
	"bw": func(bps int64) string {
		if bps%(1000*Mbps) == 0 {
			return strconv.FormatInt(bps/(1000*Mbps), 10) + "Gb"
		}
		if bps%Mbps == 0 {
			return strconv.FormatInt(bps/Mbps, 10) + "Mb"
		}
		return strconv.FormatInt(bps/1000, 10) + "kb"
	},
	"ms": func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" },
	"netmask": func(n Net) string {
		return net.IP(net.CIDRMask(n.Prefix.Bits(), 32)).String()
	},
	"members": func(n Net) string {
		var s []string
		for _, m := range n.Members {
			s = append(s, "$"+m.Host)
		}
		return strings.Join(s, " ")
	},
}

var nsTmpl = template.Must(template.New("ns").Funcs(funcs).Parse(`# {{.T.Name}}: {{.T.Description}}.
# Generated by "idemkv emulab ns {{.T.Name}}". Before creating the experiment,
# copy start-node.sh, stop-node.sh and run-client.sh to {{.O.Shared}}/ and the
# idemkv binary (GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build ./cmd/idemkv)
# to {{.O.Binary}}; see README.
set ns [new Simulator]
source tb_compat.tcl

# Hosts: {{len .Servers}} servers running "idemkv node", and the client.
{{- range .T.Hosts}}
set {{.Name}} [$ns node]
tb-set-hardware ${{.Name}} {{$.O.Hardware}}
tb-set-node-os ${{.Name}} {{$.O.OS}}
{{- if eq .Role 1}}
tb-set-node-startcmd ${{.Name}} "{{$.O.Shared}}/run-client.sh"
{{- else}}
tb-set-node-startcmd ${{.Name}} "{{$.O.Shared}}/start-node.sh {{.Name}}"
{{- end}}
{{- end}}
{{range .T.Nets}}
{{- if .LAN}}
set {{.Name}} [$ns make-lan "{{members .}}" {{bw .Bandwidth}} {{ms .Delay}}]
{{- $n := .}}{{range .Members}}
tb-set-ip-lan ${{.Host}} ${{$n.Name}} {{.Addr}}
{{- end}}
{{- else}}
set {{.Name}} [$ns duplex-link {{members .}} {{bw .Bandwidth}} {{ms .Delay}} DropTail]
{{- $n := .}}{{range .Members}}
tb-set-ip-link ${{.Host}} ${{$n.Name}} {{.Addr}}
{{- end}}
{{- end}}
tb-set-netmask ${{.Name}} "{{netmask .}}"
{{end}}
{{- if .T.Routes}}
# Static routes along the shortest paths ("$host add-route $net $nexthop").
$ns rtproto Manual
{{- range .T.Routes}}
${{.Host}} add-route ${{.Net}} ${{.Via}}
{{- end}}
{{- else}}
# One LAN: every host reaches every other directly, no routes needed.
{{- end}}

$ns run
`))

var startNodeTmpl = template.Must(template.New("start-node").Parse(`#!/bin/sh
# Start "idemkv node" on one server of {{.T.Name}}. Generated by
# "idemkv emulab ns {{.T.Name}}"; Emulab runs it at boot (tb-set-node-startcmd):
#   {{.O.Shared}}/start-node.sh HOST
# It copies the binary to local disk, writes HOST's node.yaml and starts the
# node under nohup. Everything, logs included, is under {{.O.LocalDir}}.
set -eu
HOST=${1:?usage: start-node.sh HOST}
BINARY={{.O.Binary}}
LOCAL={{.O.LocalDir}}

case "$HOST" in
{{- range .Servers}}
{{.Name}}) ADDR={{.Addr}} ;;
{{- end}}
*) echo "start-node.sh: $HOST is not a server of {{.T.Name}}" >&2; exit 2 ;;
esac

mkdir -p "$LOCAL/data"
exec >>"$LOCAL/start.log" 2>&1
echo "$(date): starting idemkv node on $HOST ($ADDR)"
if [ -f "$LOCAL/node.pid" ] && kill -0 "$(cat "$LOCAL/node.pid")" 2>/dev/null; then
	echo "already running, pid $(cat "$LOCAL/node.pid")"
	exit 0
fi
cp "$BINARY" "$LOCAL/idemkv.new"
chmod 755 "$LOCAL/idemkv.new"
mv -f "$LOCAL/idemkv.new" "$LOCAL/idemkv"

cat >"$LOCAL/node.yaml" <<EOF
cluster_name: idemkv-{{.T.Name}}
listen_address: $ADDR
storage_port: {{.StoragePort}}
native_transport_port: {{.CQLPort}}
seeds:
{{- range .SeedList}}
  - "{{.}}"
{{- end}}
data_directory: $LOCAL/data
EOF

nohup "$LOCAL/idemkv" node --config "$LOCAL/node.yaml" >>"$LOCAL/node.log" 2>&1 </dev/null &
echo $! >"$LOCAL/node.pid"
echo "started idemkv node, pid $!, peer $ADDR:{{.StoragePort}}, CQL $ADDR:{{.CQLPort}}"
`))

var stopNodeTmpl = template.Must(template.New("stop-node").Parse(`#!/bin/sh
# Stop the "idemkv node" that start-node.sh started on this host (SIGTERM:
# a clean shutdown, announced to its peers). Generated by
# "idemkv emulab ns {{.T.Name}}". Its data stays in {{.O.LocalDir}}/data.
set -eu
LOCAL={{.O.LocalDir}}
if [ ! -f "$LOCAL/node.pid" ]; then
	echo "stop-node.sh: no $LOCAL/node.pid" >&2
	exit 1
fi
PID=$(cat "$LOCAL/node.pid")
kill "$PID" 2>/dev/null || true
i=0
while kill -0 "$PID" 2>/dev/null && [ $i -lt 10 ]; do
	sleep 1
	i=$((i + 1))
done
if kill -0 "$PID" 2>/dev/null; then
	kill -9 "$PID"
fi
rm -f "$LOCAL/node.pid"
echo "stopped pid $PID"
`))

var runClientTmpl = template.Must(template.New("run-client").Parse(`#!/bin/sh
# Run the experiment from the client host of {{.T.Name}}. Generated by
# "idemkv emulab ns {{.T.Name}}"; Emulab runs it at boot on {{.Client.Name}}.
# It waits until every server sees all {{len .Servers}} nodes up, runs
#   idemkv bench {{.Bench}} --hosts ... --format json
# and saves the JSON in {{.O.Shared}}/results/. Run it again by hand to
# repeat the experiment.
set -eu
BINARY={{.O.Binary}}
LOCAL={{.O.LocalDir}}
RESULTS={{.O.Shared}}/results
PEERS={{.Peers}}
HOSTS={{.Hosts}}

mkdir -p "$LOCAL" "$RESULTS"
exec 3>&1 >>"$LOCAL/client.log" 2>&1
cp "$BINARY" "$LOCAL/idemkv.new"
chmod 755 "$LOCAL/idemkv.new"
mv -f "$LOCAL/idemkv.new" "$LOCAL/idemkv"

echo "$(date): waiting for the ring of {{len .Servers}} nodes"
"$LOCAL/idemkv" emulab wait --peers "$PEERS" --timeout 20m

OUT="$RESULTS/{{.T.Name}}-$(date +%Y%m%dT%H%M%S).json"
echo "$(date): idemkv bench {{.Bench}} --hosts $HOSTS --format json"
"$LOCAL/idemkv" bench {{.Bench}} --hosts "$HOSTS" --format json >"$OUT"
echo "$(date): results in $OUT"
echo "$OUT" >&3
`))

var readmeTmpl = template.Must(template.New("readme").Parse(`{{.T.Name}} on Emulab
{{.T.Description}}.

Files (generated by "idemkv emulab ns {{.T.Name}}"):
  {{printf "%-15s" (print .T.Name ".ns")}} the experiment's NS file: {{len .T.Hosts}} {{.O.Hardware}} hosts on {{.O.OS}},
                  {{len .T.Nets}} network(s), {{len .T.Routes}} static routes
  start-node.sh   run at boot on each server: installs the binary in {{.O.LocalDir}},
                  writes node.yaml (listen_address = the host's experiment IP) and
                  starts "idemkv node" under nohup (logs: {{.O.LocalDir}}/node.log)
  stop-node.sh    stops that node
  run-client.sh   run at boot on {{.Client.Name}}: waits for the ring, runs
                  "idemkv bench {{.Bench}}" against it and saves
                  the JSON in {{.O.Shared}}/results/

Steps:
  1. On your machine:
       GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o idemkv ./cmd/idemkv
     then copy it to {{.O.Binary}}, and start-node.sh, stop-node.sh and
     run-client.sh to {{.O.Shared}}/ (both on Emulab's ops host).
  2. Create an experiment in project {{.O.Project}} from {{.T.Name}}.ns and swap it in.
  3. Follow {{.O.LocalDir}}/client.log on {{.Client.Name}}; results appear in
     {{.O.Shared}}/results/. Rerun {{.O.Shared}}/run-client.sh on {{.Client.Name}}
     to repeat the experiment.

Addresses (all in {{.TestSubnet}}):
{{- range .T.Hosts}}
  {{printf "%-8s" .Name}} {{.Addr}}{{if eq .Role 0}}  (peer :{{$.StoragePort}}, CQL :{{$.CQLPort}}){{end}}
{{- end}}

The same topology runs on one Linux machine (as root) with
  idemkv emulab local {{.T.Name}} --bench "{{.Bench}}"
`))

// StoragePort is the servers' peer port, for the templates.
func (genData) StoragePort() int { return StoragePort }

// CQLPort is the servers' CQL port, for the templates.
func (genData) CQLPort() int { return CQLPort }

// TestSubnet is the model's address range, for the templates.
func (genData) TestSubnet() string { return TestSubnet.String() }
