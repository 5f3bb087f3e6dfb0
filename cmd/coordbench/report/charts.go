package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
)

const (
	panelWidth  = 4.2 * vg.Inch
	panelHeight = 3.4 * vg.Inch
	chartDPI    = 96
	// maxNines is how far right the latency charts reach: 99.999%.
	maxNines = 5.0
)

// WriteCharts draws, per scenario: the latency distribution (one panel per client count),
// throughput against clients when more than one count was measured, and each *_ms extra
// against clients likewise. It returns the charts by scenario for Markdown.
func WriteCharts(s *Set, dir string) (map[string][]Chart, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("charts folder: %w", err)
	}
	out := map[string][]Chart{}
	for _, sc := range s.Scenarios {
		levels := s.okClients(sc)
		if len(levels) == 0 {
			continue
		}
		var panels []*plot.Plot
		for _, n := range levels {
			p, err := s.latencyPlot(sc, n)
			if err != nil {
				return nil, err
			}
			panels = append(panels, p)
		}
		file := "latency-" + sc + ".png"
		if err := savePanels(filepath.Join(dir, file), panels); err != nil {
			return nil, err
		}
		out[sc] = append(out[sc], Chart{File: file, Caption: sc + ": latency distribution by client count"})

		if len(levels) > 1 {
			p, err := s.againstClients(sc, "throughput (ops/s)", func(a *Agg) float64 { return a.Throughput() })
			if err != nil {
				return nil, err
			}
			file := "throughput-" + sc + ".png"
			if err := savePanels(filepath.Join(dir, file), []*plot.Plot{p}); err != nil {
				return nil, err
			}
			out[sc] = append(out[sc], Chart{File: file, Caption: sc + ": throughput against clients"})

			var extra []*plot.Plot
			for _, name := range s.extraNames(sc) {
				if !strings.HasSuffix(name, "_ms") {
					continue
				}
				p, err := s.againstClients(sc, name, func(a *Agg) float64 {
					v, _, _, ok := a.Extra(name)
					if !ok {
						return math.NaN()
					}
					return v
				})
				if err != nil {
					return nil, err
				}
				extra = append(extra, p)
			}
			if len(extra) > 0 {
				file := "settle-" + sc + ".png"
				if err := savePanels(filepath.Join(dir, file), extra); err != nil {
					return nil, err
				}
				out[sc] = append(out[sc], Chart{File: file, Caption: sc + ": time to a stable assignment against members"})
			}
		}
	}
	return out, nil
}

// okClients are the client counts at which some target measured sc.
func (s *Set) okClients(sc string) []int {
	var out []int
	for _, n := range s.Clients(sc) {
		for _, t := range s.Targets {
			if a := s.Aggs[Key{sc, n, t.Name}]; a != nil && a.Status == result.StatusOK && a.Ops > 0 {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// latencyPlot is a percentile spectrum: x is the number of nines (0 = p0, 2 = p99, 3 = p99.9),
// y the latency in ms on a log scale, one line per target.
func (s *Set) latencyPlot(sc string, n int) (*plot.Plot, error) {
	p := newPlot(fmt.Sprintf("%s, %d %s", sc, n, plural(n, "client")), "percentile", "latency (ms)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var ticks plot.ConstantTicks
	for i, l := range []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"} {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: l})
	}
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = 0, maxNines
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, t := range s.Targets {
		a := s.Aggs[Key{sc, n, t.Name}]
		if a == nil || a.Status != result.StatusOK || a.Latency.Count() == 0 {
			continue
		}
		// Beyond log10(count) nines the spectrum is one sample: stop there.
		top := math.Min(maxNines, math.Log10(float64(a.Latency.Count())))
		var xys plotter.XYs
		for x := 0.0; x <= top+1e-9; x += 0.02 {
			q := 1 - math.Pow(10, -x)
			ms := float64(a.Latency.Quantile(q)) / 1e6
			y := math.Max(ms, 1e-3)
			lo, hi = math.Min(lo, y), math.Max(hi, y)
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		style(&l.LineStyle, i)
		p.Add(l)
		p.Legend.Add(t.Name, l)
	}
	if hi >= lo {
		// Explicit range: a log axis cannot pad a flat line, and the top quarter (in log
		// terms) is left free for the legend.
		p.Y.Min, p.Y.Max = lo/1.5, hi*math.Pow(hi/lo*2.25, 0.35)
	}
	return p, nil
}

// againstClients plots value(agg) against client count, one line per target, log2 x axis.
func (s *Set) againstClients(sc, label string, value func(*Agg) float64) (*plot.Plot, error) {
	ylabel := label
	if strings.HasSuffix(label, "_ms") {
		ylabel = "ms"
	}
	p := newPlot(sc+": "+label, "clients (members)", ylabel)
	p.X.Scale = plot.LogScale{}
	levels := s.okClients(sc)
	var ticks plot.ConstantTicks
	for _, n := range levels {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	p.X.Tick.Marker = ticks
	p.Y.Min = 0
	top := 0.0
	for i, t := range s.Targets {
		var xys plotter.XYs
		for _, n := range levels {
			a := s.Aggs[Key{sc, n, t.Name}]
			if a == nil || a.Status != result.StatusOK {
				continue
			}
			if v := value(a); !math.IsNaN(v) {
				xys = append(xys, plotter.XY{X: float64(n), Y: v})
				top = math.Max(top, v)
			}
		}
		if len(xys) == 0 {
			continue
		}
		sort.Slice(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		style(&l.LineStyle, i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(t.Name, l, pts)
	}
	p.Y.Max = top * 1.3 // room for the legend above the lines
	if top == 0 {
		p.Y.Max = 1
	}
	if len(levels) == 1 { // a log axis needs a range
		p.X.Min, p.X.Max = float64(levels[0])/2, float64(levels[0])*2
	}
	return p, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

func style(ls *draw.LineStyle, i int) {
	ls.Color = plotutil.Color(i)
	ls.Dashes = plotutil.Dashes(i)
	ls.Width = vg.Points(1.5)
}

// savePanels lays plots side by side in one PNG.
func savePanels(path string, plots []*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(panelWidth*vg.Length(len(plots)), panelHeight), vgimg.UseDPI(chartDPI),
		vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for j, p := range plots {
		p.Draw(canvases[0][j])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write chart %s: %w", path, err)
	}
	return f.Close()
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
