package transport

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/auth"
)

// The seed-004 door: /v1/workspaces/{ws}/objectives (an objective there is
// a run here), their feedback, and variations. Bodies validate strictly:
// unknown fields are 400. Errors are google.rpc.Status.

func (h *HTTP) routeSeed004(c *call, method string, seg []string) (result, error) {
	switch {
	case len(seg) == 1 && seg[0] == "objectives":
		return endpoint{fasthttp.MethodPost: func() (result, error) { return h.createObjective(c) }}.serve(method)
	case len(seg) == 2 && seg[0] == "objectives":
		return endpoint{fasthttp.MethodGet: func() (result, error) { return h.getObjectiveRun(c, seg[1]) }}.serve(method)
	case len(seg) == 3 && seg[0] == "objectives" && seg[2] == "feedback":
		return endpoint{
			fasthttp.MethodPost: func() (result, error) { return h.createFeedback(c, seg[1]) },
			fasthttp.MethodGet:  func() (result, error) { return h.listObjectiveFeedback(c, seg[1]) },
		}.serve(method)
	case len(seg) == 3 && seg[0] == "agents" && seg[2] == "feedback":
		return endpoint{fasthttp.MethodGet: func() (result, error) { return h.listAgentFeedback(c, seg[1]) }}.serve(method)
	case len(seg) == 4 && seg[0] == "agents" && seg[2] == "variations":
		return endpoint{fasthttp.MethodGet: func() (result, error) { return h.getSeedVariation(c, seg[1], seg[3]) }}.serve(method)
	}
	return result{}, fmt.Errorf("%s %s: %w", method, c.path, ErrRouteNotFound)
}

// seedMetadata reads CreateOperationMetadata {externalId?, labels?}.
func seedMetadata(b *body) (ext string, labels map[string]string) {
	if b == nil {
		return "", nil
	}
	b.strict("externalId", "labels")
	ext = b.str("externalId", false)
	if len(ext) > 200 {
		b.fail("externalId", "must be at most 200 characters")
	}
	labels = b.labels("labels")
	if t := b.top(); t.err == nil {
		t.err = checkSeedLabels(field.Join(b.path, "labels"), labels)
	}
	return ext, labels
}

