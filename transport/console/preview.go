package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plaudit/plaudit/transport/api"
)

// The "try a draft" panel on the objective page: a draft definition posted
// with the session's CSRF token, tried on the agent's history by the
// service's preview (nothing is written), and its summary drawn beside the
// current objective's.

// previewJSON is the preview's answer, as far as the panel reads it.
type previewJSON struct {
	Version     *string         `json:"version"`
	Definition  json.RawMessage `json:"definition"`
	Seq         uint64          `json:"seq"`
	EvaluatedAt time.Time       `json:"evaluated_at"`
	Current     summaryJSON     `json:"current"`
	Draft       summaryJSON     `json:"draft"`
	Changed     int             `json:"changed"`
	Moved       []struct {
		RunID         string  `json:"run_id"`
		Matured       bool    `json:"matured"`
		Current       float64 `json:"current"`
		Draft         float64 `json:"draft"`
		Delta         float64 `json:"delta"`
		CurrentStatus string  `json:"current_status"`
		DraftStatus   string  `json:"draft_status"`
	} `json:"moved"`
}

// draftForm is what the panel's form holds: kept as typed when the draft
// is refused, so the text is never lost.
type draftForm struct {
	Definition string
	Version    string // a release label; "" is every run
	Error      string // the service's 400, with its field path
}

// previewView is a preview drawn: both summaries, their histograms on one
// scale, and the runs that moved most.
type previewView struct {
	P                previewJSON
	Current, Draft   histView
	MeanDelta        *float64
	CurrentV, DraftV int
}

// movedShown is how many of the runs that moved most the panel lists.
const movedShown = 10

// previewDraft takes the panel's form: the draft is kept in the session,
// and the browser sent to the objective page that shows it (see
// draftPage), so the page it lands on can be reloaded and gone back to.
func (c *Console) previewDraft(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("agent")
	form := draftForm{Definition: r.PostFormValue("definition"), Version: strings.TrimSpace(r.PostFormValue("version"))}
	to := Prefix + "agents/" + url.PathEscape(id) + "/objective"
	if t := c.sessions.keepDraft(s.id, id, form); t != "" {
		to += "?draft=" + t + "#try-draft"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// draftPage is the objective page with a kept draft tried again: the
// preview's result, or the service's refusal (400) next to the form. A
// draft the session no longer keeps (signed in again, or a restart) leaves
// the form prefilled with the current definition and says so.
func (c *Console) draftPage(w http.ResponseWriter, r *http.Request, s *session, token string) {
	id := r.PathValue("agent")
	data, err := c.objectiveData(s, r, id)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	form, ok := c.sessions.draft(s.id, id, token)
	if !ok {
		d := data["Draft"].(draftForm)
		d.Error = "That draft is no longer kept (a session keeps its last " + strconv.Itoa(maxDrafts) + ", and the oldest go first when the workspace's sessions keep many long ones): try it again."
		data["Draft"] = d
		c.render(w, r, s, http.StatusOK, "objective", data)
		return
	}
	status := http.StatusOK
	var view *previewView
	p, err := c.preview(s, id, form)
	var e *errService
	switch {
	case err == nil:
		view = drawPreview(p)
	case asErr(err, &e) && e.status == http.StatusBadRequest:
		status, form.Error = http.StatusBadRequest, e.message
	default:
		c.fail(w, r, s, err)
		return
	}
	if labels := data["Labels"].([]string); form.Version != "" && !slices.Contains(labels, form.Version) {
		// A release with no runs (yet): the menu shows what was tried,
		// so trying again measures the same runs.
		data["Labels"] = append(labels, form.Version)
	}
	data["Draft"], data["Preview"] = form, view
	c.render(w, r, s, status, "objective", data)
}

// preview asks the service to try the form's draft. A definition that is
// not JSON is refused here with the same shape the service uses for one
// that is not an objective: the field path, then why.
func (c *Console) preview(s *session, agent string, form draftForm) (previewJSON, error) {
	var p previewJSON
	def := bytes.TrimSpace([]byte(form.Definition))
	if !json.Valid(def) {
		var v any
		err := json.Unmarshal(def, &v)
		return p, &errService{status: http.StatusBadRequest, code: "invalid_request", message: fmt.Sprintf("definition: is not JSON (%v)", err)}
	}
	body := map[string]any{"definition": json.RawMessage(def), "limit": movedShown}
	if form.Version != "" {
		body["version"] = form.Version
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return p, err
	}
	return p, c.askBody(s, api.PreviewObjective, api.Target{Agent: agent}, raw, &p)
}

func drawPreview(p previewJSON) *previewView {
	v := &previewView{P: p, CurrentV: p.Current.ObjectiveVersion, DraftV: p.Draft.ObjectiveVersion}
	hs := drawHistograms(previewFrame, []histogramJSON{p.Current.Histogram, p.Draft.Histogram})
	v.Current, v.Draft = hs[0], hs[1]
	if p.Current.Mean != nil && p.Draft.Mean != nil {
		d := *p.Draft.Mean - *p.Current.Mean
		v.MeanDelta = &d
	}
	return v
}
