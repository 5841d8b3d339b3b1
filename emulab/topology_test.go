package emulab

import (
	"net/netip"
	"strconv"
	"testing"
)

// ringDistance is the number of hops between servers i and j (1-based) of
// an n-ring, computed independently of the model's routes.
func ringDistance(n, i, j int) int {
	d := (i - j + n) % n
	return min(d, n-d)
}

func TestRingAddressPlan(t *testing.T) {
	for n := 3; n <= 12; n++ {
		topo, err := Ring(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(topo.Nets) != n+1 || len(topo.Hosts) != n+1 {
			t.Fatalf("ring%d: %d nets, %d hosts", n, len(topo.Nets), len(topo.Hosts))
		}
		for _, net := range topo.Nets {
			if net.LAN || net.Prefix.Bits() != 30 || len(net.Members) != 2 {
				t.Errorf("ring%d: %s is not a /30 point-to-point link: %+v", n, net.Name, net)
			}
			if net.Bandwidth != 100*Mbps || net.Delay != 0 {
				t.Errorf("ring%d: %s: %d b/s, %v", n, net.Name, net.Bandwidth, net.Delay)
			}
			for _, m := range net.Members {
				if !TestSubnet.Contains(m.Addr) || !net.Prefix.Contains(m.Addr) {
					t.Errorf("ring%d: %s: %s outside %s or %s", n, net.Name, m.Addr, net.Prefix, TestSubnet)
				}
			}
		}
		for k := 1; k <= n; k++ {
			net := topo.Nets[k-1]
			if net.Members[0].Host != "n"+strconv.Itoa(k) || net.Members[1].Host != "n"+strconv.Itoa(k%n+1) {
				t.Errorf("ring%d: link%d joins %s and %s", n, k, net.Members[0].Host, net.Members[1].Host)
			}
		}
		for _, r := range topo.Routes {
			if !TestSubnet.Contains(r.Gateway) || !TestSubnet.Contains(r.Dest.Addr()) {
				t.Errorf("ring%d: route outside the test subnet: %+v", n, r)
			}
		}
		checkShortestPaths(t, topo, func(a, b Host) int {
			ai, bi := serverIndex(a), serverIndex(b)
			extra := 0
			if ai == 0 { // the client hangs off n1
				ai, extra = 1, 1
			}
			if bi == 0 {
				bi, extra = 1, extra+1
			}
			if a.Name == b.Name {
				return 0
			}
			return ringDistance(n, ai, bi) + extra
		})
	}
}

func serverIndex(h Host) int {
	if h.Role == Client {
		return 0
	}
	i, _ := strconv.Atoi(h.Name[1:])
	return i
}

// checkShortestPaths follows the routes from every host to every other
// host's listen address and checks the hop count, and that every address of
// every interface is reachable from every host.
func checkShortestPaths(t *testing.T, topo Topology, want func(a, b Host) int) {
	t.Helper()
	for _, a := range topo.Hosts {
		for _, b := range topo.Hosts {
			path, err := topo.Path(a.Name, b.Addr)
			if err != nil {
				t.Errorf("%s: %s → %s (%s): %v", topo.Name, a.Name, b.Name, b.Addr, err)
				continue
			}
			if path[len(path)-1] != b.Name {
				t.Errorf("%s: %s → %s ends at %v", topo.Name, a.Name, b.Name, path)
			}
			if hops, w := len(path)-1, want(a, b); hops != w {
				t.Errorf("%s: %s → %s: %d hops %v, want %d", topo.Name, a.Name, b.Name, hops, path, w)
			}
		}
		for _, net := range topo.Nets {
			for _, m := range net.Members {
				path, err := topo.Path(a.Name, m.Addr)
				if err != nil || path[len(path)-1] != m.Host {
					t.Errorf("%s: %s → %s's %s: %v %v", topo.Name, a.Name, m.Host, m.Addr, path, err)
				}
			}
		}
	}
}

func TestRing10(t *testing.T) {
	topo, err := ByName("ring10")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(topo.Servers()); got != 10 {
		t.Fatalf("%d servers", got)
	}
	want := map[string]string{"n1": "10.201.0.1", "n2": "10.201.0.5", "n10": "10.201.0.37", "client": "10.201.0.42"}
	for name, addr := range want {
		if h, _ := topo.Host(name); h.Addr != netip.MustParseAddr(addr) {
			t.Errorf("%s has %s, want %s", name, h.Addr, addr)
		}
	}
	// Every server routes each of the 11 nets it is not on (10 - 2 ring
	// links + the client link, except n1 which is on the client link).
	count := map[string]int{}
	for _, r := range topo.Routes {
		count[r.Host]++
	}
	for _, h := range topo.Hosts {
		w := 9
		switch h.Name {
		case "n1":
			w = 8
		case "client":
			w = 10
		}
		if count[h.Name] != w {
			t.Errorf("%s has %d routes, want %d", h.Name, count[h.Name], w)
		}
	}
}

func TestStarAddressPlan(t *testing.T) {
	for n := 1; n <= 12; n++ {
		topo, err := Star(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(topo.Nets) != 1 || !topo.Nets[0].LAN || len(topo.Nets[0].Members) != n+1 {
			t.Fatalf("star%d: %+v", n, topo.Nets)
		}
		lan := topo.Nets[0]
		if size := 1 << (32 - lan.Prefix.Bits()); size < n+3 || size/2 >= n+3 {
			t.Errorf("star%d: %s is not the smallest prefix for %d hosts", n, lan.Prefix, n+1)
		}
		if len(topo.Routes) != 0 {
			t.Errorf("star%d: routes on a single LAN: %+v", n, topo.Routes)
		}
		checkShortestPaths(t, topo, func(a, b Host) int {
			if a.Name == b.Name {
				return 0
			}
			return 1
		})
	}
	topo, _ := ByName("star4")
	if topo.Nets[0].Prefix != netip.MustParsePrefix("10.201.1.0/29") || topo.ClientHost().Addr != netip.MustParseAddr("10.201.1.5") {
		t.Errorf("star4: %s, client %s", topo.Nets[0].Prefix, topo.ClientHost().Addr)
	}
}

func TestByNameRejects(t *testing.T) {
	for _, name := range []string{"", "ring", "ring2", "ring61", "star0", "mesh4", "ringx"} {
		if _, err := ByName(name); err == nil {
			t.Errorf("ByName(%q) succeeded", name)
		}
	}
}

func TestValidateCatchesBadPlans(t *testing.T) {
	topo, _ := Ring(4)
	bad := topo
	bad.Nets = append([]Net(nil), topo.Nets...)
	bad.Nets[1].Prefix = netip.MustParsePrefix("192.168.0.0/30")
	if err := bad.Validate(); err == nil {
		t.Error("a net outside the test subnet passed")
	}
	bad.Nets = append([]Net(nil), topo.Nets...)
	bad.Nets[1].Members = []Attachment{{"n2", topo.Nets[1].Prefix.Addr()}, topo.Nets[1].Members[1]}
	if err := bad.Validate(); err == nil {
		t.Error("a network address used as a host address passed")
	}
}
