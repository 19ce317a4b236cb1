package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	csrfRE  = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	curveRE = regexp.MustCompile(`<path class="curve" d="[^"]+" stroke="[^"]+"(?: stroke-dasharray="[^"]+")? data-variation="([^"]+)" data-name="([^"]+)" data-mean="([^"]+)"`)
)

func urlEncode(s string) string { return url.QueryEscape(s) }

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// num formats as the console does: at most 3 decimals, trailing zeros cut.
func num(v float64) string {
	s := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 3, 64), "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// rowRE matches the variations table's row of one variation.
func rowRE(id string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)<tr data-variation="` + regexp.QuoteMeta(id) + `".*?</tr>`)
}

// cookie returns the session cookie p sets.
func cookie(t *testing.T, p page) *http.Cookie {
	t.Helper()
	return cookieNamed(t, p, "plaudit_session")
}

func cookieNamed(t *testing.T, p page, name string) *http.Cookie {
	t.Helper()
	for _, line := range p.header.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err == nil && c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", name, p.header)
	return nil
}

func TestSignInSessionsAndCSRF(t *testing.T) {
	e := start(t)
	b := e.browser()

	// Signed out, a page sends to the sign-in form, which keeps the way back.
	p := b.get("/ui/agents")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/signin?next=") {
		t.Fatalf("signed out: %d → %q", p.status, p.header.Get("Location"))
	}
	if p := b.get("/"); p.status != http.StatusFound || !strings.HasSuffix(p.header.Get("Location"), "/ui/") {
		t.Errorf("GET / → %d %q, want a redirect to /ui/", p.status, p.header.Get("Location"))
	}
	// The form's token is keyed by a nonce cookie of the sign-in path: a
	// visitor holds no session.
	p = b.get("/ui/signin")
	nonce := cookieNamed(t, p, "plaudit_signin")
	if !nonce.HttpOnly || nonce.SameSite != http.SameSiteStrictMode || nonce.Secure || nonce.Path != "/ui/signin" {
		t.Errorf("sign-in cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, Path /ui/signin", nonce)
	}
	if vs := p.header.Values("Set-Cookie"); len(vs) != 1 {
		t.Errorf("the sign-in form set %v, want only its nonce", vs)
	}
	if p.header.Get("Content-Security-Policy") == "" || p.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("headers %v", p.header)
	}
	cases := []struct {
		name   string
		form   map[string]string
		status int
		body   string
	}{
		{"no token", map[string]string{"key": adminKey}, http.StatusForbidden, "stale"},
		{"wrong token", map[string]string{"key": adminKey, "csrf": strings.Repeat("0", 64)}, http.StatusForbidden, "stale"},
		{"wrong key", map[string]string{"key": "pl_nope", "csrf": b.csrf}, http.StatusUnauthorized, "not valid"},
	}
	for _, c := range cases {
		if p := b.do("POST", "/ui/signin", c.form, nil); p.status != c.status || !strings.Contains(p.body, c.body) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, p.status, p.body, c.status, c.body)
		}
	}
	// A good key starts a session, and an off-site next (or one holding a
	// control character) is ignored.
	form := b.csrf
	p = b.do("POST", "/ui/signin", map[string]string{"key": adminKey, "csrf": form, "next": "https://evil.example/"}, nil)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/agents" {
		t.Fatalf("sign-in: %d → %q", p.status, p.header.Get("Location"))
	}
	first := cookie(t, p)
	if !first.HttpOnly || first.SameSite != http.SameSiteLaxMode || first.Secure || first.Path != "/ui/" {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Lax, not Secure over plain HTTP, Path /ui/", first)
	}
	if p := b.get("/ui/agents"); p.status != 200 || !strings.Contains(p.body, "No agents") {
		t.Fatalf("agents: %d", p.status)
	}
	// Signing in again ends the session the browser had: an id planted
	// before sign-in is worthless.
	p = b.do("POST", "/ui/signin", map[string]string{"key": adminKey, "csrf": form, "next": "/ui/../\t/evil.example"}, nil)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/agents" {
		t.Fatalf("sign-in again: %d → %q", p.status, p.header.Get("Location"))
	}
	if again := cookie(t, p); again.Value == first.Value {
		t.Error("the session id was not renewed at sign-in")
	}
	planted := e.browser()
	planted.hc.Jar.SetCookies(mustURL(t, e.base+"/ui/"), []*http.Cookie{{Name: "plaudit_session", Value: first.Value}})
	if p := planted.get("/ui/agents"); p.status != http.StatusSeeOther {
		t.Errorf("the session ended by the second sign-in: %d, want a redirect to sign in", p.status)
	}
	// Behind a TLS proxy the cookies are Secure.
	b2 := e.browser()
	if c := cookieNamed(t, b2.do("GET", "/ui/signin", nil, map[string]string{"X-Forwarded-Proto": "https"}), "plaudit_signin"); !c.Secure {
		t.Error("cookie not Secure behind X-Forwarded-Proto: https")
	}

	// Sign-out is a CSRF-protected POST, with the session's token.
	b.get("/ui/agents")
	if p := b.do("POST", "/ui/signout", map[string]string{}, nil); p.status != http.StatusForbidden {
		t.Errorf("sign-out without token: %d", p.status)
	}
	if p := b.do("POST", "/ui/signout", map[string]string{"csrf": b.csrf}, nil); p.status != http.StatusSeeOther {
		t.Errorf("sign-out: %d", p.status)
	}
	if p := b.get("/ui/agents"); p.status != http.StatusSeeOther {
		t.Errorf("after sign-out: %d, want a redirect to sign in", p.status)
	}
}

func TestKeySeesOnlyItsWorkspace(t *testing.T) {
	e := start(t)
	s := e.seed()
	ws := e.api(adminKey, 201, "POST", "/v1/workspaces", map[string]any{"name": "other"})["id"].(string)
	other := e.api(adminKey, 201, "POST", "/v1/workspaces/"+ws+"/api-keys", map[string]any{"name": "o"})["key"].(string)

	b := e.browser()
	b.signIn(other)
	if p := b.get("/ui/agents"); p.status != 200 || strings.Contains(p.body, s.agent) {
		t.Errorf("other workspace's agent list: %d, lists %s: %v", p.status, s.agent, strings.Contains(p.body, s.agent))
	}
	for _, path := range []string{"/ui/agents/" + s.agent, "/ui/agents/" + s.agent + "/runs/" + s.lowest, "/ui/agents/" + s.agent + "/objective"} {
		if p := b.get(path); p.status != http.StatusNotFound {
			t.Errorf("%s as another workspace: %d, want 404", path, p.status)
		}
	}
	// A revoked key signs its sessions out at their next request.
	keys := e.api(adminKey, 200, "GET", "/v1/workspaces/"+ws+"/api-keys", nil)["items"].([]any)
	e.api(adminKey, 200, "DELETE", "/v1/workspaces/"+ws+"/api-keys/"+keys[0].(map[string]any)["id"].(string), nil)
	if p := b.get("/ui/agents"); p.status != http.StatusSeeOther {
		t.Errorf("revoked key: %d, want a redirect to sign in", p.status)
	}
}

// TestAnUnknownPageIsTheConsolesOwn404: a path under /ui/ that is no page,
// or a page asked with another method, answers the console's styled 404
// page, not the mux's line of plain text.
func TestAnUnknownPageIsTheConsolesOwn404(t *testing.T) {
	e := start(t)
	b := e.browser()
	b.signIn(adminKey)
	for _, path := range []string{"/ui/nothing-here", "/ui/agents/", "/ui/signout"} {
		p := b.get(path)
		if p.status != http.StatusNotFound || !strings.Contains(p.body, "There is no such page.") || !strings.Contains(p.body, "<html") {
			t.Errorf("GET %s: %d %.200q, want the console's 404 page", path, p.status, p.body)
		}
	}
}

func TestAgentPages(t *testing.T) {
	e := start(t)
	s := e.seed()
	b := e.browser()
	b.signIn(adminKey)
	a := "/ui/agents/" + s.agent

	p := b.get("/ui/agents")
	if p.status != 200 || !strings.Contains(p.body, `href="/ui/agents/`+s.agent+`"`) {
		t.Fatalf("agents: %d", p.status)
	}

	p = b.get(a)
	if p.status != 200 {
		t.Fatalf("agent: %d %s", p.status, p.body)
	}
	curves := curveRE.FindAllStringSubmatch(p.body, -1)
	var names []string
	var means []float64
	for _, c := range curves {
		names = append(names, c[2])
		m, _ := strconv.ParseFloat(c[3], 64)
		means = append(means, m)
	}
	if !slices.Equal(names, s.byMean) {
		t.Errorf("curves %v, want one per variation by mean %v", names, s.byMean)
	}
	if !slices.IsSortedFunc(means, func(x, y float64) int { return int(y*1e9 - x*1e9) }) {
		t.Errorf("means %v not descending", means)
	}
	// P(best) is the listing's, and the leader is the likeliest.
	vs := e.api(adminKey, 200, "GET", "/api/v1/agents/"+s.agent+"/variations", nil)["items"].([]any)
	leader, top := "", 0.0
	for _, it := range vs {
		v := it.(map[string]any)
		info := v["info"].(map[string]any)
		pb, ok := info["prob_best"].(float64)
		if !ok {
			t.Fatalf("the listing carries no prob_best: %v", info)
		}
		if pb > top {
			leader, top = v["id"].(string), pb
		}
		row := rowRE(v["id"].(string)).FindString(p.body)
		for _, want := range []string{`data-prob-best="` + strconv.FormatFloat(pb, 'g', -1, 64) + `"`,
			strconv.FormatFloat(100*pb, 'f', 1, 64) + " %", strconv.FormatFloat(info["mean"].(float64), 'f', 3, 64)} {
			if !strings.Contains(row, want) {
				t.Errorf("variation %s's row lacks %q:\n%s", v["name"], want, row)
			}
		}
	}
	if leader != s.variations["concise"] || !strings.Contains(p.body, `<tr data-variation="`+leader+`" class="leader">`) {
		t.Errorf("leader %s (want concise, %s) not marked", leader, s.variations["concise"])
	}
	if strings.Count(p.body, `class="leader"`) != 1 {
		t.Errorf("%d leaders marked, want 1", strings.Count(p.body, `class="leader"`))
	}
	for _, want := range []string{`id="selections"`, "version <bdi>1</bdi>", "version <bdi>2</bdi>", "95 % interval", "P(best)"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("agent page lacks %q", want)
		}
	}

	// The live poll answers the agent's sequence, which feedback moves.
	seq := b.get(a + "/live").body
	if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
		t.Fatalf("live: %q", seq)
	}
	e.api(adminKey, 200, "POST", "/v1/workspaces/default/objectives/"+s.lowest+"/feedback",
		map[string]any{"metadata": map[string]any{}, "data": map[string]any{"score": 1}})
	if now := b.get(a + "/live").body; now == seq {
		t.Errorf("live sequence still %s after feedback", now)
	}

	p = b.get(a + "/versions?v=2&compare=1")
	if p.status != 200 || strings.Count(p.body, `class="card version"`) != 2 || !strings.Contains(p.body, `class="bar"`) {
		t.Errorf("versions: %d, %d columns", p.status, strings.Count(p.body, `class="card version"`))
	}
	if !strings.Contains(p.body, "/runs/"+s.lowest) {
		t.Error("the lowest run is not listed on version 2")
	}
	// The histogram is the engine's: a bar per non-empty bin, counts as
	// the version summary's.
	sum := e.api(adminKey, 200, "GET", "/api/v1/agents/"+s.agent+"/versions/2/rewards", nil)
	h := sum["histogram"].(map[string]any)
	col := regexp.MustCompile(`(?s)<section class="card version" data-version="2">.*?</section>`).FindString(p.body)
	total := 0
	for i, n := range h["matured"].([]any) {
		c := int(n.(float64))
		total += c
		w := 1.0 / 20
		title := fmt.Sprintf("<title>%s–%s: %d matured runs</title>", num(float64(i)*w), num(float64(i+1)*w), c)
		if got := strings.Contains(col, title); got != (c > 0) {
			t.Errorf("bin %d (%d runs): %q shown %v", i, c, title, got)
		}
	}
	if total == 0 || !strings.Contains(col, fmt.Sprintf(`data-matured="%d"`, total)) || strings.Contains(p.body, "1,000") {
		t.Errorf("version 2's histogram does not hold its %d matured runs:\n%s", total, col)
	}

	p = b.get(a + "/runs/" + s.lowest)
	for _, want := range []string{"ci.tests", "zendesk.ticket/42", "late", "received 1h after the horizon closed", `id="evidence"`, "&#34;passed&#34;: 3", "&#43;0.03"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}

	p = b.get(a + "/objective?a=1&b=2")
	for _, want := range []string{`<span class="d del"><i>-</i>      &#34;weight&#34;: 0.5,`, `<span class="d add"><i>&#43;</i>      &#34;weight&#34;: 0.7,`, "ratings weigh more"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("objective diff lacks %q", want)
		}
	}

	if p := b.get("/ui/tasks?id=nope/1"); p.status != 200 || !strings.Contains(p.body, "No task") {
		t.Errorf("unknown task: %d", p.status)
	}
	if p := b.get(a + "/runs/run_nope"); p.status != http.StatusNotFound {
		t.Errorf("unknown run: %d", p.status)
	}
}

