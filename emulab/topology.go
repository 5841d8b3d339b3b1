// Package emulab describes the paper's Emulab topologies — a ring of ten
// d710 nodes joined by 100 Mb links with static routes (Fig. 14) and a star
// of four nodes plus a client (Fig. 15) — as a model of hosts, networks and
// routes; writes the Emulab NS file and start-up scripts that reproduce them
// on the real testbed; and emulates them on one Linux machine with a network
// namespace per host, veth links shaped by tc's token bucket filter, and one
// `idemkv node` process per server namespace.
//
// Every address of the model comes from TestSubnet; the local emulation
// assigns them only inside the namespaces it creates.
package emulab

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// TestSubnet is the private range every address of the model comes from.
var TestSubnet = netip.MustParsePrefix("10.201.0.0/16")

// Ports every server listens on (node.Config's storage_port and
// native_transport_port).
const (
	StoragePort = 7000
	CQLPort     = 9042
)

// Mbps is one megabit per second, the unit of Net.Bandwidth.
const Mbps int64 = 1_000_000

// Role tells servers (which run `idemkv node`) from the client host (which
// runs the experiment).
type Role int

// The roles of a host.
const (
	Server Role = iota
	Client
)

func (r Role) String() string {
	if r == Client {
		return "client"
	}
	return "server"
}

// Host is one machine of the topology.
type Host struct {
	Name string
	Role Role
	// Addr is the host's own address (for server k of a ring, its address
	// on link k): a server's listen_address, and the address the other
	// hosts know it by.
	Addr netip.Addr
}

// Attachment is one host's interface on a network.
type Attachment struct {
	Host string
	Addr netip.Addr
}

// Net is a point-to-point link (two members) or a LAN (a switch joining
// all its members).
type Net struct {
	Name      string
	LAN       bool
	Members   []Attachment
	Prefix    netip.Prefix
	Bandwidth int64 // bits per second
	Delay     time.Duration
}

// AddrOf returns host's address on n.
func (n Net) AddrOf(host string) (netip.Addr, bool) {
	for _, m := range n.Members {
		if m.Host == host {
			return m.Addr, true
		}
	}
	return netip.Addr{}, false
}

// Route is a static route: on Host, packets for the network Net (prefix
// Dest) go to the neighbour Via, at its address Gateway on a network both
// share.
type Route struct {
	Host    string
	Net     string
	Dest    netip.Prefix
	Via     string
	Gateway netip.Addr
}

// Topology is a set of hosts, the networks joining them, and the static
// routes that make every address reachable from every host.
type Topology struct {
	Name        string
	Description string
	Hosts       []Host
	Nets        []Net
	Routes      []Route
}

// Names lists the topologies ByName knows with their default sizes.
var Names = []string{"ring10", "star4"}

// ByName returns a topology: "ring10" and "star4" are the paper's; "ringN"
// (3 ≤ N ≤ 60) and "starN" (1 ≤ N ≤ 60) are the same shapes at other sizes.
func ByName(name string) (Topology, error) {
	for _, p := range []struct {
		prefix string
		build  func(int) (Topology, error)
	}{{"ring", Ring}, {"star", Star}} {
		if rest, ok := strings.CutPrefix(name, p.prefix); ok {
			n, err := strconv.Atoi(rest)
			if err != nil {
				break
			}
			return p.build(n)
		}
	}
	return Topology{}, fmt.Errorf("emulab: unknown topology %q (want %s, or ringN / starN)", name, strings.Join(Names, " or "))
}

// serverName is the name of server i (1-based), as localring numbers nodes.
func serverName(i int) string { return "n" + strconv.Itoa(i) }

