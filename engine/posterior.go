package engine

import (
	"math"
	"math/rand/v2"
)

// ProbBestDraws is how many Monte Carlo rounds ProbBest runs by default:
// its standard error is at most √(0.25/4000) ≈ 0.008.
const ProbBestDraws = 4000

// probBestBudget bounds the Beta draws of one ProbBest call (rounds times
// variations): an agent with many variations gets fewer rounds, so one
// read never costs more than about 10 ms of sampling.
const probBestBudget = 400000

// ProbBest estimates, for each variation, the probability that its quality
// is the highest of all under the posteriors: in each of draws rounds (at
// most probBestBudget/len(vs), at least 100) it draws once from every
// posterior, as selection does, and credits the highest draw (ties to the
// earlier variation). The estimates sum to 1; an empty list gives nil.
func ProbBest(vs []Variation, draws int, rnd *rand.Rand) []float64 {
	if len(vs) == 0 {
		return nil
	}
	draws = max(min(draws, probBestBudget/len(vs)), 100)
	wins := make([]int, len(vs))
	for range draws {
		best, bestDraw := 0, -1.0
		for i, v := range vs {
			if d := SampleBeta(rnd, v.Alpha, v.Beta); d > bestDraw {
				best, bestDraw = i, d
			}
		}
		wins[best]++
	}
	out := make([]float64, len(vs))
	for i, w := range wins {
		out[i] = float64(w) / float64(draws)
	}
	return out
}

// Interval returns the equal-tailed credible interval of the variation's
// posterior holding mass p (0.95: from its 2.5% to its 97.5% quantile).
func (v Variation) Interval(p float64) [2]float64 {
	tail := (1 - p) / 2
	return [2]float64{BetaQuantile(tail, v.Alpha, v.Beta), BetaQuantile(1-tail, v.Alpha, v.Beta)}
}

// BetaQuantile is the q-quantile of Beta(a, b): the x with I_x(a, b) = q,
// found by bisection, which converges for every shape (Newton steps do
// not, near 0 and 1 for small a or b), to within a few ulps of x.
func BetaQuantile(q, a, b float64) float64 {
	switch {
	case q <= 0:
		return 0
	case q >= 1:
		return 1
	}
	lo, hi := 0.0, 1.0
	for range 100 {
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			break
		}
		if BetaCDF(mid, a, b) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// BetaCDF is the regularized incomplete beta function I_x(a, b), by the
// continued fraction of Numerical Recipes (§6.4), evaluated where it
// converges fast and mirrored (I_x(a,b) = 1 − I_{1−x}(b,a)) elsewhere.
func BetaCDF(x, a, b float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(x, a, b) / a
	}
	return 1 - front*betaFraction(1-x, b, a)/b
}

// betaFraction evaluates the continued fraction of I_x(a, b) by the
// modified Lentz method. It needs O(√max(a, b)) terms; the cap is far
// beyond what any posterior reached by feedback needs.
func betaFraction(x, a, b float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1-qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 100000; m++ {
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
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}
