package engine

import (
	"math"
	"math/rand/v2"
)

// SampleBeta draws from Beta(alpha, beta) as X/(X+Y) with X ~ Gamma(alpha)
// and Y ~ Gamma(beta). Both parameters must be positive.
func SampleBeta(rnd *rand.Rand, alpha, beta float64) float64 {
	x := sampleGamma(rnd, alpha)
	y := sampleGamma(rnd, beta)
	if x+y == 0 {
		return 0.5
	}
	return x / (x + y)
}

// sampleGamma draws from Gamma(shape, 1) by Marsaglia and Tsang's method
// ("A Simple Method for Generating Gamma Variables", 2000). For shape < 1 it
// draws Gamma(shape+1) and scales by U^(1/shape).
func sampleGamma(rnd *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rnd.Float64()
		return sampleGamma(rnd, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		var x, v float64
		for {
			x = rnd.NormFloat64()
			v = 1 + c*x
			if v > 0 {
				break
			}
		}
		v = v * v * v
		u := rnd.Float64()
		x2 := x * x
		if u < 1-0.0331*x2*x2 {
			return d * v
		}
		if math.Log(u) < 0.5*x2+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
