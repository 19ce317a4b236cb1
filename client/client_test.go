package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/plaudit/plaudit/client"
	"github.com/plaudit/plaudit/server"
)

const adminKey = "pl_test_admin_key_0123456789abcdef"

// startServer starts a Plaudit on loopback ports, closed when the test ends.
func startServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.HTTPAddr, cfg.NATSListen, cfg.BootstrapKey = "127.0.0.1:0", "127.0.0.1:0", adminKey
	s, err := server.Start(cfg)
	if err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// door opens a client of one door of s.
type door struct {
	name string
	open func(t *testing.T, s *server.Server, opts ...client.Option) *client.Client
}

var doors = []door{
	{"http", func(t *testing.T, s *server.Server, opts ...client.Option) *client.Client {
		c := client.NewHTTP("http://"+s.HTTPAddr(), adminKey, opts...)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}},
	{"nats", func(t *testing.T, s *server.Server, opts ...client.Option) *client.Client {
		c, err := client.DialNATS(s.NATSURL(), adminKey, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}},
}

// setup makes an agent with one variation, over HTTP.
func setup(t *testing.T, s *server.Server) (h *client.Client, agent, variation string) {
	t.Helper()
	ctx := context.Background()
	h = client.NewHTTP("http://"+s.HTTPAddr(), adminKey)
	t.Cleanup(func() { _ = h.Close() })
	a, err := h.CreateAgent(ctx, client.AgentRequest{Name: "support"})
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ ID string }
	if err := h.Do(ctx, "POST", "/api/v1/agents/"+a.ID+"/variations", map[string]any{"name": "concise"}, &v); err != nil {
		t.Fatal(err)
	}
	return h, a.ID, v.ID
}

