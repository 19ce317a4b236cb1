package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/server"
)

// row is one workload of a benchmark, run at each of its concurrencies,
// with the server (where there is one) in this process: for profiling a
// workload with `go test -bench -cpuprofile`. The published figures come
// from `plaudit bench`, which runs the server in a process of its own.
type row struct {
	name string
	cs   []int
	run  func(dir string, l Loop) (Result, error)
}

var fasthttpHello = row{"fasthttp-hello", []int{1, 64}, func(_ string, l Loop) (Result, error) { return FasthttpHello(l) }}

// durableIngest is every row of BenchmarkDurableIngest; the baselines
// (raw-pebble, fasthttp-hello) run at the same concurrencies so that the
// HTTP rows can be read as ratios against them.
var durableIngest = []row{
	{"raw-pebble", []int{1, 64}, RawPebbleAppend},
	{"http-signal", []int{1, 64}, withServer(HTTPSignalIngest)},
	{"http-signal-64agents", []int{64}, withServer(HTTPSignalIngestAgents)},
	{"nats-signal", []int{1, 64}, withServerNATS(NATSSignalIngest)},
	{"http-feedback", []int{1, 64}, withServer(HTTPFeedback)},
	fasthttpHello,
}

// selectRows is every row of BenchmarkSelect: each door's selection next
// to the bare round trip of its transport, to be read as ratios.
var selectRows = []row{
	{"nats-echo", []int{1, 64}, func(_ string, l Loop) (Result, error) { return NATSEcho(l) }},
	{"nats-select", []int{1, 64}, withSelectAgent(natsDoor, NATSSelect)},
	fasthttpHello,
	{"http-select", []int{1, 64}, withSelectAgent(httpDoor, HTTPSelect)},
	{"beta-draws", []int{1}, func(_ string, l Loop) (Result, error) { return BetaDraws(l) }},
}

// readRows is every row of BenchmarkReads.
var readRows = []row{
	{"reward-read-10", []int{1, 64}, withServer(readWorkload(10))},
	{"reward-read-1000", []int{1, 64}, withServer(readWorkload(1000))},
	{"version-summary-1000", []int{1, 64}, withServer(func(baseURL, key string, l Loop) (Result, error) {
		return HTTPVersionSummary(baseURL, key, 1000, false, l)
	})},
	{"version-summary-again-1000", []int{1, 64}, withServer(func(baseURL, key string, l Loop) (Result, error) {
		return HTTPVersionSummary(baseURL, key, 1000, true, l)
	})},
	{"select-summarised-1000", []int{1, 64}, withServer(func(baseURL, key string, l Loop) (Result, error) {
		return HTTPSelectSummarised(baseURL, key, 1000, 0, l)
	})},
	{"select-beside-summaries-1000", []int{1, 64}, withServer(func(baseURL, key string, l Loop) (Result, error) {
		return HTTPSelectSummarised(baseURL, key, 1000, 1, l)
	})},
}

func readWorkload(n int) func(baseURL, key string, l Loop) (Result, error) {
	return func(baseURL, key string, l Loop) (Result, error) { return HTTPRewardRead(baseURL, key, n, l) }
}

// judgedRows is every row of BenchmarkJudged: seed 003 rewards of built-in
// checks only next to fasthttp-hello and the engine's scoring in process,
// and one model judge next to them and the bare NATS hop of its request.
var judgedRows = []row{
	{"reward-inproc", []int{1}, func(_ string, l Loop) (Result, error) { return InProcessReward(l) }},
	fasthttpHello,
	{"http-reward", []int{1, 64}, withServer(HTTPJudgedReward)},
	{"nats-judge-echo", []int{1}, func(_ string, l Loop) (Result, error) { return NATSJudgeEcho(l) }},
	{"http-reward-judge", []int{1}, withServerNATS(HTTPModelJudgeReward)},
}

// withServer runs an HTTP workload against a fresh in-process server over
// dir.
func withServer(f func(baseURL, key string, l Loop) (Result, error)) func(string, Loop) (Result, error) {
	return func(dir string, l Loop) (Result, error) {
		return onServer(dir, func(s *server.Server) (Result, error) { return f(httpDoor(s), Key, l) })
	}
}

