package console

import (
	"strconv"

	"github.com/plaudit/plaudit/transport/console/chart"
)

// histogramJSON is a version summary's histogram: equal bins over the
// objective's bounds, the matured rewards (those the mean averages) apart
// from the ones that may still move.
type histogramJSON struct {
	Bounds    [2]float64 `json:"bounds"`
	Matured   []int      `json:"matured"`
	Unmatured []int      `json:"unmatured"`
}

// histBin is one bin drawn: the matured bar, and the bar of every reward
// with a value (matured and not) behind it.
type histBin struct {
	Lo, Hi             float64
	Matured, Unmatured int
	M, All             chart.Rect
}

// histView is one histogram drawn, with the axis labels of its bounds.
type histView struct {
	Bins               []histBin
	Matured, Unmatured int // runs counted: matured, and not yet
	Ticks              []tick
	Counted            string // what a solid bar counts: "matured runs" unless told
	// Top is the count the plot's top stands for (the tallest bar of the
	// histograms drawn on one scale), shown on a line there; 0 when empty.
	Top     int
	TopLine tick // the label, above the line
}

// drawHistograms draws hs on one vertical scale, so that side by side
// their bars compare; each keeps its own bounds on the x axis.
func drawHistograms(f chart.Frame, hs []histogramJSON) []histView {
	top := 0
	for _, h := range hs {
		for i := range h.Matured {
			top = max(top, h.Matured[i]+at(h.Unmatured, i))
		}
	}
	out := make([]histView, len(hs))
	for k, h := range hs {
		all := make([]int, len(h.Matured))
		for i, n := range h.Matured {
			all[i] = n + at(h.Unmatured, i)
			out[k].Matured += n
			out[k].Unmatured += at(h.Unmatured, i)
		}
		m, a := chart.Bars(f, h.Matured, top, 1), chart.Bars(f, all, top, 1)
		lo, hi := h.Bounds[0], h.Bounds[1]
		w := (hi - lo) / float64(max(len(h.Matured), 1))
		for i := range h.Matured {
			out[k].Bins = append(out[k].Bins, histBin{Lo: lo + float64(i)*w, Hi: lo + float64(i+1)*w,
				Matured: h.Matured[i], Unmatured: at(h.Unmatured, i), M: m[i], All: a[i]})
		}
		out[k].Counted = "matured runs"
		if top > 0 {
			out[k].Top = top
			out[k].TopLine = tick{X: f.X(1), Y: f.Y(1) - 4, Label: strconv.Itoa(top), Align: "end"}
		}
		out[k].Ticks = []tick{{X: f.X(0), Y: f.Base() + 16, Label: num(lo), Align: "start"},
			{X: f.X(0.5), Y: f.Base() + 16, Label: num((lo + hi) / 2)},
			{X: f.X(1), Y: f.Base() + 16, Label: num(hi), Align: "end"}}
	}
	return out
}

func at(xs []int, i int) int {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}
