package bench

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/engine"
)

// NATSSignalIngest is HTTPSignalIngest through the NATS door: one agent
// and run made over HTTP at baseURL, then c requesters send n signals to
// plaudit.v1.default.<agent>.signal in total at natsURL. A reply without an
// error header means the signal was synced.
func NATSSignalIngest(baseURL, natsURL, key string, l Loop) (Result, error) {
	cl, err := newClient(baseURL, key, 1)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	t, err := cl.newTarget("bench-nats-signal")
	if err != nil {
		return Result{}, err
	}
	return natsRequestsBody(natsURL, "plaudit.v1.default."+t.agent+".signal", key, signalBody(t.run), l)
}

// feedbackBody is the feedback of every feedback operation (seed 004).
var feedbackBody = []byte(`{"metadata":{},"data":{"score":0.5}}`)

// HTTPFeedback makes an agent with SelectVariations variations and one run,
// then has c workers post n seed-004 feedback records to that run in total
// (each appends a record, a signal and a posterior update, synced).
func HTTPFeedback(baseURL, key string, l Loop) (Result, error) {
	cl, err := newClient(baseURL, key, l.C)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	agent, err := cl.post("/api/v1/agents", []byte(`{"name":"bench-feedback"}`))
	if err != nil {
		return Result{}, err
	}
	for i := range SelectVariations {
		if _, err := cl.post("/api/v1/agents/"+agent+"/variations", fmt.Appendf(nil, `{"name":"v%d"}`, i+1)); err != nil {
			return Result{}, err
		}
	}
	run, err := cl.post("/api/v1/agents/"+agent+"/runs", []byte(`{}`))
	if err != nil {
		return Result{}, err
	}
	return l.Run(func(int) (Op, error) {
		return cl.postOp("/v1/workspaces/default/objectives/"+run+"/feedback", feedbackBody, 200), nil
	})
}

// HTTPReportWithKey is HTTPReportIngest with an Idempotency-Key of its own
// on every report.
func HTTPReportWithKey(baseURL, key string, l Loop) (Result, error) {
	return HTTPReportIngest(baseURL, key, l, true)
}

// readObjective is the objective of the reward-read agents: the mean of
// the signals posted, so that reading a reward visits every one of them.
var readObjective = []byte(`{"definition":{"terms":[{"signal":"bench.value","weight":1,"agg":"mean"}]}}`)

// HTTPRewardRead makes an agent whose objective averages bench.value, one
// run with signals signals of that kind (posted over 16 connections, not
// measured), then has c workers read the run's reward n times in total
// (GET .../runs/{run}/reward, 200).
func HTTPRewardRead(baseURL, key string, signals int, l Loop) (Result, error) {
	cl, err := newClient(baseURL, key, max(l.C, 16))
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	t, err := cl.newTarget(fmt.Sprintf("bench-read-%d", signals))
	if err != nil {
		return Result{}, err
	}
	if _, err := cl.send(fasthttp.MethodPut, "/api/v1/agents/"+t.agent+"/objective", readObjective, 200); err != nil {
		return Result{}, err
	}
	if err := setup(16, signals, func(int) (Op, error) {
		return cl.postOp("/api/v1/agents/"+t.agent+"/signals", signalBody(t.run), 201), nil
	}); err != nil {
		return Result{}, fmt.Errorf("bench: reward-read setup: %w", err)
	}
	return l.Run(func(int) (Op, error) {
		return cl.getOp("/api/v1/agents/"+t.agent+"/runs/"+t.run+"/reward", 200), nil
	})
}

// summaryObjective scores a run by its run.succeeded and matures it a
// second after it finished, so the summary has scored, matured runs.
var summaryObjective = []byte(`{"definition":{"horizon_s":1,"terms":[{"signal":"run.succeeded","weight":1}]}}`)

// HTTPVersionSummary makes an agent with runs runs of version "bench",
// each finished (every third one failed), then has c workers read the
// version's summary n times in total
// (GET /api/v1/agents/{agent}/versions/bench/rewards, 200). The agent keeps
// a few summaries until its next event, so unless again is set each read
// asks for another ?limit= (11 to 30, in turn) and is computed afresh; with
// again, every read is the same one.
func HTTPVersionSummary(baseURL, key string, runs int, again bool, l Loop) (Result, error) {
	cl, err := newClient(baseURL, key, max(l.C, 64))
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	agent, err := summarisedAgent(cl, runs, "")
	if err != nil {
		return Result{}, err
	}
	path := "/api/v1/agents/" + agent + "/versions/bench/rewards"
	if again {
		return l.Run(func(int) (Op, error) { return cl.getOp(path, 200), nil })
	}
	var turn atomic.Uint64
	return l.Run(func(int) (Op, error) {
		ops := freshSummaryOps(cl, path)
		return func() error { return ops[(turn.Add(1)-1)%summaryLimits]() }, nil
	})
}

