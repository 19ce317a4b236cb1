package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSampleBetaMoments(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ a, b float64 }{{1, 1}, {2.5, 2}, {0.5, 0.5}, {30, 5}, {1, 40}, {0.5, 3}, {4, 0.3}} {
		const n = 200000
		var sum, sq float64
		for range n {
			x := SampleBeta(rnd, c.a, c.b)
			if x < 0 || x > 1 || math.IsNaN(x) {
				t.Fatalf("Beta(%v,%v) drew %v", c.a, c.b, x)
			}
			sum += x
			sq += x * x
		}
		mean := sum / n
		variance := sq/n - mean*mean
		wantMean := c.a / (c.a + c.b)
		wantVar := c.a * c.b / ((c.a + c.b) * (c.a + c.b) * (c.a + c.b + 1))
		// Standard error of the mean is sqrt(var/n) ≤ 0.0012; 5 of them is a
		// bound a correct sampler misses with negligible probability.
		if math.Abs(mean-wantMean) > 5*math.Sqrt(wantVar/n) {
			t.Errorf("Beta(%v,%v) mean %.4f, want %.4f", c.a, c.b, mean, wantMean)
		}
		if math.Abs(variance-wantVar) > 0.05*wantVar+1e-4 {
			t.Errorf("Beta(%v,%v) variance %.5f, want %.5f", c.a, c.b, variance, wantVar)
		}
	}
}

func BenchmarkSampleBeta(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var s float64
	for b.Loop() {
		s += SampleBeta(rnd, 2.5, 2)
	}
	_ = s
}
