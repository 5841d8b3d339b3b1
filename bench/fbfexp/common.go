// Package fbfexp reproduces the Forgetful Bloom Filter experiments of the
// paper (Figs. 8–13, Section VI-A..C) in virtual time: every run is seeded
// and deterministic, writes a CSV and a PNG plot, and returns a table that
// sets our numbers beside the paper's.
package fbfexp

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/idemkv/idemkv/fbf"
)

// epoch is virtual time zero.
var epoch = time.Date(2015, 5, 11, 0, 0, 0, 0, time.UTC)

// Options are shared by every experiment.
type Options struct {
	Out      string    // directory for the CSV and PNG files
	Seed     uint64    // base seed
	Progress io.Writer // where to draw progress bars; nil for none
}

// Row is one line of a comparison table. Paper is NaN when the paper reports
// no number for it.
type Row struct {
	Metric      string
	Ours, Paper float64
	Note        string
}

// Result is what an experiment produced.
type Result struct {
	Name, Title string
	Command     string // the command that reproduces it
	Files       []string
	Rows        []Row

	plots map[string]drawn // by file name, for the tests
}

// WriteTable prints the comparison table: ours, the paper's, and ours/paper.
func (r Result) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s — %s\n", r.Name, r.Title)
	if r.Command != "" {
		fmt.Fprintf(w, "reproduce: %s\n", r.Command)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tours\tpaper\tours/paper\tnote")
	for _, row := range r.Rows {
		paper, ratio := "—", "—"
		if !math.IsNaN(row.Paper) {
			paper = fmtNum(row.Paper)
			if row.Paper != 0 {
				ratio = fmt.Sprintf("%.2f", row.Ours/row.Paper)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.Metric, fmtNum(row.Ours), paper, ratio, row.Note)
	}
	tw.Flush()
	for _, f := range r.Files {
		fmt.Fprintf(w, "wrote %s\n", f)
	}
	fmt.Fprintln(w)
}

func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v == 0:
		return "0"
	case v == math.Trunc(v) && math.Abs(v) < 1e7:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 0.01 && math.Abs(v) < 1e4:
		return fmt.Sprintf("%.3g", v)
	default:
		return fmt.Sprintf("%.2e", v)
	}
}

var na = math.NaN()

// id returns a 16-byte op id (client, sequence).
func id(buf *[16]byte, client, seq uint64) []byte {
	binary.BigEndian.PutUint64(buf[:8], client)
	binary.BigEndian.PutUint64(buf[8:], seq)
	return buf[:]
}

// Inserted ids use client 2·seed, probes 2·seed+1: never the same id.
func insertClient(seed uint64) uint64 { return seed << 1 }
func probeClient(seed uint64) uint64  { return seed<<1 | 1 }

// progress is a progress bar that is silent when w is nil.
type progress struct{ bar *progressbar.ProgressBar }

func newProgress(w io.Writer, total int, desc string) *progress {
	if w == nil {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30))}
}

func (p *progress) Add(n int) {
	if p.bar != nil {
		p.bar.Add(n)
	}
}

func (p *progress) Done() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// writeCSV writes a header and rows to DIR/name.
func writeCSV(dir, name string, header []string, rows [][]float64, labels ...[]string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	var b strings.Builder
	b.WriteString(strings.Join(header, ",") + "\n")
	for i, r := range rows {
		var cells []string
		for _, l := range labels {
			cells = append(cells, l[i])
		}
		for _, v := range r {
			cells = append(cells, fmt.Sprintf("%g", v))
		}
		b.WriteString(strings.Join(cells, ",") + "\n")
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// newFilter builds a filter at virtual time zero.
func newFilter(c fbf.Config) (*fbf.Filter, error) {
	c.Start = epoch
	if c.Clock == nil {
		c.Clock = fbf.NewManualClock(epoch)
	}
	return fbf.New(c)
}