func (h *HTTP) createObjective(c *call) (result, error) {
	var (
		cmd      = engine.CreateRun{ProfileID: c.p.ProfileID}
		agentRef string
	)
	err := parseBody(c.body, func(b *body) error {
		b.strict("metadata", "spec")
		cmd.ExternalID, cmd.Labels = seedMetadata(b.object("metadata"))
		spec := b.object("spec")
		if spec == nil {
			b.fail("spec", "is required")
			return nil
		}
		spec.strict("agentId", "agentVariationId")
		agentRef = spec.str("agentId", true)
		cmd.VariationID = spec.str("agentVariationId", false)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	agent, err := h.reg.Agent(c.ws, agentRef)
	if err != nil {
		return result{}, err
	}
	return c.write(func(idem *actors.Idempotent) (any, error) { return h.reg.CreateRun(agent, cmd, idem) },
		func(res any) (result, error) {
			cr := res.(engine.CreatedRun)
			return ok(h.appendSeedObjective(nil, c.ws, cr.Run, cr.Variation))
		})
}

func (h *HTTP) getObjectiveRun(c *call, ref string) (result, error) {
	runID, agent, err := h.reg.Run(c.ws, ref)
	if err != nil {
		return result{}, err
	}
	res, err := h.reg.Query(agent.ID, func(ag *engine.Agent, _ time.Time) (any, error) {
		r, err := ag.Run(runID)
		if err != nil {
			return nil, err
		}
		cr := engine.CreatedRun{Run: r}
		if v, err := ag.Variation(r.VariationID); err == nil {
			cr.Variation = &v
		}
		return cr, nil
	})
	if err != nil {
		return result{}, err
	}
	cr := res.(engine.CreatedRun)
	return ok(h.appendSeedObjective(nil, c.ws, cr.Run, cr.Variation))
}

// decodeFeedback reads CreateObjectiveFeedbackRequest: metadata and data
// are required, unknown fields are 400, the score lies in [-1, 1].
func decodeFeedback(raw []byte) (engine.RecordFeedback, error) {
	var cmd engine.RecordFeedback
	err := parseBody(raw, func(b *body) error {
		b.strict("metadata", "data", "workspaceId", "objectiveId")
		if !b.has("metadata") {
			b.fail("metadata", "is required")
		}
		if !b.has("data") {
			b.fail("data", "is required")
		}
		cmd.ExternalID, cmd.Labels = seedMetadata(b.object("metadata"))
		data := b.object("data")
		if data == nil {
			return nil
		}
		data.strict("score", "comment")
		if score, ok := data.num("score", false); ok {
			if score < -1 || score > 1 {
				data.fail("score", "must be between -1.0 and 1.0")
			}
			cmd.Score = &score
		}
		cmd.Comment = data.str("comment", false)
		return nil
	})
	return cmd, err
}

func (h *HTTP) createFeedback(c *call, ref string) (result, error) {
	cmd, err := decodeFeedback(c.body)
	if err != nil {
		return result{}, err
	}
	runID, agent, err := h.reg.Run(c.ws, ref)
	if err != nil {
		return result{}, err
	}
	return h.feedbackOn(c, cmd, runID, agent.ID)
}

// feedbackOn records decoded feedback on a resolved run.
func (h *HTTP) feedbackOn(c *call, cmd engine.RecordFeedback, runID, agentID string) (result, error) {
	cmd.RunID, cmd.ProfileID = runID, c.p.ProfileID
	return c.write(func(idem *actors.Idempotent) (any, error) { return h.reg.Execute(agentID, cmd, idem) },
		func(res any) (result, error) { return ok(h.appendFeedback(nil, c.ws, res.(engine.Feedback), nil)) })
}

// listParams reads cursor and limit (default 50, at most 1000).
func listParams(c *call) (before, limit int, err error) {
	limit = 50
	if s := c.arg("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return 0, 0, field.Errorf("limit", "must be an integer from 1 to 1000")
		}
		limit = n
	}
	if s := c.arg("cursor"); s != "" {
		raw, err := base64.RawURLEncoding.DecodeString(s)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(raw), "fb:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(raw), "fb:") || n < 1 {
			return 0, 0, field.Errorf("cursor", "is not a cursor this server gave out")
		}
		before = n
	}
	return before, limit, nil
}

func encodeCursor(next int) string {
	if next == 0 {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte("fb:" + strconv.Itoa(next)))
}

func (h *HTTP) listObjectiveFeedback(c *call, ref string) (result, error) {
	before, limit, err := listParams(c)
	if err != nil {
		return result{}, err
	}
	labels, err := parseLabelFilter("labels", c.arg("labels"))
	if err != nil {
		return result{}, err
	}
	runID, agent, err := h.reg.Run(c.ws, ref)
	if err != nil {
		return result{}, err
	}
	return h.feedbackPage(c, agent.ID, engine.FeedbackFilter{RunID: runID, Labels: labels}, before, limit, false)
}

