package handoff

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
)

var flagPlotDir = flag.String("plotdir", "", "directory where TestStateSize writes state-size.png")

// gcounterBytes is the size of a naive G-counter (§4) holding one entry per
// node that ever incremented: a count of entries, then per entry a 16-byte
// id and the count as a uvarint (the same id and count encoding as ours).
func gcounterBytes(counts []uint64) int {
	n := 1 + binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(counts)))
	for _, c := range counts {
		n += IDLen + len(binary.AppendUvarint(nil, c))
	}
	return n
}

type sizeRow struct {
	clients             int
	gcounter            int
	handoffEnd, handoff int // tier-0 state bytes: quiescent at the end, and the peak
	peakSlots           int
}

// sizeRun has clients (tier 1) come and go, at most 50 at a time, each
// incrementing 1–5 times and exchanging views with one of three tier-0
// servers until its increments are handed off, then retiring; the servers
// gossip with each other after every tick.
func sizeRun(clients int, seed uint64) sizeRow {
	r := rand.New(rand.NewPCG(seed, uint64(clients)))
	servers := []*Counter{NewCounter(simID(0), 0), NewCounter(simID(1), 0), NewCounter(simID(2), 0)}
	type client struct {
		c   *Counter
		srv *Counter
	}
	var active []client
	counts := make([]uint64, 0, clients)
	var total uint64
	row := sizeRow{clients: clients}
	started := 0
	measure := func() {
		for _, s := range servers {
			row.handoff = max(row.handoff, len(mustMarshal(s)))
			row.peakSlots = max(row.peakSlots, s.Slots())
		}
	}
	for started < clients || len(active) > 0 {
		for len(active) < 50 && started < clients {
			c := NewCounter(simID(1000+started), 1)
			k := uint64(1 + r.IntN(5))
			c.Add(k)
			counts = append(counts, k)
			total += k
			active = append(active, client{c, servers[r.IntN(len(servers))]})
			started++
		}
		next := active[:0]
		for _, a := range active {
			a.srv.Merge(a.c.View(a.srv.ID(), 0))
			a.c.Merge(a.srv.View(a.c.ID(), 1))
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
		measure()
	}
	// Retired clients send nothing more; the servers hold no slot for them
	// (each client's last exchange filled its slot).
	for _, s := range servers {
		if s.Fetch() != total {
			panic(fmt.Sprintf("server fetches %d of %d", s.Fetch(), total))
		}
		row.handoffEnd = max(row.handoffEnd, len(mustMarshal(s)))
	}
	row.gcounter = gcounterBytes(counts)
	return row
}

// TestStateSize compares the state a naive G-counter needs (one entry per
// client that ever incremented) with a handoff counter's tier-0 state, as
// the number of clients grows: the identity explosion the paper solves.
func TestStateSize(t *testing.T) {
	sizes := []int{1, 10, 100, 1000, 10_000}
	if testing.Short() {
		sizes = sizes[:4]
	}
	var rows []sizeRow
	var b strings.Builder
	fmt.Fprintf(&b, "%8s %14s %22s %22s %10s\n", "clients", "G-counter B", "handoff tier-0 B (end)", "handoff tier-0 B (peak)", "peak slots")
	for _, n := range sizes {
		row := sizeRun(n, 1)
		rows = append(rows, row)
		fmt.Fprintf(&b, "%8d %14d %22d %22d %10d\n", row.clients, row.gcounter, row.handoffEnd, row.handoff, row.peakSlots)
	}
	t.Logf("state size, 3 tier-0 servers, clients come and go 50 at a time:\n%s", b.String())
	last := rows[len(rows)-1]
	if last.handoffEnd > 200 || last.handoff > 2000 {
		t.Errorf("tier-0 state grew with the clients: %+v", last)
	}
	if *flagPlotDir != "" {
		path, err := plotSizes(*flagPlotDir, rows)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}

func plotSizes(dir string, rows []sizeRow) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := plot.New()
	p.Title.Text = "Counter state size vs clients that ever incremented"
	p.X.Label.Text = "clients"
	p.Y.Label.Text = "bytes"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{}, plot.LogTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	series := []struct {
		name string
		y    func(sizeRow) int
		c    color.Color
	}{
		{"naive G-counter", func(r sizeRow) int { return r.gcounter }, color.RGBA{0xd6, 0x27, 0x28, 0xff}},
		{"handoff tier 0, peak (50 concurrent clients)", func(r sizeRow) int { return r.handoff }, color.RGBA{0xff, 0x7f, 0x0e, 0xff}},
		{"handoff tier 0, quiescent", func(r sizeRow) int { return r.handoffEnd }, color.RGBA{0x1f, 0x77, 0xb4, 0xff}},
	}
	for _, s := range series {
		var xys plotter.XYs
		for _, r := range rows {
			xys = append(xys, plotter.XY{X: float64(r.clients), Y: float64(s.y(r))})
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return "", err
		}
		l.Color, pts.Color = s.c, s.c
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	path := filepath.Join(dir, "state-size.png")
	return path, p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