// Ring is n servers n1..nN in a ring, each joined to the next by a 100 Mb
// point-to-point link (link k joins nk and nk+1, and linkN closes the ring),
// plus a client joined to n1 by a 100 Mb link of its own, with static routes
// along the ring's shortest paths. Link k is 10.201.0.(4k-4)/30: nk is .1 of
// it (its listen address) and nk+1 is .2; the client link comes last.
func Ring(n int) (Topology, error) {
	if n < 3 || n > 60 {
		return Topology{}, fmt.Errorf("emulab: a ring of %d nodes: want 3..60", n)
	}
	t := Topology{
		Name: "ring" + strconv.Itoa(n),
		Description: fmt.Sprintf("%d servers in a ring of 100 Mb links with static shortest-path routes, "+
			"and a client on a 100 Mb link to n1 (the paper's Fig. 14 cluster)", n),
	}
	slash30 := func(k int) netip.Prefix { // the k-th /30 of TestSubnet, from 0
		a := TestSubnet.Addr().As4()
		a[2] += byte(k / 64)
		a[3] = byte(4 * (k % 64))
		return netip.PrefixFrom(netip.AddrFrom4(a), 30)
	}
	for k := 1; k <= n; k++ {
		p := slash30(k - 1)
		t.Nets = append(t.Nets, Net{
			Name:      "link" + strconv.Itoa(k),
			Members:   []Attachment{{serverName(k), p.Addr().Next()}, {serverName(k%n + 1), p.Addr().Next().Next()}},
			Prefix:    p,
			Bandwidth: 100 * Mbps,
		})
	}
	p := slash30(n)
	t.Nets = append(t.Nets, Net{
		Name:      "linkc",
		Members:   []Attachment{{serverName(1), p.Addr().Next()}, {"client", p.Addr().Next().Next()}},
		Prefix:    p,
		Bandwidth: 100 * Mbps,
	})
	for i := 1; i <= n; i++ {
		t.Hosts = append(t.Hosts, Host{Name: serverName(i), Role: Server})
	}
	t.Hosts = append(t.Hosts, Host{Name: "client", Role: Client})
	return t.finish()
}

// Star is n servers n1..nN and a client on one 100 Mb LAN (an Emulab
// make-lan: each host on its own 100 Mb port of a switch), the paper's Fig. 15
// setting for n = 4. The LAN is 10.201.1.0 with the smallest prefix that
// holds every host; servers get .1 to .N and the client .N+1.
func Star(n int) (Topology, error) {
	if n < 1 || n > 60 {
		return Topology{}, fmt.Errorf("emulab: a star of %d nodes: want 1..60", n)
	}
	t := Topology{
		Name: "star" + strconv.Itoa(n),
		Description: fmt.Sprintf("%d servers and a client on one 100 Mb switched LAN "+
			"(the paper's Fig. 15 star)", n),
	}
	hostBits := bits.Len(uint(n + 2)) // n+1 hosts plus the network and broadcast addresses
	a := TestSubnet.Addr().As4()
	a[2] = 1
	lan := Net{Name: "lan0", LAN: true, Prefix: netip.PrefixFrom(netip.AddrFrom4(a), 32-hostBits), Bandwidth: 100 * Mbps}
	addr := lan.Prefix.Addr()
	for i := 1; i <= n+1; i++ {
		addr = addr.Next()
		name := "client"
		if i <= n {
			name = serverName(i)
			t.Hosts = append(t.Hosts, Host{Name: name, Role: Server})
		}
		lan.Members = append(lan.Members, Attachment{name, addr})
	}
	t.Hosts = append(t.Hosts, Host{Name: "client", Role: Client})
	t.Nets = []Net{lan}
	return t.finish()
}

// finish sets each host's address (its address on the first network that
// lists it first — link k for server k of a ring — else on the first
// network it is on), checks the address plan and computes the routes.
func (t Topology) finish() (Topology, error) {
	for i := range t.Hosts {
		for _, n := range t.Nets {
			if len(n.Members) > 0 && n.Members[0].Host == t.Hosts[i].Name {
				t.Hosts[i].Addr = n.Members[0].Addr
				break
			}
		}
		if t.Hosts[i].Addr.IsValid() {
			continue
		}
		for _, n := range t.Nets {
			if a, ok := n.AddrOf(t.Hosts[i].Name); ok {
				t.Hosts[i].Addr = a
				break
			}
		}
	}
	if err := t.Validate(); err != nil {
		return Topology{}, err
	}
	t.Routes = t.computeRoutes()
	return t, nil
}

