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

// CDF is the regularized incomplete beta function I_x(α, β).
func (d Beta) CDF(x float64) float64 {
	a, b := d.Alpha, d.Beta
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	front := math.Exp(a*math.Log(x) + b*math.Log1p(-x) - lbeta(a, b))
	// The continued fraction converges fast for x < (a+1)/(a+b+2); use the
	// symmetry I_x(a,b) = 1 − I_{1−x}(b,a) beyond it.
	if x < (a+1)/(a+b+2) {
		return front * betacf(a, b, x) / a
	}
	return 1 - front*betacf(b, a, 1-x)/b
}

// Quantile is the x with CDF(x) = p, found by bisection to 1e-10.
func (d Beta) Quantile(p float64) float64 {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	lo, hi := 0.0, 1.0
	for hi-lo > 1e-10 {
		mid := (lo + hi) / 2
		if d.CDF(mid) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Interval is the central interval holding mass of the distribution (0.95
// for a 95 % interval).
func (d Beta) Interval(mass float64) (lo, hi float64) {
	tail := (1 - mass) / 2
	return d.Quantile(tail), d.Quantile(1 - tail)
}

func lbeta(a, b float64) float64 {
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	return la + lb - lab
}

// betacf evaluates the continued fraction of the incomplete beta function
// by the modified Lentz method (Numerical Recipes, 6.4).
func betacf(a, b, x float64) float64 {
	const tiny = 1e-300
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1-qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		m2 := 2 * fm
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 3e-15 {
			break
		}
	}
	return h
}
