package faultproxy

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/internal/testseed"
)

func testMap() *addrMap {
	m := &addrMap{}
	for i := 1; i <= 3; i++ {
		m.pairs = append(m.pairs, addrPair{
			server: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}), 9042),
			proxy:  netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 2, byte(i)}), 9042),
		})
	}
	return m
}

func ip4(a, b, c, d byte) []byte { return []byte{a, b, c, d} }

func col(table, name string, t frame.DataType) frame.ColumnSpec {
	return frame.ColumnSpec{Keyspace: "system", Table: table, Name: name, Type: t}
}

// peerFrames are responses and events as servers send them: system.local,
// system.peers and system.peers_v2 rows, events, and rows of other tables.
func peerFrames() []*frame.Frame {
	hostID := bytes.Repeat([]byte{7}, 16)
	local := &frame.RowsResult{
		Columns: []frame.ColumnSpec{col("local", "key", frame.Text), col("broadcast_address", "broadcast_address", frame.Inet),
			col("local", "listen_address", frame.Inet), col("local", "rpc_address", frame.Inet), col("local", "host_id", frame.UUID),
			col("local", "tokens", frame.SetOf(frame.Text))},
		Rows: [][]frame.Value{{{Bytes: []byte("local")}, {Bytes: ip4(127, 0, 0, 1)}, {Bytes: ip4(127, 0, 0, 1)}, {Bytes: ip4(127, 0, 0, 1)},
			{Bytes: hostID}, {Bytes: frame.EncodeList([][]byte{[]byte("-42")})}}},
	}
	local.Columns[1].Table = "local"
	peers := &frame.RowsResult{
		Columns: []frame.ColumnSpec{col("peers", "peer", frame.Inet), col("peers", "preferred_ip", frame.Inet), col("peers", "rpc_address", frame.Inet),
			col("peers", "data_center", frame.Text)},
		Rows: [][]frame.Value{
			{{Bytes: ip4(127, 0, 0, 2)}, {Null: true}, {Bytes: ip4(127, 0, 0, 2)}, {Bytes: []byte("dc1")}},
			{{Bytes: ip4(127, 0, 0, 3)}, {Null: true}, {Bytes: ip4(10, 9, 9, 9)}, {Bytes: []byte("dc1")}},
		},
	}
	v2 := &frame.RowsResult{
		Columns: []frame.ColumnSpec{col("peers_v2", "peer", frame.Inet), col("peers_v2", "peer_port", frame.Int),
			col("peers_v2", "native_address", frame.Inet), col("peers_v2", "native_port", frame.Int)},
		Rows: [][]frame.Value{{{Bytes: ip4(127, 0, 0, 3)}, {Bytes: frame.EncodeInt(7000)}, {Bytes: ip4(127, 0, 0, 3)}, {Bytes: frame.EncodeInt(9042)}}},
	}
	other := &frame.RowsResult{
		Columns: []frame.ColumnSpec{{Keyspace: "ks", Table: "t", Name: "a", Type: frame.Inet}},
		Rows:    [][]frame.Value{{{Bytes: ip4(127, 0, 0, 1)}}},
	}
	return []*frame.Frame{
		{Version: 4, Stream: 1, Message: local},
		{Version: 4, Stream: 2, Message: peers, Warnings: []string{"w"}},
		{Version: 4, Stream: 3, Message: v2, Payload: map[string][]byte{"k": []byte("v")}},
		{Version: 3, Stream: 4, Message: peers},
		{Version: 4, Stream: 5, Message: other},
		{Version: 4, Stream: -1, Message: &frame.Event{Type: frame.EventStatusChange, Change: "UP", IP: ip4(127, 0, 0, 2), Port: 9042}},
		{Version: 4, Stream: -1, Message: &frame.Event{Type: frame.EventTopologyChange, Change: "NEW_NODE", IP: ip4(127, 0, 0, 3), Port: 9042}},
		{Version: 4, Stream: -1, Message: &frame.Event{Type: frame.EventSchemaChange, Change: "CREATED",
			Schema: frame.SchemaChangeResult{Change: "CREATED", Target: frame.TargetKeyspace, Keyspace: "ks"}}},
		{Version: 4, Stream: 6, Message: &frame.VoidResult{}},
	}
}

