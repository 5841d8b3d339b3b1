package borrow

import (
	"encoding/binary"
	"flag"
	"fmt"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/idemkv/idemkv/counters/handoff"
)

// flagPlotDir names the directory TestStateSize writes its plot to (as in
// counters/handoff):
//
//	go test -run '^TestStateSize$' ./counters/borrow/ -args -plotdir "$PWD/docs"
var flagPlotDir = flag.String("plotdir", "", "directory where TestStateSize writes borrow-state-size.png")

// gcounterBytes is the size of a naive G-counter holding one entry per
// client that ever incremented: a count of entries, then per entry a 16-byte
// id and the count as a uvarint (the same formula as counters/handoff's size
// test).
func gcounterBytes(counts []uint64) int {
	n := 1 + len(binary.AppendUvarint(nil, uint64(len(counts))))
	for _, c := range counts {
		n += IDLen + len(binary.AppendUvarint(nil, c))
	}
	return n
}

func encLen(s interface{ MarshalBinary() ([]byte, error) }) int {
	b, err := s.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return len(b)
}

type sizeRow struct {
	clients      int
	gcounter     int
	borrowEnd    int // largest server state once quiescent
	borrowPeak   int // largest server state at any tick
	peakBorrowed int // most borrowed dots at one server at any tick
	handoffEnd   int
	handoffPeak  int
	downPeak     int // creator down from mid-run: largest state while down
	downBorrowed int // borrowed dots left at the others just before it returns
	downEnd      int // after it returns and the servers gossip
}

const (
	sizeServers    = 3
	sizeConcurrent = 50
)

// borrowSizeRun has clients come and go, at most 50 at a time: a client
// borrows a dot from one of 3 servers, adds 1–5 in one write to a random
// server, and at the next tick retires with one write to a random server;
// after every tick each server transfers and the servers exchange full
// states. With downFrom ≥ 0, server 0 is down (lends nothing, receives and
// sends nothing) from the downFrom-th client on, and comes back at the end.
//
// With partitioned > 0, each client is, with that probability (drawn from
// its own stream, so the rest of the run is the same), partitioned at
// retirement: it vanishes after its write, its retirement never reaching
// a server. Its dot stays active, counted, for good; left is the number of
// borrowed dots at the end (the largest at one server), which the run
// checks equals the partitioned clients.
func borrowSizeRun(clients int, seed uint64, downFrom int, partitioned float64) (end, peak, peakBorrowed, downPeak, downBorrowed, left int) {
	r := rand.New(rand.NewPCG(seed, uint64(clients)))
	pr := rand.New(rand.NewPCG(seed^0x70a27, uint64(clients)))
	nPart := 0
	servers := make([]*State, sizeServers)
	for i := range servers {
		servers[i] = New()
		servers[i].Create(permID(i), permID(i))
	}
	up := func(i int) bool { return i != 0 || downFrom < 0 }
	type client struct {
		c    *Client
		aged bool
		part bool // partitioned at retirement
	}
	var active []*client
	var total uint64
	started := 0
	for started < clients || len(active) > 0 {
		if started == downFrom {
			up = func(i int) bool { return i != 0 }
		}
		for len(active) < sizeConcurrent && started < clients {
			var id ID
			id[0] = 0xc0
			binary.BigEndian.PutUint64(id[8:], uint64(started))
			c := NewClient(id)
			srv := r.IntN(sizeServers)
			for !up(srv) {
				srv = r.IntN(sizeServers)
			}
			_ = c.Ask(permID(srv))
			if err := c.Lent(servers[srv].Create(permID(srv), id)); err != nil {
				panic(err)
			}
			k := uint64(1 + r.IntN(5))
			w, err := c.Add(k)
			if err != nil {
				panic(err)
			}
			total += k
			to := r.IntN(sizeServers)
			for !up(to) {
				to = r.IntN(sizeServers)
			}
			servers[to].Join(w)
			active = append(active, &client{c: c, part: partitioned > 0 && pr.Float64() < partitioned})
			started++
		}
		next := active[:0]
		for _, a := range active {
			if !a.aged {
				a.aged = true
				next = append(next, a)
				continue
			}
			if a.part {
				nPart++
				continue
			}
			ret, err := a.c.Retire()
			if err != nil {
				panic(err)
			}
			to := r.IntN(sizeServers)
			for !up(to) {
				to = r.IntN(sizeServers)
			}
			servers[to].Join(ret)
		}
		active = next
		gossip(servers, up)
		for i, s := range servers {
			if !up(i) {
				continue
			}
			n := encLen(s)
			peak = max(peak, n)
			peakBorrowed = max(peakBorrowed, s.Borrowed())
			if downFrom >= 0 && started > downFrom {
				downPeak = max(downPeak, n)
			}
		}
	}
	if downFrom >= 0 {
		for _, s := range servers[1:] {
			downBorrowed = max(downBorrowed, s.Borrowed())
		}
	}
	all := func(int) bool { return true }
	for range 2 {
		gossip(servers, all)
	}
	for _, s := range servers {
		if s.Value() != total || s.Borrowed() != nPart {
			panic(fmt.Sprintf("server reads %d of %d with %d borrowed dots, %d clients partitioned", s.Value(), total, s.Borrowed(), nPart))
		}
		end = max(end, encLen(s))
		left = max(left, s.Borrowed())
	}
	return end, peak, peakBorrowed, downPeak, downBorrowed, left
}

