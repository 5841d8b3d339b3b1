package fbfexp

import (
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one line (or set of markers) of a plot.
type series struct {
	name   string
	x, y   []float64
	points bool // markers only (e.g. the paper's reported values)
	dashed bool
	// wide draws the line 4 pt wide and pale, so that a series drawn
	// after it over the same values still leaves it visible on both sides.
	wide bool
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

// shapes are the line series' markers, one per series in turn, so that
// series stay apart where their lines coincide.
var shapes = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.RingGlyph{},
	draw.PyramidGlyph{}, draw.BoxGlyph{}, draw.PlusGlyph{},
}

// entry is one series as drawn: its legend label and its plotters (line
// nil for markers only).
type entry struct {
	label string
	xys   plotter.XYs
	line  *plotter.Line
	pts   *plotter.Scatter
}

// drawn is a plot and what it shows.
type drawn struct {
	p       *plot.Plot
	entries []entry
}

// newPlot draws the series into a plot. On a log axis, points ≤ 0 are left
// out. No line series hides another: each has its own marker, a line that
// shares points with later ones is drawn wider than they are (and its
// markers larger), and a line series whose points are all those of an
// earlier one says so in its legend entry ("= name").
func newPlot(title, xlabel, ylabel string, logX, logY bool, ss []series) (drawn, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	}
	p.Add(plotter.NewGrid())
	// Lines drawn later go over earlier ones where they share points: a
	// line is one band (1.25 pt) wider than the widest later line it shares
	// a point with, so that it shows around them.
	widths := make([]float64, len(ss))
	for i := len(ss) - 1; i >= 0; i-- {
		widths[i] = 1
		if ss[i].wide {
			widths[i] = 4
		}
		for j := i + 1; j < len(ss); j++ {
			if !ss[j].points && !ss[i].points && sharePoint(ss[i], ss[j]) {
				widths[i] = max(widths[i], widths[j]+1.25)
			}
		}
	}
	d := drawn{p: p}
	for i, s := range ss {
		var xys plotter.XYs
		for j := range s.x {
			if (logY && s.y[j] <= 0) || (logX && s.x[j] <= 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: s.x[j], Y: s.y[j]})
		}
		if len(xys) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		if s.points {
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return drawn{}, err
			}
			sc.GlyphStyle.Color = c
			sc.GlyphStyle.Shape = draw.CrossGlyph{}
			sc.GlyphStyle.Radius = vg.Points(4)
			p.Add(sc)
			p.Legend.Add(s.name, sc)
			d.entries = append(d.entries, entry{label: s.name, xys: xys, pts: sc})
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return drawn{}, err
		}
		l.Color, pts.Color = c, c
		pts.Shape = shapes[i%len(shapes)]
		pts.Radius = vg.Points(2.5)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		l.Width, pts.Radius = vg.Points(widths[i]), vg.Points(widths[i]+1.5)
		if s.wide {
			l.Color = pale(c)
		}
		name := s.name
		for _, e := range ss[:i] {
			if !e.points && slices.Equal(e.x, s.x) && slices.Equal(e.y, s.y) {
				name += " (= " + e.name + ")"
				break
			}
		}
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
		d.entries = append(d.entries, entry{label: name, xys: xys, line: l, pts: pts})
	}
	return d, nil
}

// sharePoint reports whether a and b have a point in common.
func sharePoint(a, b series) bool {
	for j := range a.x {
		for k := range b.x {
			if a.x[j] == b.x[k] && a.y[j] == b.y[k] {
				return true
			}
		}
	}
	return false
}

// pale is c at 40 % opacity.
func pale(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 0x66}
}

// savePlot draws the series into DIR/name (PNG) and records the plot in
// res (for the tests).
func savePlot(res *Result, dir, name, title, xlabel, ylabel string, logX, logY bool, ss []series) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	d, err := newPlot(title, xlabel, ylabel, logX, logY, ss)
	if err != nil {
		return "", err
	}
	if res.plots == nil {
		res.plots = map[string]drawn{}
	}
	res.plots[name] = d
	path := filepath.Join(dir, name)
	return path, d.p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// logTicks is plot.LogTicks with plain labels: 10, 100, 1000 at and above
// 1, and 0.01, 0.001, 0.0001, 1e-05 below it, instead of 1e+01 or float
// noise.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = tickLabel(ts[i].Value)
		}
	}
	return ts
}

func tickLabel(v float64) string {
	if v >= 1 && v < 1e7 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 1, 64)
}