// withServerNATS is withServer for a workload that also connects to the
// server's embedded NATS.
func withServerNATS(f func(baseURL, natsURL, key string, l Loop) (Result, error)) func(string, Loop) (Result, error) {
	return func(dir string, l Loop) (Result, error) {
		return onServer(dir, func(s *server.Server) (Result, error) { return f(httpDoor(s), natsDoor(s), Key, l) })
	}
}

// withSelectAgent runs a selection workload through one door of a fresh
// server over dir, on an agent made by NewSelectAgent (setup not measured).
func withSelectAgent(door func(*server.Server) string, f func(url, key, agentID string, l Loop) (Result, error)) func(string, Loop) (Result, error) {
	return func(dir string, l Loop) (Result, error) {
		return onServer(dir, func(s *server.Server) (Result, error) {
			agent, err := NewSelectAgent(httpDoor(s), Key)
			if err != nil {
				return Result{}, err
			}
			return f(door(s), Key, agent, l)
		})
	}
}

func httpDoor(s *server.Server) string { return "http://" + s.HTTPAddr() }
func natsDoor(s *server.Server) string { return s.NATSURL() }

// onServer starts a server over dir, runs f on it and closes it.
func onServer(dir string, f func(*server.Server) (Result, error)) (res Result, err error) {
	s, err := StartServer(dir)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if cerr := s.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("bench: close server: %w", cerr)
		}
	}()
	return f(s)
}

// BenchmarkDurableIngest runs b.N operations of each workload; ns/op is the
// harness's wall time over the operations (setup excluded), so at c>1 it
// falls as concurrent operations overlap.
func BenchmarkDurableIngest(b *testing.B) { benchRows(b, durableIngest) }

// BenchmarkSelect measures run creation (variation selection over
// NewSelectAgent's 8 scored variations) through the NATS and HTTP doors,
// with the bare NATS echo and fasthttp hello as baselines. ns/op is as in
// BenchmarkDurableIngest.
func BenchmarkSelect(b *testing.B) { benchRows(b, selectRows) }

// BenchmarkJudged measures POST /v1/rewards (Prefer: wait=10, a new
// answer each time) on a task of three built-in criteria and on the same
// task plus one model judge answered at once by a nats.go worker, with
// fasthttp-hello, the in-process scoring and the bare judge hop as
// baselines. ns/op is as in BenchmarkDurableIngest.
func BenchmarkJudged(b *testing.B) { benchRows(b, judgedRows) }

// BenchmarkReads measures reward reads of runs of 10 and 1,000 signals
// and a version summary over 1,000 runs.
func BenchmarkReads(b *testing.B) { benchRows(b, readRows) }

func benchRows(b *testing.B, rows []row) {
	for _, wl := range rows {
		b.Run(wl.name, func(b *testing.B) {
			for _, c := range wl.cs {
				b.Run(fmt.Sprint("c=", c), func(b *testing.B) {
					res, err := wl.run(b.TempDir(), Loop{C: c, N: b.N})
					if err != nil {
						b.Fatal(err)
					}
					if res.Errors > 0 {
						b.Fatalf("%d of %d ops failed, e.g. %v", res.Errors, b.N, res.FirstErr)
					}
					b.ReportMetric(float64(res.Elapsed.Nanoseconds())/float64(res.Ops), "ns/op")
					b.ReportMetric(res.OpsPerSec, "ops/s")
					b.ReportMetric(float64(res.P50)/float64(time.Microsecond), "p50-µs")
					b.ReportMetric(float64(res.P99)/float64(time.Microsecond), "p99-µs")
					b.ReportMetric(float64(res.CPUPerOp())/float64(time.Microsecond), "cpu-µs/op")
				})
			}
		})
	}
}

// TestHarnessSmoke runs every workload a few times and checks that every
// operation was made and answered as expected (201 for a signal or a run,
// 200 for hello, a reply without an error header over NATS). It checks the
// harness, not the speed.
func TestHarnessSmoke(t *testing.T) {
	const n = 24
	seen := map[string]bool{}
	for _, wl := range slices.Concat(durableIngest, selectRows, readRows) {
		if seen[wl.name] {
			continue
		}
		seen[wl.name] = true
		for _, c := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/c=%d", wl.name, c), func(t *testing.T) {
				res, err := wl.run(t.TempDir(), Loop{C: c, N: n})
				if err != nil {
					t.Fatal(err)
				}
				if res.Errors != 0 || res.Ops != n {
					t.Fatalf("%d ops succeeded and %d failed, want %d and 0 (first failure: %v)",
						res.Ops, res.Errors, n, res.FirstErr)
				}
				if res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.Max {
					t.Fatalf("percentiles out of order: %v", res)
				}
			})
		}
	}
}