// gossip: every server that is up transfers, then every pair of servers up
// exchanges full states.
func gossip(servers []*State, up func(int) bool) {
	for i, s := range servers {
		if up(i) {
			s.TransferAll(permID(i))
		}
	}
	for i, s := range servers {
		for j, o := range servers {
			if i != j && up(i) && up(j) {
				s.Join(o)
			}
		}
	}
}

// handoffSizeRun is the same churn with counters/handoff: a client adds
// 1–5 and exchanges views with one of 3 tier-0 servers until its
// increments are handed off; the servers merge each other after every tick.
//
// With partitioned > 0, each client is, with that probability (its own
// stream), partitioned at retirement: after its first exchange (the server
// opened its slot, the client made its token) it vanishes, its last
// message lost. The slot stays at the server for good and the client's
// increments, in its token, are lost; slots is the number of slots at the
// end (the largest at one server), lost the increments never handed off.
func handoffSizeRun(clients int, seed uint64, partitioned float64) (end, peak, slots int, lost uint64) {
	r := rand.New(rand.NewPCG(seed, uint64(clients)))
	pr := rand.New(rand.NewPCG(seed^0x70a27, uint64(clients)))
	var servers []*handoff.Counter
	for i := range sizeServers {
		servers = append(servers, handoff.NewCounter(handoff.ID(permID(i)), 0))
	}
	type client struct {
		c         *handoff.Counter
		srv       *handoff.Counter
		part      bool // partitioned at retirement
		exchanged bool
		added     uint64
	}
	var active []*client
	started := 0
	for started < clients || len(active) > 0 {
		for len(active) < sizeConcurrent && started < clients {
			var id handoff.ID
			id[0] = 0xc0
			binary.BigEndian.PutUint64(id[8:], uint64(started))
			c := handoff.NewCounter(id, 1)
			k := uint64(1 + r.IntN(5))
			c.Add(k)
			active = append(active, &client{c: c, srv: servers[r.IntN(sizeServers)], added: k,
				part: partitioned > 0 && pr.Float64() < partitioned})
			started++
		}
		next := active[:0]
		for _, a := range active {
			if a.part && a.exchanged {
				lost += a.added
				continue
			}
			a.srv.Merge(a.c.View(a.srv.ID(), 0))
			a.c.Merge(a.srv.View(a.c.ID(), 1))
			a.exchanged = true
			if !a.c.Handed() {
				next = append(next, a)
			}
		}
		active = next
		for _, s := range servers {
			for _, o := range servers {
				s.Merge(o)
			}
		}
		for _, s := range servers {
			peak = max(peak, encLen(s))
		}
	}
	for _, s := range servers {
		end = max(end, encLen(s))
		slots = max(slots, s.Slots())
	}
	return end, peak, slots, lost
}

