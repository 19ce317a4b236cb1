package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// keyedAnswer is what a keyed write answered: its status, body and
// X-Request-Id, all of which a replay must repeat.
type keyedAnswer struct {
	status int
	body   []byte
	reqID  string
}

// keyedWrite is one POST carrying an Idempotency-Key.
type keyedWrite struct {
	path, body, key string
}

// postKeyed sends w and returns its answer.
func postKeyed(hc *http.Client, base string, w keyedWrite) (keyedAnswer, error) {
	req, err := http.NewRequest("POST", base+w.path, strings.NewReader(w.body))
	if err != nil {
		return keyedAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+killTestKey)
	req.Header.Set("Idempotency-Key", w.key)
	resp, err := hc.Do(req)
	if err != nil {
		return keyedAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return keyedAnswer{status: resp.StatusCode, body: b, reqID: resp.Header.Get("X-Request-Id")}, err
}

// sameKeyed reports how a replay differs from the first answer; "" when
// it does not.
func sameKeyed(first, again keyedAnswer) string {
	switch {
	case again.status != first.status:
		return fmt.Sprintf("status %d, first %d", again.status, first.status)
	case string(again.body) != string(first.body):
		return fmt.Sprintf("body %s, first %s", again.body, first.body)
	case again.reqID != first.reqID:
		return fmt.Sprintf("X-Request-Id %q, first %q", again.reqID, first.reqID)
	}
	return ""
}

// TestKill9KeepsIdempotencyRecords: Idempotency-Key records are written
// with the writes they answer, so after SIGKILL and a restart on the same
// data directory every acknowledged keyed write replays its first answer
// byte for byte and writes nothing again.
func TestKill9KeepsIdempotencyRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it; skipped with -short")
	}
	bin := buildPlaudit(t)
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()

	t.Run("a signal and a report", func(t *testing.T) {
		data := t.TempDir()
		srv := startPlaudit(t, bin, data, "keyed-first")
		api := &kclient{t: t, hc: hc, base: srv.base}
		agent := api.id(api.must(201, "POST", "/api/v1/agents", `{"name": "keyed"}`))
		run := api.id(api.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`))
		writes := []keyedWrite{
			{"/api/v1/agents/" + agent + "/signals", fmt.Sprintf(`{"kind": "keyed", "value": 1, "run_id": %q}`, run), "kill-signal"},
			{"/v1/jobs/" + run + "/rewards", `{"scorer": "keyed", "value": 0.5, "turn_id": "t1"}`, "kill-report"},
		}
		first := make([]keyedAnswer, len(writes))
		for i, w := range writes {
			a, err := postKeyed(hc, srv.base, w)
			if err != nil || a.status != 201 {
				t.Fatalf("%s: status %d, err %v: %s", w.key, a.status, err, a.body)
			}
			first[i] = a
		}
		signalsPath, reportsPath := "/api/v1/agents/"+agent+"/runs/"+run+"/signals", "/v1/jobs/"+run+"/rewards"
		before := string(api.mustRaw(200, "GET", signalsPath, "")) + string(api.mustRaw(200, "GET", reportsPath, ""))
		srv.kill(t)

		srv = startPlaudit(t, bin, data, "keyed-second")
		api = &kclient{t: t, hc: hc, base: srv.base}
		for i, w := range writes {
			again, err := postKeyed(hc, srv.base, w)
			if err != nil {
				t.Fatalf("replay %s: %v", w.key, err)
			}
			if diff := sameKeyed(first[i], again); diff != "" {
				t.Errorf("replay %s after SIGKILL: %s", w.key, diff)
			}
		}
		after := string(api.mustRaw(200, "GET", signalsPath, "")) + string(api.mustRaw(200, "GET", reportsPath, ""))
		if after != before {
			t.Errorf("signals and reports changed across SIGKILL and replays:\nbefore %s\nafter  %s", before, after)
		}
		var sigs, reps struct{ Items []json.RawMessage }
		_ = json.Unmarshal(api.mustRaw(200, "GET", signalsPath, ""), &sigs)
		_ = json.Unmarshal(api.mustRaw(200, "GET", reportsPath, ""), &reps)
		if len(sigs.Items) != 1 || len(reps.Items) != 1 {
			t.Errorf("%d signals and %d reports after replays, want 1 and 1", len(sigs.Items), len(reps.Items))
		}
	})

	t.Run("every acknowledged key under load", func(t *testing.T) {
		data := t.TempDir()
		srv := startPlaudit(t, bin, data, "load-first")
		api := &kclient{t: t, hc: hc, base: srv.base}
		agent := api.id(api.must(201, "POST", "/api/v1/agents", `{"name": "keyed-load"}`))
		var runs []string
		for range 4 {
			runs = append(runs, api.id(api.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`)))
		}
		type acked struct {
			w keyedWrite
			a keyedAnswer
		}
		var (
			mu   sync.Mutex
			acks []acked
			stop atomic.Bool
			wg   sync.WaitGroup
		)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					run := runs[(g+i)%len(runs)]
					w := keyedWrite{key: fmt.Sprintf("load-%02d-%06d", g, i)}
					if i%2 == 0 {
						w.path = "/api/v1/agents/" + agent + "/signals"
						w.body = fmt.Sprintf(`{"kind": "load", "value": %d, "run_id": %q}`, i, run)
					} else {
						w.path = "/v1/jobs/" + run + "/rewards"
						w.body = fmt.Sprintf(`{"scorer": "load", "value": 0.5, "turn_id": "w%02d-%06d"}`, g, i)
					}
					a, err := postKeyed(hc, srv.base, w)
					if err != nil {
						time.Sleep(time.Millisecond)
						continue // refused or cut off by the kill: not acknowledged
					}
					if a.status != 201 {
						continue // e.g. 503: not acknowledged
					}
					mu.Lock()
					acks = append(acks, acked{w, a})
					mu.Unlock()
				}
			}()
		}
		srv.killUnderLoad(t, &stop, &wg)
		if len(acks) == 0 {
			t.Fatal("no keyed write was acknowledged before the kill")
		}

		srv = startPlaudit(t, bin, data, "load-second")
		api = &kclient{t: t, hc: hc, base: srv.base}
		counts := func() (signals, reports int) {
			for _, r := range runs {
				var l struct{ Items []json.RawMessage }
				_ = json.Unmarshal(api.mustRaw(200, "GET", "/api/v1/agents/"+agent+"/runs/"+r+"/signals", ""), &l)
				signals += len(l.Items)
				_ = json.Unmarshal(api.mustRaw(200, "GET", "/v1/jobs/"+r+"/rewards", ""), &l)
				reports += len(l.Items)
			}
			return signals, reports
		}
		sigBefore, repBefore := counts()
		ackedSignals := 0
		for _, ak := range acks {
			if strings.HasSuffix(ak.w.path, "/signals") {
				ackedSignals++
			}
		}
		if sigBefore < ackedSignals || repBefore < len(acks)-ackedSignals {
			t.Errorf("%d signals and %d reports stored after restart, fewer than the %d and %d acknowledged",
				sigBefore, repBefore, ackedSignals, len(acks)-ackedSignals)
		}

		work := make(chan acked)
		var bad atomic.Int64
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ak := range work {
					again, err := postKeyed(hc, srv.base, ak.w)
					diff := ""
					if err != nil {
						diff = err.Error()
					} else {
						diff = sameKeyed(ak.a, again)
					}
					if diff != "" && bad.Add(1) <= 5 {
						t.Errorf("replay of acknowledged %s after SIGKILL: %s", ak.w.key, diff)
					}
				}
			}()
		}
		for _, ak := range acks {
			work <- ak
		}
		close(work)
		wg.Wait()
		if n := bad.Load(); n > 0 {
			t.Errorf("%d of %d acknowledged keys did not replay their first answer", n, len(acks))
		}
		if s, r := counts(); s != sigBefore || r != repBefore {
			t.Errorf("replays wrote: %d signals and %d reports before them, %d and %d after", sigBefore, repBefore, s, r)
		}
		t.Logf("%d keyed writes acknowledged before SIGKILL, all replayed", len(acks))
	})
}
