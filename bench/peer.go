package bench

import (
	"context"
	"fmt"
	"strings"
)

// PeerName prefixes the rows of a peer ring (Apache Cassandra) run side by
// side with the idemkv modes: "cassandra vanilla".
const PeerName = "cassandra"

// PeerConfig is cfg for a peer ring of hosts: vanilla counters only (the
// other modes need an idemkv server), the same op stream, faults, clients
// and consistency level, and RF at most the peer ring's size.
func PeerConfig(cfg Config, hosts []string) Config {
	p := cfg
	p.Modes = []string{ModeVanilla}
	p.RF = min(cfg.withDefaults().RF, len(hosts))
	return p
}

// MergePeer appends the peer report's rows to rep, each mode named
// name+" "+mode, with its fault counts, retries and samples, and notes the
// peer in rep's configuration.
func MergePeer(rep, peer *Report, name string) {
	mergeRows(rep, peer, name+" ")
	for i := len(rep.ServerCPU) - len(peer.ServerCPU); i < len(rep.ServerCPU); i++ {
		rep.ServerCPU[i].Target = name
	}
	c := peer.Config
	rep.Config.Peer = fmt.Sprintf("%s rows: ring at %s, keyspace bench there, RF %d, %s, same op stream and %s-side faults, at the same time as the rows above",
		name, strings.Join(c.Hosts, ","), c.RF, c.Consistency, c.FaultSide)
}

// mergeRows appends other's rows to rep, each mode's name prefixed, with
// their samples, fault events and counts, retries and server CPU.
func mergeRows(rep, other *Report, prefix string) {
	for _, m := range other.Modes {
		m.Mode = prefix + m.Mode
		rep.Modes = append(rep.Modes, m)
	}
	for _, s := range other.Series {
		s.Mode = prefix + s.Mode
		rep.Series = append(rep.Series, s)
	}
	if len(other.Faults) > 0 && rep.Faults == nil {
		rep.Faults = map[string]int{}
	}
	for k, v := range other.Faults {
		rep.Faults[k] += v
	}
	rep.faultEvents = append(rep.faultEvents, other.faultEvents...)
	rep.ServerCPU = append(rep.ServerCPU, other.ServerCPU...)
	rep.Horizon.Retries += other.Horizon.Retries
	rep.Horizon.MaxRetryAfterMS = max(rep.Horizon.MaxRetryAfterMS, other.Horizon.MaxRetryAfterMS)
	rep.Horizon.AllWithin = rep.Horizon.AllWithin && other.Horizon.AllWithin
}

// RunEachAlone runs cfg's modes on t one at a time, each alone, and then,
// when peer.Hosts holds a ring's CQL addresses (Apache Cassandra), the
// peer's row (PeerConfig) alone: every row has the machine to itself, so
// that its throughput is what its server takes from cfg.Clients clients,
// not the share of the cores the other rows' loads leave it. The rows meet
// the same op stream and, with a peer, the same client-side faults. With
// t.ServerPids each row's server CPU is its own (Report.ServerCPU, one
// entry per row, named "idemkv MODE").
func RunEachAlone(ctx context.Context, t Target, cfg Config, peer Target) (*Report, error) {
	if len(peer.Hosts) > 0 {
		var err error
		if peer, err = peerRing(cfg, peer); err != nil {
			return nil, err
		}
		t.ClientFaults = true
	}
	var rep *Report
	for _, m := range cfg.withDefaults().Modes {
		c := cfg
		c.Modes = []string{m}
		r, err := Run(ctx, t, c)
		if err != nil {
			return nil, fmt.Errorf("%s, mode %s alone: %w", cfg.Name, m, err)
		}
		for i := range r.ServerCPU {
			r.ServerCPU[i].Target += " " + m
		}
		if rep == nil {
			rep = r
			continue
		}
		mergeRows(rep, r, "")
	}
	rep.Config.Alone = true
	if len(peer.Hosts) == 0 {
		return rep, nil
	}
	p, err := Run(ctx, peer, PeerConfig(cfg, peer.Hosts))
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", cfg.Name, PeerName, err)
	}
	MergePeer(rep, p, PeerName)
	rep.Config.Peer = strings.Replace(rep.Config.Peer, "at the same time as the rows above", "after the rows above, alone", 1)
	return rep, nil
}

// peerRing is the peer's target for a run of cfg (named PeerName), or an
// error when cfg's node kills cannot be matched on the peer.
func peerRing(cfg Config, peer Target) (Target, error) {
	if cfg.Faults.KillEvery > 0 && peer.Killer == nil {
		return Target{}, fmt.Errorf("%s: node kills on %s need a killer of its nodes", cfg.Name, PeerName)
	}
	return Target{Hosts: peer.Hosts, Killer: peer.Killer, ServerPids: peer.ServerPids, Name: PeerName}, nil
}

// RunWithPeer runs cfg on t and, when peer.Hosts holds a ring's CQL
// addresses (Apache Cassandra), PeerConfig(cfg, peer.Hosts) on that ring at
// the same time, as the modes of one run go side by side; the peer's rows
// are merged into the report (MergePeer). With a peer the faults on t are
// client-side too (Target.ClientFaults), so that the same draw drops the
// same acknowledgements on both servers; cfg's node kills need a
// peer.Killer, which kills the peer's nodes on the same schedule.
func RunWithPeer(ctx context.Context, t Target, cfg Config, peer Target) (*Report, error) {
	return runWithPeer(ctx, t, cfg, peer, true)
}

// RunThenPeer is RunWithPeer with the peer's rows run after t's rather
// than at the same time, so that neither load competes with the other for
// the machine (the same op stream, the same faults).
func RunThenPeer(ctx context.Context, t Target, cfg Config, peer Target) (*Report, error) {
	return runWithPeer(ctx, t, cfg, peer, false)
}

func runWithPeer(ctx context.Context, t Target, cfg Config, peer Target, together bool) (*Report, error) {
	if len(peer.Hosts) == 0 {
		return Run(ctx, t, cfg)
	}
	peer, err := peerRing(cfg, peer)
	if err != nil {
		return nil, err
	}
	t.ClientFaults = true
	var (
		p    *Report
		pErr error
	)
	runPeer := func() { p, pErr = Run(ctx, peer, PeerConfig(cfg, peer.Hosts)) }
	var rep *Report
	if together {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runPeer()
		}()
		rep, err = Run(ctx, t, cfg)
		<-done
		// Both runs' clients shared this process: neither's CPU is its own.
		for _, r := range []*Report{rep, p} {
			if r != nil {
				for i := range r.ServerCPU {
					r.ServerCPU[i].ClientCPUS, r.ServerCPU[i].ClientPerOpUS = 0, 0
				}
			}
		}
	} else if rep, err = Run(ctx, t, cfg); err == nil {
		runPeer()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	if pErr != nil {
		return nil, fmt.Errorf("%s on %s: %w", cfg.Name, PeerName, pErr)
	}
	MergePeer(rep, p, PeerName)
	if !together {
		rep.Config.Peer = strings.Replace(rep.Config.Peer, "at the same time as the rows above", "after the rows above", 1)
	}
	return rep, nil
}
