package fbfexp

import (
	"image/color"
	"os"
	"path/filepath"
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
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

// savePlot draws the series into DIR/name (PNG). On a log axis, points ≤ 0
// are left out.
func savePlot(dir, name, title, xlabel, ylabel string, logX, logY bool, ss []series) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
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
				return "", err
			}
			sc.GlyphStyle.Color = c
			sc.GlyphStyle.Shape = draw.CrossGlyph{}
			sc.GlyphStyle.Radius = vg.Points(4)
			p.Add(sc)
			p.Legend.Add(s.name, sc)
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return "", err
		}
		l.Color, pts.Color = c, c
		pts.Shape = draw.CircleGlyph{}
		pts.Radius = vg.Points(2)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	path := filepath.Join(dir, name)
	return path, p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// logTicks is plot.LogTicks with labels like 1e-05 instead of float noise.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 1, 64)
		}
	}
	return ts
}
