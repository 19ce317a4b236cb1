package bench

import (
	"strconv"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// HTTPReportIngest creates one agent and one run (the job) on the server at
// baseURL, then has c workers post n seed-001 reward reports to that job in
// total, each over its own keep-alive connection:
//
//	POST /v1/jobs/{run}/rewards {"kind":"external","scorer":"bench","value":0.5,"turn_id":"t<i>"}
//
// Every operation reports a turn of its own, so each is a new report, not a
// replacement. With withKey each also carries an Idempotency-Key of its own,
// so the cost of storing the idempotency record is measured, never a
// replay. Every report must answer 201; a 201 means it was synced to disk.
func HTTPReportIngest(baseURL, key string, l Loop, withKey bool) (Result, error) {
	cl, err := newClient(baseURL, key, l.C)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	t, err := cl.newTarget("bench-report")
	if err != nil {
		return Result{}, err
	}
	return reportIngest(cl, t.run, l, withKey)
}

// reportIngest is HTTPReportIngest on an existing job.
func reportIngest(cl *client, job string, l Loop, withKey bool) (Result, error) {
	var next atomic.Uint64 // numbers the operations across workers: turn t<i>, key k<i>
	path := "/v1/jobs/" + job + "/rewards"
	return l.Run(func(int) (Op, error) {
		// The request is built once per worker; each op rewrites its body
		// (and key) in place, since HostClient.Do keeps neither.
		req, resp := cl.request(path, nil), new(fasthttp.Response)
		var body, idemKey []byte
		return func() error {
			i := next.Add(1)
			body = reportBody(body[:0], i)
			req.SetBodyRaw(body)
			if withKey {
				idemKey = strconv.AppendUint(append(idemKey[:0], 'k'), i, 10)
				req.Header.SetBytesV("Idempotency-Key", idemKey)
			}
			if err := cl.hc.Do(req, resp); err != nil {
				return err
			}
			return checkStatus(resp, 201)
		}, nil
	})
}

// reportBody appends the report of operation i to b.
func reportBody(b []byte, i uint64) []byte {
	b = append(b, `{"kind":"external","scorer":"bench","value":0.5,"turn_id":"t`...)
	b = strconv.AppendUint(b, i, 10)
	return append(b, `"}`...)
}
