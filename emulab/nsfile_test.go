package emulab

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/node"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenOptions are fixed so the golden files do not depend on defaults
// that may change for other reasons.
var goldenOptions = NSOptions{Project: "idemkv", OS: "UBUNTU22-64-STD", Hardware: "d710"}

func generate(t *testing.T, name string) (Topology, []File) {
	t.Helper()
	topo, err := ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(topo, goldenOptions)
	if err != nil {
		t.Fatal(err)
	}
	return topo, files
}

func TestGolden(t *testing.T) {
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			_, files := generate(t, name)
			dir := filepath.Join("testdata", name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := WriteFiles(dir, files); err != nil {
					t.Fatal(err)
				}
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatalf("%v (run go test ./emulab -run TestGolden -update)", err)
			}
			if len(ents) != len(files) {
				t.Errorf("%s holds %d files, the generator writes %d", dir, len(ents), len(files))
			}
			for _, f := range files {
				want, err := os.ReadFile(filepath.Join(dir, f.Name))
				if err != nil {
					t.Errorf("%v (run go test ./emulab -run TestGolden -update)", err)
					continue
				}
				if !bytes.Equal(f.Data, want) {
					t.Errorf("%s/%s differs from the golden file (run with -update after checking the diff):\n%s", name, f.Name, firstDiff(string(want), string(f.Data)))
				}
			}
		})
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want " + wl + "\n  got  " + gl
		}
	}
	return ""
}

// TestNSFileMatchesModel parses the generated NS file back — hosts, links,
// LANs, addresses, netmasks and routes — and compares it with the model.
func TestNSFileMatchesModel(t *testing.T) {
	for _, name := range Names {
		topo, files := generate(t, name)
		ns := string(files[0].Data)
		if files[0].Name != name+".ns" {
			t.Fatalf("first file is %s", files[0].Name)
		}
		for _, want := range []string{"set ns [new Simulator]\n", "source tb_compat.tcl\n", "$ns run\n"} {
			if !strings.Contains(ns, want) {
				t.Errorf("%s.ns lacks %q", name, want)
			}
		}
		nodes := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^set (\w+) \[\$ns node\]$`).FindAllStringSubmatch(ns, -1) {
			nodes[m[1]] = true
		}
		hw := regexp.MustCompile(`(?m)^tb-set-hardware \$(\w+) d710$`).FindAllStringSubmatch(ns, -1)
		start := regexp.MustCompile(`(?m)^tb-set-node-startcmd \$(\w+) "(\S+)( \w+)?"$`).FindAllStringSubmatch(ns, -1)
		if len(nodes) != len(topo.Hosts) || len(hw) != len(topo.Hosts) || len(start) != len(topo.Hosts) {
			t.Errorf("%s: %d nodes, %d d710, %d start commands; want %d each", name, len(nodes), len(hw), len(start), len(topo.Hosts))
		}
		for _, m := range start {
			h, _ := topo.Host(m[1])
			script := "start-node.sh"
			if h.Role == Client {
				script = "run-client.sh"
			}
			if !strings.HasSuffix(m[2], "/"+script) || (h.Role == Server && m[3] != " "+h.Name) {
				t.Errorf("%s: %s starts %q", name, m[1], m[0])
			}
		}

		type netSeen struct {
			members []string
			bw, lan string
			addrs   map[string]string
			mask    string
		}
		seen := map[string]*netSeen{}
		for _, m := range regexp.MustCompile(`(?m)^set (\w+) \[\$ns duplex-link \$(\w+) \$(\w+) (\S+) 0ms DropTail\]$`).FindAllStringSubmatch(ns, -1) {
			seen[m[1]] = &netSeen{members: []string{m[2], m[3]}, bw: m[4], addrs: map[string]string{}}
		}
		for _, m := range regexp.MustCompile(`(?m)^set (\w+) \[\$ns make-lan "([^"]+)" (\S+) 0ms\]$`).FindAllStringSubmatch(ns, -1) {
			var members []string
			for _, f := range strings.Fields(m[2]) {
				members = append(members, strings.TrimPrefix(f, "$"))
			}
			seen[m[1]] = &netSeen{members: members, bw: m[3], lan: "lan", addrs: map[string]string{}}
		}
		for _, m := range regexp.MustCompile(`(?m)^tb-set-ip-(?:link|lan) \$(\w+) \$(\w+) (\S+)$`).FindAllStringSubmatch(ns, -1) {
			if s := seen[m[2]]; s != nil {
				s.addrs[m[1]] = m[3]
			} else {
				t.Errorf("%s: address on unknown net: %s", name, m[0])
			}
		}
		for _, m := range regexp.MustCompile(`(?m)^tb-set-netmask \$(\w+) "(\S+)"$`).FindAllStringSubmatch(ns, -1) {
			if s := seen[m[1]]; s != nil {
				s.mask = m[2]
			}
		}
		if len(seen) != len(topo.Nets) {
			t.Errorf("%s: the NS file has %d nets, the model %d", name, len(seen), len(topo.Nets))
		}
		for _, n := range topo.Nets {
			s := seen[n.Name]
			if s == nil {
				t.Errorf("%s: net %s missing from the NS file", name, n.Name)
				continue
			}
			if s.bw != "100Mb" || (s.lan == "lan") != n.LAN || len(s.members) != len(n.Members) {
				t.Errorf("%s: net %s: %+v", name, n.Name, s)
			}
			for i, m := range n.Members {
				if i < len(s.members) && s.members[i] != m.Host {
					t.Errorf("%s: net %s member %d is %s, want %s", name, n.Name, i, s.members[i], m.Host)
				}
				if s.addrs[m.Host] != m.Addr.String() {
					t.Errorf("%s: %s on %s has %q, want %s", name, m.Host, n.Name, s.addrs[m.Host], m.Addr)
				}
			}
			mask, err := netip.ParseAddr(s.mask)
			if err != nil {
				t.Errorf("%s: net %s netmask %q", name, n.Name, s.mask)
				continue
			}
			ones := 0
			for _, b := range mask.As4() {
				for ; b != 0; b <<= 1 {
					ones++
				}
			}
			if ones != n.Prefix.Bits() {
				t.Errorf("%s: net %s netmask %s, prefix %s", name, n.Name, s.mask, n.Prefix)
			}
		}

		routes := regexp.MustCompile(`(?m)^\$(\w+) add-route \$(\w+) \$(\w+)$`).FindAllStringSubmatch(ns, -1)
		if len(routes) != len(topo.Routes) {
			t.Errorf("%s: the NS file has %d routes, the model %d", name, len(routes), len(topo.Routes))
		}
		if len(routes) > 0 && !strings.Contains(ns, "\n$ns rtproto Manual\n") {
			t.Errorf("%s: routes without rtproto Manual", name)
		}
		for i, r := range topo.Routes {
			if i < len(routes) && (routes[i][1] != r.Host || routes[i][2] != r.Net || routes[i][3] != r.Via) {
				t.Errorf("%s: route %d is %q, the model's is %+v", name, i, routes[i][0], r)
			}
		}
	}
}