// Validate checks the address plan: every host on some network, every
// network's prefix inside TestSubnet and disjoint from the others, every
// address inside its network's prefix (neither its network nor its broadcast
// address) and used once.
func (t Topology) Validate() error {
	hosts := map[string]bool{}
	for _, h := range t.Hosts {
		if hosts[h.Name] {
			return fmt.Errorf("emulab: %s: host %s twice", t.Name, h.Name)
		}
		hosts[h.Name] = true
		if !h.Addr.IsValid() {
			return fmt.Errorf("emulab: %s: host %s is on no network", t.Name, h.Name)
		}
	}
	used := map[netip.Addr]string{}
	for i, n := range t.Nets {
		if !TestSubnet.Contains(n.Prefix.Addr()) || n.Prefix.Bits() < TestSubnet.Bits() || n.Prefix.Masked() != n.Prefix {
			return fmt.Errorf("emulab: %s: net %s has prefix %s, not a network inside %s", t.Name, n.Name, n.Prefix, TestSubnet)
		}
		for _, o := range t.Nets[:i] {
			if o.Prefix.Overlaps(n.Prefix) {
				return fmt.Errorf("emulab: %s: nets %s and %s overlap", t.Name, o.Name, n.Name)
			}
		}
		if !n.LAN && len(n.Members) != 2 {
			return fmt.Errorf("emulab: %s: link %s has %d ends", t.Name, n.Name, len(n.Members))
		}
		bcast := lastAddr(n.Prefix)
		for _, m := range n.Members {
			if !hosts[m.Host] {
				return fmt.Errorf("emulab: %s: net %s: unknown host %s", t.Name, n.Name, m.Host)
			}
			if !n.Prefix.Contains(m.Addr) || m.Addr == n.Prefix.Addr() || m.Addr == bcast {
				return fmt.Errorf("emulab: %s: %s's address %s is not a host address of %s", t.Name, m.Host, m.Addr, n.Prefix)
			}
			if who, dup := used[m.Addr]; dup {
				return fmt.Errorf("emulab: %s: address %s used by %s and %s", t.Name, m.Addr, who, m.Host)
			}
			used[m.Addr] = m.Host
		}
	}
	return nil
}

// lastAddr is p's broadcast address.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= 1<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Host returns the host called name.
func (t Topology) Host(name string) (Host, bool) {
	for _, h := range t.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// Servers returns the hosts that run `idemkv node`, in order.
func (t Topology) Servers() []Host {
	var out []Host
	for _, h := range t.Hosts {
		if h.Role == Server {
			out = append(out, h)
		}
	}
	return out
}

// ClientHost returns the host the experiment runs from.
func (t Topology) ClientHost() Host {
	for _, h := range t.Hosts {
		if h.Role == Client {
			return h
		}
	}
	return Host{}
}

// NetsOf returns the networks host is attached to, in the topology's order.
func (t Topology) NetsOf(host string) []Net {
	var out []Net
	for _, n := range t.Nets {
		if _, ok := n.AddrOf(host); ok {
			out = append(out, n)
		}
	}
	return out
}

// Seeds are the servers' gossip seeds: the first two servers (one if
// there is only one).
func (t Topology) Seeds() []Host {
	s := t.Servers()
	return s[:min(2, len(s))]
}

// hostIndex maps names to positions in t.Hosts.
func (t Topology) hostIndex() map[string]int {
	idx := make(map[string]int, len(t.Hosts))
	for i, h := range t.Hosts {
		idx[h.Name] = i
	}
	return idx
}

// neighbours returns, for each host index, the indexes of the hosts that
// share a network with it, in the order of t.Hosts.
func (t Topology) neighbours() [][]int {
	idx := t.hostIndex()
	adj := make([][]bool, len(t.Hosts))
	for i := range adj {
		adj[i] = make([]bool, len(t.Hosts))
	}
	for _, n := range t.Nets {
		for _, a := range n.Members {
			for _, b := range n.Members {
				if a.Host != b.Host {
					adj[idx[a.Host]][idx[b.Host]] = true
				}
			}
		}
	}
	out := make([][]int, len(t.Hosts))
	for i := range adj {
		for j, ok := range adj[i] {
			if ok {
				out[i] = append(out[i], j)
			}
		}
	}
	return out
}

// HopDistances returns the number of hops between every pair of hosts
// (indexes as in t.Hosts), -1 when unreachable.
func (t Topology) HopDistances() [][]int {
	nb := t.neighbours()
	dist := make([][]int, len(t.Hosts))
	for s := range t.Hosts {
		d := make([]int, len(t.Hosts))
		for i := range d {
			d[i] = -1
		}
		d[s] = 0
		queue := []int{s}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, v := range nb[u] {
				if d[v] < 0 {
					d[v] = d[u] + 1
					queue = append(queue, v)
				}
			}
		}
		dist[s] = d
	}
	return dist
}