// signalCount is how many signals were posted to run.
func signalCount(t *testing.T, h *client.Client, agent, run string) int {
	t.Helper()
	var list struct{ Items []client.Signal }
	if err := h.Do(context.Background(), "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", nil, &list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// TestHotOperations runs every typed operation on each door against a real
// server and checks the answers' shapes.
func TestHotOperations(t *testing.T) {
	s := startServer(t, server.Config{})
	ctx := context.Background()
	task := map[string]any{"id": "acme/refund", "prompt": "Answer.", "rubric": map[string]any{"criteria": []any{
		map[string]any{"id": "refund", "must": true, "check": map[string]any{"type": "contains", "value": "refund"}}}}}
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			h, agent, variation := setup(t, s)
			if err := h.Do(ctx, "POST", "/v1/tasks", task, nil); err != nil {
				t.Fatal(err)
			}
			// A healthy server needs no retry, and an operation the door
			// does not serve is refused without one.
			c := d.open(t, s, client.OnRetry(func(r client.Retry) { t.Errorf("retry on a healthy server: %+v", r) }))

			run, err := c.Select(ctx, agent, client.SelectRequest{Version: "3", SessionID: "chat-7", Labels: map[string]string{"door": d.name}})
			if err != nil {
				t.Fatal(err)
			}
			if run.AgentID != agent || run.Status != "running" || run.Version != "3" || run.SessionID != "chat-7" ||
				run.Variation == nil || run.Variation.ID != variation || run.VariationID != variation || run.Labels["door"] != d.name || run.RequestID == "" {
				t.Fatalf("Select = %+v", run)
			}

			sig, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "human.rating", Value: 0.8, RunID: run.ID, DedupKey: "m1"})
			if err != nil {
				t.Fatal(err)
			}
			if sig.Kind != "human.rating" || sig.Value != 0.8 || len(sig.RunIDs) != 1 || sig.RunIDs[0] != run.ID || sig.Duplicate || sig.DedupKey != "m1" {
				t.Fatalf("Signal = %+v", sig)
			}
			dup, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "human.rating", Value: 0.8, RunID: run.ID, DedupKey: "m1"})
			if err != nil || !dup.Duplicate || dup.ID != sig.ID {
				t.Fatalf("Signal again with its dedup key = %+v, %v; want the first, as a duplicate", dup, err)
			}

			score := 1.0
			fb, err := c.Feedback(ctx, agent, run.ID, client.FeedbackRequest{Data: client.FeedbackData{Score: &score, Comment: "good"}})
			if err != nil {
				t.Fatal(err)
			}
			if fb.Data.Score == nil || *fb.Data.Score != 1 || fb.Data.Comment != "good" || fb.Metadata.WorkspaceID != "default" || len(fb.Info.SubmittedBy) == 0 {
				t.Fatalf("Feedback = %+v", fb)
			}

			fin, err := c.Finish(ctx, agent, run.ID, client.FinishRequest{Succeeded: true})
			if err != nil {
				t.Fatal(err)
			}
			if fin.ID != run.ID || fin.Status != "succeeded" || fin.FinishedAt == nil {
				t.Fatalf("Finish = %+v", fin)
			}

			rw, err := c.Reward(ctx, agent, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rw.RunID != run.ID || rw.Status != "scored" || rw.Value == nil || *rw.Value != 0.8 || rw.MaturesAt == nil || len(rw.Terms) != 2 || len(rw.Guards) != 1 {
				t.Fatalf("Reward = %+v", rw)
			}
			if rw0, err := c.RewardAt(ctx, agent, run.ID, 0); err != nil || rw0.ObjectiveVersion != 0 {
				t.Fatalf("RewardAt 0 = %+v, %v", rw0, err)
			}

			jr, err := c.JudgedReward(ctx, client.JudgedRewardRequest{Task: client.TaskRef{ID: "acme/refund"}, Answer: "A refund, via " + d.name, EpisodeID: run.ID})
			if err != nil {
				t.Fatal(err)
			}
			if jr.Object != "reward" || jr.Status != "scored" || jr.Scores == nil || jr.Scores.Reward != 1 || jr.EpisodeID != run.ID || jr.Task.Version == "" {
				t.Fatalf("JudgedReward = %+v", jr)
			}

			v := 0.5
			rep, err := c.Report(ctx, agent, run.ID, client.ReportRequest{Scorer: "ci.tests", Value: &v, Detail: map[string]any{"suite": "unit"}})
			if err != nil || rep.JobID != run.ID || rep.Kind != "external" || rep.Scorer != "ci.tests" || *rep.Value != 0.5 || string(rep.DetailJSON) != `{"suite":"unit"}` {
				t.Fatalf("Report = %+v, %v", rep, err)
			}
			got, err := c.GetJudgedReward(ctx, jr.ID, 0)
			switch d.name {
			case "http":
				if err != nil || got.ID != jr.ID || got.Status != "scored" {
					t.Fatalf("GetJudgedReward = %+v, %v", got, err)
				}
			case "nats":
				if !errors.Is(err, client.ErrUnsupported) {
					t.Fatalf("GetJudgedReward over NATS: %v, want ErrUnsupported", err)
				}
			}
		})
	}
}