func sizeRun(clients int, seed uint64) sizeRow {
	row := sizeRow{clients: clients}
	r := rand.New(rand.NewPCG(seed, uint64(clients)))
	counts := make([]uint64, clients)
	for i := range counts {
		counts[i] = uint64(1 + r.IntN(5))
	}
	row.gcounter = gcounterBytes(counts)
	row.borrowEnd, row.borrowPeak, row.peakBorrowed, _, _, _ = borrowSizeRun(clients, seed, -1, 0)
	row.downEnd, _, _, row.downPeak, row.downBorrowed, _ = borrowSizeRun(clients, seed, clients/2, 0)
	row.handoffEnd, row.handoffPeak, _, _ = handoffSizeRun(clients, seed, 0)
	return row
}

// TestStateSize prints the encoded state bytes per cell against the number
// of clients that ever incremented (1 → 10,000, 50 at a time, each
// borrowing, writing once and retiring), for a naive G-counter, handoff
// counters (tier 0) and Borrow-Counter, plus Borrow-Counter when one of the
// three creators is down from the middle of the run to its end:
//
//	go test -run TestStateSize -v ./counters/borrow/
//
// It fails if the quiescent or peak server state grows with the clients,
// and with -plotdir DIR writes DIR/borrow-state-size.png.
func TestStateSize(t *testing.T) {
	sizes := []int{1, 10, 100, 1000, 10_000}
	if testing.Short() {
		sizes = sizes[:4]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%8s %12s %13s %13s %13s %13s %13s %15s %15s %14s\n",
		"clients", "G-counter B", "handoff end", "handoff peak", "borrow end", "borrow peak", "peak borrowed",
		"down: peak B", "down: borrowed", "down: end B")
	var rows []sizeRow
	for _, n := range sizes {
		row := sizeRun(n, 1)
		rows = append(rows, row)
		fmt.Fprintf(&b, "%8d %12d %13d %13d %13d %13d %13d %15d %15d %14d\n",
			row.clients, row.gcounter, row.handoffEnd, row.handoffPeak, row.borrowEnd, row.borrowPeak, row.peakBorrowed,
			row.downPeak, row.downBorrowed, row.downEnd)
	}
	t.Logf("state bytes per cell, 3 servers, clients come and go %d at a time:\n%s", sizeConcurrent, b.String())
	// Flat in the clients: the quiescent state holds the 3 servers' dots,
	// the peak at most the 50 active clients' dots on top.
	for _, r := range rows {
		if r.borrowEnd > 200 || r.borrowPeak > 3*40+sizeConcurrent*30 || r.downEnd > 200 {
			t.Errorf("borrow state grew with the clients: %+v", r)
		}
	}
	if *flagPlotDir != "" {
		path, err := plotSizes(*flagPlotDir, rows)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}

// plotSizes writes the state-size table as dir/borrow-state-size.png: the
// bytes of the largest server state against the clients that ever
// incremented, log-log, for a naive G-counter, handoff and borrow.
func plotSizes(dir string, rows []sizeRow) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("plot: %w", err)
	}
	p := plot.New()
	p.Title.Text = "Largest server state per cell vs clients that ever incremented (50 at a time)"
	p.X.Label.Text = "clients"
	p.Y.Label.Text = "bytes"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{}, plot.LogTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	series := []struct {
		name   string
		y      func(sizeRow) int
		c      color.Color
		dashed bool
	}{
		{"naive G-counter", func(r sizeRow) int { return r.gcounter }, color.RGBA{0xd6, 0x27, 0x28, 0xff}, false},
		{"handoff, peak", func(r sizeRow) int { return r.handoffPeak }, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, true},
		{"handoff, quiescent", func(r sizeRow) int { return r.handoffEnd }, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, false},
		{"borrow, peak", func(r sizeRow) int { return r.borrowPeak }, color.RGBA{0x1f, 0x77, 0xb4, 0xff}, true},
		{"borrow, quiescent", func(r sizeRow) int { return r.borrowEnd }, color.RGBA{0x1f, 0x77, 0xb4, 0xff}, false},
	}
	for _, s := range series {
		var xys plotter.XYs
		for _, r := range rows {
			xys = append(xys, plotter.XY{X: float64(r.clients), Y: float64(s.y(r))})
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return "", fmt.Errorf("plot: %w", err)
		}
		l.Color, pts.Color = s.c, s.c
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	path := filepath.Join(dir, "borrow-state-size.png")
	if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return "", fmt.Errorf("plot: %w", err)
	}
	return path, nil
}