// TestSessionCookieRenewedWhileInUse: the session cookie, sent with the
// session's TTL to live, is sent again on a request once a twelfth of the
// TTL has passed, so a browser in use keeps it past TTL after sign-in.
func TestSessionCookieRenewedWhileInUse(t *testing.T) {
	e := start(t)
	b := e.browser()
	b.signIn(adminKey)
	if p := b.get("/ui/agents"); len(p.header.Values("Set-Cookie")) != 0 {
		t.Errorf("a page just after sign-in sets %v", p.header.Values("Set-Cookie"))
	}
	for range 13 { // 13 hours of use, a page an hour: past the 12 h TTL
		e.clk.Advance(time.Hour)
		p := b.get("/ui/agents")
		if p.status != 200 {
			t.Fatalf("a page after %v of use: %d", time.Hour, p.status)
		}
		if c := cookie(t, p); c.MaxAge != int((12 * time.Hour).Seconds()) {
			t.Errorf("renewed cookie %+v, want Max-Age of the TTL", c)
		}
	}
}

// TestReleaseLinksKeepTheirLabel: a release label holding '/', '+' or a
// space links to its own version page.
func TestReleaseLinksKeepTheirLabel(t *testing.T) {
	e := start(t)
	agent := e.api(adminKey, 201, "POST", "/api/v1/agents", map[string]any{"name": "labels"})["id"].(string)
	labels := []string{"feature/x", "1.0 beta", "a+b"}
	for _, v := range labels {
		e.api(adminKey, 201, "POST", "/api/v1/agents/"+agent+"/runs", map[string]any{"version": v})
	}
	b := e.browser()
	b.signIn(adminKey)
	page := b.get("/ui/agents/" + agent)
	links := map[string]string{} // label → href
	for _, m := range regexp.MustCompile(`href="(/ui/agents/[^/"]+/versions\?v=[^"]*)">version <bdi>([^<]*)</bdi><`).FindAllStringSubmatch(page.body, -1) {
		links[html.UnescapeString(m[2])] = html.UnescapeString(m[1])
	}
	for _, v := range labels {
		href, ok := links[v]
		if !ok {
			t.Errorf("no link for version %q in %v", v, links)
			continue
		}
		// The page shows the version asked for first.
		got := regexp.MustCompile(`data-version="([^"]*)"`).FindStringSubmatch(b.get(href).body)
		if got == nil || html.UnescapeString(got[1]) != v {
			t.Errorf("the link of version %q (%s) shows version %v", v, href, got)
		}
	}
}

