package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/server"
)

const adminKey = "pl_test_admin_key_0123456789abcdef"

// clock is the server's settable time, so runs mature when the test says.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a real server in a temp dir with the console on its HTTP port.
type env struct {
	t    *testing.T
	srv  *server.Server
	base string
	clk  *clock
}

func start(t *testing.T) *env {
	t.Helper()
	clk := &clock{t: time.Now().UTC().Truncate(time.Second)}
	s, err := server.Start(server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0",
		BootstrapKey: adminKey, Now: clk.Now, ConsolePoll: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &env{t: t, srv: s, base: "http://" + s.HTTPAddr(), clk: clk}
}

// api calls the JSON API as key and decodes the answer, failing the test
// on another status than want.
func (e *env) api(key string, want int, method, path string, body any) map[string]any {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return out
}

// seeded is what seed made: an agent, its variations by name and their
// expected order by posterior mean, and the run that scores lowest.
type seeded struct {
	agent      string
	variations map[string]string
	byMean     []string // variation names, highest posterior mean first
	lowest     string
}

// seed builds an agent with three variations whose feedback separates
// their posteriors, runs of releases "1" and "2" with ratings, one report
// and one late rating, then lets every run mature.
func (e *env) seed() seeded {
	e.t.Helper()
	s := seeded{variations: map[string]string{}, byMean: []string{"concise", "friendly", "formal"}}
	s.agent = e.api(adminKey, 201, "POST", "/api/v1/agents", map[string]any{"name": "support"})["id"].(string)
	a := "/api/v1/agents/" + s.agent
	e.api(adminKey, 200, "PUT", a+"/objective", map[string]any{"definition": map[string]any{
		"horizon_s": 3600, "default": "exclude",
		"guards": []any{map[string]any{"signal": "run.succeeded", "op": "lt", "value": 1}},
		"terms": []any{
			map[string]any{"signal": "human.rating", "weight": 0.5, "scale": []float64{1, 5}},
			map[string]any{"signal": "ci.tests", "weight": 0.5, "within_s": 600},
		},
		"bounds": []float64{0, 1}}, "note": "ratings and CI"})
	e.api(adminKey, 200, "PUT", a+"/objective", map[string]any{"definition": map[string]any{
		"horizon_s": 3600, "default": "exclude",
		"guards": []any{map[string]any{"signal": "run.succeeded", "op": "lt", "value": 1}},
		"terms": []any{
			map[string]any{"signal": "human.rating", "weight": 0.7, "scale": []float64{1, 5}},
			map[string]any{"signal": "ci.tests", "weight": 0.3, "within_s": 600},
		},
		"bounds": []float64{0, 1}}, "note": "ratings weigh more"})
	// Feedback per variation: positive and negative scores.
	feedback := map[string][2]int{"concise": {7, 1}, "friendly": {3, 3}, "formal": {1, 6}}
	for _, name := range []string{"formal", "concise", "friendly"} { // creation order ≠ mean order
		s.variations[name] = e.api(adminKey, 201, "POST", a+"/variations", map[string]any{"name": name})["id"].(string)
	}
	rating := 5.0
	for _, name := range []string{"concise", "friendly", "formal"} {
		fb := feedback[name]
		for i := range 4 {
			version := "1"
			if i >= 2 {
				version = "2"
			}
			run := e.api(adminKey, 201, "POST", a+"/runs", map[string]any{"variation_id": s.variations[name], "version": version})["id"].(string)
			e.api(adminKey, 201, "POST", a+"/signals", map[string]any{"kind": "human.rating", "value": rating, "run_id": run})
			rating = max(rating-0.5, 1.5)
			e.api(adminKey, 200, "POST", a+"/runs/"+run+"/finish", map[string]any{"succeeded": true})
			for j := range fb[0] + fb[1] {
				if j%4 != i {
					continue
				}
				score := 1.0
				if j >= fb[0] {
					score = -1
				}
				e.api(adminKey, 200, "POST", "/v1/workspaces/default/objectives/"+run+"/feedback",
					map[string]any{"metadata": map[string]any{}, "data": map[string]any{"score": score, "comment": fmt.Sprintf("%s #%d", name, j)}})
			}
		}
	}
	// The lowest run: rated 1, failing CI, and a rating that comes too late.
	low := e.api(adminKey, 201, "POST", a+"/runs", map[string]any{"variation_id": s.variations["formal"], "version": "2"})["id"].(string)
	e.api(adminKey, 201, "POST", a+"/signals", map[string]any{"kind": "human.rating", "value": 1, "run_id": low})
	e.api(adminKey, 201, "POST", a+"/runs/"+low+"/claims", map[string]any{"object": "zendesk.ticket/42"})
	e.api(adminKey, 200, "POST", a+"/runs/"+low+"/finish", map[string]any{"succeeded": true})
	e.api(adminKey, 201, "POST", "/v1/jobs/"+low+"/rewards", map[string]any{"kind": "external", "scorer": "ci.tests", "value": 0.1,
		"detail": map[string]any{"suite": "unit", "passed": 3}})
	s.lowest = low
	e.clk.Advance(2 * time.Hour)
	e.api(adminKey, 201, "POST", a+"/signals", map[string]any{"kind": "human.rating", "value": 5, "run_id": low})
	return s
}

// browser is an HTTP client with cookies that does not follow redirects.
type browser struct {
	t    *testing.T
	e    *env
	hc   *http.Client
	csrf string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, e: e, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form map[string]string, hdr map[string]string) page {
	b.t.Helper()
	var rd io.Reader
	if form != nil {
		v := make([]string, 0, len(form))
		for k, val := range form {
			v = append(v, k+"="+urlEncode(val))
		}
		rd = strings.NewReader(strings.Join(v, "&"))
	}
	req, _ := http.NewRequest(method, b.e.base+path, rd)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	p := page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	if m := csrfRE.FindStringSubmatch(p.body); m != nil {
		b.csrf = m[1]
	}
	return p
}

func (b *browser) get(path string) page { b.t.Helper(); return b.do("GET", path, nil, nil) }

// signIn signs in with key and checks it worked.
func (b *browser) signIn(key string) {
	b.t.Helper()
	b.get("/ui/signin")
	p := b.do("POST", "/ui/signin", map[string]string{"csrf": b.csrf, "key": key, "next": "/ui/agents"}, nil)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/agents" {
		b.t.Fatalf("sign-in: %d → %q: %s", p.status, p.header.Get("Location"), p.body)
	}
}
