package console

import (
	"testing"

	"github.com/plaudit/plaudit/transport/console/chart"
)

// TestHistogramsShareOneScale: side by side histograms are drawn on one
// vertical scale (the tallest column of either reaches the top), and a
// bin's unmatured runs stand on its matured ones. A line at the top says
// what count it stands for.
func TestHistogramsShareOneScale(t *testing.T) {
	f := chart.Frame{Width: 120, Height: 110, Top: 10}
	hs := drawHistograms(f, []histogramJSON{
		{Bounds: [2]float64{0, 1}, Matured: []int{1, 2, 0, 0}, Unmatured: []int{0, 2, 0, 0}},
		{Bounds: [2]float64{-1, 1}, Matured: []int{0, 0, 0, 2}, Unmatured: []int{0, 0, 0, 0}},
	})
	cases := []struct {
		name      string
		got, want float64
	}{
		{"the tallest column (4) reaches the top", hs[0].Bins[1].All.H, 100},
		{"its matured part is half of it", hs[0].Bins[1].M.H, 50},
		{"a matured-only bin has no paler part", hs[0].Bins[0].All.H - hs[0].Bins[0].M.H, 0},
		{"the other histogram's 2 is half the height", hs[1].Bins[3].M.H, 50},
		{"bins follow each histogram's own bounds", hs[1].Bins[1].Lo, -0.5},
		{"the last bin ends at hi", hs[1].Bins[3].Hi, 1},
		{"matured runs counted", float64(hs[0].Matured), 3},
		{"unmatured runs counted", float64(hs[0].Unmatured), 2},
		{"the scale's top is the tallest column, in both", float64(hs[0].Top + hs[1].Top), 8},
		{"its label sits above the top", hs[1].TopLine.Y, f.Y(1) - 4},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if hs[1].TopLine.Label != "4" {
		t.Errorf("the scale's label %q, want 4", hs[1].TopLine.Label)
	}
	if empty := drawHistograms(f, []histogramJSON{{Bounds: [2]float64{0, 1}, Matured: []int{0, 0}}}); empty[0].Top != 0 {
		t.Errorf("an empty histogram's scale: %d, want none", empty[0].Top)
	}
	if hs[1].Ticks[0].Label != "-1" || hs[1].Ticks[2].Label != "1" {
		t.Errorf("ticks %v, want the bounds -1 and 1", hs[1].Ticks)
	}
}

// TestVariationsLookApart: no two of the first three rounds of the
// palette's variations are drawn alike: past the palette's colours, the
// curves are dashed, then dotted, and the bars striped, then dotted.
func TestVariationsLookApart(t *testing.T) {
	curves, bars := map[[2]string]int{}, map[[2]string]int{}
	for i := range 3 * len(palette) {
		for _, look := range []struct {
			seen map[[2]string]int
			k    [2]string
		}{{curves, [2]string{colour(i), dash(i)}}, {bars, [2]string{colour(i), fill(i)}}} {
			if j, ok := look.seen[look.k]; ok {
				t.Fatalf("variations %d and %d are both drawn %v", j, i, look.k)
			}
			look.seen[look.k] = i
		}
	}
	if dash(0) != "" || dash(len(palette)-1) != "" || dash(len(palette)) == "" {
		t.Errorf("dashes %q, %q, %q: want the first round solid, the next dashed", dash(0), dash(len(palette)-1), dash(len(palette)))
	}
}