func encode(t testing.TB, f *frame.Frame) (frame.Header, []byte) {
	t.Helper()
	b, err := frame.AppendFrame(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := frame.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h, b[h.Size():]
}

func rewrite(m *addrMap, h frame.Header, body []byte) ([]byte, bool, error) {
	if h.Op == frame.OpEvent {
		return m.rewriteEvent(h, body)
	}
	return m.rewriteResult(h, body, nil)
}

func decodeOut(t testing.TB, b []byte) *frame.Frame {
	t.Helper()
	h, err := frame.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if int(h.Length) != len(b)-h.Size() {
		t.Fatalf("header length %d, body %d bytes", h.Length, len(b)-h.Size())
	}
	f, err := frame.DecodeFrame(h, b[h.Size():])
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRewritePeerRows(t *testing.T) {
	m := testMap()
	fs := peerFrames()
	want := map[int16]bool{1: true, 2: true, 3: true, 4: true, 5: false, 6: false}
	for _, f := range fs {
		h, body := encode(t, f)
		out, changed, err := rewrite(m, h, body)
		if err != nil {
			t.Fatalf("stream %d: %v", f.Stream, err)
		}
		if w, ok := want[f.Stream]; ok && changed != w {
			t.Fatalf("stream %d: changed %v, want %v", f.Stream, changed, w)
		}
		if !changed {
			continue
		}
		g := decodeOut(t, out)
		if g.Version != f.Version || g.Stream != f.Stream || len(g.Warnings) != len(f.Warnings) || len(g.Payload) != len(f.Payload) {
			t.Fatalf("stream %d: prefixes changed: %+v", f.Stream, g)
		}
		switch msg := g.Message.(type) {
		case *frame.RowsResult:
			for _, row := range msg.Rows {
				for j, c := range msg.Columns {
					if c.Type.ID == frame.TypeInet && !row[j].Null {
						if ip, _ := parseInet(row[j].Bytes); ip.As4()[2] == 0 && ip.As4()[0] == 127 {
							t.Fatalf("stream %d: %s still %v", f.Stream, c.Name, ip)
						}
					}
				}
			}
		case *frame.Event:
			if !bytes.Equal(msg.IP[:3], []byte{127, 0, 2}) || msg.Port != 9042 {
				t.Fatalf("event: %v:%d", msg.IP, msg.Port)
			}
		}
	}
	// The unknown address 10.9.9.9 stays; 127.0.0.3's row becomes 127.0.2.3.
	h, body := encode(t, fs[1])
	out, _, _ := rewrite(m, h, body)
	rows := decodeOut(t, out).Message.(*frame.RowsResult).Rows
	if !bytes.Equal(rows[1][0].Bytes, ip4(127, 0, 2, 3)) || !bytes.Equal(rows[1][2].Bytes, ip4(10, 9, 9, 9)) {
		t.Fatalf("peers row 2: %v", rows[1])
	}
}

func TestRewriteNativePort(t *testing.T) {
	m := testMap()
	m.pairs[2].proxy = netip.MustParseAddrPort("127.0.2.3:19042")
	h, body := encode(t, peerFrames()[2])
	out, changed, err := rewrite(m, h, body)
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v", changed, err)
	}
	row := decodeOut(t, out).Message.(*frame.RowsResult).Rows[0]
	if !bytes.Equal(row[2].Bytes, ip4(127, 0, 2, 3)) || !bytes.Equal(row[3].Bytes, frame.EncodeInt(19042)) || !bytes.Equal(row[1].Bytes, frame.EncodeInt(7000)) {
		t.Fatalf("peers_v2 row: %v", row)
	}
}

// TestRewriteNoMetadata: rows of a prepared system.peers SELECT sent without
// metadata are rewritten with the prepared statement's columns.
func TestRewriteNoMetadata(t *testing.T) {
	m := testMap()
	rows := peerFrames()[1].Message.(*frame.RowsResult)
	bare := &frame.RowsResult{Rows: rows.Rows, NoMetadata: true}
	h, body := encode(t, &frame.Frame{Version: 4, Stream: 9, Message: bare})
	if _, changed, _ := m.rewriteResult(h, body, nil); changed {
		t.Fatal("rewrote rows without knowing their columns")
	}
	out, changed, err := m.rewriteResult(h, body, rows.Columns)
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v", changed, err)
	}
	if got := decodeOut(t, out).Message.(*frame.RowsResult).Rows[0][0].Bytes; !bytes.Equal(got, ip4(127, 0, 2, 2)) {
		t.Fatalf("peer %v", got)
	}
}

func TestClassify(t *testing.T) {
	for stmt, want := range map[string]bool{
		"UPDATE bench.fbf SET c = c + ? WHERE k = ?": true, "  update t set c=c+1 where k=1": true,
		"BEGIN COUNTER BATCH UPDATE t SET c = c + 1 WHERE k = 1; APPLY BATCH": true,
		"SELECT * FROM system.local":                                          false, "INSERT INTO t (k) VALUES (1)": false, "": false, "UPD": false,
	} {
		if got := IsUpdate(stmt); got != want {
			t.Errorf("IsUpdate(%q) = %v", stmt, got)
		}
	}
	for stmt, want := range map[string]string{
		"SELECT * FROM system.local WHERE key='local'": "local", "SELECT * FROM system.peers": "peers",
		"SELECT * FROM SYSTEM.PEERS_V2": "peers_v2", "SELECT * FROM system.local_x": "", "SELECT * FROM system_schema.tables": "",
		"SELECT * FROM system.size_estimates; system.peers": "peers", "system.": "",
	} {
		if got := systemTable(stmt); got != want {
			t.Errorf("systemTable(%q) = %q, want %q", stmt, got, want)
		}
	}
}

