package faultproxy

import (
	"fmt"
	"net/netip"

	"github.com/idemkv/idemkv/cql/frame"
)

// addrMap maps each server's address to its proxy's.
type addrMap struct {
	pairs []addrPair
}

type addrPair struct{ server, proxy netip.AddrPort }

// lookup finds the proxy of the server at ip:port (port < 0: any port,
// when only one server has ip).
func (m *addrMap) lookup(ip netip.Addr, port int) (netip.AddrPort, bool) {
	ip = ip.Unmap()
	var found netip.AddrPort
	n := 0
	for _, p := range m.pairs {
		if p.server.Addr() != ip {
			continue
		}
		if port >= 0 && int(p.server.Port()) == port {
			return p.proxy, true
		}
		found = p.proxy
		n++
	}
	return found, n == 1
}

// inetBytes is ip as a CQL inet value: 4 bytes for IPv4, 16 for IPv6.
func inetBytes(ip netip.Addr) []byte {
	ip = ip.Unmap()
	if ip.Is4() {
		b := ip.As4()
		return b[:]
	}
	b := ip.As16()
	return b[:]
}

func parseInet(b []byte) (netip.Addr, bool) {
	if len(b) != 4 && len(b) != 16 {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(b)
	return a.Unmap(), ok
}

// isPeerTable reports whether result columns come from system.local,
// system.peers or system.peers_v2.
func isPeerTable(cols []frame.ColumnSpec) bool {
	for _, c := range cols {
		if c.Keyspace == "system" && (c.Table == "local" || c.Table == "peers" || c.Table == "peers_v2") {
			return true
		}
	}
	return false
}

// rewriteRows replaces, in rows of a system.local, system.peers or
// system.peers_v2 result, every inet cell that holds a server's address by
// its proxy's, and a native_port that goes with a rewritten native_address
// by the proxy's port. It reports whether a cell changed.
func (m *addrMap) rewriteRows(cols []frame.ColumnSpec, rows [][]frame.Value) bool {
	nativeAddr, nativePort := -1, -1
	var inets []int
	for j, c := range cols {
		switch {
		case c.Type.ID == frame.TypeInet:
			inets = append(inets, j)
			if c.Name == "native_address" {
				nativeAddr = j
			}
		case c.Name == "native_port" && c.Type.ID == frame.TypeInt:
			nativePort = j
		}
	}
	changed := false
	for _, row := range rows {
		if len(row) != len(cols) {
			continue
		}
		for _, j := range inets {
			cell := &row[j]
			if cell.Null || cell.Unset {
				continue
			}
			ip, ok := parseInet(cell.Bytes)
			if !ok {
				continue
			}
			port := -1
			if j == nativeAddr && nativePort >= 0 && len(row[nativePort].Bytes) == 4 {
				b := row[nativePort].Bytes
				port = int(int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])))
			}
			to, ok := m.lookup(ip, port)
			if !ok && port >= 0 {
				to, ok = m.lookup(ip, -1)
			}
			if !ok {
				continue
			}
			cell.Bytes = inetBytes(to.Addr())
			if j == nativeAddr && nativePort >= 0 && !row[nativePort].Null {
				row[nativePort] = frame.Value{Bytes: frame.EncodeInt(int32(to.Port()))}
			}
			changed = true
		}
	}
	return changed
}

// rewriteResult rewrites the addresses of a RESULT frame (header h, body)
// that holds rows of system.local, system.peers or system.peers_v2; cols is
// the result metadata of the prepared statement it answers, for rows sent
// without metadata. It returns the whole frame to send and whether it
// changed; an error means the frame is malformed.
func (m *addrMap) rewriteResult(h frame.Header, body []byte, cols []frame.ColumnSpec) ([]byte, bool, error) {
	if h.Op != frame.OpResult {
		return nil, false, nil
	}
	f, err := frame.DecodeFrame(h, body)
	if err != nil {
		return nil, false, fmt.Errorf("faultproxy: result: %w", err)
	}
	rows, ok := f.Message.(*frame.RowsResult)
	if !ok {
		return nil, false, nil
	}
	if !rows.NoMetadata {
		cols = rows.Columns
	}
	if !isPeerTable(cols) || !m.rewriteRows(cols, rows.Rows) {
		return nil, false, nil
	}
	out, err := frame.AppendFrame(nil, f)
	if err != nil {
		return nil, false, fmt.Errorf("faultproxy: re-encode result: %w", err)
	}
	return out, true, nil
}

// rewriteEvent rewrites the address of a TOPOLOGY_CHANGE or STATUS_CHANGE
// EVENT frame; as rewriteResult.
func (m *addrMap) rewriteEvent(h frame.Header, body []byte) ([]byte, bool, error) {
	if h.Op != frame.OpEvent {
		return nil, false, nil
	}
	f, err := frame.DecodeFrame(h, body)
	if err != nil {
		return nil, false, fmt.Errorf("faultproxy: event: %w", err)
	}
	ev, ok := f.Message.(*frame.Event)
	if !ok || ev.Type == frame.EventSchemaChange {
		return nil, false, nil
	}
	ip, ok := parseInet(ev.IP)
	if !ok {
		return nil, false, nil
	}
	to, ok := m.lookup(ip, int(ev.Port))
	if !ok {
		if to, ok = m.lookup(ip, -1); !ok {
			return nil, false, nil
		}
	}
	ev.IP, ev.Port = inetBytes(to.Addr()), int32(to.Port())
	out, err := frame.AppendFrame(nil, f)
	if err != nil {
		return nil, false, fmt.Errorf("faultproxy: re-encode event: %w", err)
	}
	return out, true, nil
}
