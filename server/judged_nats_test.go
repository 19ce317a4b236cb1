package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/plaudit/plaudit/internal/jsontest"
)

// Judged rewards (seed 003) on the NATS door: plaudit.v1.<ws>.tasks.reward
// is POST /v1/rewards, through the real server and its embedded NATS
// server, from a tenant connection that authenticates with its key as the
// NATS token only.

const builtinTask = `{"id": "acme/builtin", "rubric": {"criteria": [
	{"id": "refund", "must": true, "check": {"type": "contains", "value": "refund"}},
	{"id": "short", "check": {"type": "max_chars", "value": 400}}]}}`

const judgedRewardSubject = "plaudit.v1.default.tasks.reward"

// natsReply is a NATS door reply.
type natsReply struct {
	code   string // Nats-Service-Error-Code; "" on success
	msg    *nats.Msg
	fields map[string]any
}

// natsRequest sends body with headers (no Authorization unless hdr sets
// it) and decodes the JSON reply.
func natsRequest(t *testing.T, nc *nats.Conn, subject, body string, hdr map[string]string) natsReply {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = []byte(body)
	for k, v := range hdr {
		msg.Header.Set(k, v)
	}
	rep, err := nc.RequestMsg(msg, 15*time.Second)
	if err != nil {
		t.Fatalf("%s %s: %v", subject, body, err)
	}
	r := natsReply{code: rep.Header.Get(micro.ErrorCodeHeader), msg: rep}
	if err := json.Unmarshal(rep.Data, &r.fields); err != nil || !jsontest.Valid(rep.Data) {
		t.Fatalf("%s: reply is not a JSON object: %q", subject, rep.Data)
	}
	if r.code != "" && rep.Header.Get(micro.ErrorHeader) == "" {
		t.Fatalf("%s: error code %s without a %s header", subject, r.code, micro.ErrorHeader)
	}
	if rep.Header.Get("X-Request-Id") == "" {
		t.Fatalf("%s: reply without X-Request-Id", subject)
	}
	return r
}