// BenchmarkStateSize reports the same figures as metrics, for one size:
//
//	go test -run '^$' -bench StateSize -benchtime 1x ./counters/borrow/
func BenchmarkStateSize(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			var row sizeRow
			for range b.N {
				row = sizeRun(n, 1)
			}
			b.ReportMetric(float64(row.gcounter), "gcounter-B")
			b.ReportMetric(float64(row.handoffPeak), "handoff-peak-B")
			b.ReportMetric(float64(row.borrowEnd), "borrow-end-B")
			b.ReportMetric(float64(row.borrowPeak), "borrow-peak-B")
			b.ReportMetric(float64(row.downPeak), "borrow-creator-down-peak-B")
		})
	}
}

type churnRow struct {
	clients                  int
	partitioned              float64
	handoffEnd, handoffSlots int
	handoffLost              uint64
	borrowEnd, borrowLeft    int
}

func churnRun(clients int, partitioned float64, seed uint64) churnRow {
	row := churnRow{clients: clients, partitioned: partitioned}
	row.handoffEnd, _, row.handoffSlots, row.handoffLost = handoffSizeRun(clients, seed, partitioned)
	row.borrowEnd, _, _, _, _, row.borrowLeft = borrowSizeRun(clients, seed, -1, partitioned)
	return row
}

// TestStateSizeChurn is the churn of TestStateSize with a share of the
// clients partitioned at retirement (1 % and 10 %), the churn of the
// handoff reference simulator: a partitioned handoff client leaves its slot
// at its server (and its increments, in its token, are lost); a
// partitioned borrow client leaves its dot, active and counted (the value
// stays exact, borrowSizeRun checks it). It prints, for each, the bytes of
// the largest server state at the end and what is left there:
//
//	go test -run TestStateSizeChurn -v ./counters/borrow/
func TestStateSizeChurn(t *testing.T) {
	sizes := []int{100, 1000, 10_000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%8s %12s %14s %14s %14s %12s %12s\n",
		"clients", "partitioned", "handoff end B", "handoff slots", "handoff lost", "borrow end B", "borrow dots")
	for _, p := range []float64{0.01, 0.10} {
		for _, n := range sizes {
			row := churnRun(n, p, 1)
			if row.borrowLeft == 0 && n >= 1000 {
				t.Errorf("%d clients, %.0f %% partitioned: no borrowed dot left", n, 100*p)
			}
			if row.handoffSlots == 0 && n >= 1000 {
				t.Errorf("%d clients, %.0f %% partitioned: no handoff slot left", n, 100*p)
			}
			fmt.Fprintf(&b, "%8d %11.0f%% %14d %14d %14d %12d %12d\n",
				n, 100*p, row.handoffEnd, row.handoffSlots, row.handoffLost, row.borrowEnd, row.borrowLeft)
		}
	}
	t.Logf("largest server state at the end, 3 servers, clients come and go %d at a time, a share partitioned at retirement:\n%s", sizeConcurrent, b.String())
}
