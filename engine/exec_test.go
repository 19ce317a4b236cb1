package engine

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// executeAny runs any command through its typed method, for tests that
// script commands as values.
func executeAny(a *Agent, cmd any, now time.Time, rnd *rand.Rand) (any, []Event, error) {
	switch c := cmd.(type) {
	case CreateAgent:
		return box(a.CreateAgent(c, now))
	case CreateRun:
		return box(a.CreateRun(c, now, rnd))
	case FinishRun:
		return box(a.FinishRun(c, now, rnd))
	case ClaimObject:
		return box(a.ClaimObject(c, now))
	case RegisterTrace:
		return box(a.RegisterTrace(c, now))
	case RecordSignal:
		return box(a.RecordSignal(c, now, rnd))
	case PutObjective:
		return box(a.PutObjective(c, now))
	case CreateVariation:
		return box(a.CreateVariation(c, now, rnd))
	case RecordFeedback:
		return box(a.RecordFeedback(c, now, rnd))
	case ReportReward:
		return box(a.ReportReward(c, now, rnd))
	}
	panic(fmt.Sprintf("unknown command %T", cmd))
}

func box[R any](res R, evs []Event, err error) (any, []Event, error) {
	if err != nil {
		return nil, evs, err
	}
	return res, evs, nil
}