func (h *HTTP) listAgentFeedback(c *call, agentRef string) (result, error) {
	before, limit, err := listParams(c)
	if err != nil {
		return result{}, err
	}
	f := engine.FeedbackFilter{VariationID: c.arg("agentVariationId"), Query: c.arg("query")}
	if f.Labels, err = parseLabelFilter("labels", c.arg("labels")); err != nil {
		return result{}, err
	}
	switch s := c.arg("sentiment"); s {
	case "", engine.SentimentUnspecified, engine.SentimentPositive, engine.SentimentNegative:
		f.Sentiment = s
	default:
		return result{}, field.Errorf("sentiment", "must be FEEDBACK_SENTIMENT_UNSPECIFIED, _POSITIVE or _NEGATIVE")
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"createdAfter", &f.CreatedAfter}, {"createdBefore", &f.CreatedBefore}} {
		if s := c.arg(t.name); s != "" {
			v, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return result{}, field.Errorf(t.name, "must be an RFC 3339 timestamp")
			}
			*t.dst = v
		}
	}
	includeInfo := false
	if s := c.arg("includeInfo"); s != "" {
		if includeInfo, err = strconv.ParseBool(s); err != nil {
			return result{}, field.Errorf("includeInfo", "must be true or false")
		}
	}
	agent, err := h.reg.Agent(c.ws, agentRef)
	if err != nil {
		return result{}, err
	}
	return h.feedbackPage(c, agent.ID, f, before, limit, includeInfo)
}

// feedbackPage renders {items, nextCursor}. With includeInfo each record
// also names its objective and the variation that ran it.
func (h *HTTP) feedbackPage(c *call, agentID string, f engine.FeedbackFilter, before, limit int, includeInfo bool) (result, error) {
	type page struct {
		items []engine.Feedback
		names map[string]string // variation id → name
		next  int
	}
	res, err := h.reg.Query(agentID, func(ag *engine.Agent, _ time.Time) (any, error) {
		items, next := ag.ListFeedback(f, before, limit)
		p := page{items: items, next: next}
		if includeInfo {
			p.names = map[string]string{}
			for _, v := range ag.Variations() {
				p.names[v.ID] = v.Name
			}
		}
		return p, nil
	})
	if err != nil {
		return result{}, err
	}
	p := res.(page)
	b := append([]byte(nil), `{"items":[`...)
	for i, fb := range p.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = h.appendFeedback(b, c.ws, fb, p.names)
	}
	b = append(b, ']')
	b = jsonw.Key(b, "nextCursor")
	b = jsonw.String(b, encodeCursor(p.next))
	return ok(append(b, '}'))
}

func (h *HTTP) getSeedVariation(c *call, agentRef, varID string) (result, error) {
	agent, err := h.reg.Agent(c.ws, agentRef)
	if err != nil {
		return result{}, err
	}
	res, err := h.reg.Query(agent.ID, func(ag *engine.Agent, _ time.Time) (any, error) { return ag.Variation(varID) })
	if err != nil {
		return result{}, err
	}
	v := res.(engine.Variation)
	b := []byte(`{"metadata":{`)
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, v.ID)
	b = jsonw.Key(b, "accountId")
	b = jsonw.String(b, h.tenancy.AccountID())
	b = jsonw.Key(b, "workspaceId")
	b = jsonw.String(b, c.ws)
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, v.Name)
	b = jsonw.Key(b, "createdAt")
	b = jsonw.Time(b, v.CreatedAt)
	b = append(b, '}')
	b = jsonw.Key(b, "spec")
	b = append(b, '{')
	b = jsonw.Key(b, "agentId")
	b = jsonw.String(b, agent.ID)
	if v.Config != "" {
		b = jsonw.Key(b, "config")
		b = append(b, v.Config...)
	}
	b = append(b, '}')
	b = jsonw.Key(b, "info")
	b = append(b, '{')
	b = jsonw.Key(b, "score")
	b = jsonw.Float(b, v.Score())
	b = jsonw.Key(b, "feedbackCount")
	b = jsonw.Int(b, int64(v.FeedbackCount))
	return ok(append(b, "}}"...))
}