// TestStartScriptConfigParses substitutes each server's address into the
// node.yaml that start-node.sh writes and loads it as the node would.
func TestStartScriptConfigParses(t *testing.T) {
	for _, name := range Names {
		topo, files := generate(t, name)
		script := string(files[1].Data)
		if files[1].Name != "start-node.sh" {
			t.Fatalf("second file is %s", files[1].Name)
		}
		_, rest, ok := strings.Cut(script, "<<EOF\n")
		body, _, ok2 := strings.Cut(rest, "\nEOF\n")
		if !ok || !ok2 {
			t.Fatalf("%s: no here-document in start-node.sh", name)
		}
		for _, s := range topo.Servers() {
			if !strings.Contains(script, "\n"+s.Name+") ADDR="+s.Addr.String()+" ;;\n") {
				t.Errorf("%s: start-node.sh has no address line for %s", name, s.Name)
			}
			y := strings.NewReplacer("$ADDR", s.Addr.String(), "$LOCAL", "/var/tmp/idemkv").Replace(body)
			p := filepath.Join(t.TempDir(), "node.yaml")
			if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := node.LoadConfig(p)
			if err != nil {
				t.Fatalf("%s: %s's node.yaml: %v\n%s", name, s.Name, err, y)
			}
			if c.ListenAddress != s.Addr.String() || c.StoragePort != StoragePort || c.NativeTransportPort != CQLPort ||
				c.DataDirectory != "/var/tmp/idemkv/data" || len(c.Seeds) != len(topo.Seeds()) || c.Seeds[0] != topo.Seeds()[0].Addr.String() {
				t.Errorf("%s: %s's node.yaml: %+v", name, s.Name, c)
			}
		}
	}
}

func TestGenerateRejectsUnsafePaths(t *testing.T) {
	topo, _ := ByName("star4")
	for _, o := range []NSOptions{
		{Project: "my project"},
		{Binary: "relative/idemkv"},
		{Shared: "/proj/x/$(rm -rf ~)"},
		{OS: `UBUNTU"22`},
	} {
		if _, err := Generate(topo, o); err == nil {
			t.Errorf("Generate accepted %+v", o)
		}
	}
}

func TestBenchArgumentsAreQuoted(t *testing.T) {
	topo, _ := ByName("star4")
	files, err := Generate(topo, NSOptions{Bench: "latency --label it's"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(files[3].Data), `bench latency --label 'it'\''s' --hosts "$HOSTS"`) {
		t.Errorf("run-client.sh:\n%s", files[3].Data)
	}
}