// TestDecideMatchesSchedule: the schedule's decisions follow Decide with
// the bench's salts, and their rate is the probability.
func TestDecideMatchesSchedule(t *testing.T) {
	seed := testseed.Seed(t)
	s := Schedule{Seed: seed, LostAck: 0.05, Delay: 0.02}
	lost, delayed := 0, 0
	const n = 20000
	for i := range n {
		op := client.OpID{Client: uint64(i % 16), Sequence: uint64(i/16 + 1)}
		d := s.decide(op, 1)
		wantLost := Decide(seed, SaltLostAck, op, 1) < s.LostAck
		if (d == faultLostAck) != wantLost {
			t.Fatalf("op %v: decision %v, Decide says lost %v", op, d, wantLost)
		}
		switch d {
		case faultLostAck:
			lost++
		case faultDelay:
			delayed++
		}
	}
	if lost < n*3/100 || lost > n*7/100 || delayed < n/100 || delayed > n*3/100 {
		t.Fatalf("%d lost, %d delayed of %d", lost, delayed, n)
	}
}

// FuzzRewrite feeds arbitrary frames (header and body) to the address
// rewriter and the request inspector: nothing may panic, a rewritten frame
// must decode with a correct length, and rewriting it again changes nothing
// (no proxy address is a server's).
func FuzzRewrite(f *testing.F) {
	for _, fr := range peerFrames() {
		b, err := frame.AppendFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, q := range []frame.Message{
		&frame.Query{Query: "UPDATE t SET c = c + 1 WHERE k = 'a'"},
		&frame.Query{Query: "SELECT * FROM system.peers"},
		&frame.Prepare{Query: "UPDATE t SET c = c + ? WHERE k = ?"},
		&frame.Execute{ID: []byte{1, 2}},
		&frame.Batch{Type: frame.BatchCounter, Statements: []frame.BatchStatement{{Query: "UPDATE t SET c = c + 1 WHERE k = 'a'"}, {PreparedID: []byte{1, 2}}}},
	} {
		b, err := frame.AppendFrame(nil, &frame.Frame{Version: 4, Stream: 3, Message: q,
			Payload: map[string][]byte{client.PayloadKey: client.OpID{Client: 1, Sequence: 2}.Bytes()}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	m := testMap()
	g, err := NewGroup(Config{Schedule: Schedule{Seed: 1, LostAck: 0.5, Delay: 0.3, Reset: 0.1}})
	if err != nil {
		f.Fatal(err)
	}
	g.addPrepared([]byte{1, 2}, "UPDATE t SET c = c + ? WHERE k = ?", nil)
	g.addPrepared([]byte{3}, "SELECT * FROM system.peers", peerFrames()[1].Message.(*frame.RowsResult).Columns)
	c := &conn{p: &Proxy{g: g, ln: nopListener{}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := frame.ParseHeader(data)
		if err != nil {
			return
		}
		body := data[h.Size():]
		if !h.IsResponse() {
			_, _ = c.inspect(h, body)
			return
		}
		cols := peerFrames()[1].Message.(*frame.RowsResult).Columns
		for _, cs := range [][]frame.ColumnSpec{nil, cols} {
			var out []byte
			var changed bool
			if h.Op == frame.OpEvent {
				out, changed, err = m.rewriteEvent(h, body)
			} else {
				out, changed, err = m.rewriteResult(h, body, cs)
			}
			if err != nil || !changed {
				continue
			}
			h2, err := frame.ParseHeader(out)
			if err != nil || int(h2.Length) != len(out)-h2.Size() || h2.Stream != h.Stream || h2.Op != h.Op {
				t.Fatalf("rewritten frame: header %+v, %d bytes, err %v", h2, len(out), err)
			}
			if _, err := frame.DecodeFrame(h2, out[h2.Size():]); err != nil {
				t.Fatalf("rewritten frame does not decode: %v", err)
			}
			var again bool
			if h.Op == frame.OpEvent {
				_, again, err = m.rewriteEvent(h2, out[h2.Size():])
			} else {
				_, again, err = m.rewriteResult(h2, out[h2.Size():], cs)
			}
			if err != nil || again {
				t.Fatalf("second rewrite: changed %v, err %v", again, err)
			}
		}
	})
}

// nopListener stands for a listener in tests that need a Proxy's address.
type nopListener struct{}

func (nopListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (nopListener) Close() error              { return nil }
func (nopListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 2, 1), Port: 9042} }