// TestManyVariationsLookApart: an agent with more variations than the
// palette has colours draws the ninth curve in the first one's colour,
// dashed, and its selections striped, and so do their legends and its
// row of the variations' table.
func TestManyVariationsLookApart(t *testing.T) {
	e := start(t)
	agent := e.api(adminKey, 201, "POST", "/api/v1/agents", map[string]any{"name": "many"})["id"].(string)
	for i := range 9 {
		e.api(adminKey, 201, "POST", "/api/v1/agents/"+agent+"/variations", map[string]any{"name": fmt.Sprintf("v%d", i+1)})
	}
	b := e.browser()
	b.signIn(adminKey)
	p := b.get("/ui/agents/" + agent)
	style := regexp.MustCompile(`<path class="curve" d="[^"]+" stroke="([^"]+)"(?: stroke-dasharray="([^"]+)")? data-variation="[^"]+" data-name="([^"]+)"`)
	drawn := map[string][2]string{}
	for _, m := range style.FindAllStringSubmatch(p.body, -1) {
		drawn[m[3]] = [2]string{m[1], m[2]}
	}
	if len(drawn) != 9 {
		t.Fatalf("%d curves drawn, want 9", len(drawn))
	}
	if first, ninth := drawn["v1"], drawn["v9"]; first[0] != ninth[0] || first[1] != "" || ninth[1] == "" {
		t.Errorf("v1 drawn %v, v9 %v: want the same colour, v9 dashed", first, ninth)
	}
	if !strings.Contains(p.body, `stroke-width="4" stroke-dasharray="`+drawn["v9"][1]+`"/></svg></i><bdi>v9</bdi>`) {
		t.Error("v9's legend is not dashed")
	}
	if !strings.Contains(p.body, `stroke-width="4" stroke-dasharray="`+drawn["v9"][1]+`"/></svg> <bdi>v9</bdi>`) {
		t.Error("v9's mark in the variations' table is not dashed")
	}
	// The selections' stacked bars: v9's are striped in v1's colour, and
	// so is its swatch in the chart's legend.
	bars := regexp.MustCompile(`<g fill="([^"]+)" data-name="([^"]+)">`)
	filled := map[string]string{}
	for _, m := range bars.FindAllStringSubmatch(p.body, -1) {
		filled[m[2]] = m[1]
	}
	if filled["v1"] != drawn["v1"][0] || filled["v9"] != "url(#sel-fill-8)" {
		t.Fatalf("bars of v1 filled with %q, v9 %q: want v1's colour, v9 a pattern", filled["v1"], filled["v9"])
	}
	if !regexp.MustCompile(`<pattern id="sel-fill-8" [^>]*patternTransform="rotate\(45\)"><rect [^>]*fill="` + drawn["v1"][0] + `"`).MatchString(p.body) {
		t.Error("v9's pattern is not stripes of v1's colour")
	}
	if !strings.Contains(p.body, `fill="url(#sel-fill-8)"/></svg></i><bdi>v9</bdi>`) {
		t.Error("v9's swatch in the selections' legend is not striped")
	}
}