// TestErrorsDecoded checks that each door's error answers decode into the
// same *Error: status, code (or the seed-004 gRPC code), field path and
// request id.
func TestErrorsDecoded(t *testing.T) {
	s := startServer(t, server.Config{})
	ctx := context.Background()
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			_, agent, _ := setup(t, s)
			c := d.open(t, s)
			run, err := c.Select(ctx, agent, client.SelectRequest{})
			if err != nil {
				t.Fatal(err)
			}
			score := 2.0
			// Feedback over HTTP answers in seed 004's google.rpc.Status shape.
			feedbackCode, feedbackGRPC := "invalid_request", 0
			if d.name == "http" {
				feedbackCode, feedbackGRPC = "", 3
			}
			tests := []struct {
				name   string
				call   func() error
				status int
				code   string
				grpc   int
				field  string
			}{
				{"invalid kind", func() error {
					_, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "human rating", Value: 1, RunID: run.ID})
					return err
				}, 400, "invalid_request", 0, "kind"},
				{"score out of range", func() error {
					_, err := c.Feedback(ctx, agent, run.ID, client.FeedbackRequest{Data: client.FeedbackData{Score: &score}})
					return err
				}, 400, feedbackCode, feedbackGRPC, "data.score"},
				{"unknown run", func() error {
					_, err := c.Reward(ctx, agent, "run_01JAAAAAAAAAAAAAAAAAAAAAAA")
					return err
				}, 404, "not_found", 0, ""},
				{"key reused with another body", func() error {
					if _, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "k", Value: 1, RunID: run.ID, IdempotencyKey: "reuse-" + d.name}); err != nil {
						return err
					}
					_, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "k", Value: 2, RunID: run.ID, IdempotencyKey: "reuse-" + d.name})
					return err
				}, 409, "idempotency_key_reused", 0, ""},
				{"bad Idempotency-Key", func() error {
					_, err := c.Finish(ctx, agent, run.ID, client.FinishRequest{Succeeded: true, IdempotencyKey: "has space"})
					return err
				}, 400, "invalid_request", 0, "Idempotency-Key"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					err := tc.call()
					var e *client.Error
					if !errors.As(err, &e) {
						t.Fatalf("err = %v, want a *client.Error", err)
					}
					if e.Status != tc.status || e.Code != tc.code || e.GRPCCode != tc.grpc || e.Field != tc.field || e.RequestID == "" || e.Message == "" {
						t.Fatalf("err = %#v, want status %d code %q grpc %d field %q and a request id", e, tc.status, tc.code, tc.grpc, tc.field)
					}
				})
			}
		})
	}
}

// TestAWriteRetriedThroughTheOtherDoorIsOneWrite: every typed write that
// names a run (finish, report, feedback), sent under a key over one door and
// retried under it over the other, is answered the first answer, not 409:
// both doors send the same bytes.
func TestAWriteRetriedThroughTheOtherDoorIsOneWrite(t *testing.T) {
	s := startServer(t, server.Config{})
	ctx := context.Background()
	_, agent, _ := setup(t, s)
	h, n := doors[0].open(t, s), doors[1].open(t, s)
	score := 1.0
	for _, tc := range []struct {
		name  string
		write func(c *client.Client, run, key string) (string, error)
	}{
		{"finish", func(c *client.Client, run, key string) (string, error) {
			r, err := c.Finish(ctx, agent, run, client.FinishRequest{Succeeded: true, IdempotencyKey: key})
			return r.RequestID, err
		}},
		{"report", func(c *client.Client, run, key string) (string, error) {
			r, err := c.Report(ctx, agent, run, client.ReportRequest{Scorer: "grader", Value: &score, IdempotencyKey: key})
			return r.RequestID, err
		}},
		{"feedback", func(c *client.Client, run, key string) (string, error) {
			r, err := c.Feedback(ctx, agent, run, client.FeedbackRequest{Data: client.FeedbackData{Score: &score}, IdempotencyKey: key})
			return r.RequestID, err
		}},
	} {
		for _, order := range [][2]*client.Client{{h, n}, {n, h}} {
			run, err := h.Select(ctx, agent, client.SelectRequest{})
			if err != nil {
				t.Fatal(err)
			}
			key := tc.name + "-" + run.ID
			first, err := tc.write(order[0], run.ID, key)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			again, err := tc.write(order[1], run.ID, key)
			if err != nil || again != first {
				t.Errorf("%s retried through the other door: %v, request id %q; want the first answer's %q", tc.name, err, again, first)
			}
		}
	}
}

