package bench

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"
)

// reportRows is every row of BenchmarkReportIngest: seed-001 reports with
// and without an Idempotency-Key, next to the synced Pebble write they
// are to be read against.
var reportRows = []row{
	{"raw-pebble", []int{1, 64}, RawPebbleAppend},
	{"report", []int{1, 64}, withServer(reportWorkload(false))},
	{"report-idem", []int{1, 64}, withServer(reportWorkload(true))},
}

func reportWorkload(withKey bool) func(baseURL, key string, l Loop) (Result, error) {
	return func(baseURL, key string, l Loop) (Result, error) {
		return HTTPReportIngest(baseURL, key, l, withKey)
	}
}

// BenchmarkReportIngest measures POST /v1/jobs/{id}/rewards, each a new
// report synced before its 201, with (report-idem) and without (report) a
// fresh Idempotency-Key per report, whose record shares the report's
// batch. ns/op is as in BenchmarkDurableIngest; read the rows as ratios to
// raw-pebble at the same concurrency.
func BenchmarkReportIngest(b *testing.B) { benchRows(b, reportRows) }

// TestReportIngestSmoke runs the report workloads a few times and checks
// that every operation answered 201 and made a report of its own: the job
// lists exactly n reports, each on its own turn, and with keys a retry
// replays its report instead of writing again.
func TestReportIngestSmoke(t *testing.T) {
	const n = 24
	for _, withKey := range []bool{false, true} {
		for _, c := range []int{1, 4} {
			t.Run(fmt.Sprintf("key=%v/c=%d", withKey, c), func(t *testing.T) {
				s, err := StartServer(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				cl, err := newClient(httpDoor(s), Key, c)
				if err != nil {
					t.Fatal(err)
				}
				defer cl.hc.CloseIdleConnections()
				tg, err := cl.newTarget("smoke")
				if err != nil {
					t.Fatal(err)
				}
				res, err := reportIngest(cl, tg.run, Loop{C: c, N: n}, withKey)
				if err != nil {
					t.Fatal(err)
				}
				if res.Errors != 0 || res.Ops != n {
					t.Fatalf("%d ops succeeded and %d failed, want %d and 0 (first failure: %v)", res.Ops, res.Errors, n, res.FirstErr)
				}
				if res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.Max {
					t.Fatalf("percentiles out of order: %v", res)
				}
				reports := smokeReports(t, cl, tg.run)
				turns := map[string]bool{}
				for _, r := range reports {
					turns[r.TurnID] = true
				}
				if len(reports) != n || len(turns) != n {
					t.Fatalf("job lists %d reports on %d turns, want %d on %d", len(reports), len(turns), n, n)
				}
				if !withKey {
					return
				}
				// Every key was recorded: a retry of op 1 answers its 201
				// again, byte for byte as the job lists it, and writes nothing.
				req, resp := cl.request("/v1/jobs/"+tg.run+"/rewards", reportBody(nil, 1)), new(fasthttp.Response)
				req.Header.Set("Idempotency-Key", "k1")
				if err := cl.hc.Do(req, resp); err != nil || resp.StatusCode() != 201 {
					t.Fatalf("retry of k1: %v, HTTP %d %s", err, resp.StatusCode(), resp.Body())
				}
				after := smokeReports(t, cl, tg.run)
				if len(after) != n {
					t.Fatalf("job lists %d reports after a keyed retry, want %d", len(after), n)
				}
				for _, r := range after {
					if r.TurnID == "t1" && string(r.raw) != string(resp.Body()) {
						t.Fatalf("retry of k1 answered %s; the job lists %s", resp.Body(), r.raw)
					}
				}
			})
		}
	}
}

// smokeReport is one report of a job's listing, with its JSON as listed.
type smokeReport struct {
	TurnID string
	raw    []byte
}

func smokeReports(t *testing.T, cl *client, job string) []smokeReport {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(cl.base + "/v1/jobs/" + job + "/rewards")
	req.Header.Set("Authorization", cl.auth)
	if err := cl.hc.Do(req, resp); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("list reports: %v, HTTP %d %s", err, resp.StatusCode(), resp.Body())
	}
	var list struct{ Items []json.RawMessage }
	if err := json.Unmarshal(resp.Body(), &list); err != nil {
		t.Fatal(err)
	}
	out := make([]smokeReport, len(list.Items))
	for i, it := range list.Items {
		var r struct {
			TurnID string `json:"turn_id"`
		}
		if err := json.Unmarshal(it, &r); err != nil {
			t.Fatal(err)
		}
		out[i] = smokeReport{TurnID: r.TurnID, raw: it}
	}
	return out
}

// TestMedianRound picks the round of median throughput whole, so its
// percentiles stay those of one real run.
func TestMedianRound(t *testing.T) {
	rounds := []Result{{OpsPerSec: 300, P50: 3}, {OpsPerSec: 100, P50: 1}, {OpsPerSec: 200, P50: 2}}
	if got := medianRound(rounds); got.OpsPerSec != 200 || got.P50 != 2 {
		t.Fatalf("medianRound = %+v, want the 200 ops/s round", got)
	}
}
