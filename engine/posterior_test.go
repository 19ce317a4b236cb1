package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

func lbeta(a, b float64) float64 {
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	return la + lb - lab
}

// pGreaterExact is P(Y > X) for X ~ Beta(xa, xb), Y ~ Beta(ya, yb) with an
// integer ya: the finite sum of Evan Miller, "Formulas for Bayesian A/B
// testing" (2015).
func pGreaterExact(xa, xb, ya, yb float64) float64 {
	var p float64
	for i := 0.0; i < ya; i++ {
		p += math.Exp(lbeta(xa+i, xb+yb) - math.Log(yb+i) - lbeta(1+i, yb) - lbeta(xa, xb))
	}
	return p
}

// pGreaterIntegral is P(Y > X) = ∫ f_Y(y) F_X(y) dy by Simpson's rule, for
// shapes ≥ 1 (bounded densities); it also exercises BetaCDF.
func pGreaterIntegral(xa, xb, ya, yb float64) float64 {
	const n = 20000
	h := 1.0 / n
	f := func(y float64) float64 {
		if y <= 0 || y >= 1 {
			return 0
		}
		dens := math.Exp((ya-1)*math.Log(y) + (yb-1)*math.Log1p(-y) - lbeta(ya, yb))
		return dens * BetaCDF(y, xa, xb)
	}
	sum := f(0) + f(1)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		sum += w * f(float64(i)*h)
	}
	return sum * h / 3
}

func TestProbBestAgainstClosedForm(t *testing.T) {
	const draws = 100000 // the budget allows 200,000 rounds for two variations
	for _, c := range []struct {
		name           string
		xa, xb, ya, yb float64
		exact          func(xa, xb, ya, yb float64) float64
	}{
		{"equal priors", 1, 1, 1, 1, pGreaterExact},
		{"integer, close", 12, 9, 14, 8, pGreaterExact},
		{"integer, far apart", 3, 20, 25, 4, pGreaterExact},
		{"integer, one-sided feedback", 40, 1, 38, 1, pGreaterExact},
		{"half-integer (neutral feedback)", 2.5, 2, 3.5, 2.5, pGreaterIntegral},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := c.exact(c.xa, c.xb, c.ya, c.yb)
			vs := []Variation{{ID: "x", Alpha: c.xa, Beta: c.xb}, {ID: "y", Alpha: c.ya, Beta: c.yb}}
			got := ProbBest(vs, draws, rand.New(rand.NewPCG(7, 11)))
			// 4.5 standard errors of a proportion over draws rounds, plus the
			// quadrature's own error.
			tol := 4.5*math.Sqrt(max(want*(1-want), 1e-4)/draws) + 1e-6
			if math.Abs(got[1]-want) > tol || math.Abs(got[0]+got[1]-1) > 1e-12 {
				t.Fatalf("prob best %v, want [%.5f %.5f] ± %.5f", got, 1-want, want, tol)
			}
		})
	}
}

// The two closed forms agree where both apply, so either checks ProbBest.
func TestClosedFormsAgree(t *testing.T) {
	for _, p := range [][4]float64{{12, 9, 14, 8}, {3, 20, 25, 4}, {2, 2, 5, 3}} {
		e, n := pGreaterExact(p[0], p[1], p[2], p[3]), pGreaterIntegral(p[0], p[1], p[2], p[3])
		if math.Abs(e-n) > 1e-7 {
			t.Errorf("%v: exact %.9f, integral %.9f", p, e, n)
		}
	}
}

func TestProbBestManyVariations(t *testing.T) {
	vs := make([]Variation, 500)
	for i := range vs {
		vs[i] = Variation{Alpha: 1, Beta: 50}
	}
	vs[42].Alpha = 400 // far ahead: wins every round
	got := ProbBest(vs, ProbBestDraws, rand.New(rand.NewPCG(1, 2)))
	if got[42] != 1 {
		t.Fatalf("prob best of the leader %v, want 1", got[42])
	}
	if ProbBest(nil, ProbBestDraws, rand.New(rand.NewPCG(1, 2))) != nil {
		t.Fatal("no variations should give nil")
	}
}

func TestBetaQuantile(t *testing.T) {
	for _, c := range []struct {
		name    string
		q, a, b float64
		want    float64
	}{
		{"uniform", 0.025, 1, 1, 0.025},
		{"uniform upper", 0.975, 1, 1, 0.975},
		{"Beta(a,1) is x^a", 0.025, 3.5, 1, math.Pow(0.025, 1/3.5)},
		{"Beta(1,b) is 1-(1-x)^b", 0.975, 1, 7, 1 - math.Pow(0.025, 1.0/7)},
		{"symmetric median", 0.5, 40.5, 40.5, 0.5},
		{"q = 0", 0, 2, 3, 0},
		{"q = 1", 1, 2, 3, 1},
	} {
		if got := BetaQuantile(c.q, c.a, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: quantile %.15f, want %.15f", c.name, got, c.want)
		}
	}
	// Large posteriors: the quantile inverts the CDF.
	for _, p := range [][3]float64{{0.025, 5000.5, 3001}, {0.975, 0.5, 0.5}, {0.3, 1e5, 2}} {
		x := BetaQuantile(p[0], p[1], p[2])
		if got := BetaCDF(x, p[1], p[2]); math.Abs(got-p[0]) > 1e-9 {
			t.Errorf("CDF(quantile(%v)) = %v", p, got)
		}
	}
	v := Variation{Alpha: 2.5, Beta: 2}
	iv := v.Interval(0.95)
	// Equal tails: 2.5 % of the mass below the interval, 2.5 % above.
	if !(iv[0] < v.Score() && v.Score() < iv[1]) || math.Abs(BetaCDF(iv[0], 2.5, 2)-0.025) > 1e-9 || math.Abs(BetaCDF(iv[1], 2.5, 2)-0.975) > 1e-9 {
		t.Fatalf("interval %v of Beta(2.5, 2)", iv)
	}
}

func BenchmarkProbBest(b *testing.B) {
	vs := []Variation{{Alpha: 12, Beta: 9}, {Alpha: 14, Beta: 8}, {Alpha: 2.5, Beta: 2}}
	rnd := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		ProbBest(vs, ProbBestDraws, rnd)
	}
}