// TestNATSAuthorizationHeader: a request's Authorization header is checked
// on NATS; a key the server does not know is 401.
func TestNATSAuthorizationHeader(t *testing.T) {
	s := startServer(t, server.Config{})
	_, agent, _ := setup(t, s)
	nc, err := nats.Connect(s.NATSURL(), nats.Token(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := client.NewNATS(nc, client.NATSAuthorization("pl_not_a_key"))
	_, err = c.Select(context.Background(), agent, client.SelectRequest{})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != "unauthenticated" {
		t.Fatalf("err = %v, want 401 unauthenticated", err)
	}
	if _, err := client.NewNATS(nc).Select(context.Background(), agent, client.SelectRequest{}); err != nil {
		t.Fatalf("Close of a NewNATS client must leave the caller's connection open: %v", err)
	}
}

// TestARevokedKeyIs401OnBothDoors: once its key is revoked, a client's
// calls fail with the 401 HTTP answers, on NATS too (the server closes the
// key's connections and refuses their reconnects), not with a transport
// error retried until the call's time runs out.
func TestARevokedKeyIs401OnBothDoors(t *testing.T) {
	s := startServer(t, server.Config{})
	h, agent, _ := setup(t, s)
	ctx := context.Background()
	var key struct{ ID, Key string }
	if err := h.Do(ctx, "POST", "/v1/workspaces/default/api-keys", map[string]string{"name": "runner"}, &key); err != nil {
		t.Fatal(err)
	}
	c := client.NewHTTP("http://"+s.HTTPAddr(), key.Key)
	defer c.Close()
	n, err := client.DialNATS(s.NATSURL(), key.Key, client.Timeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, c := range []*client.Client{c, n} {
		if _, err := c.Select(ctx, agent, client.SelectRequest{}); err != nil {
			t.Fatalf("before the revocation: %v", err)
		}
	}
	if err := h.Do(ctx, "DELETE", "/v1/workspaces/default/api-keys/"+key.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	for i, c := range []*client.Client{c, n, n} {
		_, err := c.Select(ctx, agent, client.SelectRequest{})
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != "unauthenticated" {
			t.Fatalf("call %d after the revocation: err = %v, want 401 unauthenticated", i, err)
		}
	}
}

// TestDoWithAnIdempotencyKey: Do sends the caller's key, so the same call
// again, from another client, replays the first answer, and another body
// under the key is refused.
func TestDoWithAnIdempotencyKey(t *testing.T) {
	s := startServer(t, server.Config{})
	ctx := context.Background()
	key := client.WithIdempotencyKey("create-support-" + client.NewKey())
	var first, again struct{ ID string }
	for _, out := range []*struct{ ID string }{&first, &again} {
		c := client.NewHTTP("http://"+s.HTTPAddr(), adminKey)
		if err := c.Do(ctx, "POST", "/api/v1/agents", map[string]any{"name": "support"}, out, key); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	if first.ID == "" || again.ID != first.ID {
		t.Fatalf("the same keyed call twice made agents %q and %q, want one", first.ID, again.ID)
	}
	c := client.NewHTTP("http://"+s.HTTPAddr(), adminKey)
	defer c.Close()
	err := c.Do(ctx, "POST", "/api/v1/agents", map[string]any{"name": "billing"}, nil, key)
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != "idempotency_key_reused" {
		t.Fatalf("another body under the key: err = %v, want 409 idempotency_key_reused", err)
	}
}

// TestAnIdempotencyKeyThatCannotBeSentIsNotTried: a key holding a
// control character fails at once with ErrInvalidIdempotencyKey and is
// not tried again (a newline, which net/http refuses in a header, was
// taken for a transport error and tried for 5 s); any other key the server
// refuses is its 400, naming the header, not tried again either.
func TestAnIdempotencyKeyThatCannotBeSentIsNotTried(t *testing.T) {
	s := startServer(t, server.Config{})
	ctx := context.Background()
	retried := false
	c := client.NewHTTP("http://"+s.HTTPAddr(), adminKey, client.OnRetry(func(client.Retry) { retried = true }))
	defer c.Close()
	do := func(key string) error {
		return c.Do(ctx, "POST", "/api/v1/agents", map[string]any{"name": "x"}, nil, client.WithIdempotencyKey(key))
	}
	for _, key := range []string{"a\nb", "tab\tkey", "del\x7f"} {
		if err := do(key); !errors.Is(err, client.ErrInvalidIdempotencyKey) {
			t.Errorf("key %q: err = %v, want ErrInvalidIdempotencyKey", key, err)
		}
	}
	for _, key := range []string{"with space", "é", strings.Repeat("k", 201)} {
		var e *client.Error
		if err := do(key); !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != "Idempotency-Key" {
			t.Errorf("key %q: err = %v, want the server's 400 naming Idempotency-Key", key, err)
		}
	}
	if retried {
		t.Error("a refused key was tried again")
	}
	if err := do(strings.Repeat("k", 200)); err != nil {
		t.Errorf("a key of 200 characters: %v", err)
	}
}

// TestDeadlineWithoutServer: a call to a door nobody answers gives up by
// its context's deadline, with the transport error.
func TestDeadlineWithoutServer(t *testing.T) {
	c := client.NewHTTP("http://127.0.0.1:1", adminKey, client.Backoff(10*time.Millisecond, 50*time.Millisecond), client.MaxAttempts(1000))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Signal(ctx, "agt_x", client.SignalRequest{Kind: "k", Value: 1, RunID: "run_x"})
	if err == nil || errors.As(err, new(*client.Error)) {
		t.Fatalf("err = %v, want a transport error", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("gave up after %v, past the 300ms deadline", took)
	}
}

// TestNATSRefusesWhatNoSubjectCanCarry: over NATS, an agent or workspace
// name that is not one subject token, and a body over the connection's
// max_payload, fail at once and are not retried: ErrUnsupported for the
// names, the door's 413 body_too_large for the body (what HTTP answers).
func TestNATSRefusesWhatNoSubjectCanCarry(t *testing.T) {
	s := startServer(t, server.Config{})
	_, agent, _ := setup(t, s)
	ctx := context.Background()
	retried := false
	opts := []client.Option{client.OnRetry(func(client.Retry) { retried = true })}
	c := doors[1].open(t, s, opts...)
	for _, name := range []string{"external_id:team.bot1", "external_id:team bot1", "", "*", ">"} {
		if _, err := c.Select(ctx, name, client.SelectRequest{}); !errors.Is(err, client.ErrUnsupported) || !strings.Contains(err.Error(), "agent") {
			t.Errorf("Select(%q) = %v, want ErrUnsupported naming the agent", name, err)
		}
	}
	if _, err := doors[1].open(t, s, append(opts, client.Workspace("ws.x"))...).Select(ctx, agent, client.SelectRequest{}); !errors.Is(err, client.ErrUnsupported) {
		t.Errorf("workspace ws.x: %v, want ErrUnsupported", err)
	}
	big := client.SelectRequest{Labels: map[string]string{"big": strings.Repeat("a", 3<<20)}}
	var e *client.Error
	if _, err := c.Select(ctx, agent, big); !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge || e.Code != "body_too_large" {
		t.Errorf("a 3 MiB select: %v, want 413 body_too_large", err)
	}
	if retried {
		t.Error("a call refused before it left was retried")
	}
	if _, err := c.Select(ctx, agent, client.SelectRequest{}); err != nil {
		t.Fatalf("the connection after the refusals: %v", err)
	}
}

// TestTimeoutCoversTheWait: a judged reward's Wait lengthens the default
// Timeout of a call whose context has no deadline, as it does each
// attempt's, so a server holding the answer for the wait is waited for.
func TestTimeoutCoversTheWait(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // the server holds the answer (Prefer: wait=1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"object": "reward", "id": "rw_1", "status": "scored"}`)
	}))
	defer hs.Close()
	c := client.NewHTTP(hs.URL, adminKey, client.Timeout(100*time.Millisecond), client.AttemptTimeout(100*time.Millisecond), client.MaxAttempts(1))
	defer c.Close()
	rw, err := c.JudgedReward(context.Background(), client.JudgedRewardRequest{Task: client.TaskRef{ID: "t"}, Answer: "a", Wait: time.Second})
	if err != nil || rw.Status != "scored" {
		t.Fatalf("JudgedReward with Wait 1s past a 100ms Timeout: %+v, %v; want the scored reward", rw, err)
	}
}