// TestJudgedSmoke runs the judged-reward workloads a few times: every
// reward must answer 201 scored with all_pass 1 (the model-judged one only
// once its judge has answered met), every in-process score be 1 and every
// judge echo answer {"met": true}.
func TestJudgedSmoke(t *testing.T) {
	const n = 24
	for _, wl := range judgedRows {
		if wl.name == fasthttpHello.name {
			continue // TestHarnessSmoke's
		}
		for _, c := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/c=%d", wl.name, c), func(t *testing.T) {
				res, err := wl.run(t.TempDir(), Loop{C: c, N: n})
				if err != nil {
					t.Fatal(err)
				}
				if res.Errors != 0 || res.Ops != n {
					t.Fatalf("%d ops succeeded and %d failed, want %d and 0 (first failure: %v)",
						res.Ops, res.Errors, n, res.FirstErr)
				}
				if res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.Max {
					t.Fatalf("percentiles out of order: %v", res)
				}
			})
		}
	}
}

func TestHTTPSignalIngestRejectsWrongKey(t *testing.T) {
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = HTTPSignalIngest("http://"+s.HTTPAddr(), "not-the-key", Loop{C: 1, N: 1})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 401 {
		t.Fatalf("err = %v, want a 401 StatusError", err)
	}
}

func TestNATSSelectCountsErrorReplies(t *testing.T) {
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := NATSSelect(s.NATSURL(), Key, "agt_missing", Loop{C: 2, N: 6})
	if err != nil {
		t.Fatal(err)
	}
	var ne *NATSError
	if res.Ops != 0 || res.Errors != 6 || !errors.As(res.FirstErr, &ne) || ne.Code != "404" {
		t.Fatalf("got %v, want 6 failures with NATS error 404", res)
	}
}

