package judge

import "math"

// CalibrationThreshold splits a score into a binary label: a value v is a
// pass when v ≥ CalibrationThreshold, a fail otherwise. It is applied alike
// to the judge's reward and to the human review.
const CalibrationThreshold = 0.5

// CalibrationPair is one job scored twice: by the model judges (Reward, a
// judged reward's scores.reward) and by a human (Review, the job's review
// value). Both are in [0, 1]; Calibrate uses them as given.
type CalibrationPair struct {
	Reward float64
	Review float64
}

// Confusion counts the pairs by their binary labels, the review taken as the
// truth: TP judge pass & review pass, TN judge fail & review fail, FP judge
// pass & review fail, FN judge fail & review pass.
type Confusion struct {
	TP, TN, FP, FN int
}

// Calibration is how well the judges agree with the reviews.
type Calibration struct {
	Pairs int
	// Agreement is the fraction of pairs whose labels agree: (TP+TN)/Pairs.
	Agreement float64
	// Kappa is Cohen's κ of the two labels, nil when undefined (see
	// Calibrate).
	Kappa *float64
	// MAE is the mean of |Reward − Review| over the pairs (the raw values,
	// not the labels).
	MAE       float64
	Confusion Confusion
}

// Calibrate measures the judge's rewards against the reviews of the same
// jobs.
//
// With n pairs, labels at CalibrationThreshold, and the confusion counts:
//
//	agreement p_o = (TP + TN) / n
//	expected  p_e = ((TP+FP)/n)·((TP+FN)/n) + ((TN+FN)/n)·((TN+FP)/n)
//	κ             = (p_o − p_e) / (1 − p_e)
//	MAE           = Σ |reward − review| / n
//
// κ is computed in integers as (n·(TP+TN) − S) / (n² − S) with
// S = (TP+FP)(TP+FN) + (TN+FN)(TN+FP), so that p_e = 1 is detected exactly.
//
// Degenerate case: when p_e = 1 (S = n²), both the judge and the reviews put
// every pair in one and the same class (all pass, or all fail); κ is 0/0 and
// undefined, and Kappa is nil (rendered null), though Agreement is then 1.
// With no pairs (n = 0) every figure is 0 and Kappa is nil; callers list no
// such group.
func Calibrate(pairs []CalibrationPair) Calibration {
	var c Calibration
	c.Pairs = len(pairs)
	if c.Pairs == 0 {
		return c
	}
	var absErr float64
	for _, p := range pairs {
		judgePass, reviewPass := p.Reward >= CalibrationThreshold, p.Review >= CalibrationThreshold
		switch {
		case judgePass && reviewPass:
			c.Confusion.TP++
		case !judgePass && !reviewPass:
			c.Confusion.TN++
		case judgePass:
			c.Confusion.FP++
		default:
			c.Confusion.FN++
		}
		absErr += math.Abs(p.Reward - p.Review)
	}
	n := c.Pairs
	m := c.Confusion
	c.Agreement = float64(m.TP+m.TN) / float64(n)
	c.MAE = absErr / float64(n)
	s := int64(m.TP+m.FP)*int64(m.TP+m.FN) + int64(m.TN+m.FN)*int64(m.TN+m.FP)
	nn := int64(n) * int64(n)
	if s != nn {
		k := float64(int64(n)*int64(m.TP+m.TN)-s) / float64(nn-s)
		c.Kappa = &k
	}
	return c
}
