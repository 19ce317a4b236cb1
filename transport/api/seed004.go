package api

import (
	"encoding/base64"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// Seed 004: objectives (an objective there is a run here), their feedback,
// and variations. Bodies validate strictly: unknown fields are 400.

// The seed-004 names of the engine's fields, for the paths of errors.
var (
	objectiveFields = map[string]string{"external_id": "metadata.externalId", "labels": "metadata.labels",
		"variation_id": "spec.agentVariationId"}
	feedbackFields = map[string]string{"score": "data.score", "comment": "data.comment",
		"external_id": "metadata.externalId", "labels": "metadata.labels"}
)

// seedMetadata reads CreateOperationMetadata {externalId?, labels?}.
func seedMetadata(b *body) (ext string, labels map[string]string) {
	if b == nil {
		return "", nil
	}
	b.strict("externalId", "labels")
	ext = b.str("externalId", false)
	labels = b.labels("labels")
	if t := b.top(); t.err == nil {
		t.err = checkSeedLabels(field.Join(b.path, "labels"), labels)
	}
	return ext, labels
}

func (c *call) createObjective() (result, error) {
	var (
		cmd      = engine.CreateRun{ProfileID: c.p.ProfileID}
		agentRef string
	)
	err := parseBody(c.req.Body, func(b *body) error {
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
	agent, err := c.s.reg.Agent(c.ws, agentRef)
	if err != nil {
		return result{}, err
	}
	out, err := c.s.reg.CreateRun(agent, cmd, c.by, c.idem != nil)
	if out != nil {
		out.Err = field.Rename(out.Err, objectiveFields)
	}
	return settle(c, out, err, func(cr engine.CreatedRun) (result, error) {
		return ok(c.appendSeedObjective(answer(), cr.Run, cr.Variation))
	})
}

func (c *call) getObjectiveRun() (result, error) {
	runID, agent, err := c.run(nil)
	if err != nil {
		return result{}, err
	}
	cr, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, _ time.Time) (engine.CreatedRun, error) {
		r, err := a.Run(runID)
		if err != nil {
			return engine.CreatedRun{}, err
		}
		cr := engine.CreatedRun{Run: r}
		if v, err := a.Variation(r.VariationID); err == nil {
			cr.Variation = &v
		}
		return cr, nil
	})
	if err != nil {
		return result{}, err
	}
	return ok(c.appendSeedObjective(answer(), cr.Run, cr.Variation))
}

// feedbackIDs are the readOnly workspaceId and objectiveId a
// CreateObjectiveFeedbackRequest may carry ("" when it does not).
type feedbackIDs struct{ workspace, objective string }

// decodeFeedback reads CreateObjectiveFeedbackRequest: metadata and data
// are required and unknown fields are 400; the engine checks the values.
func decodeFeedback(raw []byte) (engine.RecordFeedback, feedbackIDs, error) {
	var (
		cmd engine.RecordFeedback
		ids feedbackIDs
	)
	err := parseBody(raw, func(b *body) error {
		b.strict("metadata", "data", "workspaceId", "objectiveId")
		ids = feedbackIDs{workspace: b.str("workspaceId", false), objective: b.str("objectiveId", false)}
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
			cmd.Score = &score // the engine checks its range
		}
		cmd.Comment = data.str("comment", false)
		return nil
	})
	return cmd, ids, err
}

// checkFeedbackIDs refuses a body whose workspaceId or objectiveId names
// another workspace or run than the request does: the feedback would go
// to the request's, not the one its body names.
func (c *call) checkFeedbackIDs(ids feedbackIDs, runID string) error {
	if ids.workspace != "" && ids.workspace != c.req.Workspace && ids.workspace != c.ws {
		return field.Errorf("workspaceId", "names workspace %s, not the request's %s",
			field.Quote(ids.workspace), field.Quote(c.req.Workspace))
	}
	if ids.objective == "" || ids.objective == c.req.Target.Run {
		return nil
	}
	if id, _, err := c.s.reg.Run(c.ws, ids.objective); err != nil || id != runID {
		return field.Errorf("objectiveId", "names objective %s, not the request's %s",
			field.Quote(ids.objective), field.Quote(c.req.Target.Run))
	}
	return nil
}

// createFeedback records seed-004 feedback on the request's run; with an
// agent in the target (the NATS door), a run of another agent is 404.
func (c *call) createFeedback() (result, error) {
	cmd, ids, err := decodeFeedback(c.req.Body)
	if err != nil {
		return result{}, err
	}
	var agent *engine.AgentInfo
	if c.req.Target.Agent != "" {
		a, err := c.agent()
		if err != nil {
			return result{}, err
		}
		agent = &a
	}
	runID, owner, err := c.run(agent)
	if err != nil {
		return result{}, err
	}
	if err := c.checkFeedbackIDs(ids, runID); err != nil {
		return result{}, err
	}
	cmd.RunID, cmd.ProfileID = runID, c.p.ProfileID
	return write(c, owner.ID, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.Feedback, []engine.Event, error) {
		fb, evs, err := a.RecordFeedback(cmd, now, rnd)
		return fb, evs, field.Rename(err, feedbackFields)
	}, func(fb engine.Feedback) (result, error) { return ok(c.appendFeedback(answer(), fb, nil)) })
}