// TestNewSelectAgentScoresEveryVariation: the select agent has
// SelectVariations variations, each with selectFeedback feedback records
// and a posterior moved off the Beta(1, 1) prior.
func TestNewSelectAgentScoresEveryVariation(t *testing.T) {
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	agent, err := NewSelectAgent(httpDoor(s), Key)
	if err != nil {
		t.Fatal(err)
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(httpDoor(s) + "/api/v1/agents/" + agent + "/variations")
	req.Header.Set("Authorization", "Bearer "+Key)
	if err := fasthttp.Do(req, resp); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("list variations: %v, HTTP %d %s", err, resp.StatusCode(), resp.Body())
	}
	var list struct {
		Items []struct {
			Info struct {
				FeedbackCount int     `json:"feedback_count"`
				Alpha         float64 `json:"alpha"`
				Beta          float64 `json:"beta"`
			} `json:"info"`
		} `json:"items"`
	}
	if err := json.Unmarshal(resp.Body(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != SelectVariations {
		t.Fatalf("%d variations, want %d", len(list.Items), SelectVariations)
	}
	for i, v := range list.Items {
		if v.Info.FeedbackCount != selectFeedback || v.Info.Alpha+v.Info.Beta <= 2 {
			t.Errorf("variation %d: %+v, want %d feedback records and a moved posterior", i, v.Info, selectFeedback)
		}
	}
}

func TestRunOpsCountsFailures(t *testing.T) {
	boom := errors.New("boom")
	res, err := RunOps(3, 30, func(int) (Op, error) {
		i := 0
		return func() error {
			i++
			if i%2 == 0 {
				return boom
			}
			return nil
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops+res.Errors != 30 || res.Errors == 0 || !errors.Is(res.FirstErr, boom) {
		t.Fatalf("got %v, want 30 ops in all, some failed with boom", res)
	}
}

func TestRunForStopsAtDeadline(t *testing.T) {
	res, err := RunFor(2, 20*time.Millisecond, func(int) (Op, error) {
		return func() error { time.Sleep(time.Millisecond); return nil }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Errors != 0 {
		t.Fatalf("got %v, want some ops and no errors", res)
	}
}

// TestPercentilesComeFromEveryWorker: 100 operations taking 1..100 µs,
// spread over 4 workers, give the nearest-rank percentiles of all of them
// (within 0.1%: the histogram keeps three significant digits over a
// 1 ns unit).
func TestPercentilesComeFromEveryWorker(t *testing.T) {
	workers := make([]worker, 4)
	for i := range workers {
		workers[i].hist = hdrhistogram.New(histLowest, histHighest, histDigits)
	}
	for i := 1; i <= 100; i++ {
		workers[i%4].record(time.Duration(i)*time.Microsecond, nil)
	}
	r := summarise(workers, time.Second)
	near := func(got, want time.Duration) bool { return got >= want && got <= want+want/1000 }
	if r.Ops != 100 || !near(r.P50, 50*time.Microsecond) || !near(r.P99, 99*time.Microsecond) ||
		!near(r.P999, 100*time.Microsecond) || !near(r.Max, 100*time.Microsecond) {
		t.Fatalf("got %v, want 100 ops, p50 50µs, p99 99µs, p99.9 and max 100µs", r)
	}
}

// TestOpenLoopChargesTheWaitForAWorker: at 1,000 ops/s with one worker and
// operations of 5 ms, the nth operation is due at n ms but starts at 5n
// ms, so latencies, measured from the due time, grow far past the 5 ms an
// operation takes (a closed loop would report 5 ms throughout). The run
// ends at its duration: what fell due and was not sent is counted, not
// sent after it.
func TestOpenLoopChargesTheWaitForAWorker(t *testing.T) {
	began := time.Now()
	res, err := Loop{C: 1, Rate: 1000, D: 100 * time.Millisecond}.Run(func(int) (Op, error) {
		return func() error { time.Sleep(5 * time.Millisecond); return nil }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if res.Ops+res.Unsent != 100 || res.Unsent < 50 || res.Max < 50*time.Millisecond || res.LateP99 < 50*time.Millisecond {
		t.Fatalf("got %v, want 100 ops due, most of them unsent, a max latency well over 50ms and as late a send", res)
	}
	if took > time.Duration(res.Ops+1)*5*time.Millisecond+time.Second {
		t.Errorf("the run took %v for %d ops: it went on past its duration", took, res.Ops)
	}
}

// TestWarmUpIsNotMeasured: each worker's first operation, slow as a
// connection's set-up, runs before the clock starts.
func TestWarmUpIsNotMeasured(t *testing.T) {
	res, err := Loop{C: 4, N: 40, Warm: 1}.Run(func(int) (Op, error) {
		first := true
		return func() error {
			if first {
				first = false
				time.Sleep(200 * time.Millisecond)
			}
			return nil
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 40 || res.Max >= 200*time.Millisecond || res.Elapsed >= 200*time.Millisecond {
		t.Fatalf("got %v (elapsed %v), want 40 ops none of which waited for a first operation", res, res.Elapsed)
	}
}

// TestOptionsThatCannotMeanWhatTheySayAreRefused: before anything starts,
// negative counts and rates, a base URL that is not http://host:port, a
// profile of a running server without its --pprof, a missing
// redis-server, and a --run that matches nothing are errors naming the
// flag.
func TestOptionsThatCannotMeanWhatTheySayAreRefused(t *testing.T) {
	target := func(u, pprof string) *Target { return &Target{HTTP: u, Key: "k", Pprof: pprof} }
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"negative ops", Options{Ops: -5}, "--ops"},
		{"negative duration", Options{Duration: -time.Second}, "--duration"},
		{"negative rate", Options{Rate: -5}, "--rate"},
		{"negative recovery events", Options{RecoveryEvents: -1}, "--recovery-events"},
		{"a URL without a scheme", Options{Target: target("127.0.0.1:8080", "")}, "want http://host:port"},
		{"https", Options{Target: target("https://example.test:443", "")}, "want http://host:port"},
		{"a profile without --pprof", Options{Target: target("http://127.0.0.1:8080", ""), CPUProfile: "/tmp/p"}, "--pprof"},
		{"no such redis-server", Options{RedisServer: "/nonexistent/redis-server"}, "--redis-server"},
		{"a --run matching nothing", Options{Only: regexp.MustCompile("^no-such-row$"), RedisServer: "/bin/true"}, "matches no row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Bin = "/nonexistent/plaudit" // nothing may start
			_, err := Run(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