// computeRoutes gives every host a route to every network it is not on:
// towards the nearest member of that network (the earliest listed on a
// tie, so a link's first member — whose listen address it holds — wins),
// through the first neighbour in host order that lies on a shortest path.
func (t Topology) computeRoutes() []Route {
	idx := t.hostIndex()
	nb := t.neighbours()
	dist := t.HopDistances()
	var routes []Route
	for hi, h := range t.Hosts {
		for _, n := range t.Nets {
			if _, on := n.AddrOf(h.Name); on {
				continue
			}
			target := -1
			for _, m := range n.Members {
				mi := idx[m.Host]
				if dist[hi][mi] >= 0 && (target < 0 || dist[hi][mi] < dist[hi][target]) {
					target = mi
				}
			}
			if target < 0 {
				continue
			}
			for _, v := range nb[hi] {
				if dist[v][target] != dist[hi][target]-1 {
					continue
				}
				gw := netip.Addr{}
				for _, shared := range t.Nets {
					_, a := shared.AddrOf(h.Name)
					if g, b := shared.AddrOf(t.Hosts[v].Name); a && b {
						gw = g
						break
					}
				}
				routes = append(routes, Route{Host: h.Name, Net: n.Name, Dest: n.Prefix, Via: t.Hosts[v].Name, Gateway: gw})
				break
			}
		}
	}
	return routes
}

// Path follows the model's forwarding from host from to address to: at each
// host, an address on a directly attached network is delivered to its
// owner, any other goes to the next hop of the longest matching route. It
// returns the hosts visited, from and the owner of to included.
func (t Topology) Path(from string, to netip.Addr) ([]string, error) {
	path := []string{from}
	cur := from
	for range len(t.Hosts) + 1 {
		if h, ok := t.Host(cur); ok && h.Addr == to {
			return path, nil
		}
		delivered := false
		for _, n := range t.NetsOf(cur) {
			if !n.Prefix.Contains(to) {
				continue
			}
			for _, m := range n.Members {
				if m.Addr == to {
					if m.Host != cur {
						path = append(path, m.Host)
					}
					return path, nil
				}
			}
			delivered = true
		}
		if delivered {
			return path, fmt.Errorf("emulab: %s: %s is on a network of %s but no host has it", t.Name, to, cur)
		}
		var best *Route
		for i, r := range t.Routes {
			if r.Host == cur && r.Dest.Contains(to) && (best == nil || r.Dest.Bits() > best.Dest.Bits()) {
				best = &t.Routes[i]
			}
		}
		if best == nil {
			return path, fmt.Errorf("emulab: %s: no route from %s to %s", t.Name, cur, to)
		}
		cur = best.Via
		path = append(path, cur)
	}
	return path, fmt.Errorf("emulab: %s: routing loop from %s to %s: %v", t.Name, from, to, path)
}
