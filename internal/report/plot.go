package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Series is one line of a plot. Lo/Hi, when set (same length as X), draw a
// shaded band (mean ± std).
type Series struct {
	Label  string
	X, Y   []float64
	Lo, Hi []float64
	Dashed bool
}

// Figure is one chart: a title, axis labels with units, and its lines.
type Figure struct {
	// Name is the PNG file's base name without extension.
	Name   string
	Title  string
	XLabel string
	YLabel string
	Series []Series
	// YMin/YMax fix the y range when YFixed is set (rates in [0, 1]).
	YFixed     bool
	YMin, YMax float64
	// IntX marks the x axis with whole numbers only (steps, iterations).
	IntX bool
	// Note is a sentence shown under the figure in the HTML report.
	Note string
}

// empty reports whether no series has a point.
func (f *Figure) empty() bool {
	for _, s := range f.Series {
		if len(s.X) > 0 {
			return false
		}
	}
	return true
}

// palette is a colour-blind-friendly qualitative palette (Okabe–Ito, then
// Tableau extras).
var palette = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{213, 94, 0, 255},    // vermillion
	{0, 158, 115, 255},   // green
	{204, 121, 167, 255}, // purple
	{230, 159, 0, 255},   // orange
	{86, 180, 233, 255},  // sky
	{120, 120, 120, 255}, // grey
	{240, 228, 66, 255},  // yellow
	{148, 103, 189, 255},
	{140, 86, 75, 255},
}

// Pixel size and resolution of a PNG at scale 1.
const (
	plotW   = 900
	plotH   = 420
	plotDPI = 110
)

// Render draws f as a PNG image, scale × the default size (scale ≤ 0
// means 1).
func (f *Figure) Render(scale float64) ([]byte, error) {
	if scale <= 0 {
		scale = 1
	}
	p := plot.New()
	p.Title.Text = f.Title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	p.X.Tick.Label.Font.Size = vg.Points(9)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	p.Legend.TextStyle.Font.Size = vg.Points(9.5)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.Padding = vg.Points(4)
	p.Legend.ThumbnailWidth = vg.Points(22)
	for _, st := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		st.Font.Variant = "Sans"
	}
	p.X.Tick.Marker = niceTicks{integer: f.IntX}
	p.Y.Tick.Marker = niceTicks{}
	p.Title.Padding = vg.Points(6)
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{225}
	grid.Horizontal.Color = color.Gray{225}
	p.Add(grid)

	entries := 0
	ymin, ymax := math.Inf(1), math.Inf(-1)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for i, s := range f.Series {
		if len(s.X) == 0 {
			continue
		}
		col := palette[i%len(palette)]
		xys := make(plotter.XYs, len(s.X))
		for j := range s.X {
			xys[j] = plotter.XY{X: finite(s.X[j]), Y: finite(s.Y[j])}
			xmin, xmax = min(xmin, xys[j].X), max(xmax, xys[j].X)
			ymin, ymax = min(ymin, xys[j].Y), max(ymax, xys[j].Y)
		}
		if len(s.Lo) == len(s.X) && len(s.Hi) == len(s.X) && len(s.X) > 1 {
			band := make(plotter.XYs, 0, 2*len(s.X))
			for j := range s.X {
				band = append(band, plotter.XY{X: finite(s.X[j]), Y: finite(s.Hi[j])})
				ymax = max(ymax, finite(s.Hi[j]))
			}
			for j := len(s.X) - 1; j >= 0; j-- {
				band = append(band, plotter.XY{X: finite(s.X[j]), Y: finite(s.Lo[j])})
				ymin = min(ymin, finite(s.Lo[j]))
			}
			poly, err := plotter.NewPolygon(band)
			if err != nil {
				return nil, fmt.Errorf("report: plot %s: %w", f.Name, err)
			}
			poly.Color = color.NRGBA{col.R, col.G, col.B, 45}
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("report: plot %s: %w", f.Name, err)
		}
		line.Color = col
		line.Width = vg.Points(1.6)
		if s.Dashed {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		points.Color = col
		points.Shape = draw.CircleGlyph{}
		points.Radius = vg.Points(1.8)
		if len(xys) > 60 {
			points.Radius = 0
		}
		p.Add(line, points)
		if s.Label != "" {
			p.Legend.Add(s.Label, line)
			entries++
		}
	}
	if f.YFixed {
		ymin, ymax = f.YMin, f.YMax
	}
	if math.IsInf(ymin, 0) {
		ymin, ymax = 0, 1
	}
	if ymax-ymin < 1e-12 {
		pad := math.Max(math.Abs(ymax)*0.1, 0.5)
		ymin, ymax = ymin-pad, ymax+pad
	} else if !f.YFixed {
		pad := (ymax - ymin) * 0.05
		ymin, ymax = ymin-pad, ymax+pad
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	if xmax-xmin < 1e-12 {
		xmin, xmax = xmin-1, xmax+1
	}
	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Min, p.Y.Max = ymin, ymax

	// The page size in points is fixed; scale changes the resolution only,
	// so a scaled plot has the same layout.
	w := vg.Length(plotW) * vg.Inch / vg.Length(plotDPI)
	h := vg.Length(plotH) * vg.Inch / vg.Length(plotDPI)
	dpi := max(int(math.Round(plotDPI*scale)), 10)
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(c)
	// The legend goes in a column right of the axes, so it never hides a line.
	legW := vg.Length(0)
	if entries > 0 {
		legW = p.Legend.Rectangle(dc).Size().X + vg.Points(14)
		legW = min(legW, w*0.35)
	}
	leg := p.Legend
	p.Legend = plot.NewLegend()
	p.Draw(draw.Crop(dc, 0, -legW, 0, 0))
	if legW > 0 {
		lc := draw.Crop(dc, w-legW+vg.Points(6), 0, 0, -vg.Points(28))
		leg.Draw(lc)
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("report: plot %s: %w", f.Name, err)
	}
	return buf.Bytes(), nil
}

// niceTicks labels about six round values (1, 2, 2.5 or 5 × 10^k) and puts
// an unlabelled tick halfway between them; integer axes never get
// fractional labels.
type niceTicks struct{ integer bool }

func (n niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return []plot.Tick{{Value: lo, Label: formatTick(lo, 1)}}
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	if n.integer && step < 1 {
		step = 1
	}
	var ticks []plot.Tick
	start := math.Ceil(lo/step) * step
	for v := start; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: formatTick(v, step)})
		if half := v + step/2; half <= hi && (!n.integer || step >= 2) {
			ticks = append(ticks, plot.Tick{Value: half})
		}
	}
	if half := start - step/2; half >= lo && (!n.integer || step >= 2) {
		ticks = append(ticks, plot.Tick{Value: half})
	}
	return ticks
}

// formatTick prints v with as many decimals as step needs.
func formatTick(v, step float64) string {
	if math.Abs(v) < step*1e-6 {
		v = 0
	}
	if a := math.Abs(v); a != 0 && (a >= 1e5 || step < 1e-3) {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	dec := 0
	for s := step; dec < 6 && math.Abs(s-math.Round(s)) > 1e-9; s *= 10 {
		dec++
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}
