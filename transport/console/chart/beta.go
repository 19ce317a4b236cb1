package chart

import "math"

// Beta is a Beta(Alpha, Beta) distribution; both parameters are positive.
type Beta struct{ Alpha, Beta float64 }

// Mean is α/(α+β).
func (d Beta) Mean() float64 { return d.Alpha / (d.Alpha + d.Beta) }

// PDF is the density at x; 0 outside (0,1), and +Inf at an edge where a
// parameter below 1 makes it unbounded.
func (d Beta) PDF(x float64) float64 {
	if x < 0 || x > 1 {
		return 0
	}
	a, b := d.Alpha, d.Beta
	switch {
	case x == 0 && a < 1, x == 1 && b < 1:
		return math.Inf(1)
	case x == 0:
		if a == 1 {
			return b
		}
		return 0
	case x == 1:
		if b == 1 {
			return a
		}
		return 0
	}
	return math.Exp((a-1)*math.Log(x) + (b-1)*math.Log1p(-x) - lbeta(a, b))
}

// lbeta is ln B(a, b).
func lbeta(a, b float64) float64 {
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	return la + lb - lab
}