// listParams reads cursor and limit (default 50, at most 1000).
func listParams(c *call) (before, limit int, err error) {
	limit = 50
	if s := c.req.arg("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return 0, 0, field.Errorf("limit", "must be an integer from 1 to 1000")
		}
		limit = n
	}
	if s := c.req.arg("cursor"); s != "" {
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

func (c *call) listObjectiveFeedback() (result, error) {
	before, limit, err := listParams(c)
	if err != nil {
		return result{}, err
	}
	labels, err := parseLabelFilter("labels", c.req.arg("labels"))
	if err != nil {
		return result{}, err
	}
	runID, agent, err := c.run(nil)
	if err != nil {
		return result{}, err
	}
	return c.feedbackPage(agent.ID, engine.FeedbackFilter{RunID: runID, Labels: labels}, before, limit, false)
}

func (c *call) listAgentFeedback() (result, error) {
	before, limit, err := listParams(c)
	if err != nil {
		return result{}, err
	}
	arg := c.req.arg
	f := engine.FeedbackFilter{VariationID: arg("agentVariationId"), Query: arg("query")}
	if f.Labels, err = parseLabelFilter("labels", arg("labels")); err != nil {
		return result{}, err
	}
	switch s := arg("sentiment"); s {
	case "", engine.SentimentUnspecified, engine.SentimentPositive, engine.SentimentNegative:
		f.Sentiment = s
	default:
		return result{}, field.Errorf("sentiment", "must be FEEDBACK_SENTIMENT_UNSPECIFIED, _POSITIVE or _NEGATIVE")
	}
	if f.CreatedAfter, err = c.timeArg("createdAfter"); err != nil {
		return result{}, err
	}
	if f.CreatedBefore, err = c.timeArg("createdBefore"); err != nil {
		return result{}, err
	}
	includeInfo := false
	if s := arg("includeInfo"); s != "" {
		if includeInfo, err = strconv.ParseBool(s); err != nil {
			return result{}, field.Errorf("includeInfo", "must be true or false")
		}
	}
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	return c.feedbackPage(agent.ID, f, before, limit, includeInfo)
}

// feedbackPage renders {items, nextCursor}. With includeInfo each record
// also names its objective and the variation that ran it.
func (c *call) feedbackPage(agentID string, f engine.FeedbackFilter, before, limit int, includeInfo bool) (result, error) {
	type page struct {
		items []engine.Feedback
		names map[string]string // variation id → name
		next  int
	}
	p, err := actors.Read(c.s.reg, agentID, c.by, func(a *engine.Agent, _ time.Time) (page, error) {
		items, next := a.ListFeedback(f, before, limit)
		p := page{items: items, next: next}
		if includeInfo {
			p.names = map[string]string{}
			for _, v := range a.Variations() {
				p.names[v.ID] = v.Name
			}
		}
		return p, nil
	})
	if err != nil {
		return result{}, err
	}
	b := append([]byte(nil), `{"items":[`...)
	for i, fb := range p.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = c.appendFeedback(b, fb, p.names)
	}
	b = append(b, ']')
	b = jsonw.Key(b, "nextCursor")
	b = jsonw.String(b, encodeCursor(p.next))
	return ok(append(b, '}'))
}

func (c *call) getAgentVariation() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	v, err := c.variation(agent.ID)
	if err != nil {
		return result{}, err
	}
	b := []byte(`{"metadata":{`)
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, v.ID)
	b = jsonw.Key(b, "accountId")
	b = jsonw.String(b, c.s.tenancy.AccountID())
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
		b = jsonw.Raw(b, v.Config)
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
func (c *call) appendSeedObjective(b []byte, r engine.Run, v *engine.Variation) []byte {
	b = append(b, '{')
	b = c.appendOpMetadata(b, opMetadata{r.ID, r.Labels, r.CreatedAt, r.ExternalID, r.ProfileID})
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
func (c *call) appendOpMetadata(b []byte, m opMetadata) []byte {
	b = jsonw.Key(b, "metadata")
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, m.id)
	b = jsonw.Key(b, "accountId")
	b = jsonw.String(b, c.s.tenancy.AccountID())
	b = jsonw.Key(b, "workspaceId")
	b = jsonw.String(b, c.ws)
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
func (c *call) appendFeedback(b []byte, fb engine.Feedback, names map[string]string) []byte {
	b = append(b, '{')
	b = c.appendOpMetadata(b, opMetadata{fb.ID, fb.Labels, fb.CreatedAt, fb.ExternalID, fb.ProfileID})
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
	b = c.appendProfile(b, fb.ProfileID)
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
func (c *call) appendProfile(b []byte, profileID string) []byte {
	p, _ := c.s.tenancy.Profile(profileID)
	b = append(b, `{"metadata":{`...)
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, profileID)
	b = jsonw.Key(b, "accountId")
	b = jsonw.String(b, c.s.tenancy.AccountID())
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
	b = jsonw.String(b, tenancy.ProfileType)
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

// timeArg reads an RFC 3339 query argument; zero when absent.
func (c *call) timeArg(name string) (time.Time, error) {
	if s := c.req.arg(name); s != "" {
		return field.Time(name, s)
	}
	return time.Time{}, nil
}
