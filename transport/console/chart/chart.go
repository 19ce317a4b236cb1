// Package chart computes the geometry of the console's SVG charts: Beta
// density curves, histogram bars and stacked time bars, in pixels of a Frame.
// It knows nothing of HTML; the console's templates place its numbers.
// Coordinates are rounded to a tenth of a pixel, which is finer than any
// screen draws and keeps the markup short.
package chart

import (
	"math"
	"strconv"
	"strings"
)

// Frame is a chart's size and the margins around its plot area, in pixels.
type Frame struct {
	Width, Height            float64
	Left, Right, Top, Bottom float64
}

// X maps u in [0,1] to the plot area's left..right.
func (f Frame) X(u float64) float64 { return round(f.Left + u*(f.Width-f.Left-f.Right)) }

// Y maps v in [0,1] to the plot area's bottom..top (SVG's y grows down).
func (f Frame) Y(v float64) float64 { return round(f.Height - f.Bottom - v*(f.Height-f.Top-f.Bottom)) }

// Base is the plot area's bottom edge.
func (f Frame) Base() float64 { return f.Y(0) }

// PlotWidth and PlotHeight are the plot area's size.
func (f Frame) PlotWidth() float64  { return f.Width - f.Left - f.Right }
func (f Frame) PlotHeight() float64 { return f.Height - f.Top - f.Bottom }

// Point is a pixel position.
type Point struct{ X, Y float64 }

// Curve is one density drawn in a frame: Path the outline, Area the same
// outline closed along the base (for a translucent fill), MeanX where the
// distribution's mean falls, Peak the highest point drawn.
type Curve struct {
	Path, Area string
	MeanX      float64
	Peak       Point
}

// Densities draws the densities of ds over x in [0,1] on one shared
// vertical scale, each from samples points (at least 2) taken at the
// centres of equal steps, so an unbounded edge (a parameter below 1) is
// never sampled at its pole. The tallest sample of all reaches the top.
func Densities(f Frame, ds []Beta, samples int) []Curve {
	samples = max(samples, 2)
	ys := make([][]float64, len(ds))
	top := 0.0
	for i, d := range ds {
		ys[i] = make([]float64, samples+2)
		for j := range samples + 2 {
			y := d.PDF(sampleX(j, samples))
			if math.IsInf(y, 0) || math.IsNaN(y) {
				y = 0
			}
			ys[i][j] = y
			top = max(top, y)
		}
	}
	if top == 0 {
		top = 1
	}
	out := make([]Curve, len(ds))
	for i, d := range ds {
		var b strings.Builder
		c := Curve{MeanX: f.X(d.Mean()), Peak: Point{Y: math.Inf(1)}}
		for j, y := range ys[i] {
			p := Point{f.X(sampleX(j, samples)), f.Y(y / top)}
			if j == 0 {
				b.WriteByte('M')
			} else {
				b.WriteByte('L')
			}
			writePoint(&b, p)
			if p.Y < c.Peak.Y {
				c.Peak = p
			}
		}
		c.Path = b.String()
		c.Area = c.Path + "L" + num(f.X(1)) + "," + num(f.Base()) + "L" + num(f.X(0)) + "," + num(f.Base()) + "Z"
		out[i] = c
	}
	return out
}

// sampleX is the j-th of samples+2 abscissae: the two ends of [0,1] (where
// a density is taken as its one-sided limit when finite, else 0) and the
// centres of samples equal steps between them.
func sampleX(j, samples int) float64 {
	switch j {
	case 0:
		return 0
	case samples + 1:
		return 1
	}
	return (float64(j) - 0.5) / float64(samples)
}

// Rect is a bar in pixels.
type Rect struct{ X, Y, W, H float64 }

// Bars lays counts out as adjacent bars filling the plot area's width,
// scaled so that top reaches the top (top ≤ 0 takes the largest count).
// gap pixels separate neighbours.
func Bars(f Frame, counts []int, top int, gap float64) []Rect {
	if top <= 0 {
		for _, c := range counts {
			top = max(top, c)
		}
	}
	top = max(top, 1)
	out := make([]Rect, len(counts))
	step := f.PlotWidth() / float64(max(len(counts), 1))
	for i, c := range counts {
		y := f.Y(float64(c) / float64(top))
		out[i] = Rect{X: round(f.Left + float64(i)*step + gap/2), Y: y, W: round(max(step-gap, 1)), H: round(f.Base() - y)}
	}
	return out
}

// Stacked lays series out as stacked bars, one column per bucket:
// series[s][b] is series s's count in bucket b, drawn above series s−1's.
// The tallest column reaches the top. Every series has as many buckets.
func Stacked(f Frame, series [][]int, gap float64) [][]Rect {
	buckets := 0
	if len(series) > 0 {
		buckets = len(series[0])
	}
	totals := make([]int, buckets)
	top := 1
	for b := range buckets {
		for s := range series {
			totals[b] += series[s][b]
		}
		top = max(top, totals[b])
	}
	out := make([][]Rect, len(series))
	below := make([]int, buckets)
	step := f.PlotWidth() / float64(max(buckets, 1))
	for s := range series {
		out[s] = make([]Rect, buckets)
		for b := range buckets {
			y0 := f.Y(float64(below[b]) / float64(top))
			below[b] += series[s][b]
			y1 := f.Y(float64(below[b]) / float64(top))
			out[s][b] = Rect{X: round(f.Left + float64(b)*step + gap/2), Y: y1, W: round(max(step-gap, 1)), H: round(y0 - y1)}
		}
	}
	return out
}

func writePoint(b *strings.Builder, p Point) {
	b.WriteString(num(p.X))
	b.WriteByte(',')
	b.WriteString(num(p.Y))
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func round(v float64) float64 { return math.Round(v*10) / 10 }