// tenantConn connects with a new key of the default workspace as the NATS
// token, and nothing else.
func tenantConn(t *testing.T, s *Server, c *client) *nats.Conn {
	t.Helper()
	key := str(t, c.must(201, "POST", "/v1/workspaces/default/api-keys", `{"name": "nats-rewards"}`), "key")
	nc, err := nats.Connect(s.NATSURL(), nats.Token(key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestNATSJudgedRewardBuiltins: a task of built-in checks only is scored
// in the request; the reply is the reward, with no error headers and no
// Retry-After, and HTTP reads the same reward.
func TestNATSJudgedRewardBuiltins(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", builtinTask)
	nc := tenantConn(t, s, c)

	r := natsRequest(t, nc, judgedRewardSubject, `{"task": {"id": "acme/builtin"}, "answer": "A refund is on its way.", "client_ref": "n-1"}`, nil)
	if r.code != "" || r.msg.Header.Get("Retry-After") != "" {
		t.Fatalf("reply: code %q, Retry-After %q: %v", r.code, r.msg.Header.Get("Retry-After"), r.fields)
	}
	expect(t, r.fields, "reward", "object")
	expect(t, r.fields, "scored", "status")
	expect(t, r.fields, 1.0, "scores", "reward")
	expect(t, r.fields, "acme/builtin", "task", "id")
	expect(t, r.fields, "n-1", "client_ref")
	id := str(t, r.fields, "id")
	expect(t, c.must(200, "GET", "/v1/rewards/"+id, ""), "scored", "status")

	// The same answer again is the first reward (a 200 over HTTP).
	again := natsRequest(t, nc, judgedRewardSubject, `{"task": {"id": "acme/builtin"}, "answer": "A refund is on its way."}`, nil)
	if again.code != "" || str(t, again.fields, "id") != id {
		t.Fatalf("same answer again: code %q, %v; want reward %s", again.code, again.fields, id)
	}
	// A miss of the must criterion scores 0.
	miss := natsRequest(t, nc, judgedRewardSubject, `{"task": {"id": "acme/builtin"}, "answer": "No."}`, nil)
	expect(t, miss.fields, 0.0, "scores", "reward")
}

// TestNATSJudgedRewardPreferWait: a task with a model judge. Without
// Prefer the reply is the pending reward (HTTP's 202: no error headers,
// Retry-After: 1); with the NATS header Prefer: wait=5 the reply waits for
// the judge worker and is the scored reward.
func TestNATSJudgedRewardPreferWait(t *testing.T) {
	s := startServer(t, Config{JudgeDeadline: 10 * time.Second})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", toneTask)
	nc := tenantConn(t, s, c)
	w := startJudge(t, s, "tone", 300*time.Millisecond, always(`{"met": true}`))

	p := natsRequest(t, nc, judgedRewardSubject, `{"task": {"id": "acme/tone"}, "answer": "A refund, kindly."}`, nil)
	if p.code != "" || p.msg.Header.Get("Retry-After") != "1" {
		t.Fatalf("pending reply: code %q, Retry-After %q: %v", p.code, p.msg.Header.Get("Retry-After"), p.fields)
	}
	expect(t, p.fields, "pending", "status")
	expect(t, p.fields, nil, "scores")

	start := time.Now()
	r := natsRequest(t, nc, judgedRewardSubject, toneReward, map[string]string{"Prefer": "wait=5"})
	if r.code != "" || r.msg.Header.Get("Retry-After") != "" {
		t.Fatalf("reply with Prefer: wait=5: code %q, Retry-After %q: %v", r.code, r.msg.Header.Get("Retry-After"), r.fields)
	}
	expect(t, r.fields, "scored", "status")
	expect(t, r.fields, 1.0, "scores", "reward")
	expect(t, r.fields, 1.0, "scores", "all_pass")
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("the reply came after %v, before the judge could answer", d)
	}
	if w.asked.Load() < 2 {
		t.Errorf("the judge was asked %d times, want 2", w.asked.Load())
	}
	// The first one scores too.
	g := c.request("GET", "/v1/rewards/"+str(t, p.fields, "id"), "", map[string]string{"Prefer": "wait=5"})
	if g.status != 200 {
		t.Fatalf("GET the first reward: %d %s", g.status, g.body)
	}
	expect(t, g.json(t), "scored", "status")
}

// TestNATSJudgedRewardErrors: bad bodies and a bad Prefer answer 400 with
// the error headers and the JSON error body; an unknown task 404.
func TestNATSJudgedRewardErrors(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", builtinTask)
	nc := tenantConn(t, s, c)
	cases := []struct {
		name, body string
		hdr        map[string]string
		code       string
		errCode    string
		field      string // the start of the error message
	}{
		{"not JSON", `{"task":`, nil, "400", "invalid_request", ""},
		{"not an object", `[1]`, nil, "400", "invalid_request", ""},
		{"no task", `{"answer": "refund"}`, nil, "400", "invalid_request", "task"},
		{"answer not a string", `{"task": {"id": "acme/builtin"}, "answer": 1}`, nil, "400", "invalid_request", "answer"},
		{"bad Prefer", `{"task": {"id": "acme/builtin"}, "answer": "refund"}`, map[string]string{"Prefer": "wait=121"}, "400", "invalid_request", "Prefer"},
		{"unknown task", `{"task": {"id": "acme/none"}, "answer": "refund"}`, nil, "404", "not_found", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := natsRequest(t, nc, judgedRewardSubject, tc.body, tc.hdr)
			if r.code != tc.code || at(t, r.fields, "error", "code") != tc.errCode {
				t.Fatalf("reply %q %v, want %s %s", r.code, r.fields, tc.code, tc.errCode)
			}
			if msg := str(t, r.fields, "error", "message"); r.msg.Header.Get(micro.ErrorHeader) != msg {
				t.Errorf("%s header %q, body message %q", micro.ErrorHeader, r.msg.Header.Get(micro.ErrorHeader), msg)
			}
			if tc.field != "" {
				if msg := str(t, r.fields, "error", "message"); len(msg) < len(tc.field) || msg[:len(tc.field)] != tc.field {
					t.Errorf("message %q does not name %s", msg, tc.field)
				}
			}
		})
	}
	// Seed 000's reward of a run still answers on the same endpoint for a
	// real agent token.
	agent := c.must(201, "POST", "/api/v1/agents", `{"name": "a"}`)["id"].(string)
	r := natsRequest(t, nc, "plaudit.v1.default."+agent+".reward", `{}`, nil)
	if r.code != "400" || str(t, r.fields, "error", "message")[:len("run_id")] != "run_id" {
		t.Fatalf("agent reward without run_id: %q %v", r.code, r.fields)
	}
}

// TestNATSJudgedRewardIdempotencyKeyAcrossDoors: a reward posted over HTTP
// under an Idempotency-Key is replayed, byte for byte, by the same key and
// body on NATS (the two doors give the operation the same target).
func TestNATSJudgedRewardIdempotencyKeyAcrossDoors(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", builtinTask)
	nc := tenantConn(t, s, c)
	body := `{"task": {"id": "acme/builtin"}, "answer": "refund"}`
	first := c.request("POST", "/v1/rewards", body, withKey("rw-nats-1"))
	if first.status != 201 {
		t.Fatalf("HTTP: %d %s", first.status, first.body)
	}
	r := natsRequest(t, nc, judgedRewardSubject, body, withKey("rw-nats-1"))
	if r.code != "" || string(r.msg.Data) != string(first.body) ||
		r.msg.Header.Get("X-Request-Id") != first.header.Get("X-Request-Id") {
		t.Fatalf("NATS replay: code %q, X-Request-Id %q, %s; want %q, %s", r.code,
			r.msg.Header.Get("X-Request-Id"), r.msg.Data, first.header.Get("X-Request-Id"), first.body)
	}
}
