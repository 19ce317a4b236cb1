package bench

import (
	"bytes"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/transport/natsdoor"
)

// The tasks of the judged-reward workloads (seed 003). Both have the same
// three built-in criteria (contains, max_chars, number_close); JudgedTask
// adds one model-judge criterion, so the two differ only by that judge's
// round trip.
const (
	builtinCriteria = `{"id":"mentions-refund","must":true,"weight":2,"check":{"type":"contains","value":"refund"}},` +
		`{"id":"short","check":{"type":"max_chars","value":400}},` +
		`{"id":"amount","check":{"type":"number_close","value":42,"tolerance":0.5}}`
	// BuiltinTaskID is the task of the built-in-only rewards.
	BuiltinTaskID = "bench/builtin"
	builtinTask   = `{"id":"` + BuiltinTaskID + `","prompt":"Summarise the ticket.","soft_cap_chars":2000,` +
		`"rubric":{"criteria":[` + builtinCriteria + `]}}`
	// JudgedTaskID is the task whose rubric adds the model judge JudgeName.
	JudgedTaskID = "bench/judged"
	// JudgeName is the model judge of JudgedTaskID; under j1 its subject is
	// plaudit.judge.default.<JudgeName>.
	JudgeName  = "bench-tone"
	judgedTask = `{"id":"` + JudgedTaskID + `","prompt":"Summarise the ticket.","soft_cap_chars":2000,` +
		`"rubric":{"criteria":[` + builtinCriteria + `,{"id":"tone","check":{"judge":"` + JudgeName + `"}}]}}`
)

// judgeVerdict is what the bench's judge workers answer, at once.
var judgeVerdict = []byte(`{"met": true}`)

// rewardWait is the Prefer header of every reward request: it holds the
// answer until the reward is final (at once for built-in checks only).
const rewardWait = "wait=10"

// answerRun makes this process's answers differ from those of an earlier
// harness run against the same server.
var answerRun = strconv.FormatInt(time.Now().UnixNano(), 36) + "-"

// answers numbers the answers of every reward workload of this process,
// so that rows run one after another on one server never repeat an
// answer (which the server would answer with the first reward, 200).
var answers atomic.Uint64

// appendAnswer appends the answer of operation i: it meets all three
// built-in criteria (and is not flagged), and differs from every other
// operation's, so that none is a same-answer reuse of an earlier reward.
func appendAnswer(b []byte, i uint64) []byte {
	b = append(b, "A refund of 42 euros is on its way; reference "...)
	b = append(b, answerRun...)
	b = strconv.AppendUint(b, i, 10)
	return append(b, '.')
}

// InProcessReward is the floor of a judged reward: the engine's own
// scoring (judge.Task Prepare, then judge.Score, flags included) of the
// built-in task, with no server, store or network, n times over c
// workers, on answers that differ as the HTTP rows' do. Each must score
// 1 with no flag and no judge to ask.
func InProcessReward(l Loop) (Result, error) {
	t, err := judge.Parse([]byte(builtinTask), "")
	if err != nil {
		return Result{}, fmt.Errorf("bench: builtin task: %w", err)
	}
	var next atomic.Uint64
	return l.Run(func(int) (Op, error) {
		var buf []byte
		return func() error {
			buf = appendAnswer(buf[:0], next.Add(1))
			answer := string(buf)
			outcomes, judges := t.Prepare(answer)
			scores, flags := judge.Score(t, answer, outcomes)
			if len(judges) != 0 || len(flags) != 0 || scores.AllPass != 1 || scores.Reward != 1 {
				return fmt.Errorf("bench: in-process reward: %d judges, flags %v, scores %+v", len(judges), flags, scores)
			}
			return nil
		}, nil
	})
}

// HTTPJudgedReward creates the built-in-only task on the server at baseURL,
// then has c workers post n judged rewards of it in total, each over its
// own keep-alive connection and each answer new:
//
//	POST /v1/rewards {"task":{"id":"bench/builtin"},"answer":"A refund of 42 euros… <i>."}  (Prefer: wait=10)
//
// Every reward must answer 201 and be scored with all_pass 1; scoring is
// in the request, and the reward is synced before the answer.
func HTTPJudgedReward(baseURL, key string, l Loop) (Result, error) {
	cl, err := newClient(baseURL, key, l.C)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	if err := cl.putTask(builtinTask); err != nil {
		return Result{}, err
	}
	return rewardIngest(cl, BuiltinTaskID, l)
}

// HTTPModelJudgeReward is HTTPJudgedReward on the task with a model judge:
// a nats.go worker connected to natsURL (the server's embedded NATS) with
// key as its token answers every judge request on
// plaudit.judge.default.<JudgeName> with {"met": true} at once, and each
// POST waits (Prefer: wait=10) until its reward is scored: one pending
// reward written, one judge round trip, the judge's outcome and the final
// reward written, the waiter woken.
func HTTPModelJudgeReward(baseURL, natsURL, key string, l Loop) (res Result, err error) {
	worker, err := startJudgeWorker(natsURL, key, "plaudit.judge.default."+JudgeName)
	if err != nil {
		return Result{}, err
	}
	defer worker.Close()
	cl, err := newClient(baseURL, key, l.C)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	if err := cl.putTask(judgedTask); err != nil {
		return Result{}, err
	}
	return rewardIngest(cl, JudgedTaskID, l)
}

