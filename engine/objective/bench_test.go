package objective

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// benchSignals returns n signals in receipt order across the seed
// objective's kinds, received evenly over 2.2 days from t0 (so the last tenth
// is late and more than half fall outside within_s), each occurring up to an
// hour before it was received, so receipt order is not occurrence order.
func benchSignals(rnd *rand.Rand, n int) []Signal {
	kinds := []string{"human.rating", "external.ticket_closed", "run.succeeded", "custom.reply_sent"}
	signals := make([]Signal, n)
	for i := range signals {
		rcv := time.Duration(i) * (2*day + day/5) / time.Duration(n)
		kind := kinds[rnd.IntN(len(kinds))]
		v := 1.0
		if kind == "human.rating" {
			v = float64(1 + rnd.IntN(5))
		}
		signals[i] = Signal{Kind: kind, Value: v, ReceivedAt: t0.Add(rcv),
			OccurredAt: t0.Add(rcv - time.Duration(rnd.Int64N(int64(time.Hour)))), Seq: uint64(i + 1)}
	}
	return signals
}

// BenchmarkEvaluate evaluates a lone reward from observations, as the
// engine gathers them.
func BenchmarkEvaluate(b *testing.B) {
	d := seedDefinition(b)
	for _, n := range []int{10, 100, 1000} {
		var kinds Kinds
		kinds.Add(d)
		var obs []Observation
		for _, s := range benchSignals(rand.New(rand.NewPCG(1, uint64(n))), n) {
			obs = append(obs, kinds.Observe(s))
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var a Arena
				a.EvaluateObserved(d, 1, finished, &kinds, obs, t0.Add(3*day))
			}
		})
	}
}
