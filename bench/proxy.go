package bench

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/idemkv/idemkv/faultproxy"
)

// Fault kinds injected by fault proxies (package faultproxy) in front of
// the servers, for any CQL server alike.
const (
	FaultProxyLostAck = faultproxy.KindLostAck // the server applied the op; the proxy dropped its answer
	FaultProxyDelay   = faultproxy.KindDelay   // the proxy held the server's answer past the client's timeout
	FaultProxyReset   = faultproxy.KindReset   // the proxy closed the connection after forwarding the op
)

// Proxies are fault proxies, one per server, in front of a ring: a run
// whose Target has them sends its load to the proxies, which inject its
// lost acks and delays (the client injects none), and count the retries
// that reached a server after an earlier attempt was acknowledged.
type Proxies struct {
	g     *faultproxy.Group
	hosts []string
	log   atomic.Pointer[FaultLog]
}

// DefaultProxyAddr is the default listen address of the proxy of server
// i (0-based) at host: 127.0.2.(i+1) on the server's port.
func DefaultProxyAddr(i int, host string) (string, error) {
	_, port, err := net.SplitHostPort(host)
	if err != nil {
		return "", fmt.Errorf("bench: proxy for %s: %w", host, err)
	}
	if i < 0 || i > 253 {
		return "", fmt.Errorf("bench: %d proxies: at most 254", i+1)
	}
	return net.JoinHostPort("127.0.2."+strconv.Itoa(i+1), port), nil
}

// StartProxies starts a proxy in front of each of hosts (host:port), on
// listen[i], or DefaultProxyAddr when listen is empty. logger receives the
// proxies' connection errors (nil: discard).
func StartProxies(hosts, listen []string, logger *slog.Logger) (*Proxies, error) {
	if len(listen) > 0 && len(listen) != len(hosts) {
		return nil, fmt.Errorf("bench: %d proxy addresses for %d hosts", len(listen), len(hosts))
	}
	p := &Proxies{}
	g, err := faultproxy.NewGroup(faultproxy.Config{Logger: logger, OnEvent: p.onEvent})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	p.g = g
	for i, h := range hosts {
		addr := ""
		if len(listen) > 0 {
			addr = listen[i]
		} else if addr, err = DefaultProxyAddr(i, h); err != nil {
			_ = g.Close()
			return nil, err
		}
		px, err := g.Listen(addr, h)
		if err != nil {
			_ = g.Close()
			return nil, fmt.Errorf("bench: proxy for %s: %w", h, err)
		}
		p.hosts = append(p.hosts, px.Addr())
	}
	return p, nil
}

// Hosts are the proxies' addresses, in the order of the servers.
func (p *Proxies) Hosts() []string { return p.hosts }

// Group is the proxies' faultproxy group.
func (p *Proxies) Group() *faultproxy.Group { return p.g }

// Close stops the proxies.
func (p *Proxies) Close() error {
	if err := p.g.Close(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

func (p *Proxies) onEvent(ev faultproxy.Event) {
	log := p.log.Load()
	if log == nil {
		return
	}
	fe := FaultEvent{Kind: ev.Kind, Node: ev.Node, Attempt: ev.Attempt, Detail: "stream " + strconv.Itoa(int(ev.Stream))}
	if ev.HasOp {
		fe.Mode, fe.Client, fe.Seq = modeOf(ev.Op.Client), ev.Op.Client, ev.Op.Sequence
	}
	log.Add(fe)
}

// arm sets the proxies' schedule to the run's lost acks and delays and logs
// their faults in log; the returned function disarms them.
func (p *Proxies) arm(cfg Config, log *FaultLog) (disarm func(), err error) {
	p.log.Store(log)
	s := faultproxy.Schedule{Seed: cfg.Seed, LostAck: cfg.Faults.LostAck, Delay: cfg.Faults.Delay, Reset: cfg.Faults.Reset, DelayBy: cfg.Faults.DelayBy}
	if err := p.g.SetSchedule(s); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return func() {
		_ = p.g.SetSchedule(faultproxy.Schedule{})
		p.log.Store(nil)
	}, nil
}

// duplicates returns, per mode, the updates that reached a server after an
// earlier attempt of their op had been acknowledged.
func (p *Proxies) duplicates() map[string]int64 {
	m := map[string]int64{}
	for client, n := range p.g.Duplicates() {
		m[modeOf(client)] += n
	}
	return m
}

var errProxyFaults = errors.New("--kill-every and --pause-every need the embedded ring's nodes: with --proxy only --lost-ack, --delay and --proxy-reset apply")