// HTTPSelectSummarised makes an agent as HTTPVersionSummary does, then has c
// workers create runs of another version on it (POST .../runs, 201) while
// readers workers of their own (0 or 1) read fresh summaries of version
// "bench" in a loop, as a console polling it would. Only the selections
// are measured; the server's CPU counts the summaries too.
func HTTPSelectSummarised(baseURL, key string, runs, readers int, l Loop) (Result, error) {
	cl, err := newClient(baseURL, key, l.C+readers)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	agent, err := summarisedAgent(cl, runs, fmt.Sprintf("-r%d", readers))
	if err != nil {
		return Result{}, err
	}
	stop := make(chan struct{})
	failed := make(chan error, readers)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ops := freshSummaryOps(cl, "/api/v1/agents/"+agent+"/versions/bench/rewards")
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := ops[i%summaryLimits](); err != nil {
					failed <- fmt.Errorf("bench: summary beside selections: %w", err)
					return
				}
			}
		}()
	}
	res, err := l.Run(func(int) (Op, error) {
		return cl.postOp("/api/v1/agents/"+agent+"/runs", []byte(`{"version":"other"}`), 201), nil
	})
	close(stop)
	wg.Wait()
	select {
	case ferr := <-failed:
		return Result{}, ferr
	default:
	}
	return res, err
}

// summarisedAgent makes an agent with runs runs of version "bench", each
// finished (every third one failed), under summaryObjective.
func summarisedAgent(cl *client, runs int, suffix string) (string, error) {
	agent, err := cl.post("/api/v1/agents", fmt.Appendf(nil, `{"name":"bench-summary-%d%s"}`, runs, suffix))
	if err != nil {
		return "", err
	}
	if _, err := cl.send(fasthttp.MethodPut, "/api/v1/agents/"+agent+"/objective", summaryObjective, 200); err != nil {
		return "", err
	}
	var made atomic.Int64
	err = setup(64, runs, func(int) (Op, error) {
		return func() error {
			run, err := cl.post("/api/v1/agents/"+agent+"/runs", []byte(`{"version":"bench"}`))
			if err != nil {
				return err
			}
			finish := []byte(`{"succeeded":true}`)
			if made.Add(1)%3 == 0 {
				finish = []byte(`{"succeeded":false}`)
			}
			_, err = cl.do("/api/v1/agents/"+agent+"/runs/"+run+"/finish", finish, 200)
			return err
		}, nil
	})
	if err != nil {
		return "", fmt.Errorf("bench: summarised agent setup: %w", err)
	}
	return agent, nil
}

// freshSummaryOps reads the summary at path with each ?limit= of a turn.
func freshSummaryOps(cl *client, path string) []Op {
	ops := make([]Op, summaryLimits)
	for i := range ops {
		ops[i] = cl.getOp(fmt.Sprintf("%s?limit=%d", path, 11+i), 200)
	}
	return ops
}

// summaryLimits is how many ?limit= values fresh summary reads take in
// turn: more than the agent keeps, so none is read from its cache.
const summaryLimits = 20

// BetaDraws is the engine's share of one selection: one Beta draw
// (engine.SampleBeta) for each of SelectVariations posteriors, as weighted
// selection makes, in this process.
func BetaDraws(l Loop) (Result, error) {
	return l.Run(func(w int) (Op, error) {
		rnd := rand.New(rand.NewPCG(uint64(w), 1))
		var sink float64
		return func() error {
			for i := range SelectVariations {
				sink += engine.SampleBeta(rnd, 1.5+float64(i), 2.5)
			}
			if sink < 0 {
				return fmt.Errorf("bench: negative Beta draw")
			}
			return nil
		}, nil
	})
}

// setup runs n setup operations over c workers, closed loop, and fails on
// the first error: data a scenario needs before its clock starts.
func setup(c, n int, mk Workload) error {
	if n <= 0 {
		return nil
	}
	res, err := RunOps(min(c, n), n, mk)
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d failed, e.g. %w", res.Errors, n, res.FirstErr)
	}
	return nil
}

// getOp is an Op getting path and expecting status want.
func (cl *client) getOp(path string, want int) Op {
	req, resp := cl.request(path, nil), new(fasthttp.Response)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.Header.Del("Content-Type")
	return func() error {
		if err := cl.hc.Do(req, resp); err != nil {
			return err
		}
		return checkStatus(resp, want)
	}
}

// send sends one setup request with method, expects status want and
// returns the body.
func (cl *client) send(method, path string, body []byte, want int) ([]byte, error) {
	req, resp := cl.request(path, body), new(fasthttp.Response)
	req.Header.SetMethod(method)
	if err := cl.hc.Do(req, resp); err != nil {
		return nil, fmt.Errorf("bench: %s %s: %w", method, path, err)
	}
	if err := checkStatus(resp, want); err != nil {
		return nil, fmt.Errorf("bench: %s %s: %w", method, path, err)
	}
	return resp.Body(), nil
}
