package emulab

import (
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

func TestPlanLocalStaysInsideItsNamespacesAndSubnet(t *testing.T) {
	for _, name := range Names {
		topo, _ := ByName(name)
		plan, err := PlanLocal(topo, "t1")
		if err != nil {
			t.Fatal(err)
		}
		prefix := NamespacePrefix + "t1-"
		for _, ns := range plan.Namespaces {
			if !strings.HasPrefix(ns, prefix) {
				t.Errorf("%s: namespace %s lacks the prefix %s", name, ns, prefix)
			}
		}
		if want := len(topo.Hosts) + countLANs(topo); len(plan.Namespaces) != want || len(plan.Order) != want {
			t.Errorf("%s: %d namespaces, want %d", name, len(plan.Namespaces), want)
		}
		var addrs, routes, shaped int
		for _, c := range plan.Setup {
			line := strings.Join(c, " ")
			switch c[0] {
			case "ip":
				// Every ip command names a namespace of this run: -n NS, or
				// netns add/exec NS.
				inside := (c[1] == "-n" && strings.HasPrefix(c[2], prefix)) ||
					(c[1] == "netns" && (c[2] == "add" || c[2] == "exec") && strings.HasPrefix(c[3], prefix))
				if !inside {
					t.Errorf("%s: %q runs outside the run's namespaces", name, line)
				}
			case "tc":
				if c[1] != "-n" || !strings.HasPrefix(c[2], prefix) {
					t.Errorf("%s: %q runs outside the run's namespaces", name, line)
				}
				if !strings.Contains(line, " root tbf rate 100mbit ") || strings.Contains(line, "netem") {
					t.Errorf("%s: %q is not a 100 Mbit tbf", name, line)
				}
				shaped++
			default:
				t.Errorf("%s: unexpected command %q", name, line)
			}
			if i := indexOf(c, "addr"); i > 0 && c[i+1] == "add" {
				p, err := netip.ParsePrefix(c[i+2])
				if err != nil || !TestSubnet.Contains(p.Addr()) {
					t.Errorf("%s: %q assigns an address outside %s", name, line, TestSubnet)
				}
				if !topo.Nets[0].LAN && p.Bits() != 30 {
					t.Errorf("%s: %q: a link address that is not a /30", name, line)
				}
				addrs++
			}
			if i := indexOf(c, "route"); i > 0 {
				dest, err1 := netip.ParsePrefix(c[i+2])
				via, err2 := netip.ParseAddr(c[i+4])
				if err1 != nil || err2 != nil || !TestSubnet.Contains(dest.Addr()) || !TestSubnet.Contains(via) || c[i+3] != "via" {
					t.Errorf("%s: %q routes outside %s", name, line, TestSubnet)
				}
				routes++
			}
		}
		ends, ports := 0, 0
		for _, n := range topo.Nets {
			ends += len(n.Members)
			if n.LAN {
				ports += len(n.Members)
			}
		}
		if addrs != ends {
			t.Errorf("%s: %d addresses assigned, %d interfaces", name, addrs, ends)
		}
		// Both ends of every link are shaped; on a LAN, the host's end and
		// the switch's port.
		if shaped != ends+ports {
			t.Errorf("%s: %d shaped interfaces, want %d", name, shaped, ends+ports)
		}
		if routes != len(topo.Routes) {
			t.Errorf("%s: %d routes, the model has %d", name, routes, len(topo.Routes))
		}
	}
}

func countLANs(t Topology) int {
	n := 0
	for _, net := range t.Nets {
		if net.LAN {
			n++
		}
	}
	return n
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestPlanLocalRejects(t *testing.T) {
	topo, _ := ByName("star4")
	for _, id := range []string{"", "UP", "a-b", "x y", "averyveryverylongrunid"} {
		if _, err := PlanLocal(topo, id); err == nil {
			t.Errorf("run id %q accepted", id)
		}
	}
	slow := topo
	slow.Nets = append([]Net(nil), topo.Nets...)
	slow.Nets[0].Delay = 5e6
	if _, err := PlanLocal(slow, "x"); err == nil || !strings.Contains(err.Error(), "delay") {
		t.Errorf("a delayed link: %v", err)
	}
}

func TestCheckPrivileges(t *testing.T) {
	found := func(string) (string, error) { return "/usr/sbin/x", nil }
	err := checkPrivileges(1000, found)
	if !errors.Is(err, ErrNotRoot) {
		t.Fatalf("not root: %v", err)
	}
	for _, want := range []string{"needs root", "sudo", "uid is 1000", "idemkv emulab ns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message %q does not say %q", err, want)
		}
	}
	if err := checkPrivileges(0, found); err != nil {
		t.Errorf("root with ip and tc: %v", err)
	}
	noTC := func(name string) (string, error) {
		if name == "tc" {
			return "", exec.ErrNotFound
		}
		return "/usr/sbin/ip", nil
	}
	if err := checkPrivileges(0, noTC); err == nil || !strings.Contains(err.Error(), "tc") || !strings.Contains(err.Error(), "iproute2") {
		t.Errorf("root without tc: %v", err)
	}
}

func TestPlanScriptQuotes(t *testing.T) {
	topo, _ := ByName("star4")
	plan, _ := PlanLocal(topo, "q")
	if !strings.Contains(plan.Script(), "sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward && ") {
		t.Errorf("script:\n%s", plan.Script())
	}
}