// appendSeedObjective renders a run as a seed-004 Objective.
func (h *HTTP) appendSeedObjective(b []byte, ws string, r engine.Run, v *engine.Variation) []byte {
	b = append(b, '{')
	b = h.appendOpMetadata(b, ws, opMetadata{r.ID, r.Labels, r.CreatedAt, r.ExternalID, r.ProfileID})
	b = jsonw.Key(b, "spec")
	b = append(b, '{')
	b = jsonw.Key(b, "agentId")
	b = jsonw.String(b, r.AgentID)
	if r.VariationID != "" {
		b = jsonw.Key(b, "agentVariationId")
		b = jsonw.String(b, r.VariationID)
	}
	b = append(b, '}')
	b = jsonw.Key(b, "info")
	b = append(b, '{')
	b = jsonw.Key(b, "status")
	b = jsonw.String(b, r.Status())
	if v != nil {
		b = jsonw.Key(b, "agentVariation")
		b = appendBare(b, v.ID, v.Name)
	}
	return append(b, "}}"...)
}

// opMetadata is seed 004's OperationMetadata, less what the server adds.
type opMetadata struct {
	id         string
	labels     map[string]string
	createdAt  time.Time
	externalID string
	profileID  string
}

// appendOpMetadata renders "metadata": OperationMetadata.
func (h *HTTP) appendOpMetadata(b []byte, ws string, m opMetadata) []byte {
	b = jsonw.Key(b, "metadata")
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, m.id)
	b = jsonw.Key(b, "accountId")
	b = jsonw.String(b, h.tenancy.AccountID())
	b = jsonw.Key(b, "workspaceId")
	b = jsonw.String(b, ws)
	b = jsonw.Key(b, "labels")
	b = jsonw.StringMap(b, m.labels)
	b = jsonw.Key(b, "createdAt")
	b = jsonw.Time(b, m.createdAt)
	if m.externalID != "" {
		b = jsonw.Key(b, "externalId")
		b = jsonw.String(b, m.externalID)
	}
	b = jsonw.Key(b, "profileId")
	b = jsonw.String(b, m.profileID)
	return append(b, '}')
}

// appendFeedback renders an ObjectiveFeedback. info always carries
// submittedBy; with names (includeInfo) it also carries the objective and
// the variation that ran it.
func (h *HTTP) appendFeedback(b []byte, ws string, fb engine.Feedback, names map[string]string) []byte {
	b = append(b, '{')
	b = h.appendOpMetadata(b, ws, opMetadata{fb.ID, fb.Labels, fb.CreatedAt, fb.ExternalID, fb.ProfileID})
	b = jsonw.Key(b, "data")
	b = append(b, '{')
	if fb.Score != nil {
		b = jsonw.Key(b, "score")
		b = jsonw.Float(b, *fb.Score)
	}
	if fb.Comment != "" {
		b = jsonw.Key(b, "comment")
		b = jsonw.String(b, fb.Comment)
	}
	b = append(b, '}')
	b = jsonw.Key(b, "info")
	b = append(b, '{')
	b = jsonw.Key(b, "submittedBy")
	b = h.appendProfile(b, fb.ProfileID)
	if names != nil {
		b = jsonw.Key(b, "objective")
		b = appendBare(b, fb.RunID, "")
		if fb.VariationID != "" {
			b = jsonw.Key(b, "agentVariation")
			b = appendBare(b, fb.VariationID, names[fb.VariationID])
		}
	}
	return append(b, "}}"...)
}

// appendProfile renders the Profile of an API key.
func (h *HTTP) appendProfile(b []byte, profileID string) []byte {
	p, _ := h.tenancy.Profile(profileID)
	b = append(b, `{"metadata":{`...)
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, profileID)
	b = jsonw.Key(b, "accountId")
	b = jsonw.String(b, h.tenancy.AccountID())
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, p.Name)
	b = jsonw.Key(b, "profileId")
	b = jsonw.String(b, profileID)
	b = append(b, '}')
	b = jsonw.Key(b, "spec")
	b = append(b, '{')
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, p.Name)
	b = jsonw.Key(b, "type")
	b = jsonw.String(b, auth.ProfileType)
	return append(b, "}}"...)
}

// appendBare renders BareMetadata {id, name?}.
func appendBare(b []byte, id, name string) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, id)
	if name != "" {
		b = jsonw.Key(b, "name")
		b = jsonw.String(b, name)
	}
	return append(b, '}')
}
