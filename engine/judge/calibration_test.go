package judge

import (
	"math"
	"testing"
)

func TestCalibrate(t *testing.T) {
	kappa := func(k float64) *float64 { return &k }
	tests := []struct {
		name  string
		pairs []CalibrationPair
		want  Calibration
	}{
		{
			// By hand (judge label, review label at 0.5; |r − v|):
			//   (1, 1)      pass pass  TP  0
			//   (0.75, 1)   pass pass  TP  0.25
			//   (0.5, 0.5)  pass pass  TP  0     (0.5 is a pass on both sides)
			//   (0, 0)      fail fail  TN  0
			//   (0.25, 0)   fail fail  TN  0.25
			//   (0.75, 0)   pass fail  FP  0.75
			//   (0, 1)      fail pass  FN  1
			//   (0.25, 0.5) fail pass  FN  0.25
			// TP 3, TN 2, FP 1, FN 2, n 8.
			// agreement = (3+2)/8 = 0.625.
			// judge pass 4, judge fail 4; review pass 5, review fail 3.
			// p_e = (4/8)(5/8) + (4/8)(3/8) = 20/64 + 12/64 = 0.5.
			// κ = (0.625 − 0.5)/(1 − 0.5) = 0.25  (integers: (8·5 − 32)/(64 − 32) = 8/32).
			// MAE = (0 + 0.25 + 0 + 0 + 0.25 + 0.75 + 1 + 0.25)/8 = 2.5/8 = 0.3125.
			name:  "mixed",
			pairs: []CalibrationPair{{1, 1}, {0.75, 1}, {0.5, 0.5}, {0, 0}, {0.25, 0}, {0.75, 0}, {0, 1}, {0.25, 0.5}},
			want: Calibration{Pairs: 8, Agreement: 0.625, Kappa: kappa(0.25), MAE: 0.3125,
				Confusion: Confusion{TP: 3, TN: 2, FP: 1, FN: 2}},
		},
		{
			// TP 1, TN 1: p_o 1, p_e = 1/4 + 1/4 = 0.5, κ = 1; MAE 0.
			name:  "perfect, both classes",
			pairs: []CalibrationPair{{1, 1}, {0, 0}},
			want:  Calibration{Pairs: 2, Agreement: 1, Kappa: kappa(1), Confusion: Confusion{TP: 1, TN: 1}},
		},
		{
			// FP 1, FN 1: p_o 0, p_e 0.5, κ = −0.5/0.5 = −1; MAE (1 + 1)/2 = 1.
			name:  "always wrong",
			pairs: []CalibrationPair{{1, 0}, {0, 1}},
			want:  Calibration{Pairs: 2, Agreement: 0, Kappa: kappa(-1), MAE: 1, Confusion: Confusion{FP: 1, FN: 1}},
		},
		{
			// The judge always passes, the reviews split: TP 1, FP 1. p_o 0.5,
			// p_e = (2/2)(1/2) + (0/2)(1/2) = 0.5, κ = 0; MAE (0 + 1)/2 = 0.5.
			name:  "constant judge",
			pairs: []CalibrationPair{{1, 1}, {1, 0}},
			want:  Calibration{Pairs: 2, Agreement: 0.5, Kappa: kappa(0), MAE: 0.5, Confusion: Confusion{TP: 1, FP: 1}},
		},
		{
			// Every pair passes on both sides: p_e = 1, κ undefined (nil);
			// agreement 1; MAE (0 + 0.25)/2 = 0.125.
			name:  "degenerate, all pass",
			pairs: []CalibrationPair{{1, 1}, {0.75, 1}},
			want:  Calibration{Pairs: 2, Agreement: 1, MAE: 0.125, Confusion: Confusion{TP: 2}},
		},
		{
			// Every pair fails on both sides: κ undefined; MAE (0.25 + 0.25)/2.
			name:  "degenerate, all fail",
			pairs: []CalibrationPair{{0, 0.25}, {0.25, 0}},
			want:  Calibration{Pairs: 2, Agreement: 1, MAE: 0.25, Confusion: Confusion{TN: 2}},
		},
		{
			// One pair: p_e = 1 whatever it is when the labels agree.
			name:  "single pair",
			pairs: []CalibrationPair{{0.5, 0.75}},
			want:  Calibration{Pairs: 1, Agreement: 1, MAE: 0.25, Confusion: Confusion{TP: 1}},
		},
		{
			// One disagreeing pair: p_o 0, p_e = 1·0 + 0·1 = 0, κ = 0.
			name:  "single disagreement",
			pairs: []CalibrationPair{{0.5, 0.25}},
			want:  Calibration{Pairs: 1, Agreement: 0, Kappa: kappa(0), MAE: 0.25, Confusion: Confusion{FP: 1}},
		},
		{
			name: "no pairs",
			want: Calibration{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Calibrate(tc.pairs)
			w := tc.want
			if got.Pairs != w.Pairs || got.Confusion != w.Confusion {
				t.Errorf("pairs %d confusion %+v, want %d %+v", got.Pairs, got.Confusion, w.Pairs, w.Confusion)
			}
			if !approx(got.Agreement, w.Agreement) || !approx(got.MAE, w.MAE) {
				t.Errorf("agreement %v MAE %v, want %v %v", got.Agreement, got.MAE, w.Agreement, w.MAE)
			}
			switch {
			case (got.Kappa == nil) != (w.Kappa == nil):
				t.Errorf("kappa %v, want %v", fmtPtr(got.Kappa), fmtPtr(w.Kappa))
			case got.Kappa != nil && !approx(*got.Kappa, *w.Kappa):
				t.Errorf("kappa %v, want %v", *got.Kappa, *w.Kappa)
			}
		})
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func fmtPtr(f *float64) any {
	if f == nil {
		return "nil"
	}
	return *f
}
