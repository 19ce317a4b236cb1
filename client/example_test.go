package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/plaudit/plaudit/client"
	"github.com/plaudit/plaudit/server"
)

// exampleKey is the admin key of the examples' servers.
const exampleKey = "pl_example_admin_key_0123456789"

// startExample starts a Plaudit on a temporary directory and loopback
// ports; stop closes it and removes the directory.
func startExample() (s *server.Server, stop func()) {
	dir, err := os.MkdirTemp("", "plaudit-example-")
	if err != nil {
		log.Fatal(err)
	}
	s, err = server.Start(server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", BootstrapKey: exampleKey})
	if err != nil {
		log.Fatal(err)
	}
	return s, func() { _ = s.Close(); _ = os.RemoveAll(dir) }
}

func ExampleNewHTTP() {
	s, stop := startExample()
	defer stop()
	ctx := context.Background()

	c := client.NewHTTP("http://"+s.HTTPAddr(), exampleKey)
	defer c.Close()
	agent, err := c.CreateAgent(ctx, client.AgentRequest{Name: "support"})
	if err != nil {
		log.Fatal(err)
	}
	run, err := c.Select(ctx, agent.ID, client.SelectRequest{Version: "3", SessionID: "chat-7"})
	if err != nil {
		log.Fatal(err)
	}
	sig, err := c.Signal(ctx, agent.ID, client.SignalRequest{Kind: "human.rating", Value: 0.8, RunID: run.ID, DedupKey: "msg-19"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Finish(ctx, agent.ID, run.ID, client.FinishRequest{Succeeded: true}); err != nil {
		log.Fatal(err)
	}
	rw, err := c.Reward(ctx, agent.ID, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Status, sig.Kind, len(sig.RunIDs))
	fmt.Println(rw.Status, *rw.Value, rw.Matured)
	// Output:
	// running human.rating 1
	// scored 0.8 false
}

func ExampleDialNATS() {
	s, stop := startExample()
	defer stop()
	ctx := context.Background()

	// Agents are made over HTTP; the hot path runs on NATS.
	h := client.NewHTTP("http://"+s.HTTPAddr(), exampleKey)
	defer h.Close()
	agent, err := h.CreateAgent(ctx, client.AgentRequest{Name: "support"})
	if err != nil {
		log.Fatal(err)
	}

	c, err := client.DialNATS(s.NATSURL(), exampleKey)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	run, err := c.Select(ctx, agent.ID, client.SelectRequest{})
	if err != nil {
		log.Fatal(err)
	}
	score := 1.0
	fb, err := c.Feedback(ctx, agent.ID, run.ID, client.FeedbackRequest{Data: client.FeedbackData{Score: &score, Comment: "Short and on point."}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Finish(ctx, agent.ID, run.ID, client.FinishRequest{Succeeded: true}); err != nil {
		log.Fatal(err)
	}
	rw, err := c.Reward(ctx, agent.ID, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*fb.Data.Score, fb.Data.Comment)
	fmt.Println(rw.Status, rw.Value == nil)
	// Output:
	// 1 Short and on point.
	// excluded true
}

func ExampleClient_Report() {
	s, stop := startExample()
	defer stop()
	ctx := context.Background()

	c := client.NewHTTP("http://"+s.HTTPAddr(), exampleKey)
	defer c.Close()
	agent, err := c.CreateAgent(ctx, client.AgentRequest{Name: "coder"})
	if err != nil {
		log.Fatal(err)
	}
	job, err := c.Select(ctx, agent.ID, client.SelectRequest{})
	if err != nil {
		log.Fatal(err)
	}
	v := 0.92
	rep, err := c.Report(ctx, agent.ID, job.ID, client.ReportRequest{Kind: "external", Scorer: "ci.tests", Value: &v,
		Detail: map[string]any{"suite": "unit", "passed": 46}, IdempotencyKey: "ci-run-812"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Kind, rep.Scorer, *rep.Value, string(rep.DetailJSON))
	// Output: external ci.tests 0.92 {"passed":46,"suite":"unit"}
}

func ExampleClient_JudgedReward() {
	s, stop := startExample()
	defer stop()
	ctx := context.Background()

	c := client.NewHTTP("http://"+s.HTTPAddr(), exampleKey)
	defer c.Close()
	// A task of built-in checks only is scored in the request.
	task := map[string]any{"id": "aicme/example-001", "prompt": "Summarise the ticket.",
		"rubric": map[string]any{"criteria": []any{
			map[string]any{"id": "mentions-refund", "must": true, "check": map[string]any{"type": "contains", "value": "refund"}},
			map[string]any{"id": "short", "check": map[string]any{"type": "max_chars", "value": 400}},
		}}}
	if err := c.Do(ctx, "POST", "/v1/tasks", task, nil); err != nil {
		log.Fatal(err)
	}
	rw, err := c.JudgedReward(ctx, client.JudgedRewardRequest{Task: client.TaskRef{ID: "aicme/example-001"}, Answer: "A refund is on its way."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rw.Status, rw.Scores.Reward, rw.Flags)
	// Output: scored 1 []
}

func ExampleError() {
	s, stop := startExample()
	defer stop()
	ctx := context.Background()

	c := client.NewHTTP("http://"+s.HTTPAddr(), exampleKey)
	defer c.Close()
	agent, err := c.CreateAgent(ctx, client.AgentRequest{Name: "support"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Signal(ctx, agent.ID, client.SignalRequest{Kind: "human rating", Value: 1, RunID: "run_x"})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, e.Field)
	}
	// Output: 400 invalid_request kind
}
