package objective

import "github.com/plaudit/plaudit/internal/jsonw"

// AppendJSON appends the canonical JSON of d with every default filled in:
// keys horizon_s, default, guards, terms, bounds in that order; each term
// has signal, weight, agg, scale and within_s when set, missing, evidence.
// Parse of the result gives back d.
func (d Definition) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "horizon_s")
	dst = jsonw.Float(dst, d.horizon())
	dst = jsonw.Key(dst, "default")
	dst = floatOr(dst, d.Default, "exclude")
	dst = jsonw.Key(dst, "guards")
	dst = append(dst, '[')
	for i, g := range d.Guards {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		dst = jsonw.Key(dst, "signal")
		dst = jsonw.String(dst, g.Signal)
		dst = jsonw.Key(dst, "op")
		dst = jsonw.String(dst, string(g.Op))
		dst = jsonw.Key(dst, "value")
		dst = jsonw.Float(dst, g.Value)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	dst = jsonw.Key(dst, "terms")
	dst = append(dst, '[')
	for i, t := range d.Terms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = t.appendJSON(dst)
	}
	dst = append(dst, ']')
	dst = jsonw.Key(dst, "bounds")
	dst = pair(dst, d.bounds())
	return append(dst, '}')
}

func (t Term) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "signal")
	dst = jsonw.String(dst, t.Signal)
	dst = jsonw.Key(dst, "weight")
	dst = jsonw.Float(dst, t.Weight)
	dst = jsonw.Key(dst, "agg")
	dst = jsonw.String(dst, string(t.Agg.orDefault()))
	if t.Scale != nil {
		dst = jsonw.Key(dst, "scale")
		dst = pair(dst, *t.Scale)
	}
	if t.WithinS != nil {
		dst = jsonw.Key(dst, "within_s")
		dst = jsonw.Float(dst, *t.WithinS)
	}
	dst = jsonw.Key(dst, "missing")
	dst = floatOr(dst, t.Missing, "skip")
	dst = jsonw.Key(dst, "evidence")
	dst = jsonw.Bool(dst, t.Evidence)
	return append(dst, '}')
}

// AppendJSON appends r as the SPEC's reward response. value, raw and scaled
// are null when nil, matures_at is null when zero.
func (r Reward) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "run_id")
	dst = jsonw.String(dst, r.RunID)
	dst = jsonw.Key(dst, "objective_version")
	dst = jsonw.Int(dst, int64(r.ObjectiveVersion))
	dst = jsonw.Key(dst, "status")
	dst = jsonw.String(dst, string(r.Status))
	dst = jsonw.Key(dst, "value")
	dst = jsonw.FloatPtr(dst, r.Value)
	dst = jsonw.Key(dst, "matured")
	dst = jsonw.Bool(dst, r.Matured)
	dst = jsonw.Key(dst, "matures_at")
	dst = jsonw.TimeOrNull(dst, r.MaturesAt)
	dst = jsonw.Key(dst, "terms")
	dst = append(dst, '[')
	for i, t := range r.Terms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		dst = jsonw.Key(dst, "signal")
		dst = jsonw.String(dst, t.Signal)
		dst = jsonw.Key(dst, "weight")
		dst = jsonw.Float(dst, t.Weight)
		dst = jsonw.Key(dst, "agg")
		dst = jsonw.String(dst, string(t.Agg))
		dst = jsonw.Key(dst, "count")
		dst = jsonw.Int(dst, int64(t.Count))
		dst = jsonw.Key(dst, "raw")
		dst = jsonw.FloatPtr(dst, t.Raw)
		dst = jsonw.Key(dst, "scaled")
		dst = jsonw.FloatPtr(dst, t.Scaled)
		dst = jsonw.Key(dst, "imputed")
		dst = jsonw.Bool(dst, t.Imputed)
		dst = jsonw.Key(dst, "evidence")
		dst = jsonw.Bool(dst, t.Evidence)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	dst = jsonw.Key(dst, "guards")
	dst = append(dst, '[')
	for i, g := range r.Guards {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		dst = jsonw.Key(dst, "signal")
		dst = jsonw.String(dst, g.Signal)
		dst = jsonw.Key(dst, "op")
		dst = jsonw.String(dst, string(g.Op))
		dst = jsonw.Key(dst, "value")
		dst = jsonw.Float(dst, g.Value)
		dst = jsonw.Key(dst, "matched")
		dst = jsonw.Bool(dst, g.Matched)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	dst = jsonw.Key(dst, "late_signals")
	dst = jsonw.Int(dst, int64(r.LateSignals))
	return append(dst, '}')
}

// AppendJSON appends s as the SPEC's version summary; mean is null when no
// matured run has a value.
func (s Summary) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "version")
	dst = jsonw.StringOrNull(dst, s.Version) // "": every run of the agent (a preview's)
	dst = jsonw.Key(dst, "objective_version")
	dst = jsonw.Int(dst, int64(s.ObjectiveVersion))
	for _, c := range [...]struct {
		key string
		n   int
	}{{"runs", s.Runs}, {"matured", s.Matured}, {"scored", s.Scored}, {"guarded", s.Guarded}, {"excluded", s.Excluded}} {
		dst = jsonw.Key(dst, c.key)
		dst = jsonw.Int(dst, int64(c.n))
	}
	dst = jsonw.Key(dst, "mean")
	dst = jsonw.FloatPtr(dst, s.Mean)
	dst = jsonw.Key(dst, "lowest")
	dst = append(dst, '[')
	for i, r := range s.Lowest {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = r.AppendJSON(dst)
	}
	dst = append(dst, ']')
	dst = jsonw.Key(dst, "histogram")
	dst = s.Histogram.AppendJSON(dst)
	return append(dst, '}')
}

// AppendJSON renders {bounds, matured, unmatured}: the bin counts in order.
func (h *Histogram) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "bounds")
	dst = pair(dst, h.Bounds)
	for _, c := range [...]struct {
		key    string
		counts *[HistogramBins]int
	}{{"matured", &h.Matured}, {"unmatured", &h.Unmatured}} {
		dst = jsonw.Key(dst, c.key)
		dst = jsonw.Ints(dst, c.counts[:])
	}
	return append(dst, '}')
}

// floatOr appends *f, or the string word when f is nil.
func floatOr(dst []byte, f *float64, word string) []byte {
	if f == nil {
		return jsonw.String(dst, word)
	}
	return jsonw.Float(dst, *f)
}

func pair(dst []byte, p [2]float64) []byte {
	dst = append(dst, '[')
	dst = jsonw.Float(dst, p[0])
	dst = append(dst, ',')
	dst = jsonw.Float(dst, p[1])
	return append(dst, ']')
}
