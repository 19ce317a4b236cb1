package chart

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestBetaAgainstClosedForms checks the density against Beta distributions
// whose density is a polynomial.
func TestBetaAgainstClosedForms(t *testing.T) {
	cases := []struct {
		name string
		d    Beta
		pdf  func(x float64) float64
	}{
		{"uniform", Beta{1, 1}, func(float64) float64 { return 1 }},
		{"rising", Beta{2, 1}, func(x float64) float64 { return 2 * x }},
		{"falling", Beta{1, 2}, func(x float64) float64 { return 2 * (1 - x) }},
		{"hump", Beta{2, 2}, func(x float64) float64 { return 6 * x * (1 - x) }},
		{"skewed", Beta{3, 1}, func(x float64) float64 { return 3 * x * x }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, x := range []float64{0.01, 0.1, 0.25, 0.5, 0.7, 0.9, 0.99} {
				if got, want := c.d.PDF(x), c.pdf(x); !near(got, want, 1e-9) {
					t.Errorf("PDF(%v) = %v, want %v", x, got, want)
				}
			}
		})
	}
}

func TestBetaEdgesAndMean(t *testing.T) {
	if got := (Beta{0.5, 0.5}).PDF(0); !math.IsInf(got, 1) {
		t.Errorf("Beta(.5,.5) at 0 = %v, want +Inf", got)
	}
	if got := (Beta{2, 1}).PDF(1); got != 2 {
		t.Errorf("Beta(2,1) at 1 = %v, want 2", got)
	}
	if got := (Beta{2, 2}).PDF(1.5); got != 0 {
		t.Errorf("outside [0,1] = %v, want 0", got)
	}
	if m := (Beta{3, 1}).Mean(); m != 0.75 {
		t.Errorf("mean = %v", m)
	}
}

var frame = Frame{Width: 200, Height: 100, Left: 10, Right: 10, Top: 10, Bottom: 10}

func TestFrameMapsUnitSquare(t *testing.T) {
	cases := []struct {
		u, v, x, y float64
	}{{0, 0, 10, 90}, {1, 1, 190, 10}, {0.5, 0.5, 100, 50}}
	for _, c := range cases {
		if x, y := frame.X(c.u), frame.Y(c.v); x != c.x || y != c.y {
			t.Errorf("(%v,%v) → (%v,%v), want (%v,%v)", c.u, c.v, x, y, c.x, c.y)
		}
	}
}

// parsePath reads "Mx,yLx,y…" back into points.
func parsePath(t *testing.T, p string) []Point {
	t.Helper()
	var pts []Point
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == 'M' || r == 'L' || r == 'Z' }) {
		var pt Point
		if _, err := fmt.Sscanf(seg, "%g,%g", &pt.X, &pt.Y); err != nil {
			t.Fatalf("segment %q: %v", seg, err)
		}
		pts = append(pts, pt)
	}
	return pts
}

func TestDensitiesShareOneScale(t *testing.T) {
	ds := []Beta{{2, 8}, {8, 2}, {50, 50}}
	curves := Densities(frame, ds, 100)
	if len(curves) != 3 {
		t.Fatalf("%d curves", len(curves))
	}
	// The narrowest density (Beta(50,50)) is the tallest: it reaches the top.
	if curves[2].Peak.Y != frame.Y(1) {
		t.Errorf("tallest peak at y=%v, want the top %v", curves[2].Peak.Y, frame.Y(1))
	}
	for i, c := range curves {
		pts := parsePath(t, c.Path)
		if len(pts) != 102 {
			t.Errorf("curve %d: %d points, want 102", i, len(pts))
		}
		if pts[0].X != frame.X(0) || pts[len(pts)-1].X != frame.X(1) {
			t.Errorf("curve %d spans x %v..%v", i, pts[0].X, pts[len(pts)-1].X)
		}
		for _, p := range pts {
			if p.Y < frame.Y(1) || p.Y > frame.Base() {
				t.Errorf("curve %d leaves the plot at %v", i, p)
			}
		}
		if !strings.HasSuffix(c.Area, "Z") || !strings.HasPrefix(c.Area, c.Path) {
			t.Errorf("curve %d area does not close its path", i)
		}
		if want := frame.X(ds[i].Mean()); c.MeanX != want {
			t.Errorf("curve %d mean at %v, want %v", i, c.MeanX, want)
		}
	}
	// Peaks fall where the modes are: (a−1)/(a+b−2).
	if !near(curves[0].Peak.X, frame.X(1.0/8), 2) || !near(curves[1].Peak.X, frame.X(7.0/8), 2) {
		t.Errorf("peaks at %v and %v", curves[0].Peak.X, curves[1].Peak.X)
	}
}

func TestDensitiesWithUnboundedEdge(t *testing.T) {
	c := Densities(frame, []Beta{{0.5, 0.5}}, 50)[0]
	for _, p := range parsePath(t, c.Path) {
		if math.IsNaN(p.X) || math.IsNaN(p.Y) || p.Y < frame.Y(1) {
			t.Fatalf("point %v outside the frame", p)
		}
	}
}

func TestBars(t *testing.T) {
	rs := Bars(frame, []int{0, 2, 4, 1}, 0, 2)
	if len(rs) != 4 {
		t.Fatal(len(rs))
	}
	if rs[2].Y != frame.Y(1) || rs[2].H != frame.PlotHeight() {
		t.Errorf("largest bar %v does not fill the height", rs[2])
	}
	if rs[0].H != 0 || rs[1].H != frame.PlotHeight()/2 {
		t.Errorf("bars %v %v", rs[0], rs[1])
	}
	if rs[0].X != frame.Left+1 || rs[0].W != 43 {
		t.Errorf("first bar at x=%v w=%v", rs[0].X, rs[0].W)
	}
	// A shared top keeps two histograms comparable.
	if half := Bars(frame, []int{4}, 8, 0)[0]; half.H != frame.PlotHeight()/2 {
		t.Errorf("with top 8, a count of 4 is %v high", half.H)
	}
}

func TestStacked(t *testing.T) {
	rs := Stacked(frame, [][]int{{1, 0, 2}, {3, 1, 0}}, 0)
	if len(rs) != 2 || len(rs[0]) != 3 {
		t.Fatalf("shape %d×%d", len(rs), len(rs[0]))
	}
	// Column 0 is the tallest (4): its second series ends at the top.
	if rs[1][0].Y != frame.Y(1) {
		t.Errorf("column 0 tops at %v", rs[1][0].Y)
	}
	// Each series sits on the one below it.
	for b := range 3 {
		if got, want := rs[1][b].Y+rs[1][b].H, rs[0][b].Y; !near(got, want, 0.11) {
			t.Errorf("bucket %d: upper bar ends at %v, lower starts at %v", b, got, want)
		}
	}
	if rs[0][0].H != frame.PlotHeight()/4 {
		t.Errorf("1 of 4 is %v high", rs[0][0].H)
	}
}
