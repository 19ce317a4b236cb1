package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/plaudit/plaudit/internal/jsontest"
)

// natsClient sends requests to the NATS door with a key.
type natsClient struct {
	t   *testing.T
	nc  *nats.Conn
	key string
}

// newNATSClient connects with key as the NATS token and sends it as the
// Authorization header of every request too.
func newNATSClient(t *testing.T, s *Server, key string) *natsClient {
	t.Helper()
	nc, err := nats.Connect(s.NATSURL(), nats.Token(key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &natsClient{t: t, nc: nc, key: key}
}

// do sends body to subject and returns the reply's error code ("" on
// success) and body.
func (c *natsClient) do(subject, body string) (string, map[string]any) {
	c.t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = []byte(body)
	if c.key != "" {
		msg.Header.Set("Authorization", "Bearer "+c.key)
	}
	rep, err := c.nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		c.t.Fatalf("%s: %v", subject, err)
	}
	var m map[string]any
	if err := json.Unmarshal(rep.Data, &m); err != nil || !jsontest.Valid(rep.Data) {
		c.t.Fatalf("%s: reply is not JSON in UTF-8: %q", subject, rep.Data)
	}
	code := rep.Header.Get(micro.ErrorCodeHeader)
	if code != "" && rep.Header.Get(micro.ErrorHeader) == "" {
		c.t.Fatalf("%s: error code %s without a %s header", subject, code, micro.ErrorHeader)
	}
	return code, m
}

func (c *natsClient) must(subject, body string) map[string]any {
	c.t.Helper()
	code, m := c.do(subject, body)
	if code != "" {
		c.t.Fatalf("%s: error %s: %v", subject, code, m)
	}
	return m
}

func TestNATSDoorSelectSignalFeedbackReward(t *testing.T) {
	s := startServer(t, Config{})
	api := newClient(t, s, adminKey)
	agent := api.must(201, "POST", "/api/v1/agents", `{"name": "nats"}`)["id"].(string)
	good := api.must(201, "POST", "/api/v1/agents/"+agent+"/variations", `{"name": "good"}`)["id"].(string)
	api.must(201, "POST", "/api/v1/agents/"+agent+"/variations", `{"name": "bad"}`)
	nc := newNATSClient(t, s, adminKey)
	subj := func(op string) string { return "plaudit.v1.default." + agent + "." + op }

	run := nc.must(subj("select"), `{"variation_id": "`+good+`", "version": "3", "external_id": "ticket-1"}`)
	runID := run["id"].(string)
	if run["variation_id"] != good || run["version"] != "3" {
		t.Fatalf("select reply = %v", run)
	}
	sig := nc.must(subj("signal"), `{"kind": "human.rating", "value": 0.8, "run_id": "`+runID+`", "dedup_key": "msg-19"}`)
	if sig["duplicate"] != false {
		t.Fatalf("signal reply = %v", sig)
	}
	if again := nc.must(subj("signal"), `{"kind": "human.rating", "value": 0.8, "run_id": "`+runID+`", "dedup_key": "msg-19"}`); again["id"] != sig["id"] || again["duplicate"] != true {
		t.Fatalf("repeated dedup key = %v", again)
	}
	fb := nc.must(subj("feedback"), `{"objectiveId": "external_id:ticket-1", "metadata": {}, "data": {"score": 1.0, "comment": "Short and on point."}}`)
	if at(t, fb, "data", "score") != 1.0 {
		t.Fatalf("feedback reply = %v", fb)
	}
	rep := nc.must(subj("report"), `{"run_id": "`+runID+`", "scorer": "rubric", "value": 0.5, "turn_id": "t1"}`)
	if rep["job_id"] != runID || rep["value"] != 0.5 {
		t.Fatalf("report reply = %v", rep)
	}
	fin := nc.must(subj("finish"), `{"run_id": "`+runID+`", "succeeded": true}`)
	if fin["status"] != "succeeded" {
		t.Fatalf("finish reply = %v", fin)
	}
	// Default objective: human.rating 0.8 is the only term with a value.
	rw := nc.must(subj("reward"), `{"run_id": "`+runID+`", "objective_version": 0}`)
	if rw["status"] != "scored" || rw["value"] != 0.8 {
		t.Fatalf("reward reply = %v", rw)
	}
	v := nc.must(subj("variation"), `{"variation_id": "`+good+`"}`)
	if at(t, v, "info", "alpha") != 2.0 || at(t, v, "info", "feedback_count") != 1.0 {
		t.Fatalf("variation reply = %v", v)
	}
	// What NATS wrote, HTTP reads.
	signals := api.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+runID+"/signals", "")
	if n := len(signals["items"].([]any)); n != 3 { // human.rating, feedback, run.succeeded
		t.Fatalf("run has %d signals over HTTP, want 3", n)
	}
	evidence := api.must(200, "GET", "/v1/jobs/"+runID+"/rewards", "")
	if items := evidence["items"].([]any); len(items) != 2 || items[0].(map[string]any)["id"] != rep["id"] {
		t.Fatalf("job evidence over HTTP = %v, want the NATS report, then the feedback", evidence)
	}
}

