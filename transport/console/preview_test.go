package console_test

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// reweighted is the seed's objective with the terms' weights swapped
// round, CI counting more than the ratings, and a run without CI counted
// as failing it rather than skipping the term.
const reweighted = `{"horizon_s": 3600, "default": "exclude",
 "guards": [{"signal": "run.succeeded", "op": "lt", "value": 1}],
 "terms": [{"signal": "human.rating", "weight": 0.2, "scale": [1, 5]}, {"signal": "ci.tests", "weight": 0.8, "within_s": 600, "missing": 0}],
 "bounds": [0, 1]}`

var (
	sideRE  = regexp.MustCompile(`(?s)<div class="summary" data-side="(current|draft)">.*?</figure>`)
	fieldRE = regexp.MustCompile(`data-field="(mean|runs|matured)">([^<]*)<`)
	movedRE = regexp.MustCompile(`<tr data-run="([^"]+)"><td><a class="mono" href="([^"]+)"`)
)

// TestTryDraft posts drafts from the objective page's panel: a good one
// shows the service's preview (both summaries, the runs that moved most),
// a bad one the service's field path beside the kept text, and a form
// without the session's token is refused. The post is answered with a
// redirect to a page that shows the draft (so Back and reload do not send
// the form again), which only the session that tried it can see.
func TestTryDraft(t *testing.T) {
	e := start(t)
	s := e.seed()
	b := e.browser()
	b.signIn(adminKey)
	page := "/ui/agents/" + s.agent + "/objective"
	post := page + "/preview"

	// The form is prefilled with the current definition, canonical.
	cur := e.api(adminKey, 200, "GET", "/api/v1/agents/"+s.agent+"/objective", nil)
	pretty, _ := json.MarshalIndent(cur["definition"], "", "  ")
	p := b.get(page)
	textarea := regexp.MustCompile(`(?s)<textarea id="definition" name="definition"[^>]*>(.*?)</textarea>`).FindStringSubmatch(p.body)
	if textarea == nil || !jsonEqual(t, html.UnescapeString(textarea[1]), string(pretty)) {
		t.Fatalf("the draft is not prefilled with the current definition:\n%v", textarea)
	}

	if p := b.do("POST", post, map[string]string{"definition": reweighted}, nil); p.status != http.StatusForbidden {
		t.Errorf("a draft without the CSRF token: %d, want 403", p.status)
	}

	// A good draft: the page shows the service's answer, number for number.
	for _, version := range []string{"", "2"} {
		body := map[string]any{"definition": json.RawMessage(reweighted), "limit": 10}
		if version != "" {
			body["version"] = version
		}
		want := e.api(adminKey, 200, "POST", "/api/v1/agents/"+s.agent+"/objective/preview", body)
		shown := b.tryDraft(post, map[string]string{"csrf": b.csrf, "definition": reweighted, "version": version})
		p = b.get(shown)
		if p.status != 200 {
			t.Fatalf("preview %q: %d", version, p.status)
		}
		if again := b.get(shown); again.status != 200 || len(sideRE.FindAllString(again.body, -1)) != 2 {
			t.Fatalf("preview %q shown again (Back, reload): %d, %d summaries", version, again.status, len(sideRE.FindAllString(again.body, -1)))
		}
		other := e.browser()
		other.signIn(adminKey)
		if o := other.get(shown); strings.Contains(o.body, `id="preview"`) || !strings.Contains(o.body, "no longer kept") {
			t.Errorf("preview %q: another session sees the draft (or no word that it is not kept): %d", version, o.status)
		}
		sides := sideRE.FindAllStringSubmatch(p.body, -1)
		if len(sides) != 2 || sides[0][1] != "current" || sides[1][1] != "draft" {
			t.Fatalf("preview %q: %d summaries, want current and draft side by side", version, len(sides))
		}
		for i, side := range []string{"current", "draft"} {
			sum := want[side].(map[string]any)
			got := map[string]string{}
			for _, m := range fieldRE.FindAllStringSubmatch(sides[i][0], -1) {
				got[m[1]] = m[2]
			}
			exp := map[string]string{"mean": num(sum["mean"].(float64)), "runs": fmt.Sprint(sum["runs"]), "matured": fmt.Sprint(sum["matured"])}
			if fmt.Sprint(got) != fmt.Sprint(exp) {
				t.Errorf("preview %q, %s: shows %v, the service answered %v", version, side, got, exp)
			}
			matured := 0
			for _, n := range sum["histogram"].(map[string]any)["matured"].([]any) {
				matured += int(n.(float64))
			}
			if !strings.Contains(sides[i][0], fmt.Sprintf(`data-matured="%d"`, matured)) {
				t.Errorf("preview %q, %s: the histogram does not hold the %d matured runs", version, side, matured)
			}
		}
		if want["draft"].(map[string]any)["mean"] == want["current"].(map[string]any)["mean"] {
			t.Fatalf("the re-weighted draft moves no mean: a useless test")
		}
		moved := want["moved"].([]any)
		rows := movedRE.FindAllStringSubmatch(p.body, -1)
		if len(moved) == 0 || len(rows) != len(moved) {
			t.Fatalf("preview %q: %d moved runs shown, the service answered %d", version, len(rows), len(moved))
		}
		for i, m := range moved {
			id := m.(map[string]any)["run_id"].(string)
			if rows[i][1] != id || rows[i][2] != "/ui/agents/"+s.agent+"/runs/"+id {
				t.Errorf("moved run %d: %v, want %s linked to its page", i, rows[i][1:], id)
			}
		}
		if version == "2" && !strings.Contains(p.body, "Runs of release 2") {
			t.Error("the preview of release 2 does not say so")
		}
	}

	// A release with no runs: tried as asked, and the menu says so, so
	// trying again measures the same (no) runs.
	p = b.get(b.tryDraft(post, map[string]string{"csrf": b.csrf, "definition": reweighted, "version": "no-such-release"}))
	if p.status != http.StatusOK || !strings.Contains(p.body, `<option selected>no-such-release</option>`) {
		t.Errorf("a draft tried on a release with no runs: %d, and its menu does not show the release chosen", p.status)
	}

	// Bad drafts: the 400's field path next to the form, the text kept.
	bad := strings.Replace(reweighted, `"weight": 0.8`, `"weight": 0.8, "agg": "median"`, 1)
	apiErr := e.api(adminKey, 400, "POST", "/api/v1/agents/"+s.agent+"/objective/preview",
		map[string]any{"definition": json.RawMessage(bad)})["error"].(map[string]any)["message"].(string)
	cases := []struct{ name, draft, message string }{
		{"not an objective", bad, apiErr},
		{"not JSON", `{"terms": [`, "definition: is not JSON"},
	}
	for _, c := range cases {
		p := b.get(b.tryDraft(post, map[string]string{"csrf": b.csrf, "definition": c.draft}))
		shown := regexp.MustCompile(`<p class="error" role="alert" id="draft-error">([^<]*)</p>`).FindStringSubmatch(p.body)
		if p.status != http.StatusBadRequest || shown == nil || !strings.HasPrefix(html.UnescapeString(shown[1]), c.message) {
			t.Errorf("%s: %d, error %v, want 400 with %q", c.name, p.status, shown, c.message)
		}
		if !strings.Contains(p.body, html.EscapeString(c.draft)+"</textarea>") {
			t.Errorf("%s: the draft's text was not kept", c.name)
		}
		if strings.Contains(p.body, `id="preview"`) {
			t.Errorf("%s: a preview is shown for a refused draft", c.name)
		}
	}
	if !strings.HasPrefix(apiErr, "definition.terms[1].agg") {
		t.Errorf("the service's message %q names no field path", apiErr)
	}
}

// tryDraft posts the draft panel's form and returns the page it redirects
// to, without its fragment.
func (b *browser) tryDraft(post string, form map[string]string) string {
	b.t.Helper()
	p := b.do("POST", post, form, nil)
	loc, _, _ := strings.Cut(p.header.Get("Location"), "#")
	if p.status != http.StatusSeeOther || !strings.Contains(loc, "?draft=") {
		b.t.Fatalf("draft posted: %d → %q, want 303 to the page showing it", p.status, p.header.Get("Location"))
	}
	return loc
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}