// putTask creates task (201), or finds it there already (200).
func (cl *client) putTask(task string) error {
	req, resp := cl.request("/v1/tasks", []byte(task)), new(fasthttp.Response)
	if err := cl.hc.Do(req, resp); err != nil {
		return fmt.Errorf("bench: POST /v1/tasks: %w", err)
	}
	if resp.StatusCode() == 200 {
		return nil
	}
	if err := checkStatus(resp, 201); err != nil {
		return fmt.Errorf("bench: POST /v1/tasks: %w", err)
	}
	return nil
}

// rewardScored is in the answer of a scored reward that met every
// criterion.
var rewardScored = [][]byte{[]byte(`"status":"scored"`), []byte(`"all_pass":1`)}

// rewardIngest has c workers post n rewards of taskID in total, numbered
// across workers so that every answer is new.
func rewardIngest(cl *client, taskID string, l Loop) (Result, error) {
	return l.Run(func(int) (Op, error) {
		// Built once per worker; each op rewrites the body in place, since
		// HostClient.Do keeps neither request nor body.
		req, resp := cl.request("/v1/rewards", nil), new(fasthttp.Response)
		req.Header.Set("Prefer", rewardWait)
		var body []byte
		return func() error {
			body = append(body[:0], `{"task":{"id":"`...)
			body = append(body, taskID...)
			body = append(body, `"},"answer":"`...)
			body = append(appendAnswer(body, answers.Add(1)), `"}`...)
			req.SetBodyRaw(body)
			if err := cl.hc.Do(req, resp); err != nil {
				return err
			}
			if err := checkStatus(resp, 201); err != nil {
				return err
			}
			for _, want := range rewardScored {
				if !bytes.Contains(resp.Body(), want) {
					return fmt.Errorf("bench: reward not scored with all_pass 1: %.300s", resp.Body())
				}
			}
			return nil
		}, nil
	})
}

// startJudgeWorker connects a judge worker to natsURL with key as its token
// and answers every request on subject with judgeVerdict, from the
// subscription's own goroutine (no goroutine per request).
func startJudgeWorker(natsURL, key, subject string) (*nats.Conn, error) {
	nc, err := nats.Connect(natsURL, nats.Name("bench-judge"), nats.Token(key))
	if err != nil {
		return nil, fmt.Errorf("bench: judge worker connect: %w", err)
	}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(judgeVerdict) }); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bench: judge worker subscribe: %w", err)
	}
	// The subscription must reach the server before the first judge
	// request, or that request finds no responder and backs off.
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bench: judge worker flush: %w", err)
	}
	return nc, nil
}

// NATSJudgeEcho is the floor of a model judge's round trip: the hop the
// server's dispatcher makes, and nothing else. It starts an embedded,
// authenticating nats-server set up as server.Start sets up its own
// (natsdoor.Embedded, Key accepted as a token of workspace default),
// connects to it as Plaudit does (Embedded.ConnectOptions) and as a judge
// worker does (the token), and has c requesters send n judge requests in
// total through Embedded.JudgeRequest, as the dispatcher sends them, each
// with a body of a judge request's size, answered {"met": true} at once by
// a bare subscriber.
func NATSJudgeEcho(l Loop) (res Result, err error) {
	e, err := natsdoor.NewEmbedded(func(token string) (natsdoor.Key, bool) {
		return natsdoor.Key{ID: "bench_key", Workspace: "default"}, token == Key
	})
	if err != nil {
		return Result{}, err
	}
	ns, err := e.Start(e.Options("127.0.0.1", natsserver.RANDOM_PORT))
	if err != nil {
		return Result{}, fmt.Errorf("bench: judge echo nats: %w", err)
	}
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()
	worker, err := startJudgeWorker(ns.ClientURL(), Key, "plaudit.judge.default."+JudgeName)
	if err != nil {
		return Result{}, err
	}
	defer worker.Close()
	plaudit, err := nats.Connect(ns.ClientURL(), append(e.ConnectOptions(), nats.Name("bench-plaudit"))...)
	if err != nil {
		return Result{}, fmt.Errorf("bench: judge echo connect: %w", err)
	}
	defer plaudit.Close()
	t, err := judge.Parse([]byte(judgedTask), "")
	if err != nil {
		return Result{}, fmt.Errorf("bench: judged task: %w", err)
	}
	// {"task", "criterion", "answer"}, as the dispatcher builds it.
	body := append([]byte(`{"task":`), t.AppendJSON(nil)...)
	body = append(append(body, `,"criterion":`...), t.Criteria[len(t.Criteria)-1].AppendJSON(nil)...)
	body = append(appendAnswer(append(body, `,"answer":"`...), 1), `"}`...)
	return l.Run(func(int) (Op, error) {
		return func() error {
			msg, err := e.JudgeRequest(plaudit, "default", JudgeName, body, natsTimeout)
			if err != nil {
				return err
			}
			if !bytes.Equal(msg.Data, judgeVerdict) {
				return fmt.Errorf("bench: judge echo answered %q", msg.Data)
			}
			return nil
		}, nil
	})
}