func TestNATSDoorErrors(t *testing.T) {
	s := startServer(t, Config{})
	api := newClient(t, s, adminKey)
	agent := api.must(201, "POST", "/api/v1/agents", `{"name": "nats"}`)["id"].(string)
	run := api.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`)["id"].(string)
	other := api.must(201, "POST", "/api/v1/agents", `{"name": "other"}`)["id"].(string)
	ws := api.must(201, "POST", "/v1/workspaces", `{"name": "other"}`)["id"].(string)
	otherKey := api.must(201, "POST", "/v1/workspaces/"+ws+"/api-keys", `{"name": "k"}`)["key"].(string)
	nc := newNATSClient(t, s, adminKey)
	subj := func(op string) string { return "plaudit.v1.default." + agent + "." + op }
	cases := []struct {
		name, header, subject, body string
		code                        int
		errCode                     string
		msg                         string // the message's start, when given
	}{
		{"unknown key in the header", "nope", subj("signal"), `{}`, 401, "unauthenticated", ""},
		{"header key of another workspace", otherKey, subj("signal"), `{}`, 403, "forbidden", ""},
		{"unknown agent", adminKey, "plaudit.v1.default.agt_nope.signal", `{}`, 404, "not_found", ""},
		{"not JSON", adminKey, subj("signal"), `{"kind":`, 400, "invalid_request", ""},
		{"bad kind", adminKey, subj("signal"), `{"kind": "a b", "value": 1, "run_id": "` + run + `"}`, 400, "invalid_request", ""},
		{"unknown run", adminKey, subj("finish"), `{"run_id": "run_nope", "succeeded": true}`, 404, "not_found", ""},
		{"finish without run", adminKey, subj("finish"), `{"succeeded": true}`, 400, "invalid_request", ""},
		{"feedback strict", adminKey, subj("feedback"), `{"objectiveId": "` + run + `", "data": {}}`, 400, "invalid_request", ""},
		{"feedback score out of range", adminKey, subj("feedback"), `{"objectiveId": "` + run + `", "metadata": {}, "data": {"score": 2}}`, 400, "invalid_request", ""},
		{"unknown variation", adminKey, subj("variation"), `{"variation_id": "var_nope"}`, 404, "not_found", ""},
		{"pin unknown variation", adminKey, subj("select"), `{"variation_id": "var_nope"}`, 404, "not_found", ""},
		{"report without run", adminKey, subj("report"), `{"scorer": "s", "value": 1}`, 400, "invalid_request", ""},
		{"report on another agent's run", adminKey, "plaudit.v1.default." + other + ".report", `{"run_id": "` + run + `", "scorer": "s", "value": 1}`, 404, "not_found", ""},
		{"report value out of shape", adminKey, subj("report"), `{"run_id": "` + run + `", "scorer": "s", "value": "x"}`, 400, "invalid_request", ""},
		// A target is a string; an argument of another type fails its parse.
		{"run_id a number", adminKey, subj("finish"), `{"run_id": 1, "succeeded": true}`, 400, "invalid_request", "run_id: must be a string"},
		{"run_id an object", adminKey, subj("reward"), `{"run_id": {}}`, 400, "invalid_request", "run_id: must be a string"},
		{"objectiveId a boolean", adminKey, subj("feedback"), `{"objectiveId": true, "metadata": {}, "data": {}}`, 400, "invalid_request", "objectiveId: must be a string"},
		{"variation_id a number", adminKey, subj("variation"), `{"variation_id": 7}`, 400, "invalid_request", "variation_id: must be a string"},
		{"objective_version a boolean", adminKey, subj("reward"), `{"run_id": "` + run + `", "objective_version": true}`, 400, "invalid_request", "objective_version:"},
		{"objective_version an array", adminKey, subj("reward"), `{"run_id": "` + run + `", "objective_version": []}`, 400, "invalid_request", "objective_version:"},
		{"feedback workspaceId of another workspace", adminKey, subj("feedback"), `{"objectiveId": "` + run + `", "workspaceId": "` + ws + `", "metadata": {}, "data": {}}`, 400, "invalid_request", "workspaceId:"},
		{"a key twice", adminKey, subj("finish"), `{"run_id": "` + run + `", "succeeded": true, "succeeded": false}`, 400, "invalid_request", "succeeded: is given more than once"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := &natsClient{t: t, nc: nc.nc, key: c.header}
			code, body := cl.do(c.subject, c.body)
			if code != strconv.Itoa(c.code) || at(t, body, "error", "code") != c.errCode ||
				!strings.HasPrefix(str(t, body, "error", "message"), c.msg) {
				t.Fatalf("reply %s %v, want %d %s %s", code, body, c.code, c.errCode, c.msg)
			}
		})
	}
	// The score's error names the seed-004 field, not the engine's.
	cl := &natsClient{t: t, nc: nc.nc, key: adminKey}
	_, body := cl.do(subj("feedback"), `{"objectiveId": "`+run+`", "metadata": {}, "data": {"score": 2}}`)
	if msg := str(t, body, "error", "message"); !strings.HasPrefix(msg, "data.score:") {
		t.Fatalf("score error message %q does not name data.score", msg)
	}
	// An Idempotency-Key present but empty is refused, as over HTTP.
	msg := nats.NewMsg(subj("signal"))
	msg.Data = []byte(`{"kind": "k", "value": 1, "run_id": "` + run + `"}`)
	msg.Header.Set("Authorization", "Bearer "+adminKey)
	msg.Header["Idempotency-Key"] = []string{""}
	if rep, err := nc.nc.RequestMsg(msg, 10*time.Second); err != nil || rep.Header.Get(micro.ErrorCodeHeader) != "400" {
		t.Fatalf("an empty Idempotency-Key: %v %v", rep, err)
	}
	// Nothing above wrote anything.
	if n := len(api.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", "")["items"].([]any)); n != 0 {
		t.Fatalf("failed requests left %d signals", n)
	}
}

// TestNATSDoorWithoutHeader: a connection's key authenticates its requests;
// the Authorization header is optional, and what is written is attributed
// to the connection's key.
func TestNATSDoorWithoutHeader(t *testing.T) {
	s := startServer(t, Config{})
	api := newClient(t, s, adminKey)
	agent := api.must(201, "POST", "/api/v1/agents", `{"name": "nats"}`)["id"].(string)
	key := api.must(201, "POST", "/v1/workspaces/default/api-keys", `{"name": "worker"}`)
	nc := newNATSClient(t, s, str(t, key, "key"))
	nc.key = "" // no header
	run := nc.must("plaudit.v1.default."+agent+".select", `{"external_id": "t-1"}`)
	obj := api.must(200, "GET", "/v1/workspaces/default/objectives/"+str(t, run, "id"), "")
	if got, want := str(t, obj, "metadata", "profileId"), str(t, key, "profile", "id"); got != want {
		t.Fatalf("run created by profile %s, want the connection's key's %s", got, want)
	}
}

func TestNATSServiceIsDiscoverable(t *testing.T) {
	s := startServer(t, Config{})
	nc := newNATSClient(t, s, adminKey)
	for _, subject := range []string{"$SRV.PING.plaudit", "$SRV.INFO.plaudit", "$SRV.STATS.plaudit"} { // STATS: the admin key's
		rep, err := nc.nc.Request(subject, nil, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		var m map[string]any
		if err := json.Unmarshal(rep.Data, &m); err != nil || m["name"] != "plaudit" {
			t.Fatalf("%s: %s", subject, rep.Data)
		}
	}
	rep, _ := nc.nc.Request("$SRV.INFO.plaudit", nil, 5*time.Second)
	var info micro.Info
	if err := json.Unmarshal(rep.Data, &info); err != nil {
		t.Fatal(err)
	}
	subjects := map[string]bool{}
	for _, e := range info.Endpoints {
		subjects[e.Subject] = true
	}
	for _, op := range []string{"select", "finish", "signal", "feedback", "reward", "variation", "report"} {
		if !subjects[fmt.Sprintf("plaudit.v1.*.*.%s", op)] {
			t.Errorf("endpoint %s missing from $SRV.INFO: %v", op, subjects)
		}
	}
}

// TestExternalNATS: with NATSURL the server embeds no NATS server and serves
// its door on the one it is given.
func TestExternalNATS(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("external nats-server not ready")
	}
	s := startServer(t, Config{NATSURL: ns.ClientURL()})
	if s.nats != nil {
		t.Fatal("an embedded NATS server was started although NATSURL was given")
	}
	api := newClient(t, s, adminKey)
	agent := api.must(201, "POST", "/api/v1/agents", `{"name": "ext"}`)["id"].(string)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := &natsClient{t: t, nc: nc, key: adminKey}
	if run := cl.must("plaudit.v1.default."+agent+".select", `{}`); run["agent_id"] != agent {
		t.Fatalf("select over the external NATS = %v", run)
	}
	// Plaudit cannot tell who is connected to a server it does not run:
	// every request names its key.
	anon := &natsClient{t: t, nc: nc}
	if code, body := anon.do("plaudit.v1.default."+agent+".select", `{}`); code != "401" {
		t.Fatalf("a request without Authorization over an external NATS: %s %v", code, body)
	}
}

// TestNATSOversize: a body over MaxBody is 413 body_too_large as over HTTP;
// an error quoting a large input is answered, clipped, instead of never (it
// did not fit max_payload, in the body and again in a header); a success
// too large for max_payload is answered with a small 500. No request times
// out. The server runs with the default limits.
func TestNATSOversize(t *testing.T) {
	const limit = 1 << 20 // the default MaxBody
	s := startServer(t, Config{})
	api := newClient(t, s, adminKey)
	agent := api.must(201, "POST", "/api/v1/agents", `{"name": "big"}`)["id"].(string)
	nc := newNATSClient(t, s, adminKey)
	subj := func(op string) string { return "plaudit.v1.default." + agent + "." + op }
	reply := func(t *testing.T, subject, body string) *nats.Msg {
		t.Helper()
		msg := nats.NewMsg(subject)
		msg.Data = []byte(body)
		rep, err := nc.nc.RequestMsg(msg, 10*time.Second)
		if err != nil {
			t.Fatalf("%s with a %d-byte body: %v", subject, len(body), err)
		}
		if !json.Valid(rep.Data) {
			t.Fatalf("reply is not JSON: %.200q", rep.Data)
		}
		return rep
	}
	expect := func(t *testing.T, rep *nats.Msg, status int, code, want string) {
		t.Helper()
		var m map[string]any
		_ = json.Unmarshal(rep.Data, &m)
		if got := rep.Header.Get(micro.ErrorCodeHeader); got != strconv.Itoa(status) || at(t, m, "error", "code") != code {
			t.Fatalf("reply %s %.300s, want %d %s", got, rep.Data, status, code)
		}
		if msg := str(t, m, "error", "message"); !strings.Contains(msg, want) || len(msg) > 2048 {
			t.Errorf("message %.300q (%d bytes) does not name %q in under 2 KiB", msg, len(msg), want)
		}
		if h := rep.Header.Get(micro.ErrorHeader); len(h) > 2048 {
			t.Errorf("%s header of %d bytes", micro.ErrorHeader, len(h))
		}
	}

	t.Run("body over MaxBody", func(t *testing.T) {
		body := `{"kind": "k", "value": 1, "object": "` + strings.Repeat("o", limit) + `"}`
		expect(t, reply(t, subj("signal"), body), 413, "body_too_large", fmt.Sprintf("the limit is %d bytes", limit))
	})
	t.Run("error quoting a large input", func(t *testing.T) {
		body := `{"run_id": "external_id:` + strings.Repeat("x", 600<<10) + `", "succeeded": true}`
		expect(t, reply(t, subj("finish"), body), 404, "not_found", "external_id")
	})
	t.Run("success over max_payload", func(t *testing.T) {
		// A variation config under the HTTP limit, whose every '<' is
		// written back as \u003c.
		config := `{"c": "` + strings.Repeat("<", limit-1024) + `"}`
		v := api.must(201, "POST", "/api/v1/agents/"+agent+"/variations", `{"name": "big", "config": `+config+`}`)["id"].(string)
		base := "http://" + s.HTTPAddr()
		before := scrape(t, base)
		expect(t, reply(t, subj("variation"), `{"variation_id": "`+v+`"}`), 500, "internal", "the door carries")
		// Counted as the answer sent: a 500, not the 200 it replaced.
		after := scrape(t, base)
		for code, want := range map[string]float64{"5xx": 1, "2xx": 0} {
			labels := []string{"door=nats", "op=get_variation", "code=" + code}
			if d := max(after.value("plaudit_requests_total", labels...), 0) - max(before.value("plaudit_requests_total", labels...), 0); d != want {
				t.Errorf("get_variation over NATS, %s: %v more, want %v", code, d, want)
			}
		}
	})
	t.Run("malformed number", func(t *testing.T) {
		run := api.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`)["id"].(string)
		expect(t, reply(t, subj("signal"), `{"kind": "k", "value": +1, "run_id": "`+run+`"}`), 400, "invalid_request", "value:")
	})
}
