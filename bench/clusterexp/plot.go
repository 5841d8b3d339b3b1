package clusterexp

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotFig6 draws the value replica A reads after each step, one bar group
// per step, for each mode and the paper.
func plotFig6(path string, rows []Fig6Row) error {
	p, err := fig6Plot(rows)
	if err != nil {
		return err
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

// fig6Plot is the plot of plotFig6; its value axis starts at 0.
func fig6Plot(rows []Fig6Row) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Figs. 6/7: counter c1 after each step (replica A)"
	p.Y.Label.Text = "value read"
	series := map[string]plotter.Values{}
	var steps []string
	for _, r := range rows {
		if r.Mode == "vanilla" {
			steps = append(steps, r.Step[:1])
		}
		series[r.Mode] = append(series[r.Mode], float64(r.A))
	}
	names := fig6Modes(rows)
	colors := []color.RGBA{{R: 200, A: 255}, {G: 150, A: 255}, {R: 120, G: 120, B: 120, A: 255}, {B: 200, A: 255}}
	w := vg.Points(10)
	for i, n := range names {
		v := series[n]
		if len(v) > len(steps) {
			v = v[:len(steps)]
		}
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return nil, err
		}
		bars.Color = colors[i]
		bars.Offset = vg.Points((float64(i) - float64(len(names)-1)/2) * 11)
		p.Add(bars)
		p.Legend.Add(n, bars)
	}
	p.NominalX(steps...)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min, p.Y.Max = 0, 12
	p.X.Label.Text = fmt.Sprintf("step (paper: %v after step 4 vanilla, 6 with the FBF)", 9)
	return p, nil
}

// fig6Modes are the bar groups of fig6Plot: idemkv's three modes, and
// Cassandra's when rows hold it.
func fig6Modes(rows []Fig6Row) []string {
	names := []string{"vanilla", "fbf", "legacy"}
	for _, r := range rows {
		if r.Mode == Fig6CassandraMode {
			return append(names, Fig6CassandraMode)
		}
	}
	return names
}
