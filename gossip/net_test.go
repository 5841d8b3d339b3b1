package gossip

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/idemkv/idemkv/transport"
)

// fakeNet is an in-process network for the tests: a request is a direct
// call of the destination's handler. Each directed link can be switched to
// drop: a dropped request never reaches the handler (ErrUnreachable); a
// dropped response is lost after the handler ran (ErrTimeout).
type fakeNet struct {
	mu   sync.Mutex
	eps  map[transport.Addr]*fakeEndpoint
	drop map[[2]transport.Addr]bool // {from, to}
}

func newFakeNet() *fakeNet {
	return &fakeNet{eps: map[transport.Addr]*fakeEndpoint{}, drop: map[[2]transport.Addr]bool{}}
}

// endpoint attaches a fresh endpoint at addr (closing any previous one, as a
// restarted process would).
func (n *fakeNet) endpoint(addr transport.Addr) *fakeEndpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.eps[addr]; old != nil {
		old.closed = true
	}
	e := &fakeEndpoint{net: n, addr: addr}
	n.eps[addr] = e
	return e
}

// setDrop switches dropping on the link from → to.
func (n *fakeNet) setDrop(from, to transport.Addr, drop bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop[[2]transport.Addr{from, to}] = drop
}

// isolate cuts (or restores) every link to and from a.
func (n *fakeNet) isolate(a transport.Addr, cut bool) {
	n.mu.Lock()
	addrs := make([]transport.Addr, 0, len(n.eps))
	for b := range n.eps {
		addrs = append(addrs, b)
	}
	n.mu.Unlock()
	for _, b := range addrs {
		if b != a {
			n.setDrop(a, b, cut)
			n.setDrop(b, a, cut)
		}
	}
}

type fakeEndpoint struct {
	net     *fakeNet
	addr    transport.Addr
	handler transport.Handler // set before the first request reaches it
	closed  bool              // guarded by net.mu
}

var _ transport.Transport = (*fakeEndpoint)(nil)

func (e *fakeEndpoint) Addr() transport.Addr { return e.addr }

func (e *fakeEndpoint) Request(ctx context.Context, to transport.Addr, req transport.Message) (transport.Message, error) {
	n := e.net
	n.mu.Lock()
	closed, dst := e.closed, n.eps[to]
	dropReq, dropResp := n.drop[[2]transport.Addr{e.addr, to}], n.drop[[2]transport.Addr{to, e.addr}]
	if dst != nil && dst.closed {
		dst = nil
	}
	n.mu.Unlock()
	switch {
	case closed:
		return transport.Message{}, transport.ErrClosed
	case dst == nil || dropReq:
		return transport.Message{}, fmt.Errorf("%w: %s", transport.ErrUnreachable, to)
	case ctx.Err() != nil:
		return transport.Message{}, fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	req.Body = bytes.Clone(req.Body) // what crosses the wire is a copy
	resp, err := dst.handler(ctx, e.addr, req)
	if dropResp {
		return transport.Message{}, fmt.Errorf("%w: response lost", transport.ErrTimeout)
	}
	if err != nil {
		return transport.Message{}, &transport.RemoteError{Peer: to, Msg: err.Error()}
	}
	resp.Body = bytes.Clone(resp.Body)
	return resp, nil
}

func (e *fakeEndpoint) Send(ctx context.Context, to transport.Addr, m transport.Message) error {
	_, err := e.Request(ctx, to, m)
	if err != nil && !isRemote(err) {
		return err
	}
	return nil
}

func isRemote(err error) bool {
	_, ok := err.(*transport.RemoteError)
	return ok
}

func (e *fakeEndpoint) Close() error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.closed = true
	return nil
}
