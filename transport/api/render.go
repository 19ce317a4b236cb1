package api

import (
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/tenancy"
)

func appendAgent(b []byte, a engine.AgentInfo) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, a.ID)
	b = jsonw.Key(b, "workspace_id")
	b = jsonw.String(b, a.Workspace)
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, a.Name)
	b = jsonw.Key(b, "external_id")
	b = jsonw.StringOrNull(b, a.ExternalID)
	b = jsonw.Key(b, "labels")
	b = jsonw.StringMap(b, a.Labels)
	b = jsonw.Key(b, "selection_mode")
	b = jsonw.String(b, a.SelectionMode)
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, a.CreatedAt)
	return append(b, '}')
}

// appendRun renders a run; full adds its claims and traces.
func appendRun(b []byte, r engine.Run, full bool) []byte {
	return appendRunWith(b, r, full, nil)
}

// appendCreatedRun renders a new run with the variation selection chose,
// as "variation": {id, name} (null when the agent has none).
func appendCreatedRun(b []byte, cr engine.CreatedRun) []byte {
	return appendRunWith(b, cr.Run, false, func(b []byte) []byte {
		b = jsonw.Key(b, "variation")
		if cr.Variation == nil {
			return append(b, "null"...)
		}
		b = append(b, '{')
		b = jsonw.Key(b, "id")
		b = jsonw.String(b, cr.Variation.ID)
		b = jsonw.Key(b, "name")
		b = jsonw.String(b, cr.Variation.Name)
		return append(b, '}')
	})
}

func appendRunWith(b []byte, r engine.Run, full bool, extra func([]byte) []byte) []byte {
	if b == nil {
		b = make([]byte, 0, 512) // a run renders to 300–400 bytes: one allocation, not six
	}
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, r.ID)
	b = jsonw.Key(b, "agent_id")
	b = jsonw.String(b, r.AgentID)
	b = jsonw.Key(b, "version")
	b = jsonw.StringOrNull(b, r.Version)
	b = jsonw.Key(b, "variation_id")
	b = jsonw.StringOrNull(b, r.VariationID)
	b = jsonw.Key(b, "session_id")
	b = jsonw.StringOrNull(b, r.SessionID)
	b = jsonw.Key(b, "external_id")
	b = jsonw.StringOrNull(b, r.ExternalID)
	b = jsonw.Key(b, "labels")
	b = jsonw.StringMap(b, r.Labels)
	b = jsonw.Key(b, "status")
	b = jsonw.String(b, r.Status())
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, r.CreatedAt)
	b = jsonw.Key(b, "finished_at")
	b = jsonw.TimeOrNull(b, r.FinishedAt)
	if full {
		b = jsonw.Key(b, "claims")
		b = append(b, '[')
		for i, c := range r.Claims {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendClaim(b, r.ID, c)
		}
		b = append(b, ']')
		b = jsonw.Key(b, "traces")
		b = append(b, '[')
		for i, t := range r.Traces {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTrace(b, r.ID, t)
		}
		b = append(b, ']')
	}
	if extra != nil {
		b = extra(b)
	}
	return append(b, '}')
}

func appendClaim(b []byte, runID string, c engine.Claim) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "run_id")
	b = jsonw.String(b, runID)
	b = jsonw.Key(b, "object")
	b = jsonw.String(b, c.Object)
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, c.CreatedAt)
	return append(b, '}')
}

func appendTrace(b []byte, runID string, t engine.Trace) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "run_id")
	b = jsonw.String(b, runID)
	b = jsonw.Key(b, "trace_id")
	b = jsonw.String(b, t.TraceID)
	b = jsonw.Key(b, "turn_id")
	b = jsonw.String(b, t.TurnID)
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, t.CreatedAt)
	return append(b, '}')
}

// appendSignal renders a signal: {id, kind, value, run_ids, occurred_at,
// received_at, duplicate}, plus the subject it was sent to.
func appendSignal(b []byte, s engine.Signal, runIDs []string, duplicate bool) []byte {
	if b == nil {
		b = make([]byte, 0, 384) // a signal renders to 250–350 bytes
	}
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, s.ID)
	b = jsonw.Key(b, "kind")
	b = jsonw.String(b, s.Kind)
	b = jsonw.Key(b, "value")
	b = jsonw.Float(b, s.Value)
	b = jsonw.Key(b, "run_ids")
	b = jsonw.Strings(b, runIDs)
	if s.SessionID != "" {
		b = jsonw.Key(b, "session_id")
		b = jsonw.String(b, s.SessionID)
	}
	if s.Object != "" {
		b = jsonw.Key(b, "object")
		b = jsonw.String(b, s.Object)
	}
	if s.DedupKey != "" {
		b = jsonw.Key(b, "dedup_key")
		b = jsonw.String(b, s.DedupKey)
	}
	b = jsonw.Key(b, "occurred_at")
	b = jsonw.Time(b, s.OccurredAt)
	b = jsonw.Key(b, "received_at")
	b = jsonw.Time(b, s.ReceivedAt)
	b = jsonw.Key(b, "duplicate")
	b = jsonw.Bool(b, duplicate)
	return append(b, '}')
}

func appendObjective(b []byte, o engine.ObjectiveVersion) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "version")
	b = jsonw.Int(b, int64(o.Version))
	b = jsonw.Key(b, "definition")
	b = o.Definition.AppendJSON(b)
	b = jsonw.Key(b, "note")
	b = jsonw.StringOrNull(b, o.Note)
	b = jsonw.Key(b, "created_at")
	b = jsonw.TimeOrNull(b, o.CreatedAt)
	return append(b, '}')
}

func appendWorkspace(b []byte, ws tenancy.Workspace) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, ws.ID)
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, ws.Name)
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, ws.CreatedAt)
	return append(b, '}')
}

// appendItems renders {"items": [...]} with one appender per element.
func appendItems[T any](b []byte, items []T, one func([]byte, T) []byte) []byte {
	b = append(b, `{"items":[`...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = one(b, it)
	}
	return append(b, "]}"...)
}
